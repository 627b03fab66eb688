/**
 * A stream made from a scoped pull keeps it (`fromPull`, `openPull`, src/stream/internal/pull.ts): its Stream
 * form is the ordinary one, and `openPull` gives the kernel the pull itself.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Chunk, Effect, Either, Exit, FastCheck, Option, Scope, Stream } from "effect"
import {
  fromPull,
  keepsPull,
  mapPullEither,
  mapUntilLeft,
  type OpenPull,
  openPull
} from "../../src/stream/internal/pull.js"

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

/** even numbers halved; an odd one is refused */
const halve = (n: number): Either.Either<number, string> =>
  n % 2 === 0 ? Either.right(n / 2) : Either.left(`odd ${n}`)

describe("mapUntilLeft", () => {
  it("maps up to the first element refused, and gives that refusal", () => {
    expect(mapUntilLeft([2, 4, 6], halve)).toEqual({ values: Chunk.make(1, 2, 3), refused: Option.none() })
    expect(mapUntilLeft([2, 3, 4, 5], halve)).toEqual({ values: Chunk.make(1), refused: Option.some("odd 3") })
    expect(mapUntilLeft([1], halve)).toEqual({ values: Chunk.empty(), refused: Option.some("odd 1") })
  })
})

describe("mapPullEither", () => {
  it.effect("gives what came before a refused element, then fails with the refusal, as Stream.mapEffect does", () =>
    Effect.gen(function* () {
      const log: Array<string> = []
      const chunks = [[2, 4], [6, 7, 8], [10]]
      const viaStream = yield* Stream.runCollect(
        Stream.mapEffect(fromPull(counted(chunks, log)), (n) => halve(n))
      ).pipe(Effect.either)
      expect(viaStream).toEqual(Either.left("odd 7"))
      const pulled: Array<number> = []
      const failure = yield* Effect.scoped(
        Effect.gen(function* () {
          const pull = mapPullEither(yield* counted(chunks, log), halve)
          while (true) {
            const chunk = yield* pull.pipe(Effect.either)
            if (Either.isLeft(chunk)) return chunk.left
            pulled.push(...chunk.right)
          }
        })
      )
      expect(pulled).toEqual([1, 2, 3])
      expect(failure).toEqual(Option.some("odd 7"))
    })
  )

  it.effect("a chunk whose first element is refused fails at once; the end stays the end", () =>
    Effect.gen(function* () {
      const log: Array<string> = []
      const refused = yield* Effect.scoped(
        Effect.flatMap(counted([[1, 2]], log), (pull) => Effect.flip(mapPullEither(pull, halve)))
      )
      expect(refused).toEqual(Option.some("odd 1"))
      // and it stays failed: the element after the refused one is never given
      const twice = yield* Effect.scoped(
        Effect.flatMap(counted([[1, 2]], log), (pull) => {
          const mapped = mapPullEither(pull, halve)
          return Effect.zipRight(Effect.flip(mapped), Effect.flip(mapped))
        })
      )
      expect(twice).toEqual(Option.some("odd 1"))
      const ended = yield* Effect.scoped(
        Effect.flatMap(counted([[2]], log), (pull) => {
          const mapped = mapPullEither(pull, halve)
          return Effect.zipRight(mapped, Effect.flip(mapped))
        })
      )
      expect(ended).toEqual(Option.none())
    })
  )
})

/** A generated pull: its chunks (empty ones too) and how it ends. */
const pullCase = FastCheck.record({
  chunks: FastCheck.array(FastCheck.array(FastCheck.integer({ min: 0, max: 20 }), { maxLength: 5 }), { maxLength: 8 }),
  end: FastCheck.constantFrom("end" as const, "fail" as const, "die" as const)
})
type PullCase = typeof pullCase extends FastCheck.Arbitrary<infer A> ? A : never

/** The case's pull, opened and released with a log line (as `counted`, with its end). */
const openCase = (c: PullCase, log: Array<string>): OpenPull<number, "cut"> =>
  Effect.gen(function* () {
    yield* Effect.acquireRelease(
      Effect.sync(() => log.push("open")),
      () => Effect.sync(() => log.push("release"))
    )
    let next = 0
    return Effect.suspend(() => {
      const chunk = c.chunks[next++]
      if (chunk !== undefined) return Effect.succeed(Chunk.fromIterable(chunk))
      if (c.end === "end") return Effect.fail(Option.none())
      if (c.end === "fail") return Effect.fail(Option.some("cut" as const))
      return Effect.die("broken")
    })
  })

/** Reads a pull to its end in a scope of its own: the elements, how it ended, and the log at the end. */
const readAll = <A>(open: OpenPull<A, unknown>, log: Array<string>) =>
  Effect.gen(function* () {
    const out: Array<A> = []
    const exit = yield* Effect.exit(
      Effect.scoped(
        Effect.gen(function* () {
          const pull = yield* open
          while (true) {
            const chunk = yield* Effect.either(pull)
            if (Either.isRight(chunk)) out.push(...chunk.right)
            else if (Option.isNone(chunk.left)) return
            else return yield* Effect.fail(chunk.left.value)
          }
        })
      )
    )
    const ended = Exit.match(exit, {
      onSuccess: () => "end",
      onFailure: (cause) =>
        Option.match(Cause.failureOption(cause), {
          onSome: (error) => `failed ${JSON.stringify(error)}`,
          onNone: () => (Cause.isDie(cause) ? "died" : "interrupted")
        })
    })
    return { out, ended, log: [...log] }
  })

describe("the side channel against Stream.toPull", () => {
  it.effect.prop(
    "openPull of a fromPull stream reads what Stream.toPull of the same stream reads, and releases the same",
    [pullCase],
    ([c]) =>
      Effect.gen(function* () {
        const sideLog: Array<string> = []
        const side = fromPull(openCase(c, sideLog))
        expect(keepsPull(side)).toBe(true)
        const viaSide = yield* readAll(openPull(side), sideLog)
        const channelLog: Array<string> = []
        const viaChannel = yield* readAll(Stream.toPull(fromPull(openCase(c, channelLog))), channelLog)
        expect(viaSide).toEqual(viaChannel)
        expect(viaSide.log).toEqual(["open", "release"])
        // and the Stream form gives the same elements
        const collected = yield* Stream.runCollect(fromPull(openCase(c, []))).pipe(Effect.exit)
        if (Exit.isSuccess(collected)) expect(Chunk.toReadonlyArray(collected.value)).toEqual(viaSide.out)
        else expect(viaSide.ended).not.toBe("end")
      }),
    { fastCheck: { numRuns: 200, seed: 2_024 } }
  )

  it.effect.prop(
    "mapPullEither gives what Stream.mapEffect of the same function gives, and fails where it fails",
    [pullCase, FastCheck.integer({ min: 1, max: 7 })],
    ([c, divisor]) =>
      Effect.gen(function* () {
        // refuses the multiples of `divisor` (after 0, which every divisor divides)
        const f = (n: number) => (n % divisor === 0 && n > 0 ? Either.left(`refused ${n}`) : Either.right(n * 2))
        const fast = yield* readAll(
          Effect.map(openCase(c, []), (pull) => mapPullEither(pull, f)),
          []
        )
        const twin = yield* readAll(
          Stream.toPull(
            Stream.mapEffect(fromPull(openCase(c, [])), (n) =>
              Either.match(f(n), { onLeft: Effect.fail, onRight: Effect.succeed })
            )
          ),
          []
        )
        expect(fast).toEqual(twin)
      }),
    { fastCheck: { numRuns: 100, seed: 2_025 } }
  )
})
