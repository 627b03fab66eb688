/**
 * One model step (DESIGN §3, §5): the model's stream in, events out.
 *
 * `Processor.step` makes one attempt: `step.started`, the deltas (`text.delta` / `reasoning.delta`,
 * handed to the writer without waiting; consecutive deltas of one part that arrive together are
 * merged), `tool.pending` when a call's input starts streaming (handed over with the deltas: it is
 * not a write-ahead point), and `step.finished` with
 * the usage and its cost. It returns the calls whose input fully arrived; running them is `Actions`'
 * job.
 *
 * `Processor.run` wraps attempts in the `Retry` policy: a retryable failure ends the attempt's step
 * `aborted` (its partial output is not sent to the model again), appends `model.retry` and sets
 * `session.status retry`, waits, and tries again as a new step. No tool has run in a cut step (tools
 * run after their step), so a retry never re-runs one.
 *
 * The prompt version (`PromptVersion.ts`): each attempt hashes the system prompt and the tool
 * schemas of the request it sends, and puts the version in its `step.finished`; the first request of
 * a session with a version records the prompt document first (a blob and `prompt.recorded`), so a
 * replay can rebuild the exact request.
 *
 * Bounds (`StepLimits.ts`): past the step's output bound the stream is stopped and the step ends
 * `output-limit` with none of its calls run; a call past its `maxToolCalls` is answered as refused.
 *
 * Cleanup: whatever ends an attempt early (a model error, an interrupt, a store failure), the
 * attempt's `Effect.onExit` ends the open step `aborted` and every part of the message still
 * `pending` as `error {interrupted: true}`. It works from the projection, so it is idempotent.
 */
import { Cause, Chunk, Context, Deferred, Effect, type Exit, Layer } from "effect"
import { make, type NewEvent } from "../domain/Events.js"
import { CallId, type MessageId, PartId } from "../domain/Ids.js"
import { mergeProviderMetadata, type Usage } from "../domain/Message.js"
import { annotateFinish, type ChatFinish, chatSpan, tracedFn } from "../model/GenAi.js"
import { Model, ModelError, ModelEvent, type ModelRequest, type ModelUsage } from "../model/Model.js"
import type { Price } from "../model/Price.js"
import { gaveUp, Retry, type RetryGaveUp, type RetryInfo } from "../model/Retry.js"
import { EventStore } from "../store/EventStore.js"
import { endOpenStep as endOpenStepOf, endOpenToolParts } from "../store/openParts.js"
import type { SessionState } from "../store/Projection.js"
import type { SessionJournal } from "../store/SessionJournal.js"
import type { RestoreError } from "../store/Snapshots.js"
import { Secrets, type SecretsService, type TextStreamRedactor } from "../tools/Secrets.js"
import { consumeBatched, type Steer, steerDone } from "./internal/modelReader.js"
import { type PromptVersion, promptVersionOf, requestDigestOf } from "./PromptVersion.js"
import { sentInput } from "./RunCall.js"
import {
  defaultStepLimits,
  makeOutputMeter,
  OUTPUT_LIMIT,
  outputLimitMessage,
  refusedCall,
  type StepLimits
} from "./StepLimits.js"

export { makeSteer, type Steer, signalSteer } from "./internal/modelReader.js"

/** A tool call whose input fully arrived. `input` is undefined when the model sent text that is not JSON. */
export interface StepCall {
  readonly callId: CallId
  readonly tool: string
  readonly input: unknown
  readonly inputText: string
}

export interface StepResult {
  /** the step number the successful attempt used */
  readonly step: number
  readonly finishReason: string
  readonly usage: Usage
  readonly calls: ReadonlyArray<StepCall>
  /** the stream was stopped for a steered message (the step's output is kept) */
  readonly steered: boolean
  /** the text the step produced (for the caller's summary) */
  readonly text: string
}

export interface StepInput {
  readonly journal: SessionJournal
  readonly messageId: MessageId
  /** the step number of the first attempt; each retry uses the next one */
  readonly step: number
  /** the request, built from the state after `step.started` (so it sees the messages this step delivers) */
  readonly request: (state: SessionState) => ModelRequest
  /**
   * The user messages this step delivers (steered ones), decided from the state when `step.started`
   * is appended — atomically, so a message withdrawn meanwhile is never delivered. Default: none.
   */
  readonly deliver?: ((state: SessionState) => ReadonlyArray<MessageId>) | undefined
  /**
   * Completes when a steered message arrives: the stream is stopped and the step ends there. A
   * `Steer` (`makeSteer`, completed with `signalSteer`) wakes a wait for the model without a fiber
   * of its own; a bare `Deferred` is awaited by one per request.
   */
  readonly steer?: Deferred.Deferred<void> | Steer | undefined
  readonly price?: Price | undefined
  /** why the step was interrupted, read by the cleanup (default "interrupted") */
  readonly interruptReason?: Effect.Effect<string> | undefined
  /** the step's bounds: its output and its tool calls (default `defaultStepLimits`) */
  readonly limits?: StepLimits | undefined
}

/** Reason given to parts and steps that a failed (retryable or not) model request cut short. */
export const STREAM_FAILED = "stream-failed"
export const STEERED = "steered"

/**
 * The cost of a step in USD from per-million prices; cached tokens are priced separately when given
 * (else at the input price). `known` is false when tokens of a kind were used that have no price
 * (`cost` is then what the priced tokens cost), and always without any price (zero tokens may only
 * mean that the server does not report them). A price of 0 is a price (a free model): known.
 */
export const costOf = (
  usage: ModelUsage,
  price: Price | undefined
): { readonly cost: number; readonly known: boolean } => {
  if (price === undefined || Object.values(price).every((value) => value === undefined)) {
    return { cost: 0, known: false }
  }
  const input = price.input
  const uncached = Math.max(0, usage.input - usage.cacheRead - usage.cacheWrite)
  let cost = 0
  let known = true
  for (const [tokens, perMillion] of [
    [uncached, input],
    [usage.output, price.output],
    [usage.cacheRead, price.cacheRead ?? input],
    [usage.cacheWrite, price.cacheWrite ?? input]
  ] as const) {
    if (tokens <= 0) continue
    if (perMillion === undefined) known = false
    else cost += tokens * perMillion
  }
  return { cost: cost / 1_000_000, known }
}

/** A step's usage as the log keeps it: whole non-negative counts and the cost. */
export const toUsage = (usage: ModelUsage, price: Price | undefined): Usage => {
  const int = (n: number) => (Number.isFinite(n) && n > 0 ? Math.round(n) : 0)
  const counted = {
    input: int(usage.input),
    output: int(usage.output),
    reasoning: int(usage.reasoning),
    cacheRead: int(usage.cacheRead),
    cacheWrite: int(usage.cacheWrite)
  }
  const { cost, known } = costOf(counted, price)
  return { ...counted, cost, ...(known ? {} : { costKnown: false }) }
}

/** What an attempt knows of the request it sent: its prompt version and digest (once it was sent). */
export interface SentRequest {
  promptVersion?: string
  requestDigest?: string
}

/**
 * Ends what an attempt left open in `messageId`: every pending part as `error {interrupted}`, and
 * the open step (if any) as `aborted` (with the prompt version and digest of its request, when it
 * was sent). Idempotent: computed from the projection.
 */
export const endOpenStep = (
  journal: SessionJournal,
  messageId: MessageId,
  reason: string,
  error: string,
  sent: SentRequest = {}
) =>
  Effect.gen(function* () {
    const state = yield* journal.state
    const events: Array<NewEvent> = endOpenToolParts(state, {
      reason,
      which: (part) => part.messageId === messageId && part.state._tag === "pending",
      end: () => ({ error })
    })
    const step = endOpenStepOf(state, messageId, reason, sent)
    if (step !== undefined) events.push(step)
    if (events.length > 0) yield* journal.append(events)
  })

/** Before each wait of a retried request: `model.retry` and `session.status retry`. */
export const recordRetry =
  (journal: SessionJournal) =>
  (info: RetryInfo): Effect.Effect<void, RestoreError> =>
    journal
      .append([
        make("model.retry", {
          attempt: info.attempt,
          delayMs: info.delayMs,
          nextAt: info.nextAt,
          message: info.message,
          ...(info.error.status !== undefined ? { status: info.error.status } : {})
        }),
        make("session.status", {
          status: { _tag: "retry", attempt: info.attempt, nextAt: info.nextAt, message: info.message }
        })
      ])
      .pipe(Effect.asVoid)

/** A call id not used yet in the session (some servers number calls `call_0`, `call_1` … in every step). */
const uniqueCallId = (taken: (id: string) => boolean, id: string): CallId => {
  const base = id === "" ? "call" : id
  if (!taken(base)) return CallId.make(base)
  for (let n = 2; ; n++) {
    const candidate = `${base}_${n}`
    if (!taken(candidate)) return CallId.make(candidate)
  }
}

/**
 * Merges consecutive deltas of the same part (events that arrived in one chunk): one event per run
 * of them, made once per run (not one object per delta merged).
 */
const coalesce = (events: ReadonlyArray<ModelEvent>): Array<ModelEvent> => {
  const out: Array<ModelEvent> = []
  let i = 0
  while (i < events.length) {
    const first = events[i]!
    let end = i + 1
    if (first._tag === "TextDelta" || first._tag === "ReasoningDelta") {
      while (end < events.length) {
        const next = events[end]!
        if (next._tag !== first._tag || next.id !== first.id) break
        end++
      }
    }
    if (end === i + 1) out.push(first)
    else if (first._tag === "TextDelta") {
      let delta = ""
      for (let j = i; j < end; j++) delta += (events[j] as typeof first).delta
      out.push({ ...first, delta })
    } else if (first._tag === "ReasoningDelta") {
      let delta = ""
      let metadata = first.metadata
      for (let j = i; j < end; j++) {
        const event = events[j] as typeof first
        delta += event.delta
        if (j > i) metadata = mergeProviderMetadata(metadata, event.metadata)
      }
      out.push(ModelEvent.ReasoningDelta({ id: first.id, delta, metadata }))
    }
    i = end
  }
  return out
}

interface AttemptState {
  finish: ChatFinish | undefined
  readonly calls: Array<StepCall>
  /** the calls past the step's `maxToolCalls`, answered as refused */
  readonly refused: Set<CallId>
  /** model call id -> the call id in the log */
  readonly ids: Map<string, CallId>
  text: string
}

/** What stops the batches when the step's output passed its bound (caught by the attempt). */
interface OutputLimitReached {
  readonly _tag: "OutputLimitReached"
}
const outputLimitReached: OutputLimitReached = { _tag: "OutputLimitReached" }

/** A non-model failure carried through the retry loop (only `ModelError`s are retried). */
interface Carried {
  readonly _tag: "Carried"
  readonly error: RestoreError
}

/** `step.started` (with the messages it delivers), after `session.status busy` and `chat.state streaming` where needed. */
const openStep = (input: StepInput, step: number) =>
  input.journal.appendWith((before) => {
    const opening: Array<NewEvent> = []
    if (before.status._tag !== "busy") opening.push(make("session.status", { status: { _tag: "busy" } }))
    if (before.chatState !== "streaming") opening.push(make("chat.state", { state: "streaming" }))
    const delivered = input.deliver?.(before) ?? []
    opening.push(
      make("step.started", {
        messageId: input.messageId,
        step,
        ...(delivered.length > 0 ? { deliveredMessageIds: delivered } : {})
      })
    )
    return opening
  })

/**
 * Per text or reasoning part, logbook's API keys masked as the text streams (`Secrets`): a key
 * split over two deltas is masked whole, a possible start of one waits for the next delta.
 */
const makeMaskers = (
  secrets: SecretsService,
  st: AttemptState,
  messageId: MessageId,
  partId: (id: string) => PartId
) => {
  const maskers = new Map<string, { readonly kind: "text" | "reasoning"; readonly masker: TextStreamRedactor }>()
  const maskerOf = (id: string, kind: "text" | "reasoning"): TextStreamRedactor => {
    const key = `${kind}:${id}`
    let found = maskers.get(key)
    if (found === undefined) {
      found = { kind, masker: secrets.redactTextStream() }
      maskers.set(key, found)
    }
    return found.masker
  }
  /**
   * What the maskers held back, as the parts' last deltas: of every part but `keep`'s — when
   * another part or a tool call comes, a part is over (so its text keeps its place in the
   * message), and at the end of the stream.
   */
  const heldBack = (keep?: string): Array<NewEvent> => {
    const out: Array<NewEvent> = []
    for (const [key, { kind, masker }] of maskers) {
      if (key === keep) continue
      const delta = masker.end()
      if (delta === "") continue
      const id = partId(key.slice(kind.length + 1))
      if (kind === "text") st.text += delta
      out.push(make(kind === "text" ? "text.delta" : "reasoning.delta", { messageId, partId: id, delta }))
    }
    return out
  }
  return { maskerOf, heldBack, any: () => maskers.size > 0 }
}
type Maskers = ReturnType<typeof makeMaskers>

/**
 * One batch of the model's stream as events, handed to the writer: text and reasoning deltas
 * (masked), `tool.pending` at a call's first sight, the calls that fully arrived (past
 * `maxToolCalls`, refused), the finish. Fails with `OutputLimitReached` once the output bound is passed.
 */
const makeChunkHandler = (
  input: StepInput,
  st: AttemptState,
  limits: StepLimits,
  meter: ReturnType<typeof makeOutputMeter>,
  maskers: Maskers,
  partId: (id: string) => PartId
) => {
  const { journal, messageId } = input
  const callIdFor = (modelId: string) =>
    Effect.gen(function* () {
      const known = st.ids.get(modelId)
      if (known !== undefined) return { callId: known, isNew: false }
      const state = yield* journal.state
      const callId = uniqueCallId((id) => state.toolParts.has(id as CallId), modelId)
      st.ids.set(modelId, callId)
      return { callId, isNew: true }
    })

  return (chunk: Chunk.Chunk<ModelEvent>) =>
    Effect.gen(function* () {
      let deltas: Array<NewEvent> = []
      /**
       * The log's id of a model call; its first sight (input start, or the whole call from a
       * provider that streams no input) records `tool.pending`. That is not a write-ahead point
       * (the tool runs after `tool.invoked`), so it is handed over with the deltas.
       */
      const pendingCall = (modelId: string, tool: string) =>
        Effect.map(callIdFor(modelId), ({ callId, isNew }) => {
          if (isNew) deltas.push(make("tool.pending", { messageId, callId, tool }))
          return callId
        })
      const flushDeltas = Effect.suspend(() => {
        if (deltas.length === 0) return Effect.void
        const batch = deltas
        deltas = []
        return journal.appendLater(batch)
      })
      for (const whole of coalesce(Chunk.toReadonlyArray(chunk))) {
        // past the output bound: what fits is handled, then the stream stops
        const event = meter.take(whole)
        if (event === undefined) break
        if (maskers.any()) {
          const part =
            event._tag === "TextDelta"
              ? `text:${event.id}`
              : event._tag === "ReasoningDelta"
                ? `reasoning:${event.id}`
                : undefined
          for (const held of maskers.heldBack(part)) deltas.push(held)
        }
        switch (event._tag) {
          case "TextDelta": {
            const delta = maskers.maskerOf(event.id, "text").push(event.delta)
            st.text += delta
            if (delta !== "") deltas.push(make("text.delta", { messageId, partId: partId(event.id), delta }))
            break
          }
          case "ReasoningDelta": {
            const delta = maskers.maskerOf(event.id, "reasoning").push(event.delta)
            // metadata (a signature, redacted data) is recorded with its part, also without text
            if (delta !== "" || event.metadata !== undefined) {
              deltas.push(
                make("reasoning.delta", {
                  messageId,
                  partId: partId(event.id),
                  delta,
                  ...(event.metadata !== undefined ? { metadata: event.metadata } : {})
                })
              )
            }
            break
          }
          case "ToolInputStart":
            yield* pendingCall(event.callId, event.tool)
            break
          case "ToolInputDelta":
            break
          case "ToolCall": {
            const callId = yield* pendingCall(event.callId, event.tool)
            if (st.refused.has(callId) || st.calls.some((call) => call.callId === callId)) break
            const call = { callId, tool: event.tool, input: event.input, inputText: event.inputText }
            if (st.calls.length < limits.maxToolCalls) st.calls.push(call)
            else {
              st.refused.add(callId)
              deltas.push(refusedCall(callId, sentInput(call), limits))
            }
            break
          }
          case "Finish":
            st.finish = { finishReason: event.finishReason, usage: event.usage, responseModel: event.responseModel }
            break
        }
      }
      yield* flushDeltas
      if (meter.reached) return yield* Effect.fail(outputLimitReached)
    })
}

/**
 * The end of a streamed attempt: a stream cut before its finish is a `ModelError`; else the events
 * that close the step (held-back text, the parts a steer or the output bound left open,
 * `step.finished`) and its result.
 */
const closeStep = (
  model: Model["Type"],
  input: StepInput,
  step: number,
  st: AttemptState,
  limits: StepLimits,
  limited: boolean,
  maskers: Maskers,
  sent: SentRequest
) =>
  Effect.gen(function* () {
    const { journal, messageId, steer } = input
    const steered =
      !limited && st.finish === undefined && steer !== undefined && (yield* Deferred.isDone(steerDone(steer)))
    if (st.finish === undefined && !steered && !limited) {
      return yield* new ModelError({
        reason: "stream-cut",
        message: `${model.name}: the stream ended before the step finished`
      })
    }
    const closing: Array<NewEvent> = maskers.heldBack()
    if (steered) {
      // calls whose input never fully arrived cannot run; the complete ones run, then the steered message goes in
      const state = yield* journal.state
      closing.push(
        ...endOpenToolParts(state, {
          reason: STEERED,
          which: (part) =>
            part.messageId === messageId &&
            part.state._tag === "pending" &&
            !st.calls.some((call) => call.callId === part.callId),
          end: () => ({
            error: "The model was stopped by a new user message before this call's input fully arrived."
          })
        })
      )
      closing.push(make("chat.state", { state: "interrupted" }))
    }
    if (limited) {
      // a runaway step: none of its calls runs (those that fully arrived keep their input)
      const state = yield* journal.state
      const error = `Not run: ${outputLimitMessage(limits)}.`
      closing.push(
        ...endOpenToolParts(state, {
          reason: OUTPUT_LIMIT,
          which: (part) => part.messageId === messageId && part.state._tag === "pending",
          end: (part) => ({ error, input: st.calls.find((call) => call.callId === part.callId)?.input })
        })
      )
    }
    const finishReason = limited ? OUTPUT_LIMIT : (st.finish?.finishReason ?? STEERED)
    const usage = toUsage(
      st.finish?.usage ?? { input: 0, output: 0, reasoning: 0, cacheRead: 0, cacheWrite: 0 },
      input.price
    )
    closing.push(
      make("step.finished", {
        messageId,
        step,
        finishReason,
        usage,
        promptVersion: sent.promptVersion,
        requestDigest: sent.requestDigest
      })
    )
    const result: StepResult = { step, finishReason, usage, calls: limited ? [] : st.calls, steered, text: st.text }
    return { closing, result }
  })

/**
 * The cleanup of an attempt that did not succeed: its open step ended `aborted` and its pending
 * parts as interrupted, with the reason (the interrupt's, or `stream-failed`).
 */
const endFailedAttempt =
  (input: StepInput, step: number, sent: SentRequest) =>
  <A, E>(exit: Exit.Exit<A, E>) => {
    if (exit._tag === "Success") return Effect.void
    const interrupted = Cause.isInterrupted(exit.cause)
    const reason = interrupted
      ? (input.interruptReason ?? Effect.succeed("interrupted"))
      : Effect.succeed(STREAM_FAILED)
    return Effect.flatMap(reason, (why) =>
      endOpenStep(
        input.journal,
        input.messageId,
        why,
        why === STREAM_FAILED
          ? "The model's response broke off before this call's input fully arrived; the call did not run."
          : `The turn was interrupted (${why}) before this call ran.`,
        sent
      )
    ).pipe(
      Effect.catchAll((error) => Effect.logWarning(`could not end step ${step} of message ${input.messageId}`, error))
    )
  }

const makeProcessor = (
  model: Model["Type"],
  retry: Retry["Type"],
  secrets: SecretsService,
  store: EventStore["Type"]
) => {
  /** the latest request's prompt and its version */
  let lastPrompt: (Pick<ModelRequest, "system" | "tools"> & { readonly prompt: PromptVersion }) | undefined
  /**
   * The prompt version of a request (system prompt and tool schemas); the first request of a
   * session with a version records its prompt document (a blob, then `prompt.recorded`) before it is sent.
   */
  const recordPrompt = (journal: SessionJournal, request: ModelRequest) =>
    Effect.gen(function* () {
      // the steps of a turn send the same system prompt and the same (readonly) tools: hashed once
      const prompt =
        lastPrompt !== undefined && lastPrompt.system === request.system && lastPrompt.tools === request.tools
          ? lastPrompt.prompt
          : promptVersionOf(request)
      lastPrompt = { system: request.system, tools: request.tools, prompt }
      if ((yield* journal.state).prompts[prompt.version] === undefined) {
        const blob = yield* store.putBlob(prompt.json)
        yield* journal.append([make("prompt.recorded", { promptVersion: prompt.version, blob })])
      }
      return prompt
    })

  const attempt = (input: StepInput, step: number) => {
    /** the prompt version of this attempt's request, once it is sent (for the cleanup's step.finished) */
    const sent: SentRequest = {}
    return Effect.gen(function* () {
      const { journal, messageId } = input
      yield* openStep(input, step)

      const st: AttemptState = { finish: undefined, calls: [], refused: new Set(), ids: new Map(), text: "" }
      const limits = input.limits ?? defaultStepLimits
      const meter = makeOutputMeter(limits.maxOutputBytes)
      const partId = (id: string) => PartId.make(`${messageId}:${step}:${id}`)
      const maskers = makeMaskers(secrets, st, messageId, partId)
      const handle = makeChunkHandler(input, st, limits, meter, maskers, partId)

      const request = input.request(yield* journal.state)
      const prompt = yield* recordPrompt(journal, request)
      sent.promptVersion = prompt.version
      sent.requestDigest = requestDigestOf(prompt.hash, request.messages)
      const stream = model.stream(request)
      // one pipeline: the model's stream in batches, stopped between two batches by a steered message
      const streamed = consumeBatched(stream, handle, input.steer)
      // the request is one span (`chat <model>`, GenAI conventions), its tokens recorded at its end
      yield* streamed.pipe(
        Effect.catchTag("OutputLimitReached", () => Effect.void),
        Effect.ensuring(Effect.suspend(() => (st.finish === undefined ? Effect.void : annotateFinish(st.finish)))),
        chatSpan(model, request, { "logbook.session.id": journal.sessionId, "logbook.step": step })
      )

      // a replayed step (`rerun`'s cassette) ends as the step it replays did: with its finish reason
      const limited = meter.reached || st.finish?.finishReason === OUTPUT_LIMIT
      const { closing, result } = yield* closeStep(model, input, step, st, limits, limited, maskers, sent)
      // handed over: no outside effect follows the step's end before the kernel's next awaited
      // append (the first call's `tool.invoked`, the next `step.started`, the turn's end), which
      // commits it with its own events (docs/event-log.md, "What the kernel awaits")
      yield* journal.appendLater(closing)
      return result
    }).pipe(Effect.onExit(endFailedAttempt(input, step, sent)))
  }

  /**
   * One model step with retries: each attempt is a step of its own; `onRetry` appends `model.retry`
   * and sets `session.status retry`. Fails with `RetryGaveUp` when retrying stops.
   */
  const run = (input: StepInput) =>
    Effect.gen(function* () {
      let step = input.step
      const once = Effect.suspend(() => {
        const current = step
        step += 1
        return attempt(input, current)
      }).pipe(
        Effect.catchAll(
          (error): Effect.Effect<StepResult | Carried, ModelError> =>
            error._tag === "ModelError" ? Effect.fail(error) : Effect.succeed({ _tag: "Carried", error })
        )
      )
      const driver = yield* retry.driver({ onRetry: recordRetry(input.journal) })
      // the schedule runs from the first failure on: its first input is that failure, then each
      // attempt after it (as `Effect.retryOrElse(once, driver, gaveUp)`, without its machinery on
      // the way of a step that succeeds at once, which most do)
      const result = yield* Effect.catchAll(once, (first) => {
        let told = false
        const attempts = Effect.suspend(() => {
          if (told) return once
          told = true
          return Effect.fail(first)
        })
        return Effect.retryOrElse(attempts, driver, gaveUp)
      })
      if ("_tag" in result && result._tag === "Carried") return yield* Effect.fail(result.error)
      return result as StepResult
    })

  // spans for the callers of these methods (when traced: `tracedFn`): `run` calls its own `attempt`
  // directly, so a turn's attempts are not spans of their own (each attempt's model request has its
  // `chat <model>` span)
  return {
    attempt: tracedFn(Effect.fn("Processor.attempt")(attempt), attempt),
    run: tracedFn(Effect.fn("Processor.run")(run), run)
  }
}

/** One model step: stream -> events, ToolPart transitions, retry, cleanup. */
export class Processor extends Context.Tag("logbook/Processor")<
  Processor,
  {
    /** one attempt of a step (no retry) */
    readonly attempt: (input: StepInput, step: number) => Effect.Effect<StepResult, ModelError | RestoreError>
    /** a step with retries; returns the successful attempt's result */
    readonly run: (input: StepInput) => Effect.Effect<StepResult, RetryGaveUp | RestoreError>
  }
>() {
  static readonly layer: Layer.Layer<Processor, never, Model | Retry | EventStore | Secrets> = Layer.effect(
    Processor,
    Effect.map(Effect.all([Model, Retry, Secrets, EventStore]), ([model, retry, secrets, store]) =>
      makeProcessor(model, retry, secrets, store)
    )
  )
}
