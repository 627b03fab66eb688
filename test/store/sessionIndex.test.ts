/**
 * The session index (`summarize`, kept on every append) agrees with the projection on what it
 * records, for random sessions cut anywhere and appended in random batches: `sessions list` reads
 * the index and `sessions show` the projection, so the two must never tell different stories.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either, FastCheck } from "effect"
import type { Envelope } from "../../src/domain/Events.js"
import type { EventId } from "../../src/domain/Ids.js"
import { isCostKnown } from "../../src/domain/Message.js"
import type { SessionSummary } from "../../src/store/EventStore.js"
import { type PreparedEvent, summarize } from "../../src/store/internal/storeService.js"
import * as Projection from "../../src/store/Projection.js"
import { envelopesArb, SESSION_ID } from "../support/arbitraries.js"

const prepared = (e: Envelope): PreparedEvent => ({
  id: e.id as EventId,
  type: e.type,
  at: e.at,
  parentId: e.parentId,
  v: e.v,
  json: JSON.stringify(e.payload)
})

/** The index after the envelopes, appended in batches cut at `cuts`. */
const indexOf = (envelopes: ReadonlyArray<Envelope>, cuts: ReadonlyArray<number>): SessionSummary | undefined => {
  const bounds = [...new Set([0, ...cuts.map((c) => c % (envelopes.length + 1)), envelopes.length])].sort(
    (a, b) => a - b
  )
  let summary: SessionSummary | undefined
  for (let i = 0; i + 1 < bounds.length; i++) {
    const batch = envelopes.slice(bounds[i], bounds[i + 1])
    summary = summarize(summary, SESSION_ID, bounds[i]! + 1, batch.map(prepared))
  }
  return summary
}

describe("the session index", () => {
  it("agrees with the projection: title, cwd, model, status, turn, last turn, cost", () => {
    FastCheck.assert(
      FastCheck.property(
        envelopesArb({ maxLength: 120 }),
        FastCheck.array(FastCheck.nat(), { maxLength: 6 }),
        (envelopes, cuts) => {
          const folded = Projection.applyAll(Projection.empty(SESSION_ID), envelopes)
          if (Either.isLeft(folded)) throw folded.left
          const state = folded.right
          const summary = indexOf(envelopes, cuts)
          if (envelopes.length === 0) return summary === undefined
          expect(summary).toEqual({
            id: SESSION_ID,
            title: state.title,
            cwd: state.cwd,
            createdAt: state.createdAt,
            updatedAt: state.updatedAt,
            lastSeq: state.lastSeq,
            status: state.status._tag,
            deleted: state.deleted,
            model: state.model,
            turnOpen: state.turn !== null,
            lastTurn:
              state.lastTurn === null
                ? null
                : { reason: state.lastTurn.reason, interrupted: state.lastTurn.interrupted },
            cost: state.totals.cost,
            costKnown: isCostKnown(state.totals)
          })
          return true
        }
      ),
      { numRuns: 300 }
    )
  })

  it("the generated sessions exercise it: open and ended turns, interrupts, models and costs", () => {
    const seen = { open: 0, finished: 0, interrupted: 0, cost: 0 }
    FastCheck.assert(
      FastCheck.property(envelopesArb({ maxLength: 120 }), (envelopes) => {
        const summary = indexOf(envelopes, [])
        if (summary === undefined) return
        if (summary.turnOpen) seen.open++
        if (summary.lastTurn?.interrupted === false) seen.finished++
        if (summary.lastTurn?.interrupted === true) seen.interrupted++
        if (summary.cost > 0) seen.cost++
      }),
      { numRuns: 300 }
    )
    expect(seen.open).toBeGreaterThan(10)
    expect(seen.finished).toBeGreaterThan(10)
    expect(seen.interrupted).toBeGreaterThan(10)
    expect(seen.cost).toBeGreaterThan(10)
  })
})
