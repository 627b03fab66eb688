/**
 * Counting the Effect runtime's work: every operation a fiber's run loop evaluates (a `flatMap`'s
 * continuation, a `sync`, an `async` …) and every fiber started, through a `Supervisor` and the
 * `OpSupervision` runtime flag (both public Effect APIs; fibers forked inside inherit them).
 *
 * A count does not depend on the machine or its load, so it shows what a change to the kernel does
 * to its share of the Effect runtime — the largest part of a step's CPU time in the profiles
 * (docs/benchmarks.md) — where a time ratio moves by less than its noise. Counting slows the run
 * (a call per operation): counted runs are never the timed ones.
 */
import { Effect, Runtime, RuntimeFlags, RuntimeFlagsPatch, Supervisor } from "effect"

export interface OpCount {
  /** operations evaluated by the fibers under the counter while it counted */
  readonly ops: number
  /** fibers started meanwhile */
  readonly fibers: number
}

export class OpCounter extends Supervisor.AbstractSupervisor<void> {
  private counting = false
  private ops = 0
  private fibers = 0

  get value(): Effect.Effect<void> {
    return Effect.void
  }

  override onStart(): void {
    if (this.counting) this.fibers++
  }

  override onEffect(): void {
    if (this.counting) this.ops++
  }

  /** Starts counting from zero. */
  start(): void {
    this.ops = 0
    this.fibers = 0
    this.counting = true
  }

  /** Stops counting; what was counted since `start`. */
  stop(): OpCount {
    this.counting = false
    return { ops: this.ops, fibers: this.fibers }
  }
}

/**
 * `effect` with every fiber of it (and those they fork) under `counter`; unchanged without one.
 *
 * A fiber forked by `FiberMap.run` (a session's turn) starts with `Runtime.defaultRuntime`'s flags,
 * not its parent's, so `OpSupervision` is also set there while `effect` runs (and put back after):
 * without it the turn's fibers would be counted as started but not their operations.
 */
export const underCounter =
  (counter: OpCounter | undefined) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
    if (counter === undefined) return effect
    const runtime = Runtime.defaultRuntime as { runtimeFlags: RuntimeFlags.RuntimeFlags }
    return Effect.acquireUseRelease(
      Effect.sync(() => {
        const flags = runtime.runtimeFlags
        runtime.runtimeFlags = RuntimeFlags.enable(flags, RuntimeFlags.OpSupervision)
        return flags
      }),
      () =>
        effect.pipe(
          Effect.supervised(counter),
          Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.enable(RuntimeFlags.OpSupervision))
        ),
      (flags) =>
        Effect.sync(() => {
          runtime.runtimeFlags = flags
        })
    )
  }
