/**
 * The store's write transactions on SQLite: `immediate` (`BEGIN IMMEDIATE` on a reserved
 * connection, for callers' own statements), the migrations' transaction, and the writer's
 * transactions (`writeTransaction`), which run on the client's one connection without reserving it
 * when nothing else holds it — with cooperative yielding off, so no other fiber runs inside one.
 * test/store/writeTransaction.test.ts holds that fast path to `reservedWriteTransaction`, the
 * straightforward version that reserves the connection for every write.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Option, RuntimeFlags, RuntimeFlagsPatch, Scope } from "effect"
import { EventStoreError } from "../Errors.js"

export const isNoTransaction = (e: SqlError): boolean =>
  /no transaction is active/i.test(String((e.cause as Error)?.message))

/**
 * How many reservations of each client's connection `transaction` and the migrations hold now:
 * while one is held, the writer's transactions reserve the connection too (and so wait for it)
 * instead of running on it directly (`directTransaction`).
 */
const reservations = new WeakMap<SqlClient.SqlClient, number>()

/**
 * `sql.reserve`, counted in `reservations` from before the wait for it until its scope closes (the
 * count and its release are one uninterruptible step: an interrupt cannot leave it counted).
 */
const reserveCounted = (sql: SqlClient.SqlClient): Effect.Effect<Connection, SqlError, Scope.Scope> =>
  Effect.zipRight(
    Effect.acquireRelease(
      Effect.sync(() => reservations.set(sql, (reservations.get(sql) ?? 0) + 1)),
      () => Effect.sync(() => reservations.set(sql, (reservations.get(sql) ?? 1) - 1))
    ),
    sql.reserve
  )

/** Runs an effect in a `BEGIN IMMEDIATE` transaction (nested calls use savepoints). */
export const makeImmediate = (sql: SqlClient.SqlClient) =>
  SqlClient.makeWithTransaction({
    transactionTag: SqlClient.TransactionConnection,
    spanAttributes: [],
    acquireConnection: Effect.flatMap(Scope.make(), (scope) =>
      Effect.map(Scope.extend(reserveCounted(sql), scope), (conn) => [scope, conn] as const)
    ),
    begin: (conn) => conn.executeUnprepared("BEGIN IMMEDIATE", [], undefined),
    savepoint: (conn, id) => conn.executeUnprepared(`SAVEPOINT logbook_${id}`, [], undefined),
    commit: (conn) => conn.executeUnprepared("COMMIT", [], undefined),
    // a BEGIN that failed (busy) leaves no transaction to roll back: that is not a second error
    rollback: (conn) =>
      conn.executeUnprepared("ROLLBACK", [], undefined).pipe(
        Effect.catchIf(isNoTransaction, () => Effect.void),
        Effect.asVoid
      ),
    rollbackSavepoint: (conn, id) => conn.executeUnprepared(`ROLLBACK TO SAVEPOINT logbook_${id}`, [], undefined)
  })

/**
 * A `ROLLBACK` that failed: the write fails with it (in place of the failure that asked for the
 * rollback), `failed` — the connection may still hold the transaction, so any request may fail.
 */
const rollbackError = (e: SqlError): EventStoreError =>
  new EventStoreError({
    method: "rollback",
    message: `rollback: the transaction could not be rolled back (${describeSqliteError(e.cause ?? e)})`,
    reason: "failed",
    cause: e.cause ?? e
  })

/**
 * Runs `body` in one `BEGIN IMMEDIATE … COMMIT` transaction on the `SqlClient`'s connection. The
 * client's transaction connection is reserved (its semaphore: this process's other statements and
 * transactions wait for it, so nothing reads or writes past an open transaction), handed to `body`,
 * and provided as the transaction connection, so `sql` statements inside run on it too.
 * `BEGIN IMMEDIATE` takes SQLite's write lock up front, waiting up to the busy timeout for another
 * process's. A failure, a defect or an interrupt of `body` rolls everything back; the connection
 * is given back only after `COMMIT` or `ROLLBACK`, so no exit leaves a transaction open. Only the
 * wait for the connection and `body` itself can be interrupted. A nested `sql.withTransaction`
 * inside is a savepoint; a write inside `body` through the store would wait for itself.
 */
export const immediate =
  (sql: SqlClient.SqlClient) =>
  <A, E, R>(body: (conn: Connection) => Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError | EventStoreError, R> =>
    transaction(sql, true)(body)

/**
 * `BEGIN IMMEDIATE`, `inside`, then `COMMIT` (and `committed`) — or `ROLLBACK` when `inside` fails
 * or dies, or the `COMMIT` fails; the failure is then the caller's.
 */
const beginCommit = <A, E, R>(
  conn: Connection,
  inside: Effect.Effect<A, E, R>,
  committed: ((value: A) => void) | undefined,
  begin = "BEGIN IMMEDIATE"
): Effect.Effect<A, E | SqlError | EventStoreError, R> => {
  // a BEGIN or COMMIT that failed may leave no transaction to roll back: not a second error
  const rollback = () =>
    conn.execute("ROLLBACK", [], undefined).pipe(
      Effect.catchIf(isNoTransaction, () => Effect.void),
      Effect.mapError(rollbackError)
    )
  return Effect.zipRight(
    conn.execute(begin, [], undefined),
    Effect.matchCauseEffect(inside, {
      onFailure: (cause): Effect.Effect<A, E | SqlError | EventStoreError> =>
        Effect.zipRight(rollback(), Effect.failCause(cause)),
      onSuccess: (value) =>
        Effect.map(Effect.tapError(conn.execute("COMMIT", [], undefined), rollback), () => {
          committed?.(value)
          return value
        })
    })
  )
}

/**
 * `immediate` and the store's own writes: `provide` says whether `body`'s `sql` statements run on
 * the transaction's connection (`immediate`); the store's writes use only `conn`, and save the
 * context change per commit. `begin` is `BEGIN` for a read transaction (`consistentRead`).
 */
const transaction =
  (sql: SqlClient.SqlClient, provide: boolean, begin = "BEGIN IMMEDIATE") =>
  <A, E, R>(
    body: (conn: Connection) => Effect.Effect<A, E, R>,
    /** run right after a successful COMMIT, while the connection is still held */
    committed?: (value: A) => void
  ): Effect.Effect<A, E | SqlError | EventStoreError, R> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(Scope.make(), (scope) =>
        Effect.onExit(
          Effect.flatMap(restore(Scope.extend(reserveCounted(sql), scope)), (conn) => {
            const inside = provide
              ? Effect.provideService(body(conn), SqlClient.TransactionConnection, [conn, 0] as const)
              : body(conn)
            return beginCommit(conn, restore(inside), committed, begin)
          }),
          (exit) => Scope.close(scope, exit)
        )
      )
    )

/**
 * Runs `effect` in one read transaction (`BEGIN` … `COMMIT`) on the client's connection, its `sql`
 * statements on that connection: in WAL mode every statement of it reads the state the first one
 * saw, whatever other processes commit meanwhile. The connection is reserved (as by `immediate`),
 * so this process's writes wait until it ends. Inside a transaction already, `effect` runs in it.
 */
export const consistentRead =
  (sql: SqlClient.SqlClient) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError | EventStoreError, R> =>
    Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (open) =>
      Option.isSome(open) ? effect : transaction(sql, true, "BEGIN")(() => effect)
    )

/**
 * The client's one connection, when it hands out one: `@effect/sql-sqlite-node`'s client is a single
 * connection behind a semaphore, and reserving it twice gives the same `Connection` both times.
 * Otherwise (a client that pools) `undefined`, and every write reserves its connection.
 */
export const singleConnection = (sql: SqlClient.SqlClient): Effect.Effect<Connection | undefined, SqlError> =>
  Effect.map(Effect.all([Effect.scoped(sql.reserve), Effect.scoped(sql.reserve)]), ([first, second]) =>
    first === second ? first : undefined
  )

/** Prefixed to the writer's statements: their texts are their own in the prepared-statement cache. */
const WRITER_STATEMENT = "/* logbook writer */ "

/**
 * `conn` with the writer's statements under texts of their own (`WRITER_STATEMENT` before each):
 * no read of the client prepares the same text, so a write never waits for a read's preparation
 * (`directTransaction`).
 */
const writerConnection = (conn: Connection): Connection => ({
  ...conn,
  execute: (statement, params, transformRows) => conn.execute(WRITER_STATEMENT + statement, params, transformRows),
  executeRaw: (statement, params) => conn.executeRaw(WRITER_STATEMENT + statement, params),
  executeValues: (statement, params) => conn.executeValues(WRITER_STATEMENT + statement, params),
  executeUnprepared: (statement, params, transformRows) =>
    conn.executeUnprepared(WRITER_STATEMENT + statement, params, transformRows)
})

/**
 * The writer's transactions without reserving the connection each time: with cooperative yielding
 * off, a body of synchronous statements runs from `BEGIN IMMEDIATE` to `COMMIT` with no other fiber
 * in between, which is what the reservation would ensure. While `immediate` (or a migration) holds
 * the connection, a write reserves it as before and waits. The body's statements use
 * `writerConnection` (texts no read shares, so none waits on another fiber's preparation); a body
 * that waited anyway fails with a defect. A failure or defect rolls back; nothing is interruptible.
 */
const directTransaction = (
  sql: SqlClient.SqlClient,
  conn: Connection,
  reserved: WriteTransaction
): WriteTransaction => {
  let open = false
  const direct = <A, E>(
    body: (conn: Connection) => Effect.Effect<A, E>,
    committed: ((value: A) => void) | undefined
  ): Effect.Effect<A, E | SqlError | EventStoreError> =>
    // the flag is set and cleared inside the uninterruptible region: no interrupt can leave it set
    Effect.uninterruptible(
      Effect.suspend(() => {
        if (open) return Effect.dieMessage("a write transaction began inside another: a transaction's body waited")
        open = true
        return Effect.onExit(beginCommit(conn, body(conn), committed), () =>
          Effect.sync(() => {
            open = false
          })
        )
      })
    )
  return <A, E>(
    body: (conn: Connection) => Effect.Effect<A, E>,
    /** run right after a successful COMMIT */
    committed?: (value: A) => void
  ): Effect.Effect<A, E | SqlError | EventStoreError> =>
    Effect.suspend(() => ((reservations.get(sql) ?? 0) > 0 ? reserved(body, committed) : direct(body, committed))).pipe(
      Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.disable(RuntimeFlags.CooperativeYielding))
    )
}

export const describeSqliteError = (e: unknown): string => {
  const cause = e as { code?: string; message?: string } | undefined
  if (cause?.code === "SQLITE_BUSY") return "the database is locked by another process (busy timeout reached)"
  if (cause?.code === "SQLITE_CORRUPT") return `the database is damaged (${cause.message})`
  if (cause?.code === "SQLITE_FULL") return "the disk is full"
  return cause?.message ?? String(e)
}

/** A transaction of the writer: `body` on its connection, `committed` right after a successful COMMIT. */
export type WriteTransaction = <A, E>(
  body: (conn: Connection) => Effect.Effect<A, E>,
  committed?: (value: A) => void
) => Effect.Effect<A, E | SqlError | EventStoreError>

/** The straightforward version: every write reserves the connection (on `writerConnection`). */
export const reservedWriteTransaction = (sql: SqlClient.SqlClient): WriteTransaction => {
  const reservedTransaction = transaction(sql, false)
  return (body, committed) => reservedTransaction((reservedConn) => body(writerConnection(reservedConn)), committed)
}

/**
 * The writer's transactions: on `conn`, the client's one connection (`singleConnection`), without
 * reserving it while no reservation is held (`directTransaction`); reserved each time when the
 * client hands out no single connection.
 */
export const writeTransaction = (sql: SqlClient.SqlClient, conn: Connection | undefined): WriteTransaction => {
  const reserved = reservedWriteTransaction(sql)
  return conn === undefined ? reserved : directTransaction(sql, writerConnection(conn), reserved)
}
