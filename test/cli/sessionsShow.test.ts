/**
 * `sessions show`'s text view of a long session (`printSession`: folded and printed as messages
 * settle, their content let go) is the view of the whole state (`renderSession`), for random
 * sessions: steps, tool calls in every state, steering, queued and withdrawn messages, model
 * switches, interrupts, compactions — whole and cut at any seq.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { makeStyle } from "../../src/cli/render.js"
import { printSession, renderSession } from "../../src/cli/sessionsShow.js"
import { SessionId } from "../../src/domain/Ids.js"
import { EventStore } from "../../src/store/EventStore.js"
import { foldAll } from "../../src/store/Snapshots.js"
import { choicesFromSeed, simulate } from "../support/arbitraries.js"

const ID = SessionId.make("show-1")

describe("sessions show of a long session", () => {
  it.effect("prints what the whole state shows, for 40 random sessions, whole and cut", () =>
    Effect.gen(function* () {
      for (let seed = 1; seed <= 40; seed++) {
        const result = yield* Effect.gen(function* () {
          const store = yield* EventStore
          yield* store.append(ID, simulate(choicesFromSeed(seed, 400)))
          const last = yield* store.lastSeq(ID)
          for (const atSeq of [undefined, Math.max(1, Math.floor(last / 3)), Math.max(1, last - 2)]) {
            for (const full of [false, true]) {
              const style = makeStyle(seed % 2 === 0)
              const options = { full, atSeq, totalEvents: last }
              const expected = renderSession(yield* foldAll(ID, atSeq), style, options)
              const printed: Array<string> = []
              yield* printSession(ID, style, options, (text) => Effect.sync(() => printed.push(text)))
              expect(printed.join("\n"), `seed ${seed}, at ${atSeq}, full ${full}`).toBe(expected)
            }
          }
          return last
        }).pipe(Effect.provide(EventStore.layerMemory))
        expect(result).toBeGreaterThan(20)
      }
    })
  )
})
