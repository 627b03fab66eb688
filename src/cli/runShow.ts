/**
 * `logbook run`'s output loop: the batches of events the log's pull gives, shown up to the turn's
 * last one.
 *
 * A batch is shown in one pass, without an Effect per event: one clock read, then each event shown
 * by a plain function (`showOne`: the answer seen, the event rendered and written), not an
 * `Effect.gen` and two `Ref`s an event, which cost as much as a good part of a model step. Only an event
 * that waits (`waitAfter`: the approval prompt of a `permission.asked`, after everything written
 * before the ask) makes the rest of its batch wait for it.
 *
 * The turn's last seq (`finish`) and the last seq shown are plain variables: the output's fiber and
 * the one that ends the turn read and write them only between two of their steps.
 */
import { Chunk, Clock, Effect } from "effect"
import type { Envelope } from "../domain/Events.js"

export interface EventShower {
  /** Shows a batch, up to the turn's last event once it is known: true when that one was shown. */
  readonly show: (events: Chunk.Chunk<Envelope>) => Effect.Effect<boolean>
  /** The turn is over and `last` is its last event: whether that one was already shown. */
  readonly finish: (last: number) => boolean
}

export const makeEventShower = (options: {
  /** the seq of the last event shown before (the first one shown is the next) */
  readonly shownBefore: number
  /** shows one event, with the time of its batch */
  readonly showOne: (event: Envelope, now: number) => void
  /** what the output waits for after showing `event`, if anything */
  readonly waitAfter: (event: Envelope) => Effect.Effect<void> | undefined
}): EventShower => {
  const { showOne, waitAfter } = options
  let target: number | undefined
  let shown = options.shownBefore

  const show = (events: Chunk.Chunk<Envelope>): Effect.Effect<boolean> =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const list = Chunk.toReadonlyArray(events)
      for (let i = 0; i < list.length; i++) {
        const event = list[i]!
        showOne(event, now)
        const wait = waitAfter(event)
        if (wait !== undefined) {
          const rest = Chunk.unsafeFromArray(list.slice(i + 1))
          return Effect.zipRight(
            wait,
            Effect.suspend(() => {
              shown = event.seq
              return target !== undefined && event.seq >= target ? Effect.succeed(true) : show(rest)
            })
          )
        }
        shown = event.seq
        if (target !== undefined && event.seq >= target) return Effect.succeed(true)
      }
      return Effect.succeed(false)
    })

  const finish = (last: number): boolean => {
    target = last
    return shown >= last
  }

  return { show, finish }
}
