/**
 * The `glob` tool: the files whose path matches a glob pattern, newest first.
 *
 * The pattern is matched against each file's path relative to `path` (the directory searched), so
 * `*.ts` matches the top level only and `**` + `/*.ts` any depth (ripgrep's and OpenCode's
 * semantics); see `ignore.ts` for the syntax. The walk skips `.git`, `node_modules` and what the
 * workspace's `.gitignore` files ignore, and does not follow symlinked directories. Paths are shown
 * relative to the workspace root, sorted by modification time (newest first, then by path), at most
 * `MAX_RESULTS`.
 */
import type { Stats } from "node:fs"
import * as nodePath from "node:path"
import { Effect, Schema } from "effect"
import { confinedPath, displayPath, openConfined } from "./confinedFiles.js"
import { compareNames } from "./directoryTree.js"
import { statQuietly } from "./fsErrors.js"
import { compileGlob, InvalidGlob, walkFiles } from "./ignore.js"
import { defineTool, type ToolContext, ToolFailure } from "./Tools.js"
import { nonEmptyString } from "./toolInput.js"

/** The most paths one call shows. */
export const MAX_RESULTS = 100

export const GlobInput = Schema.Struct({
  pattern: nonEmptyString(
    'The glob pattern, matched against paths relative to `path`: "*.ts" (top level only), "**/*.ts" (any depth), "src/**/*.{ts,tsx}".'
  ),
  path: Schema.optional(
    Schema.String.annotations({
      description:
        'The directory to search, relative to the working directory or absolute. Defaults to "." (the working directory).'
    })
  )
})
export type GlobInput = typeof GlobInput.Type

/** metadata of a glob: how many paths matched (all of them, not only those shown), and whether some were left out */
export interface GlobMetadata {
  readonly count: number
  readonly truncated: boolean
}

/** `1234` -> `"1,234"` */
export const formatCount = (n: number): string => n.toLocaleString("en-US")

/** The directory or file a search starts at: its real path, the workspace root's, and how to show it. */
export interface SearchStart {
  readonly root: string
  readonly absolute: string
  readonly shown: string
  readonly stat: Stats
}

/** Resolves the `path` of a `glob` or `grep` call inside the workspace (`"."` when absent). */
export const searchStart = (context: ToolContext, given: string | undefined): Effect.Effect<SearchStart, ToolFailure> =>
  Effect.gen(function* () {
    const root = yield* confinedPath(context.cwd, ".")
    const path = given ?? "."
    const absolute = yield* confinedPath(context.cwd, path, context.outsideAllowed)
    const shown = path === "" ? displayPath(root, absolute) : path
    // opened, then checked (confine.ts); the walk reads each directory through a checked descriptor too
    const { stat } = yield* Effect.scoped(
      openConfined({ cwd: context.cwd, input: path, absolute, shown }, context.outsideAllowed, "Path")
    )
    return { root, absolute, shown, stat }
  })

/** A glob pattern as a matcher, or a `ToolFailure` the model can act on. */
export const globMatcher = (pattern: string, what: string): Effect.Effect<RegExp, ToolFailure> =>
  Effect.try({
    try: () => compileGlob(pattern),
    catch: (error) =>
      new ToolFailure({
        message: `Cannot use the ${what} ${pattern}: ${error instanceof InvalidGlob ? error.message : String(error)}.`
      })
  })

/**
 * A path relative to the workspace root with `/` separators; a path outside the workspace (a search
 * `external_directory` allowed) stays absolute, as the model gave it, not `../../…`.
 */
export const rootRelative = (root: string, absolute: string): string => {
  const relative = nodePath.relative(root, absolute)
  if (relative === ".." || relative.startsWith(`..${nodePath.sep}`) || nodePath.isAbsolute(relative)) return absolute
  return relative.split(nodePath.sep).join("/")
}

export const glob = defineTool<GlobInput>({
  name: "glob",
  description: [
    "Finds files by path pattern, newest first. Use it to find files by name or extension; to search file contents use grep.",
    '- The pattern is matched against each file\'s path relative to `path` (default ".", the working directory): "*.ts" matches only files directly in `path`; "**/*.ts" matches at any depth; "src/**/*.test.ts", "*.{json,yml}", "file?.txt", "[abc]*.md" work as in a shell. A "*" also matches names starting with a dot.',
    "- Only files are returned, not directories. `.git`, `node_modules` and whatever the .gitignore files ignore are skipped; symlinked directories are not followed.",
    `- Paths are shown relative to the working directory, sorted by modification time (newest first), at most ${MAX_RESULTS}: when the output says it was capped, narrow the pattern or the path.`
  ].join("\n"),
  input: GlobInput,
  permission: (input) => ({ path: input.path ?? "." }),
  execute: Effect.fn("tools.glob")(function* (input: GlobInput, context: ToolContext) {
    const start = yield* searchStart(context, input.path)
    if (!start.stat.isDirectory()) {
      return yield* new ToolFailure({
        message: `${start.shown} is a file, not a directory. glob searches a directory: give its directory as \`path\`.`
      })
    }
    const pattern = input.pattern.replace(/^(\.\/)+/, "")
    if (pattern.startsWith("/")) {
      return yield* new ToolFailure({
        message: `The pattern ${input.pattern} is absolute. Give the directory as \`path\` and a pattern relative to it, e.g. path "src" and pattern "**/*.ts".`
      })
    }
    const matcher = yield* globMatcher(pattern, "pattern")
    const files = yield* walkFiles(start.root, start.absolute).pipe(
      Effect.mapError((error) => new ToolFailure({ message: `Cannot search ${start.shown}: ${String(error)}` }))
    )
    const found: Array<{ readonly path: string; readonly mtimeMs: number }> = []
    for (const file of files) {
      if (!matcher.test(file.relative)) continue
      // a blocking stat: one thread-pool round trip per match made a large glob several times slower
      const stat = statQuietly(file.absolute)
      // a dangling symlink, or one to a directory (not followed), is not a file
      if (stat === undefined || !stat.isFile()) continue
      found.push({ path: rootRelative(start.root, file.absolute), mtimeMs: stat.mtimeMs })
    }
    found.sort((a, b) => b.mtimeMs - a.mtimeMs || compareNames(a.path, b.path))
    const truncated = found.length > MAX_RESULTS
    const metadata: GlobMetadata = { count: found.length, truncated }
    if (found.length === 0) {
      return {
        output: `No files match ${input.pattern} in ${start.shown}.${pattern.includes("/") ? "" : ` (A pattern without "/" matches only files directly in ${start.shown}; use "**/${pattern}" to search at any depth.)`}`,
        metadata
      }
    }
    const lines = found.slice(0, MAX_RESULTS).map((f) => f.path)
    if (truncated) {
      lines.push("", `(${MAX_RESULTS} of ${formatCount(found.length)} matches shown; narrow the pattern or the path)`)
    }
    return { output: lines.join("\n"), metadata }
  })
})
