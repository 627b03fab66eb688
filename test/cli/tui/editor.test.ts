/**
 * The prompt's editor (src/cli/tui/editor.ts): text with a cursor, lines, and the history of what
 * was sent, as pure functions.
 */
import { describe, expect, it } from "vitest"
import * as E from "../../../src/cli/tui/editor.js"

/** An editor holding `text` with the cursor where `|` is (the bar removed). */
const at = (marked: string, history: ReadonlyArray<string> = []): E.EditorState => {
  const cursor = marked.indexOf("|")
  return { ...E.emptyEditor(history), text: marked.replace("|", ""), cursor }
}
/** The editor's text with `|` at the cursor. */
const show = (state: E.EditorState): string => `${state.text.slice(0, state.cursor)}|${state.text.slice(state.cursor)}`

const apply = (state: E.EditorState, ...steps: ReadonlyArray<(s: E.EditorState) => E.EditorState>) =>
  steps.reduce((s, f) => f(s), state)

describe("editing", () => {
  it("inserts at the cursor; a pasted \\r\\n or \\r is a newline, tabs stay", () => {
    expect(show(E.insert(at("ab|cd"), "XY"))).toBe("abXY|cd")
    expect(show(E.insert(at("|"), "one\r\ntwo\rthree\tfour"))).toBe("one\ntwo\nthree\tfour|")
  })

  it("holds at most MAX_INPUT_CHARS characters: a longer paste is cut, a full prompt takes nothing", () => {
    const full = E.insert(E.emptyEditor(), "x".repeat(E.MAX_INPUT_CHARS - 3))
    const cut = E.insert(full, "abcdef")
    expect(cut.text.length).toBe(E.MAX_INPUT_CHARS)
    expect(cut.text.endsWith("xabc")).toBe(true)
    expect(E.insert(cut, "z")).toBe(cut)
  })

  it("backspace and delete remove one character; nothing at the ends", () => {
    expect(show(E.backspace(at("ab|c")))).toBe("a|c")
    expect(show(E.backspace(at("|abc")))).toBe("|abc")
    expect(show(E.deleteForward(at("a|bc")))).toBe("a|c")
    expect(show(E.deleteForward(at("abc|")))).toBe("abc|")
  })

  it("a surrogate pair (an emoji) is one character for backspace, delete, left and right", () => {
    expect(show(E.backspace(at("a😀|b")))).toBe("a|b")
    expect(show(E.deleteForward(at("a|😀b")))).toBe("a|b")
    expect(show(E.left(at("a😀|b")))).toBe("a|😀b")
    expect(show(E.right(at("a|😀b")))).toBe("a😀|b")
    expect(show(E.left(at("😀|")))).toBe("|😀")
    // never inside a pair
    const walked = apply(at("|😀😀"), E.right, E.right, E.left)
    expect(walked.cursor).toBe(2)
  })

  it("left and right stop at the ends", () => {
    expect(show(E.left(at("|ab")))).toBe("|ab")
    expect(show(E.right(at("ab|")))).toBe("ab|")
  })

  it("home and end go to the ends of the cursor's line", () => {
    expect(show(E.home(at("one\ntw|o\nthree")))).toBe("one\n|two\nthree")
    expect(show(E.end(at("one\nt|wo\nthree")))).toBe("one\ntwo|\nthree")
  })

  it("Ctrl-U deletes from the line's start to the cursor", () => {
    expect(show(E.killLineBefore(at("one\ntwo th|ree")))).toBe("one\n|ree")
  })

  it("Ctrl-W deletes the word before the cursor (and the spaces after it)", () => {
    expect(show(E.killWordBefore(at("git commit -m|")))).toBe("git commit |")
    expect(show(E.killWordBefore(at("git commit   |")))).toBe("git |")
    expect(show(E.killWordBefore(at("one two| three")))).toBe("one | three")
    expect(show(E.killWordBefore(at("|abc")))).toBe("|abc")
  })

  it("the cursor's line and column", () => {
    expect(E.cursorPosition(at("one\ntw|o"))).toEqual({ line: 1, column: 2 })
    expect(E.cursorPosition(at("|"))).toEqual({ line: 0, column: 0 })
    expect(E.cursorPosition(at("a\n|"))).toEqual({ line: 1, column: 0 })
  })
})

describe("up and down", () => {
  it("move between lines keeping the column, shortened to a shorter line", () => {
    expect(show(E.up(at("first line\nsec|ond")))).toBe("fir|st line\nsecond")
    expect(show(E.up(at("ab\nlonger li|ne")))).toBe("ab|\nlonger line")
    expect(show(E.down(at("fi|rst\nsecond")))).toBe("first\nse|cond")
    expect(show(E.down(at("a longer o|ne\nab")))).toBe("a longer one\nab|")
  })

  it("on the first line Up walks back through the history; Down walks forward and back to the draft", () => {
    const start = at("draf|t", ["first", "second"])
    const one = E.up(start)
    expect(show(one)).toBe("second|")
    const two = E.up(one)
    expect(show(two)).toBe("first|")
    expect(E.up(two)).toBe(two) // the oldest: nothing before it
    const back = E.down(two)
    expect(show(back)).toBe("second|")
    const draft = E.down(back)
    expect(draft.text).toBe("draft")
    expect(E.down(draft)).toBe(draft)
  })

  it("a multi-line history entry is walked line by line before the next entry", () => {
    const s = E.up(at("|", ["one", "two\nlines"]))
    expect(show(s)).toBe("two\nlines|")
    const inside = E.up(s)
    expect(show(inside)).toBe("two|\nlines")
    expect(show(E.up(inside))).toBe("one|")
  })

  it("sending puts the text at the end of the history, not twice in a row and not when blank", () => {
    const sent = E.submitted(at("hello|", ["a"]))
    expect(sent.text).toBe("")
    expect(sent.cursor).toBe(0)
    expect(sent.history).toEqual(["a", "hello"])
    expect(sent.historyAt).toBe(2)
    expect(E.submitted({ ...sent, text: "hello", cursor: 5 }).history).toEqual(["a", "hello"])
    expect(E.submitted({ ...sent, text: "  \n", cursor: 3 }).history).toEqual(["a", "hello"])
    // the history walk starts at the newest again
    expect(E.up(sent).text).toBe("hello")
  })

  it("keeps at most MAX_HISTORY entries", () => {
    const long = Array.from({ length: E.MAX_HISTORY + 10 }, (_, i) => `m${i}`)
    const editor = E.emptyEditor(long)
    expect(editor.history).toHaveLength(E.MAX_HISTORY)
    expect(editor.history[0]).toBe("m10")
    expect(editor.historyAt).toBe(E.MAX_HISTORY)
    expect(E.up(editor).text).toBe(`m${E.MAX_HISTORY + 9}`)
    const more = E.submitted({ ...editor, text: "new", cursor: 3 })
    expect(more.history).toHaveLength(E.MAX_HISTORY)
    expect(more.history.at(-1)).toBe("new")
  })
})
