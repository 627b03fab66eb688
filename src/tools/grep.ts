/**
 * The `grep` tool: the lines of files that match a JavaScript regular expression, grouped by file.
 *
 * Files are found as `glob` finds them (`.git`, `node_modules` and `.gitignore`d paths skipped,
 * symlinked directories not followed), in path order; `include` filters them by a glob pattern.
 * Binary files (a NUL byte in the first `BINARY_PROBE_BYTES`) and files over `MAX_FILE_BYTES` are
 * skipped. A symlinked file is searched only when its real path is inside the workspace. Each line
 * is tested on its own; at most `MAX_MATCHES` lines are shown, every match is counted.
 */
import * as fsp from "node:fs/promises"
import { Effect, Schema } from "effect"
import { formatCount, globMatcher, rootRelative, searchStart } from "./glob.js"
import { walkFiles } from "./ignore.js"
import { BINARY_PROBE_BYTES } from "./read.js"
import { confinedPath, formatBytes, fsFailure, nonEmptyString, tryFs } from "./shared.js"
import { defineTool, type ToolContext, ToolFailure } from "./Tools.js"

/** The most matching lines one call shows. */
export const MAX_MATCHES = 100
/** Lines are cut to this many characters. */
export const MAX_LINE_CHARS = 200
/** Larger files are skipped. */
export const MAX_FILE_BYTES = 1024 * 1024

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
  /** relative to the workspace root */
  readonly path: string
}

const cut = (line: string): string => (line.length > MAX_LINE_CHARS ? `${line.slice(0, MAX_LINE_CHARS)}…` : line)

/** The matching lines of a text file as `[lineNumber, text]`, or `undefined` when it is skipped. */
const searchFile = (
  absolute: string,
  regex: RegExp
): Effect.Effect<Array<readonly [number, string]> | "binary" | "large" | undefined> =>
  Effect.gen(function* () {
    const stat = yield* tryFs(() => fsp.stat(absolute)).pipe(Effect.option)
    if (stat._tag === "None" || !stat.value.isFile()) return undefined
    if (stat.value.size > MAX_FILE_BYTES) return "large"
    const bytes = yield* tryFs(() => fsp.readFile(absolute)).pipe(Effect.option)
    if (bytes._tag === "None") return undefined
    if (bytes.value.subarray(0, BINARY_PROBE_BYTES).includes(0)) return "binary"
    const lines = bytes.value.toString("utf8").split("\n")
    const found: Array<readonly [number, string]> = []
    lines.forEach((raw, i) => {
      const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw
      if (regex.test(line)) found.push([i + 1, line])
    })
    return found
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
  execute: Effect.fn("tools.grep")(function* (input: GrepInput, context: ToolContext) {
    const regex = yield* Effect.try({
      try: () => new RegExp(input.pattern, input.ignoreCase === true ? "i" : ""),
      catch: (error) =>
        new ToolFailure({
          message: `The pattern is not a valid JavaScript regular expression: ${error instanceof Error ? error.message : String(error)}. Fix it and search again; escape special characters such as ( [ { . * + ? with a backslash to match them literally.`
        })
    })
    const start = yield* searchStart(context, input.path)
    let targets: Array<Target>
    if (start.stat.isDirectory()) {
      const include =
        input.include === undefined || input.include === ""
          ? undefined
          : yield* globMatcher(input.include.replace(/^(\.\/)+/, ""), "include pattern")
      const byPath = input.include?.includes("/") === true
      const files = yield* walkFiles(start.root, start.absolute).pipe(
        Effect.mapError((error) => fsFailure(error, start.shown))
      )
      targets = []
      for (const file of files) {
        if (include !== undefined) {
          const name = byPath ? file.relative : file.relative.slice(file.relative.lastIndexOf("/") + 1)
          if (!include.test(name)) continue
        }
        if (file.symlink) {
          // search a symlinked file only when it leads to a file inside the workspace
          const inside = yield* confinedPath(start.root, file.absolute).pipe(Effect.option)
          if (inside._tag === "None") continue
        }
        targets.push({ absolute: file.absolute, path: rootRelative(start.root, file.absolute) })
      }
    } else {
      // one file, searched whatever the ignore rules and `include` say
      targets = [{ absolute: start.absolute, path: rootRelative(start.root, start.absolute) }]
    }

    const groups: Array<string> = []
    let shown = 0
    let matches = 0
    let files = 0
    let skipped: "binary" | "large" | undefined
    for (const target of targets) {
      const found = yield* searchFile(target.absolute, regex)
      if (found === "binary" || found === "large") {
        skipped = found
        continue
      }
      if (found === undefined || found.length === 0) continue
      matches += found.length
      files++
      if (shown >= MAX_MATCHES) continue
      const take = found.slice(0, MAX_MATCHES - shown)
      shown += take.length
      groups.push(take.map(([line, text]) => `${target.path}:${line}: ${cut(text)}`).join("\n"))
    }

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
    let output = groups.join("\n\n")
    if (truncated) {
      output += `\n\n(${shown} of ${formatCount(matches)} matching lines shown, in ${formatCount(files)} file${files === 1 ? "" : "s"}; narrow the pattern, the path or include)`
    }
    return { output, metadata }
  })
})
