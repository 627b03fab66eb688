import { Effect, Supervisor } from "effect"

/** Counts the fibers started under it (`Effect.supervised(count)`). */
export class FiberCount extends Supervisor.AbstractSupervisor<void> {
  started = 0
  get value() {
    return Effect.void
  }
  override onStart() {
    this.started++
  }
}
