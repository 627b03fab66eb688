/**
 * `Model` from a script, for unit tests: each `stream` call takes the next step of the script and
 * emits its events, then ends, fails with its error (optionally after the first `failAfter` events),
 * hangs until interrupted, or (`repeat`) streams more events without end, as a runaway model does. Every request is recorded. Deterministic: no timers, no I/O.
 *
 * ```ts
 * const layer = layerScripted([
 *   Script.toolCalls([{ callId: "c1", tool: "read", input: { path: "a.txt" } }]),
 *   Script.text("done")
 * ])
 * // in the test: const { requests } = yield* ScriptedModel
 * ```
 */
import { Context, Effect, Layer, Ref, Stream } from "effect"
import { Model, type ModelError, ModelEvent, type ModelRequest, type ModelUsage } from "./Model.js"

export interface ScriptStep {
  /** the events of this step, in order (a well-formed step ends with a `Finish`) */
  readonly events: ReadonlyArray<ModelEvent>
  /** fail with this error after the events (or after the first `failAfter` of them) */
  readonly error?: ModelError | undefined
  /** with `error`: how many events go out before it (default: all) */
  readonly failAfter?: number | undefined
  /** without `error`: after the events, never end (until the stream is interrupted) */
  readonly hang?: boolean | undefined
  /** without `error`: after the events, these again and again, never ending (until the stream is interrupted) */
  readonly repeat?: ReadonlyArray<ModelEvent> | undefined
}

/** The handle a test uses to see what the scripted model was sent. */
export class ScriptedModel extends Context.Tag("logbook/ScriptedModel")<
  ScriptedModel,
  {
    /** every request received, in order */
    readonly requests: Effect.Effect<ReadonlyArray<ModelRequest>>
    /** steps not used yet */
    readonly remaining: Effect.Effect<number>
  }
>() {}

export const zeroUsage: ModelUsage = { input: 0, output: 0, reasoning: 0, cacheRead: 0, cacheWrite: 0 }

/** Builders for the usual steps. */
export const Script = {
  finish: (finishReason = "stop", usage: Partial<ModelUsage> = {}): ModelEvent =>
    ModelEvent.Finish({ finishReason, usage: { ...zeroUsage, ...usage } }),

  /** text split into `chunks` deltas of the text part `id`, then a `stop` finish */
  text: (
    text: string,
    options: { readonly chunks?: number; readonly id?: string; readonly usage?: Partial<ModelUsage> } = {}
  ): ScriptStep => {
    const chunks = Math.max(1, options.chunks ?? 1)
    const size = Math.max(1, Math.ceil(text.length / chunks))
    const events: Array<ModelEvent> = []
    for (let i = 0; i < text.length; i += size) {
      events.push(ModelEvent.TextDelta({ id: options.id ?? "text-0", delta: text.slice(i, i + size) }))
    }
    events.push(Script.finish("stop", options.usage))
    return { events }
  },

  /** the events of one tool call: start, one input delta, the call */
  toolCall: (call: { readonly callId: string; readonly tool: string; readonly input: unknown }): Array<ModelEvent> => {
    const inputText = JSON.stringify(call.input)
    return [
      ModelEvent.ToolInputStart({ callId: call.callId, tool: call.tool }),
      ModelEvent.ToolInputDelta({ callId: call.callId, delta: inputText }),
      ModelEvent.ToolCall({ callId: call.callId, tool: call.tool, input: call.input, inputText })
    ]
  },

  /** a step that calls these tools (optionally after some text), then a `tool-calls` finish */
  toolCalls: (
    calls: ReadonlyArray<{ readonly callId: string; readonly tool: string; readonly input: unknown }>,
    options: { readonly text?: string; readonly usage?: Partial<ModelUsage> } = {}
  ): ScriptStep => ({
    events: [
      ...(options.text === undefined ? [] : [ModelEvent.TextDelta({ id: "text-0", delta: options.text })]),
      ...calls.flatMap(Script.toolCall),
      Script.finish("tool-calls", options.usage)
    ]
  }),

  /** a step that fails at once (or after `events`) */
  fail: (error: ModelError, events: ReadonlyArray<ModelEvent> = []): ScriptStep => ({ events, error })
} as const

/** The scripted `Model` service and its handle. */
export const makeScripted = (
  script: ReadonlyArray<ScriptStep>,
  options: { readonly name?: string } = {}
): Effect.Effect<{ readonly model: Model["Type"]; readonly handle: ScriptedModel["Type"] }> =>
  Effect.gen(function* () {
    const received = yield* Ref.make<ReadonlyArray<ModelRequest>>([])
    const name = options.name ?? "scripted/model"
    const stream = (request: ModelRequest): Stream.Stream<ModelEvent, ModelError> =>
      Stream.unwrap(
        Ref.modify(received, (requests) => [requests.length, [...requests, request]]).pipe(
          Effect.map((index) => {
            const step = script[index]
            if (step === undefined) {
              return Stream.dieMessage(
                `scripted model: request ${index + 1} has no step (the script has ${script.length})`
              )
            }
            if (step.error !== undefined) {
              const before = step.events.slice(0, step.failAfter ?? step.events.length)
              return Stream.concat(Stream.fromIterable(before), Stream.fail(step.error))
            }
            const events = Stream.fromIterable(step.events)
            if (step.repeat !== undefined)
              return Stream.concat(events, Stream.forever(Stream.fromIterable(step.repeat)))
            return step.hang === true ? Stream.concat(events, Stream.never) : events
          })
        )
      )
    return {
      model: { name, stream },
      handle: {
        requests: Ref.get(received),
        remaining: Effect.map(Ref.get(received), (requests) => Math.max(0, script.length - requests.length))
      }
    }
  })

/** `Model` and `ScriptedModel` from a script. */
export const layerScripted = (
  script: ReadonlyArray<ScriptStep>,
  options: { readonly name?: string } = {}
): Layer.Layer<Model | ScriptedModel> =>
  Layer.effectContext(
    Effect.map(makeScripted(script, options), ({ handle, model }) =>
      Context.make(Model, model).pipe(Context.add(ScriptedModel, handle))
    )
  )
