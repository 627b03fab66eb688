/**
 * The `grep` tool: the lines of files that match a JavaScript regular expression, grouped by file.
 *
 * Files are found as `glob` finds them (`.git`, `node_modules` and `.gitignore`d paths skipped,
 * symlinked directories not followed), in path order; `include` filters them by a glob pattern.
 * Binary files (a NUL byte in the first `BINARY_PROBE_BYTES`) and files over `MAX_FILE_BYTES` are
 * skipped. A symlinked file is searched only when its real path is inside the workspace. Each line
 * is tested on its own (one trailing `\r` dropped; the empty string after a final line feed is not a
 * line); at most `MAX_MATCHES` lines are shown, every match is counted.
 *
 * Two searches give the same output: the JavaScript one reads every file; the ripgrep one
 * (`ripgrep.ts`) lets `rg` find candidate lines in the same files and confirms each with the
 * JavaScript regex. The tool uses ripgrep for a directory of at least `RIPGREP_MIN_FILES` files
 * when `rg` is there and the pattern translates to its syntax, and falls back to JavaScript when
 * anything goes wrong with it (docs/tools.md, docs/benchmarks.md).
 */
import * as fs from "node:fs"
import { Effect, Option, Schema } from "effect"
import type { YieldWrap } from "effect/Utils"
import { formatBytes } from "./boundedOutput.js"
import { openCheckedScoped, openCheckedSync, readFdAll } from "./confine.js"
import { confinedPath } from "./confinedFiles.js"
import { toFsError } from "./FsError.js"
import { fsFailure, statQuietly } from "./fsErrors.js"
import { formatCount, globMatcher, rootRelative, type SearchStart, searchStart } from "./glob.js"
import { walkFiles } from "./ignore.js"
import { BINARY_PROBE_BYTES } from "./read.js"
import { locateRipgrep, RIPGREP_ENV, RipgrepError, searchWithRipgrep, translatePattern } from "./ripgrep.js"
import { defineTool, type ToolContext, ToolFailure } from "./Tools.js"
import { nonEmptyString } from "./toolInput.js"

/** The most matching lines one call shows. */
export const MAX_MATCHES = 100
/** Lines are cut to this many characters. */
export const MAX_LINE_CHARS = 200
/** Larger files are skipped. */
export const MAX_FILE_BYTES = 1024 * 1024
/** A directory search of at least this many files uses ripgrep when it is there (docs/benchmarks.md). */
export const RIPGREP_MIN_FILES = 100

export const GrepInput = Schema.Struct({
  pattern: nonEmptyString(
    'The JavaScript regular expression to search for, e.g. "function\\s+main" or "TODO|FIXME". Each line is matched on its own.'
  ),
  path: Schema.optional(
    Schema.String.annotations({
      description:
        'The directory (searched recursively) or file to search, relative to the working directory or absolute. Defaults to "." (the working directory).'
    })
  ),
  include: Schema.optional(
    Schema.String.annotations({
      description:
        'Only search files matching this glob: without "/" it matches the file name ("*.ts", "*.{ts,tsx}"), with "/" the path relative to `path` ("src/**/*.ts").'
    })
  ),
  ignoreCase: Schema.optional(
    Schema.Boolean.annotations({
      description: "Match letters case-insensitively. Defaults to false.",
      jsonSchema: { type: "boolean", description: "Match letters case-insensitively. Defaults to false." }
    })
  )
})
export type GrepInput = typeof GrepInput.Type

/** metadata of a search: matching lines and files (all of them, not only those shown), and whether some were left out */
export interface GrepMetadata {
  readonly matches: number
  readonly files: number
  readonly truncated: boolean
}

interface Target {
  readonly absolute: string
  /** its real path, checked to be inside the workspace: what is read must be this (confine.ts) */
  readonly real: string
  /** relative to the workspace root */
  readonly path: string
  /** a symlink (already known to lead inside the workspace): it may lead to something that is not a file */
  readonly symlink: boolean
}

/** The matching lines of a file as `[lineNumber, text]`, or why it was skipped (`undefined`: not a readable file). */
type Found = Array<readonly [number, string]> | "binary" | "large" | undefined

const cut = (line: string): string => (line.length > MAX_LINE_CHARS ? `${line.slice(0, MAX_LINE_CHARS)}…` : line)

/**
 * The matching lines of a text file (the empty string after a final line feed is not a line), at
 * the checked real path `real`: opened, then checked to be that path (a file reached through a
 * directory swapped since the walk is not read; confine.ts).
 */
const searchFile = (real: string, regex: RegExp): Effect.Effect<Found> =>
  Effect.gen(function* () {
    const read = yield* Effect.scoped(
      Effect.gen(function* () {
        // blocking calls (confine.ts), like the probes after a ripgrep search
        const fd = yield* openCheckedScoped(real)
        const stat = yield* Effect.try({ try: () => fs.fstatSync(fd), catch: toFsError })
        if (!stat.isFile()) return undefined
        if (stat.size > MAX_FILE_BYTES) return "large" as const
        return yield* readFdAll(fd, stat.size)
      })
    ).pipe(Effect.option)
    if (read._tag === "None" || read.value === undefined) return undefined
    if (read.value === "large") return "large"
    const bytes = read.value
    if (bytes.subarray(0, BINARY_PROBE_BYTES).includes(0)) return "binary"
    const lines = bytes.toString("utf8").split("\n")
    if (lines[lines.length - 1] === "") lines.pop()
    const found: Array<readonly [number, string]> = []
    lines.forEach((raw, i) => {
      const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw
      if (regex.test(line)) found.push([i + 1, line])
    })
    return found
  })

/**
 * Whether a file would be searched by `searchFile`, reading no more than its first bytes. Synchronous:
 * after a ripgrep search it runs for every file with matches, and 20,000 asynchronous probes took
 * ten times as long as synchronous ones (see `probeFiles`).
 */
const probeFileSync = (real: string): "text" | "binary" | "large" | undefined => {
  let fd: number | undefined
  try {
    // non-blocking: a FIFO put in place of a file since the walk must not hang the open; checked
    // to be `real` after the open (confine.ts)
    fd = openCheckedSync(real)
    const stat = fs.fstatSync(fd)
    if (!stat.isFile()) return undefined
    if (stat.size > MAX_FILE_BYTES) return "large"
    const head = Buffer.alloc(Math.min(BINARY_PROBE_BYTES, stat.size))
    const read = fs.readSync(fd, head, 0, head.length, 0)
    return head.subarray(0, read).includes(0) ? "binary" : "text"
  } catch {
    return undefined
  } finally {
    if (fd !== undefined) fs.closeSync(fd)
  }
}

/** Files probed between two returns to the event loop. */
const PROBE_CHUNK = 256

/** Lets the event loop run (I/O callbacks, timers) before the fiber goes on. */
const yieldToEventLoop: Effect.Effect<void> = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

/** `probeFileSync` of each file, `PROBE_CHUNK` at a time, the event loop running in between. */
const probeFiles = (absolutes: ReadonlyArray<string>): Effect.Effect<Array<"text" | "binary" | "large" | undefined>> =>
  Effect.gen(function* () {
    const kinds: Array<"text" | "binary" | "large" | undefined> = []
    for (let from = 0; from < absolutes.length; from += PROBE_CHUNK) {
      if (from > 0) yield* yieldToEventLoop
      for (const absolute of absolutes.slice(from, from + PROBE_CHUNK)) kinds.push(probeFileSync(absolute))
    }
    return kinds
  })

/** What a search found so far, file by file in path order. */
class Tally {
  /** `redact`: masks logbook's API keys in a line before it is cut (`ToolContext.secrets`) */
  constructor(private readonly redact: (text: string) => string) {}
  readonly groups: Array<string> = []
  shown = 0
  matches = 0
  files = 0
  skipped: "binary" | "large" | undefined

  add(path: string, found: Found): void {
    if (found === "binary" || found === "large") {
      this.skipped = found
      return
    }
    if (found === undefined || found.length === 0) return
    this.matches += found.length
    this.files++
    if (this.shown >= MAX_MATCHES) return
    const take = found.slice(0, MAX_MATCHES - this.shown)
    this.shown += take.length
    this.groups.push(take.map(([line, text]) => `${path}:${line}: ${cut(this.redact(text))}`).join("\n"))
  }

  /** a file with `count` matching lines, none of them shown */
  addUnshown(count: number): void {
    this.matches += count
    this.files++
  }
}

/**
 * The search with ripgrep: rg reports candidate lines, each is decoded and tested with `regex` as
 * `searchFile` does (a line rg reports is the same line, `\r` and all), so only the count per file
 * comes from rg. The files with matches are then probed (binary, too large, no longer a file) and
 * the lines shown are read by `searchFile`, so the output is the JavaScript search's.
 */
const searchWithRg = (
  binary: string,
  root: string,
  targets: ReadonlyArray<Target>,
  regex: RegExp,
  pattern: string,
  ignoreCase: boolean,
  redact: (text: string) => string
): Effect.Effect<Tally, RipgrepError> =>
  Effect.gen(function* () {
    // rg would search the directory a symlink leads to: give it files only
    const files: Array<Target> = []
    for (const target of targets) {
      if (target.path.includes("\n")) return yield* new RipgrepError({ reason: "a file name holds a line feed" })
      if (target.symlink) {
        if (statQuietly(target.absolute)?.isFile() !== true) continue
      }
      files.push(target)
    }
    const counts = new Array<number>(files.length).fill(0)
    if (files.length > 0) {
      yield* searchWithRipgrep({
        binary,
        cwd: root,
        paths: files.map((f) => f.path),
        pattern,
        ignoreCase,
        onLine: (file, _line, text) => {
          const end = text.length > 0 && text[text.length - 1] === 0x0d ? text.length - 1 : text.length
          if (regex.test(text.toString("utf8", 0, end))) counts[file]!++
        }
      })
    }
    const matching = files.flatMap((file, i) => (counts[i]! > 0 ? [{ file, count: counts[i]! }] : []))
    const kinds = yield* probeFiles(matching.map(({ file }) => file.real))
    const tally = new Tally(redact)
    for (const [i, { file, count }] of matching.entries()) {
      if (kinds[i] !== "text") continue
      if (tally.shown < MAX_MATCHES) tally.add(file.path, yield* searchFile(file.real, regex))
      else tally.addUnshown(count)
    }
    return tally
  })

/** Which search `runGrep` uses: `auto` is the tool's rule (see `RIPGREP_MIN_FILES`). */
export type GrepBackendChoice = "auto" | "ripgrep" | "javascript"

/** A grep call's result, with the search that produced it. */
export interface GrepRun {
  readonly output: string
  readonly metadata: GrepMetadata
  readonly backend: "ripgrep" | "javascript"
  /** why ripgrep was not used (or failed), when it was not */
  readonly reason?: string
}

const resolveTargets = (input: GrepInput, start: SearchStart): Effect.Effect<Array<Target>, ToolFailure> =>
  Effect.gen(function* () {
    if (!start.stat.isDirectory()) {
      // one file, searched whatever the ignore rules and `include` say
      return [
        {
          absolute: start.absolute,
          real: start.absolute,
          path: rootRelative(start.root, start.absolute),
          symlink: false
        }
      ]
    }
    const include =
      input.include === undefined || input.include === ""
        ? undefined
        : yield* globMatcher(input.include.replace(/^(\.\/)+/, ""), "include pattern")
    const byPath = input.include?.includes("/") === true
    const files = yield* walkFiles(start.root, start.absolute).pipe(
      Effect.mapError((error) => fsFailure(error, start.shown))
    )
    const targets: Array<Target> = []
    for (const file of files) {
      if (include !== undefined) {
        const name = byPath ? file.relative : file.relative.slice(file.relative.lastIndexOf("/") + 1)
        if (!include.test(name)) continue
      }
      // the walk's directories are real paths (checked as they were read), so a file's path is its real path
      let real = file.absolute
      if (file.symlink) {
        // search a symlinked file only when it leads to a file inside the workspace
        const inside = yield* confinedPath(start.root, file.absolute).pipe(Effect.option)
        if (inside._tag === "None") continue
        real = inside.value
      }
      targets.push({
        absolute: file.absolute,
        real,
        path: rootRelative(start.root, file.absolute),
        symlink: file.symlink
      })
    }
    return targets
  })

/** The ripgrep binary and pattern for this search, or why it is searched in JavaScript. */
const ripgrepPlan = (
  input: GrepInput,
  start: SearchStart,
  targets: ReadonlyArray<Target>,
  choice: GrepBackendChoice
): Effect.Effect<{ readonly binary: string; readonly pattern: string } | { readonly reason: string }> =>
  Effect.gen(function* () {
    if (choice === "javascript") return { reason: "JavaScript was asked for" }
    if (!start.stat.isDirectory()) return { reason: "one file is searched in JavaScript" }
    if (choice === "auto" && targets.length < RIPGREP_MIN_FILES) {
      return { reason: `fewer than ${RIPGREP_MIN_FILES} files are searched in JavaScript` }
    }
    const binary = yield* locateRipgrep
    if (Option.isNone(binary)) return { reason: `no ripgrep (${RIPGREP_ENV} is 0, or rg is not on PATH)` }
    const translated = translatePattern(input.pattern, input.ignoreCase === true)
    if (translated._tag === "Untranslatable")
      return { reason: `ripgrep would read the pattern differently: ${translated.reason}` }
    return { binary: binary.value, pattern: translated.pattern }
  })

const render = (input: GrepInput, start: SearchStart, tally: Tally): { output: string; metadata: GrepMetadata } => {
  const { shown, matches, files, skipped } = tally
  const truncated = matches > shown
  const metadata: GrepMetadata = { matches, files, truncated }
  if (matches === 0) {
    const single = !start.stat.isDirectory()
    const why =
      single && skipped === "binary"
        ? ` (it is a binary file; grep searches text files only)`
        : single && skipped === "large"
          ? ` (it is larger than ${formatBytes(MAX_FILE_BYTES)}; grep skips such files, use bash instead)`
          : ""
    const where = input.include === undefined ? start.shown : `${start.shown} (files matching ${input.include})`
    return { output: `No matches for /${input.pattern}/ in ${where}${why}.`, metadata }
  }
  let output = tally.groups.join("\n\n")
  if (truncated) {
    output += `\n\n(${shown} of ${formatCount(matches)} matching lines shown, in ${formatCount(files)} file${files === 1 ? "" : "s"}; narrow the pattern, the path or include)`
  }
  return { output, metadata }
}

/**
 * A grep call, with the choice of search: `auto` (the tool's) uses ripgrep for a directory of at
 * least `RIPGREP_MIN_FILES` files when there is a usable rg and the pattern translates; `ripgrep`
 * drops the file count; `javascript` never uses it. Whatever goes wrong with ripgrep, the search
 * is done again in JavaScript: the output is the same either way.
 */
export const runGrep = Effect.fn("tools.grep")(function* (
  input: GrepInput,
  context: ToolContext,
  choice: GrepBackendChoice = "auto"
): Generator<YieldWrap<Effect.Effect<unknown, ToolFailure>>, GrepRun> {
  const regex = yield* Effect.try({
    try: () => new RegExp(input.pattern, input.ignoreCase === true ? "i" : ""),
    catch: (error) =>
      new ToolFailure({
        message: `The pattern is not a valid JavaScript regular expression: ${error instanceof Error ? error.message : String(error)}. Fix it and search again; escape special characters such as ( [ { . * + ? with a backslash to match them literally.`
      })
  })
  const start = yield* searchStart(context, input.path)
  const targets = yield* resolveTargets(input, start)

  const plan = yield* ripgrepPlan(input, start, targets, choice)
  let reason: string
  if ("binary" in plan) {
    const viaRg = yield* searchWithRg(
      plan.binary,
      start.root,
      targets,
      regex,
      plan.pattern,
      input.ignoreCase === true,
      context.secrets.redactText
    ).pipe(Effect.either)
    if (viaRg._tag === "Right") {
      yield* Effect.annotateCurrentSpan("grep.backend", "ripgrep")
      return { ...render(input, start, viaRg.right), backend: "ripgrep" }
    }
    reason = `ripgrep failed: ${viaRg.left.reason}`
    yield* Effect.logDebug(`grep: ${reason}; searching in JavaScript`)
  } else reason = plan.reason

  const tally = new Tally(context.secrets.redactText)
  for (const target of targets) tally.add(target.path, yield* searchFile(target.real, regex))
  yield* Effect.annotateCurrentSpan({ "grep.backend": "javascript", "grep.reason": reason })
  return { ...render(input, start, tally), backend: "javascript", reason }
})

export const grep = defineTool<GrepInput>({
  name: "grep",
  description: [
    "Searches file contents with a JavaScript regular expression and shows the matching lines as `path:line: text`, grouped by file. Use it to find where something is defined or used; to find files by name use glob.",
    '- `path` is a directory (searched recursively; default ".", the working directory) or one file. `include` limits the files searched by a glob: "*.ts", "*.{ts,tsx}" (file names), or "src/**/*.ts" (paths relative to `path`).',
    "- The pattern is a JavaScript regular expression matched against each line separately (no multi-line matches); escape special characters (`\\(`, `\\.`, `\\{`) to match them literally. `ignoreCase: true` ignores letter case.",
    `- \`.git\`, \`node_modules\`, .gitignored paths, binary files and files over ${formatBytes(MAX_FILE_BYTES)} are skipped; symlinked directories are not followed.`,
    `- Files are in path order; lines longer than ${MAX_LINE_CHARS} characters are cut. At most ${MAX_MATCHES} matching lines are shown: when the output says it was capped, narrow the pattern, the path or \`include\`.`
  ].join("\n"),
  input: GrepInput,
  permission: (input) => ({ path: input.path ?? "." }),
  execute: (input, context) => Effect.map(runGrep(input, context), ({ output, metadata }) => ({ output, metadata }))
})
