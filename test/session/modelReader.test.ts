/**
 * The model reader's mailbox loop (`consumeBatched`, src/session/internal/modelReader.ts) against
 * the straightforward Stream version of the same thing (`consumeBatchedStream` below: the stream,
 * halted by the steer, each chunk handled uninterruptibly). The two batch differently (the loop
 * hands over everything that arrived since the last batch; the Stream one chunk at a time), so
 * what they must agree on is what the batching does not decide: the events handled, in order, and
 * how the whole ends — over random chunkings, ends, failures of the stream and of the handler,
 * steers, and both kinds of stream (one that keeps its pull and one that does not).
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Chunk, Deferred, Effect, Exit, FastCheck, Option, Stream } from "effect"
import { ModelEvent } from "../../src/model/Model.js"
import { consumeBatched } from "../../src/session/internal/modelReader.js"
import { fromPull } from "../../src/stream/internal/pull.js"

type Consume = <E, E2>(
  stream: Stream.Stream<ModelEvent, E>,
  handle: (events: Chunk.Chunk<ModelEvent>) => Effect.Effect<void, E2>,
  steer?: Deferred.Deferred<void>
) => Effect.Effect<void, E | E2>

/** The straightforward version: a Stream halted by the steer, one uninterruptible `handle` a chunk. */
const consumeBatchedStream: Consume = (stream, handle, steer) => {
  if (steer === undefined) return Stream.runForEachChunk(stream, (chunk) => Effect.uninterruptible(handle(chunk)))
  return Stream.runForEachChunk(Stream.haltWhenDeferred(stream, steer), (chunk) =>
    Effect.flatMap(Deferred.isDone(steer), (done) =>
      done || Chunk.isEmpty(chunk) ? Effect.void : Effect.uninterruptible(handle(chunk))
    )
  )
}

const delta = (n: number): ModelEvent => ModelEvent.TextDelta({ id: "t", delta: String(n) })
const numbers = (events: ReadonlyArray<ModelEvent>) =>
  events.map((event) => (event._tag === "TextDelta" ? Number(event.delta) : Number.NaN))

/** A generated case: the stream's chunks (numbered events), how it ends, and what the handler and the steer do. */
interface Case {
  readonly chunks: ReadonlyArray<number>
  readonly end: "end" | "fail" | "die"
  /** the handler fails on the event of this number (if there is one) */
  readonly handlerFailsAt: number | undefined
  /** the steer: none, done before the read, or completed by the handler on the event of this number */
  readonly steer: "none" | "before" | number
  readonly keepsPull: boolean
}

const caseArbitrary: FastCheck.Arbitrary<Case> = FastCheck.record({
  chunks: FastCheck.array(FastCheck.integer({ min: 0, max: 6 }), { maxLength: 12 }),
  end: FastCheck.constantFrom("end" as const, "fail" as const, "die" as const),
  handlerFailsAt: FastCheck.option(FastCheck.integer({ min: 0, max: 40 }), { nil: undefined }),
  steer: FastCheck.oneof(
    FastCheck.constantFrom("none" as const, "before" as const),
    FastCheck.integer({ min: 0, max: 40 })
  ),
  keepsPull: FastCheck.boolean()
})

/** The chunks of events of a case, numbered from 0 across chunks. */
const chunksOf = (sizes: ReadonlyArray<number>): ReadonlyArray<ReadonlyArray<ModelEvent>> => {
  let next = 0
  return sizes.map((size) => Array.from({ length: size }, () => delta(next++)))
}

/** The case's stream: its chunks, then its end; kept as a pull (`fromPull`) or an ordinary stream. */
const streamOf = (c: Case): Stream.Stream<ModelEvent, "cut"> => {
  const chunks = chunksOf(c.chunks)
  const ending: Stream.Stream<never, "cut"> =
    c.end === "end" ? Stream.empty : c.end === "fail" ? Stream.fail("cut") : Stream.die("broken")
  if (!c.keepsPull) return Stream.concat(Stream.fromChunks(...chunks.map(Chunk.fromIterable)), ending)
  return fromPull(
    Effect.sync(() => {
      let i = 0
      return Effect.suspend(() => {
        if (i < chunks.length) return Effect.succeed(Chunk.fromIterable(chunks[i++]!))
        if (c.end === "end") return Effect.fail(Option.none())
        if (c.end === "fail") return Effect.fail(Option.some("cut" as const))
        return Effect.die("broken")
      })
    })
  )
}

/** How a run ended, in words both versions can be compared by. */
const ending = (exit: Exit.Exit<void, unknown>): string =>
  Exit.match(exit, {
    onSuccess: () => "done",
    onFailure: (cause) =>
      Option.match(Cause.failureOption(cause), {
        onSome: (error) => `failed ${String(error)}`,
        onNone: () => (Cause.isDie(cause) ? "died" : "interrupted")
      })
  })

/** Runs a case through `consume`: the events handled (in order), the batches' sizes, and how it ended. */
const run = (consume: Consume, c: Case) =>
  Effect.gen(function* () {
    const handled: Array<number> = []
    const sizes: Array<number> = []
    const steer = c.steer === "none" ? undefined : yield* Deferred.make<void>()
    if (c.steer === "before") yield* Deferred.succeed(steer!, undefined)
    const handle = (events: Chunk.Chunk<ModelEvent>) =>
      Effect.gen(function* () {
        sizes.push(events.length)
        for (const n of numbers(Chunk.toReadonlyArray(events))) {
          if (n === c.handlerFailsAt) return yield* Effect.fail("store" as const)
          handled.push(n)
          if (n === c.steer) yield* Deferred.succeed(steer!, undefined)
        }
      })
    const exit = yield* Effect.exit(consume(streamOf(c), handle, steer))
    return { handled, sizes, ending: ending(exit) }
  })

describe("consumeBatched against the Stream version", () => {
  it.effect.prop(
    "the same events handled in order, and the same end, over random streams, handlers and steers",
    [caseArbitrary],
    ([c]) =>
      Effect.gen(function* () {
        const fast = yield* run(consumeBatched, c)
        const twin = yield* run(consumeBatchedStream, c)
        const total = c.chunks.reduce((a, b) => a + b, 0)
        // no batch is empty
        expect(fast.sizes.every((size) => size > 0)).toBe(true)
        const steeredAt = typeof c.steer === "number" && c.steer < total ? c.steer : undefined
        const failsAt = c.handlerFailsAt !== undefined && c.handlerFailsAt < total ? c.handlerFailsAt : undefined
        if (steeredAt !== undefined && (failsAt === undefined || steeredAt < failsAt)) {
          // a steer during a batch: that batch is finished, and nothing after it starts; the batch
          // it came in is the batching's choice, so the two agree up to the event that steered
          const upTo = Array.from({ length: steeredAt + 1 }, (_, i) => i)
          for (const result of [fast, twin]) {
            expect(result.handled.slice(0, steeredAt + 1)).toEqual(upTo)
            expect(result.handled).toEqual(Array.from({ length: result.handled.length }, (_, i) => i))
          }
          // the handler's failure, if it comes in the rest of the batch, is the end
          expect(fast.ending === "done" || fast.ending === "failed store").toBe(true)
          expect(twin.ending === "done" || twin.ending === "failed store").toBe(true)
        } else {
          expect(fast.handled).toEqual(twin.handled)
          expect(fast.ending).toEqual(twin.ending)
        }
        if (c.steer === "before") expect(fast.handled).toEqual([])
      }),
    { fastCheck: { numRuns: 100, seed: 4_242 } }
  )

  it.effect("the listed ends: each is the same in both", () =>
    Effect.gen(function* () {
      const cases: ReadonlyArray<Case> = [
        { chunks: [2, 0, 3], end: "end", handlerFailsAt: undefined, steer: "none", keepsPull: false },
        { chunks: [2, 0, 3], end: "fail", handlerFailsAt: undefined, steer: "none", keepsPull: true },
        { chunks: [1], end: "die", handlerFailsAt: undefined, steer: "none", keepsPull: false },
        { chunks: [], end: "fail", handlerFailsAt: undefined, steer: "none", keepsPull: true },
        { chunks: [3, 3], end: "end", handlerFailsAt: 4, steer: "none", keepsPull: false },
        { chunks: [3, 3], end: "fail", handlerFailsAt: undefined, steer: "before", keepsPull: true }
      ]
      const seen = []
      for (const c of cases) {
        const fast = yield* run(consumeBatched, c)
        const twin = yield* run(consumeBatchedStream, c)
        expect([fast.handled, fast.ending]).toEqual([twin.handled, twin.ending])
        seen.push(fast.ending)
      }
      expect(seen).toEqual(["done", "failed cut", "died", "failed cut", "failed store", "done"])
    })
  )
})
