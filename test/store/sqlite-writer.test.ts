/**
 * The SQLite write path: every write is one `BEGIN IMMEDIATE` transaction on the `SqlClient`'s
 * single connection (src/store/internal/writeTransaction.ts), the connection the reads use too.
 */

import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Context, Deferred, Effect, Exit, Fiber, Layer, Option } from "effect"
import * as Events from "../../src/domain/Events.js"
import { CallId, MessageId, SessionId } from "../../src/domain/Ids.js"
import { EventBus } from "../../src/store/EventBus.js"
import { EventStore } from "../../src/store/EventStore.js"
import { makeService } from "../../src/store/internal/storeService.js"
import { immediate } from "../../src/store/internal/writeTransaction.js"
import { layerClient, makeSqliteBackend, type SqliteOptions } from "../../src/store/Sqlite.js"
import { verifySession } from "../../src/store/Verify.js"
import { tempDb } from "../support/tmp.js"

const sid = SessionId.make("s1")
const progress = (n: number) => Events.make("tool.progress", { callId: CallId.make("c1"), output: `line ${n}` })

/**
 * The store of `EventStore.layerSqlite` and its `SqlClient` (`client`, by default the store's own),
 * open for the rest of the test's scope.
 */
const open = (options: SqliteOptions, client: Layer.Layer<SqlClient.SqlClient, unknown> = layerClient(options)) =>
  Effect.map(
    Layer.build(
      Layer.scoped(
        EventStore,
        Effect.flatMap(makeSqliteBackend(options), (backend) => makeService(backend))
      ).pipe(Layer.provideMerge(client), Layer.provideMerge(EventBus.layer))
    ),
    (context) => ({ sql: Context.get(context, SqlClient.SqlClient), store: Context.get(context, EventStore) })
  )

/**
 * Every kind of write of the store once (`everyWrite`) on a fresh file, over a client whose
 * `reserve` is counted; with `distinct`, each reservation hands out a `Connection` object of its
 * own (over the same connection), as a client that pools would. The reservations the writes made.
 */
const reservationsOfEveryWrite = (distinct: boolean) =>
  Effect.gen(function* () {
    const file = tempDb()
    const options = { filename: file }
    const reserved = { count: 0 }
    const counted = Layer.effect(
      SqlClient.SqlClient,
      Effect.map(
        SqlClient.SqlClient,
        (sql) =>
          new Proxy(sql, {
            get: (target, key, receiver) =>
              key === "reserve"
                ? Effect.zipRight(
                    Effect.sync(() => {
                      reserved.count++
                    }),
                    Effect.map(target.reserve, (conn) => (distinct ? { ...conn } : conn))
                  )
                : Reflect.get(target, key, receiver)
          })
      )
    ).pipe(Layer.provide(layerClient(options)))
    const { store } = yield* open(options, counted)
    // the backend reserved it twice already, once, to see whether it hands out one connection
    const before = reserved.count
    yield* everyWrite(store)
    expect(yield* store.lastSeq(sid)).toBe(3)
    expect(writeLockFree(file)).toBe(true)
    return { file, store, reservations: reserved.count - before }
  })

/** Every kind of write of the store once: events, a snapshot, a blob, a lease taken and given back. */
const everyWrite = (store: EventStore["Type"]) =>
  Effect.gen(function* () {
    yield* store.append(sid, [Events.make("session.created", { title: "t" })])
    yield* store.appendLater(sid, [progress(1)])
    yield* store.flush
    yield* store.saveSnapshot({ sessionId: sid, version: 1, seq: 2, at: 1, state: { n: 1 } })
    yield* store.putBlob(new TextEncoder().encode("blob"))
    yield* store.acquireLease(sid, "owner-a", 60_000)
    yield* store.append(sid, [progress(2)], { owner: "owner-a" })
    yield* store.releaseLease(sid, "owner-a")
  })

/** What another process sees: the committed state of the file, through a connection of its own. */
const committedTitle = (file: string) => {
  const db = new Database(file, { readonly: true })
  try {
    return (db.prepare("SELECT title FROM sessions WHERE id = ?").get(sid) as { title: string | null }).title
  } finally {
    db.close()
  }
}

/** Whether another process can take the write lock right now (no wait). */
const writeLockFree = (file: string) => {
  const db = new Database(file, { timeout: 0 })
  try {
    db.exec("BEGIN IMMEDIATE")
    db.exec("ROLLBACK")
    return true
  } catch (e) {
    if ((e as { code?: string }).code === "SQLITE_BUSY") return false
    throw e
  } finally {
    db.close()
  }
}

const setTitle = (sql: SqlClient.SqlClient, title: string) =>
  sql`UPDATE sessions SET title = ${title} WHERE id = ${sid}`
const titleOf = (sql: SqlClient.SqlClient) =>
  Effect.map(sql<{ title: string }>`SELECT title FROM sessions WHERE id = ${sid}`, (rows) => rows[0]?.title)

/** Lets every other fiber that can run, run (a blocked one stays blocked however often). */
const letOthersRun = Effect.repeatN(Effect.yieldNow(), 50)

describe("SQLite writes through the SqlClient", () => {
  it.scoped(
    "one connection: an append and a read wait for this process's open transaction instead of failing busy",
    () =>
      Effect.gen(function* () {
        const file = tempDb()
        const {
          sql,
          store
        } = // no busy wait: a second connection of this process would fail at once on the lock
          yield* open({ filename: file, busyTimeoutMs: 0 })
        yield* store.append(sid, [Events.make("session.created", { title: "before" })])
        const inside = yield* Deferred.make<string | undefined>()
        const gate = yield* Deferred.make<void>()
        const transaction = yield* Effect.fork(
          immediate(sql)(() =>
            Effect.gen(function* () {
              yield* setTitle(sql, "inside")
              // the transaction reads its own write: it is on the connection the statement used
              yield* Deferred.succeed(inside, yield* titleOf(sql))
              yield* Deferred.await(gate)
            })
          )
        )
        expect(yield* Deferred.await(inside)).toBe("inside")
        // another process sees neither the write nor a free lock while the transaction is open
        expect(committedTitle(file)).toBe("before")
        expect(writeLockFree(file)).toBe(false)
        const append = yield* Effect.fork(store.append(sid, [progress(1)]))
        const read = yield* Effect.fork(store.session(sid))
        yield* letOthersRun
        // both queue on the client's connection: no busy failure, no read past the open transaction
        expect(Option.isNone(yield* Fiber.poll(append))).toBe(true)
        expect(Option.isNone(yield* Fiber.poll(read))).toBe(true)
        yield* Deferred.succeed(gate, undefined)
        yield* Fiber.join(transaction)
        expect((yield* Fiber.join(append)).map((e) => e.seq)).toEqual([2])
        // the read ran after the commit: it sees the transaction's write, never a half state
        const session = Option.getOrThrow(yield* Fiber.join(read))
        expect(session.title).toBe("inside")
        expect(committedTitle(file)).toBe("inside")
        expect(yield* store.lastSeq(sid)).toBe(2)
      })
  )

  it.scoped("the writes run on the client's one connection without reserving it each time", () =>
    Effect.gen(function* () {
      const { file, store, reservations } = yield* reservationsOfEveryWrite(false)
      // none of the seven transactions reserved it
      expect(reservations).toBe(0)
      expect(committedTitle(file)).toBe("t")
      expect((yield* Effect.provideService(verifySession(sid), EventStore, store)).problems).toEqual([])
    })
  )

  it.scoped("a client that hands out a connection per reservation: every write reserves one, as before", () =>
    Effect.gen(function* () {
      const { reservations } = yield* reservationsOfEveryWrite(true)
      // seven transactions (the flush commits the handed-over event), each on a reserved connection
      expect(reservations).toBe(7)
    })
  )

  it.scoped("a write never waits inside its transaction for a read's preparation of a statement", () =>
    Effect.gen(function* () {
      // `lease` reads with the text of a statement `acquireLease` writes with; a read that yields in
      // the middle of preparing it (its op budget placed there) made a write's body wait for it, and
      // the next write began inside that transaction (17 of these 36 schedules failed so)
      for (let budget = 16; budget <= 24; budget++) {
        for (let yields = 4; yields < 8; yields++) {
          const exits = yield* Effect.scoped(
            Effect.gen(function* () {
              const { store } = yield* open({ filename: tempDb() })
              yield* store.append(sid, [Events.make("session.created", { title: "t" })])
              const read = yield* Effect.fork(Effect.withMaxOpsBeforeYield(store.lease(sid), budget))
              for (let i = 0; i < yields; i++) yield* Effect.yieldNow()
              const lease = yield* Effect.fork(store.acquireLease(sid, "owner-a", 60_000))
              const append = yield* Effect.fork(Effect.zipRight(Effect.yieldNow(), store.append(sid, [progress(1)])))
              const exits = yield* Effect.all([Fiber.await(read), Fiber.await(lease), Fiber.await(append)])
              expect(yield* store.lastSeq(sid)).toBe(2)
              return exits
            })
          )
          expect({ budget, yields, failed: exits.filter((exit) => exit._tag === "Failure").length }).toEqual({
            budget,
            yields,
            failed: 0
          })
        }
      }
    })
  )

  it.scoped("the connection the writes use has synchronous=NORMAL, WAL and the busy timeout asked for", () =>
    Effect.gen(function* () {
      const { sql } = yield* open({ filename: tempDb(), busyTimeoutMs: 1234 })
      const pragma = (name: string) => Effect.map(sql.unsafe(`PRAGMA ${name}`), (rows) => Object.values(rows[0]!)[0])
      // inside a write transaction: on the very connection a commit runs on
      const seen = yield* immediate(sql)(() =>
        Effect.all({
          synchronous: pragma("synchronous"),
          journal: pragma("journal_mode"),
          busy: pragma("busy_timeout")
        })
      )
      expect(seen).toEqual({ synchronous: 1, journal: "wal", busy: 1234 })
    })
  )

  it.scoped("an interrupt mid-transaction rolls it back and leaves no transaction open", () =>
    Effect.gen(function* () {
      const file = tempDb()
      const { sql, store } = yield* open({ filename: file, busyTimeoutMs: 0 })
      yield* store.append(sid, [Events.make("session.created", { title: "before" })])
      const written = yield* Deferred.make<void>()
      const transaction = yield* Effect.fork(
        immediate(sql)(() =>
          Effect.gen(function* () {
            yield* setTitle(sql, "half")
            yield* sql`INSERT INTO blobs (hash, size, data) VALUES ('h', 1, x'00')`
            yield* Deferred.succeed(written, undefined)
            return yield* Effect.never
          })
        )
      )
      yield* Deferred.await(written)
      expect(writeLockFree(file)).toBe(false)
      yield* Fiber.interrupt(transaction)
      // rolled back: nothing of it in the file, the lock given back
      expect(committedTitle(file)).toBe("before")
      expect(writeLockFree(file)).toBe(true)
      // and on this process's connection: no transaction left open (a BEGIN inside one would fail)
      expect(Option.getOrThrow(yield* store.session(sid)).title).toBe("before")
      expect(Option.isNone(yield* store.getBlob("h"))).toBe(true)
      expect((yield* store.append(sid, [progress(1)])).map((e) => e.seq)).toEqual([2])
      expect(yield* store.lastSeq(sid)).toBe(2)
    })
  )

  it.scoped("a failure or a defect inside rolls back everything the transaction wrote", () =>
    Effect.gen(function* () {
      const file = tempDb()
      const { sql, store } = yield* open({ filename: file, busyTimeoutMs: 0 })
      yield* store.append(sid, [Events.make("session.created", { title: "before" })])
      const failed = yield* Effect.exit(
        immediate(sql)(() => Effect.zipRight(setTitle(sql, "failed"), Effect.fail("no" as const)))
      )
      expect(failed).toEqual(Exit.fail("no"))
      const died = yield* Effect.exit(
        immediate(sql)(() => Effect.zipRight(setTitle(sql, "died"), Effect.dieMessage("boom")))
      )
      expect(Exit.isFailure(died) && !Exit.isInterrupted(died)).toBe(true)
      expect(committedTitle(file)).toBe("before")
      expect(writeLockFree(file)).toBe(true)
      expect((yield* store.append(sid, [progress(1)])).map((e) => e.seq)).toEqual([2])
    })
  )

  it.scoped("a refused commit writes nothing (rows, index, stats) and the next one goes in", () =>
    Effect.gen(function* () {
      const file = tempDb()
      const { store } = yield* open({ filename: file })
      const [created] = yield* store.append(sid, [Events.make("session.created", { title: "t" })])
      const invoked = Events.make("tool.invoked", {
        messageId: MessageId.make("m1"),
        callId: CallId.make("c1"),
        tool: "read",
        input: { path: "a" }
      })
      // the second event reuses the first one's id: the events_id index refuses the commit
      const error = yield* Effect.flip(store.append(sid, [invoked, { ...progress(1), id: created!.id }]))
      expect(error).toMatchObject({ _tag: "EventStoreError", method: "append", reason: "refused" })
      const db = new Database(file, { readonly: true })
      const counts = () => ({
        events: db.prepare("SELECT count(*) FROM events").pluck().get(),
        tools: db.prepare("SELECT count(*) FROM stat_tools").pluck().get(),
        last: db.prepare("SELECT last_seq FROM sessions WHERE id = ?").pluck().get(sid)
      })
      // neither row, nor the stats row of the first, nor the index update went in
      expect(counts()).toEqual({ events: 1, tools: 0, last: 1 })
      expect(writeLockFree(file)).toBe(true)
      expect((yield* store.append(sid, [invoked])).map((e) => e.seq)).toEqual([2])
      expect(counts()).toEqual({ events: 2, tools: 1, last: 2 })
      db.close()
    })
  )

  it.scoped(
    "a write that cannot get another process's lock in time fails typed (busy), and writes once it is free",
    () =>
      Effect.gen(function* () {
        const file = tempDb()
        const { store } = yield* open({ filename: file, busyTimeoutMs: 50 })
        yield* store.append(sid, [Events.make("session.created", { title: "t" })])
        const holder = new Database(file)
        holder.exec("BEGIN IMMEDIATE")
        const error = yield* Effect.flip(store.append(sid, [progress(1)]))
        holder.exec("ROLLBACK")
        holder.close()
        expect(error).toMatchObject({ _tag: "EventStoreError", method: "append" })
        expect(error.reason).toBe("failed")
        expect(error.message).toMatch(/locked by another process/)
        expect((yield* store.append(sid, [progress(2)])).map((e) => e.seq)).toEqual([2])
      })
  )

  describe("what a commit keeps of its sessions (instead of reading them again) is given up when", () => {
    const created = Events.make("session.created", { title: "t" })
    const seqs = (envelopes: ReadonlyArray<{ readonly seq: number }>) => envelopes.map((e) => e.seq)

    it.scoped("another connection (another process) appended rows or took the lease", () =>
      Effect.gen(function* () {
        const file = tempDb()
        const a = yield* open({ filename: file })
        // a second client on the file: its own connection, as another process has
        const b = yield* open({ filename: file })
        yield* a.store.append(sid, [created])
        yield* a.store.append(sid, [progress(1)])
        expect(seqs(yield* b.store.append(sid, [progress(2)]))).toEqual([3])
        // a's next row follows b's, chained to it
        expect(seqs(yield* a.store.append(sid, [progress(3)]))).toEqual([4])
        expect(Option.getOrThrow(yield* a.store.session(sid))).toMatchObject({ lastSeq: 4, title: "t" })
        const verification = yield* Effect.provideService(verifySession(sid), EventStore, a.store)
        expect(verification.problems).toEqual([])
        // the fence sees a lease b took after a's last commit
        yield* a.store.acquireLease(sid, "owner-a", 60_000)
        expect(seqs(yield* a.store.append(sid, [progress(4)], { owner: "owner-a" }))).toEqual([5])
        yield* b.store.releaseLease(sid, "owner-a")
        yield* b.store.acquireLease(sid, "owner-b", 60_000)
        const fenced = yield* Effect.flip(a.store.append(sid, [progress(5)], { owner: "owner-a" }))
        expect(fenced.reason).toBe("fenced")
        expect(yield* a.store.lastSeq(sid)).toBe(5)
      })
    )

    it.scoped("another write of this process changed the session's row or lease", () =>
      Effect.gen(function* () {
        const file = tempDb()
        const { sql, store } = yield* open({ filename: file })
        yield* store.append(sid, [created])
        yield* store.append(sid, [progress(1)])
        // a statement through the client (no transaction of the store's): the next commit keeps it
        yield* setTitle(sql, "changed")
        expect(seqs(yield* store.append(sid, [progress(2)]))).toEqual([3])
        expect(committedTitle(file)).toBe("changed")
        // this process's own lease writes: the fence sees the release
        yield* store.acquireLease(sid, "owner-a", 60_000)
        expect(seqs(yield* store.append(sid, [progress(3)], { owner: "owner-a" }))).toEqual([4])
        yield* store.releaseLease(sid, "owner-a")
        const fenced = yield* Effect.flip(store.append(sid, [progress(4)], { owner: "owner-a" }))
        expect(fenced.reason).toBe("fenced")
        // a row written around logbook (no hash), through the client: the next row follows it
        yield* sql`INSERT INTO events (session_id, seq, id, type, at, v, payload) VALUES (${sid}, 5, 'foreign', 'tool.progress', 1, 1, '{}')`
        expect(seqs(yield* store.append(sid, [progress(5)]))).toEqual([6])
        const prev = new Database(file, { readonly: true })
          .prepare("SELECT prev_hash FROM events WHERE session_id = ? AND seq = 6")
          .pluck()
          .get(sid)
        expect(prev).toBe("0".repeat(64))
      })
    )
  })
})
