/**
 * A path that does not exist, told so the model can act on it: the names nearby that it may have
 * meant (by edit distance and stem), or the nearest directory that does exist.
 */
import type { Stats } from "node:fs"
import * as fsp from "node:fs/promises"
import * as nodePath from "node:path"
import { Effect } from "effect"
import { editDistance } from "../domain/nearest.js"
import { compareNames } from "./directoryTree.js"
import { errnoCode, fsFailure, tryFs } from "./fsErrors.js"
import { ToolFailure } from "./Tools.js"

const stem = (name: string): string => {
  const dot = name.lastIndexOf(".")
  return (dot > 0 ? name.slice(0, dot) : name).toLowerCase()
}

/**
 * Up to `max` names in the directory of `absolute` that look like its last segment (same name in
 * another case, same stem with another extension, one contains the other, or a few typos away),
 * best first, as paths shown the way the model wrote `shown`. Empty when the directory cannot be read.
 */
export const similarNames = (absolute: string, shown: string, max = 5): Effect.Effect<ReadonlyArray<string>> =>
  Effect.gen(function* () {
    const dir = nodePath.dirname(absolute)
    const base = nodePath.basename(absolute)
    const entries = yield* tryFs(() => fsp.readdir(dir, { withFileTypes: true })).pipe(Effect.orElseSucceed(() => []))
    const wanted = base.toLowerCase()
    const scored: Array<{ readonly name: string; readonly score: number }> = []
    for (const entry of entries) {
      const name = entry.name
      const lower = name.toLowerCase()
      let score: number | undefined
      if (lower === wanted) score = 0
      else if (stem(name) === stem(base)) score = 1
      else if (wanted.length >= 3 && (lower.includes(wanted) || wanted.includes(lower))) score = 2
      else {
        const distance = editDistance(lower, wanted)
        if (distance <= Math.max(1, Math.floor(wanted.length / 3))) score = 2 + distance
      }
      if (score !== undefined) scored.push({ name: entry.isDirectory() ? `${name}/` : name, score })
    }
    scored.sort((a, b) => a.score - b.score || compareNames(a.name, b.name))
    const trimmed = shown.replace(/\/+$/, "")
    const shownDir = trimmed.includes("/") ? trimmed.slice(0, trimmed.lastIndexOf("/") + 1) : ""
    return scored.slice(0, max).map((s) => `${shownDir}${s.name}`)
  })

/**
 * `File not found: <shown>`, with similar names in the same directory when there are some, or a
 * word that the directory itself is missing.
 */
export const notFoundFailure = (absolute: string, shown: string, what = "File"): Effect.Effect<ToolFailure> =>
  Effect.gen(function* () {
    const suggestions = yield* similarNames(absolute, shown)
    let message = `${what} not found: ${shown}`
    if (suggestions.length > 0) {
      message += `\nDid you mean: ${suggestions.join(", ")}?`
    } else {
      const parent = nodePath.dirname(absolute)
      const parentExists = yield* tryFs(() => fsp.stat(parent)).pipe(
        Effect.map((s) => s.isDirectory()),
        Effect.orElseSucceed(() => false)
      )
      message += parentExists
        ? `\nUse the list tool to see what ${displayParent(shown)} contains.`
        : `\nIts directory does not exist either; use the list tool to find the right path.`
    }
    return new ToolFailure({ message })
  })

/**
 * `fs.stat` of the path a tool was given: a missing path fails with `notFoundFailure` (with
 * suggestions), any other error with `fsFailure`.
 */
export const statPath = (absolute: string, shown: string, what = "File"): Effect.Effect<Stats, ToolFailure> =>
  tryFs(() => fsp.stat(absolute)).pipe(
    Effect.catchAll((error) =>
      errnoCode(error) === "ENOENT"
        ? Effect.flatMap(notFoundFailure(absolute, shown, what), Effect.fail)
        : Effect.fail(fsFailure(error, shown))
    )
  )

const displayParent = (shown: string): string => {
  const slash = shown.replace(/\/+$/, "").lastIndexOf("/")
  return slash > 0 ? shown.slice(0, slash) : slash === 0 ? "/" : "the directory"
}
