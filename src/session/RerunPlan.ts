/**
 * What a re-run needs from the log of the session it re-runs (docs/rerun.md): the model
 * responses in the order they were requested — each step's deltas (with their chunking), its tool
 * calls and how it ended; each compaction summary; each failed request with the retry decision that
 * followed it — and the points where something from outside acted on the session (a user message,
 * a withdrawal, an interrupt, a manual compaction, a crash), each at its place in the log.
 *
 * `inputsBefore` of a recorded model event counts the input points that come before its event in the
 * log: the re-run's model does not send it before the re-run has performed them, so a message
 * steered or queued while the model streamed lands between the same deltas as it did.
 */
import type { Envelope, EnvelopeOf } from "../domain/Events.js"
import type { MessageId } from "../domain/Ids.js"
import type { UserMode } from "../domain/Message.js"
import { ModelError, ModelEvent } from "../model/Model.js"
import { CRASH_REASON } from "../store/Recovery.js"
import { STEERED, STREAM_FAILED } from "./Processor.js"

/** What the retry policy decided after a failed request: wait and try again, or give up. */
export type RecordedDecision =
  | { readonly _tag: "retry"; readonly attempt: number; readonly delayMs: number; readonly message: string }
  | { readonly _tag: "gaveUp"; readonly message: string; readonly retryable: boolean }

export interface RecordedEvent {
  readonly event: ModelEvent
  /** the input points (`RerunPlan.inputs`) the re-run performs before this event is sent */
  readonly inputsBefore: number
}

/** How a recorded request ended. */
export type RecordedEnd =
  | { readonly _tag: "finish" }
  /** the request failed; the error rebuilt from what the log says of it, and what the policy decided */
  | { readonly _tag: "fail"; readonly error: ModelError; readonly decision: RecordedDecision }
  /** the stream was stopped from outside (a steer, an interrupt, a crash): it never ends by itself */
  | { readonly _tag: "hang" }

/** One model request of the session, as the log recorded its response. */
export interface RecordedRequest {
  /** `step`: a step's request; `summary`: a compaction's summary request; `failed`: a summary attempt that failed */
  readonly kind: "step" | "summary" | "failed"
  /** 1-based, counting every model request of the session */
  readonly request: number
  /** the index in the log of its `step.started` (a summary: of its `compaction.done` or `model.retry`) */
  readonly index: number
  readonly seq: number
  /** the prompt version its step recorded */
  readonly promptVersion?: string | undefined
  readonly events: ReadonlyArray<RecordedEvent>
  readonly end: RecordedEnd
}

/** Something from outside that acted on the session, at `index` in the log. */
export type InputPoint =
  | {
      readonly _tag: "send"
      readonly index: number
      readonly text: string
      readonly mode: UserMode
      readonly messageId: MessageId
    }
  | { readonly _tag: "withdraw"; readonly index: number; readonly messageId: MessageId }
  | { readonly _tag: "interrupt"; readonly index: number; readonly reason: string }
  | { readonly _tag: "compact"; readonly index: number }
  /** the process died here; what follows was written by the next process that opened the session */
  | { readonly _tag: "crash"; readonly index: number }
  /** a re-run cannot go past this point: `why` */
  | { readonly _tag: "unsupported"; readonly index: number; readonly why: string }

export interface RerunPlan {
  readonly envelopes: ReadonlyArray<Envelope>
  readonly cwd: string | undefined
  readonly title: string | undefined
  readonly model: string | undefined
  readonly requests: ReadonlyArray<RecordedRequest>
  readonly inputs: ReadonlyArray<InputPoint>
}

/** The part key of a delta: what follows `<messageId>:<step>:` in its part id. */
const partKey = (partId: string): string => {
  const second = partId.indexOf(":", partId.indexOf(":") + 1)
  return second < 0 ? partId : partId.slice(second + 1)
}

/** The events an interrupt (or a crash sweep) writes, walking back from its `turn.interrupted`. */
const interruptionStart = (envelopes: ReadonlyArray<Envelope>, at: number, reason: string): number => {
  const failedCalls = new Set<string>()
  let start = at
  for (let i = at - 1; i >= 0; i--) {
    const env = envelopes[i]!
    const p = env.payload as Record<string, unknown>
    const part =
      (env.type === "tool.failed" && p.interrupted === true) ||
      (env.type === "step.finished" && p.aborted === true && p.finishReason === reason) ||
      (env.type === "action.state" && p.state === "failed") ||
      (env.type === "permission.replied" && p.interrupted === true) ||
      (env.type === "assistant.completed" && p.finishReason === reason) ||
      ((env.type === "file.changed" || env.type === "file.recovered" || env.type === "workspace.snapshot") &&
        typeof p.callId === "string" &&
        failedCalls.has(p.callId))
    if (!part) break
    if (env.type === "tool.failed") failedCalls.add(String(p.callId))
    start = i
  }
  return start
}

/** The error a failed request is replayed with: what `model.retry` / `model.error` kept of it. */
const recordedError = (status: number | undefined, message: string, providerMessage?: string): ModelError =>
  new ModelError({
    reason: status === undefined ? "stream-cut" : "http",
    message,
    ...(status !== undefined ? { status, headers: {} } : {}),
    ...(providerMessage !== undefined ? { providerMessage, body: providerMessage } : {})
  })

/** The decision after the failed request that ended at `index`: the next `model.retry` or `model.error`. */
const decisionAfter = (
  envelopes: ReadonlyArray<Envelope>,
  index: number
): { readonly decision: RecordedDecision; readonly error: ModelError } | undefined => {
  for (let i = index + 1; i < envelopes.length; i++) {
    const env = envelopes[i]!
    if (env.type === "model.retry") {
      const p = env.payload
      return {
        decision: { _tag: "retry", attempt: p.attempt, delayMs: p.delayMs, message: p.message },
        error: recordedError(p.status, p.message)
      }
    }
    if (env.type === "model.error") {
      const p = env.payload
      return {
        decision: { _tag: "gaveUp", message: p.message, retryable: p.retryable },
        error: recordedError(p.status, p.message, p.providerMessage)
      }
    }
    if (env.type === "step.started" || env.type === "turn.started") return undefined
  }
  return undefined
}

/** The plan of a re-run of these envelopes (one session's, in seq order). */
export const planOf = (envelopes: ReadonlyArray<Envelope>): RerunPlan => {
  const inputs: Array<InputPoint> = []
  /** a manual compaction's input point -> the index of its compaction.done */
  const compactAt = new Map<number, number>()
  // the interruptions first: their start is an input point, and their events are not the model's
  const interruptionAt = new Map<number, { readonly reason: string }>()
  for (let i = 0; i < envelopes.length; i++) {
    const env = envelopes[i]!
    if (env.type !== "turn.interrupted") continue
    const start = interruptionStart(envelopes, i, env.payload.reason)
    interruptionAt.set(start, { reason: env.payload.reason })
  }
  // a call's input, from its tool.invoked; calls whose step ended normally but that never ran have none in the log
  const invoked = new Map<string, unknown>()
  const failedAfterStep = new Map<string, number>()
  /** a refused call's input as the model sent it (`tool.failed` `input` / `inputText`), when the log has it */
  const refused = new Map<string, { readonly input: unknown; readonly inputText: string }>()
  for (let i = 0; i < envelopes.length; i++) {
    const env = envelopes[i]!
    if (env.type === "tool.invoked") invoked.set(env.payload.callId, env.payload.input)
    if (env.type === "tool.failed" && (env.payload.input !== undefined || env.payload.inputText !== undefined)) {
      const { input, inputText } = env.payload
      refused.set(env.payload.callId, { input, inputText: inputText ?? JSON.stringify(input) })
    }
  }

  /** call id -> the index of its tool.pending, and of the step.finished that ended its step */
  const ownerOf = new Map<string, number>()
  const stepEnd = new Map<string, number>()
  let stepCalls: Array<string> = []
  for (let i = 0; i < envelopes.length; i++) {
    const env = envelopes[i]!
    if (env.type === "step.started") stepCalls = []
    if (env.type === "tool.pending") {
      ownerOf.set(env.payload.callId, i)
      stepCalls.push(env.payload.callId)
    }
    if (env.type === "step.finished") {
      for (const callId of stepCalls) stepEnd.set(callId, i)
      stepCalls = []
    }
    // refused after its step (rejected, unknown tool, invalid input): the whole call had arrived
    if (env.type === "tool.failed" && env.payload.interrupted !== true) {
      const end = stepEnd.get(env.payload.callId)
      if (end !== undefined && end < i) failedAfterStep.set(env.payload.callId, i)
    }
  }

  for (let i = 0; i < envelopes.length; i++) {
    const interruption = interruptionAt.get(i)
    if (interruption !== undefined) {
      inputs.push(
        interruption.reason === CRASH_REASON
          ? { _tag: "crash", index: i }
          : { _tag: "interrupt", index: i, reason: interruption.reason }
      )
    }
    const env = envelopes[i]!
    switch (env.type) {
      case "user.message":
        inputs.push({
          _tag: "send",
          index: i,
          text: env.payload.text,
          mode: env.payload.mode,
          messageId: env.payload.messageId
        })
        break
      case "user.withdrawn":
        inputs.push({ _tag: "withdraw", index: i, messageId: env.payload.messageId })
        break
      case "compaction.done":
        // a manual compaction's events begin with the session busy (its failed attempts' retries between)
        if (env.payload.trigger === "manual") {
          let start = i
          for (let j = i - 1; j >= 0; j--) {
            const before = envelopes[j]!
            if (before.type === "model.retry") continue
            if (before.type === "session.status" && before.payload.status._tag === "retry") continue
            if (before.type === "session.status" && before.payload.status._tag === "busy") start = j
            break
          }
          inputs.push({ _tag: "compact", index: start })
          compactAt.set(start, i)
        }
        break
      case "tool.failed": {
        if (
          failedAfterStep.get(env.payload.callId) === i &&
          !invoked.has(env.payload.callId) &&
          !refused.has(env.payload.callId)
        ) {
          // the step that asked for it is where the model's input is needed
          const owner = ownerOf.get(env.payload.callId) ?? i
          inputs.push({
            _tag: "unsupported",
            index: owner,
            why:
              `the log does not keep the input of call ${env.payload.callId} (it never ran: ${env.payload.error.split("\n")[0]}; ` +
              "a log written before logbook kept the input of refused calls), so it cannot be sent again"
          })
        }
        break
      }
    }
  }
  inputs.sort((a, b) => a.index - b.index)
  const inputsBefore = (index: number) => {
    let n = 0
    for (const input of inputs) if (input.index < index) n++
    return n
  }

  const requests: Array<RecordedRequest> = []
  let current:
    | {
        messageId: MessageId
        step: number
        index: number
        seq: number
        events: Array<RecordedEvent>
        calls: Map<string, number>
      }
    | undefined
  /** a failed step's decision (the next model.retry / model.error) was taken with it */
  let stepDecisionPending = false
  const closeCurrent = (end: RecordedEnd, promptVersion?: string) => {
    if (current === undefined) return
    requests.push({
      kind: "step",
      request: 0,
      index: current.index,
      seq: current.seq,
      promptVersion,
      events: current.events,
      end
    })
    current = undefined
  }
  for (let i = 0; i < envelopes.length; i++) {
    const env = envelopes[i]!
    switch (env.type) {
      case "step.started":
        closeCurrent({ _tag: "hang" })
        current = {
          messageId: env.payload.messageId,
          step: env.payload.step,
          index: i,
          seq: env.seq,
          events: [],
          calls: new Map()
        }
        break
      case "text.delta":
        if (current?.messageId === env.payload.messageId) {
          current.events.push({
            event: ModelEvent.TextDelta({ id: partKey(env.payload.partId), delta: env.payload.delta }),
            inputsBefore: inputsBefore(i)
          })
        }
        break
      case "reasoning.delta":
        if (current?.messageId === env.payload.messageId) {
          current.events.push({
            event: ModelEvent.ReasoningDelta({
              id: partKey(env.payload.partId),
              delta: env.payload.delta,
              metadata: env.payload.metadata
            }),
            inputsBefore: inputsBefore(i)
          })
        }
        break
      case "tool.pending":
        if (current?.messageId === env.payload.messageId) {
          const { callId, tool } = env.payload
          current.events.push({
            event: ModelEvent.ToolInputStart({ callId, tool }),
            inputsBefore: inputsBefore(i)
          })
          // the whole call arrived when it ran (or was refused after its step): it is sent with its start
          const sent = refused.get(callId)
          if (invoked.has(callId) || sent !== undefined) {
            const input = sent !== undefined ? sent.input : invoked.get(callId)
            const inputText = sent !== undefined ? sent.inputText : JSON.stringify(input)
            current.events.push({
              event: ModelEvent.ToolCall({ callId, tool, input, inputText }),
              inputsBefore: inputsBefore(i)
            })
          }
        }
        break
      case "step.finished": {
        if (current === undefined || current.messageId !== env.payload.messageId) break
        const p = env.payload
        const promptVersion = p.promptVersion
        if (p.aborted === true && p.finishReason === STREAM_FAILED) {
          const after = decisionAfter(envelopes, i)
          stepDecisionPending = after !== undefined
          closeCurrent(
            after === undefined ? { _tag: "hang" } : { _tag: "fail", error: after.error, decision: after.decision },
            promptVersion
          )
        } else if (p.aborted === true || p.finishReason === STEERED) {
          closeCurrent({ _tag: "hang" }, promptVersion)
        } else {
          const { input, output, reasoning, cacheRead, cacheWrite } = p.usage
          current.events.push({
            event: ModelEvent.Finish({
              finishReason: p.finishReason,
              usage: { input, output, reasoning, cacheRead, cacheWrite }
            }),
            inputsBefore: inputsBefore(i)
          })
          closeCurrent({ _tag: "finish" }, promptVersion)
        }
        break
      }
      case "model.retry":
      case "model.error": {
        // the decision after a failed step was read with it; one that no failed step precedes
        // follows a compaction's summary request that failed
        if (stepDecisionPending) {
          stepDecisionPending = false
          break
        }
        if (env.type === "model.error") break
        const p = env.payload
        requests.push({
          kind: "failed",
          request: 0,
          index: i,
          seq: env.seq,
          events: [],
          end: {
            _tag: "fail",
            error: recordedError(p.status, p.message),
            decision: { _tag: "retry", attempt: p.attempt, delayMs: p.delayMs, message: p.message }
          }
        })
        break
      }
      case "compaction.done": {
        const p = env.payload
        if (p.usage === undefined && p.model === undefined) break
        // a manual compaction is itself an input point: its summary does not wait for it to be done
        const own = inputs.find(
          (input) => input._tag === "compact" && input.index <= i && compactAt.get(input.index) === i
        )
        const gate = own === undefined ? inputsBefore(i) : inputsBefore(own.index)
        const usage = p.usage ?? { input: 0, output: 0, reasoning: 0, cacheRead: 0, cacheWrite: 0 }
        requests.push({
          kind: "summary",
          request: 0,
          index: i,
          seq: env.seq,
          events: [
            { event: ModelEvent.TextDelta({ id: "summary", delta: p.summary }), inputsBefore: gate },
            {
              event: ModelEvent.Finish({
                finishReason: "stop",
                usage: {
                  input: usage.input,
                  output: usage.output,
                  reasoning: usage.reasoning,
                  cacheRead: usage.cacheRead,
                  cacheWrite: usage.cacheWrite
                }
              }),
              inputsBefore: gate
            }
          ],
          end: { _tag: "finish" }
        })
        break
      }
    }
  }
  closeCurrent({ _tag: "hang" })
  requests.sort((a, b) => a.index - b.index)
  const numbered = requests.map((r, n) => ({ ...r, request: n + 1 }))

  const created = envelopes.find((env): env is EnvelopeOf<"session.created"> => env.type === "session.created")
  return {
    envelopes,
    cwd: created?.payload.cwd,
    title: created?.payload.title,
    model: created?.payload.model,
    requests: numbered,
    inputs
  }
}
