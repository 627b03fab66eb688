/**
 * Stats: `Stats.stats` (SQL over the stats index the store keeps on append) over folding every
 * payload of the same SQLite file (the fastest fold there is: raw better-sqlite3 rows, `JSON.parse`
 * of each payload, `foldIndex` + `foldFigures` — what `stats` would cost without the index),
 * measured side by side in one run on a store of simulated sessions. Both must give the same
 * figures, or the benchmark fails.
 */
import Database from "better-sqlite3"
import { Effect } from "effect"
import type { NewEvent } from "../src/domain/Events.js"
import { SessionId } from "../src/domain/Ids.js"
import { EventStore } from "../src/store/EventStore.js"
import { layerClient } from "../src/store/Sqlite.js"
import { type Figures, foldFigures, foldIndex, type StatsGrouping, stats } from "../src/store/Stats.js"
import { choicesFromSeed, simulate } from "../test/support/arbitraries.js"
import { fileSize, gc, median, now } from "./util.js"

export interface StatsResult {
  readonly events: number
  readonly sessions: number
  readonly bytes: number
  readonly buildMs: number
  readonly rounds: number
  /** medians, ms */
  readonly summaryMs: number
  readonly byModelMs: number
  readonly byDayMs: number
  readonly foldMs: number
  /** what the figures say (from the SQL; the fold agreed) */
  readonly summary: Figures
}

const DAY = 86_400_000
const START = Date.UTC(2026, 0, 1)

/** `events` events over sessions of ~5,000 each, spread over 30 days, written the way a run appends them. */
const build = (file: string, events: number) =>
  Effect.gen(function* () {
    const store = yield* EventStore
    const start = now()
    let written = 0
    let sessions = 0
    while (written < events) {
      const count = Math.min(5000, events - written)
      const list = simulate(choicesFromSeed(sessions + 1, count), { deltaWeight: 40 }).slice(0, count)
      const at0 = START + (sessions % 30) * DAY + sessions * 1000
      const timed: Array<NewEvent> = list.map((e, i) => ({ ...e, at: at0 + i * 50 }))
      const id = SessionId.make(`bench-${sessions}`)
      for (let i = 0; i < timed.length; i += 500) yield* store.append(id, timed.slice(i, i + 500))
      written += timed.length
      sessions++
    }
    return { sessions, events: written, buildMs: now() - start }
  }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file })))

/** Every payload parsed and folded: the stats without an index. */
const fold = (file: string, by: StatsGrouping | "all") => {
  const db = new Database(file, { readonly: true })
  try {
    const rows = db
      .prepare("SELECT session_id, seq, id, type, at, parent_id, v, payload FROM events ORDER BY session_id, seq")
      .iterate() as Iterable<{
      session_id: string
      seq: number
      id: string
      type: string
      at: number
      parent_id: string | null
      v: number
      payload: string
    }>
    function* envelopes() {
      for (const r of rows) {
        yield {
          id: r.id as never,
          sessionId: r.session_id as never,
          seq: r.seq,
          type: r.type,
          at: r.at,
          parentId: r.parent_id as never,
          v: r.v,
          payload: JSON.parse(r.payload) as unknown
        }
      }
    }
    return foldFigures(foldIndex(envelopes()), {}, by)
  } finally {
    db.close()
  }
}

const rounded = (f: Figures) => JSON.stringify({ ...f, cost: Math.round(f.cost * 1e6) / 1e6 })

export const benchStats = async (file: string, events: number, rounds: number): Promise<StatsResult> => {
  const built = await Effect.runPromise(build(file, events))
  const client = layerClient({ filename: file, readonly: true })
  const timeSql = (by?: StatsGrouping) =>
    Effect.runPromise(
      Effect.gen(function* () {
        gc()
        const start = now()
        const report = yield* stats(by === undefined ? {} : { by })
        return [now() - start, report] as const
      }).pipe(Effect.provide(client))
    )
  const summaryTimes: Array<number> = []
  const modelTimes: Array<number> = []
  const dayTimes: Array<number> = []
  const foldTimes: Array<number> = []
  let summary: Figures | undefined
  for (let round = 0; round < rounds + 1; round++) {
    const [summaryMs, report] = await timeSql()
    const [modelMs, byModel] = await timeSql("model")
    const [dayMs] = await timeSql("day")
    gc()
    const start = now()
    const folded = fold(file, "all")
    const foldMs = now() - start
    if (rounded(folded.get(null)!) !== rounded(report.summary)) {
      throw new Error(
        `stats and the fold of every payload differ: ${rounded(report.summary)} !== ${rounded(folded.get(null)!)}`
      )
    }
    if (round === 0) {
      // the first round warms up; it also checks a grouping against the fold
      const foldedByModel = fold(file, "model")
      for (const g of byModel.groups) {
        if (rounded(g.figures) !== rounded(foldedByModel.get(g.key)!)) {
          throw new Error(`stats --by model and the fold differ for ${g.key}`)
        }
      }
      continue
    }
    summary = report.summary
    summaryTimes.push(summaryMs)
    modelTimes.push(modelMs)
    dayTimes.push(dayMs)
    foldTimes.push(foldMs)
  }
  return {
    events: built.events,
    sessions: built.sessions,
    bytes: fileSize(file),
    buildMs: built.buildMs,
    rounds,
    summaryMs: median(summaryTimes),
    byModelMs: median(modelTimes),
    byDayMs: median(dayTimes),
    foldMs: median(foldTimes),
    summary: summary!
  }
}
