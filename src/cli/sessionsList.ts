/**
 * `logbook sessions list`: the session index, most recently updated first.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as FileSystem from "@effect/platform/FileSystem"
import { Console, Effect, Option } from "effect"
import { EventStore, type SessionSummary } from "../store/EventStore.js"
import { dbOption, existingStore, resolveDbPath } from "./db.js"
import { CliError } from "./errors.js"
import { formatOption } from "./options.js"
import { formatLocalTime, oneLine, type Style, stdoutStyle, table, truncate } from "./render.js"

const listFormat = formatOption(
  ["table", "json"],
  "table: aligned columns for people; json: one JSON array of session objects."
)

const allOption = Options.boolean("all").pipe(
  Options.withAlias("a"),
  Options.withDescription("Also list deleted sessions.")
)

const limitOption = Options.integer("limit").pipe(
  Options.optional,
  Options.withAlias("n"),
  Options.withDescription("Show at most this many sessions (the most recently updated).")
)

/** The JSON form of a session summary: times are UTC epoch milliseconds, as stored. */
export const summaryJson = (s: SessionSummary) => ({
  id: s.id,
  title: s.title,
  status: s.status,
  cwd: s.cwd,
  createdAt: s.createdAt,
  updatedAt: s.updatedAt,
  lastSeq: s.lastSeq,
  deleted: s.deleted
})

const statusText = (s: SessionSummary, style: Style): string => {
  if (s.deleted) return style.dim("deleted")
  switch (s.status) {
    case "busy":
      return style.yellow("busy")
    case "retry":
      return style.yellow("retry")
    case "idle":
      return "idle"
  }
}

export const renderTable = (sessions: ReadonlyArray<SessionSummary>, style: Style): Array<string> =>
  table(
    ["ID", "TITLE", "STATUS", "UPDATED", "EVENTS", "CWD"],
    sessions.map((s) => [
      s.id,
      s.title === null || s.title === "" ? style.dim("(untitled)") : truncate(oneLine(s.title), 48),
      statusText(s, style),
      formatLocalTime(s.updatedAt),
      String(s.lastSeq),
      s.cwd ?? style.dim("-")
    ]),
    style
  )

export const sessionsList = Command.make(
  "list",
  { db: dbOption, format: listFormat, all: allOption, limit: limitOption },
  Effect.fn("cli.sessions.list")(
    function* ({ all, db, format, limit }) {
      const file = yield* resolveDbPath(db)
      const store = yield* EventStore
      if (Option.isSome(limit) && limit.value < 1) {
        return yield* CliError.usage(`--limit must be at least 1 (got ${limit.value})`)
      }
      const sessions = yield* store.sessions({ includeDeleted: all, limit: Option.getOrUndefined(limit) })
      if (format === "json") {
        yield* Console.log(JSON.stringify(sessions.map(summaryJson), null, 2))
        return
      }
      if (sessions.length === 0) {
        yield* Console.log(`No sessions in ${file} yet.`)
        return
      }
      const style = yield* stdoutStyle
      yield* Console.log(renderTable(sessions, style).join("\n"))
    },
    (effect, { db, format }) =>
      Effect.gen(function* () {
        // on a machine with no database yet (the default place, not one named by --db or LOGBOOK_DB,
        // where a missing file is more likely a typo): no sessions, and nothing is created
        if (Option.isNone(Option.filter(db, (file) => file !== ""))) {
          const file = yield* resolveDbPath(db)
          const fs = yield* FileSystem.FileSystem
          const exists = yield* fs.exists(file).pipe(Effect.orElseSucceed(() => true))
          if (!exists) {
            return yield* Console.log(format === "json" ? "[]" : `No sessions yet (no database at ${file}).`)
          }
        }
        return yield* Effect.provide(effect, existingStore(db))
      })
  )
).pipe(Command.withDescription("List the sessions in the database, most recently updated first."))
