/**
 * `logbook stats`: figures across sessions — turns, steps, retries and their reasons, tool calls
 * with their failures, timeouts and most frequent errors, interrupts and crashes, tokens, cost,
 * time to first token and turn duration — for all sessions or those of one workspace, since a
 * time, of one model; as a summary or grouped by model, tool, prompt version or UTC day.
 *
 * All of it is SQL over the stats index the store keeps on every append (`store/Stats.ts`), read
 * from the database opened read-only: the cost does not grow with the payloads. How each figure is
 * defined: docs/stats.md.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as FileSystem from "@effect/platform/FileSystem"
import { Clock, Console, Effect, Either, Option } from "effect"
import { formatCost, formatCount, formatDuration, oneLine } from "../present/text.js"
import { layerClient } from "../store/Sqlite.js"
import { type Figures, type StatsGrouping, type StatsReport, stats } from "../store/Stats.js"
import { dbOption, resolveDbPath } from "./db.js"
import { CliError } from "./errors.js"
import { choiceOption, cwdOption, formatOption, resolveCwd } from "./options.js"
import { type Style, stdoutStyle, table } from "./render.js"
import { cut } from "./sessionsList.js"
import { parseSince } from "./since.js"

const statsFormat = formatOption(
  ["text", "json"],
  "text: a summary and tables for people (80 wide); json: the whole report as one JSON object."
)

const byOption = choiceOption("by", ["model", "tool", "prompt", "day"]).pipe(
  Options.optional,
  Options.withDescription(
    "Figures per model, per tool (with its most frequent errors), per prompt version, or per day (UTC)."
  )
)

const sinceOption = Options.text("since").pipe(
  Options.optional,
  Options.withPseudoName("when"),
  Options.withDescription(
    "Only what happened from then on: a date (2026-01-31, local midnight), a date and time (2026-01-31T09:00) " +
      "or a time ago (7d, 12h, 30m)."
  )
)

const modelOption = Options.text("model").pipe(
  Options.optional,
  Options.withAlias("m"),
  Options.withPseudoName("model"),
  Options.withDescription("Only the steps, turns, tool calls and retries of this model (e.g. openai/gpt-4.1).")
)

/** `1234` → `1,234`; past 100,000: `123k`, `1.2M`. */
const compactCount = (n: number): string =>
  n < 100_000 ? formatCount(n) : n < 10_000_000 ? `${Math.round(n / 1000)}k` : `${(n / 1_000_000).toFixed(1)}M`

const costOf = (f: Pick<Figures, "cost" | "costKnown">): string =>
  f.costKnown ? formatCost(f.cost) : f.cost > 0 ? `≥ ${formatCost(f.cost)}` : "unknown"

const percent = (rate: number | null): string => (rate === null ? "-" : `${(rate * 100).toFixed(1)}%`)

const ms = (value: number | null): string => (value === null ? "-" : formatDuration(value))

const plural = (n: number, word: string, many = `${word}s`) => `${formatCount(n)} ${n === 1 ? word : many}`

/** Right-aligns the cells of the numeric columns (all but those in `left`) to their widest. */
const alignRight = (
  header: ReadonlyArray<string>,
  rows: ReadonlyArray<ReadonlyArray<string>>,
  left: ReadonlySet<number>
): [Array<string>, Array<Array<string>>] => {
  const widths = header.map((h, i) => Math.max(Array.from(h).length, ...rows.map((r) => Array.from(r[i]!).length)))
  const pad = (cell: string, i: number) => (left.has(i) ? cell : cell.padStart(widths[i]!))
  return [header.map(pad), rows.map((r) => r.map(pad))]
}

/** A table whose last column is text cut to what is left of `width`; `text` columns are left-aligned. */
const fitTable = (
  header: ReadonlyArray<string>,
  rows: ReadonlyArray<ReadonlyArray<string>>,
  style: Style,
  width: number,
  text: ReadonlyArray<number> = []
): Array<string> => {
  const last = header.length - 1
  const [h, r] = alignRight(header, rows, new Set([...text, last]))
  const fixed = h.slice(0, last).reduce((sum, cell) => sum + Array.from(cell).length + 2, 0)
  const room = Math.max(Array.from(header[last]!).length, width - fixed)
  return table(
    h,
    r.map((row) => [...row.slice(0, last), cut(row[last]!, room)]),
    style
  )
}

const describeFilter = (report: StatsReport, file: string): string => {
  const parts = [report.filter.cwd === undefined ? "all workspaces" : `workspace ${report.filter.cwd}`]
  if (report.filter.model !== undefined) parts.push(`model ${report.filter.model}`)
  if (report.filter.since !== undefined) parts.push(`since ${new Date(report.filter.since).toISOString()}`)
  return `${file}: ${parts.join(", ")}`
}

/** ` (2 refused, 1 non-zero exit)`: what the failed calls include besides tool errors; empty when none. */
const failedDetail = (refused: number, exitNonZero: number): string => {
  const parts = [
    refused > 0 ? `${formatCount(refused)} refused` : "",
    exitNonZero > 0 ? `${formatCount(exitNonZero)} non-zero exit` : ""
  ].filter((p) => p !== "")
  return parts.length === 0 ? "" : ` (${parts.join(", ")})`
}

/** The summary block: one figure a line, its details after it. */
const summaryLines = (f: Figures): Array<string> => {
  const row = (name: string, value: string, detail = "") =>
    `  ${name.padEnd(12)}${value.padStart(9)}  ${detail}`.trimEnd()
  return [
    row("sessions", formatCount(f.sessions)),
    row(
      "turns",
      formatCount(f.turns),
      `${plural(f.interrupts, "interrupt")}, ${plural(f.crashes, "crash", "crashes")} recovered`
    ),
    row("steps", formatCount(f.steps), `${plural(f.abortedSteps, "attempt")} cut (retried or interrupted)`),
    row("retries", formatCount(f.retries), `${percent(f.retryRate)} of model requests`),
    row(
      "tool calls",
      formatCount(f.toolCalls),
      `${formatCount(f.toolErrors)} failed${failedDetail(f.toolRefused, f.toolExitNonZero)}, ${formatCount(f.toolTimeouts)} timed out, ${formatCount(f.toolInterrupted)} interrupted`
    ),
    row(
      "tokens in",
      formatCount(f.tokens.input),
      `cache read ${formatCount(f.tokens.cacheRead)}, write ${formatCount(f.tokens.cacheWrite)}`
    ),
    row("tokens out", formatCount(f.tokens.output), `reasoning ${formatCount(f.tokens.reasoning)}`),
    row("cost", costOf(f), f.costKnown ? "" : "some tokens had no price: a lower bound"),
    row("first token", ms(f.ttft.avgMs), `mean of ${plural(f.ttft.count, "request")}, max ${ms(f.ttft.maxMs)}`),
    row(
      "turn time",
      ms(f.turnDuration.avgMs),
      `mean of ${plural(f.turnDuration.count, "turn")}, max ${ms(f.turnDuration.maxMs)}`
    )
  ]
}

const GROUP_TITLE: Readonly<Record<Exclude<StatsGrouping, "tool">, string>> = {
  model: "MODEL",
  prompt: "PROMPT",
  day: "DAY (UTC)"
}

/** The report as text within `width` columns. */
export const renderStats = (report: StatsReport, file: string, style: Style, width = 80): Array<string> => {
  const out: Array<string> = [style.dim(cut(describeFilter(report, file), width))]
  const section = (title: string, lines: ReadonlyArray<string>) => {
    out.push("", style.bold(title), ...lines)
  }
  if (report.by === null) {
    out.push("", ...summaryLines(report.summary))
    if (report.retryReasons.length > 0) {
      section(
        "RETRIES",
        fitTable(
          ["COUNT", "STATUS", "REASON"],
          report.retryReasons.map((r) => [
            formatCount(r.count),
            r.status === null ? "-" : String(r.status),
            oneLine(r.reason)
          ]),
          style,
          width
        )
      )
    }
    if (report.interrupts.length > 0) {
      section(
        "INTERRUPTS",
        fitTable(
          ["COUNT", "REASON"],
          report.interrupts.map((r) => [formatCount(r.count), r.reason]),
          style,
          width
        )
      )
    }
  }
  if (report.by === null || report.by === "tool") {
    if (report.tools.length > 0) {
      section(
        "TOOLS",
        fitTable(
          ["CALLS", "OK", "FAILED", "REFUSED", "EXIT≠0", "TIMEOUT", "INTR", "MEAN", "MAX", "TOOL"],
          report.tools.map((t) => [
            formatCount(t.calls),
            formatCount(t.ok),
            formatCount(t.errors),
            formatCount(t.refused),
            formatCount(t.exitNonZero),
            formatCount(t.timeouts),
            formatCount(t.interrupted),
            ms(t.duration.avgMs),
            ms(t.duration.maxMs),
            t.tool
          ]),
          style,
          width
        )
      )
    }
    if (report.errors.length > 0) {
      section(
        "TOOL ERRORS",
        fitTable(
          ["COUNT", "TOOL", "ERROR"],
          report.errors.map((e) => [formatCount(e.count), e.tool, oneLine(e.error)]),
          style,
          width,
          [1]
        )
      )
    }
    if (report.by === "tool" && report.tools.length === 0) out.push("", "No tool calls.")
  }
  if (report.by !== null && report.by !== "tool") {
    if (report.groups.length === 0) {
      out.push("", "No steps or turns.")
    } else {
      out.push(
        "",
        ...fitTable(
          ["TURNS", "STEPS", "RETRY", "TOOLS", "FAIL", "INTR", "TOKENS", "COST", "TTFT", GROUP_TITLE[report.by]],
          report.groups.map(({ figures: f, key }) => [
            formatCount(f.turns),
            formatCount(f.steps),
            percent(f.retryRate),
            formatCount(f.toolCalls),
            formatCount(f.toolErrors + f.toolTimeouts),
            formatCount(f.interrupts),
            compactCount(f.tokens.input + f.tokens.output),
            costOf(f),
            ms(f.ttft.avgMs),
            key ?? "(none)"
          ]),
          style,
          width
        )
      )
    }
  }
  return out
}

export const statsCommand = Command.make(
  "stats",
  {
    db: dbOption,
    format: statsFormat,
    by: byOption,
    cwd: cwdOption("Only the sessions of this workspace directory."),
    since: sinceOption,
    model: modelOption
  },
  Effect.fn("cli.stats")(function* ({ by, cwd, db, format, model, since }) {
    const file = yield* resolveDbPath(db)
    const now = yield* Clock.currentTimeMillis
    let sinceMs: number | undefined
    if (Option.isSome(since)) {
      const parsed = parseSince(since.value, now)
      if (Either.isLeft(parsed)) return yield* CliError.usage(`--since: ${parsed.left}`)
      sinceMs = parsed.right
    }
    if (Option.isSome(model) && model.value.trim() === "") return yield* CliError.usage("--model must name a model")
    const dir = Option.isSome(cwd) ? yield* resolveCwd(cwd) : undefined
    // on a machine with no database yet (the default place, not one named by --db or LOGBOOK_DB,
    // where a missing file is more likely a typo): nothing to count, and nothing is created
    if (Option.isNone(Option.filter(db, (f) => f !== ""))) {
      const fs = yield* FileSystem.FileSystem
      if (!(yield* fs.exists(file).pipe(Effect.orElseSucceed(() => true)))) {
        return yield* Console.log(
          format === "json"
            ? JSON.stringify({ database: file, report: null })
            : `No sessions yet (no database at ${file}).`
        )
      }
    }
    const report = yield* stats({
      cwd: dir,
      since: sinceMs,
      model: Option.getOrUndefined(model),
      by: Option.getOrUndefined(by)
    }).pipe(Effect.provide(layerClient({ filename: file, readonly: true })))
    if (format === "json") {
      yield* Console.log(JSON.stringify({ database: file, report }, null, 2))
      return
    }
    const style = yield* stdoutStyle
    const width = process.stdout.isTTY === true && process.stdout.columns > 80 ? process.stdout.columns : 80
    yield* Console.log(renderStats(report, file, style, width).join("\n"))
  })
).pipe(
  Command.withDescription(
    "Figures across sessions: turns, steps, retries, tool failures and timeouts, interrupts, tokens, cost, " +
      "time to first token, turn duration; as a summary or --by model, tool, prompt or day."
  )
)
