/**
 * `logbook run`'s output loop (src/cli/runShow.ts): batches shown in one pass up to the turn's last
 * event, and the approval prompt holding the rest of its batch. Through the built binary:
 * test/integration/output.test.ts and approve.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Deferred, Effect, Fiber, TestClock } from "effect"
import { makeEventShower } from "../../src/cli/runShow.js"
import type { Envelope } from "../../src/domain/Events.js"
import { MessageId, PartId } from "../../src/domain/Ids.js"
import { SESSION_ID, toEnvelopes } from "../support/arbitraries.js"
import { e } from "../support/fixtures.js"

const M = MessageId.make("m1")
const delta = (text: string) => e("text.delta", { messageId: M, partId: PartId.make("p"), delta: text })
const asked = e("permission.asked", { permissionId: "q1", tool: "bash", pattern: "make" })

/** Envelopes from seq 11 on: the output starts after an existing session's seq 10. */
const batch = (events: Parameters<typeof toEnvelopes>[1], fromSeq = 11) =>
  Chunk.unsafeFromArray(toEnvelopes(SESSION_ID, events, { fromSeq }))

const recorder = () => {
  const log: Array<string> = []
  const showOne = (event: Envelope, now: number) => {
    log.push(`${event.seq} ${event.type} @${now}`)
  }
  return { log, showOne }
}

describe("logbook run's output loop", () => {
  it.effect("shows a batch in one pass with its time; false until the turn's last event is known and shown", () =>
    Effect.gen(function* () {
      const { log, showOne } = recorder()
      const shower = makeEventShower({ shownBefore: 10, showOne, waitAfter: () => undefined })
      yield* TestClock.setTime(5)
      expect(yield* shower.show(batch([delta("a"), delta("b")]))).toBe(false)
      expect(log).toEqual(["11 text.delta @5", "12 text.delta @5"])
      // the turn ended at 14, not shown yet: the follower goes on
      expect(shower.finish(14)).toBe(false)
      yield* TestClock.setTime(9)
      // up to the last event, not past it
      expect(yield* shower.show(batch([delta("c"), delta("d"), delta("e")], 13))).toBe(true)
      expect(log.slice(2)).toEqual(["13 text.delta @9", "14 text.delta @9"])
    })
  )

  it.effect("the turn's last event already shown when the turn ends: finish says so (the follower is stopped)", () =>
    Effect.gen(function* () {
      const { showOne } = recorder()
      const shower = makeEventShower({ shownBefore: 10, showOne, waitAfter: () => undefined })
      expect(shower.finish(10)).toBe(true)
      const other = makeEventShower({ shownBefore: 10, showOne, waitAfter: () => undefined })
      yield* other.show(batch([delta("a"), delta("b")]))
      expect(other.finish(12)).toBe(true)
      expect(other.finish(13)).toBe(false)
    })
  )

  it.effect("an event that waits (the approval prompt) holds the rest of its batch until it is answered", () =>
    Effect.gen(function* () {
      const { log, showOne } = recorder()
      const answered = yield* Deferred.make<void>()
      const shower = makeEventShower({
        shownBefore: 10,
        showOne,
        waitAfter: (event) =>
          event.type === "permission.asked"
            ? Effect.zipRight(
                Effect.sync(() => log.push("prompt shown")),
                Effect.zipRight(
                  Deferred.await(answered),
                  Effect.sync(() => log.push("answered"))
                )
              )
            : undefined
      })
      const shown = yield* Effect.fork(shower.show(batch([delta("a"), asked, delta("b"), delta("c")])))
      yield* Effect.yieldNow()
      expect(log).toEqual(["11 text.delta @0", "12 permission.asked @0", "prompt shown"])
      // the turn ends meanwhile at 13: the batch stops there once the prompt is answered
      expect(shower.finish(13)).toBe(false)
      yield* Deferred.succeed(answered, undefined)
      expect(yield* Fiber.join(shown)).toBe(true)
      expect(log.slice(3)).toEqual(["answered", "13 text.delta @0"])
      expect(shower.finish(13)).toBe(true)
    })
  )
})
