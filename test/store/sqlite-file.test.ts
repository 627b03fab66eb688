/**
 * What only the SQLite layer has: a real file (mode, persistence), protection of files that are
 * not ours, and several OS processes writing one database.
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Chunk, Effect, Either, Exit, Fiber, Option, Stream } from "effect"
import * as Events from "../../src/domain/Events.js"
import { CallId, SessionId } from "../../src/domain/Ids.js"
import { EventStore } from "../../src/store/EventStore.js"
import { LATEST_MIGRATION } from "../../src/store/Sqlite.js"
import { verifySession } from "../../src/store/Verify.js"
import { choicesFromSeed, simulate } from "../support/arbitraries.js"
import { downgradeToSchema1, SCHEMA_1_SESSION_COLUMNS, schemaOf, sessionColumns } from "../support/oldSchema.js"
import { exitCode, spawnTs, waitForLine } from "../support/processes.js"
import { tempDb, tempDir } from "../support/tmp.js"

const sid = SessionId.make("s1")
const progress = (n: number) => Events.make("tool.progress", { callId: CallId.make("c1"), output: `line ${n}` })
const collect = <A, E, R>(stream: Stream.Stream<A, E, R>) => Effect.map(Stream.runCollect(stream), Chunk.toArray)

const fingerprint = (file: string) => {
  const stat = fs.statSync(file)
  return { sha: createHash("sha256").update(fs.readFileSync(file)).digest("hex"), mtime: stat.mtimeMs, size: stat.size }
}

const openError = (
  file: string,
  options: { readonly create?: boolean; readonly readonly?: boolean; readonly busyTimeoutMs?: number } = {}
) =>
  Effect.flatMap(
    Effect.exit(Effect.provide(EventStore, EventStore.layerSqlite({ filename: file, ...options }))),
    (exit) =>
      Exit.isFailure(exit) && exit.cause._tag === "Fail"
        ? Effect.succeed(exit.cause.error)
        : Effect.die(new Error(`expected a DatabaseError, got ${String(exit)}`))
  )

describe("EventStore SQLite file", () => {
  it.effect("creates the file (and its directory) with mode 0600, and keeps what was committed", () =>
    Effect.gen(function* () {
      const file = path.join(tempDir(), "nested", "dir", "logbook.db")
      const appended = yield* Effect.scoped(
        Effect.gen(function* () {
          const store = yield* EventStore
          return yield* store.append(sid, [Events.make("session.created", { title: "kept" }), progress(1)])
        }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file })))
      )
      expect(fs.statSync(file).mode & 0o777).toBe(0o600)
      const reopened = yield* Effect.gen(function* () {
        const store = yield* EventStore
        yield* store.append(sid, [progress(2)])
        return yield* collect(store.read(sid))
      }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file })))
      expect(reopened.slice(0, 2)).toEqual(appended)
      expect(reopened.map((e) => e.seq)).toEqual([1, 2, 3])
    })
  )

  it.effect("a snapshot changed on disk is no longer intact", () =>
    Effect.gen(function* () {
      const file = tempDb()
      const layer = EventStore.layerSqlite({ filename: file })
      yield* Effect.gen(function* () {
        const store = yield* EventStore
        yield* store.saveSnapshot({ sessionId: sid, seq: 7, version: 1, at: 0, state: { title: "as saved" } })
      }).pipe(Effect.provide(layer))
      const db = new Database(file)
      db.prepare("UPDATE snapshots SET state = ?").run(JSON.stringify({ title: "edited" }))
      db.close()
      const loaded = yield* Effect.gen(function* () {
        const store = yield* EventStore
        return Option.getOrThrow(yield* store.loadSnapshot(sid, { version: 1 }))
      }).pipe(Effect.provide(layer))
      expect(loaded).toMatchObject({ seq: 7, state: { title: "edited" }, intact: false })
    })
  )

  it.effect("uses WAL and synchronous=NORMAL", () =>
    Effect.gen(function* () {
      const file = tempDb()
      yield* Effect.provide(EventStore, EventStore.layerSqlite({ filename: file }))
      const db = new Database(file, { readonly: true })
      expect(db.pragma("journal_mode", { simple: true })).toBe("wal")
      expect(db.pragma("application_id", { simple: true })).toBe(0x4c4f4742)
      db.close()
    })
  )

  it.effect("does not create a missing database when asked not to", () =>
    Effect.gen(function* () {
      const file = path.join(tempDir(), "absent.db")
      const error = yield* openError(file, { create: false })
      expect(error).toMatchObject({ _tag: "DatabaseError", reason: "missing", file })
      expect(fs.existsSync(file)).toBe(false)
    })
  )

  it.effect("an empty file is not a database to read: with create=false it is reported and left alone", () =>
    Effect.gen(function* () {
      const file = path.join(tempDir(), "empty.db")
      fs.writeFileSync(file, "")
      const error = yield* openError(file, { create: false })
      expect(error).toMatchObject({ _tag: "DatabaseError", reason: "missing", file })
      expect(fs.statSync(file).size).toBe(0)
      expect(fs.readdirSync(path.dirname(file))).toEqual(["empty.db"])
    })
  )

  it.effect("refuses a file that is not SQLite, naming it, without modifying it", () =>
    Effect.gen(function* () {
      const file = path.join(tempDir(), "notes.txt")
      fs.writeFileSync(file, "these are my notes, not a database\n".repeat(100))
      const before = fingerprint(file)
      const error = yield* openError(file)
      expect(error).toMatchObject({ _tag: "DatabaseError", reason: "not-logbook", file })
      expect(error.message).toContain(file)
      expect(fingerprint(file)).toEqual(before)
      expect(fs.readdirSync(path.dirname(file))).toEqual(["notes.txt"])
    })
  )

  it.effect("refuses another application's SQLite database without modifying it", () =>
    Effect.gen(function* () {
      const file = path.join(tempDir(), "other.db")
      const db = new Database(file)
      db.exec("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers (name) VALUES ('x')")
      db.close()
      const before = fingerprint(file)
      const error = yield* openError(file)
      expect(error).toMatchObject({ _tag: "DatabaseError", reason: "not-logbook", file })
      expect(error.message).toContain("not a logbook database")
      expect(fingerprint(file)).toEqual(before)
    })
  )

  it.effect("refuses a damaged database without modifying it", () =>
    Effect.gen(function* () {
      const file = tempDb()
      yield* Effect.gen(function* () {
        const store = yield* EventStore
        yield* store.append(
          sid,
          Array.from({ length: 200 }, (_, i) => progress(i))
        )
      }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file })))
      // keep the header, destroy the pages after it
      const bytes = fs.readFileSync(file)
      for (let i = 100; i < bytes.length; i++) bytes[i] = (i * 7919) & 0xff
      fs.writeFileSync(file, bytes)
      const before = fingerprint(file)
      const filesBefore = fs.readdirSync(path.dirname(file)).sort()
      const error = yield* openError(file)
      expect(error).toMatchObject({ _tag: "DatabaseError", reason: "corrupt", file })
      expect(error.message).toContain(file)
      expect(fingerprint(file)).toEqual(before)
      // the read-only check leaves no -wal / -shm files behind
      expect(fs.readdirSync(path.dirname(file)).sort()).toEqual(filesBefore)
    })
  )

  it.effect(
    "a file SQLite refuses as the client opens it (another connection's lock blocks the switch to WAL) is a DatabaseError, not a crash, and keeps its events",
    () =>
      Effect.gen(function* () {
        const file = tempDb()
        yield* Effect.gen(function* () {
          const store = yield* EventStore
          yield* store.append(sid, [progress(1), progress(2)])
        }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file })))
        // another program took the file back to a rollback journal and holds a read transaction:
        // the check before opening reads it fine, the client's `journal_mode = WAL` cannot have its lock
        const other = new Database(file)
        try {
          other.pragma("journal_mode = DELETE")
          other.exec("BEGIN")
          other.prepare("SELECT count(*) FROM events").get()
          const error = yield* openError(file)
          expect(error).toMatchObject({ _tag: "DatabaseError", reason: "unreadable", file })
          expect(error.message).toBe(`cannot open ${file}: database is locked`)
          other.exec("COMMIT")
        } finally {
          other.close()
        }
        // nothing was lost: once the lock is gone the file opens and holds both events
        const seqs = yield* Effect.gen(function* () {
          const store = yield* EventStore
          return (yield* collect(store.read(sid))).map((e) => e.seq)
        }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file })))
        expect(seqs).toEqual([1, 2])
      }),
    20_000
  )

  it.effect("refuses a database written by a newer logbook without modifying it", () =>
    Effect.gen(function* () {
      const file = tempDb()
      yield* Effect.provide(EventStore, EventStore.layerSqlite({ filename: file }))
      const db = new Database(file)
      db.prepare("INSERT INTO logbook_migrations (migration_id, name) VALUES (999, 'from_the_future')").run()
      db.pragma("wal_checkpoint(TRUNCATE)")
      db.close()
      const before = fingerprint(file)
      const error = yield* openError(file)
      expect(error).toMatchObject({ _tag: "DatabaseError", reason: "newer-schema", file })
      expect(error.message).toContain("newer logbook")
      expect(fingerprint(file)).toEqual(before)
    })
  )

  it.effect("an SQLite file with no tables but another program's mark is not taken over", () =>
    Effect.gen(function* () {
      const file = path.join(tempDir(), "marked.db")
      const db = new Database(file)
      db.pragma("user_version = 42")
      db.close()
      const before = fingerprint(file)
      const error = yield* openError(file)
      expect(error).toMatchObject({ _tag: "DatabaseError", reason: "not-logbook", file })
      expect(fingerprint(file)).toEqual(before)
    })
  )

  it.effect("read-only: reads, never writes, never migrates, and an unset-up file is reported, not set up", () =>
    Effect.gen(function* () {
      const file = tempDb()
      yield* Effect.gen(function* () {
        const store = yield* EventStore
        yield* store.append(sid, [Events.make("session.created", { title: "t" }), progress(1)])
      }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file })))
      const before = fingerprint(file)
      const result = yield* Effect.gen(function* () {
        const store = yield* EventStore
        const events = yield* collect(store.read(sid))
        const write = yield* Effect.either(store.append(sid, [progress(2)]))
        const blob = yield* Effect.either(store.putBlob("x"))
        return { events, write, blob }
      }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file, readonly: true })))
      expect(result.events.map((e) => e.seq)).toEqual([1, 2])
      expect(Either.isLeft(result.write) && result.write.left.message).toContain("read-only")
      expect(Either.isLeft(result.blob)).toBe(true)
      expect(fingerprint(file)).toEqual(before)

      const blank = path.join(tempDir(), "blank.db")
      new Database(blank).close()
      const error = yield* openError(blank, { readonly: true })
      expect(error).toMatchObject({ _tag: "DatabaseError", reason: "missing", file: blank })
    })
  )

  it.effect("read-only readers are not blocked by a writer that holds the lock", () =>
    Effect.gen(function* () {
      const file = tempDb()
      yield* Effect.gen(function* () {
        const store = yield* EventStore
        yield* store.append(sid, [Events.make("session.created", { title: "t" })])
      }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file })))
      const holder = new Database(file)
      holder.exec("BEGIN IMMEDIATE")
      holder.prepare("DELETE FROM sessions").run()
      try {
        const listed = yield* Effect.gen(function* () {
          const store = yield* EventStore
          return yield* store.sessions()
        }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file, readonly: true, busyTimeoutMs: 60_000 })))
        // the reader saw the committed state, without waiting for the writer
        expect(listed.map((s) => s.id)).toEqual([sid])
      } finally {
        holder.exec("ROLLBACK")
        holder.close()
      }
    })
  )

  it.effect("a writer that cannot get the lock in time fails with a DatabaseError, not a crash", () =>
    Effect.gen(function* () {
      const file = tempDb()
      yield* Effect.provide(EventStore, EventStore.layerSqlite({ filename: file }))
      const holder = new Database(file)
      holder.exec("BEGIN IMMEDIATE")
      try {
        const error = yield* openError(file, { busyTimeoutMs: 100 })
        expect(error).toMatchObject({ _tag: "DatabaseError", file })
        expect(error.message).toMatch(/locked|busy/)
      } finally {
        holder.exec("ROLLBACK")
        holder.close()
      }
    })
  )

  it.effect("an old-schema database is read (read-only) from an upgraded copy, and upgraded by a writable open", () =>
    Effect.gen(function* () {
      const file = tempDb()
      // sessions of every kind: open turns, ended ones, interrupted, crashed, costs (some unpriced), models
      const expected = yield* Effect.gen(function* () {
        const store = yield* EventStore
        for (let i = 0; i < 12; i++) {
          yield* store.append(SessionId.make(`s${i}`), simulate(choicesFromSeed(i + 1, 40 + i * 10)))
        }
        yield* store.append(SessionId.make("s3"), [Events.make("session.deleted", {})])
        return yield* store.sessions({ includeDeleted: true })
      }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file })))
      expect(new Set(expected.map((s) => s.model))).toContain("test/model")
      expect(expected.some((s) => s.turnOpen) && expected.some((s) => s.lastTurn !== null)).toBe(true)
      expect(expected.some((s) => s.cost > 0)).toBe(true)
      downgradeToSchema1(file)
      expect(sessionColumns(file)).toEqual(SCHEMA_1_SESSION_COLUMNS)
      expect(schemaOf(file)).toBe(1)
      const before = fingerprint(file)

      const read = yield* Effect.gen(function* () {
        const store = yield* EventStore
        return yield* store.sessions({ includeDeleted: true })
      }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file, readonly: true })))
      expect(read).toEqual(expected)
      // the file itself was not upgraded
      expect(fingerprint(file)).toEqual(before)
      expect(schemaOf(file)).toBe(1)

      const upgraded = yield* Effect.gen(function* () {
        const store = yield* EventStore
        return yield* store.sessions({ includeDeleted: true })
      }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file })))
      expect(upgraded).toEqual(expected)
      expect(schemaOf(file)).toBe(LATEST_MIGRATION)
      expect(sessionColumns(file)).toEqual([
        ...SCHEMA_1_SESSION_COLUMNS,
        "model",
        "turn_open",
        "last_turn_reason",
        "last_turn_interrupted",
        "cost",
        "cost_known",
        "stat_step_at",
        "stat_step_first_ms",
        "stat_turn_seq"
      ])
    })
  )

  it.effect("refuses a directory", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      const error = yield* openError(dir)
      expect(error).toMatchObject({ _tag: "DatabaseError", reason: "unreadable", file: dir })
    })
  )

  it.effect("an event of a type this version does not know is a typed decode error, not a crash", () =>
    Effect.gen(function* () {
      const file = tempDb()
      yield* Effect.gen(function* () {
        const store = yield* EventStore
        yield* store.append(sid, [progress(1)])
      }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file })))
      const db = new Database(file)
      db.prepare(
        "INSERT INTO events (session_id, seq, id, type, at, parent_id, v, payload) VALUES ('s1', 2, 'x', 'future.event', 0, NULL, 1, '{}')"
      ).run()
      db.prepare(
        "INSERT INTO events (session_id, seq, id, type, at, parent_id, v, payload) VALUES ('s1', 3, 'y', 'tool.progress', 0, NULL, 1, '{\"callId\":5}')"
      ).run()
      db.close()
      const result = yield* Effect.gen(function* () {
        const store = yield* EventStore
        const unknownType = yield* Effect.either(collect(store.read(sid)))
        const malformed = yield* Effect.either(collect(store.read(sid, { from: 3 })))
        const raw = yield* collect(store.readRaw(sid))
        return { unknownType, malformed, raw }
      }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file })))
      expect(Either.isLeft(result.unknownType)).toBe(true)
      if (Either.isLeft(result.unknownType)) {
        expect(result.unknownType.left).toMatchObject({ _tag: "EventDecodeError", seq: 2, type: "future.event" })
      }
      expect(Either.isLeft(result.malformed) && result.malformed.left._tag === "EventDecodeError").toBe(true)
      expect(result.raw.map((r) => r.type)).toEqual(["tool.progress", "future.event", "tool.progress"])
    })
  )

  it.live(
    "two OS processes appending to one session produce a gapless seq with nothing lost",
    () =>
      Effect.gen(function* () {
        const file = tempDb()
        // the first open creates the schema; the workers then race on the same file
        yield* Effect.provide(EventStore, EventStore.layerSqlite({ filename: file }))
        const count = 300
        const workers = ["alpha", "beta", "gamma"].map((label) =>
          spawnTs("test/support/append-worker.ts", [file, "s1", label, String(count), String(count / 2)])
        )
        yield* Effect.promise(() => Promise.all(workers.map((w) => waitForLine(w, "ready"))))
        // two rounds: each writes half, all wait, each writes the rest — so the three processes'
        // events interleave whatever the scheduler does (and within each round they race freely)
        const paused = workers.map((w) => waitForLine(w, "paused"))
        for (const w of workers) w.stdin!.write("go\n")
        yield* Effect.promise(() => Promise.all(paused))
        const done = workers.map((w) => waitForLine(w, "done"))
        for (const w of workers) w.stdin!.end("go\n")
        yield* Effect.promise(() => Promise.all(done))
        const codes = yield* Effect.promise(() => Promise.all(workers.map(exitCode)))
        expect(codes).toEqual([0, 0, 0])
        const { all, verification } = yield* Effect.gen(function* () {
          const store = yield* EventStore
          return { all: yield* collect(store.read(sid)), verification: yield* verifySession(sid) }
        }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file })))
        expect(all.map((e) => e.seq)).toEqual(Array.from({ length: 3 * count }, (_, i) => i + 1))
        // each process chained its rows to the row another process wrote just before (read in its transaction)
        expect(verification.problems).toEqual([])
        for (const label of ["alpha", "beta", "gamma"]) {
          const mine = all
            .map((e) => (e.payload as { output: string }).output)
            .filter((o) => o.startsWith(`${label}:`))
            .map((o) => Number(o.split(":")[1]))
          // everything arrived, once, in the order each process wrote it
          expect(mine).toEqual(Array.from({ length: count }, (_, i) => i))
        }
        // the processes interleaved: each round holds all three (the pause guarantees it)
        const labels = all.map((e) => (e.payload as { output: string }).output.split(":")[0])
        const rounds = [labels.slice(0, (3 * count) / 2), labels.slice((3 * count) / 2)]
        for (const round of rounds) {
          const counts = { alpha: 0, beta: 0, gamma: 0 } as Record<string, number>
          for (const label of round) counts[label!]!++
          expect(counts).toEqual({ alpha: count / 2, beta: count / 2, gamma: count / 2 })
        }
      }),
    120_000
  )

  it.live(
    "follow sees events that another process appends",
    () =>
      Effect.gen(function* () {
        const file = tempDb()
        const worker = spawnTs("test/support/append-worker.ts", [file, "s1", "remote", "50"])
        yield* Effect.promise(() => waitForLine(worker, "ready"))
        const seen = yield* Effect.gen(function* () {
          const store = yield* EventStore
          const fiber = yield* Effect.fork(collect(Stream.take(store.follow(sid), 50)))
          worker.stdin!.end("go\n")
          return yield* Fiber.join(fiber).pipe(Effect.timeout("60 seconds"))
        }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file, followPollMs: 20 })))
        expect(seen.map((e) => e.seq)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1))
        expect(yield* Effect.promise(() => exitCode(worker))).toBe(0)
      }),
    120_000
  )
})
