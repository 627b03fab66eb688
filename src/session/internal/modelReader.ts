/**
 * The model reader of a step: the model's stream read into a mailbox by a fiber of its own and
 * handed to the Processor in batches of what arrived together, stopped by a steer. A loop over a
 * mailbox, not a Stream pipeline (docs/architecture.md, "The Processor's pipeline");
 * test/session/modelReader.test.ts holds it to the Stream version of the same thing.
 */
import { Cause, Chunk, Deferred, Effect, Mailbox, Option, type Stream } from "effect"
import type { ModelEvent } from "../../model/Model.js"
import { openPull } from "../../stream/internal/pull.js"

/**
 * A step's steer signal as the kernel makes it: `done` completes when a steered message comes, and
 * while the step's reader runs, `wake` is what wakes its wait for the model (its queue's shutdown).
 * So the signal needs no fiber awaiting it: a bare `Deferred` costs one per model request.
 */
export interface Steer {
  readonly _tag: "Steer"
  readonly done: Deferred.Deferred<void>
  /** set by the reader of each request (`consumeBatched`); a later request's replaces it */
  wake: Effect.Effect<void> | undefined
}

export const makeSteer: Effect.Effect<Steer> = Effect.map(
  Deferred.make<void>(),
  (done): Steer => ({ _tag: "Steer", done, wake: undefined })
)

/**
 * Completes the signal, then wakes the reader if one runs. The order makes it exact: a reader that
 * set `wake` after it was read here checks `done` after that, and finds it completed.
 */
export const signalSteer = (steer: Steer): Effect.Effect<void> =>
  Effect.zipRight(
    Deferred.succeed(steer.done, undefined),
    Effect.suspend(() => steer.wake ?? Effect.void)
  )

export const steerDone = (steer: Deferred.Deferred<void> | Steer): Deferred.Deferred<void> =>
  Deferred.DeferredTypeId in steer ? steer : steer.done

/**
 * The most events the reader puts in the mailbox ahead of the batches (bounds how much one `handle`
 * call gets, and how far the stream runs ahead). A chunk bigger than the room left goes in as room
 * is made, so it is split over batches: with the provider layers' chunks of at most 256 events (the
 * parts of one network read) that takes 256 chunks arriving while one batch is handled, as the
 * queue of 256 chunks this replaced allowed.
 */
export const MAX_BATCH = 65_536

/**
 * Reads the model's stream into `mailbox`, one chunk a pull (`openPull`: without a channel for a
 * stream that keeps its pull), and ends it with the stream's end or failure after its last chunk.
 * Runs in a fiber of its own and in a scope of its own, so the stream's resources (the request)
 * are released when it ends or is interrupted. A mailbox shut down (by the steer) stops it.
 */
const readInto = <E>(stream: Stream.Stream<ModelEvent, E>, mailbox: Mailbox.Mailbox<ModelEvent, E>) =>
  Effect.scoped(
    Effect.matchCauseEffect(openPull(stream), {
      onFailure: (cause) => mailbox.failCause(cause),
      onSuccess: (pull) => {
        const loop: Effect.Effect<boolean> = Effect.matchCauseEffect(pull, {
          onFailure: (cause) =>
            Option.match(Cause.flipCauseOption(cause), {
              onNone: () => mailbox.end,
              onSome: (failure) => mailbox.failCause(failure)
            }),
          onSuccess: (chunk) => {
            // room for all of it (the usual case): on to the next pull, without an effect a chunk
            const rest = mailbox.unsafeOfferAll(chunk)
            if (rest.length === 0) return loop
            // full: wait for room; shut down by the steer (done): stop
            return Option.isNone(mailbox.unsafeSize())
              ? Effect.succeed(false)
              : Effect.flatMap(mailbox.offerAll(rest), (left) => (left.length === 0 ? loop : Effect.succeed(false)))
          }
        })
        return loop
      }
    })
  )

/** What the take gives when the steer ended the stream: nothing more, done. */
const steeredEnd = [Chunk.empty<ModelEvent>(), true] as const

/**
 * Runs `handle` on the model's events in batches, each uninterruptible: the stream runs ahead in a
 * fiber of its own into a mailbox, and a batch is everything that arrived since the last one, so a
 * burst is one batch and a slow stream one event a batch. The stream's failure comes after the
 * events before it. With `steer`, no batch starts once it completes and a wait for the model is
 * woken; the reader (and the model's stream) is stopped and awaited before this returns. A loop over
 * a mailbox rather than a Stream pipeline, for its cost (docs/architecture.md, "The Processor's pipeline").
 */
export const consumeBatched = <E, E2>(
  stream: Stream.Stream<ModelEvent, E>,
  handle: (events: Chunk.Chunk<ModelEvent>) => Effect.Effect<void, E2>,
  steer?: Deferred.Deferred<void> | Steer | undefined
): Effect.Effect<void, E | E2> =>
  Effect.scoped(
    Effect.gen(function* () {
      const mailbox = yield* Mailbox.make<ModelEvent, E>({ capacity: MAX_BATCH, strategy: "suspend" })
      yield* Effect.forkScoped(readInto(stream, mailbox))
      if (steer !== undefined) {
        // before the first look at `done` (see `signalSteer`)
        if (Deferred.DeferredTypeId in steer)
          yield* Effect.forkScoped(Effect.zipRight(Deferred.await(steer), mailbox.shutdown))
        else steer.wake = Effect.asVoid(mailbox.shutdown)
      }
      const steered = steer === undefined ? Effect.succeed(false) : Deferred.isDone(steerDone(steer))
      // done: the stream ended (with its last events) or the steer shut the mailbox down (empty);
      // a failure comes after the events before it, as the next take's failure — unless the steer
      // came first: its shutdown drops what was not taken, the stream's failure with it (the step
      // ends steered, as a steer that comes before a failure is read)
      const take = Effect.catchAllCause(mailbox.takeAll, (cause) =>
        Cause.isInterrupted(cause)
          ? Effect.failCause(cause)
          : Effect.flatMap(steered, (done) => (done ? Effect.succeed(steeredEnd) : Effect.failCause(cause)))
      )
      while (!(yield* steered)) {
        const [events, done] = yield* take
        if (events.length > 0) yield* Effect.uninterruptible(handle(events))
        if (done) return
      }
    })
  )
