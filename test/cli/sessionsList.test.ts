/**
 * The pure parts of `sessions list` (`src/cli/sessionsList.ts`): the outcome of an index row, the
 * cost text, the date, and the table fitting its width.
 */
import { describe, expect, it } from "@effect/vitest"
import { FastCheck } from "effect"
import { makeStyle } from "../../src/cli/render.js"
import {
  costText,
  cut,
  type ListedSession,
  type Outcome,
  outcomeOf,
  renderTable,
  updatedText
} from "../../src/cli/sessionsList.js"
import { SessionId } from "../../src/domain/Ids.js"
import type { SessionSummary } from "../../src/store/EventStore.js"

const summary = (fields: Partial<SessionSummary> = {}): SessionSummary => ({
  id: SessionId.make("0195a0b0-0000-7000-8000-000000000001"),
  title: "t",
  cwd: null,
  createdAt: 0,
  updatedAt: 0,
  lastSeq: 1,
  status: "idle",
  deleted: false,
  model: null,
  turnOpen: false,
  lastTurn: null,
  cost: 0,
  costKnown: true,
  ...fields
})

describe("sessions list", () => {
  it("outcomeOf: an open turn is running only while driven; how the last turn ended otherwise", () => {
    const cases: Array<[Partial<SessionSummary>, boolean, Outcome]> = [
      [{ turnOpen: true }, true, "running"],
      [{ turnOpen: true }, false, "crashed"],
      [{ turnOpen: true, lastTurn: { reason: "stop", interrupted: false } }, false, "crashed"],
      [{}, false, "new"],
      [{}, true, "new"],
      [{ lastTurn: { reason: "stop", interrupted: false } }, false, "finished"],
      [{ lastTurn: { reason: "stop", interrupted: false } }, true, "finished"],
      [{ lastTurn: { reason: "max-steps", interrupted: false } }, false, "max-steps"],
      [{ lastTurn: { reason: "output-limit", interrupted: false } }, false, "output-limit"],
      [{ lastTurn: { reason: "error", interrupted: false } }, false, "failed"],
      [{ lastTurn: { reason: "user", interrupted: true } }, false, "interrupted"],
      [{ lastTurn: { reason: "shutdown", interrupted: true } }, false, "interrupted"],
      [{ lastTurn: { reason: "crash", interrupted: true } }, false, "crashed"],
      [{ lastTurn: { reason: "error", interrupted: true } }, false, "failed"]
    ]
    for (const [fields, driven, outcome] of cases) {
      expect(outcomeOf(summary(fields), driven), JSON.stringify([fields, driven])).toBe(outcome)
    }
  })

  it("costText: never $0 for what had no price", () => {
    expect(costText({ cost: 0.0123, costKnown: true })).toBe("$0.0123")
    expect(costText({ cost: 2.5, costKnown: true })).toBe("$2.50")
    expect(costText({ cost: 0, costKnown: true })).toBe("$0")
    expect(costText({ cost: 0, costKnown: false })).toBe("unknown")
    expect(costText({ cost: 0.01, costKnown: false })).toBe("≥ $0.0100")
  })

  it("updatedText: MM-DD HH:MM in the current year, the date before it (local time)", () => {
    const at = new Date(2026, 2, 4, 9, 7).getTime()
    expect(updatedText(at, new Date(2026, 11, 31).getTime())).toBe("03-04 09:07")
    expect(updatedText(at, new Date(2027, 0, 1).getTime())).toBe("2026-03-04")
  })

  it("cut marks what it cut", () => {
    expect(cut("abcdef", 6)).toBe("abcdef")
    expect(cut("abcdefg", 6)).toBe("abcde…")
    expect(cut("ääääääää", 4)).toBe("äää…")
  })

  it("a blank title or model shows its placeholder, so the row keeps its cost whole", () => {
    const listed: Array<ListedSession> = [
      { shortId: "a000a00a", outcome: "running", summary: summary({ title: " ", model: " \t", costKnown: false }) },
      { shortId: "b000b00b", outcome: "new", summary: summary({ title: "\n", model: null }) }
    ]
    const lines = renderTable(listed, makeStyle(false), { now: 1_800_000_000_000 })
    expect(lines[1]).toMatch(/ unknown +- +\(untitled\)$/)
    expect(lines[2]).toMatch(/ \$0 +- +\(untitled\)$/)
  })

  it("property: the table fits 80 columns, cutting only the title and the model", () => {
    const row = FastCheck.record({
      shortId: FastCheck.stringMatching(/^[0-9a-f]{8}(-[0-9a-f]{1,4})?$/),
      title: FastCheck.option(FastCheck.string({ maxLength: 120 }), { nil: null }),
      model: FastCheck.option(FastCheck.string({ minLength: 1, maxLength: 50 }), { nil: null }),
      outcome: FastCheck.constantFrom<Outcome>(
        "running",
        "crashed",
        "finished",
        "max-steps",
        "output-limit",
        "failed",
        "interrupted",
        "new"
      ),
      deleted: FastCheck.boolean(),
      cost: FastCheck.double({ min: 0, max: 500, noNaN: true }),
      costKnown: FastCheck.boolean(),
      updatedAt: FastCheck.integer({ min: 0, max: 4_000_000_000_000 })
    })
    FastCheck.assert(
      FastCheck.property(FastCheck.array(row, { minLength: 1, maxLength: 12 }), (rows) => {
        const listed: Array<ListedSession> = rows.map((r) => ({
          shortId: r.shortId,
          outcome: r.outcome,
          summary: summary({
            title: r.title,
            model: r.model,
            deleted: r.deleted,
            cost: r.cost,
            costKnown: r.costKnown,
            updatedAt: r.updatedAt
          })
        }))
        const lines = renderTable(listed, makeStyle(false), { now: 1_800_000_000_000 })
        expect(lines).toHaveLength(rows.length + 1)
        for (const line of lines) expect(Array.from(line).length).toBeLessThanOrEqual(80)
        rows.forEach((r, i) => {
          // the id, status, date and cost are whole
          expect(lines[i + 1]!.startsWith(`${r.shortId} `)).toBe(true)
          expect(lines[i + 1]).toContain(` ${r.deleted ? "deleted" : r.outcome} `)
          expect(lines[i + 1]).toContain(` ${costText(r)} `)
        })
      }),
      { numRuns: 300 }
    )
  })
})
