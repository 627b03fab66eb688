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
      /** what hooks added to the message (`user.message` `context`) */
      readonly context?: string | undefined
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

/** What the log keeps of each call: the input it ran with, or the one a refusal kept, and where its step was. */
interface CallRecords {
  /** a call's input, from its tool.invoked; calls whose step ended normally but that never ran have none */
  readonly invoked: ReadonlyMap<string, unknown>
  /** a refused call's input as the model sent it (`tool.failed` `input` / `inputText`), when the log has it */
  readonly refused: ReadonlyMap<string, { readonly input: unknown; readonly inputText: string }>
  /** a call whose input a before hook changed: the input the model sent (the first such `hook.ran`'s `input`) */
  readonly sent: ReadonlyMap<string, unknown>
  /** call id -> the index of its tool.pending */
  readonly ownerOf: ReadonlyMap<string, number>
  /** call id -> the index of its tool.failed, when it was refused after its step ended */
  readonly failedAfterStep: ReadonlyMap<string, number>
}

const callRecordsOf = (envelopes: ReadonlyArray<Envelope>): CallRecords => {
  const invoked = new Map<string, unknown>()
  const refused = new Map<string, { readonly input: unknown; readonly inputText: string }>()
  const sent = new Map<string, unknown>()
  const ownerOf = new Map<string, number>()
  /** call id -> the index of the step.finished that ended its step */
  const stepEnd = new Map<string, number>()
  const failedAfterStep = new Map<string, number>()
  let stepCalls: Array<string> = []
  for (let i = 0; i < envelopes.length; i++) {
    const env = envelopes[i]!
    if (env.type === "tool.invoked") invoked.set(env.payload.callId, env.payload.input)
    if (
      env.type === "hook.ran" &&
      env.payload.hook === "tool.execute.before" &&
      env.payload.callId !== undefined &&
      env.payload.input !== undefined &&
      !sent.has(env.payload.callId) &&
      !invoked.has(env.payload.callId)
    )
      sent.set(env.payload.callId, env.payload.input)
    if (env.type === "tool.failed" && (env.payload.input !== undefined || env.payload.inputText !== undefined)) {
      const { input, inputText } = env.payload
      refused.set(env.payload.callId, { input, inputText: inputText ?? JSON.stringify(input) })
    }
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
  return { invoked, refused, sent, ownerOf, failedAfterStep }
}

/** Where a manual compaction's events begin: the session busy before its `compaction.done` at `at` (its failed attempts' retries between). */
const manualCompactionStart = (envelopes: ReadonlyArray<Envelope>, at: number): number => {
  let start = at
  for (let j = at - 1; j >= 0; j--) {
    const before = envelopes[j]!
    if (before.type === "model.retry") continue
    if (before.type === "session.status" && before.payload.status._tag === "retry") continue
    if (before.type === "session.status" && before.payload.status._tag === "busy") start = j
    break
  }
  return start
}

/**
 * The input points of the log, in order, and for each manual compaction's point the index of its
 * `compaction.done`.
 */
const inputPointsOf = (envelopes: ReadonlyArray<Envelope>, calls: CallRecords) => {
  const inputs: Array<InputPoint> = []
  const compactAt = new Map<number, number>()
  // the interruptions first: their start is an input point, and their events are not the model's
  const interruptionAt = new Map<number, { readonly reason: string }>()
  for (let i = 0; i < envelopes.length; i++) {
    const env = envelopes[i]!
    if (env.type !== "turn.interrupted") continue
    interruptionAt.set(interruptionStart(envelopes, i, env.payload.reason), { reason: env.payload.reason })
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
    if (env.type === "user.message") {
      const { text, mode, messageId, context } = env.payload
      inputs.push({ _tag: "send", index: i, text, mode, messageId, ...(context !== undefined ? { context } : {}) })
    } else if (env.type === "user.withdrawn") {
      inputs.push({ _tag: "withdraw", index: i, messageId: env.payload.messageId })
    } else if (env.type === "compaction.done" && env.payload.trigger === "manual") {
      const start = manualCompactionStart(envelopes, i)
      inputs.push({ _tag: "compact", index: start })
      compactAt.set(start, i)
    } else if (env.type === "tool.failed") {
      const { callId } = env.payload
      if (calls.failedAfterStep.get(callId) === i && !calls.invoked.has(callId) && !calls.refused.has(callId)) {
        // the step that asked for it is where the model's input is needed
        inputs.push({
          _tag: "unsupported",
          index: calls.ownerOf.get(callId) ?? i,
          why:
            `the log does not keep the input of call ${callId} (it never ran: ${env.payload.error.split("\n")[0]}; ` +
            "a log written before logbook kept the input of refused calls), so it cannot be sent again"
        })
      }
    }
  }
  inputs.sort((a, b) => a.index - b.index)
  return { inputs, compactAt }
}

/** The step whose response is being read from the log. */
interface OpenStep {
  readonly messageId: MessageId
  readonly index: number
  readonly seq: number
  readonly events: Array<RecordedEvent>
}

/** The model requests of a log, read in one pass (`requestsOf`). */
interface RequestScan {
  readonly envelopes: ReadonlyArray<Envelope>
  readonly calls: CallRecords
  readonly inputs: ReadonlyArray<InputPoint>
  readonly compactAt: ReadonlyMap<number, number>
  readonly requests: Array<RecordedRequest>
  current: OpenStep | undefined
  /** a failed step's decision (the next model.retry / model.error) was taken with it */
  stepDecisionPending: boolean
}

/** How many input points come before index `index` of the log. */
const inputsBefore = (scan: RequestScan, index: number): number => {
  let n = 0
  for (const input of scan.inputs) if (input.index < index) n++
  return n
}

const closeStep = (scan: RequestScan, end: RecordedEnd, promptVersion?: string): void => {
  const current = scan.current
  if (current === undefined) return
  scan.requests.push({
    kind: "step",
    request: 0,
    index: current.index,
    seq: current.seq,
    promptVersion,
    events: current.events,
    end
  })
  scan.current = undefined
}

/** A tool call's start, and the whole call when it ran (or was refused after its step): it is sent with its start. */
const pendingCallEvents = (scan: RequestScan, env: EnvelopeOf<"tool.pending">, i: number): Array<RecordedEvent> => {
  const { callId, tool } = env.payload
  const before = inputsBefore(scan, i)
  const events: Array<RecordedEvent> = [{ event: ModelEvent.ToolInputStart({ callId, tool }), inputsBefore: before }]
  const sent = scan.calls.refused.get(callId)
  if (scan.calls.invoked.has(callId) || sent !== undefined) {
    // what the model sent: a before hook may have changed what ran (RerunHooks.ts does it again)
    const changed = scan.calls.sent.get(callId)
    const input = sent !== undefined ? sent.input : changed !== undefined ? changed : scan.calls.invoked.get(callId)
    const inputText = sent !== undefined ? sent.inputText : JSON.stringify(input)
    events.push({ event: ModelEvent.ToolCall({ callId, tool, input, inputText }), inputsBefore: before })
  }
  return events
}

/** How the step read so far ended: finished, failed (with the decision after it), or stopped from outside. */
const stepFinished = (scan: RequestScan, env: EnvelopeOf<"step.finished">, i: number): void => {
  const current = scan.current
  if (current === undefined || current.messageId !== env.payload.messageId) return
  const p = env.payload
  if (p.aborted === true && p.finishReason === STREAM_FAILED) {
    const after = decisionAfter(scan.envelopes, i)
    scan.stepDecisionPending = after !== undefined
    closeStep(
      scan,
      after === undefined ? { _tag: "hang" } : { _tag: "fail", error: after.error, decision: after.decision },
      p.promptVersion
    )
  } else if (p.aborted === true || p.finishReason === STEERED) {
    closeStep(scan, { _tag: "hang" }, p.promptVersion)
  } else {
    const { input, output, reasoning, cacheRead, cacheWrite } = p.usage
    current.events.push({
      event: ModelEvent.Finish({
        finishReason: p.finishReason,
        usage: { input, output, reasoning, cacheRead, cacheWrite }
      }),
      inputsBefore: inputsBefore(scan, i)
    })
    closeStep(scan, { _tag: "finish" }, p.promptVersion)
  }
}

/**
 * A `model.retry` or `model.error`: the decision after a failed step was read with it; one that no
 * failed step precedes follows a compaction's summary request that failed.
 */
const decisionSeen = (scan: RequestScan, env: EnvelopeOf<"model.retry"> | EnvelopeOf<"model.error">, i: number) => {
  if (scan.stepDecisionPending) {
    scan.stepDecisionPending = false
    return
  }
  if (env.type === "model.error") return
  const p = env.payload
  scan.requests.push({
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
}

/** A compaction's summary request, answered with its summary. */
const summaryRequest = (scan: RequestScan, env: EnvelopeOf<"compaction.done">, i: number): void => {
  const p = env.payload
  if (p.usage === undefined && p.model === undefined) return
  // a manual compaction is itself an input point: its summary does not wait for it to be done
  const own = scan.inputs.find(
    (input) => input._tag === "compact" && input.index <= i && scan.compactAt.get(input.index) === i
  )
  const gate = inputsBefore(scan, own === undefined ? i : own.index)
  const { input, output, reasoning, cacheRead, cacheWrite } = p.usage ?? {
    input: 0,
    output: 0,
    reasoning: 0,
    cacheRead: 0,
    cacheWrite: 0
  }
  scan.requests.push({
    kind: "summary",
    request: 0,
    index: i,
    seq: env.seq,
    events: [
      { event: ModelEvent.TextDelta({ id: "summary", delta: p.summary }), inputsBefore: gate },
      {
        event: ModelEvent.Finish({ finishReason: "stop", usage: { input, output, reasoning, cacheRead, cacheWrite } }),
        inputsBefore: gate
      }
    ],
    end: { _tag: "finish" }
  })
}

/** The model requests of the log, in order and numbered from 1. */
const requestsOf = (
  envelopes: ReadonlyArray<Envelope>,
  calls: CallRecords,
  points: ReturnType<typeof inputPointsOf>
): Array<RecordedRequest> => {
  const scan: RequestScan = {
    envelopes,
    calls,
    inputs: points.inputs,
    compactAt: points.compactAt,
    requests: [],
    current: undefined,
    stepDecisionPending: false
  }
  for (let i = 0; i < envelopes.length; i++) {
    const env = envelopes[i]!
    const current = scan.current
    const ours = current !== undefined && "messageId" in env.payload && current.messageId === env.payload.messageId
    switch (env.type) {
      case "step.started":
        closeStep(scan, { _tag: "hang" })
        scan.current = { messageId: env.payload.messageId, index: i, seq: env.seq, events: [] }
        break
      case "text.delta":
        if (ours)
          current.events.push({
            event: ModelEvent.TextDelta({ id: partKey(env.payload.partId), delta: env.payload.delta }),
            inputsBefore: inputsBefore(scan, i)
          })
        break
      case "reasoning.delta":
        if (ours)
          current.events.push({
            event: ModelEvent.ReasoningDelta({
              id: partKey(env.payload.partId),
              delta: env.payload.delta,
              metadata: env.payload.metadata
            }),
            inputsBefore: inputsBefore(scan, i)
          })
        break
      case "tool.pending":
        if (ours) current.events.push(...pendingCallEvents(scan, env, i))
        break
      case "step.finished":
        stepFinished(scan, env, i)
        break
      case "model.retry":
      case "model.error":
        decisionSeen(scan, env, i)
        break
      case "compaction.done":
        summaryRequest(scan, env, i)
        break
    }
  }
  closeStep(scan, { _tag: "hang" })
  scan.requests.sort((a, b) => a.index - b.index)
  return scan.requests.map((r, n) => ({ ...r, request: n + 1 }))
}

/** The plan of a re-run of these envelopes (one session's, in seq order). */
export const planOf = (envelopes: ReadonlyArray<Envelope>): RerunPlan => {
  const calls = callRecordsOf(envelopes)
  const points = inputPointsOf(envelopes, calls)
  const created = envelopes.find((env): env is EnvelopeOf<"session.created"> => env.type === "session.created")
  return {
    envelopes,
    cwd: created?.payload.cwd,
    title: created?.payload.title,
    model: created?.payload.model,
    requests: requestsOf(envelopes, calls, points),
    inputs: points.inputs
  }
}
