/**
 * Listing a directory tree (for `list` and `glob`): bounded, sorted the same on every machine,
 * skipping `.git` and `node_modules`, each directory opened and checked (see confine.ts).
 */
import * as fs from "node:fs"
import * as nodePath from "node:path"
import { Effect } from "effect"
import { type PathMoved, readdirChecked } from "./confine.js"
import type { FsError } from "./FsError.js"
import { shortFsReason, statQuietly } from "./fsErrors.js"

/** Directories that are never descended into or listed (unless listed directly). */
export const SKIPPED_DIRECTORIES: ReadonlySet<string> = new Set([".git", "node_modules"])

/** Sorts names by code unit, so listings are the same on every machine and locale. */
export const compareNames = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)

export interface TreeEntry {
  /** the name of the entry within its directory; directories (and links to them) end with `/` */
  readonly name: string
  /** 1 for the entries of the root, 2 for theirs … */
  readonly depth: number
  readonly kind: "directory" | "file" | "symlink"
  /** where a symlink points */
  readonly target?: string | undefined
  /** why the directory's entries could not be read */
  readonly error?: string | undefined
  readonly children: ReadonlyArray<TreeEntry>
}

export interface Tree {
  readonly entries: ReadonlyArray<TreeEntry>
  /** how many entries the tree holds */
  readonly count: number
  /** true when the listing stopped at `maxEntries` */
  readonly truncated: boolean
}

interface Building {
  name: string
  depth: number
  kind: TreeEntry["kind"]
  target?: string | undefined
  error?: string | undefined
  children: Array<Building>
}

interface Pending {
  readonly dir: string
  readonly depth: number
  /** the entry of `dir`, `undefined` for the root */
  readonly owner: Building | undefined
  readonly into: Array<Building>
}

/**
 * The tree under the directory `root`, `depth` levels deep (1 = its entries only), breadth first so
 * that the cap of `maxEntries` cuts the deepest levels, not the top ones. Each directory's entries
 * are sorted by name; `SKIPPED_DIRECTORIES` are left out; symlinks are shown but never followed.
 * Fails with the Node error when `root` itself cannot be read.
 */
export const readTree = (
  root: string,
  options: { readonly depth: number; readonly maxEntries: number }
): Effect.Effect<Tree, FsError | PathMoved> =>
  Effect.gen(function* () {
    const top: Array<Building> = []
    let count = 0
    let truncated = false
    let level: Array<Pending> = [{ dir: root, depth: 1, owner: undefined, into: top }]
    while (level.length > 0 && !truncated) {
      const next: Array<Pending> = []
      for (const pending of level) {
        if (count >= options.maxEntries) {
          truncated = true
          break
        }
        // read through a descriptor checked to be this directory: one swapped for a symlink since
        // it was listed in its parent is not followed (confine.ts)
        const read = yield* readdirChecked(pending.dir).pipe(Effect.either)
        if (read._tag === "Left") {
          if (pending.owner === undefined) return yield* Effect.fail(read.left)
          pending.owner.error = shortFsReason(read.left)
          continue
        }
        const dirents = read.right
          .filter((d) => !(d.isDirectory() && SKIPPED_DIRECTORIES.has(d.name)))
          .sort((a, b) => compareNames(a.name, b.name))
        for (const dirent of dirents) {
          if (count >= options.maxEntries) {
            truncated = true
            break
          }
          const full = nodePath.join(pending.dir, dirent.name)
          const entry: Building = { name: dirent.name, depth: pending.depth, kind: "file", children: [] }
          if (dirent.isSymbolicLink()) {
            entry.kind = "symlink"
            entry.target = readlinkQuietly(full)
            const pointsToDirectory = statQuietly(full)?.isDirectory() === true
            if (pointsToDirectory) entry.name += "/"
          } else if (dirent.isDirectory()) {
            entry.kind = "directory"
            entry.name += "/"
            if (pending.depth < options.depth) {
              next.push({ dir: full, depth: pending.depth + 1, owner: entry, into: entry.children })
            }
          }
          pending.into.push(entry)
          count++
        }
      }
      level = next
    }
    return { entries: top, count, truncated }
  })

/**
 * A tree as indented lines (after `indent`): two spaces per level, directories with a trailing `/`, symlinks as
 * `name -> target`, unreadable directories with the reason in parentheses.
 */
export const renderTree = (entries: ReadonlyArray<TreeEntry>, indent = ""): Array<string> => {
  const lines: Array<string> = []
  const walk = (list: ReadonlyArray<TreeEntry>) => {
    for (const entry of list) {
      let line = `${indent}${"  ".repeat(entry.depth - 1)}${entry.name}`
      if (entry.kind === "symlink" && entry.target !== undefined) line += ` -> ${entry.target}`
      if (entry.error !== undefined) line += ` (${entry.error})`
      lines.push(line)
      walk(entry.children)
    }
  }
  walk(entries)
  return lines
}

/** Where the symlink `path` points, with a blocking call; `undefined` when it cannot be read. */
const readlinkQuietly = (path: string): string | undefined => {
  try {
    return fs.readlinkSync(path)
  } catch {
    return undefined
  }
}
