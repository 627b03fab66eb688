/**
 * The prompt's text editor, pure: multi-line text with a cursor, and the history of what was sent
 * (Up/Down on the first/last line walk it, as in a shell). The screen maps keys to these.
 */

export interface EditorState {
  readonly text: string
  /** the cursor, a UTF-16 index into `text` */
  readonly cursor: number
  /** what was sent, oldest first */
  readonly history: ReadonlyArray<string>
  /** the history entry shown (history.length: the draft) */
  readonly historyAt: number
  /** the text being written when the history walk began */
  readonly draft: string
}

/** The most characters the prompt holds (a paste beyond it is cut). */
export const MAX_INPUT_CHARS = 200_000
/** The most history entries kept. */
export const MAX_HISTORY = 500

export const emptyEditor = (history: ReadonlyArray<string> = []): EditorState => ({
  text: "",
  cursor: 0,
  history: history.slice(-MAX_HISTORY),
  historyAt: Math.min(history.length, MAX_HISTORY),
  draft: ""
})

const at = (state: EditorState, text: string, cursor: number): EditorState => ({
  ...state,
  text,
  cursor: Math.max(0, Math.min(cursor, text.length))
})

/** The prompt holding `text` (cut to the limit), the cursor at its end; the history walk ends. */
export const withText = (state: EditorState, text: string): EditorState => {
  const cut = text.slice(0, MAX_INPUT_CHARS)
  return { ...state, text: cut, cursor: cut.length, historyAt: state.history.length, draft: "" }
}

/** Inserts text at the cursor (a paste: `\r\n` and `\r` become newlines, tabs stay). */
export const insert = (state: EditorState, input: string): EditorState => {
  const clean = input.replace(/\r\n?/g, "\n")
  const room = MAX_INPUT_CHARS - state.text.length
  if (room <= 0) return state
  const piece = clean.slice(0, room)
  return at(
    state,
    state.text.slice(0, state.cursor) + piece + state.text.slice(state.cursor),
    state.cursor + piece.length
  )
}

export const backspace = (state: EditorState): EditorState => {
  if (state.cursor === 0) return state
  const step = isLowSurrogate(state.text.charCodeAt(state.cursor - 1)) && state.cursor > 1 ? 2 : 1
  return at(state, state.text.slice(0, state.cursor - step) + state.text.slice(state.cursor), state.cursor - step)
}

export const deleteForward = (state: EditorState): EditorState => {
  if (state.cursor >= state.text.length) return state
  const step = isHighSurrogate(state.text.charCodeAt(state.cursor)) ? 2 : 1
  return at(state, state.text.slice(0, state.cursor) + state.text.slice(state.cursor + step), state.cursor)
}

const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff
const isLowSurrogate = (code: number) => code >= 0xdc00 && code <= 0xdfff

export const left = (state: EditorState): EditorState =>
  at(
    state,
    state.text,
    state.cursor - (state.cursor > 1 && isLowSurrogate(state.text.charCodeAt(state.cursor - 1)) ? 2 : 1)
  )

export const right = (state: EditorState): EditorState =>
  at(state, state.text, state.cursor + (isHighSurrogate(state.text.charCodeAt(state.cursor)) ? 2 : 1))

const lineStart = (text: string, cursor: number) => text.lastIndexOf("\n", cursor - 1) + 1
const lineEnd = (text: string, cursor: number) => {
  const end = text.indexOf("\n", cursor)
  return end < 0 ? text.length : end
}

export const home = (state: EditorState): EditorState => at(state, state.text, lineStart(state.text, state.cursor))
export const end = (state: EditorState): EditorState => at(state, state.text, lineEnd(state.text, state.cursor))

/** Ctrl-U: deletes from the start of the line to the cursor. */
export const killLineBefore = (state: EditorState): EditorState => {
  const start = lineStart(state.text, state.cursor)
  return at(state, state.text.slice(0, start) + state.text.slice(state.cursor), start)
}

/** Ctrl-W: deletes the word before the cursor. */
export const killWordBefore = (state: EditorState): EditorState => {
  const before = state.text.slice(0, state.cursor)
  const start = before.replace(/\S+\s*$|\s+$/, "").length
  return at(state, state.text.slice(0, start) + state.text.slice(state.cursor), start)
}

/** Up: the line above, or (on the first line) the previous history entry. */
export const up = (state: EditorState): EditorState => {
  const start = lineStart(state.text, state.cursor)
  if (start > 0) {
    const column = state.cursor - start
    const prevStart = lineStart(state.text, start - 1)
    return at(state, state.text, Math.min(prevStart + column, start - 1))
  }
  if (state.historyAt === 0) return state
  const historyAt = state.historyAt - 1
  const draft = state.historyAt === state.history.length ? state.text : state.draft
  const text = state.history[historyAt]!
  return { ...state, text, cursor: text.length, historyAt, draft }
}

/** Down: the line below, or (on the last line) the next history entry, then the draft. */
export const down = (state: EditorState): EditorState => {
  const endOfLine = lineEnd(state.text, state.cursor)
  if (endOfLine < state.text.length) {
    const column = state.cursor - lineStart(state.text, state.cursor)
    const nextStart = endOfLine + 1
    return at(state, state.text, Math.min(nextStart + column, lineEnd(state.text, nextStart)))
  }
  if (state.historyAt >= state.history.length) return state
  const historyAt = state.historyAt + 1
  const text = historyAt === state.history.length ? state.draft : state.history[historyAt]!
  return { ...state, text, cursor: text.length, historyAt }
}

/** After sending: an empty prompt, and the text at the end of the history (not twice in a row). */
export const submitted = (state: EditorState): EditorState => {
  const text = state.text
  const history =
    text.trim() === "" || state.history.at(-1) === text ? state.history : [...state.history, text].slice(-MAX_HISTORY)
  return { text: "", cursor: 0, history, historyAt: history.length, draft: "" }
}

/** The text split into lines, with the cursor's line and column (for drawing it). */
export const cursorPosition = (state: EditorState): { readonly line: number; readonly column: number } => {
  const before = state.text.slice(0, state.cursor)
  const line = before.split("\n").length - 1
  return { line, column: state.cursor - lineStart(state.text, state.cursor) }
}
