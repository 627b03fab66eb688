/**
 * Changing files: the stamp of what the agent read (a change to a file it has not read, or that
 * changed since, is refused) and atomic writes through a temporary file (write, edit), and the
 * line count of a text.
 */
import type { Stats } from "node:fs"
import * as fs from "node:fs"
import * as nodePath from "node:path"
import { Effect, Random } from "effect"
import { hashContent } from "../store/blobHash.js"
import { closeFdQuietly, openDirectoryScoped, PathMoved, syncFd, writeFdAll } from "./confine.js"
import { crashPoint } from "./crashPoint.js"
import { toFsError } from "./FsError.js"
import { fsFailure } from "./fsErrors.js"
import { type FileReads, type FileStamp, ToolFailure } from "./Tools.js"

/** The stamp of a file as it is now: its `stat` and the hash of its whole content. */
export const fileStamp = (stat: Stats, content: string | Uint8Array): FileStamp => ({
  mtimeMs: stat.mtimeMs,
  size: stat.size,
  hash: hashContent(content)
})

/**
 * Fails unless the agent read the file `absolute` in this session and it has not changed on disk
 * since (its last read, write or edit). `stat` and `content` are the file as it is now. With a
 * content hash in the stamp the hash decides (a `touch` is no change, a same-size rewrite in the same
 * millisecond is one); without it, the size and the modification time do.
 */
export const requireFreshRead = (
  reads: FileReads,
  absolute: string,
  shown: string,
  current: { readonly stat: Stats; readonly content: Uint8Array },
  action: "overwrite" | "edit"
): Effect.Effect<void, ToolFailure> =>
  Effect.gen(function* () {
    const stamp = yield* reads.last(absolute)
    if (stamp === undefined) {
      return yield* new ToolFailure({
        message:
          `You have not read ${shown} in this session. Read it first with the read tool, then ${action} it` +
          (action === "overwrite"
            ? ": overwriting a file you have not seen can lose work (to change part of it, prefer edit)."
            : ": edit replaces exact text, so it needs the file's current content.")
      })
    }
    const changed =
      stamp.size !== current.stat.size ||
      (stamp.hash !== undefined ? stamp.hash !== hashContent(current.content) : stamp.mtimeMs !== current.stat.mtimeMs)
    if (changed) {
      return yield* new ToolFailure({
        message:
          `${shown} changed on disk since you last read it (someone or something else modified it). ` +
          `Read it again with the read tool, then ${action} it based on its current content.`
      })
    }
  })

/**
 * Fails with the sentence for `EACCES` when the existing file `absolute` may not be written: renaming
 * over a read-only file would succeed, so its permissions are checked first (a blocking `access`).
 */
export const requireWritable = (absolute: string, shown: string): Effect.Effect<void, ToolFailure> =>
  Effect.try({ try: () => fs.accessSync(absolute, fs.constants.W_OK), catch: (error) => fsFailure(error, shown) })

/** The suffix of every temporary file `writeFileAtomic` writes (and renames over its target). */
export const TEMP_SUFFIX = ".logbook-tmp"

/** Whether `path` names a temporary file of `writeFileAtomic`: logbook's own, never a change of the workspace. */
export const isOwnTempFile = (path: string): boolean => path.endsWith(TEMP_SUFFIX)

/**
 * A new name for the temporary file `writeFileAtomic` writes before it renames it over `absolute`:
 * `.<name>.<random>.logbook-tmp`, in the same directory. A tool takes it first to name it in the
 * change's `file.intent`, then passes it to `writeFileAtomic`.
 */
export const tempPathFor = (absolute: string): Effect.Effect<string> =>
  Effect.map(Random.nextIntBetween(0, 2 ** 31), (n) =>
    nodePath.join(nodePath.dirname(absolute), `.${nodePath.basename(absolute)}.${n.toString(36)}${TEMP_SUFFIX}`)
  )

/**
 * Writes `content` to `absolute` atomically: into a temporary file in the same directory (flushed
 * to disk; `tempPath`, from `tempPathFor`, or a new name), then renamed over the target, so a crash
 * leaves the old file or the new one, never half of one. `mode` (the permission bits of the file
 * being replaced) is kept; a new file gets the default mode. The temporary file is removed when
 * anything fails. Returns the new file's `stat`.
 *
 * `absolute` is a real path that was checked (`confinedPath`). The directory is opened and checked
 * to be the one the path was checked in (`confine.openDirectoryScoped`), and the temporary file and
 * the rename go through its descriptor (`/proc/self/fd/<dirfd>/<name>`): a directory on the way
 * swapped for a symlink since the check fails the write (nothing is written) instead of sending the
 * file where the link leads.
 */
export const writeFileAtomic = (
  absolute: string,
  content: string | Uint8Array,
  shown: string,
  mode?: number,
  tempPath?: string
): Effect.Effect<Stats, ToolFailure> =>
  Effect.gen(function* () {
    const name = nodePath.basename(absolute)
    // the temporary file is in the target's directory: its name is taken through the checked descriptor
    const tempName = nodePath.basename(tempPath ?? (yield* tempPathFor(absolute)))
    return yield* Effect.scoped(
      Effect.gen(function* () {
        const directory = yield* openDirectoryScoped(nodePath.dirname(absolute))
        const temp = directory.at(tempName)
        // blocking calls but the flush to the disk (confine.ts: a thread-pool round trip per call
        // waits for the event loop), which goes through the pool
        const write = Effect.acquireUseRelease(
          Effect.try({ try: () => fs.openSync(temp, "wx", mode ?? 0o666), catch: toFsError }),
          (fd) =>
            Effect.gen(function* () {
              // `open` applies the umask; the old mode wins
              if (mode !== undefined) yield* Effect.try({ try: () => fs.fchmodSync(fd, mode), catch: toFsError })
              yield* writeFdAll(fd, content)
              yield* syncFd(fd)
              // the stat of what is renamed into place (a rename changes neither its size nor its mtime)
              return yield* Effect.try({ try: () => fs.fstatSync(fd), catch: toFsError })
            }),
          (fd) => Effect.sync(() => closeFdQuietly(fd))
        )
        return yield* write.pipe(
          Effect.tap(() => crashPoint("file.temp")),
          Effect.tap(() => Effect.try({ try: () => fs.renameSync(temp, directory.at(name)), catch: toFsError })),
          Effect.tapError(() => Effect.try(() => fs.rmSync(temp, { force: true })).pipe(Effect.ignore))
        )
      })
    ).pipe(
      Effect.mapError((error) =>
        error instanceof PathMoved
          ? new ToolFailure({
              message:
                `Cannot write ${shown}: its directory changed while it was being written ` +
                `(it was checked as ${nodePath.dirname(absolute)}, it then led to ${error.actual}); nothing was written. ` +
                "Check the path (with list) and try again."
            })
          : fsFailure(error, shown)
      )
    )
  })

/** The number of lines of a text (a last line without a newline counts; `""` has none). */
export const countLines = (text: string): number => {
  if (text === "") return 0
  let count = 0
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) count++
  return text.endsWith("\n") ? count : count + 1
}
