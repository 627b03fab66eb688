/**
 * Plugins' event hooks (docs/plugins.md, "Event hooks"), off the kernel's path: the event bus feeds
 * a bounded queue (newest dropped when full, logged) and one fiber calls each handler in order,
 * bounded by its timeout, with a frozen copy. Errors go to the diagnostic log, never the event log.
 */
import { Duration, Effect, Fiber, Layer, Queue, Stream, SubscriptionRef } from "effect"
import type { Envelope } from "../domain/Events.js"
import { EventBus } from "../store/EventBus.js"
import type { PluginEventHandlers } from "./Plugin.js"

/** How many events wait for the handlers before new ones are dropped. */
export const EVENT_QUEUE_SIZE = 1_024

export interface PluginEventsOptions {
  readonly plugins: ReadonlyArray<{ readonly name: string; readonly events: PluginEventHandlers }>
  /** the bound of one handler's run (ms) */
  readonly timeoutMs: number
}

type Handler = keyof PluginEventHandlers

const describeError = (error: unknown): string => (error instanceof Error ? error.message : String(error))

const deepFreeze = (value: unknown): unknown => {
  if (typeof value === "object" && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child)
    Object.freeze(value)
  }
  return value
}

/** A frozen copy of an envelope: a handler cannot change what other handlers see. */
const frozen = (env: Envelope): unknown => deepFreeze(structuredClone(env))

/**
 * The event hooks' runner, for the life of the layer. Without a plugin that has event hooks it does
 * nothing (no subscription).
 */
export const layerPluginEvents = (options: PluginEventsOptions): Layer.Layer<never, never, EventBus> =>
  Layer.scopedDiscard(
    Effect.gen(function* () {
      const plugins = options.plugins.filter((plugin) => Object.values(plugin.events).some((h) => h !== undefined))
      if (plugins.length === 0) return
      const bus = yield* EventBus
      const subscription = yield* bus.subscribe
      const queue = yield* Queue.dropping<Envelope>(EVENT_QUEUE_SIZE)
      const seen = new Set<string>()
      let dropped = 0

      const call = (handler: Handler, argument: () => unknown) =>
        Effect.forEach(
          plugins,
          (plugin) => {
            const f = plugin.events[handler] as ((argument: unknown) => unknown) | undefined
            if (f === undefined) return Effect.void
            return Effect.tryPromise({
              try: () => Promise.resolve(f(argument())),
              catch: (error) => new Error(describeError(error))
            }).pipe(
              Effect.timeoutFail({
                duration: Duration.millis(options.timeoutMs),
                onTimeout: () => new Error(`it did not return within ${options.timeoutMs} ms`)
              }),
              Effect.catchAll((error) =>
                Effect.logWarning(`plugin ${plugin.name}: its ${handler} hook failed: ${error.message}`)
              )
            )
          },
          { discard: true }
        )

      const handle = (env: Envelope) =>
        Effect.gen(function* () {
          const sessionId = env.sessionId as string
          if (!seen.has(sessionId)) {
            seen.add(sessionId)
            yield* call("session.start", () => ({ sessionId }))
          }
          yield* call("event", () => frozen(env))
          if (env.type === "turn.finished" || env.type === "turn.interrupted") {
            const { turnId, reason } = env.payload
            yield* call("turn.end", () => ({ sessionId, ...(turnId !== undefined ? { turnId } : {}), reason }))
          }
        })

      // how many events wait or are being handled: the close waits for it to reach 0 (bounded)
      const pending = yield* SubscriptionRef.make(0)
      const enqueue = (env: Envelope) =>
        Effect.flatMap(Queue.offer(queue, env), (taken) =>
          taken
            ? SubscriptionRef.update(pending, (n) => n + 1)
            : Effect.suspend(() => {
                dropped++
                // said once per run of drops, at its first
                return dropped === 1
                  ? Effect.logWarning(
                      `plugins' event hooks are behind by ${EVENT_QUEUE_SIZE} events: newer events are not given to them`
                    )
                  : Effect.void
              })
        )
      // from the bus (unbounded, never waits) to the bounded queue: a slow handler never slows a publisher
      const forwarder = yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.take(subscription), enqueue)))
      yield* Effect.forkScoped(
        Effect.forever(
          Effect.flatMap(Queue.take(queue), (env) =>
            Effect.suspend(() => {
              dropped = 0
              return handle(env).pipe(Effect.ensuring(SubscriptionRef.update(pending, (n) => n - 1)))
            })
          )
        )
      )
      // at the close: the events published so far are handled (within one handler's bound), then
      // every session seen has ended, each handler bounded as the others
      yield* Effect.addFinalizer(() =>
        Effect.gen(function* () {
          yield* Fiber.interrupt(forwarder)
          yield* Effect.forEach(yield* Queue.takeAll(subscription), enqueue, { discard: true })
          yield* pending.changes.pipe(
            Stream.takeUntil((n) => n <= 0),
            Stream.runDrain,
            Effect.timeoutOption(Duration.millis(options.timeoutMs))
          )
          yield* Effect.forEach(seen, (sessionId) => call("session.end", () => ({ sessionId })), { discard: true })
        })
      )
    })
  )
