/**
 * Paths of a tool call: resolved against the call's `cwd` and confined to the workspace (decided by
 * `Workspace` and `Permissions` before the tool runs; applied here), and files opened with the
 * descriptor checked after the open (see confine.ts), so a swap between the check and the open is
 * refused.
 */
import type { Stats } from "node:fs"
import * as fs from "node:fs"
import * as nodePath from "node:path"
import { Effect, type Scope } from "effect"
import { formatBytes } from "./boundedOutput.js"
import { openCheckedScoped, PathMoved, readFdAll } from "./confine.js"
import { toFsError } from "./FsError.js"
import { errnoCode, fsFailure } from "./fsErrors.js"
import { notFoundFailure } from "./notFound.js"
import { ToolFailure } from "./Tools.js"
import { absoluteIn, outsideMessage, resolveInWorkspace } from "./Workspace.js"

/**
 * The path a file tool may use for `input`: resolved against the workspace root (`cwd`) with real
 * paths (`Workspace.resolveInWorkspace`), refused with an error the model can read when it cannot be
 * resolved, or when it leads outside the workspace and `outsideAllowed` is false (the call's
 * `ToolContext.outsideAllowed`: the `external_directory` permission allowed this call).
 * Returns the real path (symlinks followed), so what is checked is what is opened.
 */
export const confinedPath = (cwd: string, input: string, outsideAllowed = false): Effect.Effect<string, ToolFailure> =>
  resolveInWorkspace(cwd, input).pipe(
    Effect.mapError((error) => new ToolFailure({ message: `Cannot use the path ${input}: ${error.message}.` })),
    Effect.flatMap((path) =>
      path.inside || outsideAllowed
        ? Effect.succeed(path.real)
        : Effect.fail(new ToolFailure({ message: outsideMessage(path, cwd) }))
    )
  )

/**
 * Why an open of a checked path failed, as the model reads it: a missing file with similar names
 * (`notFoundFailure`), a path that led elsewhere since it was checked (`PathMoved`: the sentence for
 * a path outside the workspace when it now leads outside and outside was not allowed, the same as
 * `confinedPath`'s; else that it changed), any other error as `fsFailure`.
 */
export const openFailure = (
  error: unknown,
  where: { readonly cwd: string; readonly input: string; readonly absolute: string; readonly shown: string },
  outsideAllowed: boolean,
  what = "File"
): Effect.Effect<ToolFailure> =>
  Effect.gen(function* () {
    if (errnoCode(error) === "ENOENT") return yield* notFoundFailure(where.absolute, where.shown, what)
    if (!(error instanceof PathMoved)) return fsFailure(error, where.shown)
    const now = yield* resolveInWorkspace(where.cwd, error.actual).pipe(Effect.option)
    if (!outsideAllowed && (now._tag === "None" || !now.value.inside)) {
      const led = { input: where.input, absolute: absoluteIn(where.cwd, where.input), real: error.actual }
      return new ToolFailure({ message: outsideMessage(led, where.cwd) })
    }
    return fsFailure(error, where.shown)
  })

/**
 * Opens (to read) the real path `absolute` that `confinedPath` gave for `input`, then checks what
 * was opened (`confine.openCheckedScoped`: the descriptor must be that path), so a directory on
 * the way swapped for a symlink between the check and the open is refused, not followed. In a scope
 * (the descriptor is closed when it ends); returns the descriptor and its `fstat`. Fails as
 * `openFailure` says.
 */
export const openConfined = (
  where: { readonly cwd: string; readonly input: string; readonly absolute: string; readonly shown: string },
  outsideAllowed: boolean,
  what = "File"
): Effect.Effect<{ readonly fd: number; readonly stat: Stats }, ToolFailure, Scope.Scope> =>
  Effect.gen(function* () {
    const fd = yield* openCheckedScoped(where.absolute).pipe(
      Effect.catchAll((error) => Effect.flatMap(openFailure(error, where, outsideAllowed, what), Effect.fail))
    )
    const stat = yield* Effect.try({ try: () => fs.fstatSync(fd), catch: (error) => fsFailure(error, where.shown) })
    return { fd, stat }
  })

/**
 * The largest file `write` and `edit` replace: they hold all of it in memory, and its content before
 * and after is kept in the session's log.
 */
export const MAX_REPLACED_BYTES = 16 * 1024 * 1024

/** `size`: the file's size at its `fstat`; "grew": it grew past the bound while it was read. */
const tooLarge = (shown: string, size: number | "grew"): ToolFailure =>
  new ToolFailure({
    message: `Cannot change ${shown}: ${size === "grew" ? `it grew past ${formatBytes(MAX_REPLACED_BYTES)} while it was read` : `it is ${formatBytes(size)}`}, and write and edit change files of up to ${formatBytes(MAX_REPLACED_BYTES)} (the file is kept in the session's log before and after). Use bash to change a larger file.`
  })

/**
 * The file at the checked real path `absolute` as it is now, opened and checked like
 * `openConfined`: its `fstat`, and its content when it is a regular file; `undefined` when nothing
 * is there. For `write` and `edit`, which read a file before they replace it: a regular file over
 * `MAX_REPLACED_BYTES` (at the `fstat`, or grown past it while read) fails.
 */
export const readExisting = (
  where: { readonly cwd: string; readonly input: string; readonly absolute: string; readonly shown: string },
  outsideAllowed: boolean
): Effect.Effect<{ readonly stat: Stats; readonly content: Buffer | undefined } | undefined, ToolFailure> =>
  Effect.scoped(
    Effect.gen(function* () {
      const fd = yield* openCheckedScoped(where.absolute).pipe(
        Effect.map((fd): number | undefined => fd),
        Effect.catchAll((error) =>
          errnoCode(error) === "ENOENT"
            ? Effect.succeed(undefined)
            : Effect.flatMap(openFailure(error, where, outsideAllowed), Effect.fail)
        )
      )
      if (fd === undefined) return undefined
      return yield* Effect.gen(function* () {
        const stat = yield* Effect.try({ try: () => fs.fstatSync(fd), catch: toFsError }).pipe(
          Effect.mapError((error) => fsFailure(error, where.shown))
        )
        if (!stat.isFile()) return { stat, content: undefined }
        if (stat.size > MAX_REPLACED_BYTES) return yield* tooLarge(where.shown, stat.size)
        const content = yield* readFdAll(fd, stat.size, MAX_REPLACED_BYTES + 1).pipe(
          Effect.mapError((error) => fsFailure(error, where.shown))
        )
        if (content.length > MAX_REPLACED_BYTES) return yield* tooLarge(where.shown, "grew")
        return { stat, content }
      })
    })
  )

/** How a path is shown to the model: relative to `cwd` when it is inside, else absolute. */
export const displayPath = (cwd: string, absolute: string): string => {
  const relative = nodePath.relative(cwd, absolute)
  if (relative === "") return "."
  if (relative.startsWith("..") || nodePath.isAbsolute(relative)) return absolute
  return relative
}
