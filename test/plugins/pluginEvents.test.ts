/**
 * The plugins' event hooks (src/plugins/PluginEvents.ts): off the kernel's path — a handler that
 * never returns holds up neither the publisher nor the events after its bound (TestClock), a queue
 * that fills drops newer events and says so once, and a handler gets a frozen copy.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Logger, LogLevel, Scope, TestClock } from "effect"
import type { Envelope } from "../../src/domain/Events.js"
import { EVENT_QUEUE_SIZE, layerPluginEvents } from "../../src/plugins/PluginEvents.js"
import { EventBus } from "../../src/store/EventBus.js"

/** Lets the other fibers run until `condition` holds (an observable condition, not a wait). */
const until = (condition: () => boolean) =>
  Effect.gen(function* () {
    for (let i = 0; i < 100_000 && !condition(); i++) yield* Effect.yieldNow()
  })

const envelope = (seq: number, type = "session.status"): Envelope =>
  ({
    id: `e${seq}`,
    sessionId: "s1",
    seq,
    type,
    at: 0,
    parentId: null,
    v: 1,
    payload: type === "turn.finished" ? { turnId: "t1", reason: "stop" } : { status: { _tag: "idle" } }
  }) as unknown as Envelope

const logged: Array<string> = []
const capture = Logger.add(Logger.make(({ message }) => void logged.push(String(message))))

describe("plugin event hooks", () => {
  it.scoped("a handler that hangs is bounded; the publisher never waits; a full queue drops newer events", () =>
    Effect.gen(function* () {
      logged.length = 0
      const seen: Array<number> = []
      const bus = yield* EventBus
      const scope = yield* Scope.make()
      const events = layerPluginEvents({
        plugins: [
          {
            name: "slow",
            events: {
              event: (env) => {
                seen.push((env as { seq: number }).seq)
                return new Promise(() => {})
              }
            }
          }
        ],
        timeoutMs: 1_000
      })
      yield* Layer.buildWithScope(events.pipe(Layer.provide(Layer.succeed(EventBus, bus))), scope)
      // all published at once, whatever the handler does
      yield* bus.publish(Array.from({ length: EVENT_QUEUE_SIZE + 100 }, (_, i) => envelope(i + 1)))
      yield* until(() => logged.some((line) => line.includes("behind by")))
      expect(seen).toEqual([1])
      expect(logged.filter((line) => line.includes("behind by"))).toHaveLength(1)
      // its bound passed: the next event is handled, the failure logged
      yield* TestClock.adjust("1 second")
      yield* until(() => seen.length === 2)
      expect(seen).toEqual([1, 2])
      expect(logged.filter((line) => line.includes("plugin slow: its event hook failed"))).toHaveLength(1)
      // (the runner's scope is left open: its close would wait for the hanging handler's bound)
    }).pipe(Effect.provide(EventBus.layer), Effect.provide(capture), Logger.withMinimumLogLevel(LogLevel.Debug))
  )

  it.scoped("a handler gets a frozen copy: what it changes, nobody else sees", () =>
    Effect.gen(function* () {
      const bus = yield* EventBus
      const original = envelope(1, "turn.finished")
      const results: Array<string> = []
      yield* Layer.buildWithScope(
        layerPluginEvents({
          plugins: [
            {
              name: "meddler",
              events: {
                event: (env) => {
                  try {
                    ;(env as { payload: { reason: string } }).payload.reason = "changed"
                  } catch {
                    results.push("frozen")
                  }
                },
                "turn.end": (e) => void results.push(`turn.end ${e.reason}`)
              }
            }
          ],
          timeoutMs: 1_000
        }).pipe(Layer.provide(Layer.succeed(EventBus, bus))),
        yield* Effect.scope
      )
      yield* bus.publish([original])
      yield* until(() => results.length === 2)
      expect(results).toEqual(["frozen", "turn.end stop"])
      expect((original.payload as { reason: string }).reason).toBe("stop")
    }).pipe(Effect.provide(EventBus.layer))
  )
})
