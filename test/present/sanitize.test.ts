/**
 * What reaches the screen from the model, commands and files (src/present/sanitize.ts): no escape
 * sequence and no control character but the newline; a carriage return leaves what a terminal
 * would show of its line.
 */
import { describe, expect, it } from "vitest"
import { sanitize } from "../../src/present/sanitize.js"
import { CONTROL } from "../cli/tui/support.js"

const ESC = "\u001b"
const BEL = "\u0007"
const ST = `${ESC}\\`

describe("sanitize", () => {
  it.each([
    ["CSI: clear the screen", `a${ESC}[2Jb`, "ab"],
    ["CSI: clear the scrollback, home", `a${ESC}[3J${ESC}[Hb`, "ab"],
    ["CSI: colours (SGR)", `${ESC}[1;31mred${ESC}[0m`, "red"],
    ["CSI: private mode (hide the cursor, alternate screen)", `${ESC}[?25l${ESC}[?1049hx`, "x"],
    ["CSI: cursor position with parameters", `${ESC}[12;40Hx`, "x"],
    ["CSI: with an intermediate byte", `${ESC}[1 qx`, "x"],
    ["OSC: window title ended by BEL", `${ESC}]0;pwned${BEL}x`, "x"],
    ["OSC: window title ended by ST", `${ESC}]2;pwned${ST}x`, "x"],
    ["OSC 8: hyperlink (the label stays)", `${ESC}]8;;https://evil.example${ST}link${ESC}]8;;${ST}`, "link"],
    ["OSC 52: clipboard write", `${ESC}]52;c;cm0gLXJmIH4=${BEL}x`, "x"],
    ["DCS", `${ESC}Pq#0;2;0;0;0${ST}x`, "x"],
    ["SOS", `${ESC}Xhidden${ST}x`, "x"],
    ["PM", `${ESC}^hidden${ST}x`, "x"],
    ["APC", `${ESC}_hidden${ST}x`, "x"],
    ["ESC + one character: save / restore the cursor, reset", `${ESC}7a${ESC}8b${ESC}c`, "ab"],
    ["ESC + intermediate + final: a character set switch", `${ESC}(0lqk${ESC}(B`, "lqk"],
    ["a lone ESC at the end", `x${ESC}`, "x"],
    ["8-bit CSI", "a\u009b2Jb", "ab"],
    ["8-bit OSC ended by BEL", `\u009d0;pwned${BEL}x`, "x"],
    ["8-bit OSC ended by 8-bit ST", "\u009d0;pwned\u009cx", "x"],
    ["8-bit DCS, PM, APC, SOS", "\u0090q\u009c\u009ea\u009c\u009fb\u009c\u0098c\u009cx", "x"],
    ["other C1 controls (NEL, IND, RI)", "a\u0085b\u0084c\u008dd", "abcd"],
    ["BEL, BS, VT, FF, NUL, DEL", `a${BEL}b\bc\u000bd\u000ce\u0000f\u007fg`, "abcdefg"],
    ["SO / SI (character sets)", "a\u000eb\u000fc", "abc"]
  ])("%s", (_what, input, expected) => {
    const out = sanitize(input)
    expect(out).toBe(expected)
    expect(out).not.toMatch(CONTROL)
  })

  it("keeps newlines and text (also non-ASCII: é, 漢字, emoji)", () => {
    expect(sanitize("line 1\nlíne 2 漢字 😀\n")).toBe("line 1\nlíne 2 漢字 😀\n")
  })

  it("a tab becomes spaces", () => {
    expect(sanitize("a\tb")).toBe("a    b")
  })

  describe("carriage returns", () => {
    it("a progress bar redrawn with \\r shows its latest state", () => {
      expect(sanitize("[#   ] 25%\r[##  ] 50%\r[####] 100%\ndone")).toBe("[####] 100%\ndone")
    })

    it("\\r\\n is a newline", () => {
      expect(sanitize("one\r\ntwo\r\n")).toBe("one\ntwo\n")
    })

    it("a line ending in \\r shows what was written before it (the terminal has not overwritten it yet)", () => {
      expect(sanitize("downloading 40%\r")).toBe("downloading 40%")
      expect(sanitize("10%\r20%\r")).toBe("20%")
    })

    it("each line is handled on its own", () => {
      expect(sanitize("a\rb\nc\rd")).toBe("b\nd")
    })

    it("escape sequences inside a redrawn line go too", () => {
      expect(sanitize(`${ESC}[2K${ESC}[1G 30%\r${ESC}[2K${ESC}[1G 60%`)).toBe(" 60%")
    })
  })

  it("what is left never holds an escape, whatever the mix (a fixed pseudo-random sample)", () => {
    const alphabet = [
      ESC,
      BEL,
      "[",
      "]",
      "\\",
      "P",
      "0",
      ";",
      "m",
      "\r",
      "\n",
      "\t",
      "a",
      "\u009b",
      "\u009d",
      "\u009c",
      "?",
      "~"
    ]
    let x = 12345
    for (let n = 0; n < 2000; n++) {
      let input = ""
      for (let i = 0; i < 24; i++) {
        x = (x * 1103515245 + 12345) >>> 0
        input += alphabet[x % alphabet.length]
      }
      expect(sanitize(input)).not.toMatch(CONTROL)
    }
  })
})
