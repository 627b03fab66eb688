/**
 * The errors of the store layer.
 */
import { Schema } from "effect"

export class EventStoreError extends Schema.TaggedError<EventStoreError>()("EventStoreError", {
  method: Schema.String,
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

/**
 * The database file cannot be used. `reason`:
 * - `not-logbook`: a file that is not a logbook database (another SQLite database, or not SQLite at all)
 * - `corrupt`: a damaged SQLite file
 * - `newer-schema`: written by a newer logbook
 * - `unreadable`: the file or its directory cannot be opened or created
 * The file is never modified in any of these cases.
 */
export class DatabaseError extends Schema.TaggedError<DatabaseError>()("DatabaseError", {
  file: Schema.String,
  reason: Schema.Literal("not-logbook", "corrupt", "newer-schema", "unreadable", "missing"),
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
