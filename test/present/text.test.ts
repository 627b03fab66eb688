import { describe, expect, it } from "@effect/vitest"
import { FastCheck } from "effect"
import { formatCount } from "../../src/present/text.js"

describe("formatCount", () => {
  it("groups the digits of a whole number in threes, as en-US does", () => {
    expect(formatCount(0)).toBe("0")
    expect(formatCount(999)).toBe("999")
    expect(formatCount(1_000)).toBe("1,000")
    expect(formatCount(988_040)).toBe("988,040")
    expect(formatCount(1_234_567)).toBe("1,234,567")
    expect(formatCount(-1_234)).toBe("-1,234")
    expect(formatCount(999.6)).toBe("1,000")
    // a negative that rounds to zero is 0, not -0
    expect(formatCount(-0.4)).toBe("0")
    expect(formatCount(Number.NaN)).toBe("NaN")
    expect(formatCount(1e21)).toBe((1e21).toLocaleString("en-US"))
  })

  it("is what toLocaleString('en-US') gives for any safe integer", () => {
    FastCheck.assert(
      FastCheck.property(
        FastCheck.maxSafeInteger().filter((n) => n !== 0),
        (n) => {
          expect(formatCount(n)).toBe(n.toLocaleString("en-US"))
        }
      ),
      { numRuns: 500, seed: 3 }
    )
  })
})
