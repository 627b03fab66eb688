/**
 * The Processor's pipeline (`consumeBatched`): the model's stream in batches of what arrived while
 * the previous batch was handled, stopped between two batches by a steer. Driven by Deferreds and
 * Queues, never by time: each test says when the stream may go on.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Deferred, Effect, Exit, Fiber, Option, Queue, Ref, Stream } from "effect"
import { ModelEvent } from "../../src/model/Model.js"
import {
  consumeBatched,
  MAX_BATCH,
  makeSteer,
  type Steer,
  signalSteer
} from "../../src/session/internal/modelReader.js"
import { fromPull, type OpenPull } from "../../src/stream/internal/pull.js"
import { FiberCount } from "../support/fiberCount.js"

const delta = (text: string): ModelEvent => ModelEvent.TextDelta({ id: "t", delta: text })
const texts = (batch: Chunk.Chunk<ModelEvent>) =>
  Chunk.toReadonlyArray(batch).map((event) => (event._tag === "TextDelta" ? event.delta : event._tag))
/** a stream of no elements that runs `effect` when it is reached */
const step = <E>(effect: Effect.Effect<unknown, E>) => Stream.drain(Stream.fromEffect(effect))

describe("consumeBatched", () => {
  it.effect("what arrives while a batch is handled is the next batch, whole", () =>
    Effect.gen(function* () {
      const busy = yield* Deferred.make<void>()
      const queued = yield* Deferred.make<void>()
      // d1, then (once the handler holds d1) d2, d3, d4 as three chunks of their own
      const stream = Stream.make(delta("d1")).pipe(
        Stream.concat(step(Deferred.await(busy))),
        Stream.concat(Stream.make(delta("d2"))),
        Stream.concat(Stream.make(delta("d3"))),
        Stream.concat(Stream.make(delta("d4"))),
        Stream.concat(step(Deferred.succeed(queued, undefined)))
      )
      const batches: Array<ReadonlyArray<string>> = []
      yield* consumeBatched(stream, (batch) =>
        Effect.gen(function* () {
          batches.push(texts(batch))
          if (batches.length === 1) {
            yield* Deferred.succeed(busy, undefined)
            yield* Deferred.await(queued)
          }
        })
      )
      expect(batches).toEqual([["d1"], ["d2", "d3", "d4"]])
    })
  )

  it.effect("a chunk of the model's stream is one batch", () =>
    Effect.gen(function* () {
      const batches: Array<ReadonlyArray<string>> = []
      yield* consumeBatched(Stream.make(delta("a"), delta("b"), delta("c")), (batch) =>
        Effect.sync(() => batches.push(texts(batch)))
      )
      expect(batches).toEqual([["a", "b", "c"]])
    })
  )

  it.effect("an empty chunk (a provider part that makes no event) neither ends the stream nor makes a batch", () =>
    Effect.gen(function* () {
      const emptySent = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      // an empty chunk taken alone (the stream waits after it), then "a"
      const stream = Stream.make(delta("dropped")).pipe(
        Stream.filter(() => false),
        Stream.concat(step(Deferred.succeed(emptySent, undefined))),
        Stream.concat(step(Deferred.await(gate))),
        Stream.concat(Stream.make(delta("a")))
      )
      const batches: Array<ReadonlyArray<string>> = []
      const consuming = yield* Effect.fork(
        consumeBatched(stream, (batch) => Effect.sync(() => batches.push(texts(batch))))
      )
      // the consumer was woken by the empty chunk before this fiber by `emptySent`
      yield* Deferred.await(emptySent)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(consuming)
      expect(batches).toEqual([["a"]])
    })
  )

  it.effect("a slow stream: one batch per event, nothing waits for more to come", () =>
    Effect.gen(function* () {
      const input = yield* Queue.unbounded<ModelEvent>()
      const seen = yield* Queue.unbounded<ReadonlyArray<string>>()
      const stream = Stream.fromQueue(input).pipe(Stream.takeWhile((event) => event._tag !== "Finish"))
      const consuming = yield* Effect.fork(consumeBatched(stream, (batch) => Queue.offer(seen, texts(batch))))
      for (const text of ["one", "two", "three"]) {
        yield* Queue.offer(input, delta(text))
        expect(yield* Queue.take(seen)).toEqual([text])
      }
      yield* Queue.offer(input, ModelEvent.Finish({ finishReason: "stop", usage: noUsage }))
      expect(Exit.isSuccess(yield* Fiber.await(consuming))).toBe(true)
      expect(yield* Queue.size(seen)).toBe(0)
    })
  )

  it.effect("a failure of the stream: what came before it is handled, then it fails with the stream's error", () =>
    Effect.gen(function* () {
      for (const withSteer of [false, true]) {
        const busy = yield* Deferred.make<void>()
        const steer = yield* Deferred.make<void>()
        // "a", then (once "a" is handled) "b", "c" and the failure at once
        const stream = Stream.make(delta("a")).pipe(
          Stream.concat(step(Deferred.await(busy))),
          Stream.concat(Stream.make(delta("b"), delta("c"))),
          Stream.concat(Stream.fail("cut" as const))
        )
        const handled: Array<string> = []
        const exit = yield* consumeBatched(
          stream,
          (batch) =>
            Effect.sync(() => handled.push(...texts(batch))).pipe(Effect.zipRight(Deferred.succeed(busy, undefined))),
          withSteer ? steer : undefined
        ).pipe(Effect.exit)
        expect(handled).toEqual(["a", "b", "c"])
        expect(exit).toEqual(Exit.fail("cut"))
      }
    })
  )

  it.effect(
    "a burst bigger than the mailbox: every event handled once, in order, in batches of at most MAX_BATCH",
    () =>
      Effect.gen(function* () {
        for (const end of ["stop", "fail"] as const) {
          // one chunk of 2.5 × MAX_BATCH events (the reader waits for room twice), then the end
          const burst = Array.from({ length: Math.floor(MAX_BATCH * 2.5) }, (_, i) => delta(String(i)))
          const stream = Stream.fromIterable(burst).pipe(
            Stream.concat(end === "fail" ? Stream.fail("cut" as const) : Stream.empty)
          )
          const batches: Array<ReadonlyArray<string>> = []
          const exit = yield* consumeBatched(stream, (batch) => Effect.sync(() => batches.push(texts(batch)))).pipe(
            Effect.exit
          )
          expect(exit).toEqual(end === "fail" ? Exit.fail("cut") : Exit.void)
          expect(batches.flat()).toEqual(burst.map((_, i) => String(i)))
          expect(batches.length).toBeGreaterThanOrEqual(3)
          for (const batch of batches) expect(batch.length).toBeLessThanOrEqual(MAX_BATCH)
        }
      })
  )

  it.effect("a handler failure ends the stream with the handler's error", () =>
    Effect.gen(function* () {
      const closed = yield* Ref.make(false)
      const stream = Stream.make(delta("a")).pipe(Stream.concat(Stream.never), Stream.ensuring(Ref.set(closed, true)))
      const exit = yield* consumeBatched(stream, () => Effect.fail("store" as const)).pipe(Effect.exit)
      expect(exit).toEqual(Exit.fail("store"))
      expect(yield* Ref.get(closed)).toBe(true)
    })
  )
})

/** The two forms of a step's steer signal: the kernel's `Steer`, and a bare `Deferred` (awaited by a fiber). */
const steerKinds: ReadonlyArray<{
  readonly name: string
  readonly make: Effect.Effect<Steer | Deferred.Deferred<void>>
}> = [
  { name: "a Steer", make: makeSteer },
  { name: "a bare Deferred", make: Deferred.make<void>() }
]

/** Completes either form as its users do: `signalSteer` for a `Steer`. */
const signal = (steer: Steer | Deferred.Deferred<void>) =>
  Deferred.DeferredTypeId in steer ? Deferred.succeed(steer, undefined) : signalSteer(steer)

describe("consumeBatched: what a steer costs", () => {
  it.effect("a Steer needs no fiber of its own (the reader's only); a bare Deferred is awaited by one", () =>
    Effect.gen(function* () {
      const fibers = (steer: Steer | Deferred.Deferred<void>) =>
        Effect.gen(function* () {
          const count = new FiberCount()
          yield* consumeBatched(Stream.make(delta("a"), delta("b")), () => Effect.void, steer).pipe(
            Effect.supervised(count)
          )
          return count.started
        })
      expect(yield* fibers(yield* makeSteer)).toBe(1)
      expect(yield* fibers(yield* Deferred.make<void>())).toBe(2)
    })
  )
})

for (const kind of steerKinds) {
  describe(`consumeBatched with a steer (${kind.name})`, () => {
    it.effect("a steer during a batch: the batch is finished, no further batch starts, the stream is closed", () =>
      Effect.gen(function* () {
        const steer = yield* kind.make
        const busy = yield* Deferred.make<void>()
        const queued = yield* Deferred.make<void>()
        const log: Array<string> = []
        const stream = Stream.make(delta("a")).pipe(
          Stream.concat(step(Deferred.await(busy))),
          Stream.concat(Stream.make(delta("b"))),
          Stream.concat(step(Deferred.succeed(queued, undefined))),
          Stream.concat(Stream.never),
          Stream.ensuring(Effect.sync(() => log.push("stream closed")))
        )
        yield* consumeBatched(
          stream,
          (batch) =>
            Effect.gen(function* () {
              log.push(`batch ${texts(batch).join(",")}`)
              yield* Deferred.succeed(busy, undefined)
              yield* Deferred.await(queued)
              // the steer comes while this batch is handled: the batch goes on to its end
              yield* signal(steer)
              yield* Effect.yieldNow()
              log.push("batch done")
            }),
          steer
        )
        // "b" was queued, but no batch starts once the steer is done; the stream ended before this returned
        expect(log).toEqual(["batch a", "batch done", "stream closed"])
      })
    )

    it.effect("a steer while the model is silent stops the stream", () =>
      Effect.gen(function* () {
        const steer = yield* kind.make
        const seen = yield* Queue.unbounded<ReadonlyArray<string>>()
        const closed = yield* Ref.make(false)
        const stream = Stream.make(delta("a")).pipe(Stream.concat(Stream.never), Stream.ensuring(Ref.set(closed, true)))
        const consuming = yield* Effect.fork(consumeBatched(stream, (batch) => Queue.offer(seen, texts(batch)), steer))
        expect(yield* Queue.take(seen)).toEqual(["a"])
        yield* signal(steer)
        expect(Exit.isSuccess(yield* Fiber.await(consuming))).toBe(true)
        expect(yield* Ref.get(closed)).toBe(true)
      })
    )

    it.effect(
      "a steer while the reader waits for room in a full mailbox: that batch ends it, the stream is closed",
      () =>
        Effect.gen(function* () {
          const steer = yield* kind.make
          const closed = yield* Ref.make(false)
          // more than the mailbox holds, at once, then a model that never ends: the reader waits for room
          const stream = Stream.fromIterable(Array.from({ length: MAX_BATCH + 10 }, (_, i) => delta(String(i)))).pipe(
            Stream.concat(Stream.never),
            Stream.ensuring(Ref.set(closed, true))
          )
          const batches: Array<number> = []
          yield* consumeBatched(
            stream,
            (batch) => Effect.sync(() => batches.push(batch.length)).pipe(Effect.zipRight(signal(steer))),
            steer
          )
          expect(batches).toEqual([MAX_BATCH])
          expect(yield* Ref.get(closed)).toBe(true)
        })
    )

    it.effect(
      "a steer right after the stream failed, before its last events were taken: the step ends steered, not failed",
      () =>
        Effect.gen(function* () {
          // "a", then the failure; the steer comes from the pull's release (as the failure is read)
          // or from a fiber woken as the stream fails — before the consumer takes "a" either way
          for (const from of ["release", "fiber"] as const) {
            const steer = yield* kind.make
            const failing = yield* Deferred.make<void>()
            const open: OpenPull<ModelEvent, "cut"> = Effect.gen(function* () {
              yield* Effect.acquireRelease(Effect.void, () => (from === "release" ? signal(steer) : Effect.void))
              let n = 0
              return Effect.suspend(() =>
                n++ === 0
                  ? Effect.succeed(Chunk.of(delta("a")))
                  : Effect.zipRight(Deferred.succeed(failing, undefined), Effect.fail(Option.some("cut" as const)))
              )
            })
            const steering = yield* Effect.fork(
              from === "fiber" ? Effect.zipRight(Deferred.await(failing), signal(steer)) : Effect.void
            )
            const handled: Array<string> = []
            const exit = yield* consumeBatched(
              fromPull(open),
              (batch) => Effect.sync(() => handled.push(...texts(batch))),
              steer
            ).pipe(Effect.exit)
            yield* Fiber.join(steering)
            // the steer was first: no batch after it, and the stream's failure is not the step's
            expect(exit).toEqual(Exit.void)
            expect(["", "a"]).toContain(handled.join(""))
          }
        })
    )

    it.effect("a steer done before the stream starts: nothing is handled", () =>
      Effect.gen(function* () {
        const steer = yield* kind.make
        yield* signal(steer)
        const batches: Array<ReadonlyArray<string>> = []
        yield* consumeBatched(Stream.make(delta("a")), (batch) => Effect.sync(() => batches.push(texts(batch))), steer)
        expect(batches).toEqual([])
      })
    )

    it.effect("an interrupt during a batch waits for the batch; then the stream is closed", () =>
      Effect.gen(function* () {
        const steer = yield* kind.make
        const started = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const log: Array<string> = []
        const stream = Stream.make(delta("a")).pipe(
          Stream.concat(Stream.never),
          Stream.ensuring(Effect.sync(() => log.push("stream closed")))
        )
        const consuming = yield* Effect.fork(
          consumeBatched(
            stream,
            () =>
              Effect.gen(function* () {
                yield* Deferred.succeed(started, undefined)
                yield* Deferred.await(release)
                log.push("batch done")
              }),
            steer
          )
        )
        yield* Deferred.await(started)
        const interrupting = yield* Effect.fork(Fiber.interrupt(consuming))
        yield* Deferred.succeed(release, undefined)
        const exit = yield* Fiber.join(interrupting)
        expect(Exit.isInterrupted(exit)).toBe(true)
        expect(log).toEqual(["batch done", "stream closed"])
      })
    )
  })
}

const noUsage = { input: 0, output: 0, reasoning: 0, cacheRead: 0, cacheWrite: 0 }

/**
 * A model stream that keeps its pull (as the AI SDK layer's does): each read takes the next of
 * `reads` (a chunk, or an effect that gives one or fails), then the end; what it opened logs its release.
 */
const keptPull = <E>(
  reads: ReadonlyArray<ReadonlyArray<ModelEvent> | Effect.Effect<ReadonlyArray<ModelEvent>, E>>,
  log: Array<string>
) => {
  const open: OpenPull<ModelEvent, E> = Effect.gen(function* () {
    yield* Effect.acquireRelease(Effect.void, () => Effect.sync(() => log.push("released")))
    let next = 0
    return Effect.suspend(() => {
      log.push("read")
      const read = reads[next++]
      if (read === undefined) return Effect.fail(Option.none())
      const chunk = Effect.isEffect(read) ? read : Effect.succeed(read)
      return Effect.mapBoth(chunk, { onFailure: Option.some, onSuccess: Chunk.fromIterable })
    })
  })
  return fromPull(open)
}

describe("consumeBatched over a stream that keeps its pull", () => {
  it.effect("each read is one call of the pull; the pull's scope is released before it returns", () =>
    Effect.gen(function* () {
      const log: Array<string> = []
      const stream = keptPull([[delta("a"), delta("b")], [], [delta("c")]], log)
      const handled: Array<string> = []
      yield* consumeBatched(stream, (batch) => Effect.sync(() => handled.push(...texts(batch))))
      // three chunks and the end, each read once (how the reader, running ahead, splits them into
      // batches is the scheduler's; the empty one makes no event)
      expect(handled).toEqual(["a", "b", "c"])
      expect(log).toEqual(["read", "read", "read", "read", "released"])
    })
  )

  it.effect("a failure of the pull: what came before it is handled, then it fails with the error", () =>
    Effect.gen(function* () {
      const log: Array<string> = []
      const stream = keptPull<"cut">([[delta("a")], Effect.fail("cut" as const)], log)
      const handled: Array<string> = []
      const exit = yield* consumeBatched(stream, (batch) => Effect.sync(() => handled.push(...texts(batch)))).pipe(
        Effect.exit
      )
      expect(handled).toEqual(["a"])
      expect(exit).toEqual(Exit.fail("cut"))
      expect(log.at(-1)).toBe("released")
    })
  )

  it.effect("a failure to open (the request refused) fails it with nothing handled", () =>
    Effect.gen(function* () {
      const stream = fromPull<ModelEvent, "refused">(Effect.fail("refused" as const))
      const handled: Array<string> = []
      const exit = yield* consumeBatched(stream, (batch) => Effect.sync(() => handled.push(...texts(batch)))).pipe(
        Effect.exit
      )
      expect(exit).toEqual(Exit.fail("refused"))
      expect(handled).toEqual([])
    })
  )

  it.effect("a steer while the pull waits for the model stops it and releases the pull's scope", () =>
    Effect.gen(function* () {
      const steer = yield* Deferred.make<void>()
      const seen = yield* Queue.unbounded<ReadonlyArray<string>>()
      const log: Array<string> = []
      const stream = keptPull([[delta("a")], Effect.never], log)
      const consuming = yield* Effect.fork(consumeBatched(stream, (batch) => Queue.offer(seen, texts(batch)), steer))
      expect(yield* Queue.take(seen)).toEqual(["a"])
      yield* Deferred.succeed(steer, undefined)
      expect(Exit.isSuccess(yield* Fiber.await(consuming))).toBe(true)
      expect(log.at(-1)).toBe("released")
    })
  )
})
