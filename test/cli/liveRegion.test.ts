/**
 * The live rows' text (src/cli/liveRegion.ts): a command's output shown in a row can never move the
 * cursor, clear the screen or retitle the window, and a row never wraps.
 */
import { describe, expect, it } from "vitest"
import { charWidth, fitWidth, lastLine, makeLiveRegion, stripControls } from "../../src/cli/liveRegion.js"

const ESC = "\u001b"

describe("lastLine", () => {
  it("is the last line that shows something, after its last carriage return (a progress bar)", () => {
    expect(lastLine("line1\nline2\n")).toBe("line2")
    expect(lastLine("line1\nline2\n\n  \n")).toBe("line2")
    expect(lastLine("downloading  10%\rdownloading  55%\r")).toBe("downloading  55%")
    expect(lastLine("one\r\ntwo\r\n")).toBe("two")
    expect(lastLine("")).toBe("")
    expect(lastLine("\n\n")).toBe("")
  })

  it("removes escape sequences and control characters: colours, cursor moves, clears, titles, bells", () => {
    expect(lastLine(`${ESC}[31mred${ESC}[0m and ${ESC}[1;32mgreen${ESC}[m`)).toBe("red and green")
    // clear the screen, move the cursor home, erase the line, scroll region
    expect(lastLine(`a${ESC}[2J${ESC}[H${ESC}[2Kb${ESC}[1;24r`)).toBe("ab")
    // window title (OSC, ended by BEL or by ST), a hyperlink, DCS
    expect(lastLine(`${ESC}]0;owned\u0007title ok`)).toBe("title ok")
    expect(lastLine(`${ESC}]8;;http://x${ESC}\\link${ESC}]8;;${ESC}\\`)).toBe("link")
    expect(lastLine(`${ESC}P1$r${ESC}\\dcs`)).toBe("dcs")
    // a terminal reset, keypad mode, an 8-bit CSI, backspaces, a bell, NUL, DEL, tabs
    expect(lastLine(`${ESC}c${ESC}=x\u009b2Jy`)).toBe("xy")
    expect(lastLine("abc\b\bX\u0007\u0000\u007f\tok")).toBe("abcX ok")
    // a sequence cut by the start or the end of the tail leaves no escape
    expect(lastLine(`tail ${ESC}[3`)).toBe("tail")
    expect(lastLine(`tail ${ESC}`)).toBe("tail")
    // bidirectional overrides would reorder the row
    expect(lastLine("\u202eevil\u202c ok")).toBe("evil ok")
    for (const sample of [`${ESC}[31mx`, `x${ESC}]0;t`, "\u009b31m", `${ESC}(B`]) {
      expect(lastLine(sample)).not.toMatch(/\p{Cc}/u)
    }
  })

  it("keeps text as it is", () => {
    expect(stripControls("npm test -- --run ✓ 12 passed (ünïcode, 日本)")).toBe(
      "npm test -- --run ✓ 12 passed (ünïcode, 日本)"
    )
  })
})

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
