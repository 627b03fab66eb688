/**
 * What `logbook run` prints while a turn runs, from the committed events (see docs/run.md).
 *
 * - `text`: the model's text as it streams; one line per tool call when it starts (`⋯ bash npm test`)
 *   and when it ends (`✓ bash npm test  1.2s`, `✗ … interrupted`; a command that exited non-zero:
 *   `✗ bash npm test  1.2s  exit 1` and the last lines of its output); a retry wait as
 *   `retry 2/8 in 4s: 429 rate limited`; a cut response is marked; the answer (`makeAnswer`).
 * - `json`: one JSON line per committed event (the envelope), then a final `done` line.
 *
 * `TextRenderer.render` is a pure state machine over envelopes: it returns `Piece`s — the model's
 * text, status lines, and what goes on for a while (a running call, a retry wait) — and the run's
 * writer (`runWriter.ts`) decides where each goes: the text to stdout or stderr, status lines to
 * stderr, and what goes on as a row redrawn in place on a terminal or as one plain line elsewhere.
 */
import type { Envelope } from "../domain/Events.js"
import type { Usage } from "../domain/Message.js"
import { formatMs } from "../model/Retry.js"
import { exitText, outputTail } from "../present/commandOutput.js"
import { sanitize } from "../present/sanitize.js"
import {
  compactJson,
  formatCount,
  formatDuration,
  formatSteps,
  formatUsageCost,
  oneLine,
  truncate
} from "../present/text.js"
import type { TurnOutcome } from "../session/Sessions.js"
import { hookRunText } from "../store/Audit.js"
import { type LiveRow, lastLine } from "./liveRegion.js"
import type { Style } from "./render.js"

export { fitWidth } from "./liveRegion.js"

/** A command or a path as a call's line shows it: on one line, cut at 80 characters. */
const describeSubject = (subject: string): string => truncate(oneLine(subject), 80)

/** A short description of a tool call's input: the command, the path, the skill, or compact JSON. */
export const describeInput = (tool: string, input: unknown): string => {
  if (typeof input === "object" && input !== null) {
    const record = input as Record<string, unknown>
    // a skill by its name (and the file of it read)
    if (tool === "skill" && typeof record.name === "string")
      return describeSubject(typeof record.file === "string" ? `${record.name} ${record.file}` : record.name)
    const key = tool === "bash" ? "command" : "path" in record ? "path" : undefined
    if (key !== undefined && typeof record[key] === "string") return describeSubject(record[key] as string)
  }
  return compactJson(input, 80)
}

/** `retry 2/8 in 4s: 429 rate limited`; whole seconds (rounded up) from 1 s on, as it is for a countdown. */
export const retryLine = (attempt: number, maxAttempts: number, waitMs: number, message: string): string => {
  const wait = Math.max(0, waitMs)
  const shown = wait < 1000 ? formatMs(wait) : formatMs(Math.ceil(wait / 1000) * 1000)
  return `retry ${attempt}/${maxAttempts} in ${shown}: ${message}`
}

/** How long a call has run, as its live row shows it: whole seconds (`0s`, `12s`), then `2m05s`. */
export const elapsed = (ms: number): string =>
  ms < 60_000 ? `${Math.max(0, Math.floor(ms / 1000))}s` : formatDuration(Math.floor(ms / 1000) * 1000)

/** The live row of a running call: `⋯ bash npm test  12s  the last line of its output`. */
export const runningRow = (label: string, elapsedMs: number, output: string): string => {
  const last = lastLine(output)
  return `⋯ ${label}  ${elapsed(elapsedMs)}${last === "" ? "" : `  ${last}`}`
}

/** The usage line: tokens, cost, the steps (and the attempts cut, `formatSteps`) and the wall time. */
export const usageSummary = (usage: Usage, steps: number, elapsedMs: number, abortedSteps = 0): string => {
  const parts = [`tokens in ${formatCount(usage.input)}`, `out ${formatCount(usage.output)}`]
  if (usage.cacheRead > 0) parts.push(`cached ${formatCount(usage.cacheRead)}`)
  parts.push(`cost ${formatUsageCost(usage)}`, formatSteps(steps, abortedSteps), formatDuration(elapsedMs))
  return parts.join(" · ")
}

/** What the renderer makes of an event; the writer decides where each piece goes. */
export type Piece =
  /** the model's text, as it streams */
  | { readonly _tag: "Text"; readonly text: string }
  /** a new model step begins: its text starts on a line of its own */
  | { readonly _tag: "Break" }
  /** a status line (styled, without its newline) */
  | { readonly _tag: "Line"; readonly text: string }
  /**
   * something that goes on until its `End`: on a terminal a row redrawn in place, elsewhere `plain`
   * once (nothing when undefined)
   */
  | { readonly _tag: "Live"; readonly key: string; readonly row: LiveRow; readonly plain: string | undefined }
  /** what the live row `key` shows changed (a call's output) */
  | { readonly _tag: "Touch"; readonly key: string }
  /** the live row `key` is over */
  | { readonly _tag: "End"; readonly key: string }

export interface TextRenderer {
  /** the pieces for this event (none for most) */
  readonly render: (event: Envelope) => ReadonlyArray<Piece>
}

/** The lines of a failed command's output shown under its line. */
const TAIL_LINES = 3

/** The key of the retry wait's live row. */
export const RETRY_KEY = "retry"

const text = (value: string): Piece => ({ _tag: "Text", text: value })
const line = (value: string): Piece => ({ _tag: "Line", text: value })

export const makeTextRenderer = (
  style: Style,
  options: {
    readonly maxAttempts: number
    /** the label of a call this renderer did not see start (one a crashed run left) */
    readonly labelOf?: ((callId: string) => string | undefined) | undefined
  }
): TextRenderer => {
  let printedText = false
  let retrying = false
  const calls = new Map<
    string,
    { readonly tool: string; readonly label: string; readonly startedAt: number; output: string }
  >()
  /** the label of a call asked about (a denied call never gets `tool.invoked`) */
  const asked = new Map<string, string>()
  /** permissionId -> callId of the asks; the calls whose ask was rejected */
  const askedCalls = new Map<string, string>()
  const rejected = new Set<string>()
  const render = (event: Envelope): Array<Piece> => {
    switch (event.type) {
      case "text.delta": {
        const delta = event.payload.delta
        if (delta.length === 0) return []
        printedText = true
        return [text(delta)]
      }
      case "step.started":
        printedText = false
        return [{ _tag: "Break" }]
      case "step.finished":
        if (event.payload.aborted === true && printedText) {
          printedText = false
          return [line(style.dim("(the response was cut off)"))]
        }
        return []
      case "permission.asked": {
        const p = event.payload
        if (p.callId !== undefined) {
          asked.set(p.callId, p.pattern === "" ? p.tool : `${p.tool} ${describeSubject(p.pattern)}`)
          askedCalls.set(p.permissionId, p.callId)
        }
        return []
      }
      case "permission.replied": {
        const callId = askedCalls.get(event.payload.permissionId)
        if (callId !== undefined && event.payload.reply === "reject" && event.payload.interrupted !== true) {
          rejected.add(callId)
        }
        return []
      }
      case "tool.invoked": {
        const label = `${event.payload.tool} ${describeInput(event.payload.tool, event.payload.input)}`
        const call = { tool: event.payload.tool, label, startedAt: event.at, output: "" }
        calls.set(event.payload.callId, call)
        const row: LiveRow = { text: (now) => runningRow(label, now - call.startedAt, call.output), style: style.dim }
        return [{ _tag: "Live", key: event.payload.callId, row, plain: style.dim(`⋯ ${label}`) }]
      }
      case "tool.progress": {
        const call = calls.get(event.payload.callId)
        if (call === undefined) return []
        call.output = event.payload.output
        return [{ _tag: "Touch", key: event.payload.callId }]
      }
      case "hook.ran": {
        const p = event.payload
        const tool = p.tool ?? (p.callId === undefined ? undefined : calls.get(p.callId)?.label)
        const text = sanitize(hookRunText({ ...p, tool, from: undefined }))
        return [line(p.outcome === "changed" ? style.dim(`↪ ${text}`) : style.yellow(`↪ ${text}`))]
      }
      case "tool.timeout": {
        const call = calls.get(event.payload.callId)
        return [
          line(
            style.yellow(
              `⏱ ${call?.label ?? event.payload.callId} timed out after ${formatMs(event.payload.timeoutMs)}; stopping it`
            )
          )
        ]
      }
      case "tool.finished": {
        const p = event.payload
        const call = calls.get(p.callId)
        const took = call === undefined ? "" : `  ${style.dim(formatDuration(event.at - call.startedAt))}`
        const label = call?.label ?? p.callId
        // a command that exited non-zero failed: its exit and the last lines it printed
        const exit = exitText(p.metadata)
        if (exit === undefined) return [{ _tag: "End", key: p.callId }, line(`${style.green("✓")} ${label}${took}`)]
        const tail = outputTail(sanitize(p.output), TAIL_LINES).lines
        return [
          { _tag: "End", key: p.callId },
          line(`${style.red("✗")} ${label}${took}  ${exit}`),
          ...tail.map((text) => line(style.dim(`  │ ${truncate(text, 160)}`)))
        ]
      }
      case "tool.failed": {
        const p = event.payload
        const call = calls.get(p.callId)
        // a call that never started (invalid input, unknown tool) has no invoked line
        const label = call?.label ?? asked.get(p.callId) ?? options.labelOf?.(p.callId) ?? p.callId
        const took = call === undefined ? "" : `  ${style.dim(formatDuration(event.at - call.startedAt))}`
        const what =
          p.interrupted === true
            ? `interrupted${p.reason !== undefined ? ` (${p.reason})` : ""}`
            : p.timedOut === true
              ? "timed out"
              : rejected.has(p.callId)
                ? "rejected (the model is told)"
                : truncate(oneLine(p.error), 120)
        return [{ _tag: "End", key: p.callId }, line(`${style.red("✗")} ${label}${took}  ${what}`)]
      }
      case "model.retry": {
        const p = event.payload
        retrying = true
        const row: LiveRow = {
          text: (now) => retryLine(p.attempt, options.maxAttempts, p.nextAt - now, p.message),
          style: style.yellow
        }
        return [
          {
            _tag: "Live",
            key: RETRY_KEY,
            row,
            plain: style.yellow(retryLine(p.attempt, options.maxAttempts, p.delayMs, p.message))
          }
        ]
      }
      case "model.switched":
        return [line(style.yellow(`model ${event.payload.from} → ${event.payload.to}`))]
      // model.error: the same sentence ends the run on stderr (`logbook: …`)
      default:
        return []
    }
  }
  return {
    render: (event) => {
      // the wait is over with the next event (the `session.status retry` committed with it aside)
      const waited =
        retrying &&
        event.type !== "model.retry" &&
        !(event.type === "session.status" && event.payload.status._tag === "retry")
      if (waited) retrying = false
      const pieces = render(event)
      return waited ? [{ _tag: "End", key: RETRY_KEY }, ...pieces] : pieces
    }
  }
}

/**
 * The answer of a turn: the text of its last model step (as far as it came), which `logbook run`
 * writes to stdout when stdout is not a terminal and the done line carries. Earlier steps' text is
 * narration ("Let me look at the test first.").
 */
export const makeAnswer = () => {
  let current = ""
  return {
    see: (event: Envelope): void => {
      if (event.type === "step.started") current = ""
      else if (event.type === "text.delta") current += event.payload.delta
    },
    text: (): string => current
  }
}

/**
 * The final line of `--format json`: how the turn ended (`reason`, the model's `finishReason`, the
 * error's `message`), the `text` of its last step (the answer when `reason` is `stop`), its `steps`
 * and `usage` (the log's shape), the `cost` in US dollars with `costKnown` (false: some tokens had
 * no price, and `cost` is only what the priced ones cost), the wall time and the exit code.
 */
export const doneLine = (options: {
  readonly sessionId: string
  readonly outcome: TurnOutcome | undefined
  /** the text of the turn's last step (`makeAnswer`) */
  readonly text: string
  readonly exitCode: number
  readonly elapsedMs: number
}): string => {
  const o = options.outcome
  const usage = o?.usage ?? { input: 0, output: 0, reasoning: 0, cacheRead: 0, cacheWrite: 0, cost: 0 }
  return JSON.stringify({
    type: "done",
    sessionId: options.sessionId,
    reason: o?.reason ?? "interrupted",
    ...(o?.finishReason !== undefined ? { finishReason: o.finishReason } : {}),
    ...(o?.message !== undefined ? { message: o.message } : {}),
    text: options.text,
    steps: o?.steps ?? 0,
    usage,
    cost: usage.cost,
    costKnown: usage.costKnown !== false,
    durationMs: options.elapsedMs,
    exitCode: options.exitCode
  })
}
