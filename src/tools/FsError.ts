/**
 * A file-system call that failed, as a typed error: the Node error's `code` (`ENOENT`, `EACCES` …),
 * its message and the error itself (`cause`). The file tools carry it (with `confine.PathMoved`) to
 * where fsErrors.ts turns it into a sentence the model reads; nothing fails with a bare `unknown`.
 */
import { Schema } from "effect"

export class FsError extends Schema.TaggedError<FsError>()("FsError", {
  /** the errno code, when the error has one */
  code: Schema.optional(Schema.String),
  message: Schema.String,
  /** the Node error */
  cause: Schema.Defect
}) {}

/** The errno code of a Node error (`ENOENT`, `EACCES` …), if it has one (an `FsError`'s too). */
export const errnoCode = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string"
    ? error.code
    : undefined

/** What a file-system call threw, as an `FsError` (an `FsError` stays itself). */
export const toFsError = (error: unknown): FsError => {
  if (error instanceof FsError) return error
  const code = errnoCode(error)
  return new FsError({
    ...(code === undefined ? {} : { code }),
    message: error instanceof Error ? error.message : String(error),
    cause: error
  })
}
