/** The live rows (src/cli/liveRegion.ts): a row never wraps, and is erased exactly. */
import { describe, expect, it } from "vitest"
import { charWidth, fitWidth, makeLiveRegion } from "../../src/cli/liveRegion.js"

const ESC = "\u001b"

describe("fitWidth", () => {
  it("cuts to one row of the terminal, counting wide characters as two columns", () => {
    expect(fitWidth("short", 80)).toBe("short")
    expect(fitWidth("x".repeat(79), 80)).toBe("x".repeat(79))
    expect(fitWidth("x".repeat(80), 80)).toBe(`${"x".repeat(78)}…`)
    expect([charWidth("日"), charWidth("a"), charWidth("\u0301"), charWidth("🚀")]).toEqual([2, 1, 0, 2])
    // 12 columns of room (13 - 1): five wide characters take 10, the ellipsis one
    expect(fitWidth("日本語のテキストです", 13)).toBe("日本語のテ…")
    expect(fitWidth("anything", undefined)).toBe("anything")
  })
})

describe("the live region", () => {
  it("draws its rows without a last newline and erases exactly what it drew", () => {
    const region = makeLiveRegion()
    expect(region.draw(0, 80)).toBe("")
    expect(region.erase()).toBe("")
    region.set("a", { text: (now) => `a ${now}`, style: (t) => `<${t}>` })
    region.set("b", { text: () => "b", style: (t) => t })
    expect(region.draw(5, 80)).toBe("<a 5>\nb")
    expect(region.erase()).toBe(`\r${ESC}[2K${ESC}[1A${ESC}[2K`)
    // erased: nothing more to erase
    expect(region.erase()).toBe("")
    region.delete("a")
    expect(region.draw(6, 80)).toBe("b")
    expect(region.erase()).toBe(`\r${ESC}[2K`)
  })

  it("shows at most as many rows as fit, and counts the rest", () => {
    const region = makeLiveRegion()
    for (const key of ["1", "2", "3", "4", "5"]) region.set(key, { text: () => `row ${key}`, style: (t) => t })
    expect(region.draw(0, 80, 5)).toBe("row 1\nrow 2\n+3 more running")
  })
})
