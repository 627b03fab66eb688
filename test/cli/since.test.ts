import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { parseSince } from "../../src/cli/since.js"

const now = Date.UTC(2026, 11, 1, 12, 0, 0)

describe("--since", () => {
  it("a time ago: minutes, hours, days, weeks", () => {
    expect(parseSince("90m", now)).toEqual(Either.right(now - 90 * 60_000))
    expect(parseSince("12h", now)).toEqual(Either.right(now - 12 * 3_600_000))
    expect(parseSince(" 7d ", now)).toEqual(Either.right(now - 7 * 86_400_000))
    expect(parseSince("2W", now)).toEqual(Either.right(now - 14 * 86_400_000))
  })

  it("a local date is its midnight; a local date and time; an ISO time with a zone", () => {
    expect(parseSince("2026-11-30", now)).toEqual(Either.right(new Date(2026, 10, 30).getTime()))
    expect(parseSince("2026-11-30T14:05", now)).toEqual(Either.right(new Date(2026, 10, 30, 14, 5).getTime()))
    expect(parseSince("2026-11-30 14:05:09", now)).toEqual(Either.right(new Date(2026, 10, 30, 14, 5, 9).getTime()))
    expect(parseSince("2026-11-30T14:05:00Z", now)).toEqual(Either.right(Date.UTC(2026, 10, 30, 14, 5)))
    expect(parseSince("2026-11-30T14:05:00+01:00", now)).toEqual(Either.right(Date.UTC(2026, 10, 30, 13, 5)))
  })

  it("anything else says what it takes", () => {
    for (const bad of ["yesterday", "", "7", "-3d", "2026-02-31", "2026-13-01", "2026-11-30T25:00Z"]) {
      const result = parseSince(bad, now)
      expect(Either.isLeft(result), bad).toBe(true)
    }
    expect(Either.getLeft(parseSince("2026-02-31", now))).toEqual(
      Either.getLeft(Either.left('"2026-02-31" is not a date of the calendar'))
    )
    expect(Either.getLeft(parseSince("soon", now)).pipe((o) => (o._tag === "Some" ? o.value : ""))).toContain(
      "give a date (2026-11-30)"
    )
  })
})
