/**
 * File-system errors as `ToolFailure`s the model can act on: a sentence, or the reason in a few
 * words for a mark next to an entry (a path that does not exist is told by notFound.ts).
 */
import * as fs from "node:fs"
import { Effect } from "effect"
import { PathMoved } from "./confine.js"
import { errnoCode, type FsError, toFsError } from "./FsError.js"
import { ToolFailure } from "./Tools.js"

export { errnoCode } from "./FsError.js"

/**
 * The `stat` of `path` (`lstat` when `follow` is false) with a blocking call, `undefined` when it
 * cannot be taken (gone, a dangling symlink, an unreadable directory on the way).
 */
export const statQuietly = (path: string, follow = true): fs.Stats | undefined => {
  try {
    return follow ? fs.statSync(path) : fs.lstatSync(path)
  } catch {
    return undefined
  }
}

/** A file-system call as an Effect that fails with an `FsError` (to be mapped by the caller). */
export const tryFs = <A>(run: () => Promise<A>): Effect.Effect<A, FsError> =>
  Effect.tryPromise({ try: run, catch: toFsError })

/** A sentence for a file-system error on `shown` (the path as the model wrote it). */
export const describeFsError = (error: unknown, shown: string): string => {
  if (error instanceof PathMoved) {
    return `${shown} changed while it was being opened (it was checked as ${error.expected}, it then led to ${error.actual}); nothing was read. Try again.`
  }
  switch (errnoCode(error)) {
    case "ENOENT":
      return `File not found: ${shown}`
    case "EACCES":
    case "EPERM":
      return `Permission denied: ${shown}`
    case "ENOTDIR":
      return `Not a directory: a part of the path ${shown} is a file`
    case "EISDIR":
      return `${shown} is a directory`
    case "ELOOP":
      return `Too many levels of symbolic links: ${shown}`
    case "ENAMETOOLONG":
      return `The path is too long: ${shown}`
    default: {
      const message = error instanceof Error ? error.message : String(error)
      return `Could not access ${shown}: ${message}`
    }
  }
}

/** A few words for a file-system error, for a mark next to an entry (`permission denied`). */
export const shortFsReason = (error: unknown): string => {
  if (error instanceof PathMoved) return `changed while listed: it led to ${error.actual}; not followed`
  switch (errnoCode(error)) {
    case "ENOENT":
      return "gone"
    case "EACCES":
    case "EPERM":
      return "permission denied"
    default:
      return `unreadable: ${errnoCode(error) ?? (error instanceof Error ? error.message : String(error))}`
  }
}

/** A `ToolFailure` for a file-system error on `shown`. */
export const fsFailure = (error: unknown, shown: string): ToolFailure =>
  new ToolFailure({ message: describeFsError(error, shown) })
