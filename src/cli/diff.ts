/**
 * `logbook diff <a> <b>`: two sessions side by side — where they first diverge, the tool calls and
 * file changes that differ, and the differences in turns, steps, retries, tool calls, tokens, cost
 * and duration (`SessionDiff.diffSessions`).
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import { Console, Effect } from "effect"
import { sanitize } from "../present/sanitize.js"
import { formatCost, formatCount, formatDuration, padEnd, truncate } from "../present/text.js"
import { diffSessions, type SessionDiff, type SessionFigures, type TraceItem } from "../session/SessionDiff.js"
import type { SessionSummary } from "../store/EventStore.js"
import { dbOption, existingStore } from "./db.js"
import { formatOption } from "./options.js"
import { type Style, stdoutStyle } from "./render.js"
import { resolveSession } from "./resolveSession.js"

const sideArg = (name: string) =>
  Args.text({ name }).pipe(Args.withDescription("A session id, a unique prefix of it, or latest."))

const diffFormat = formatOption(
  ["text", "json"],
  "text: for people; json: one object {a, b, divergence, calls, files, figures}."
)

const itemText = (item: TraceItem | undefined): string => {
  if (item === undefined) return "(nothing: the session ends here)"
  switch (item.kind) {
    case "user":
      return `the user said ${JSON.stringify(truncate(item.text, 200))}`
    case "text":
      return `the model wrote ${JSON.stringify(truncate(item.text, 200))}`
    case "call":
      return `call ${item.tool} ${truncate(item.input, 200)}`
    case "result":
      return `${item.tool} ${item.ok ? "returned" : "failed"}: ${JSON.stringify(truncate(item.output, 200))}`
    case "file":
      return `${item.op} ${item.path}${item.afterHash === null ? "" : ` (content ${item.afterHash.slice(0, 12)})`}`
  }
}

const rows: ReadonlyArray<readonly [string, (f: SessionFigures) => number, (n: number) => string]> = [
  ["turns", (f) => f.turns, formatCount],
  ["steps", (f) => f.steps, formatCount],
  ["retries", (f) => f.retries, formatCount],
  ["tool calls", (f) => f.toolCalls, formatCount],
  ["tool failures", (f) => f.toolFailures, formatCount],
  ["interrupts", (f) => f.interrupts, formatCount],
  ["tokens in", (f) => f.input, formatCount],
  ["tokens out", (f) => f.output, formatCount],
  ["reasoning", (f) => f.reasoning, formatCount],
  ["cache read", (f) => f.cacheRead, formatCount],
  ["cost", (f) => f.cost, formatCost],
  ["duration", (f) => f.durationMs, formatDuration]
]

const signed = (n: number, format: (n: number) => string): string =>
  n === 0 ? "" : n > 0 ? `+${format(n)}` : `-${format(-n)}`

const sideText = (label: string, s: SessionSummary): string =>
  `${label}  ${s.id}${s.title === null ? "" : ` ${JSON.stringify(s.title)}`}${s.model === null ? "" : ` · ${s.model}`}`

const textOf = (diff: SessionDiff, a: SessionSummary, b: SessionSummary, style: Style): string => {
  const out = [sanitize(sideText("a", a)), sanitize(sideText("b", b)), ""]
  const d = diff.divergence
  if (d === undefined) out.push(style.green("the same: every message, call, result and file change, in the same order"))
  else {
    const where = [
      d.seqA === undefined ? undefined : `seq ${d.seqA} in a`,
      d.seqB === undefined ? undefined : `seq ${d.seqB} in b`
    ]
    out.push(style.bold(`first divergence at item ${d.index + 1} (${where.filter(Boolean).join(", ")}):`))
    out.push(`  a: ${sanitize(itemText(d.a))}`, `  b: ${sanitize(itemText(d.b))}`)
  }
  const list = (title: string, items: ReadonlyArray<string>) => {
    if (items.length === 0) return
    out.push("", style.bold(`${title} (${items.length}):`))
    for (const item of items.slice(0, 50)) out.push(`  ${sanitize(truncate(item, 200))}`)
    if (items.length > 50) out.push(style.dim(`  … ${items.length - 50} more (--format json has them all)`))
  }
  list("tool calls only in a", diff.calls.onlyA)
  list("tool calls only in b", diff.calls.onlyB)
  const hash = (h: string | null | undefined) =>
    h === undefined ? "not changed" : h === null ? "deleted" : h.slice(0, 12)
  list(
    "files that end different",
    diff.files.map((f) => `${f.path}  a: ${hash(f.a)}  b: ${hash(f.b)}`)
  )
  out.push("", style.dim(`${padEnd("", 14)}${padEnd("a", 14)}${padEnd("b", 14)}b − a`))
  for (const [name, get, format] of rows) {
    const x = get(diff.figures.a)
    const y = get(diff.figures.b)
    const cost = name === "cost"
    const known = (f: SessionFigures) => (cost && !f.costKnown ? "≥ " : "")
    out.push(
      `${padEnd(name, 14)}${padEnd(known(diff.figures.a) + format(x), 14)}${padEnd(known(diff.figures.b) + format(y), 14)}${signed(y - x, format)}`
    )
  }
  return out.join("\n")
}

export const diff = Command.make(
  "diff",
  { a: sideArg("a"), b: sideArg("b"), format: diffFormat, db: dbOption },
  Effect.fn("cli.diff")(
    function* ({ a, b, format }) {
      const left = yield* resolveSession(a)
      const right = yield* resolveSession(b)
      const result = yield* diffSessions(left.id, right.id)
      if (format === "json") return yield* Console.log(JSON.stringify(result, null, 2))
      return yield* Console.log(textOf(result, left, right, yield* stdoutStyle))
    },
    (effect, { db }) => Effect.provide(effect, existingStore(db))
  )
).pipe(
  Command.withDescription(
    "Two sessions side by side: where they first diverge, the tool calls and file changes that differ, and the " +
      "differences in steps, retries, tokens, cost and duration."
  )
)
