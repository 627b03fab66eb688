/**
 * The writer's no-yield transaction (`writeTransaction` on the client's one connection,
 * src/store/internal/writeTransaction.ts) against the straightforward version that reserves the
 * connection for every write (`reservedWriteTransaction`), on real SQLite files: the same
 * sequences of transactions — statements, failures, defects, SQL errors, a caller's `immediate`
 * transaction holding the connection meanwhile — leave the same rows, end the same way, and call
 * `committed` for the same ones.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, FastCheck, Fiber, Option } from "effect"
import {
  immediate,
  reservedWriteTransaction,
  singleConnection,
  type WriteTransaction,
  writeTransaction
} from "../../src/store/internal/writeTransaction.js"
import { layerClient } from "../../src/store/Sqlite.js"
import { tempDb } from "../support/tmp.js"

/** One statement of a transaction's body, or the way it ends early. */
type Op =
  | { readonly _tag: "insert"; readonly k: number; readonly v: string }
  | { readonly _tag: "fail" }
  | { readonly _tag: "die" }

const op: FastCheck.Arbitrary<Op> = FastCheck.oneof(
  {
    weight: 6,
    arbitrary: FastCheck.record({
      _tag: FastCheck.constant("insert" as const),
      k: FastCheck.integer({ min: 0, max: 12 }),
      v: FastCheck.string({ maxLength: 4 })
    })
  },
  { weight: 1, arbitrary: FastCheck.constant({ _tag: "fail" as const }) },
  { weight: 1, arbitrary: FastCheck.constant({ _tag: "die" as const }) }
)

/** A transaction's body: its ops in order (an insert of a key already there is SQLite's constraint error). */
const body = (ops: ReadonlyArray<Op>) => (conn: Connection) =>
  Effect.gen(function* () {
    let inserted = 0
    for (const o of ops) {
      if (o._tag === "fail") return yield* Effect.fail("refused" as const)
      if (o._tag === "die") return yield* Effect.dieMessage("broken")
      yield* conn.execute("INSERT INTO t (k, v) VALUES (?, ?)", [o.k, o.v], undefined)
      inserted++
    }
    return inserted
  })

const ending = (exit: Exit.Exit<number, unknown>): string =>
  Exit.match(exit, {
    onSuccess: (n) => `committed ${n}`,
    onFailure: (cause) =>
      Option.match(Cause.failureOption(cause), {
        onSome: (error) =>
          typeof error === "string" ? `failed ${error}` : `failed ${(error as { _tag: string })._tag}`,
        onNone: () => (Cause.isDie(cause) ? "died" : "interrupted")
      })
  })

/** A fresh database with the test's table; `make` builds the transaction to test on its client. */
const withDatabase = <A>(
  make: (sql: SqlClient.SqlClient, conn: Connection | undefined) => WriteTransaction,
  use: (sql: SqlClient.SqlClient, transact: WriteTransaction) => Effect.Effect<A, unknown>
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)`
      const conn = yield* singleConnection(sql)
      return yield* use(sql, make(sql, conn))
    }).pipe(Effect.provide(layerClient({ filename: tempDb() })))
  )

const rows = (sql: SqlClient.SqlClient) => sql<{ k: number; v: string }>`SELECT k, v FROM t ORDER BY k`

/** Runs the transactions one after another: each one's end and `committed` calls, then the rows. */
const runAll = (
  make: (sql: SqlClient.SqlClient, conn: Connection | undefined) => WriteTransaction,
  txs: ReadonlyArray<ReadonlyArray<Op>>
) =>
  withDatabase(make, (sql, transact) =>
    Effect.gen(function* () {
      const ends: Array<string> = []
      const committed: Array<number> = []
      for (const ops of txs) {
        const exit = yield* Effect.exit(transact(body(ops), (n) => committed.push(n)))
        ends.push(ending(exit))
      }
      return { ends, committed, rows: yield* rows(sql) }
    })
  )

describe("writeTransaction against reservedWriteTransaction", () => {
  it.live.prop(
    "the same rows, ends and commits over random sequences of transactions",
    [FastCheck.array(FastCheck.array(op, { maxLength: 5 }), { minLength: 1, maxLength: 10 })],
    ([txs]) =>
      Effect.gen(function* () {
        const fast = yield* runAll(writeTransaction, txs)
        const twin = yield* runAll((sql) => reservedWriteTransaction(sql), txs)
        expect(fast).toEqual(twin)
      }),
    { fastCheck: { numRuns: 20, seed: 31 } }
  )

  it.live("the listed ends: a commit, a failure, a defect and a constraint error, each rolled back whole", () =>
    Effect.gen(function* () {
      const txs: ReadonlyArray<ReadonlyArray<Op>> = [
        [{ _tag: "insert", k: 1, v: "a" }],
        [{ _tag: "insert", k: 2, v: "b" }, { _tag: "fail" }],
        [{ _tag: "insert", k: 3, v: "c" }, { _tag: "die" }],
        [
          { _tag: "insert", k: 4, v: "d" },
          { _tag: "insert", k: 1, v: "again" }
        ],
        [{ _tag: "insert", k: 5, v: "e" }]
      ]
      const fast = yield* runAll(writeTransaction, txs)
      const twin = yield* runAll((sql) => reservedWriteTransaction(sql), txs)
      expect(fast).toEqual(twin)
      expect(fast.ends).toEqual(["committed 1", "failed refused", "died", "failed SqlError", "committed 1"])
      expect(fast.rows).toEqual([
        { k: 1, v: "a" },
        { k: 5, v: "e" }
      ])
    })
  )

  for (const [name, make] of [
    ["writeTransaction", writeTransaction],
    ["reservedWriteTransaction", (sql: SqlClient.SqlClient) => reservedWriteTransaction(sql)]
  ] as const) {
    it.live(`${name}: a write while a caller's immediate transaction holds the connection waits for its commit`, () =>
      withDatabase(make, (sql, transact) =>
        Effect.gen(function* () {
          const holding = yield* Deferred.make<void>()
          const release = yield* Deferred.make<void>()
          const caller = yield* Effect.fork(
            immediate(sql)(() =>
              Effect.gen(function* () {
                yield* sql`INSERT INTO t (k, v) VALUES (1, 'caller')`
                yield* Deferred.succeed(holding, undefined)
                yield* Deferred.await(release)
              })
            )
          )
          yield* Deferred.await(holding)
          const write = yield* Effect.fork(transact(body([{ _tag: "insert", k: 2, v: "writer" }])))
          // the write cannot commit while the caller's transaction is open: it is still waiting
          yield* Effect.yieldNow()
          expect(write.unsafePoll()).toBeNull()
          yield* Deferred.succeed(release, undefined)
          yield* Fiber.join(caller)
          expect(yield* Fiber.join(write)).toBe(1)
          expect(yield* rows(sql)).toEqual([
            { k: 1, v: "caller" },
            { k: 2, v: "writer" }
          ])
        })
      )
    )
  }
})
