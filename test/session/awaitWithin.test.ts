/**
 * The wait a call makes for its tool (src/session/internal/awaitWithin.ts): on the live clock its
 * timer-and-observer version gives what the straightforward one (`awaitWithinEffect`, a
 * `Fiber.await` with a timeout) gives, for fibers whose ends the test controls; on the test clock
 * it follows the clock.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, TestClock } from "effect"
import { awaitWithin, awaitWithinEffect } from "../../src/session/internal/awaitWithin.js"

type Wait = (
  fiber: Fiber.RuntimeFiber<string, string>,
  ms: number
) => Effect.Effect<Exit.Exit<string, string> | undefined>

const versions: ReadonlyArray<readonly [string, Wait]> = [
  ["awaitWithin", awaitWithin],
  ["awaitWithinEffect", awaitWithinEffect]
]

/** A scenario: a fiber, what happens to it while the wait runs, and what the wait gives. */
interface Scenario {
  readonly name: string
  readonly ms: number
  readonly run: (wait: Wait) => Effect.Effect<{ readonly result: unknown; readonly fiberStillRunning: boolean }>
}

/** A fiber that ends when `gate` is completed: with "ok", or failing with "no" when it is completed with false. */
const gated = (gate: Deferred.Deferred<boolean>) =>
  Effect.fork(Effect.flatMap(Deferred.await(gate), (ok) => (ok ? Effect.succeed("ok") : Effect.fail("no"))))

const describeResult = (exit: Exit.Exit<string, string> | undefined) =>
  exit === undefined ? "timed out" : Exit.match(exit, { onSuccess: (a) => `ok ${a}`, onFailure: () => "failed" })

const scenarios: ReadonlyArray<Scenario> = [
  {
    name: "a fiber that already succeeded",
    ms: 1,
    run: (wait) =>
      Effect.gen(function* () {
        const fiber = yield* Effect.fork(Effect.succeed("ok"))
        yield* Fiber.await(fiber)
        return { result: describeResult(yield* wait(fiber, 1)), fiberStillRunning: false }
      })
  },
  {
    name: "a fiber that already failed",
    ms: 1,
    run: (wait) =>
      Effect.gen(function* () {
        const fiber = yield* Effect.fork(Effect.fail("no"))
        yield* Fiber.await(fiber)
        return { result: describeResult(yield* wait(fiber, 1)), fiberStillRunning: false }
      })
  },
  ...[true, false].map(
    (ok): Scenario => ({
      name: `a fiber that ${ok ? "succeeds" : "fails"} while the wait runs`,
      ms: 3_600_000,
      run: (wait) =>
        Effect.gen(function* () {
          const gate = yield* Deferred.make<boolean>()
          const fiber = yield* gated(gate)
          const waiting = yield* Effect.fork(wait(fiber, 3_600_000))
          yield* Deferred.succeed(gate, ok)
          const result = describeResult(yield* Fiber.join(waiting))
          return { result, fiberStillRunning: (yield* fiber.poll)._tag === "None" }
        })
    })
  ),
  {
    name: "a fiber that does not end in time: left running",
    ms: 1,
    run: (wait) =>
      Effect.gen(function* () {
        const gate = yield* Deferred.make<boolean>()
        const fiber = yield* gated(gate)
        const result = describeResult(yield* wait(fiber, 1))
        const fiberStillRunning = (yield* fiber.poll)._tag === "None"
        yield* Fiber.interrupt(fiber)
        return { result, fiberStillRunning }
      })
  },
  {
    name: "a limit past the longest timer: no timeout, the fiber's end is awaited",
    ms: 2 ** 31,
    run: (wait) =>
      Effect.gen(function* () {
        const gate = yield* Deferred.make<boolean>()
        const fiber = yield* gated(gate)
        const waiting = yield* Effect.fork(wait(fiber, 2 ** 31))
        // past the 1 ms a timer over the limit would fire at (Node's timers fire in order of
        // their ends): not a wait for a condition, a chance for a wrong timer to fire first
        yield* Effect.sleep(Duration.millis(5))
        yield* Deferred.succeed(gate, true)
        return { result: describeResult(yield* Fiber.join(waiting)), fiberStillRunning: false }
      })
  },
  {
    name: "the wait interrupted: it ends, the fiber goes on, and its later end is not seen by the wait",
    ms: 3_600_000,
    run: (wait) =>
      Effect.gen(function* () {
        const gate = yield* Deferred.make<boolean>()
        const fiber = yield* gated(gate)
        const waiting = yield* Effect.fork(wait(fiber, 3_600_000))
        yield* Effect.yieldNow()
        const waitExit = yield* Fiber.interrupt(waiting)
        const fiberStillRunning = (yield* fiber.poll)._tag === "None"
        yield* Deferred.succeed(gate, true)
        yield* Fiber.await(fiber)
        return { result: Exit.isInterrupted(waitExit) ? "interrupted" : "not interrupted", fiberStillRunning }
      })
  }
]

const expected: Record<string, { readonly result: string; readonly fiberStillRunning: boolean }> = {
  "a fiber that already succeeded": { result: "ok ok", fiberStillRunning: false },
  "a fiber that already failed": { result: "failed", fiberStillRunning: false },
  "a fiber that succeeds while the wait runs": { result: "ok ok", fiberStillRunning: false },
  "a fiber that fails while the wait runs": { result: "failed", fiberStillRunning: false },
  "a fiber that does not end in time: left running": { result: "timed out", fiberStillRunning: true },
  "a limit past the longest timer: no timeout, the fiber's end is awaited": {
    result: "ok ok",
    fiberStillRunning: false
  },
  "the wait interrupted: it ends, the fiber goes on, and its later end is not seen by the wait": {
    result: "interrupted",
    fiberStillRunning: true
  }
}

describe("awaitWithin against awaitWithinEffect, on the live clock", () => {
  for (const scenario of scenarios) {
    it.live(scenario.name, () =>
      Effect.gen(function* () {
        const results = []
        for (const [, wait] of versions) results.push(yield* scenario.run(wait))
        expect(results[0]).toEqual(results[1])
        expect(results[0]).toEqual(expected[scenario.name])
      })
    )
  }
})

describe("awaitWithin on the test clock", () => {
  it.effect("times out when the test clock passes the limit, not before", () =>
    Effect.gen(function* () {
      const gate = yield* Deferred.make<boolean>()
      const fiber = yield* gated(gate)
      const waiting = yield* Effect.fork(awaitWithin(fiber, 60_000))
      yield* TestClock.adjust(Duration.millis(59_999))
      expect((yield* waiting.poll)._tag).toBe("None")
      yield* TestClock.adjust(Duration.millis(1))
      expect(yield* Fiber.join(waiting)).toBeUndefined()
      expect((yield* fiber.poll)._tag).toBe("None")
      yield* Fiber.interrupt(fiber)
    })
  )

  it.effect("gives the fiber's exit when it ends first", () =>
    Effect.gen(function* () {
      const gate = yield* Deferred.make<boolean>()
      const fiber = yield* gated(gate)
      const waiting = yield* Effect.fork(awaitWithin(fiber, 60_000))
      yield* TestClock.adjust(Duration.millis(30_000))
      yield* Deferred.succeed(gate, true)
      expect(describeResult(yield* Fiber.join(waiting))).toBe("ok ok")
    })
  )
})
