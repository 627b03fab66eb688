/**
 * Stats across sessions (DESIGN §8): retries, tool failures and timeouts, interrupts, tokens, cost,
 * time to first token and turn duration — SQL over the stats index (`internal/statsIndex.ts`: one
 * row per step, tool call, turn and retry, kept up to date by every append and backfilled by
 * migration `3_stats`), never a fold of the payloads. How each figure is defined: docs/stats.md.
 *
 * It reads a logbook SQLite database through `SqlClient` (`Sqlite.layerClient`, read-only is
 * enough). The memory store has no SQL and keeps no index: `foldStats` gives the same report from
 * envelopes (any store's `readRaw`), by folding every payload — what the index saves.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Fragment } from "@effect/sql/Statement"
import { Effect, Schema } from "effect"
import type { RawEnvelope } from "../domain/Events.js"
import { EventStoreError } from "./Errors.js"
import { deriveStats, emptyCursor, type StatsCursor, type StepRow, type ToolOutcome } from "./internal/statsIndex.js"

/** The outcomes of a call that count as failed (docs/stats.md): the tool ran and failed, it was refused, its command exited non-zero. */
const FAILED: ReadonlyArray<ToolOutcome> = ["error", "refused", "exit"]

export const StatsGrouping = Schema.Literal("model", "tool", "prompt", "day")
export type StatsGrouping = typeof StatsGrouping.Type

export interface StatsFilter {
  /** only sessions whose workspace is this directory */
  readonly cwd?: string | undefined
  /** only what happened at or after this time (UTC epoch ms): each row by its own time */
  readonly since?: number | undefined
  /** only steps, turns, tool calls and retries of this model */
  readonly model?: string | undefined
}

export interface StatsOptions extends StatsFilter {
  /** figures per model, tool, prompt version or UTC day; none: the summary only */
  readonly by?: StatsGrouping | undefined
  /** the most retry reasons, interrupt reasons and tool errors listed (default 10) */
  readonly top?: number | undefined
}

export interface Tokens {
  readonly input: number
  readonly output: number
  readonly reasoning: number
  readonly cacheRead: number
  readonly cacheWrite: number
}

/** count, mean and maximum of a duration in ms (mean and max null when count is 0) */
export interface Timing {
  readonly count: number
  readonly avgMs: number | null
  readonly maxMs: number | null
}

export interface Figures {
  readonly sessions: number
  readonly turns: number
  /** model steps that went through (`step.finished` not aborted) */
  readonly steps: number
  /** attempts cut (`step.finished {aborted: true}`): by a retryable failure, an interrupt, a crash */
  readonly abortedSteps: number
  readonly retries: number
  /** retries per model request, `steps + abortedSteps` (null without any) */
  readonly retryRate: number | null
  /** every call the model sent, whether it ran or not */
  readonly toolCalls: number
  /** failed calls: the tool failed, the call was refused, or its command exited non-zero */
  readonly toolErrors: number
  /** of `toolErrors`: calls refused before they ran (invalid JSON or input, unknown tool, denied, rejected) */
  readonly toolRefused: number
  /** of `toolErrors`: commands that exited non-zero */
  readonly toolExitNonZero: number
  readonly toolTimeouts: number
  readonly toolInterrupted: number
  readonly interrupts: number
  readonly crashes: number
  readonly tokens: Tokens
  readonly cost: number
  readonly costKnown: boolean
  readonly ttft: Timing
  readonly turnDuration: Timing
}

export interface ToolFigures {
  readonly tool: string
  readonly calls: number
  readonly ok: number
  /** failed: errors, refused calls and non-zero exits */
  readonly errors: number
  readonly refused: number
  readonly exitNonZero: number
  readonly timeouts: number
  readonly interrupted: number
  /** sent or invoked, never ended (still running, or a crash not yet swept) */
  readonly open: number
  /** of the calls that ran (were invoked) and ended */
  readonly duration: Timing
}

export interface Counted {
  readonly count: number
}
export interface RetryReason extends Counted {
  readonly status: number | null
  readonly reason: string
}
export interface InterruptReason extends Counted {
  readonly reason: string
}
export interface ToolError extends Counted {
  readonly tool: string
  readonly error: string
}

export interface StatsReport {
  readonly filter: StatsFilter
  readonly by: StatsGrouping | null
  readonly summary: Figures
  readonly retryReasons: ReadonlyArray<RetryReason>
  readonly interrupts: ReadonlyArray<InterruptReason>
  readonly tools: ReadonlyArray<ToolFigures>
  readonly errors: ReadonlyArray<ToolError>
  /** with `by` model, prompt or day: the figures of each group (`key` null: none recorded) */
  readonly groups: ReadonlyArray<{ readonly key: string | null; readonly figures: Figures }>
}

// ---------------------------------------------------------------------------------------------
// the SQL

type Table = "stat_steps" | "stat_turns" | "stat_tools" | "stat_retries"

/** The group key of a row of `table` for a grouping, as SQL (undefined: that table has no such key). */
const keyColumn = (by: StatsGrouping | "all", table: Table): string | undefined => {
  switch (by) {
    case "all":
      return "NULL"
    case "model":
      return "x.model"
    case "day":
      return "strftime('%Y-%m-%d', x.at / 1000, 'unixepoch')"
    case "prompt":
      return table === "stat_steps" ? "x.prompt_version" : undefined
    case "tool":
      return table === "stat_tools" ? "x.tool" : undefined
  }
}

const keyOf = (sql: SqlClient.SqlClient, by: StatsGrouping | "all", table: Table): Fragment | undefined => {
  const column = keyColumn(by, table)
  return column === undefined ? undefined : sql.literal(column)
}

const where = (sql: SqlClient.SqlClient, filter: StatsFilter, extra: ReadonlyArray<Fragment> = []) =>
  sql.and([
    sql`s.deleted = 0`,
    ...(filter.cwd === undefined ? [] : [sql`s.cwd = ${filter.cwd}`]),
    ...(filter.since === undefined ? [] : [sql`x.at >= ${filter.since}`]),
    ...(filter.model === undefined ? [] : [sql`x.model = ${filter.model}`]),
    ...extra
  ])

const from = (sql: SqlClient.SqlClient, table: Table) =>
  sql`${sql.literal(table)} x JOIN sessions s ON s.id = x.session_id`

interface StepAgg {
  readonly k: string | null
  readonly steps: number
  readonly aborted: number
  readonly input: number
  readonly output: number
  readonly reasoning: number
  readonly cache_read: number
  readonly cache_write: number
  readonly cost: number
  readonly cost_known: number | null
  readonly ttft_n: number
  readonly ttft_avg: number | null
  readonly ttft_max: number | null
}
interface TurnAgg {
  readonly k: string | null
  readonly turns: number
  readonly interrupts: number
  readonly crashes: number
  readonly dur_n: number
  readonly dur_avg: number | null
  readonly dur_max: number | null
}
interface ToolAgg {
  readonly k: string | null
  readonly calls: number
  readonly ok: number
  readonly errors: number
  readonly refused: number
  readonly exit_nonzero: number
  readonly timeouts: number
  readonly interrupted: number
  readonly open: number
  readonly dur_n: number
  readonly dur_avg: number | null
  readonly dur_max: number | null
}

const timing = (n: number, avg: number | null, max: number | null): Timing => ({
  count: n,
  avgMs: n === 0 || avg === null ? null : Math.round(avg),
  maxMs: n === 0 ? null : max
})

const emptyFigures: Figures = {
  sessions: 0,
  turns: 0,
  steps: 0,
  abortedSteps: 0,
  retries: 0,
  retryRate: null,
  toolCalls: 0,
  toolErrors: 0,
  toolRefused: 0,
  toolExitNonZero: 0,
  toolTimeouts: 0,
  toolInterrupted: 0,
  interrupts: 0,
  crashes: 0,
  tokens: { input: 0, output: 0, reasoning: 0, cacheRead: 0, cacheWrite: 0 },
  cost: 0,
  costKnown: true,
  ttft: { count: 0, avgMs: null, maxMs: null },
  turnDuration: { count: 0, avgMs: null, maxMs: null }
}

/** The figures per group key, four grouped queries (one per index table) merged by key. */
const figuresBy = (sql: SqlClient.SqlClient, filter: StatsFilter, by: StatsGrouping | "all") =>
  Effect.gen(function* () {
    const stepKey = keyOf(sql, by, "stat_steps")
    const turnKey = keyOf(sql, by, "stat_turns")
    const toolKey = keyOf(sql, by, "stat_tools")
    const retryKey = keyOf(sql, by, "stat_retries")
    const steps =
      stepKey === undefined
        ? []
        : yield* sql<StepAgg>`SELECT ${stepKey} AS k, count(*) - total(x.aborted) AS steps, total(x.aborted) AS aborted,
          total(x.input) AS input, total(x.output) AS output, total(x.reasoning) AS reasoning,
          total(x.cache_read) AS cache_read, total(x.cache_write) AS cache_write, total(x.cost) AS cost,
          min(x.cost_known) AS cost_known, count(x.ttft_ms) AS ttft_n, avg(x.ttft_ms) AS ttft_avg,
          max(x.ttft_ms) AS ttft_max
          FROM ${from(sql, "stat_steps")} WHERE ${where(sql, filter)} GROUP BY k`
    // a turn's duration: from turn.started to its end; crash-swept turns ended when the crash was
    // found, not when they stopped, so they have none
    const turns =
      turnKey === undefined
        ? []
        : yield* sql<TurnAgg>`SELECT ${turnKey} AS k, count(*) AS turns,
          total(x.outcome = 'interrupted') AS interrupts,
          total(x.outcome = 'interrupted' AND x.reason = 'crash') AS crashes,
          count(CASE WHEN x.ended_at IS NOT NULL AND x.reason IS NOT 'crash' THEN 1 END) AS dur_n,
          avg(CASE WHEN x.ended_at IS NOT NULL AND x.reason IS NOT 'crash' THEN x.ended_at - x.at END) AS dur_avg,
          max(CASE WHEN x.ended_at IS NOT NULL AND x.reason IS NOT 'crash' THEN x.ended_at - x.at END) AS dur_max
          FROM ${from(sql, "stat_turns")} WHERE ${where(sql, filter)} GROUP BY k`
    const tools = toolKey === undefined ? [] : yield* toolsBy(sql, filter, toolKey)
    const retries =
      retryKey === undefined
        ? []
        : yield* sql<{ k: string | null; retries: number }>`SELECT ${retryKey} AS k, count(*) AS retries
          FROM ${from(sql, "stat_retries")} WHERE ${where(sql, filter)} GROUP BY k`
    // sessions: those with a counted turn (with a counted step, grouped by prompt version)
    const sessionRows = yield* sql<{
      k: string | null
      sessions: number
    }>`SELECT k, count(DISTINCT session_id) AS sessions
      FROM (${
        turnKey === undefined
          ? sql`SELECT ${stepKey ?? sql.literal("NULL")} AS k, x.session_id FROM ${from(sql, "stat_steps")} WHERE ${where(sql, filter)}`
          : sql`SELECT ${turnKey} AS k, x.session_id FROM ${from(sql, "stat_turns")} WHERE ${where(sql, filter)}`
      }) GROUP BY k`

    const groups = new Map<string | null, { -readonly [K in keyof Figures]: Figures[K] }>()
    const group = (k: string | null) => {
      let g = groups.get(k)
      if (g === undefined) {
        g = { ...emptyFigures }
        groups.set(k, g)
      }
      return g
    }
    for (const r of sessionRows) group(r.k).sessions = r.sessions
    for (const r of steps) {
      const g = group(r.k)
      g.steps = r.steps
      g.abortedSteps = r.aborted
      g.tokens = {
        input: r.input,
        output: r.output,
        reasoning: r.reasoning,
        cacheRead: r.cache_read,
        cacheWrite: r.cache_write
      }
      g.cost = r.cost
      g.costKnown = r.cost_known !== 0
      g.ttft = timing(r.ttft_n, r.ttft_avg, r.ttft_max)
    }
    for (const r of turns) {
      const g = group(r.k)
      g.turns = r.turns
      g.interrupts = r.interrupts
      g.crashes = r.crashes
      g.turnDuration = timing(r.dur_n, r.dur_avg, r.dur_max)
    }
    for (const r of tools) {
      const g = group(r.k)
      g.toolCalls = r.calls
      g.toolErrors = r.errors
      g.toolRefused = r.refused
      g.toolExitNonZero = r.exit_nonzero
      g.toolTimeouts = r.timeouts
      g.toolInterrupted = r.interrupted
    }
    for (const r of retries) group(r.k).retries = r.retries
    for (const g of groups.values()) g.retryRate = rateOf(g)
    return groups
  })

/** retries per model request (null without any) */
const rateOf = (f: Pick<Figures, "steps" | "abortedSteps" | "retries">): number | null =>
  f.steps + f.abortedSteps === 0 ? null : f.retries / (f.steps + f.abortedSteps)

const toolsBy = (sql: SqlClient.SqlClient, filter: StatsFilter, key: Fragment) =>
  sql<ToolAgg>`SELECT ${key} AS k, count(*) AS calls, total(x.outcome = 'ok') AS ok,
    total(x.outcome IN ('error', 'refused', 'exit')) AS errors, total(x.outcome = 'refused') AS refused,
    total(x.outcome = 'exit') AS exit_nonzero, total(x.outcome = 'timeout') AS timeouts,
    total(x.outcome = 'interrupted') AS interrupted, total(x.outcome IN ('open', 'pending')) AS open,
    count(CASE WHEN x.ran = 1 THEN x.ended_at END) AS dur_n,
    avg(CASE WHEN x.ran = 1 THEN x.ended_at - x.at END) AS dur_avg,
    max(CASE WHEN x.ran = 1 THEN x.ended_at - x.at END) AS dur_max
    FROM ${from(sql, "stat_tools")} WHERE ${where(sql, filter)} GROUP BY k ORDER BY calls DESC, k`

/** The report for `options`, from the stats index of the database `SqlClient` reads. */
export const stats = Effect.fn("Stats.stats")(function* (options: StatsOptions = {}) {
  const sql = yield* SqlClient.SqlClient
  const filter: StatsFilter = {
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    ...(options.since === undefined ? {} : { since: options.since }),
    ...(options.model === undefined ? {} : { model: options.model })
  }
  const top = Math.max(1, Math.floor(options.top ?? 10))
  const run = Effect.gen(function* () {
    const summary = (yield* figuresBy(sql, filter, "all")).get(null) ?? emptyFigures
    const retryReasons = yield* sql<RetryReason>`SELECT x.status AS status, x.reason AS reason, count(*) AS count
      FROM ${from(sql, "stat_retries")} WHERE ${where(sql, filter)}
      GROUP BY x.status, x.reason ORDER BY count DESC, x.status, x.reason LIMIT ${top}`
    const interrupts = yield* sql<InterruptReason>`SELECT coalesce(x.reason, '') AS reason, count(*) AS count
      FROM ${from(sql, "stat_turns")} WHERE ${where(sql, filter, [sql`x.outcome = 'interrupted'`])}
      GROUP BY x.reason ORDER BY count DESC, x.reason LIMIT ${top}`
    const tools = (yield* toolsBy(sql, filter, sql.literal("x.tool"))).map(
      (r): ToolFigures => ({
        tool: r.k ?? "",
        calls: r.calls,
        ok: r.ok,
        errors: r.errors,
        refused: r.refused,
        exitNonZero: r.exit_nonzero,
        timeouts: r.timeouts,
        interrupted: r.interrupted,
        open: r.open,
        duration: timing(r.dur_n, r.dur_avg, r.dur_max)
      })
    )
    const errors = yield* sql<ToolError>`SELECT x.tool AS tool, coalesce(x.error, '') AS error, count(*) AS count
      FROM ${from(sql, "stat_tools")} WHERE ${where(sql, filter, [sql`x.outcome IN ('error', 'refused', 'exit', 'timeout')`])}
      GROUP BY x.tool, x.error ORDER BY count DESC, x.tool, x.error LIMIT ${top}`
    const by = options.by ?? null
    const groups =
      by === null || by === "tool"
        ? []
        : Array.from(yield* figuresBy(sql, filter, by), ([key, figures]) => ({ key, figures })).sort((a, b) =>
            compareKeys(a.key, b.key)
          )
    const report: StatsReport = {
      filter,
      by,
      summary,
      retryReasons: retryReasons.map((r) => ({ status: r.status, reason: r.reason, count: r.count })),
      interrupts: interrupts.map((r) => ({ reason: r.reason, count: r.count })),
      tools,
      errors: errors.map((r) => ({ tool: r.tool, error: r.error, count: r.count })),
      groups
    }
    return report
  })
  return yield* run.pipe(
    Effect.mapError(
      (e) =>
        new EventStoreError({
          method: "stats",
          message: `stats: ${(e.cause as Error | undefined)?.message ?? e.message}`,
          cause: e
        })
    )
  )
})

/** Groups in key order (days oldest first), the group without a key last. */
const compareKeys = (a: string | null, b: string | null): number =>
  a === b ? 0 : a === null ? 1 : b === null ? -1 : a < b ? -1 : 1

// ---------------------------------------------------------------------------------------------
// the same report by folding every payload

interface ToolRow {
  sessionId: string
  at: number
  model: string | null
  tool: string
  outcome: ToolOutcome
  error: string | null
  endedAt: number | null
  /** it was invoked (ran) */
  ran: boolean
}
interface TurnRow {
  sessionId: string
  at: number
  model: string | null
  outcome: "open" | "finished" | "interrupted"
  reason: string | null
  endedAt: number | null
}
interface RetryRow {
  sessionId: string
  at: number
  model: string | null
  status: number | null
  reason: string
}

/** The index rows of some sessions, derived in memory (what the SQLite store keeps on disk). */
export interface FoldedIndex {
  readonly steps: Array<StepRow>
  readonly tools: Array<ToolRow>
  readonly turns: Array<TurnRow>
  readonly retries: Array<RetryRow>
  /** per session: its workspace and whether it is deleted */
  readonly sessions: Map<string, { cwd: string | null; deleted: boolean }>
}

/**
 * Folds envelopes (each session's in seq order; sessions may interleave) into index rows: the
 * baseline the stats index replaces, and the stats of a store without SQL (the memory store).
 */
export const foldIndex = (envelopes: Iterable<RawEnvelope>): FoldedIndex => {
  const index: FoldedIndex = { steps: [], tools: [], turns: [], retries: [], sessions: new Map() }
  const cursors = new Map<string, StatsCursor>()
  const openTools = new Map<string, ToolRow>()
  const turnsBySeq = new Map<string, TurnRow>()
  for (const e of envelopes) {
    let cursor = cursors.get(e.sessionId)
    if (cursor === undefined) {
      cursor = emptyCursor()
      cursors.set(e.sessionId, cursor)
      index.sessions.set(e.sessionId, { cwd: null, deleted: false })
    }
    const meta = index.sessions.get(e.sessionId)!
    if (e.type === "session.created") meta.cwd = (e.payload as { cwd?: string }).cwd ?? null
    if (e.type === "session.deleted") meta.deleted = true
    deriveStats(
      cursor,
      {
        step: (row) => index.steps.push(row),
        toolPending: (sessionId, callId, _seq, at, model, tool) => {
          const key = `${sessionId}\u0000${callId}`
          if (openTools.has(key)) return
          const row: ToolRow = {
            sessionId,
            at,
            model,
            tool,
            outcome: "pending",
            error: null,
            endedAt: null,
            ran: false
          }
          openTools.set(key, row)
          index.tools.push(row)
        },
        toolInvoked: (sessionId, callId, _seq, at, model, tool) => {
          const key = `${sessionId}\u0000${callId}`
          const sent = openTools.get(key)
          const row: ToolRow = sent ?? {
            sessionId,
            at,
            model,
            tool,
            outcome: "open",
            error: null,
            endedAt: null,
            ran: true
          }
          Object.assign(row, { at, model, tool, outcome: "open", ran: true })
          if (sent === undefined) {
            openTools.set(key, row)
            index.tools.push(row)
          }
        },
        toolEnded: (sessionId, callId, at, outcome, error) => {
          const key = `${sessionId}\u0000${callId}`
          const row = openTools.get(key)
          if (row === undefined) return
          openTools.delete(key)
          row.outcome = row.outcome === "pending" && outcome === "error" ? "refused" : outcome
          row.error = error
          row.endedAt = at
        },
        turnStarted: (sessionId, seq, at, model) => {
          const row: TurnRow = { sessionId, at, model, outcome: "open", reason: null, endedAt: null }
          turnsBySeq.set(`${sessionId}\u0000${seq}`, row)
          index.turns.push(row)
        },
        turnEnded: (sessionId, startSeq, _seq, at, model, interrupted, reason) => {
          const outcome = interrupted ? "interrupted" : "finished"
          const row = startSeq === null ? undefined : turnsBySeq.get(`${sessionId}\u0000${startSeq}`)
          if (row === undefined || row.outcome !== "open") {
            index.turns.push({ sessionId, at, model, outcome, reason, endedAt: at })
            return
          }
          row.model = model
          row.outcome = outcome
          row.reason = reason
          row.endedAt = at
        },
        retry: (sessionId, _seq, at, model, status, reason) =>
          index.retries.push({ sessionId, at, model, status, reason })
      },
      e.sessionId,
      e.seq,
      e.type,
      e.at,
      e.payload as object
    )
  }
  return index
}

const utcDay = (at: number): string => new Date(at).toISOString().slice(0, 10)

/** The summary figures (and those per group) of folded index rows: `stats` without SQL. */
export const foldFigures = (
  index: FoldedIndex,
  filter: StatsFilter = {},
  by: StatsGrouping | "all" = "all"
): Map<string | null, Figures> => {
  const keep = (r: { sessionId: string; at: number; model: string | null }) => {
    const meta = index.sessions.get(r.sessionId)
    if (meta === undefined || meta.deleted) return false
    if (filter.cwd !== undefined && meta.cwd !== filter.cwd) return false
    if (filter.since !== undefined && r.at < filter.since) return false
    return filter.model === undefined || r.model === filter.model
  }
  const key = (r: { at: number; model: string | null; promptVersion?: string | null; tool?: string }) =>
    by === "all"
      ? null
      : by === "model"
        ? r.model
        : by === "day"
          ? utcDay(r.at)
          : by === "prompt"
            ? (r.promptVersion ?? null)
            : (r.tool ?? null)
  const has = (table: Table) => keyColumn(by, table) !== undefined
  interface Acc {
    figures: { -readonly [K in keyof Figures]: Figures[K] }
    tokens: { -readonly [K in keyof Tokens]: number }
    sessions: Set<string>
    ttft: Array<number>
    dur: Array<number>
  }
  const groups = new Map<string | null, Acc>()
  const group = (k: string | null): Acc => {
    let g = groups.get(k)
    if (g === undefined) {
      g = {
        figures: { ...emptyFigures },
        tokens: { ...emptyFigures.tokens },
        sessions: new Set(),
        ttft: [],
        dur: []
      }
      groups.set(k, g)
    }
    return g
  }
  const timed = (values: Array<number>): Timing => {
    if (values.length === 0) return { count: 0, avgMs: null, maxMs: null }
    let sum = 0
    let max = Number.NEGATIVE_INFINITY
    for (const v of values) {
      sum += v
      if (v > max) max = v
    }
    return { count: values.length, avgMs: Math.round(sum / values.length), maxMs: max }
  }
  if (has("stat_steps")) {
    for (const r of index.steps) {
      if (!keep(r)) continue
      const g = group(key(r))
      const f = g.figures
      if (r.aborted) f.abortedSteps++
      else f.steps++
      g.tokens.input += r.input
      g.tokens.output += r.output
      g.tokens.reasoning += r.reasoning
      g.tokens.cacheRead += r.cacheRead
      g.tokens.cacheWrite += r.cacheWrite
      f.cost += r.cost
      if (!r.costKnown) f.costKnown = false
      if (r.ttftMs !== null) g.ttft.push(r.ttftMs)
      if (!has("stat_turns")) g.sessions.add(r.sessionId)
    }
  }
  if (has("stat_turns")) {
    for (const r of index.turns) {
      if (!keep(r)) continue
      const g = group(key(r))
      g.sessions.add(r.sessionId)
      g.figures.turns++
      if (r.outcome === "interrupted") g.figures.interrupts++
      if (r.outcome === "interrupted" && r.reason === "crash") g.figures.crashes++
      if (r.endedAt !== null && r.reason !== "crash") g.dur.push(r.endedAt - r.at)
    }
  }
  if (has("stat_tools")) {
    for (const r of index.tools) {
      if (!keep(r)) continue
      const f = group(key(r)).figures
      f.toolCalls++
      if (FAILED.includes(r.outcome)) f.toolErrors++
      if (r.outcome === "refused") f.toolRefused++
      if (r.outcome === "exit") f.toolExitNonZero++
      if (r.outcome === "timeout") f.toolTimeouts++
      if (r.outcome === "interrupted") f.toolInterrupted++
    }
  }
  if (has("stat_retries")) {
    for (const r of index.retries) if (keep(r)) group(key(r)).figures.retries++
  }
  const out = new Map<string | null, Figures>()
  for (const [k, g] of groups) {
    g.figures.tokens = g.tokens
    g.figures.ttft = timed(g.ttft)
    g.figures.turnDuration = timed(g.dur)
    g.figures.sessions = g.sessions.size
    g.figures.retryRate = rateOf(g.figures)
    out.set(k, g.figures)
  }
  return out
}
