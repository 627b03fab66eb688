import { describe, expect, it } from "@effect/vitest"
import { Cause, Chunk, Deferred, Effect, Exit, Fiber, Option, Stream } from "effect"
import { Model, ModelError, ModelEvent, type ModelRequest } from "../../src/model/Model.js"
import { layerScripted, Script, ScriptedModel } from "../../src/model/Scripted.js"

const ask = (content: string): ModelRequest => ({ messages: [{ role: "user", content }], tools: [] })

const collect = (request: ModelRequest) =>
  Effect.flatMap(Model, (model) => Stream.runCollect(model.stream(request))).pipe(Effect.map(Chunk.toArray))

describe("layerScripted", () => {
  it.effect("plays one step per request, in order, and records the requests", () =>
    Effect.gen(function* () {
      const first = yield* collect(ask("one"))
      const second = yield* collect(ask("two"))
      expect(first).toEqual([
        ModelEvent.ToolInputStart({ callId: "c1", tool: "read" }),
        ModelEvent.ToolInputDelta({ callId: "c1", delta: '{"path":"a.txt"}' }),
        ModelEvent.ToolCall({ callId: "c1", tool: "read", input: { path: "a.txt" }, inputText: '{"path":"a.txt"}' }),
        ModelEvent.Finish({
          finishReason: "tool-calls",
          usage: { input: 10, output: 5, reasoning: 0, cacheRead: 0, cacheWrite: 0 }
        })
      ])
      expect(second).toEqual([
        ModelEvent.TextDelta({ id: "text-0", delta: "do" }),
        ModelEvent.TextDelta({ id: "text-0", delta: "ne" }),
        Script.finish("stop")
      ])
      const handle = yield* ScriptedModel
      const requests = yield* handle.requests
      expect(requests.map((r) => r.messages[0])).toEqual([
        { role: "user", content: "one" },
        { role: "user", content: "two" }
      ])
      expect(yield* handle.remaining).toBe(0)
      expect((yield* Model).name).toBe("scripted/model")
    }).pipe(
      Effect.provide(
        layerScripted([
          Script.toolCalls([{ callId: "c1", tool: "read", input: { path: "a.txt" } }], {
            usage: { input: 10, output: 5 }
          }),
          Script.text("done", { chunks: 2 })
        ])
      )
    )
  )

  it.effect("fails with the step's error after the first failAfter events", () =>
    Effect.gen(function* () {
      const model = yield* Model
      const seen: Array<ModelEvent> = []
      const exit = yield* model.stream(ask("x")).pipe(
        Stream.runForEach((e) => Effect.sync(() => seen.push(e))),
        Effect.exit
      )
      expect(seen).toEqual([ModelEvent.TextDelta({ id: "t", delta: "a" })])
      expect(Exit.isFailure(exit) && Cause.failureOption(exit.cause)).toEqual(
        Option.some(new ModelError({ reason: "http", message: "rate limited", status: 429 }))
      )
    }).pipe(
      Effect.provide(
        layerScripted([
          {
            events: [ModelEvent.TextDelta({ id: "t", delta: "a" }), ModelEvent.TextDelta({ id: "t", delta: "b" })],
            error: new ModelError({ reason: "http", message: "rate limited", status: 429 }),
            failAfter: 1
          }
        ])
      )
    )
  )

  it.effect("Script.fail fails at once; the next request gets the next step", () =>
    Effect.gen(function* () {
      const first = yield* Effect.either(collect(ask("1")))
      expect(first._tag === "Left" && first.left.reason).toBe("stream-cut")
      expect(yield* collect(ask("2"))).toHaveLength(2)
    }).pipe(
      Effect.provide(
        layerScripted([Script.fail(new ModelError({ reason: "stream-cut", message: "cut" })), Script.text("ok")])
      )
    )
  )

  it.effect("a hanging step ends only by interruption", () =>
    Effect.gen(function* () {
      const model = yield* Model
      const started = yield* Deferred.make<void>()
      const fiber = yield* model.stream(ask("x")).pipe(
        Stream.runForEach(() => Deferred.succeed(started, undefined)),
        Effect.fork
      )
      yield* Deferred.await(started)
      const exit = yield* Fiber.interrupt(fiber)
      expect(Exit.isInterrupted(exit)).toBe(true)
    }).pipe(Effect.provide(layerScripted([{ events: [ModelEvent.TextDelta({ id: "t", delta: "…" })], hang: true }])))
  )

  it.effect("a request past the end of the script is a defect naming the request", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(collect(ask("extra")))
      expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
      expect(Exit.isFailure(exit) && Cause.pretty(exit.cause)).toContain("request 1 has no step")
    }).pipe(Effect.provide(layerScripted([])))
  )

  it.effect("each layer build starts its script from the beginning", () =>
    Effect.gen(function* () {
      const layer = layerScripted([Script.text("same")], { name: "test/scripted" })
      for (let i = 0; i < 2; i++) {
        const events = yield* collect(ask("q")).pipe(Effect.provide(layer))
        expect(events[0]).toEqual(ModelEvent.TextDelta({ id: "text-0", delta: "same" }))
      }
      const name = yield* Effect.map(Model, (m) => m.name).pipe(Effect.provide(layer))
      expect(name).toBe("test/scripted")
    })
  )
})
