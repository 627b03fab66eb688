/**
 * The `read` tool: a text file's lines, numbered like `cat -n`.
 *
 * The file is read in chunks, so a huge file costs memory only for the lines shown: the lines in
 * the window (`offset`, `limit`) are decoded and kept, the others are only counted (the note at the
 * end tells the model how many lines there are and which `offset` reads on). A line longer than
 * `MAX_LINE_CHARS` is cut with a marker; the output stops before it passes `MAX_OUTPUT_BYTES`. A NUL
 * byte in the first `BINARY_PROBE_BYTES` marks a binary file, which is refused. A directory is shown
 * as its entries, like `list` with depth 1.
 */
import { createHash } from "node:crypto"
import type { Stats } from "node:fs"
import { Effect, Schema } from "effect"
import { formatBytes } from "./boundedOutput.js"
import { readFdAt } from "./confine.js"
import { confinedPath, displayPath, openConfined } from "./confinedFiles.js"
import { fsFailure } from "./fsErrors.js"
import { listDirectory } from "./list.js"
import { defineTool, type ToolContext, ToolFailure, type ToolOutput } from "./Tools.js"
import { intAtLeast, nonEmptyString } from "./toolInput.js"

/** How many lines one call shows when it gives no `limit`. */
export const DEFAULT_LIMIT = 2000
/** Longer lines are cut to this many characters. */
export const MAX_LINE_CHARS = 2000
/** The output stops before it passes this many bytes. */
export const MAX_OUTPUT_BYTES = 50 * 1024
/** A NUL byte in this many first bytes makes a file binary. */
export const BINARY_PROBE_BYTES = 8 * 1024

const CHUNK_BYTES = 64 * 1024
/** bytes kept of a line in the window: enough for `MAX_LINE_CHARS` characters of any width */
const LINE_KEEP_BYTES = MAX_LINE_CHARS * 4
const NEWLINE = 0x0a

export const ReadInput = Schema.Struct({
  path: nonEmptyString("The file to read, relative to the working directory or absolute."),
  offset: Schema.optional(intAtLeast(1, "The 1-based line number to start at. Defaults to 1 (the start of the file).")),
  limit: Schema.optional(intAtLeast(1, `How many lines to show at most. Defaults to ${DEFAULT_LIMIT}.`))
})
export type ReadInput = typeof ReadInput.Type

/**
 * metadata of a read: the absolute path, the file's line count (for a directory: its entry count),
 * and whether anything was left out (lines after the ones shown, or the end of long lines)
 */
export interface ReadMetadata {
  readonly path: string
  readonly lines: number
  readonly truncated: boolean
  /** the lines shown, when any were */
  readonly from?: number
  readonly to?: number
  readonly directory?: boolean
}

interface Window {
  readonly offset: number
  readonly limit: number
}

interface Scan {
  /** the numbered lines, each ending with "\n" */
  readonly text: string
  /** the line count of the whole file */
  readonly total: number
  /** the last line shown, `offset - 1` when none */
  readonly lastShown: number
  /** the output stopped at `MAX_OUTPUT_BYTES` */
  readonly capped: boolean
  /** a line was cut at `MAX_LINE_CHARS` */
  readonly lineCut: boolean
  /** the SHA-256 of the whole file, in hex */
  readonly hash: string
}

const binaryFailure = (shown: string) =>
  new ToolFailure({
    message:
      `Cannot read ${shown}: it is a binary file (it has NUL bytes in its first ${formatBytes(BINARY_PROBE_BYTES)}); ` +
      `read shows text files only. Use bash to inspect it (e.g. \`file ${shown}\` or \`xxd ${shown} | head -50\`).`
  })

/** Reads descriptor `fd` chunk by chunk: numbers and keeps the lines of the window, counts all of them. */
const scanLines = (
  fd: number,
  shown: string,
  window: Window,
  redact: (text: string) => string
): Effect.Effect<Scan, ToolFailure> =>
  Effect.gen(function* () {
    const end = window.offset + window.limit // first line after the window
    const buffer = Buffer.alloc(CHUNK_BYTES)
    const hash = createHash("sha256")
    const out: Array<string> = []
    let outBytes = 0
    let capped = false
    let lineCut = false
    let lastShown = window.offset - 1
    let lineNo = 1 // the line being read
    let parts: Array<Buffer> = [] // kept bytes of the line being read, when it is in the window
    let kept = 0
    let lineBytes = 0
    let position = 0
    let lastByte = NEWLINE

    const inWindow = () => !capped && lineNo >= window.offset && lineNo < end

    const finishLine = () => {
      if (inWindow()) {
        // logbook's API keys masked before a long line is cut (ToolContext.secrets)
        let text = redact(Buffer.concat(parts, kept).toString("utf8"))
        if (text.endsWith("\r")) text = text.slice(0, -1)
        if (text.length > MAX_LINE_CHARS || lineBytes > LINE_KEEP_BYTES) {
          text = `${text.slice(0, MAX_LINE_CHARS)} … [line cut at ${MAX_LINE_CHARS} characters; it has ${lineBytes} bytes]`
          lineCut = true
        }
        const formatted = `${String(lineNo).padStart(6)}\t${text}\n`
        const size = Buffer.byteLength(formatted)
        if (outBytes + size > MAX_OUTPUT_BYTES && out.length > 0) {
          capped = true
        } else {
          out.push(formatted)
          outBytes += size
          lastShown = lineNo
        }
      }
      parts = []
      kept = 0
      lineBytes = 0
      lineNo++
    }

    while (true) {
      const bytesRead = yield* readFdAt(fd, buffer, position).pipe(Effect.mapError((error) => fsFailure(error, shown)))
      if (bytesRead === 0) break
      const chunk = buffer.subarray(0, bytesRead)
      if (position === 0 && chunk.subarray(0, BINARY_PROBE_BYTES).includes(0)) {
        return yield* binaryFailure(shown)
      }
      hash.update(chunk)
      position += bytesRead
      lastByte = chunk[bytesRead - 1]!
      let start = 0
      while (start <= chunk.length) {
        const newline = chunk.indexOf(NEWLINE, start)
        const stop = newline === -1 ? chunk.length : newline
        if (inWindow()) {
          const room = LINE_KEEP_BYTES + 1 - kept
          if (room > 0 && stop > start) {
            // copy: the buffer is reused for the next chunk
            const part = Buffer.from(chunk.subarray(start, Math.min(stop, start + room)))
            parts.push(part)
            kept += part.length
          }
          lineBytes += stop - start
        }
        if (newline === -1) break
        finishLine()
        start = newline + 1
      }
    }
    if (position > 0 && lastByte !== NEWLINE) finishLine() // the last line has no newline
    return { text: out.join(""), total: lineNo - 1, lastShown, capped, lineCut, hash: hash.digest("hex") }
  })

/**
 * Reads the file and records what the agent read (`context.reads`): the `stat` taken before
 * reading (so a change during the read shows as a change) and the hash of the content read.
 */
const readFile = (fd: number, absolute: string, shown: string, window: Window, stat: Stats, context: ToolContext) =>
  Effect.gen(function* () {
    const scan = yield* scanLines(fd, shown, window, context.secrets.redactText)
    const base = { path: absolute, lines: scan.total }
    if (scan.total > 0 && window.offset > scan.total) {
      return yield* new ToolFailure({
        message: `Offset ${window.offset} is past the end of ${shown}, which has ${scan.total} line${scan.total === 1 ? "" : "s"}. Use an offset from 1 to ${scan.total}.`
      })
    }
    yield* context.reads.record(absolute, { mtimeMs: stat.mtimeMs, size: stat.size, hash: scan.hash })
    if (scan.total === 0) {
      return { output: "(the file is empty)", metadata: { ...base, truncated: false } }
    }
    const notes: Array<string> = []
    const more = scan.lastShown < scan.total
    if (more) {
      const range = `showing lines ${window.offset}-${scan.lastShown} of ${scan.total}; use offset=${scan.lastShown + 1} to read on`
      notes.push(scan.capped ? `(output capped at ${formatBytes(MAX_OUTPUT_BYTES)}: ${range})` : `(${range})`)
    }
    if (scan.lineCut) {
      notes.push(
        `(lines longer than ${MAX_LINE_CHARS} characters were cut; to see the rest of line N use bash, e.g. \`sed -n 'Np' ${shown} | cut -c ${MAX_LINE_CHARS + 1}-${MAX_LINE_CHARS * 3}\`)`
      )
    }
    const body = scan.text.endsWith("\n") ? scan.text.slice(0, -1) : scan.text
    return {
      output: notes.length > 0 ? `${body}\n\n${notes.join("\n")}` : body,
      metadata: {
        ...base,
        truncated: more || scan.lineCut,
        from: window.offset,
        to: scan.lastShown
      } satisfies ReadMetadata
    }
  })

export const read = defineTool<ReadInput>({
  name: "read",
  description: [
    "Reads a text file and returns its lines numbered like `cat -n`: each line is `<number><TAB><content>`; the number and the tab are not part of the file (leave them out when you quote or edit lines).",
    "- `path` is relative to the working directory, or absolute; a path outside it (symlinks included) needs the user's permission and may be denied.",
    `- Shows up to ${DEFAULT_LIMIT} lines from \`offset\` (1-based, default 1). For a long file, read it in parts with \`offset\` and \`limit\`: when the output is cut it ends with a note saying which offset reads on.`,
    `- Lines longer than ${MAX_LINE_CHARS} characters are cut, and one call returns at most ${formatBytes(MAX_OUTPUT_BYTES)}.`,
    "- Binary files are refused. A directory is shown as its entries (use list for a deeper tree).",
    "- A missing file fails with similar names from its directory, when there are some.",
    "- Read a file before you edit it; when you need several files, read them in the same step."
  ].join("\n"),
  input: ReadInput,
  permission: (input) => ({ path: input.path ?? "." }),
  execute: Effect.fn("tools.read")(function* (input: ReadInput, context: ToolContext) {
    const absolute = yield* confinedPath(context.cwd, input.path, context.outsideAllowed)
    const shown = input.path
    // opened first, then checked: the descriptor must be the path that was checked (confine.ts)
    const { fd, stat } = yield* openConfined(
      { cwd: context.cwd, input: input.path, absolute, shown },
      context.outsideAllowed
    )
    if (stat.isDirectory()) {
      const listing = yield* listDirectory(absolute, displayPath(context.cwd, absolute), 1)
      return {
        output: `${shown} is a directory; its entries:\n${listing.output}`,
        metadata: {
          path: absolute,
          lines: listing.metadata.count,
          truncated: listing.metadata.truncated,
          directory: true
        } satisfies ReadMetadata
      } satisfies ToolOutput
    }
    if (!stat.isFile()) {
      return yield* new ToolFailure({
        message: `Cannot read ${shown}: it is not a regular file (a device, socket or pipe). read shows text files only.`
      })
    }
    return yield* readFile(
      fd,
      absolute,
      shown,
      { offset: input.offset ?? 1, limit: input.limit ?? DEFAULT_LIMIT },
      stat,
      context
    )
  }, Effect.scoped)
})
