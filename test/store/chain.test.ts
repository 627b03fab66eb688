/**
 * The hash chain (docs/event-log.md "The hash chain"): the canonical bytes as documented, the same
 * hashes from the SQLite and the memory layers, what `verifySession` and `checkOnRead` find in a
 * file changed behind logbook's back, the migration that chains older rows, and an import that
 * rebuilds the same chain.
 */
import { createHash } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Chunk, Effect, Option, Stream } from "effect"
import * as Events from "../../src/domain/Events.js"
import { EventId, MessageId, SessionId } from "../../src/domain/Ids.js"
import { EventStore } from "../../src/store/EventStore.js"
import { canonicalText, eventHash, genesisHash } from "../../src/store/internal/chain.js"
import { exportSession, importSession } from "../../src/store/SessionFile.js"
import * as Snapshots from "../../src/store/Snapshots.js"
import { LATEST_MIGRATION } from "../../src/store/Sqlite.js"
import { checkOnRead, problemText, verifySession } from "../../src/store/Verify.js"
import { downgradeToSchema3, schemaOf } from "../support/oldSchema.js"
import { tempDb } from "../support/tmp.js"

const sid = SessionId.make("0195a0ba-0000-7000-8000-00000000c4a1")
const sha = (text: string) => createHash("sha256").update(text).digest("hex")

/** A small session with fixed ids and times, so every layer stores the same rows. */
const session = (n: number): Array<Events.NewEvent> => [
  { ...Events.make("session.created", { title: "chained" }), id: EventId.make("e-1"), at: 1_000 },
  ...Array.from({ length: n - 1 }, (_, i) => ({
    ...Events.make("user.message", { messageId: MessageId.make(`m${i}`), text: `message ${i}`, mode: "prompt" }),
    id: EventId.make(`e-${i + 2}`),
    at: 1_000 + i + 1
  }))
]

type Context = typeof EventStore.Service
const rowsOf = (store: Context) =>
  Effect.map(Stream.runCollect(store.readChain(sid)), (c) =>
    Chunk.toArray(c).map((r) => ({ seq: r.seq, prevHash: r.prevHash, hash: r.hash }))
  )

const withFile = <A, E>(file: string, effect: Effect.Effect<A, E, EventStore>) =>
  Effect.provide(effect, EventStore.layerSqlite({ filename: file }))

const sql = <A>(file: string, f: (db: Database.Database) => A): A => {
  const db = new Database(file)
  try {
    return f(db)
  } finally {
    db.close()
  }
}

const messages = (p: ReadonlyArray<{ readonly _tag: string }>) => p.map((x) => problemText(x as never))

describe("the hash chain", () => {
  it("hashes the documented canonical bytes, chained from the session's genesis value", () => {
    expect(genesisHash(sid)).toBe(sha(`logbook-genesis-v1\n${sid}\n`))
    const row = {
      sessionId: sid,
      seq: 7,
      id: "e-7",
      type: "text.delta",
      at: 1234,
      parentId: null,
      v: 1,
      json: '{"a":1}'
    }
    const prev = "ab".repeat(32)
    const text = `logbook-event-v1\n${prev}\n${sid}\n7\ne-7\ntext.delta\n1234\n\n1\n{"a":1}\n`
    expect(canonicalText(prev, row)).toBe(text)
    expect(eventHash(prev, row)).toBe(sha(text))
    expect(eventHash(prev, { ...row, parentId: "e-6" })).toBe(sha(text.replace("1234\n\n", "1234\ne-6\n")))
  })

  it.effect("every row is chained to the one before it, the same in SQLite and in memory; the session verifies", () =>
    Effect.gen(function* () {
      const file = tempDb()
      const program = Effect.gen(function* () {
        const store = yield* EventStore
        const events = session(30)
        // in several appends, as the kernel writes
        yield* store.append(sid, events.slice(0, 10))
        yield* store.append(sid, events.slice(10, 11))
        yield* store.appendLater(sid, events.slice(11))
        yield* store.flush
        yield* Snapshots.takeSnapshot(yield* Snapshots.foldAll(sid))
        return { rows: yield* rowsOf(store), verification: yield* verifySession(sid, { snapshots: true }) }
      })
      const sqlite = yield* withFile(file, program)
      const memory = yield* Effect.provide(program, EventStore.layerMemory)
      expect(sqlite.rows).toEqual(memory.rows)
      expect(sqlite.rows[0]!.prevHash).toBe(genesisHash(sid))
      for (let i = 1; i < sqlite.rows.length; i++) expect(sqlite.rows[i]!.prevHash).toBe(sqlite.rows[i - 1]!.hash)
      for (const v of [sqlite.verification, memory.verification]) {
        expect(v).toMatchObject({ events: 30, lastSeq: 30, snapshots: 1, problems: [] })
        expect(Option.isNone(v.mark)).toBe(true)
      }
    })
  )

  it.effect("verify names what was changed behind logbook's back; the read check sees the seqs and the tip", () =>
    Effect.gen(function* () {
      const file = tempDb()
      yield* withFile(
        file,
        Effect.gen(function* () {
          const store = yield* EventStore
          yield* store.append(sid, session(20))
          yield* Snapshots.takeSnapshot(yield* Snapshots.foldAll(sid, 12))
        })
      )
      const check = () => withFile(file, Effect.all([verifySession(sid, { snapshots: true }), checkOnRead(sid)]))
      sql(file, (db) => {
        db.prepare("UPDATE events SET payload = json_set(payload, '$.text', 'edited') WHERE seq = 7").run()
        db.prepare("DELETE FROM events WHERE seq = 3").run()
        db.prepare("UPDATE events SET hash = NULL WHERE seq = 15").run()
      })
      const [full, quick] = yield* check()
      expect(messages(full.problems)).toEqual([
        "seq 3 missing",
        "content changed at seq 7 (its hash does not match it)",
        expect.stringMatching(/^snapshot at seq 12 disagrees with events \(/),
        "seq 15 has no hash (written around logbook)"
      ])
      // cheap: the gap, not the row changed in the middle
      expect(messages(quick)).toEqual(["seq 3 missing"])

      // a forger who re-hashes one row breaks the link to the next; rows past the index; a cut tail
      sql(file, (db) => {
        db.prepare("UPDATE events SET hash = ? WHERE seq = 10").run("f".repeat(64))
        db.prepare("DELETE FROM events WHERE seq = 20").run()
      })
      const [full2, quick2] = yield* check()
      expect(messages(full2.problems)).toContain("chain broken between 10 and 11")
      expect(messages(full2.problems)).toContain("content changed at seq 10 (its hash does not match it)")
      expect(messages(full2.problems)).toContain(
        "seq 20 missing (the log ends before the last seq the session index holds)"
      )
      expect(messages(quick2)).toEqual([
        "seq 3 missing",
        "seq 20 missing (the log ends before the last seq the session index holds)"
      ])
      sql(file, (db) =>
        db
          .prepare(
            "INSERT INTO events (session_id, seq, id, type, at, parent_id, v, payload) VALUES (?, 21, 'x', 'session.titled', 1, NULL, 1, '{\"title\":\"x\"}')"
          )
          .run(sid)
      )
      const [, quick3] = yield* check()
      expect(messages(quick3)).toContain("seq 21 past the last seq the session index holds (written around logbook)")
      expect(messages(quick3)).toContain("seq 21 has no hash (written around logbook)")
    })
  )

  it.effect("the migration chains the rows of an older database, marks them, and appends chain on from them", () =>
    Effect.gen(function* () {
      const file = tempDb()
      const before = yield* withFile(
        file,
        Effect.gen(function* () {
          const store = yield* EventStore
          yield* store.append(sid, session(12))
          return yield* rowsOf(store)
        })
      )
      downgradeToSchema3(file)
      expect(schemaOf(file)).toBe(3)
      const after = yield* withFile(
        file,
        Effect.gen(function* () {
          const store = yield* EventStore
          const migrated = yield* rowsOf(store)
          yield* store.append(sid, [Events.make("session.titled", { title: "later" })])
          return { migrated, verification: yield* verifySession(sid), rows: yield* rowsOf(store) }
        })
      )
      expect(schemaOf(file)).toBe(LATEST_MIGRATION)
      // the same chain as the append path computes: the canonical bytes are the same
      expect(after.migrated).toEqual(before)
      expect(after.rows[12]!.prevHash).toBe(before[11]!.hash)
      expect(after.verification.problems).toEqual([])
      expect(Option.getOrThrow(after.verification.mark)).toMatchObject({ reason: "migrated", throughSeq: 12 })
    })
  )

  it.effect("an imported session gets the chain it had (the same hashes), marked as chained at the import", () =>
    Effect.gen(function* () {
      const source = tempDb()
      const { lines, rows } = yield* withFile(
        source,
        Effect.gen(function* () {
          const store = yield* EventStore
          yield* store.append(sid, session(8))
          const lines = Chunk.toArray(yield* Stream.runCollect(exportSession(sid))).join("")
          return { lines, rows: yield* rowsOf(store) }
        })
      )
      const imported = yield* withFile(
        tempDb(),
        Effect.gen(function* () {
          const store = yield* EventStore
          yield* importSession(Stream.make(new TextEncoder().encode(lines)))
          return { rows: yield* rowsOf(store), verification: yield* verifySession(sid) }
        })
      )
      expect(imported.rows).toEqual(rows)
      expect(imported.verification.problems).toEqual([])
      expect(Option.getOrThrow(imported.verification.mark)).toMatchObject({ reason: "imported", throughSeq: 8 })
    })
  )
})
