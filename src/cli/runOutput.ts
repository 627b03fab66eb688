/**
 * What `logbook run` prints while a turn runs, from the committed events (see docs/run.md).
 *
 * - `text`: the answer as it streams; one line per tool call when it starts (`⋯ bash npm test`)
 *   and when it ends (`✓ bash npm test  1.2s`, `✗ … interrupted`); a retry wait as
 *   `retry 2/8 in 4s: 429 rate limited` (a live countdown on a terminal); a cut response is marked.
 * - `json`: one JSON line per committed event (the envelope), then a final `done` line.
 *
 * `TextRenderer.render` is a pure state machine over envelopes: it returns the text to write.
 */
import type { Envelope } from "../domain/Events.js"
import type { Usage } from "../domain/Message.js"
import { formatMs } from "../model/Retry.js"
import type { TurnOutcome } from "../session/Sessions.js"
import { compactJson, formatCount, formatDuration, formatUsageCost, oneLine, type Style, truncate } from "./render.js"

/** A command or a path as a call's line shows it: on one line, cut at 80 characters. */
const describeSubject = (subject: string): string => truncate(oneLine(subject), 80)

/** A short description of a tool call's input: the command, the path, or compact JSON. */
export const describeInput = (tool: string, input: unknown): string => {
  if (typeof input === "object" && input !== null) {
    const record = input as Record<string, unknown>
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

/**
 * `text` cut to fit one terminal row of `columns` (ending with `…`), for a line that is redrawn in
 * place (the retry countdown): a line that wraps cannot be cleared with `\r`. As it is when the
 * width is not known.
 */
export const fitWidth = (text: string, columns: number | undefined): string => {
  if (columns === undefined || columns < 10) return text
  const chars = Array.from(text)
  return chars.length < columns ? text : `${chars.slice(0, columns - 2).join("")}…`
}

export const usageSummary = (usage: Usage, steps: number, elapsedMs: number): string => {
  const parts = [`tokens in ${formatCount(usage.input)}`, `out ${formatCount(usage.output)}`]
  if (usage.cacheRead > 0) parts.push(`cached ${formatCount(usage.cacheRead)}`)
  parts.push(`cost ${formatUsageCost(usage)}`, `${steps} step${steps === 1 ? "" : "s"}`, formatDuration(elapsedMs))
  return parts.join(" · ")
}

export interface TextRenderer {
  /** the text to write for this event ("" for none) */
  readonly render: (event: Envelope) => string
  /** a newline when the output does not end with one */
  readonly endLine: () => string
}

export const makeTextRenderer = (
  style: Style,
  options: {
    readonly maxAttempts: number
    /** the label of a call this renderer did not see start (one a crashed run left) */
    readonly labelOf?: ((callId: string) => string | undefined) | undefined
  }
): TextRenderer => {
  let atLineStart = true
  let printedText = false
  const calls = new Map<string, { readonly tool: string; readonly label: string; readonly startedAt: number }>()
  /** the label of a call asked about (a denied call never gets `tool.invoked`) */
  const asked = new Map<string, string>()
  /** permissionId -> callId of the asks; the calls whose ask was rejected */
  const askedCalls = new Map<string, string>()
  const rejected = new Set<string>()
  const line = (text: string): string => {
    const prefix = atLineStart ? "" : "\n"
    atLineStart = true
    return `${prefix}${text}\n`
  }
  const render = (event: Envelope): string => {
    switch (event.type) {
      case "text.delta": {
        const delta = event.payload.delta
        if (delta.length === 0) return ""
        printedText = true
        atLineStart = delta.endsWith("\n")
        return delta
      }
      case "step.started":
        printedText = false
        return ""
      case "step.finished":
        if (event.payload.aborted === true && printedText) {
          printedText = false
          return line(style.dim("(the response was cut off)"))
        }
        return ""
      case "permission.asked": {
        const p = event.payload
        if (p.callId !== undefined) {
          asked.set(p.callId, p.pattern === "" ? p.tool : `${p.tool} ${describeSubject(p.pattern)}`)
          askedCalls.set(p.permissionId, p.callId)
        }
        return ""
      }
      case "permission.replied": {
        const callId = askedCalls.get(event.payload.permissionId)
        if (callId !== undefined && event.payload.reply === "reject" && event.payload.interrupted !== true) {
          rejected.add(callId)
        }
        return ""
      }
      case "tool.invoked": {
        const label = `${event.payload.tool} ${describeInput(event.payload.tool, event.payload.input)}`
        calls.set(event.payload.callId, { tool: event.payload.tool, label, startedAt: event.at })
        return line(style.dim(`⋯ ${label}`))
      }
      case "tool.timeout": {
        const call = calls.get(event.payload.callId)
        return line(
          style.yellow(
            `⏱ ${call?.label ?? event.payload.callId} timed out after ${formatMs(event.payload.timeoutMs)}; stopping it`
          )
        )
      }
      case "tool.finished": {
        const call = calls.get(event.payload.callId)
        const took = call === undefined ? "" : `  ${style.dim(formatDuration(event.at - call.startedAt))}`
        return line(`${style.green("✓")} ${call?.label ?? event.payload.callId}${took}`)
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
        return line(`${style.red("✗")} ${label}${took}  ${what}`)
      }
      case "model.retry": {
        const p = event.payload
        return line(style.yellow(retryLine(p.attempt, options.maxAttempts, p.delayMs, p.message)))
      }
      // model.error: the same sentence ends the run on stderr (`logbook: …`)
      default:
        return ""
    }
  }
  return { render, endLine: () => (atLineStart ? "" : line("").slice(0, -1)) }
}

/** The final line of `--format json`. */
export const doneLine = (options: {
  readonly sessionId: string
  readonly outcome: TurnOutcome | undefined
  readonly exitCode: number
  readonly elapsedMs: number
}): string => {
  const o = options.outcome
  return JSON.stringify({
    type: "done",
    sessionId: options.sessionId,
    reason: o?.reason ?? "interrupted",
    ...(o?.finishReason !== undefined ? { finishReason: o.finishReason } : {}),
    ...(o?.message !== undefined ? { message: o.message } : {}),
    steps: o?.steps ?? 0,
    usage: o?.usage ?? { input: 0, output: 0, reasoning: 0, cacheRead: 0, cacheWrite: 0, cost: 0 },
    durationMs: options.elapsedMs,
    exitCode: options.exitCode
  })
}
