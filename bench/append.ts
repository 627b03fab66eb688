/**
 * Append throughput: EventStore (SQLite file, group commit) over raw better-sqlite3 batched
 * inserts of the same rows, measured side by side in one run.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import Database from "better-sqlite3"
import { Effect } from "effect"
import * as Events from "../src/domain/Events.js"
import { CallId, MessageId, PartId, SessionId } from "../src/domain/Ids.js"
import { EventStore } from "../src/store/EventStore.js"

/** A realistic turn: many small text deltas, a few tool calls with inputs and outputs, step usage. */
export const realisticEvents = (count: number): Array<Events.Event> => {
  const out: Array<Events.Event> = []
  let step = 0
  let call = 0
  const messageId = MessageId.make("01a22dcf-fd2c-7a53-9d1f-6977295bb1cd")
  while (out.length < count) {
    out.push(Events.make("step.started", { messageId, step }))
    const partId = PartId.make(`part-${step}`)
    for (let i = 0; i < 40 && out.length < count; i++) {
      out.push(Events.make("text.delta", { messageId, partId, delta: "Let me look at the file that handles it. " }))
    }
    for (let t = 0; t < 2 && out.length + 3 < count; t++) {
      const callId = CallId.make(`call_${call++}`)
      out.push(Events.make("tool.pending", { messageId, callId, tool: "read" }))
      out.push(
        Events.make("tool.invoked", {
          messageId,
          callId,
          tool: "read",
          input: { path: "src/store/Sqlite.ts", offset: 1, limit: 200 }
        })
      )
      out.push(Events.make("tool.finished", { callId, output: '  1| import * as fs from "node:fs"\n'.repeat(60) }))
    }
    out.push(
      Events.make("step.finished", {
        messageId,
        step,
        finishReason: "tool-calls",
        usage: { input: 12_000, output: 400, reasoning: 0, cacheRead: 10_000, cacheWrite: 0, cost: 0.0123 }
      })
    )
    step++
  }
  return out.slice(0, count)
}

const isLifecycle = (e: Events.Event) => e.type !== "text.delta" && e.type !== "reasoning.delta"

const now = () => performance.now()

/**
 * Time for the EventStore to commit the events the way the kernel hands them over, split over
 * `sessions` sessions driven concurrently (as a server or several terminals would):
 * - `kernel`: text deltas handed over without waiting, lifecycle events awaited until committed;
 * - `bulk`: everything handed over without waiting.
 */
export const timeStore = async (
  file: string,
  events: ReadonlyArray<Events.Event>,
  mode: "kernel" | "bulk",
  sessions = 1
) => {
  const per = Math.ceil(events.length / sessions)
  const program = Effect.gen(function* () {
    const store = yield* EventStore
    const start = now()
    yield* Effect.forEach(
      Array.from({ length: sessions }, (_, s) => s),
      (s) =>
        Effect.gen(function* () {
          const sessionId = SessionId.make(`bench-${s}`)
          for (const e of events.slice(s * per, (s + 1) * per)) {
            if (mode === "kernel" && isLifecycle(e)) yield* store.append(sessionId, [e])
            else yield* store.appendLater(sessionId, [e])
          }
        }),
      { concurrency: "unbounded", discard: true }
    )
    yield* store.flush
    const elapsed = now() - start
    let total = 0
    for (let s = 0; s < sessions; s++) total += yield* store.lastSeq(SessionId.make(`bench-${s}`))
    if (total !== events.length) throw new Error(`expected ${events.length} events, found ${total}`)
    return elapsed
  })
  return Effect.runPromise(program.pipe(Effect.provide(EventStore.layerSqlite({ filename: file }))))
}

/**
 * Time for raw better-sqlite3 to insert the same rows, prepared, in transactions: batches of
 * `batch` rows, or (`"kernel"`) one transaction per lifecycle event with the deltas before it —
 * the commit points the kernel pattern has.
 */
export const timeRaw = (file: string, events: ReadonlyArray<Events.Event>, batch: number | "kernel" = 1000) => {
  // the same schema, created by the same migration statements
  const setup = new Database(file)
  setup.pragma("journal_mode = WAL")
  setup.pragma("synchronous = NORMAL")
  setup.exec(`CREATE TABLE events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL, type TEXT NOT NULL,
    at INTEGER NOT NULL, parent_id TEXT, v INTEGER NOT NULL, payload TEXT NOT NULL, PRIMARY KEY (session_id, seq));
    CREATE UNIQUE INDEX events_id ON events (id); CREATE INDEX events_type_at ON events (type, at);`)
  const insert = setup.prepare(
    "INSERT INTO events (session_id, seq, id, type, at, parent_id, v, payload) VALUES (@session_id, @seq, @id, @type, @at, @parent_id, @v, @payload)"
  )
  // the timer starts with the events in memory, as the store's does: serialising them into rows is
  // part of writing them, whoever writes
  const start = now()
  const rows = events.map((e, i) => ({
    session_id: "bench",
    seq: i + 1,
    id: `01a22dcf-fd2c-7a53-9d1f-${String(i).padStart(12, "0")}`,
    type: e.type,
    at: 1_796_064_935_212 + i,
    parent_id: null,
    v: 1,
    payload: JSON.stringify(e.payload)
  }))
  const insertMany = setup.transaction((chunk: typeof rows) => {
    for (const r of chunk) insert.run(r)
  })
  if (batch === "kernel") {
    let from = 0
    for (let i = 0; i < rows.length; i++) {
      if (isLifecycle(events[i]!) || i === rows.length - 1) {
        insertMany(rows.slice(from, i + 1))
        from = i + 1
      }
    }
  } else {
    for (let i = 0; i < rows.length; i += batch) insertMany(rows.slice(i, i + batch))
  }
  const elapsed = now() - start
  setup.close()
  return elapsed
}

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

export interface AppendResult {
  readonly count: number
  readonly rawPerSec: number
  readonly rawKernelPerSec: number
  readonly cases: ReadonlyArray<{
    readonly name: string
    readonly perSec: number
    /** over raw batched inserts (1000 rows a transaction) */
    readonly ratio: number
    /** over raw inserts committed at the same points as the kernel pattern */
    readonly ratioSameCommits: number
  }>
}

/** Runs raw and store variants alternately (same run, same machine state) and reports medians. */
export const benchAppend = async (dir: string, count: number, rounds = 3): Promise<AppendResult> => {
  const events = realisticEvents(count)
  const variants = [
    { name: "8 sessions, kernel pattern (deltas handed over, lifecycle awaited)", mode: "kernel", sessions: 8 },
    { name: "1 session, kernel pattern (deltas handed over, lifecycle awaited)", mode: "kernel", sessions: 1 },
    { name: "1 session, everything handed over (appendLater)", mode: "bulk", sessions: 1 }
  ] as const
  let n = 0
  const file = () => path.join(dir, `run-${n++}.db`)
  // warm up both paths once
  await timeStore(file(), events.slice(0, 2000), "kernel")
  timeRaw(file(), events.slice(0, 2000))
  const raw: Array<number> = []
  const rawKernel: Array<number> = []
  const times = variants.map(() => [] as Array<number>)
  for (let r = 0; r < rounds; r++) {
    raw.push(timeRaw(file(), events))
    rawKernel.push(timeRaw(file(), events, "kernel"))
    for (let v = 0; v < variants.length; v++) {
      times[v]!.push(await timeStore(file(), events, variants[v]!.mode, variants[v]!.sessions))
    }
  }
  for (const f of fs.readdirSync(dir)) fs.rmSync(path.join(dir, f), { force: true })
  const rawMs = median(raw)
  const rawKernelMs = median(rawKernel)
  return {
    count,
    rawPerSec: count / (rawMs / 1000),
    rawKernelPerSec: count / (rawKernelMs / 1000),
    cases: variants.map((v, i) => {
      const ms = median(times[i]!)
      return {
        name: v.name,
        perSec: count / (ms / 1000),
        ratio: rawMs / ms,
        ratioSameCommits: v.mode === "kernel" ? rawKernelMs / ms : rawMs / ms
      }
    })
  }
}
