/**
 * The bounds of one model step (docs/kernel.md, "Step bounds"): how much output the model may
 * stream in it (text, reasoning and tool-call input, in UTF-8 bytes) and how many of its tool calls
 * run. Processor.ts applies them as the model's events come in: past the output bound the stream is
 * stopped and the step ends `output-limit`; a call past the call bound is answered as refused.
 */
import { Schema } from "effect"
import { make, type NewEvent } from "../domain/Events.js"
import type { CallId } from "../domain/Ids.js"
import { ModelEvent } from "../model/Model.js"

/** The step bounds (config's `step`). */
export const StepLimits = Schema.Struct({
  /** the most bytes of output (text, reasoning, tool-call input) one step may stream */
  maxOutputBytes: Schema.Int.pipe(Schema.positive()),
  /** the most tool calls of one step that run; the calls after them are refused */
  maxToolCalls: Schema.Int.pipe(Schema.positive())
})
export type StepLimits = typeof StepLimits.Type

export const defaultStepLimits: StepLimits = { maxOutputBytes: 4 * 1024 * 1024, maxToolCalls: 64 }

/** The finish reason of a step stopped at its output bound, and the reason its turn ended. */
export const OUTPUT_LIMIT = "output-limit"

/** `n` bytes for people: `4 MiB`, `512 KiB`, `900 bytes`. */
export const formatBytes = (n: number): string =>
  n >= 1024 * 1024 && n % (1024 * 1024) === 0
    ? `${n / (1024 * 1024)} MiB`
    : n >= 1024 && n % 1024 === 0
      ? `${n / 1024} KiB`
      : `${n} bytes`

/** What a step stopped at its output bound says (the turn's outcome, the calls that did not run). */
export const outputLimitMessage = (limits: StepLimits): string =>
  `the model's output in one step passed its limit of ${formatBytes(limits.maxOutputBytes)} ` +
  "(step.maxOutputBytes), so the step was stopped and none of its tool calls ran"

/** The longest start of `text` that takes at most `room` bytes in UTF-8 (never half a surrogate pair). */
const fitting = (text: string, room: number): string => {
  let bytes = 0
  let i = 0
  while (i < text.length) {
    const code = text.charCodeAt(i)
    const pair = code >= 0xd800 && code <= 0xdbff && i + 1 < text.length
    const size = pair ? 4 : code < 0x80 ? 1 : code < 0x800 ? 2 : 3
    if (bytes + size > room) break
    bytes += size
    i += pair ? 2 : 1
  }
  return text.slice(0, i)
}

/**
 * Counts a step's output against `maxOutputBytes`. `take` is given each event in stream order and
 * returns what of it to handle: the event, a text or reasoning delta cut to the bytes left, or
 * undefined when nothing of it fits. Once an event did not fit whole, `reached` is true and the
 * step is over: nothing more is taken.
 */
export const makeOutputMeter = (maxOutputBytes: number) => {
  let used = 0
  let reached = false
  /** bytes of each call's input already counted from its deltas (its `ToolCall` counts the rest) */
  const streamed = new Map<string, number>()
  const count = (bytes: number): boolean => {
    if (used + bytes > maxOutputBytes) {
      reached = true
      return false
    }
    used += bytes
    return true
  }
  const take = (event: ModelEvent): ModelEvent | undefined => {
    if (reached) return undefined
    switch (event._tag) {
      case "TextDelta":
      case "ReasoningDelta": {
        if (count(Buffer.byteLength(event.delta))) return event
        const delta = fitting(event.delta, maxOutputBytes - used)
        used = maxOutputBytes
        if (delta === "") return undefined
        return event._tag === "TextDelta"
          ? ModelEvent.TextDelta({ id: event.id, delta })
          : ModelEvent.ReasoningDelta({ id: event.id, delta, metadata: event.metadata })
      }
      case "ToolInputDelta": {
        const bytes = Buffer.byteLength(event.delta)
        if (!count(bytes)) return undefined
        streamed.set(event.callId, (streamed.get(event.callId) ?? 0) + bytes)
        return event
      }
      case "ToolCall": {
        const rest = Buffer.byteLength(event.inputText) - (streamed.get(event.callId) ?? 0)
        streamed.delete(event.callId)
        return rest <= 0 || count(rest) ? event : undefined
      }
      default:
        return event
    }
  }
  return {
    take,
    get reached() {
      return reached
    }
  }
}

/** The record of a call past `maxToolCalls`: refused before it ran, with its input as sent (`sentInput`). */
export const refusedCall = (
  callId: CallId,
  sent: { readonly input?: unknown; readonly inputText?: string },
  limits: StepLimits
): NewEvent =>
  make("tool.failed", {
    callId,
    error:
      `Not run: this reply made more than ${limits.maxToolCalls} tool calls, the most one step may make ` +
      "(step.maxToolCalls). Make this call again in a later step if it is still needed.",
    ...sent
  })
