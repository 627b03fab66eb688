/**
 * `logbook sessions show <session>`: one session as a conversation, built from the projection — the
 * restored state (`Snapshots.restore`) up to `RESTORE_UP_TO` events, else folded and printed as its
 * messages settle (`printSession`).
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Console, Effect, Either, Option, Stream } from "effect"
import type { SessionId } from "../domain/Ids.js"
import type { AssistantMessage, ToolPart, UserMessage } from "../domain/Message.js"
import { exitText } from "../present/commandOutput.js"
import { sanitize } from "../present/sanitize.js"
import {
  compactJson,
  formatCount,
  formatDuration,
  formatLocalTime,
  formatSteps,
  formatUsageCost,
  truncateLines
} from "../present/text.js"
import { hookRunText } from "../store/Audit.js"
import { EventStore } from "../store/EventStore.js"
import * as Projection from "../store/Projection.js"
import * as Snapshots from "../store/Snapshots.js"
import { dbOption, existingStore } from "./db.js"
import { deletedAt, deletedText } from "./deleted.js"
import { CliError } from "./errors.js"
import { warnIfDamaged } from "./integrity.js"
import { formatOption, seqOption, sessionArg } from "./options.js"
import { type Style, stdoutStyle } from "./render.js"
import { resolveSession } from "./resolveSession.js"
import { describeInput } from "./runOutput.js"

const atOption = seqOption("at", "Show the session as it was after event <seq> (replay to that point).")

const showFormat = formatOption(
  ["text", "json"],
  "text: the conversation for people; json: the projected session state as one JSON object."
)

const fullOption = Options.boolean("full").pipe(
  Options.withDescription("Show tool inputs and outputs in full instead of cutting them.")
)

export interface ShowOptions {
  readonly full: boolean
}

const indent = (text: string, prefix: string): Array<string> =>
  text
    .replace(/\r\n/g, "\n")
    .replace(/\n+$/, "")
    .split("\n")
    .map((line) => `${prefix}${line}`.trimEnd())

const usageLine = (u: Projection.SessionState["totals"]): string => {
  const parts = [`in ${formatCount(u.input)}`, `out ${formatCount(u.output)}`]
  if (u.reasoning > 0) parts.push(`reasoning ${formatCount(u.reasoning)}`)
  if (u.cacheRead > 0 || u.cacheWrite > 0) {
    parts.push(`cache read ${formatCount(u.cacheRead)}`, `cache write ${formatCount(u.cacheWrite)}`)
  }
  parts.push(`cost ${formatUsageCost(u)}`)
  return parts.join(" · ")
}

const statusText = (
  state: Projection.SessionState,
  style: Style,
  deleted: Option.Option<number> = Option.none()
): string => {
  if (state.deleted) return style.yellow(deletedText(deleted))
  const status = state.status
  switch (status._tag) {
    case "idle":
      return "idle"
    case "busy":
      return style.yellow("busy")
    case "retry":
      return style.yellow(`retrying (attempt ${status.attempt}: ${status.message})`)
  }
}

/** `completed`, `failed (exit 1)`, `error (interrupted: user)`, `running` … with the duration when it is known. */
export const toolStateText = (part: ToolPart, style: Style): string => {
  const state = part.state
  switch (state._tag) {
    case "pending":
      return style.dim("pending")
    case "running":
      return `${style.yellow(state.timedOut ? "running (timed out, stopping)" : "running")} since ${formatLocalTime(state.startedAt)}`
    case "completed": {
      // a command that exited non-zero ran to its end, and failed
      const exit = exitText(state.metadata)
      const label = exit === undefined ? style.green("completed") : style.red(`failed (${exit})`)
      return `${label} ${formatDuration(state.endedAt - state.startedAt)}`
    }
    case "error": {
      const flags = [
        state.interrupted ? `interrupted${state.reason !== undefined ? `: ${state.reason}` : ""}` : "",
        state.timedOut ? "timed out" : ""
      ].filter((f) => f !== "")
      const label = style.red(flags.length > 0 ? `error (${flags.join(", ")})` : "error")
      return state.startedAt === undefined ? label : `${label} ${formatDuration(state.endedAt - state.startedAt)}`
    }
  }
}

const toolLines = (part: ToolPart, style: Style, options: ShowOptions): Array<string> => {
  const state = part.state
  // a skill's call names the skill (and the file of it read) beside the tool
  const skill = part.tool === "skill" && "input" in state ? ` ${sanitize(describeInput(part.tool, state.input))}` : ""
  const lines = [
    `  ${style.bold("▸")} ${style.bold(part.tool)}${skill} ${toolStateText(part, style)}  ${style.dim(part.callId)}`
  ]
  const field = (label: string, text: string, color: (s: string) => string = (s) => s) => {
    const body = options.full ? indent(text, "") : truncateLines(text, 8, 160)
    if (body.length === 0) body.push("")
    lines.push(`      ${style.dim(label.padEnd(7))} ${color(body[0]!)}`)
    for (const rest of body.slice(1)) lines.push(`              ${color(rest)}`.trimEnd())
  }
  const input = (value: unknown) =>
    options.full ? (JSON.stringify(value, null, 2) ?? String(value)) : compactJson(value, 160)
  switch (state._tag) {
    case "pending":
      if (state.inputText !== "") field("input", state.inputText)
      break
    case "running":
      field("input", input(state.input))
      if (state.progress !== undefined) field("output", state.progress)
      break
    case "completed":
      field("input", input(state.input))
      field("output", state.output)
      break
    case "error":
      field("input", input(state.input))
      field("error", state.error, style.red)
      break
  }
  for (const run of part.hooks ?? [])
    field("hook", hookRunText({ ...run, tool: part.tool }), run.outcome === "changed" ? style.dim : style.yellow)
  return lines
}

const userLines = (message: UserMessage, style: Style): Array<string> => {
  const notes = [message.mode === "prompt" ? "" : message.mode, message.delivered ? "" : "not delivered yet"]
    .filter((n) => n !== "")
    .join(", ")
  return [
    `${style.bold(style.blue("user"))}  ${style.dim(formatLocalTime(message.at))}${notes === "" ? "" : `  ${style.dim(`(${notes})`)}`}`,
    ...indent(message.text, "  ")
  ]
}

/**
 * The message's steps as `run` counts them (`formatSteps`): those that went through, and the attempts
 * cut; nothing for the usual single step.
 */
const stepsOf = (message: AssistantMessage): string => {
  const cut = message.steps.filter((step) => step.aborted).length
  const steps = message.steps.length - cut
  return steps === 1 && cut === 0 ? "" : formatSteps(steps, cut)
}

const switchLine = (change: Projection.ModelSwitch, style: Style): string =>
  `${style.bold(style.yellow("model"))}  ${style.dim(formatLocalTime(change.at))}  switched from ${change.from} to ${change.to}`

const assistantLines = (
  state: Projection.SessionState,
  message: AssistantMessage,
  style: Style,
  options: ShowOptions
): Array<string> => {
  const info = [
    formatLocalTime(message.startedAt),
    message.model ?? "",
    message.completedAt === undefined ? "not completed" : formatDuration(message.completedAt - message.startedAt),
    message.interrupted !== undefined ? `interrupted (${message.interrupted})` : (message.finishReason ?? ""),
    stepsOf(message),
    usageLine(message.usage)
  ].filter((s) => s !== "")
  const lines = [`${style.bold(style.magenta("assistant"))}  ${style.dim(info.join(" · "))}`]
  for (const part of Projection.resolveParts(state, message)) {
    switch (part.type) {
      case "text":
        lines.push(...indent(part.text, "  "))
        break
      case "reasoning":
        lines.push(...indent(part.text, "  ~ ").map((line) => style.dim(style.italic(line))))
        break
      case "tool":
        lines.push(...toolLines(part, style, options))
        break
    }
  }
  if (message.parts.length === 0) lines.push(style.dim("  (no output)"))
  return lines
}

export interface RenderOptions extends ShowOptions {
  readonly atSeq?: number | undefined
  readonly totalEvents?: number | undefined
  /** when the session was deleted (`sessions delete`), if it is */
  readonly deletedAt?: Option.Option<number> | undefined
}

/** The head of the conversation view: title, status, model, times, events, tokens, how the turn ended. */
const headerText = (state: Projection.SessionState, style: Style, options: RenderOptions): string => {
  const header = [
    `${style.bold(state.title ?? "(untitled)")}`,
    `  ${style.dim("id")}       ${state.sessionId}`,
    `  ${style.dim("status")}   ${statusText(state, style, options.deletedAt)}`,
    ...(state.cwd === null ? [] : [`  ${style.dim("cwd")}      ${state.cwd}`]),
    ...(state.model === null ? [] : [`  ${style.dim("model")}    ${state.model}`]),
    `  ${style.dim("created")}  ${formatLocalTime(state.createdAt)}`,
    `  ${style.dim("updated")}  ${formatLocalTime(state.updatedAt)}`,
    `  ${style.dim("events")}   ${
      options.atSeq === undefined
        ? state.lastSeq
        : `${state.lastSeq} of ${options.totalEvents ?? "?"} ${style.yellow(`(replayed to seq ${options.atSeq})`)}`
    }`,
    `  ${style.dim("tokens")}   ${usageLine(state.totals)}`
  ]
  if (state.turn !== null) {
    header.push(`  ${style.dim("turn")}     ${style.yellow(`open since ${formatLocalTime(state.turn.startedAt)}`)}`)
  } else if (state.lastTurn !== null) {
    const end = state.lastTurn
    header.push(
      `  ${style.dim("turn")}     ${end.interrupted ? style.yellow(`interrupted (${end.reason})`) : `finished (${end.reason})`} at ${formatLocalTime(end.at)}`
    )
  }
  if (state.queued.length > 0) header.push(`  ${style.dim("queued")}   ${state.queued.length} message(s)`)
  if (state.lastError !== null) {
    header.push(`  ${style.dim("error")}    ${style.red(state.lastError.message)}`)
  }
  if (state.compaction !== null) {
    const n = state.compaction.keepFrom
    header.push(
      `  ${style.dim("compacted")} the first ${n} message${n === 1 ? " is" : "s are"} sent as a summary (logbook events --type compaction.done)`
    )
  }
  return header.join("\n")
}

/**
 * The blocks of messages `from` up to `to`, each with the model switches just before it; with
 * `end`, the switches after the last message too.
 */
const messageBlocks = (
  state: Projection.SessionState,
  from: number,
  to: number,
  end: boolean,
  style: Style,
  options: ShowOptions
): Array<string> => {
  const blocks: Array<string> = []
  // a model switch goes before the first message sent after it
  const switchesBefore = (index: number) => {
    for (const change of state.modelSwitches) if (change.beforeMessage === index) blocks.push(switchLine(change, style))
  }
  for (let index = from; index < to; index++) {
    const message = state.messages[index]!
    switchesBefore(index)
    const lines = message.role === "user" ? userLines(message, style) : assistantLines(state, message, style, options)
    blocks.push(lines.join("\n"))
  }
  if (end) switchesBefore(state.messages.length)
  return blocks
}

/** The conversation view of a session state. */
export const renderSession = (state: Projection.SessionState, style: Style, options: RenderOptions): string => {
  const blocks = messageBlocks(state, 0, state.messages.length, true, style, options)
  if (blocks.length === 0) blocks.push(style.dim("(no messages yet)"))
  return [headerText(state, style, options), ...blocks].join("\n\n")
}

/**
 * Folds the session's events up to `atSeq` page by page and hands each run of newly settled
 * messages to `shown`, then empties them (`Folder.release`): what the fold holds is the messages not
 * settled yet and a skeleton of the others, never the session's whole content. The state at the
 * end is a reader's (the released messages are empty): its head, and the messages not handed yet.
 */
const foldShowing = (
  sessionId: SessionId,
  atSeq: number | undefined,
  shown: (state: Projection.SessionState, from: number, to: number) => Effect.Effect<void>
) =>
  Effect.gen(function* () {
    const store = yield* EventStore
    const f = Projection.folder(Projection.empty(sessionId))
    let handed = 0
    yield* store.read(sessionId, { to: atSeq }).pipe(
      Stream.runForEachChunk((chunk) =>
        Effect.gen(function* () {
          yield* f.pushAll(chunk)
          const state = yield* f.view()
          const upTo = Projection.settledUpTo(state, handed)
          if (upTo === handed) return
          yield* shown(state, handed, upTo)
          f.release(upTo)
          handed = upTo
        })
      )
    )
    return { state: yield* f.view(), handed }
  })

/**
 * The most events the text view restores as a whole (`Snapshots.restore`: the newest snapshot and
 * the events after it, fast); a longer session is folded and printed as it settles
 * (`printSession`), so it is never held. A damaged log is always restored: its view is the newest
 * intact snapshot and the events after it.
 */
export const RESTORE_UP_TO = 20_000

/**
 * Prints (each piece a line of `print`) the conversation view as `renderSession` makes it, without
 * holding the session: a first fold for the head (what the session is at its end), a second that
 * prints the messages as they settle.
 */
export const printSession = (
  sessionId: SessionId,
  style: Style,
  options: RenderOptions,
  print: (text: string) => Effect.Effect<void> = Console.log
) =>
  Effect.gen(function* () {
    const head = yield* foldShowing(sessionId, options.atSeq, () => Effect.void)
    yield* print(headerText(head.state, style, options))
    let printed = 0
    const printMessages = (state: Projection.SessionState, from: number, to: number, end = false) => {
      const blocks = messageBlocks(state, from, to, end, style, options)
      printed += blocks.length
      return blocks.length === 0 ? Effect.void : print(`\n${blocks.join("\n\n")}`)
    }
    const end = yield* foldShowing(sessionId, options.atSeq, printMessages)
    yield* printMessages(end.state, end.handed, end.state.messages.length, true)
    if (printed === 0) yield* print(`\n${style.dim("(no messages yet)")}`)
  })

export const sessionsShow = Command.make(
  "show",
  { session: sessionArg, db: dbOption, at: atOption, format: showFormat, full: fullOption },
  Effect.fn("cli.sessions.show")(
    function* ({ at, format, full, session }) {
      const summary = yield* resolveSession(session)
      // a damaged log: said on stderr; the view is the newest intact snapshot and the events after it
      const damaged = (yield* warnIfDamaged(summary.id)).length > 0
      if (Option.isSome(at) && (at.value < 1 || at.value > summary.lastSeq)) {
        return yield* CliError.usage(`--at ${at.value} is outside the session's events (1 to ${summary.lastSeq})`)
      }
      const atSeq = Option.getOrUndefined(at)
      const events = atSeq ?? summary.lastSeq
      if (format === "text") {
        const style = yield* stdoutStyle
        const deleted = summary.deleted ? yield* deletedAt(summary.id) : Option.none()
        const options = { full, atSeq, totalEvents: summary.lastSeq, deletedAt: deleted }
        if (!damaged && events > RESTORE_UP_TO) return yield* printSession(summary.id, style, options)
        const state = yield* Snapshots.restore(summary.id, atSeq === undefined ? {} : { atSeq })
        return yield* Console.log(renderSession(state, style, options))
      }
      const state = yield* Snapshots.restore(summary.id, atSeq === undefined ? {} : { atSeq })
      const encoded = Projection.encodeState(state)
      if (Either.isLeft(encoded)) {
        return yield* CliError.failed(`cannot encode the state of session ${summary.id}: ${encoded.left.message}`)
      }
      yield* Console.log(JSON.stringify(encoded.right, null, 2))
    },
    (effect, { db }) => Effect.provide(effect, existingStore(db))
  )
).pipe(
  Command.withDescription(
    "Show one session as a conversation: user and assistant messages, reasoning, tool calls with " +
      "their state, duration, input and output, and token and cost totals."
  )
)
