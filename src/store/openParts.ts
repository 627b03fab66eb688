/**
 * Ending what a run left open — the one home of it: a tool call still `pending` or `running` ends
 * `tool.failed {interrupted: true, reason}`, and a step that never finished ends `step.finished
 * {aborted: true}`. The kernel ends what an attempt left open (a stream cut, a steer, an interrupt:
 * `Processor`), and the crash sweep what a dead process left (`Recovery`); both compute it from the
 * projection, so running it twice ends nothing twice.
 */
import { type FileRead, make, type NewEvent } from "../domain/Events.js"
import type { MessageId } from "../domain/Ids.js"
import { emptyUsage, type ToolPart } from "../domain/Message.js"
import { openToolParts, type SessionState } from "./SessionState.js"

/** What a `tool.failed` that ends an open call says beyond its call, `interrupted` and `reason`. */
export interface OpenCallEnd {
  readonly error: string
  readonly timedOut?: boolean | undefined
  /** the input the model sent, for a call that never ran (no `tool.invoked` holds it) */
  readonly input?: unknown
  /** files the call read or wrote before it stopped (their stamps) */
  readonly reads?: ReadonlyArray<FileRead> | undefined
}

/** `tool.failed {interrupted: true, reason}` for the open tool part `part`, saying what `end` says. */
export const endOpenToolPart = (part: ToolPart, reason: string, end: OpenCallEnd): NewEvent =>
  make("tool.failed", {
    callId: part.callId,
    error: end.error,
    interrupted: true,
    ...(end.timedOut === true ? { timedOut: true } : {}),
    ...(end.input !== undefined ? { input: end.input } : {}),
    reason,
    ...(end.reads !== undefined && end.reads.length > 0 ? { reads: end.reads } : {})
  })

/**
 * `tool.failed {interrupted: true, reason}` for every open tool part `which` selects (default: all),
 * saying what `end` returns for it.
 */
export const endOpenToolParts = (
  state: SessionState,
  options: {
    readonly reason: string
    readonly which?: ((part: ToolPart) => boolean) | undefined
    readonly end: (part: ToolPart) => OpenCallEnd
  }
): Array<NewEvent> =>
  openToolParts(state)
    .filter((part) => options.which === undefined || options.which(part))
    .map((part) => endOpenToolPart(part, options.reason, options.end(part)))

/**
 * `step.finished {aborted: true}` for the step of assistant message `messageId` that never finished
 * (none when its last step finished, or it is not an assistant message); `extra` adds the prompt
 * version and digest of the request the step sent, when known.
 */
export const endOpenStep = (
  state: SessionState,
  messageId: MessageId,
  reason: string,
  extra: { readonly promptVersion?: string | undefined; readonly requestDigest?: string | undefined } = {}
): NewEvent | undefined => {
  const message = state.messages.find((m) => m.id === messageId)
  if (message?.role !== "assistant") return undefined
  const last = message.steps[message.steps.length - 1]
  if (last === undefined || last.endedAt !== undefined) return undefined
  return make("step.finished", {
    messageId,
    step: last.step,
    finishReason: reason,
    usage: emptyUsage,
    aborted: true,
    ...(extra.promptVersion === undefined ? {} : { promptVersion: extra.promptVersion }),
    ...(extra.requestDigest === undefined ? {} : { requestDigest: extra.requestDigest })
  })
}
