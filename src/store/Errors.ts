/**
 * The errors of the store layer.
 */
import { Schema } from "effect"

export class EventStoreError extends Schema.TaggedError<EventStoreError>()("EventStoreError", {
  method: Schema.String,
  message: Schema.String,
  /**
   * What kind of failure it is (default `failed`):
   * - `failed`: the database failed (busy, disk full, damaged, opened read-only): any request may
   *   fail the same way;
   * - `refused`: the database refused the data itself (a constraint, such as an event id that exists
   *   already): the same request will always fail, while others may succeed;
   * - `fenced`: an append written for a lease owner that no longer holds the session's lease
   *   (`AppendOptions.owner`): refused for that session; the writer must stop driving it.
   */
  reason: Schema.optionalWith(Schema.Literal("failed", "refused", "fenced"), { default: () => "failed" as const }),
  /**
   * set when the database file turned out damaged while it was used (a bad page deep in it, found
   * by a query): the file, so the failure is told as a damaged file's is (`DatabaseError` `corrupt`)
   */
  damagedFile: Schema.optional(Schema.String),
  cause: Schema.optional(Schema.Defect)
}) {
  /** The request itself was refused (`refused` or `fenced`): other requests may still succeed. */
  get isRefusal(): boolean {
    return this.reason !== "failed"
  }
}

/**
 * The database file cannot be used. `reason`:
 * - `not-logbook`: a file that is not a logbook database (another SQLite database, or not SQLite at all)
 * - `corrupt`: a damaged SQLite file
 * - `newer-schema`: written by a newer logbook
 * - `older-schema`: needs a migration and it was opened read-only (no longer produced: a read-only
 *   store reads an upgraded private copy instead, see `internal/readOnly.ts`; kept for programs
 *   that match on it)
 * - `missing`: no file (or an empty one) where a database was expected, and none may be created
 * - `unreadable`: the file or its directory cannot be opened or created
 * - `read-only`: opened for writing, but this user may not write the file or its directory
 * The file is never modified in any of these cases.
 */
export class DatabaseError extends Schema.TaggedError<DatabaseError>()("DatabaseError", {
  file: Schema.String,
  reason: Schema.Literal(
    "not-logbook",
    "corrupt",
    "newer-schema",
    "older-schema",
    "unreadable",
    "missing",
    "read-only"
  ),
  message: Schema.String
}) {}

/** Another process drives the session. */
export class LeaseHeld extends Schema.TaggedError<LeaseHeld>()("LeaseHeld", {
  sessionId: Schema.String,
  owner: Schema.String,
  expiresAt: Schema.Number
}) {
  override get message() {
    return `session ${this.sessionId} is driven by another process (${this.owner}) until ${new Date(this.expiresAt).toISOString()}`
  }
}
