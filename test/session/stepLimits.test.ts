/**
 * The bounds of one model step, in process (Sessions -> Processor -> scripted Model, memory store):
 * a model that streams without end is stopped at `step.maxOutputBytes` and its turn ends
 * `output-limit`; the calls of one reply past `step.maxToolCalls` are answered as refused. Either
 * way the session ends idle and the next request's history is valid.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option, Schema, Stream } from "effect"
import type { Envelope } from "../../src/domain/Events.js"
import type { SessionId } from "../../src/domain/Ids.js"
import { ModelEvent } from "../../src/model/Model.js"
import { layerScripted, Script, ScriptedModel, type ScriptStep } from "../../src/model/Scripted.js"
import { makeAgentLayer } from "../../src/session/Agent.js"
import { unansweredCalls, validateHistory } from "../../src/session/History.js"
import { Sessions } from "../../src/session/Sessions.js"
import { defaultStepLimits, makeOutputMeter, type StepLimits } from "../../src/session/StepLimits.js"
import { EventStore } from "../../src/store/EventStore.js"
import { Secrets } from "../../src/tools/Secrets.js"
import { defineTool } from "../../src/tools/Tools.js"

const echo = defineTool({
  name: "echo",
  description: "echoes its text",
  input: Schema.Struct({ text: Schema.String }),
  execute: (input) => Effect.succeed({ output: `echo: ${input.text}` })
})

const layer = (script: ReadonlyArray<ScriptStep>, step?: Partial<StepLimits>) =>
  makeAgentLayer({
    sessions: { maxSteps: 10, system: () => "system", ...(step === undefined ? {} : { step }) },
    tools: { tools: [echo] },
    retry: { maxAttempts: 2, initialDelayMs: 1, maxDelayMs: 2, maxRetryAfterMs: 1000, budgetMs: 60_000 }
  }).pipe(
    Layer.provideMerge(layerScripted(script)),
    Layer.provide(Secrets.layer({ hide: [] })),
    Layer.provideMerge(EventStore.layerMemory)
  )

const events = (sessionId: SessionId) =>
  Effect.flatMap(EventStore, (store) => Stream.runCollect(store.read(sessionId))).pipe(
    Effect.map((chunk) => Array.from(chunk) as Array<Envelope>)
  )

const ofType = <T extends Envelope["type"]>(log: ReadonlyArray<Envelope>, type: T) =>
  log.filter((e): e is Extract<Envelope, { type: T }> => e.type === type)

/** Sends `text` to session `id` (a new one when undefined) and waits for its turn to end. */
const turn = (text: string, id?: SessionId) =>
  Effect.gen(function* () {
    const sessions = yield* Sessions
    const sessionId = id ?? (yield* sessions.create({ cwd: "/tmp" }))
    yield* sessions.send(sessionId, text)
    const outcome = Option.getOrThrow(yield* sessions.wait(sessionId))
    return { id: sessionId, outcome, state: yield* sessions.state(sessionId), log: yield* events(sessionId) }
  })

const requests = Effect.flatMap(ScriptedModel, (m) => m.requests)

/** The bytes of every text and reasoning delta of a log, in UTF-8. */
const outputBytes = (log: ReadonlyArray<Envelope>) =>
  log.reduce(
    (sum, e) =>
      e.type === "text.delta" || e.type === "reasoning.delta" ? sum + Buffer.byteLength(e.payload.delta) : sum,
    0
  )

const text = (delta: string) => ModelEvent.TextDelta({ id: "t", delta })
const reasoning = (delta: string) => ModelEvent.ReasoningDelta({ id: "r", delta })

describe("step.maxOutputBytes", () => {
  it.live("an endless stream is stopped at the bound: the turn ends output-limit, idle, the next turn goes on", () =>
    Effect.gen(function* () {
      const first = yield* turn("go")
      expect(first.outcome.reason).toBe("output-limit")
      expect(first.outcome.message).toMatch(/passed its limit of 1000 bytes \(step\.maxOutputBytes\)/)
      // what fits is kept, to the byte; nothing past it
      expect(outputBytes(first.log)).toBe(1000)
      expect(ofType(first.log, "step.finished").map((e) => e.payload.finishReason)).toEqual(["output-limit"])
      expect(ofType(first.log, "assistant.completed").map((e) => e.payload.finishReason)).toEqual(["output-limit"])
      expect(ofType(first.log, "turn.finished").map((e) => e.payload.reason)).toEqual(["output-limit"])
      expect(first.state.status._tag).toBe("idle")
      expect(first.state.chatState).toBe("idle")

      const second = yield* turn("again", first.id)
      expect(second.outcome.reason).toBe("stop")
      const sent = yield* requests
      expect(sent).toHaveLength(2)
      for (const request of sent) expect(validateHistory(request.messages)).toEqual([])
      // the stopped step's text is the model's answer of the first turn
      const answer = sent[1]!.messages[1]
      expect(answer?.role).toBe("assistant")
      const kept =
        answer?.role === "assistant" ? answer.parts.map((p) => (p.type === "text" ? p.text : "")).join("") : ""
      expect(kept).toBe("0123456789".repeat(100))
    }).pipe(
      Effect.provide(
        layer([{ events: [reasoning("")], repeat: [text("0123456789")] }, Script.text("back")], {
          maxOutputBytes: 1000
        })
      )
    )
  )

  it.live("reasoning and tool-call input count too; the step's calls do not run and each is answered", () =>
    Effect.gen(function* () {
      const first = yield* turn("go")
      expect(first.outcome.reason).toBe("output-limit")
      expect(ofType(first.log, "tool.invoked")).toEqual([])
      const failed = ofType(first.log, "tool.failed")
      expect(failed.map((e) => e.payload.callId).sort()).toEqual(["done", "endless"])
      for (const e of failed) {
        expect(e.payload).toMatchObject({ reason: "output-limit", interrupted: true })
        expect(e.payload.error).toMatch(/Not run: .*step\.maxOutputBytes/)
      }
      // the complete call keeps its input
      expect(failed.find((e) => e.payload.callId === "done")?.payload.input).toEqual({ text: "x" })
      expect(first.state.status._tag).toBe("idle")

      yield* turn("again", first.id)
      const sent = yield* requests
      expect(validateHistory(sent[1]!.messages)).toEqual([])
      expect(unansweredCalls(sent[1]!.messages)).toEqual([])
    }).pipe(
      Effect.provide(
        layer(
          [
            {
              // reasoning, one complete call, then a call whose input never ends
              events: [
                reasoning("thinking "),
                ...Script.toolCall({ callId: "done", tool: "echo", input: { text: "x" } }),
                ModelEvent.ToolInputStart({ callId: "endless", tool: "echo" })
              ],
              repeat: [ModelEvent.ToolInputDelta({ callId: "endless", delta: "aaaaaaaa" })]
            },
            Script.text("back")
          ],
          { maxOutputBytes: 2000 }
        )
      )
    )
  )

  it.live("a replayed step that ended output-limit ends so again: its calls do not run, the turn ends", () =>
    Effect.gen(function* () {
      const { log, outcome } = yield* turn("go")
      expect(outcome.reason).toBe("output-limit")
      expect(ofType(log, "tool.invoked")).toEqual([])
      expect(ofType(log, "tool.failed").map((e) => e.payload.reason)).toEqual(["output-limit"])
      expect(ofType(log, "step.finished").map((e) => e.payload.finishReason)).toEqual(["output-limit"])
    }).pipe(
      Effect.provide(
        layer([
          {
            events: [
              text("partial"),
              ...Script.toolCall({ callId: "c1", tool: "echo", input: { text: "x" } }),
              Script.finish("output-limit")
            ]
          }
        ])
      )
    )
  )

  it.live("a model that streams without end by default is stopped at the default bound", () =>
    Effect.gen(function* () {
      const { log, outcome } = yield* turn("go")
      expect(outcome.reason).toBe("output-limit")
      expect(outputBytes(log)).toBe(defaultStepLimits.maxOutputBytes)
    }).pipe(Effect.provide(layer([{ events: [], repeat: [text("x".repeat(64 * 1024))] }])))
  )
})

describe("step.maxToolCalls", () => {
  const calls = Array.from({ length: 500 }, (_, i) => ({ callId: `c${i}`, tool: "echo", input: { text: `${i}` } }))

  it.live("a reply of 500 calls with the cap at 10: 10 run, 490 are refused, every call has a result", () =>
    Effect.gen(function* () {
      const { id, log, outcome, state } = yield* turn("many")
      expect(outcome.reason).toBe("stop")
      expect(state.status._tag).toBe("idle")
      expect(ofType(log, "tool.invoked").map((e) => e.payload.callId)).toEqual(calls.slice(0, 10).map((c) => c.callId))
      expect(ofType(log, "tool.finished")).toHaveLength(10)
      const refused = ofType(log, "tool.failed")
      expect(refused.map((e) => e.payload.callId)).toEqual(calls.slice(10).map((c) => c.callId))
      for (const e of refused) {
        expect(e.payload.error).toMatch(/more than 10 tool calls.*step\.maxToolCalls/)
        expect(e.payload.interrupted).toBeUndefined()
      }
      // the refused call's input is kept as the model sent it
      expect(refused[0]!.payload.input).toEqual({ text: "10" })

      const sent = yield* requests
      expect(sent).toHaveLength(2)
      expect(validateHistory(sent[1]!.messages)).toEqual([])
      expect(unansweredCalls(sent[1]!.messages)).toEqual([])
      const results = sent[1]!.messages.flatMap((m) => (m.role === "tool" ? m.results : []))
      expect(results).toHaveLength(500)
      expect(results.filter((r) => r.isError)).toHaveLength(490)
      expect(id).toBeDefined()
    }).pipe(Effect.provide(layer([Script.toolCalls(calls), Script.text("done")], { maxToolCalls: 10 })))
  )

  it.live("by default a step runs at most 64 calls", () =>
    Effect.gen(function* () {
      const { log } = yield* turn("many")
      expect(ofType(log, "tool.invoked")).toHaveLength(defaultStepLimits.maxToolCalls)
      expect(ofType(log, "tool.failed")).toHaveLength(100 - defaultStepLimits.maxToolCalls)
    }).pipe(Effect.provide(layer([Script.toolCalls(calls.slice(0, 100)), Script.text("done")])))
  )
})

describe("makeOutputMeter", () => {
  it("cuts a delta at the bound on a character boundary, counting UTF-8 bytes", () => {
    const meter = makeOutputMeter(10)
    expect(meter.take(text("abcd"))).toEqual(text("abcd"))
    // "é" is 2 bytes, "😀" 4: 4 + 2 + 2 = 8 fits, the emoji does not
    expect(meter.take(text("éé😀z"))).toEqual(text("éé"))
    expect(meter.reached).toBe(true)
    expect(meter.take(text("z"))).toBeUndefined()
  })

  it("counts a call's input once: its deltas, then what its whole call adds", () => {
    const meter = makeOutputMeter(20)
    const input = '{"text":"0123456"}' // 18 bytes
    expect(meter.take(ModelEvent.ToolInputDelta({ callId: "a", delta: input }))).toBeDefined()
    const call = ModelEvent.ToolCall({ callId: "a", tool: "echo", input: { text: "0123456" }, inputText: input })
    expect(meter.take(call)).toEqual(call)
    expect(meter.reached).toBe(false)
    // a call sent whole (no deltas) counts its input: 18 more do not fit
    expect(meter.take({ ...call, callId: "b" })).toBeUndefined()
    expect(meter.reached).toBe(true)
  })
})
