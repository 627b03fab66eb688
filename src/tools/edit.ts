/**
 * The `edit` tool: replaces an exact piece of text in a file the agent has read.
 *
 * `oldString` must occur exactly once (or `replaceAll`). When it does not match, the error says why
 * in a way the model can act on: the whitespace differs (with the lines where it would match), it
 * carries `read`'s line numbers, it occurs several times (with their lines). The file's line endings
 * are kept: in a CRLF file, `\n` in `oldString`/`newString` stands for `\r\n`. Like `write`, it needs
 * a read of the file in this session and no change on disk since; it writes atomically, records the
 * change, and remembers the new content as read (so edits can follow one another).
 */
import { Effect, Schema } from "effect"
import { confinedPath, readExisting } from "./confinedFiles.js"
import { crashPoint } from "./crashPoint.js"
import { fileStamp, requireFreshRead, requireWritable, tempPathFor, writeFileAtomic } from "./fileChanges.js"
import { notFoundFailure } from "./notFound.js"
import { BINARY_PROBE_BYTES } from "./read.js"
import { refuseMaskedSecret } from "./Secrets.js"
import { defineTool, type ToolContext, ToolFailure, type ToolOutput } from "./Tools.js"
import { nonEmptyString } from "./toolInput.js"

/** Lines of context shown before and after a change. */
export const CONTEXT_LINES = 3
/** At most this many changes are shown with context (the others are counted). */
const MAX_SHOWN_CHANGES = 3
/** A changed region longer than this is shown as its start and its end. */
const MAX_SHOWN_REGION = 20
/** Line numbers listed at most in an error. */
const MAX_LISTED = 10
/** Shown lines are cut to this many characters. */
const MAX_SHOWN_CHARS = 300

export const EditInput = Schema.Struct({
  path: nonEmptyString("The file to edit, relative to the working directory or absolute."),
  oldString: Schema.String.annotations({
    description:
      "The exact text to replace, as it is in the file: same indentation, spaces and line breaks, without read's line numbers. Include enough surrounding lines to make it unique."
  }),
  newString: Schema.String.annotations({
    description: "The text to put in its place (may be empty to delete oldString). Must differ from oldString."
  }),
  replaceAll: Schema.optional(
    Schema.Boolean.annotations({
      description: "Replace every occurrence of oldString instead of requiring exactly one. Defaults to false."
    })
  )
})
export type EditInput = typeof EditInput.Type

/** metadata of an edit: the absolute path, how many replacements, and the lines they added and removed */
export interface EditMetadata {
  readonly path: string
  readonly replacements: number
  readonly linesAdded: number
  readonly linesRemoved: number
}

// ---------------------------------------------------------------------------------------------
// matching

/** The positions of the non-overlapping occurrences of `needle` in `text`. */
const occurrences = (text: string, needle: string): Array<number> => {
  const found: Array<number> = []
  for (let i = text.indexOf(needle); i !== -1; i = text.indexOf(needle, i + needle.length)) found.push(i)
  return found
}

/** The 1-based line of the character at `index`. */
const lineAt = (text: string, index: number): number => {
  let line = 1
  for (let i = text.indexOf("\n"); i !== -1 && i < index; i = text.indexOf("\n", i + 1)) line++
  return line
}

/** `\r\n` when most line breaks of the text are CRLF, else `\n`. */
const lineEnding = (text: string): "\r\n" | "\n" => {
  const all = occurrences(text, "\n").length
  const crlf = occurrences(text, "\r\n").length
  return crlf > 0 && crlf * 2 >= all ? "\r\n" : "\n"
}

const withEnding = (text: string, eol: "\r\n" | "\n"): string => text.replace(/\r?\n/g, eol)

const listLines = (lines: ReadonlyArray<number | string>): string =>
  lines.length > MAX_LISTED
    ? `${lines.slice(0, MAX_LISTED).join(", ")} and ${lines.length - MAX_LISTED} more`
    : lines.join(", ")

const squash = (line: string): string => line.trim().replace(/\s+/g, " ")

/**
 * The line ranges where `needle` would match `text` if whitespace (indentation, runs of spaces,
 * trailing spaces, line endings) were ignored: its first line at the end of a line, its middle lines
 * whole, its last line at the start of a line.
 */
const whitespaceMatches = (text: string, needle: string): Array<readonly [number, number]> => {
  const lines = text.split("\n").map(squash)
  const wanted = needle.split("\n").map(squash)
  while (wanted.length > 1 && wanted[0] === "") wanted.shift()
  while (wanted.length > 1 && wanted.at(-1) === "") wanted.pop()
  if (wanted.length === 1 && wanted[0] === "") return []
  const found: Array<readonly [number, number]> = []
  for (let start = 0; start + wanted.length <= lines.length; start++) {
    const ok = wanted.every((w, k) => {
      const line = lines[start + k]!
      if (wanted.length === 1) return line.includes(w)
      if (k === 0) return line.endsWith(w)
      if (k === wanted.length - 1) return line.startsWith(w)
      return line === w
    })
    if (ok) found.push([start + 1, start + wanted.length])
  }
  return found
}

/** Why `oldString` was not found, and what to do. */
const notFoundMessage = (content: string, oldString: string, shown: string): string => {
  const head = `oldString was not found in ${shown}.`
  const given = oldString.split(/\r?\n/).filter((l) => l.trim() !== "")
  if (given.length > 0 && given.every((l) => /^\s*\d+\t/.test(l))) {
    return `${head} It starts its lines with line numbers from read's output (like "    12<TAB>"): they are not part of the file. Leave out the number and the tab, keep the indentation after them.`
  }
  const near = whitespaceMatches(content, oldString)
  if (near.length > 0) {
    const ranges = near.map(([a, b]) => (a === b ? `${a}` : `${a}-${b}`))
    return (
      `${head} It matches ${near.length === 1 && near[0]![0] === near[0]![1] ? "line" : "lines"} ${listLines(ranges)} if whitespace is ignored: ` +
      "the whitespace differs (indentation, tabs versus spaces, spaces inside the lines, trailing spaces or line breaks). " +
      "Read those lines again and copy them exactly."
    )
  }
  const first = given[0]?.trim()
  const lines = content.split("\n")
  const where =
    first === undefined
      ? []
      : lines.flatMap((line, i) => (line.includes(first) ? [i + 1] : [])).slice(0, MAX_LISTED + 1)
  const hint =
    where.length > 0
      ? ` Its first line appears at line ${listLines(where)}: the text after it differs.`
      : " Not even its first line occurs in the file."
  return `${head}${hint} oldString must match the file's current content exactly, including indentation and line breaks; read the file again and copy the text from it.`
}

// ---------------------------------------------------------------------------------------------
// replacing and showing

interface Replaced {
  readonly after: string
  /** where each replacement starts and ends in `after` */
  readonly regions: ReadonlyArray<readonly [number, number]>
  readonly linesAdded: number
  readonly linesRemoved: number
}

const lineStart = (text: string, index: number): number => text.lastIndexOf("\n", index - 1) + 1
const lineEnd = (text: string, index: number): number => {
  const end = text.indexOf("\n", index)
  return end === -1 ? text.length : end
}

/** The whole lines around `[from, to)` of `text`, split (the lines the region touches). */
const coveringLines = (text: string, from: number, to: number): Array<string> =>
  text.slice(lineStart(text, from), lineEnd(text, to)).split("\n")

/** Lines removed and added when `[from, from + oldLength)` of `before` became `[at, at + newLength)` of `after`. */
const lineDelta = (before: string, from: number, oldLength: number, after: string, at: number, newLength: number) => {
  const removed = coveringLines(before, from, from + oldLength)
  const added = coveringLines(after, at, at + newLength)
  while (removed.length > 0 && added.length > 0 && removed[0] === added[0]) {
    removed.shift()
    added.shift()
  }
  while (removed.length > 0 && added.length > 0 && removed.at(-1) === added.at(-1)) {
    removed.pop()
    added.pop()
  }
  return { removed: removed.length, added: added.length }
}

const replaceAt = (
  content: string,
  positions: ReadonlyArray<number>,
  oldString: string,
  newString: string
): Replaced => {
  const parts: Array<string> = []
  const regions: Array<readonly [number, number]> = []
  let cursor = 0
  let length = 0
  for (const position of positions) {
    parts.push(content.slice(cursor, position), newString)
    length += position - cursor
    regions.push([length, length + newString.length])
    length += newString.length
    cursor = position + oldString.length
  }
  parts.push(content.slice(cursor))
  const after = parts.join("")
  let linesAdded = 0
  let linesRemoved = 0
  positions.forEach((position, i) => {
    const delta = lineDelta(content, position, oldString.length, after, regions[i]![0], newString.length)
    linesAdded += delta.added
    linesRemoved += delta.removed
  })
  return { after, regions, linesAdded, linesRemoved }
}

const numbered = (
  lines: ReadonlyArray<string>,
  from: number,
  to: number,
  redact: (text: string) => string
): Array<string> => {
  const out: Array<string> = []
  for (let n = from; n <= to; n++) {
    // logbook's API keys masked before a long line is cut (ToolContext.secrets)
    const text = redact(lines[n - 1]!.replace(/\r$/, ""))
    const cut = text.length > MAX_SHOWN_CHARS ? `${text.slice(0, MAX_SHOWN_CHARS)} …` : text
    out.push(`${String(n).padStart(6)}\t${cut}`)
  }
  return out
}

/** The changed regions of `after` with a few lines of context, numbered like read's output. */
const showChanges = (
  after: string,
  regions: ReadonlyArray<readonly [number, number]>,
  redact: (text: string) => string
): string => {
  if (after === "") return "(the file is now empty)"
  const lines = after.split("\n")
  if (lines.length > 1 && lines.at(-1) === "") lines.pop()
  const total = Math.max(lines.length, 1)
  // line ranges of the changes, widened by the context and merged where they touch
  const windows: Array<{ first: number; last: number; from: number; to: number }> = []
  for (const [start, end] of regions) {
    const first = Math.min(lineAt(after, start), total)
    const last = Math.min(Math.max(first, lineAt(after, Math.max(start, end - 1))), total)
    const from = Math.max(1, first - CONTEXT_LINES)
    const to = Math.min(total, last + CONTEXT_LINES)
    const previous = windows.at(-1)
    if (previous !== undefined && from <= previous.to + 1) {
      previous.to = Math.max(previous.to, to)
      previous.last = Math.max(previous.last, last)
    } else {
      windows.push({ first, last, from, to })
    }
  }
  const blocks = windows.slice(0, MAX_SHOWN_CHANGES).map((w) => {
    if (w.last - w.first + 1 <= MAX_SHOWN_REGION) return numbered(lines, w.from, w.to, redact).join("\n")
    const half = Math.floor(MAX_SHOWN_REGION / 2)
    return [
      ...numbered(lines, w.from, w.first + half - 1, redact),
      `     …\t(${w.last - w.first + 1 - 2 * half} more changed lines)`,
      ...numbered(lines, w.last - half + 1, w.to, redact)
    ].join("\n")
  })
  const rest = windows.length - blocks.length
  return rest > 0 ? `${blocks.join("\n  ...\n")}\n\n(${rest} more changed places not shown)` : blocks.join("\n  ...\n")
}

// ---------------------------------------------------------------------------------------------
// the tool

export const edit = defineTool<EditInput>({
  name: "edit",
  description: [
    "Replaces exact text in an existing file: `oldString` becomes `newString`.",
    "- Read the file with the read tool first (in this session); if it changed on disk since your last read, write or edit, the call is refused and you read it again.",
    "- `oldString` must match the file exactly, including indentation (tabs or spaces), spaces and line breaks. Copy it from read's output without the line-number prefix (the number and the tab before each line).",
    "- It must occur exactly once: include enough surrounding lines to make it unique. To change every occurrence (e.g. rename a variable), set `replaceAll` to true.",
    "- To delete text, use an empty `newString`. To add text, put a neighbouring line in `oldString` and repeat it in `newString` with the new lines.",
    "- The file's line endings are kept (in a CRLF file, line breaks in your strings become CRLF).",
    "- Use write to create a new file or to replace most of a file; prefer edit for changes to part of a file. Binary files cannot be edited.",
    "- The output shows the changed lines with a few lines around them, numbered like read's output."
  ].join("\n"),
  input: EditInput,
  permission: (input) => ({ path: input.path ?? "." }),
  execute: Effect.fn("tools.edit")(function* (input: EditInput, context: ToolContext) {
    const shown = input.path
    if (input.oldString === "") {
      return yield* new ToolFailure({
        message:
          "oldString is empty. Give the exact text to replace; to add lines, put a neighbouring line in oldString and repeat it in newString. To create a file or replace all of it, use write."
      })
    }
    if (input.oldString === input.newString) {
      return yield* new ToolFailure({
        message:
          "oldString and newString are the same, so the edit would change nothing. Give the new text in newString."
      })
    }
    const absolute = yield* confinedPath(context.cwd, input.path, context.outsideAllowed)
    // opened, then checked (confine.ts): what is edited is the file that was checked
    const current = yield* readExisting(
      { cwd: context.cwd, input: input.path, absolute, shown },
      context.outsideAllowed
    )
    if (current === undefined) {
      const failure = yield* notFoundFailure(absolute, shown)
      return yield* new ToolFailure({ message: `${failure.message}\nTo create a new file, use the write tool.` })
    }
    const stat = current.stat
    if (stat.isDirectory()) {
      return yield* new ToolFailure({ message: `${shown} is a directory; edit needs the path of a file.` })
    }
    const bytes = current.content
    if (bytes === undefined) {
      return yield* new ToolFailure({ message: `Cannot edit ${shown}: it is not a regular file.` })
    }
    yield* requireFreshRead(context.reads, absolute, shown, { stat, content: bytes }, "edit")
    const content = bytes.toString("utf8")
    if (bytes.subarray(0, BINARY_PROBE_BYTES).includes(0) || !Buffer.from(content, "utf8").equals(bytes)) {
      return yield* new ToolFailure({
        message: `Cannot edit ${shown}: it is a binary file or not UTF-8 text, and edit would corrupt it. Use bash to change it, or write to replace it entirely.`
      })
    }

    yield* refuseMaskedSecret(input.oldString, content, "oldString")
    yield* refuseMaskedSecret(input.newString, content, "newString")

    // in a CRLF file, line breaks in the strings stand for CRLF (and in an LF file, CRLF for LF)
    const eol = lineEnding(content)
    const candidates = [
      [withEnding(input.oldString, eol), withEnding(input.newString, eol)],
      [input.oldString, input.newString]
    ] as const
    let chosen: readonly [string, string, Array<number>] | undefined
    for (const [oldString, newString] of candidates) {
      const positions = occurrences(content, oldString)
      if (positions.length > 0) {
        chosen = [oldString, newString, positions]
        break
      }
    }
    if (chosen === undefined) {
      return yield* new ToolFailure({ message: notFoundMessage(content, input.oldString, shown) })
    }
    const [oldString, newString, positions] = chosen
    if (positions.length > 1 && input.replaceAll !== true) {
      const lines = positions.map((p) => lineAt(content, p))
      return yield* new ToolFailure({
        message:
          `oldString occurs ${positions.length} times in ${shown} (at lines ${listLines(lines)}). ` +
          "Add more surrounding lines to oldString so that it matches only the place you mean, or set replaceAll to true to replace every occurrence."
      })
    }

    const replaced = replaceAt(content, positions, oldString, newString)
    yield* requireWritable(absolute, shown)
    // the intent is committed before anything is written, and once the file is replaced the change is
    // recorded and remembered: an interrupt cannot split them, a crash leaves the intent to the sweep
    yield* Effect.uninterruptible(
      Effect.gen(function* () {
        const temp = yield* tempPathFor(absolute)
        yield* context.recordFileIntent({ path: absolute, op: "update", before: content, after: replaced.after, temp })
        yield* crashPoint("file.intent")
        const written = yield* writeFileAtomic(absolute, replaced.after, shown, stat.mode & 0o7777, temp)
        yield* crashPoint("file.renamed")
        yield* context.recordFileChange({ path: absolute, op: "update", before: content, after: replaced.after })
        yield* context.reads.record(absolute, fileStamp(written, replaced.after))
      })
    )
    const count = positions.length
    return {
      output: `Edited ${shown}: ${count} replacement${count === 1 ? "" : "s"}\n${showChanges(replaced.after, replaced.regions, context.secrets.redactText)}`,
      metadata: {
        path: absolute,
        replacements: count,
        linesAdded: replaced.linesAdded,
        linesRemoved: replaced.linesRemoved
      } satisfies EditMetadata
    } satisfies ToolOutput
  })
})
