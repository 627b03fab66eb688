/**
 * Waiting for a fiber's end within a time limit, without forking: the wait a tool call makes for
 * its tool (RunCall.ts). On the live clock it is one timer and an observer on the fiber; on any
 * other clock (a `TestClock`) it is `awaitWithinEffect`, the straightforward version that
 * test/session/awaitWithin.test.ts holds this one to, so the wait follows the clock it runs under.
 */
import { Clock, Context, DefaultServices, Duration, Effect, type Exit, Fiber } from "effect"

/** The clock of the default services: its `sleep` is a `setTimeout`. */
const liveClock = Context.get(DefaultServices.liveServices, Clock.Clock)

/** The longest `setTimeout` delay; the live clock takes a longer sleep as one that never ends. */
const MAX_TIMER_MS = 2 ** 31 - 1

/**
 * The straightforward version: `Fiber.await` raced against the clock's sleep. The exit of `fiber`,
 * or `undefined` when it has not ended within `ms` (it is left running).
 */
export const awaitWithinEffect = <A, E>(
  fiber: Fiber.Fiber<A, E>,
  ms: number
): Effect.Effect<Exit.Exit<A, E> | undefined> =>
  Fiber.await(fiber).pipe(
    Effect.timeoutTo({ duration: Duration.millis(ms), onSuccess: (exit) => exit, onTimeout: () => undefined })
  )

/** On the live clock: a timer and an observer, dropped on the first of the two or on interrupt. */
const awaitWithinLive = <A, E>(
  fiber: Fiber.RuntimeFiber<A, E>,
  ms: number
): Effect.Effect<Exit.Exit<A, E> | undefined> =>
  Effect.async<Exit.Exit<A, E> | undefined>((resume) => {
    const ended = fiber.unsafePoll()
    if (ended !== null) return resume(Effect.succeed(ended))
    const observer = (exit: Exit.Exit<A, E>) => {
      clearTimeout(timer)
      resume(Effect.succeed(exit))
    }
    const timer =
      ms > MAX_TIMER_MS
        ? undefined
        : setTimeout(() => {
            fiber.removeObserver(observer)
            resume(Effect.succeed(undefined))
          }, ms)
    fiber.addObserver(observer)
    return Effect.sync(() => {
      clearTimeout(timer)
      fiber.removeObserver(observer)
    })
  })

/**
 * The exit of `fiber`, or `undefined` when it has not ended within `ms` (it is left running).
 * Interrupted, the wait drops its timer and its observer.
 */
export const awaitWithin = <A, E>(
  fiber: Fiber.RuntimeFiber<A, E>,
  ms: number
): Effect.Effect<Exit.Exit<A, E> | undefined> =>
  Effect.clockWith((clock) => (clock === liveClock ? awaitWithinLive(fiber, ms) : awaitWithinEffect(fiber, ms)))
