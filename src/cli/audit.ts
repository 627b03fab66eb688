/**
 * `logbook audit [<session>]`: what the agent did to the workspace, from the log alone — every file
 * change as a unified diff, every command with its directory, exit code, duration and whole output,
 * every permission question and its answer, every retry, model error, interruption, crash recovery
 * and timeout, and the MCP tools the model was offered with their descriptions, in time order. One session, or several (`--cwd`, `--since`). `--format text`
 * (people), `markdown` (a review or a ticket), `json` (programs: one object, the diffs and outputs
 * included). `logbook blob <hash>` prints a blob an entry names.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Clock, Console, Effect, Either, Option } from "effect"
import { sanitize } from "../present/sanitize.js"
import { formatCount, formatDuration, formatLocalTime } from "../present/text.js"
import {
  type AuditEntry,
  type AuditKind,
  auditDiff,
  auditLog,
  auditOutput,
  auditSession,
  type CommandEntry,
  type FileEntry,
  hookRunText,
  type McpToolsEntry,
  type SessionAudit
} from "../store/Audit.js"
import { EventStore } from "../store/EventStore.js"
import { compileGlob } from "../tools/ignore.js"
import { dbOption, existingStore } from "./db.js"
import { CliError } from "./errors.js"
import { warnIfDamaged } from "./integrity.js"
import { cwdOption, formatOption, resolveCwd } from "./options.js"
import { type Style, stdoutStyle } from "./render.js"
import { resolveSession } from "./resolveSession.js"
import { parseSince } from "./since.js"

const sessionArgOptional = Args.text({ name: "session" }).pipe(
  Args.withDescription("The session id, a unique prefix of it, or `latest`; leave it out with --cwd or --since."),
  Args.optional
)

const auditFormat = formatOption(
  ["text", "markdown", "json"],
  "text: for people (a terminal); markdown: for a review or a ticket; json: one object with every entry, " +
    "the diffs and the commands' outputs included."
)

const filesOption = Options.boolean("files").pipe(
  Options.withDescription(
    "File changes (with their diffs), and what crash recovery found of changes a crash cut short."
  )
)
const commandsOption = Options.boolean("commands").pipe(Options.withDescription("Commands (with their whole output)."))
const pathOption = Options.text("path").pipe(
  Options.repeated,
  Options.withPseudoName("glob"),
  Options.withDescription(
    "Only the file changes of paths this glob matches (relative to the session's directory: src/**/*.ts); " +
      "repeat it for several. Implies --files unless another kind is asked for."
  )
)
const sinceOption = Options.text("since").pipe(
  Options.optional,
  Options.withPseudoName("when"),
  Options.withDescription(
    "Only what happened since then: a date (2026-11-30), a date and time (2026-11-30T14:00) or a time ago (12h, 7d)."
  )
)

// ---------------------------------------------------------------------------------------------
// the entries with what their blobs hold

type Shown =
  | { readonly entry: Exclude<AuditEntry, FileEntry | CommandEntry> }
  | { readonly entry: FileEntry; readonly diff: string | undefined; readonly notes: ReadonlyArray<string> }
  | { readonly entry: CommandEntry; readonly output: string | undefined }

const withBlobs = (entry: AuditEntry): Effect.Effect<Shown, never, EventStore> => {
  switch (entry.kind) {
    case "file":
      return auditDiff(entry).pipe(
        Effect.map(({ diff, notes }) => ({ entry, diff, notes })),
        Effect.orElseSucceed(() => ({ entry, diff: undefined, notes: ["its blobs could not be read"] }))
      )
    case "command":
      return auditOutput(entry).pipe(
        Effect.map((output) => ({ entry, output })),
        Effect.orElseSucceed(() => ({ entry, output: undefined }))
      )
    default:
      return Effect.succeed({ entry })
  }
}

// ---------------------------------------------------------------------------------------------
// one line per entry

const seconds = (ms: number) => formatDuration(ms)

/** How a command ended, in words: `exit 0 · 1.2s · 3,400 bytes`. */
const commandEndText = (c: CommandEntry): string => {
  const parts: Array<string> = []
  if (c.status === "not run") parts.push("not run")
  else if (c.status !== "finished" && c.status !== "failed") parts.push(c.status)
  if (c.exitCode !== undefined) parts.push(c.signal !== undefined ? `killed by ${c.signal}` : `exit ${c.exitCode}`)
  if (c.durationMs !== undefined) parts.push(seconds(c.durationMs))
  if (c.bytes !== undefined) parts.push(`${formatCount(c.bytes)} bytes of output`)
  if (c.stoppedBackground === true) parts.push("background processes stopped")
  return parts.join(" · ")
}

const opWord = { create: "created", update: "changed", delete: "deleted" } as const

/** The headline of an entry (no time, no colour). */
export const headline = (entry: AuditEntry): string => {
  switch (entry.kind) {
    case "file": {
      const how = [entry.tool, entry.recovered === true ? "recovered after a crash" : undefined].filter(
        (part) => part !== undefined
      )
      return `${opWord[entry.op]} ${entry.path}${how.length === 0 ? "" : ` (${how.join(", ")})`}`
    }
    case "recovery": {
      const call = `the ${entry.tool ?? "file tool"} call ${entry.callId}`
      const found =
        entry.outcome === "applied"
          ? `${entry.op === "create" ? "had created" : "had replaced"} ${entry.path}: its change was recorded from its intent`
          : entry.outcome === "not-applied"
            ? `had not ${entry.op === "create" ? "created" : "changed"} ${entry.path}: it is as it was before`
            : entry.outcome === "changed"
              ? `had announced a change of ${entry.path}, which something else then ${entry.hash === undefined ? "removed" : "changed"}`
              : `had announced a change of ${entry.path}, which could not be read: ${entry.error ?? "unknown error"}`
      return `crash recovered: ${call} ${found}${entry.tempRemoved === true ? "; its temporary file was removed" : ""}`
    }
    case "command":
      return `${entry.command.split("\n")[0]}${entry.command.includes("\n") ? " …" : ""}  [${commandEndText(entry)}]`
    case "permission": {
      const asked = `${entry.tool} asked for ${JSON.stringify(entry.pattern)}${entry.outside ? " (outside the workspace)" : ""}`
      if (entry.interrupted === true) return `${asked}: unanswered (interrupted)`
      if (entry.reply === undefined) return `${asked}: no answer in the log`
      const answer =
        entry.reply === "reject"
          ? `rejected${entry.by === undefined ? "" : ` by ${entry.by}`}`
          : `allowed ${entry.reply}`
      return `${asked}: ${answer}${entry.message === undefined ? "" : ` — ${JSON.stringify(entry.message)}`}`
    }
    case "retry":
      return `retry: attempt ${entry.attempt} in ${seconds(entry.delayMs)}: ${entry.message}`
    case "model-error":
      return `model error${entry.status === undefined ? "" : ` ${entry.status}`}: ${entry.message}`
    case "interrupt":
      return entry.reason === "crash"
        ? "crash recovered: the turn a dead process left open was closed (reason crash)"
        : `interrupted (${entry.reason})`
    case "timeout":
      return `${entry.tool ?? "a tool"} call ${entry.callId} timed out after ${seconds(entry.timeoutMs)}`
    case "mcp": {
      const input = JSON.stringify(entry.input) ?? ""
      const shown = input.length > 200 ? `${input.slice(0, 199)}…` : input
      const end = [
        entry.status,
        entry.bytes === undefined ? undefined : `${formatCount(entry.bytes)} bytes of result`,
        entry.error === undefined ? undefined : entry.error.split("\n")[0]
      ].filter((part) => part !== undefined)
      return `${entry.tool} ${shown}  [${end.join(" · ")}]`
    }
    case "skill": {
      const what = entry.file === undefined ? `skill ${entry.name} loaded` : `skill ${entry.name}: read ${entry.file}`
      const from =
        entry.source === undefined ? "" : ` (${entry.scope === undefined ? "" : `${entry.scope}, `}${entry.source})`
      const end =
        entry.status === "finished"
          ? ""
          : `  [${[entry.status, entry.error?.split("\n")[0]].filter((p) => p !== undefined).join(" · ")}]`
      return `${what}${from}${end}`
    }
    case "mcp-tools": {
      const count = (n: number, what: string) => (n === 0 ? undefined : `${n} ${what}`)
      const changes = [
        count(entry.tools.filter((tool) => tool.change === "new").length, "new"),
        count(entry.tools.filter((tool) => tool.change === "changed").length, "changed"),
        count(entry.removed.length, "no longer offered"),
        count(entry.tools.filter((tool) => tool.change === "same").length, "as before")
      ].filter((part) => part !== undefined)
      const servers = [...new Set(entry.tools.map((tool) => tool.server))].join(", ")
      return `MCP tools offered with prompt ${entry.promptVersion}${servers === "" ? "" : ` (from ${servers})`}: ${changes.join(", ")}`
    }
    case "hook":
      return hookRunText(entry)
    case "refused": {
      const input = entry.input !== undefined ? JSON.stringify(entry.input) : `(not JSON) ${entry.inputText ?? ""}`
      const shown = input.length > 200 ? `${input.slice(0, 199)}…` : input
      return `${entry.tool} ${shown}: not run — ${entry.error.split("\n")[0]}`
    }
  }
}

const mark: Readonly<Record<AuditKind, string>> = {
  file: "~",
  recovery: "↺",
  command: "$",
  mcp: "⚙",
  skill: "✦",
  "mcp-tools": "⚑",
  permission: "?",
  retry: "↻",
  "model-error": "✗",
  interrupt: "⊘",
  timeout: "⏱",
  refused: "⊗",
  hook: "↪"
}

/** The most of an MCP tool's description shown in text and markdown (the whole of it is in json). */
const MAX_DESCRIPTION_SHOWN = 600

/** The new and changed tools of an `mcp-tools` entry, one line each: name, and description on one line, cut. */
const offeredLines = (entry: McpToolsEntry): ReadonlyArray<string> =>
  entry.tools
    .filter((tool) => tool.change !== "same")
    .map((tool) => {
      const text = tool.description.replace(/\s+/g, " ").trim()
      const shown =
        text.length > MAX_DESCRIPTION_SHOWN
          ? `${text.slice(0, MAX_DESCRIPTION_SHOWN)}… (${formatCount(text.length - MAX_DESCRIPTION_SHOWN)} more characters: --format json has the whole text)`
          : text
      return `${tool.name}${tool.change === "changed" ? " (description changed)" : ""}: ${JSON.stringify(shown)}`
    })
    .concat(entry.removed.map((name) => `${name}: no longer offered`))

const sessionTitle = (audit: SessionAudit): string => {
  const s = audit.session
  return [
    `session ${s.id}`,
    s.title === null ? undefined : JSON.stringify(s.title),
    s.cwd ?? undefined,
    s.model ?? undefined,
    s.deleted ? "deleted" : undefined
  ]
    .filter((part) => part !== undefined)
    .join(" · ")
}

// ---------------------------------------------------------------------------------------------
// text

const colourDiff = (line: string, style: Style): string =>
  line.startsWith("+") && !line.startsWith("+++")
    ? style.green(line)
    : line.startsWith("-") && !line.startsWith("---")
      ? style.red(line)
      : line.startsWith("@@")
        ? style.cyan(line)
        : style.dim(line)

const textOf = (audits: ReadonlyArray<ReadonlyArray<Shown>>, sessions: ReadonlyArray<SessionAudit>, style: Style) => {
  const out: Array<string> = []
  sessions.forEach((audit, i) => {
    if (i > 0) out.push("")
    out.push(style.bold(sanitize(sessionTitle(audit))))
    const shown = audits[i]!
    if (shown.length === 0) out.push(style.dim("  nothing to show"))
    for (const item of shown) {
      const { entry } = item
      const head = sanitize(headline(entry))
      const tone = entry.kind === "model-error" || entry.kind === "timeout" ? style.red : (t: string) => t
      out.push(`${style.dim(formatLocalTime(entry.at))}  ${mark[entry.kind]} ${tone(head)}`)
      if (entry.kind === "mcp-tools") for (const line of offeredLines(entry)) out.push(`    ${sanitize(line)}`)
      if ("diff" in item) {
        for (const note of item.notes) out.push(`    ${style.yellow(note)}`)
        if (item.diff !== undefined)
          for (const line of sanitize(item.diff).split("\n")) out.push(`    ${colourDiff(line, style)}`)
      }
      if ("output" in item) {
        const c = item.entry
        if (c.command.includes("\n"))
          for (const line of sanitize(c.command).split("\n")) out.push(`    ${style.dim("$")} ${line}`)
        if (c.cwd !== null) out.push(`    ${style.dim(`in ${c.cwd}`)}`)
        if (c.error !== undefined && c.status !== "finished")
          out.push(`    ${style.yellow(sanitize(c.error).split("\n")[0]!)}`)
        if (item.output !== undefined && item.output !== "")
          for (const line of sanitize(item.output).replace(/\n$/, "").split("\n"))
            out.push(`    ${style.dim("│")} ${line}`)
        else if (c.outputBlob === undefined && c.bytes !== undefined && c.bytes > 0)
          out.push(`    ${style.yellow("the whole output was too large to keep; the model got its head and tail")}`)
      }
    }
  })
  return out.join("\n")
}

// ---------------------------------------------------------------------------------------------
// markdown

/** A fenced block whose fence is longer than any run of backticks in `text`. */
const fenced = (text: string, info: string): string => {
  const longest = Math.max(0, ...Array.from(text.matchAll(/`+/g), (m) => m[0].length))
  const fence = "`".repeat(Math.max(3, longest + 1))
  return `${fence}${info}\n${text.replace(/\n$/, "")}\n${fence}`
}

/** Markdown inline text: the characters that would make markup escaped. */
const inline = (text: string): string => text.replace(/([\\`*_[\]<>#|])/g, "\\$1").replace(/\n/g, " ")

const markdownOf = (audits: ReadonlyArray<ReadonlyArray<Shown>>, sessions: ReadonlyArray<SessionAudit>) => {
  const out: Array<string> = []
  sessions.forEach((audit, i) => {
    if (i > 0) out.push("")
    out.push(`## ${inline(sessionTitle(audit))}`, "")
    const shown = audits[i]!
    if (shown.length === 0) out.push("Nothing to show.")
    for (const item of shown) {
      const { entry } = item
      out.push(`- **${formatLocalTime(entry.at)}** ${mark[entry.kind]} ${inline(headline(entry))}`)
      if (entry.kind === "mcp-tools") for (const line of offeredLines(entry)) out.push(`  - ${inline(sanitize(line))}`)
      const block = (text: string, info: string) => {
        out.push(
          "",
          ...fenced(text, info)
            .split("\n")
            .map((line) => `  ${line}`),
          ""
        )
      }
      if ("diff" in item) {
        for (const note of item.notes) out.push(`  - ${inline(note)}`)
        if (item.diff !== undefined) block(item.diff, "diff")
      }
      if ("output" in item) {
        if (item.entry.command.includes("\n")) block(item.entry.command, "sh")
        if (item.entry.cwd !== null) out.push(`  - in \`${item.entry.cwd.replace(/`/g, "")}\``)
        if (item.output !== undefined && item.output !== "") block(item.output, "text")
      }
    }
  })
  return out.join("\n")
}

// ---------------------------------------------------------------------------------------------
// json

const jsonOf = (audits: ReadonlyArray<ReadonlyArray<Shown>>, sessions: ReadonlyArray<SessionAudit>) =>
  JSON.stringify(
    {
      sessions: sessions.map((audit, i) => ({
        id: audit.session.id,
        title: audit.session.title,
        cwd: audit.session.cwd,
        model: audit.session.model,
        deleted: audit.session.deleted,
        entries: audits[i]!.map((item) => ({
          ...item.entry,
          ...("diff" in item ? { diff: item.diff ?? null, notes: item.notes } : {}),
          ...("output" in item ? { output: item.output ?? null } : {})
        }))
      }))
    },
    null,
    2
  )

/** The audits as `format` (the diffs and the whole outputs read from their blobs). */
export const auditReport = (
  sessions: ReadonlyArray<SessionAudit>,
  format: "text" | "markdown" | "json",
  style: Style
): Effect.Effect<string, never, EventStore> =>
  Effect.map(
    Effect.forEach(sessions, (s) => Effect.forEach(s.entries, withBlobs)),
    (shown) =>
      format === "json"
        ? jsonOf(shown, sessions)
        : format === "markdown"
          ? markdownOf(shown, sessions)
          : textOf(shown, sessions, style)
  )

// ---------------------------------------------------------------------------------------------
// the command

export const audit = Command.make(
  "audit",
  {
    session: sessionArgOptional,
    cwd: cwdOption("The sessions of this directory (without a session id)."),
    since: sinceOption,
    files: filesOption,
    commands: commandsOption,
    path: pathOption,
    format: auditFormat,
    db: dbOption
  },
  Effect.fn("cli.audit")(
    function* (args) {
      const now = yield* Clock.currentTimeMillis
      const since = Option.isSome(args.since)
        ? yield* Either.match(parseSince(args.since.value, now), {
            onLeft: (why) => CliError.usage(`--since: ${why}`),
            onRight: (ms) => Effect.succeed(ms)
          })
        : undefined
      const globs: Array<RegExp> = []
      for (const pattern of args.path) {
        const compiled = yield* Effect.try({
          try: () => compileGlob(pattern),
          catch: (error) =>
            CliError.usage(`--path ${pattern}: ${error instanceof Error ? error.message : String(error)}`)
        })
        globs.push(compiled)
      }
      const kinds: Array<AuditKind> = []
      if (args.files) kinds.push("file", "recovery")
      if (args.commands) kinds.push("command")
      const filter = {
        kinds: kinds.length > 0 ? kinds : undefined,
        path: globs.length > 0 ? (path: string) => globs.some((glob) => glob.test(path)) : undefined,
        since
      }
      if (Option.isSome(args.session) && Option.isSome(args.cwd))
        return yield* CliError.usage("give a session or --cwd, not both: a session has one directory")
      let sessions: ReadonlyArray<SessionAudit>
      if (Option.isSome(args.session)) {
        const summary = yield* resolveSession(args.session.value)
        yield* warnIfDamaged(summary.id)
        sessions = [yield* auditSession(summary, filter)]
      } else if (Option.isSome(args.cwd) || since !== undefined) {
        const cwd = Option.isSome(args.cwd) ? yield* resolveCwd(args.cwd) : undefined
        sessions = yield* auditLog({ ...filter, cwd })
        if (sessions.length === 0) {
          const where = [
            cwd === undefined ? "" : ` in ${cwd}`,
            since === undefined ? "" : ` since ${formatLocalTime(since)}`
          ]
          yield* Console.error(`logbook: nothing to audit${where.join("")}`)
        }
      } else {
        return yield* CliError.usage(
          "name a session (an id, a prefix or latest), or --cwd <dir> / --since <when> for the sessions there or then"
        )
      }
      if (sessions.length === 0 && args.format === "text") return
      return yield* Console.log(yield* auditReport(sessions, args.format, yield* stdoutStyle))
    },
    (effect, { db }) => Effect.provide(effect, existingStore(db))
  )
).pipe(
  Command.withDescription(
    "What the agent did, from the log: every file change as a diff, every command with its exit code, duration " +
      "and whole output, every permission question and answer, every retry, interruption, crash recovery and timeout."
  )
)

const hashArg = Args.text({ name: "hash" }).pipe(
  Args.withDescription("The blob's SHA-256 (64 hex digits), as `audit` or `events` print it.")
)

export const blob = Command.make(
  "blob",
  { hash: hashArg, db: dbOption },
  Effect.fn("cli.blob")(
    function* ({ hash }) {
      const text = hash.trim().toLowerCase()
      if (!/^[0-9a-f]{64}$/.test(text))
        return yield* CliError.usage(`${JSON.stringify(hash)} is not a blob hash (64 hex digits of a SHA-256)`)
      const store = yield* EventStore
      const found = yield* store.getBlob(text)
      if (Option.isNone(found)) return yield* CliError.usage(`no blob ${text} in this database`)
      const bytes = found.value
      yield* Effect.async<void>((resume) => {
        process.stdout.write(bytes, () => resume(Effect.void))
      })
    },
    (effect, { db }) => Effect.provide(effect, existingStore(db))
  )
).pipe(
  Command.withDescription(
    "Print a blob of the log (a file's content before or after a change, a command's whole output, a prompt) " +
      "exactly as stored, to stdout."
  )
)
