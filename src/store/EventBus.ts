/**
 * The in-process bus of committed envelopes. Stores publish only after a commit, so a subscriber
 * never sees an event that could still be rolled back. Subscribe before publishing.
 */
import { Context, Effect, Layer, PubSub, type Queue, type Scope, Stream } from "effect"
import type { Envelope } from "../domain/Events.js"

export class EventBus extends Context.Tag("logbook/EventBus")<
  EventBus,
  {
    readonly publish: (envelopes: ReadonlyArray<Envelope>) => Effect.Effect<void>
    /** A subscription that receives everything published from now on. */
    readonly subscribe: Effect.Effect<Queue.Dequeue<Envelope>, never, Scope.Scope>
  }
>() {
  static readonly layer: Layer.Layer<EventBus> = Layer.effect(
    EventBus,
    Effect.map(PubSub.unbounded<Envelope>(), (pubsub) => ({
      publish: (envelopes) =>
        envelopes.length === 0 ? Effect.void : Effect.asVoid(PubSub.publishAll(pubsub, envelopes)),
      subscribe: PubSub.subscribe(pubsub)
    }))
  )
}

/** Everything published from the moment the stream is run. */
export const stream: Stream.Stream<Envelope, never, EventBus> = Stream.unwrapScoped(
  Effect.map(
    Effect.flatMap(EventBus, (bus) => bus.subscribe),
    (queue) => Stream.fromQueue(queue)
  )
)
