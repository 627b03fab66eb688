/**
 * The `list` tool: a directory as an indented tree, a few levels deep.
 *
 * Entries are sorted by name (code-unit order, the same on every machine), directories end with `/`,
 * symlinks show their target and are never followed, `.git` and `node_modules` are skipped. The tree
 * is read breadth first and capped at `MAX_ENTRIES`, so a huge subtree cuts the deep levels, never
 * the top one.
 */
import { Effect, Schema } from "effect"
import { confinedPath, displayPath, openConfined } from "./confinedFiles.js"
import { readTree, renderTree } from "./directoryTree.js"
import { fsFailure } from "./fsErrors.js"
import { defineTool, type ToolContext, ToolFailure, type ToolOutput } from "./Tools.js"
import { intAtLeast } from "./toolInput.js"

/** The most entries one listing shows. */
export const MAX_ENTRIES = 500
/** How many levels `list` descends when the call does not say. */
export const DEFAULT_DEPTH = 2

export const ListInput = Schema.Struct({
  path: Schema.optional(
    Schema.String.annotations({
      description:
        'The directory to list, relative to the working directory or absolute. Defaults to "." (the working directory).'
    })
  ),
  depth: Schema.optional(
    intAtLeast(1, `How many levels deep to list: 1 = the directory's own entries only. Defaults to ${DEFAULT_DEPTH}.`)
  )
})
export type ListInput = typeof ListInput.Type

/** metadata of a listing: the absolute path, how many entries it shows, and whether it was capped */
export interface ListMetadata {
  readonly path: string
  readonly count: number
  readonly truncated: boolean
}

/**
 * The tree of the directory `absolute` as the model reads it: a first line with the directory,
 * then its entries indented below, and a note when the cap was reached. Shared with `read`, which
 * shows a directory's entries the same way.
 */
export const listDirectory = (
  absolute: string,
  shown: string,
  depth: number
): Effect.Effect<ToolOutput & { readonly metadata: ListMetadata }, ToolFailure> =>
  Effect.gen(function* () {
    const tree = yield* readTree(absolute, { depth, maxEntries: MAX_ENTRIES }).pipe(
      Effect.mapError((error) => fsFailure(error, shown))
    )
    const header = shown.endsWith("/") ? shown : `${shown}/`
    const lines = [header, ...renderTree(tree.entries, "  ")]
    if (tree.count === 0) lines.push("  (empty directory)")
    if (tree.truncated) {
      lines.push(
        "",
        `(listing capped at ${MAX_ENTRIES} entries; list a subdirectory, or use a smaller depth, to see the rest)`
      )
    }
    return {
      output: lines.join("\n"),
      metadata: { path: absolute, count: tree.count, truncated: tree.truncated }
    }
  })

export const list = defineTool<ListInput>({
  name: "list",
  description: [
    "Lists a directory as an indented tree, to find your way around a project.",
    `- Shows \`depth\` levels (default ${DEFAULT_DEPTH}; 1 = the directory's own entries). Entries are sorted by name; directories end with "/", symlinks show "-> target" and are not followed.`,
    '- `path` is relative to the working directory (default ".") or absolute; a path outside it (symlinks included) needs permission and may be denied.',
    "- `.git` and `node_modules` are skipped; list one of them by its path to see inside.",
    `- At most ${MAX_ENTRIES} entries: when the output says it was capped, list a subdirectory or use a smaller depth.`,
    "- To find files by name pattern or by content in a large tree, prefer glob or grep."
  ].join("\n"),
  input: ListInput,
  permission: (input) => ({ path: input.path ?? "." }),
  execute: Effect.fn("tools.list")(function* (input: ListInput, context: ToolContext) {
    const given = input.path ?? "."
    const absolute = yield* confinedPath(context.cwd, given, context.outsideAllowed)
    const shown = given === "" ? displayPath(context.cwd, absolute) : given
    // opened, then checked (confine.ts); readTree reads each directory through a checked descriptor too
    const { stat } = yield* Effect.scoped(
      openConfined({ cwd: context.cwd, input: given, absolute, shown }, context.outsideAllowed, "Directory")
    )
    if (!stat.isDirectory()) {
      return yield* new ToolFailure({
        message: `${shown} is a file, not a directory. Use the read tool to see its content, or list its directory.`
      })
    }
    return yield* listDirectory(absolute, shown, input.depth ?? DEFAULT_DEPTH)
  })
})
