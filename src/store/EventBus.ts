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
    /** A subscription that receives everything published from now on, until its scope closes. */
    readonly subscribe: Effect.Effect<Queue.Dequeue<Envelope>, never, Scope.Scope>
    /** How many subscriptions are open: a publisher with nothing to say to nobody may skip the work. */
    readonly subscribers: Effect.Effect<number>
  }
>() {
  static readonly layer: Layer.Layer<EventBus> = Layer.effect(
    EventBus,
    Effect.map(PubSub.unbounded<Envelope>(), (pubsub) => {
      let open = 0
      return {
        publish: (envelopes) =>
          envelopes.length === 0 ? Effect.void : Effect.asVoid(PubSub.publishAll(pubsub, envelopes)),
        subscribe: Effect.tap(PubSub.subscribe(pubsub), () =>
          Effect.acquireRelease(
            Effect.sync(() => {
              open++
            }),
            () =>
              Effect.sync(() => {
                open--
              })
          )
        ),
        subscribers: Effect.sync(() => open)
      }
    })
  )
}

/** Everything published from the moment the stream is run. */
export const stream: Stream.Stream<Envelope, never, EventBus> = Stream.unwrapScoped(
  Effect.map(
    Effect.flatMap(EventBus, (bus) => bus.subscribe),
    (queue) => Stream.fromQueue(queue)
  )
)
