/**
 * A `ROLLBACK` that fails (`immediate` in src/store/Sqlite.ts) is a typed `EventStoreError`
 * (`failed`: the connection may still hold the transaction), not a defect; one that fails because
 * the file is damaged names the file, as any other failure of a damaged file does.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Context, Effect, Exit, Layer, Option } from "effect"
import * as Events from "../../src/domain/Events.js"
import { CallId, SessionId } from "../../src/domain/Ids.js"
import { EventStoreError } from "../../src/store/Errors.js"
import { EventBus } from "../../src/store/EventBus.js"
import { EventStore } from "../../src/store/EventStore.js"
import { makeService } from "../../src/store/internal/storeService.js"
import { immediate } from "../../src/store/internal/writeTransaction.js"
import { layerClient, makeSqliteBackend } from "../../src/store/Sqlite.js"
import { tempDb } from "../support/tmp.js"

const sqliteError = (code: string, message: string) => new SqlError({ cause: { code, message }, message })

/**
 * `sql` whose connection fails every `ROLLBACK` with SQLite's I/O error (or `rollback`), and the
 * statements that start with `failing` with SQLite's I/O error (the other statements run).
 */
const failingRollback = (
  sql: SqlClient.SqlClient,
  rollback = sqliteError("SQLITE_IOERR", "disk I/O error"),
  failing?: string
): SqlClient.SqlClient => {
  // the writer's statements begin with a comment of their own (`/* logbook writer */`)
  const text = (statement: string) => statement.replace(/^\/\*[^*]*\*\/\s*/, "")
  const fails = (statement: string) => failing !== undefined && text(statement).startsWith(failing)
  const reserve = Effect.map(
    sql.reserve,
    (conn): Connection => ({
      ...conn,
      execute: (statement, params, transform) =>
        text(statement) === "ROLLBACK"
          ? Effect.fail(rollback)
          : fails(statement)
            ? Effect.fail(sqliteError("SQLITE_IOERR", "disk I/O error"))
            : conn.execute(statement, params, transform),
      executeRaw: (statement, params) =>
        fails(statement)
          ? Effect.fail(sqliteError("SQLITE_IOERR", "disk I/O error"))
          : conn.executeRaw(statement, params)
    })
  )
  // `immediate` and the store's writes use the client's `reserve` only; the client is also a
  // template tag (a function), so it is wrapped, not copied
  return new Proxy(sql, { get: (target, key) => (key === "reserve" ? reserve : Reflect.get(target, key)) })
}

const rolledBackWith = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isFailure(exit) ? Cause.failureOption(exit.cause).pipe(Option.getOrUndefined) : undefined

describe("immediate: a ROLLBACK that fails", () => {
  it.scoped("after a failure inside: the transaction fails with a typed EventStoreError, not a defect", () =>
    Effect.gen(function* () {
      const context = yield* Layer.build(layerClient({ filename: tempDb() }))
      const sql = failingRollback(Context.get(context, SqlClient.SqlClient))
      const exit = yield* Effect.exit(immediate(sql)(() => Effect.fail("no" as const)))
      const error = rolledBackWith(exit)
      expect(error).toBeInstanceOf(EventStoreError)
      expect(error).toMatchObject({ method: "rollback", reason: "failed" })
      expect((error as EventStoreError).message).toContain("could not be rolled back (disk I/O error)")
    })
  )

  it.scoped("after a defect inside: the same typed error", () =>
    Effect.gen(function* () {
      const context = yield* Layer.build(layerClient({ filename: tempDb() }))
      const sql = failingRollback(Context.get(context, SqlClient.SqlClient))
      const exit = yield* Effect.exit(immediate(sql)(() => Effect.dieMessage("boom")))
      expect(rolledBackWith(exit)).toMatchObject({ _tag: "EventStoreError", method: "rollback", reason: "failed" })
    })
  )

  it.scoped("that fails because the file is damaged: the append's error names the damaged file", () =>
    Effect.gen(function* () {
      const file = tempDb()
      const context = yield* Layer.build(layerClient({ filename: file }))
      // the insert fails (an I/O error), then the ROLLBACK finds the file damaged
      const sql = failingRollback(
        Context.get(context, SqlClient.SqlClient),
        sqliteError("SQLITE_CORRUPT", "database disk image is malformed"),
        "INSERT INTO events"
      )
      const backend = yield* makeSqliteBackend({ filename: file }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
      const store = Context.get(
        yield* Layer.build(Layer.scoped(EventStore, makeService(backend)).pipe(Layer.provideMerge(EventBus.layer))),
        EventStore
      )
      const exit = yield* Effect.exit(
        store.append(SessionId.make("s1"), [
          Events.make("tool.progress", { callId: CallId.make("c1"), output: "line 1" })
        ])
      )
      expect(rolledBackWith(exit)).toMatchObject({ _tag: "EventStoreError", method: "rollback", damagedFile: file })
    })
  )
})
