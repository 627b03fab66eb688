/**
 * The stats index and its SQL (`Stats.ts`) against real SQLite files: exact figures of a
 * hand-written log; the SQL report equals the fold of every payload (`foldIndex`/`foldFigures`)
 * on simulated sessions, whatever the grouping and filter; a database of the previous schema gets
 * the same stats after migration `3_stats` backfilled it.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Stream } from "effect"
import * as Events from "../../src/domain/Events.js"
import { CallId, MessageId, PartId, SessionId, TurnId } from "../../src/domain/Ids.js"
import { EventStore } from "../../src/store/EventStore.js"
import { LATEST_MIGRATION, layerClient } from "../../src/store/Sqlite.js"
import { type Figures, foldFigures, foldIndex, type StatsOptions, stats } from "../../src/store/Stats.js"
import { choicesFromSeed, simulate } from "../support/arbitraries.js"
import { downgradeToSchema2, downgradeToSchema4, schemaOf } from "../support/oldSchema.js"
import { tempDb } from "../support/tmp.js"

const T0 = Date.UTC(2026, 0, 10, 12, 0, 0)
const usage = (input: number, output: number, cost: number, costKnown = true) => ({
  input,
  output,
  reasoning: 1,
  cacheRead: 2,
  cacheWrite: 3,
  cost,
  ...(costKnown ? {} : { costKnown: false })
})

/** Events with explicit times: `[offset ms from T0, event]`. */
const timed = (list: ReadonlyArray<readonly [number, Events.Event]>): Array<Events.NewEvent> =>
  list.map(([offset, event]) => ({ ...event, at: T0 + offset }))

const m1 = MessageId.make("m1")
const m2 = MessageId.make("m2")
const part = PartId.make("p1")

/** A finished turn with a retried step, a failing and a timed-out tool; then a crashed turn. */
const sessionA = timed([
  [0, Events.make("session.created", { title: "a", cwd: "/w/a", model: "prov/alpha" })],
  [10, Events.make("turn.started", { turnId: TurnId.make("t1"), messageIds: [] })],
  [20, Events.make("assistant.started", { messageId: m1, model: "prov/alpha" })],
  [100, Events.make("step.started", { messageId: m1, step: 0 })],
  [
    400,
    Events.make("step.finished", {
      messageId: m1,
      step: 0,
      finishReason: "error",
      usage: usage(0, 0, 0),
      aborted: true
    })
  ],
  [
    410,
    Events.make("model.retry", { attempt: 1, delayMs: 5, nextAt: T0 + 415, message: "500 internal error", status: 500 })
  ],
  [500, Events.make("step.started", { messageId: m1, step: 1 })],
  [650, Events.make("text.delta", { messageId: m1, partId: part, delta: "hi" })],
  [660, Events.make("tool.pending", { messageId: m1, callId: CallId.make("c1"), tool: "bash" })],
  [700, Events.make("tool.invoked", { messageId: m1, callId: CallId.make("c1"), tool: "bash", input: {} })],
  [710, Events.make("tool.invoked", { messageId: m1, callId: CallId.make("c2"), tool: "read", input: {} })],
  [
    800,
    Events.make("step.finished", {
      messageId: m1,
      step: 1,
      finishReason: "tool-calls",
      usage: usage(100, 20, 0.5),
      promptVersion: "pv1"
    })
  ],
  [1700, Events.make("tool.failed", { callId: CallId.make("c1"), error: "timed out after 1s\nmore", timedOut: true })],
  [910, Events.make("tool.failed", { callId: CallId.make("c2"), error: "no such file: x" })],
  [2000, Events.make("step.started", { messageId: m1, step: 2 })],
  [2030, Events.make("tool.invoked", { messageId: m1, callId: CallId.make("c3"), tool: "read", input: {} })],
  [2040, Events.make("tool.finished", { callId: CallId.make("c3"), output: "ok" })],
  [
    2100,
    Events.make("step.finished", {
      messageId: m1,
      step: 2,
      finishReason: "stop",
      usage: usage(200, 30, 0.25, false),
      promptVersion: "pv1"
    })
  ],
  [2200, Events.make("turn.finished", { turnId: TurnId.make("t1"), reason: "stop" })],
  // the next day (UTC): a turn cut by a crash, swept much later
  [86_400_000, Events.make("turn.started", { turnId: TurnId.make("t2"), messageIds: [] })],
  [86_400_010, Events.make("assistant.started", { messageId: m2, model: "prov/beta" })],
  [86_400_100, Events.make("step.started", { messageId: m2, step: 0 })],
  [86_400_160, Events.make("reasoning.delta", { messageId: m2, partId: part, delta: "…" })],
  [86_400_170, Events.make("tool.invoked", { messageId: m2, callId: CallId.make("c4"), tool: "bash", input: {} })],
  [
    86_400_180,
    Events.make("step.finished", {
      messageId: m2,
      step: 0,
      finishReason: "tool-calls",
      usage: usage(10, 5, 0.125),
      promptVersion: "pv2"
    })
  ],
  [
    99_000_000,
    Events.make("tool.failed", { callId: CallId.make("c4"), error: "interrupted", interrupted: true, reason: "crash" })
  ],
  [99_000_001, Events.make("turn.interrupted", { turnId: TurnId.make("t2"), reason: "crash" })]
])

/** Another workspace: a turn the user interrupted. And a deleted session, never counted. */
const sessionB = timed([
  [5, Events.make("session.created", { cwd: "/w/b", model: "prov/alpha" })],
  [30, Events.make("turn.started", { turnId: TurnId.make("t1"), messageIds: [] })],
  [40, Events.make("assistant.started", { messageId: m1, model: "prov/alpha" })],
  [50, Events.make("step.started", { messageId: m1, step: 0 })],
  [
    90,
    Events.make("step.finished", {
      messageId: m1,
      step: 0,
      finishReason: "aborted",
      usage: usage(7, 0, 0),
      aborted: true
    })
  ],
  [130, Events.make("turn.interrupted", { turnId: TurnId.make("t1"), reason: "user" })]
])
/**
 * Every way a call ends besides those of session A: refused before it ran (invalid JSON, unknown
 * tool, rejected), a command that exited non-zero, one that exited 0, and a call whose input was
 * cut (interrupted while pending).
 */
const m3 = MessageId.make("m3")
const pending = (at: number, id: string, tool: string) =>
  [at, Events.make("tool.pending", { messageId: m3, callId: CallId.make(id), tool })] as const
const sessionC = timed([
  [0, Events.make("session.created", { cwd: "/w/c", model: "prov/alpha" })],
  [10, Events.make("turn.started", { turnId: TurnId.make("t1"), messageIds: [] })],
  [20, Events.make("assistant.started", { messageId: m3, model: "prov/alpha" })],
  [30, Events.make("step.started", { messageId: m3, step: 0 })],
  pending(40, "json", "bash"),
  pending(41, "unknown", "nosuch"),
  pending(42, "rejected", "write"),
  pending(43, "exit", "bash"),
  pending(44, "zero", "bash"),
  pending(45, "cut", "read"),
  [50, Events.make("step.finished", { messageId: m3, step: 0, finishReason: "tool-calls", usage: usage(1, 1, 0) })],
  [60, Events.make("tool.failed", { callId: CallId.make("json"), error: "not valid JSON", inputText: "{x" })],
  [61, Events.make("tool.failed", { callId: CallId.make("unknown"), error: 'Unknown tool "nosuch"', input: {} })],
  [62, Events.make("tool.failed", { callId: CallId.make("rejected"), error: "Rejected by the user", input: {} })],
  [70, Events.make("tool.invoked", { messageId: m3, callId: CallId.make("exit"), tool: "bash", input: {} })],
  [
    90,
    Events.make("tool.finished", {
      callId: CallId.make("exit"),
      output: "boom\n\nExit code: 2",
      metadata: { exitCode: 2 }
    })
  ],
  [91, Events.make("tool.invoked", { messageId: m3, callId: CallId.make("zero"), tool: "bash", input: {} })],
  [
    95,
    Events.make("tool.finished", {
      callId: CallId.make("zero"),
      output: "ok\n\nExit code: 0",
      metadata: { exitCode: 0 }
    })
  ],
  [
    96,
    Events.make("tool.failed", {
      callId: CallId.make("cut"),
      error: "input cut off",
      interrupted: true,
      reason: "step"
    })
  ],
  [100, Events.make("turn.finished", { turnId: TurnId.make("t1"), reason: "stop" })]
])

const deleted = timed([
  [0, Events.make("session.created", { cwd: "/w/a", model: "prov/alpha" })],
  [1, Events.make("turn.started", { turnId: TurnId.make("t1"), messageIds: [] })],
  [2, Events.make("turn.finished", { turnId: TurnId.make("t1"), reason: "stop" })],
  [3, Events.make("session.deleted", {})]
])

const writeSessions = (file: string, sessions: ReadonlyArray<readonly [string, ReadonlyArray<Events.NewEvent>]>) =>
  Effect.gen(function* () {
    const store = yield* EventStore
    for (const [id, events] of sessions) {
      // one event per append, as the kernel writes them: the cursor crosses commits
      for (const e of events) yield* store.append(SessionId.make(id), [e])
    }
  }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file })))

const statsOf = (file: string, options: StatsOptions = {}) =>
  Effect.provide(stats(options), layerClient({ filename: file, readonly: true }))

const foldOf = (file: string) =>
  Effect.gen(function* () {
    const store = yield* EventStore
    const envelopes = []
    for (const id of yield* store.sessionIds) {
      envelopes.push(...Chunk.toArray(yield* Stream.runCollect(store.readRaw(id))))
    }
    return foldIndex(envelopes)
  }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file, readonly: true })))

/** Costs summed in another order differ in the last bits. */
const rounded = (f: Figures) => ({ ...f, cost: Math.round(f.cost * 1e9) / 1e9 })

describe("Stats", () => {
  it.effect("gives the exact figures of a hand-written log", () =>
    Effect.gen(function* () {
      const file = tempDb()
      yield* writeSessions(file, [
        ["a", sessionA],
        ["b", sessionB],
        ["d", deleted]
      ])
      const report = yield* statsOf(file)
      expect(report.summary).toEqual({
        sessions: 2,
        turns: 3,
        // 5 requests, 2 of them cut
        steps: 3,
        abortedSteps: 2,
        retries: 1,
        retryRate: 0.2,
        toolCalls: 4,
        toolErrors: 1,
        toolRefused: 0,
        toolExitNonZero: 0,
        toolTimeouts: 1,
        toolInterrupted: 1,
        interrupts: 2,
        crashes: 1,
        tokens: { input: 317, output: 55, reasoning: 5, cacheRead: 10, cacheWrite: 15 },
        cost: 0.875,
        costKnown: false,
        // 150 (text delta), 30 (tool call), 60 (reasoning delta); the aborted steps had none
        ttft: { count: 3, avgMs: 80, maxMs: 150 },
        // 2190 and 100; the crashed turn has no duration
        turnDuration: { count: 2, avgMs: 1145, maxMs: 2190 }
      })
      expect(report.retryReasons).toEqual([{ status: 500, reason: "500 internal error", count: 1 }])
      expect(report.interrupts).toEqual([
        { reason: "crash", count: 1 },
        { reason: "user", count: 1 }
      ])
      expect(report.tools).toEqual([
        {
          tool: "bash",
          calls: 2,
          ok: 0,
          errors: 0,
          refused: 0,
          exitNonZero: 0,
          timeouts: 1,
          interrupted: 1,
          open: 0,
          duration: { count: 2, avgMs: Math.round((1000 + (99_000_000 - 86_400_170)) / 2), maxMs: 12_599_830 }
        },
        {
          tool: "read",
          calls: 2,
          ok: 1,
          errors: 1,
          refused: 0,
          exitNonZero: 0,
          timeouts: 0,
          interrupted: 0,
          open: 0,
          duration: { count: 2, avgMs: 105, maxMs: 200 }
        }
      ])
      expect(report.errors).toEqual([
        { tool: "bash", error: "timed out after 1s", count: 1 },
        { tool: "read", error: "no such file: x", count: 1 }
      ])

      const byModel = yield* statsOf(file, { by: "model" })
      expect(byModel.groups.map((g) => [g.key, g.figures.steps, g.figures.turns, g.figures.toolCalls])).toEqual([
        ["prov/alpha", 2, 2, 3],
        ["prov/beta", 1, 1, 1]
      ])
      const byDay = yield* statsOf(file, { by: "day" })
      expect(byDay.groups.map((g) => [g.key, g.figures.sessions, g.figures.steps, g.figures.retries])).toEqual([
        ["2026-01-10", 2, 2, 1],
        ["2026-01-11", 1, 1, 0]
      ])
      const byPrompt = yield* statsOf(file, { by: "prompt" })
      expect(byPrompt.groups.map((g) => [g.key, g.figures.sessions, g.figures.steps, g.figures.cost])).toEqual([
        ["pv1", 1, 2, 0.75],
        ["pv2", 1, 1, 0.125],
        [null, 2, 0, 0]
      ])

      const onlyB = yield* statsOf(file, { cwd: "/w/b" })
      expect([onlyB.summary.sessions, onlyB.summary.turns, onlyB.summary.interrupts]).toEqual([1, 1, 1])
      const since = yield* statsOf(file, { since: T0 + 86_400_000 })
      expect([since.summary.turns, since.summary.steps, since.summary.toolCalls, since.summary.crashes]).toEqual([
        1, 1, 1, 1
      ])
      const beta = yield* statsOf(file, { model: "prov/beta" })
      expect([beta.summary.sessions, beta.summary.steps, beta.summary.cost]).toEqual([1, 1, 0.125])
      const none = yield* statsOf(file, { model: "nobody" })
      expect(none.summary).toMatchObject({ sessions: 0, steps: 0, retryRate: null, costKnown: true })
    })
  )

  it.effect("equals the fold of every payload on simulated sessions, for every grouping and filter", () =>
    Effect.gen(function* () {
      const file = tempDb()
      const sessions = Array.from({ length: 8 }, (_, i) => {
        const events = simulate(choicesFromSeed(i + 11, 150 + i * 40))
        // hours apart, so the sessions spread over several days
        return [`s${i}`, events.map((e, j) => ({ ...e, at: T0 + i * 40_000_000 + j * 1_700_000 }))] as const
      })
      yield* writeSessions(file, sessions)
      const index = yield* foldOf(file)
      expect(index.steps.length).toBeGreaterThan(20)
      expect(index.tools.some((t) => t.outcome === "error")).toBe(true)
      expect(index.turns.some((t) => t.outcome === "interrupted")).toBe(true)
      for (const options of [
        {},
        { by: "model" as const },
        { by: "day" as const },
        { by: "prompt" as const },
        { since: T0 + 100_000_000, by: "day" as const },
        { cwd: "/work/project", model: "test/model" }
      ]) {
        const report = yield* statsOf(file, options)
        expect(rounded(report.summary)).toEqual(rounded(foldFigures(index, options).get(null)!))
        if (options.by !== undefined) {
          const folded = foldFigures(index, options, options.by)
          expect(report.groups.length).toBe(folded.size)
          for (const g of report.groups) expect(rounded(g.figures)).toEqual(rounded(folded.get(g.key)!))
        }
      }
    })
  )

  it.effect("counts every call the model sent: refused ones and non-zero exits are failed", () =>
    Effect.gen(function* () {
      const file = tempDb()
      yield* writeSessions(file, [["c", sessionC]])
      const report = yield* statsOf(file)
      expect(report.summary).toMatchObject({
        toolCalls: 6,
        toolErrors: 4,
        toolRefused: 3,
        toolExitNonZero: 1,
        toolTimeouts: 0,
        toolInterrupted: 1
      })
      expect(rounded(report.summary)).toEqual(rounded(foldFigures(yield* foldOf(file)).get(null)!))
      expect(report.tools).toEqual([
        {
          tool: "bash",
          calls: 3,
          ok: 1,
          errors: 2,
          refused: 1,
          exitNonZero: 1,
          timeouts: 0,
          interrupted: 0,
          open: 0,
          // the two that ran: 20 and 4 ms
          duration: { count: 2, avgMs: 12, maxMs: 20 }
        },
        {
          tool: "nosuch",
          calls: 1,
          ok: 0,
          errors: 1,
          refused: 1,
          exitNonZero: 0,
          timeouts: 0,
          interrupted: 0,
          open: 0,
          duration: { count: 0, avgMs: null, maxMs: null }
        },
        {
          tool: "read",
          calls: 1,
          ok: 0,
          errors: 0,
          refused: 0,
          exitNonZero: 0,
          timeouts: 0,
          interrupted: 1,
          open: 0,
          duration: { count: 0, avgMs: null, maxMs: null }
        },
        {
          tool: "write",
          calls: 1,
          ok: 0,
          errors: 1,
          refused: 1,
          exitNonZero: 0,
          timeouts: 0,
          interrupted: 0,
          open: 0,
          duration: { count: 0, avgMs: null, maxMs: null }
        }
      ])
      expect(report.errors).toEqual([
        { tool: "bash", error: "exit code 2", count: 1 },
        { tool: "bash", error: "not valid JSON", count: 1 },
        { tool: "nosuch", error: 'Unknown tool "nosuch"', count: 1 },
        { tool: "write", error: "Rejected by the user", count: 1 }
      ])

      // a database schema 4 wrote (no rows for refused calls, a non-zero exit `ok`) gets them from migration 5
      downgradeToSchema4(file)
      expect(schemaOf(file)).toBe(4)
      expect(yield* statsOf(file)).toEqual(report)
      expect(schemaOf(file)).toBe(4)
      yield* writeSessions(file, [])
      expect(schemaOf(file)).toBe(LATEST_MIGRATION)
      expect(yield* statsOf(file)).toEqual(report)
    })
  )

  it.effect("a database of the previous schema gets the same stats once migration 3 backfilled it", () =>
    Effect.gen(function* () {
      const file = tempDb()
      yield* writeSessions(file, [
        ["a", sessionA],
        ["b", sessionB],
        ["d", deleted],
        ...Array.from({ length: 4 }, (_, i) => [`s${i}`, simulate(choicesFromSeed(i + 3, 120))] as const)
      ])
      const expected = yield* statsOf(file, { by: "day" })
      downgradeToSchema2(file)
      expect(schemaOf(file)).toBe(2)
      // read-only: from an upgraded private copy
      expect(yield* statsOf(file, { by: "day" })).toEqual(expected)
      expect(schemaOf(file)).toBe(2)
      // a writable open upgrades the file; appends then go on from the backfilled cursors
      yield* writeSessions(file, [])
      expect(schemaOf(file)).toBe(LATEST_MIGRATION)
      expect(yield* statsOf(file, { by: "day" })).toEqual(expected)
    })
  )
})
