/**
 * Replay: the request the model received at a point of a session, rebuilt from the
 * log — the system prompt and tool schemas from the step's `prompt.recorded` blob, the messages from
 * the projection as it was when the step started (`toModelMessages`, exactly as the kernel built
 * them) — and the proof that it is the same: the digest of the rebuilt request against the
 * `requestDigest` its step recorded (`requestDigestOf`).
 *
 * What cannot be proved is said, never guessed: a log older than request digests, a step whose
 * prompt was never recorded (a crash before the request went out), a digest that does not match
 * (the history code changed since, or the log was altered).
 */
import { Effect, Either, Option, Schema, Stream } from "effect"
import type { Envelope } from "../domain/Events.js"
import type { MessageId, SessionId } from "../domain/Ids.js"
import type { ModelMessage, ModelTool } from "../model/Model.js"
import { hashContent } from "../store/blobHash.js"
import { EventStore } from "../store/EventStore.js"
import * as Projection from "../store/Projection.js"
import { providerOf, toModelMessages } from "./History.js"
import { requestDigestOf } from "./PromptVersion.js"

/** Which request: the one of the step running at `seq` (the last one started at or before it), or the `index`-th. */
export type ReplayPoint =
  | { readonly _tag: "at"; readonly seq: number }
  | { readonly _tag: "index"; readonly index: number }
  | { readonly _tag: "last" }

/** How the rebuilt request compares with the one sent. */
export type ReplayProof =
  | { readonly _tag: "same"; readonly digest: string }
  | { readonly _tag: "different"; readonly digest: string; readonly recorded: string }
  | { readonly _tag: "unknown"; readonly digest: string | undefined; readonly why: string }

export interface ReplayedRequest {
  readonly sessionId: SessionId
  /** 1-based, counting every model request of the session (retried attempts included) */
  readonly index: number
  /** how many requests the session made */
  readonly count: number
  /** the seq of the step's `step.started` */
  readonly seq: number
  readonly messageId: MessageId
  /** the step number within its assistant message */
  readonly step: number
  readonly at: number
  readonly model: string | undefined
  readonly promptVersion: string | undefined
  /** absent when the step's prompt is not in the log */
  readonly system: string | null | undefined
  readonly tools: ReadonlyArray<ModelTool> | undefined
  readonly messages: ReadonlyArray<ModelMessage>
  /** the session id: the key providers route prompt caching by */
  readonly cacheKey: string
  readonly proof: ReplayProof
}

/** There is no request at that point, or the session has none. */
export class ReplayUnavailable extends Schema.TaggedError<ReplayUnavailable>()("ReplayUnavailable", {
  sessionId: Schema.String,
  message: Schema.String
}) {}

const PromptDocument = Schema.parseJson(
  Schema.Struct({
    system: Schema.NullOr(Schema.String),
    tools: Schema.Array(Schema.Struct({ name: Schema.String, description: Schema.String, inputSchema: Schema.Unknown }))
  })
)

/** The request of one step, rebuilt (see the module doc). */
export const replayRequest = Effect.fn("Replay.request")(function* (sessionId: SessionId, point: ReplayPoint) {
  const store = yield* EventStore
  const envelopes: Array<Envelope> = []
  yield* store.read(sessionId).pipe(Stream.runForEach((env) => Effect.sync(() => envelopes.push(env))))
  const started = envelopes.filter(
    (env): env is Envelope & { readonly type: "step.started" } => env.type === "step.started"
  )
  if (started.length === 0)
    return yield* new ReplayUnavailable({ sessionId, message: `session ${sessionId} sent no request to a model` })
  let index: number
  switch (point._tag) {
    case "last":
      index = started.length
      break
    case "index":
      if (point.index < 1 || point.index > started.length)
        return yield* new ReplayUnavailable({
          sessionId,
          message: `session ${sessionId} has steps 1 to ${started.length}; there is no step ${point.index}`
        })
      index = point.index
      break
    case "at": {
      const before = started.filter((env) => env.seq <= point.seq)
      if (before.length === 0)
        return yield* new ReplayUnavailable({
          sessionId,
          message: `no request was made at or before seq ${point.seq}: the first step starts at seq ${started[0]!.seq}`
        })
      index = before.length
      break
    }
  }
  const start = started[index - 1]!
  const { messageId, step } = start.payload
  // the state the kernel built the request from: everything up to the step's step.started
  const state = yield* Either.match(Projection.applyAll(Projection.empty(sessionId), envelopes.slice(0, start.seq)), {
    onLeft: (error) => Effect.die(error),
    onRight: Effect.succeed
  })
  const assistant = state.messages.find((m) => m.id === messageId)
  const model = assistant?.role === "assistant" ? assistant.model : undefined
  const messages = toModelMessages(state, { includeReasoning: model === undefined ? false : providerOf(model) })

  // the step's end names the prompt version and the digest of what it sent
  const finished = envelopes.find(
    (env): env is Envelope & { readonly type: "step.finished" } =>
      env.type === "step.finished" &&
      env.seq > start.seq &&
      env.payload.messageId === messageId &&
      env.payload.step === step
  )
  const promptVersion = finished?.payload.promptVersion
  const recordedDigest = finished?.payload.requestDigest
  const recorded =
    promptVersion === undefined
      ? undefined
      : envelopes.find(
          (env): env is Envelope & { readonly type: "prompt.recorded" } =>
            env.type === "prompt.recorded" && env.payload.promptVersion === promptVersion
        )
  const stored = recorded === undefined ? Option.none() : yield* store.getBlob(recorded.payload.blob)
  // a blob is named by the SHA-256 of its bytes: one that is not (an altered database) is not the prompt
  const blob = Option.filter(stored, (bytes) => hashContent(bytes) === recorded?.payload.blob)
  const document = Option.flatMap(blob, (bytes) =>
    Either.getRight(Schema.decodeUnknownEither(PromptDocument)(Buffer.from(bytes).toString("utf8")))
  )
  const unknown = (why: string, digest?: string): ReplayProof => ({ _tag: "unknown", digest, why })
  let proof: ReplayProof
  if (finished === undefined) proof = unknown("the step has not ended in the log (it is still running)")
  else if (promptVersion === undefined)
    proof = unknown(
      "the step recorded no prompt version: its request was never sent (the process died first), or the log is older than prompt versions"
    )
  else if (recorded === undefined) proof = unknown(`prompt ${promptVersion} was never recorded in this session`)
  else if (Option.isNone(document))
    proof = unknown(`the blob ${recorded.payload.blob} of prompt ${promptVersion} is missing or not a prompt document`)
  else {
    const digest = requestDigestOf(recorded.payload.blob, messages)
    proof =
      recordedDigest === undefined
        ? unknown("the log is older than request digests: the rebuilt request cannot be compared", digest)
        : recordedDigest === digest
          ? { _tag: "same", digest }
          : { _tag: "different", digest, recorded: recordedDigest }
  }
  return {
    sessionId,
    index,
    count: started.length,
    seq: start.seq,
    messageId,
    step,
    at: start.at,
    model,
    promptVersion,
    system: Option.match(document, { onNone: () => undefined, onSome: (d) => d.system }),
    tools: Option.match(document, {
      onNone: () => undefined,
      onSome: (d) =>
        d.tools.map((tool) => ({
          name: tool.name,
          description: tool.description,
          inputSchema: tool.inputSchema as ModelTool["inputSchema"]
        }))
    }),
    messages,
    cacheKey: sessionId,
    proof
  } satisfies ReplayedRequest
})
