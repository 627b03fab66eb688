/**
 * A stream made from a scoped pull keeps it (`fromPull`, `openPull`, src/model/pull.ts): its Stream
 * form is the ordinary one, and `openPull` gives the kernel the pull itself.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Exit, Option, Scope, Stream } from "effect"
import { fromPull, keepsPull, type OpenPull, openPull } from "../../src/model/pull.js"

/** a pull of `chunks`, one a read, opened and released with a log line */
const counted = (chunks: ReadonlyArray<ReadonlyArray<number>>, log: Array<string>): OpenPull<number, "cut"> =>
  Effect.gen(function* () {
    yield* Effect.acquireRelease(
      Effect.sync(() => log.push("open")),
      () => Effect.sync(() => log.push("release"))
    )
    let next = 0
    return Effect.suspend(() => {
      log.push("pull")
      const chunk = chunks[next++]
      return chunk === undefined ? Effect.fail(Option.none()) : Effect.succeed(Chunk.fromIterable(chunk))
    })
  })

/** reads a pull to its end in a scope of its own */
const drain = <A, E>(open: OpenPull<A, E>) =>
  Effect.scoped(
    Effect.gen(function* () {
      const pull = yield* open
      const out: Array<A> = []
      while (true) {
        const chunk = yield* Effect.option(pull)
        if (Option.isNone(chunk)) return out
        out.push(...chunk.value)
      }
    })
  )

describe("fromPull", () => {
  it.effect("its Stream form gives the pull's chunks, then releases what the pull opened", () =>
    Effect.gen(function* () {
      const log: Array<string> = []
      const stream = fromPull(counted([[1, 2], [3]], log))
      expect(Chunk.toReadonlyArray(yield* Stream.runCollect(stream))).toEqual([1, 2, 3])
      expect(log).toEqual(["open", "pull", "pull", "pull", "release"])
    })
  )

  it.effect("a failure of the pull is the stream's", () =>
    Effect.gen(function* () {
      const open: OpenPull<number, "cut"> = Effect.succeed(Effect.fail(Option.some("cut" as const)))
      expect(yield* Stream.runCollect(fromPull(open)).pipe(Effect.flip)).toBe("cut")
    })
  )
})

describe("openPull", () => {
  it.effect("gives back the pull a stream was made from", () =>
    Effect.gen(function* () {
      const log: Array<string> = []
      const open = counted([[1], [2]], log)
      const stream = fromPull(open)
      expect(keepsPull(stream)).toBe(true)
      expect(openPull(stream)).toBe(open)
      expect(yield* drain(openPull(stream))).toEqual([1, 2])
      expect(log).toEqual(["open", "pull", "pull", "pull", "release"])
    })
  )

  it.effect("reads any other stream through Stream.toPull, a derived one included", () =>
    Effect.gen(function* () {
      const log: Array<string> = []
      const derived = Stream.map(fromPull(counted([[1], [2, 3]], log)), (n) => n * 10)
      expect(keepsPull(derived)).toBe(false)
      expect(yield* drain(openPull(derived))).toEqual([10, 20, 30])
      expect(log.at(-1)).toBe("release")
      expect(keepsPull(Stream.make(1))).toBe(false)
      expect(yield* drain(openPull(Stream.make(4, 5)))).toEqual([4, 5])
    })
  )

  it.effect("what the pull opened belongs to the caller's scope", () =>
    Effect.gen(function* () {
      const log: Array<string> = []
      const scope = yield* Scope.make()
      const pull = yield* Scope.extend(openPull(fromPull(counted([[1]], log))), scope)
      yield* pull
      expect(log).toEqual(["open", "pull"])
      yield* Scope.close(scope, Exit.void)
      expect(log).toEqual(["open", "pull", "release"])
    })
  )
})
