/**
 * A `ROLLBACK` that fails (`immediate` in src/store/Sqlite.ts) is a typed `EventStoreError`
 * (`failed`: the connection may still hold the transaction), not a defect.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Context, Effect, Exit, Layer, Option } from "effect"
import { EventStoreError } from "../../src/store/Errors.js"
import { immediate, layerClient } from "../../src/store/Sqlite.js"
import { tempDb } from "../support/tmp.js"

/** `sql` whose connection fails every `ROLLBACK` with SQLite's I/O error (the other statements run). */
const failingRollback = (sql: SqlClient.SqlClient): SqlClient.SqlClient => {
  const reserve = Effect.map(
    sql.reserve,
    (conn): Connection => ({
      ...conn,
      execute: (statement, params, transform) =>
        statement === "ROLLBACK"
          ? Effect.fail(
              new SqlError({ cause: { code: "SQLITE_IOERR", message: "disk I/O error" }, message: "ROLLBACK failed" })
            )
          : conn.execute(statement, params, transform)
    })
  )
  // `immediate` uses the client's `reserve` only
  return Object.assign(Object.create(sql) as SqlClient.SqlClient, { reserve })
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
})
