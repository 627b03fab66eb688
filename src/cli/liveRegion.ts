/**
 * The last rows of a terminal, redrawn in place: what is going on right now (a retry countdown, the
 * tool calls that are running). Pure: each operation returns the text to write, the caller writes it
 * to the terminal (stderr) in order with everything else.
 *
 * The rows are drawn below everything else, joined by newlines and without a newline after the
 * last one, so the cursor stays on the last row; `erase` goes back to the first row's start and
 * clears each row (`CR`, `ESC [2K`, then `ESC [1A ESC [2K` per row above), leaving the cursor where
 * the rows began. Every row is cut to fit one terminal row (`fitWidth`): a row that wrapped could
 * not be cleared this way. Text shown in a row comes from outside (a command's output): `lastLine`
 * removes escape sequences and control characters from it, so it can never move the cursor, clear
 * the screen or retitle the window.
 */

/** A row: its text at `now` (plain, without styles), and the style it is shown in. */
export interface LiveRow {
  readonly text: (now: number) => string
  readonly style: (text: string) => string
}

export interface LiveRegion {
  readonly set: (key: string, row: LiveRow) => void
  readonly delete: (key: string) => void
  readonly size: () => number
  /** the text that erases the rows drawn (the cursor ends where they began); "" when none are */
  readonly erase: () => string
  /** the text that draws the rows (the cursor must be at a line's start); "" when there are none */
  readonly draw: (now: number, columns: number | undefined, height?: number | undefined) => string
}

/**
 * The text that erases the `rows` rows ending at the cursor's (the cursor ends at the start of the
 * first): `CR ESC[2K`, then `ESC[1A ESC[2K` for each row above. "" for none.
 */
export const eraseRows = (rows: number): string =>
  rows <= 0 ? "" : `\r\u001b[2K${"\u001b[1A\u001b[2K".repeat(rows - 1)}`

/** How many terminal rows `width` columns of text take on a terminal `columns` wide (1 when unknown). */
export const rowsOf = (width: number, columns: number | undefined): number =>
  columns === undefined || columns < 1 ? 1 : Math.max(1, Math.ceil(width / columns))

/** The most rows drawn at once; the rest are counted in a last row (`+3 more running`). */
export const MAX_LIVE_ROWS = 8

export const makeLiveRegion = (): LiveRegion => {
  const rows = new Map<string, LiveRow>()
  let drawn = 0
  return {
    set: (key, row) => void rows.set(key, row),
    delete: (key) => void rows.delete(key),
    size: () => rows.size,
    erase: () => {
      const text = eraseRows(drawn)
      drawn = 0
      return text
    },
    draw: (now, columns, height) => {
      if (rows.size === 0) return ""
      const room = Math.max(1, Math.min(MAX_LIVE_ROWS, (height ?? 24) - 2))
      const all = Array.from(rows.values())
      const shown = all.length <= room ? all : all.slice(0, room - 1)
      const lines = shown.map((row) => row.style(fitWidth(row.text(now), columns)))
      if (shown.length < all.length) lines.push(fitWidth(`+${all.length - shown.length} more running`, columns))
      drawn = lines.length
      return lines.join("\n")
    }
  }
}

// ---------------------------------------------------------------------------------------------
// text from outside

const ESC = "\u001b"
/** OSC (`ESC ]` … BEL or ST), and DCS / SOS / PM / APC strings (`ESC P` … ST) */
const stringSequence = new RegExp(`${ESC}[\\]PX^_][^\\u0007${ESC}]*(?:\\u0007|${ESC}\\\\)?`, "g")
/** CSI (`ESC [` parameters, intermediates, a final byte), 7- or 8-bit */
const csiSequence = new RegExp(`(?:${ESC}\\[|\\u009b)[0-?]*[ -/]*[@-~]?`, "g")
/** any other escape: `ESC` intermediates and a final byte (`ESC c` resets the terminal) */
const otherEscape = new RegExp(`${ESC}[ -/]*[0-~]?`, "g")
/** C0 and C1 controls, DEL, and the bidirectional overrides that reorder what follows them */
const controls = /[\p{Cc}\u200e\u200f\u202a-\u202e\u2066-\u2069]/gu

/** `text` without escape sequences and control characters (a tab is a space). */
export const stripControls = (text: string): string =>
  text
    .replace(stringSequence, "")
    .replace(csiSequence, "")
    .replace(otherEscape, "")
    .replace(/\t/g, " ")
    .replace(controls, "")

/**
 * The last line of a command's output that shows something, as a terminal would show it at the end
 * (after the last carriage return: a progress bar redraws its line with `\r`), without escape
 * sequences or control characters, and trimmed. "" when there is none.
 */
export const lastLine = (output: string): string => {
  const lines = output.split("\n")
  for (let i = lines.length - 1; i >= 0; i--) {
    const segments = lines[i]!.split("\r")
    for (let j = segments.length - 1; j >= 0; j--) {
      const shown = stripControls(segments[j]!).trim()
      if (shown !== "") return shown
    }
  }
  return ""
}

// ---------------------------------------------------------------------------------------------
// width

/** Combining marks take no column (zero-width spaces and variation selectors are marks or ranges below). */
const mark = /^\p{M}$/u
/** East Asian wide and fullwidth characters, and emoji, take two. */
const wide =
  /^[\u1100-\u115f\u231a\u231b\u2329\u232a\u23e9-\u23ec\u23f0\u23f3\u25fd\u25fe\u2614\u2615\u2648-\u2653\u267f\u2693\u26a1\u26aa\u26ab\u26bd\u26be\u26c4\u26c5\u26ce\u26d4\u26ea\u26f2\u26f3\u26f5\u26fa\u26fd\u2705\u270a\u270b\u2728\u274c\u274e\u2753-\u2755\u2757\u2795-\u2797\u27b0\u27bf\u2b1b\u2b1c\u2b50\u2b55\u2e80-\u303e\u3041-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua000-\ua4cf\ua960-\ua97f\uac00-\ud7a3\uf900-\ufaff\ufe10-\ufe19\ufe30-\ufe6f\uff00-\uff60\uffe0-\uffe6\u{16fe0}-\u{18aff}\u{1b000}-\u{1b2ff}\u{1f004}\u{1f0cf}\u{1f18e}\u{1f191}-\u{1f19a}\u{1f200}-\u{1f251}\u{1f300}-\u{1f64f}\u{1f680}-\u{1f6ff}\u{1f7e0}-\u{1f7eb}\u{1f900}-\u{1f9ff}\u{1fa70}-\u{1faff}\u{20000}-\u{3fffd}]$/u

/** The columns one character takes on a terminal: 0, 1 or 2. */
export const charWidth = (char: string): number => {
  const code = char.codePointAt(0) ?? 0
  if (mark.test(char) || (code >= 0x200b && code <= 0x200d) || (code >= 0xfe00 && code <= 0xfe0f)) return 0
  return wide.test(char) ? 2 : 1
}

/**
 * `text` (plain, one line) cut to fit one terminal row of `columns`, ending with `…` when cut: it
 * takes at most `columns - 1` columns, so the cursor never waits at the row's end to wrap. As it is
 * when the width is not known (or too small to be true).
 */
export const fitWidth = (text: string, columns: number | undefined): string => {
  if (columns === undefined || columns < 10) return text
  const room = columns - 1
  const chars = Array.from(text)
  let width = 0
  for (const char of chars) width += charWidth(char)
  if (width <= room) return text
  let used = 0
  let out = ""
  for (const char of chars) {
    const w = charWidth(char)
    if (used + w > room - 1) break
    used += w
    out += char
  }
  return `${out}…`
}
