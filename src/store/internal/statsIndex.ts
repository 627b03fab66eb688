/**
 * The stats index (`Stats.ts` reads it): one row per step, tool call, turn and model retry, derived
 * from the events as they are appended, so `logbook stats` is SQL over indexed columns and never
 * parses a payload. `deriveStats` is the one fold both writers use: the SQLite append path (inside
 * the commit transaction, with prepared statements) and migration `3_stats`, which backfills older
 * databases from their events.
 *
 * What has to be remembered between appends (the open step's start and first token, the open
 * turn; the current model is the summary's `model`) is the session's `StatsCursor`, kept in its
 * `sessions` row next to the summary the append path reads and writes anyway: no extra read per
 * commit.
 */

import { failedExit } from "../../domain/Message.js"

/** The event types the stats index reads the payload of (the others are skipped unparsed). */
export const STATS_TYPES: ReadonlyArray<string> = [
  "session.created",
  "assistant.started",
  "model.switched",
  "step.started",
  "text.delta",
  "reasoning.delta",
  "tool.pending",
  "tool.invoked",
  "step.finished",
  "tool.finished",
  "tool.failed",
  "turn.started",
  "turn.finished",
  "turn.interrupted",
  "model.retry"
]

/** The longest error text or retry reason kept in the index (characters of its first line). */
export const STATS_TEXT_MAX = 200

/** Per session, what the next append needs to know; stored in the session's index row. */
export interface StatsCursor {
  /** the model of the session's latest assistant message (or the one it was created with) */
  model: string | null
  /** `at` of the open step's `step.started`; null when no step is open */
  stepAt: number | null
  /** ms from the open step's start to its first delta or tool call; null until one came */
  stepFirstMs: number | null
  /** seq of the open turn's `turn.started`; null when no turn is open */
  turnSeq: number | null
}

export const emptyCursor = (model: string | null = null): StatsCursor => ({
  model,
  stepAt: null,
  stepFirstMs: null,
  turnSeq: null
})

export interface StepRow {
  readonly sessionId: string
  readonly seq: number
  readonly at: number
  readonly model: string | null
  readonly promptVersion: string | null
  readonly aborted: boolean
  readonly input: number
  readonly output: number
  readonly reasoning: number
  readonly cacheRead: number
  readonly cacheWrite: number
  readonly cost: number
  readonly costKnown: boolean
  readonly ttftMs: number | null
}

/**
 * How a call ended, as its `stat_tools` row says: `pending` (the model sent it, it has not run),
 * `open` (invoked, not ended), `ok`, `exit` (finished, its command exited non-zero), `error` (the tool
 * ran and failed), `refused` (ended before it ran: invalid JSON or input, an unknown tool, a denial or
 * rejection, a hook), `timeout`, `interrupted`. docs/stats.md says which of them count as failed.
 */
export type ToolOutcome = "pending" | "open" | "ok" | "exit" | "error" | "refused" | "timeout" | "interrupted"

/** How a call's end event ends it; the sink makes an `error` of a call that never ran `refused`. */
export type ToolEnd = "ok" | "exit" | "error" | "timeout" | "interrupted"

/** Where the derived rows go: prepared statements (append path, backfill) or arrays (a fold). */
export interface StatsSink {
  readonly step: (row: StepRow) => void
  /** the model sent a call (`tool.pending`): a row of its own until `toolInvoked` or `toolEnded` */
  readonly toolPending: (
    sessionId: string,
    callId: string,
    seq: number,
    at: number,
    model: string | null,
    tool: string
  ) => void
  readonly toolInvoked: (
    sessionId: string,
    callId: string,
    seq: number,
    at: number,
    model: string | null,
    tool: string
  ) => void
  readonly toolEnded: (
    sessionId: string,
    callId: string,
    at: number,
    outcome: ToolEnd,
    error: string | null,
    reason: string | null
  ) => void
  readonly turnStarted: (sessionId: string, seq: number, at: number, model: string | null) => void
  /** `startSeq` null: an end with no open turn (the row is then its own start) */
  readonly turnEnded: (
    sessionId: string,
    startSeq: number | null,
    seq: number,
    at: number,
    model: string | null,
    interrupted: boolean,
    reason: string
  ) => void
  readonly retry: (
    sessionId: string,
    seq: number,
    at: number,
    model: string | null,
    status: number | null,
    reason: string
  ) => void
}

/** The first line of `text`, trimmed and cut to `STATS_TEXT_MAX` characters. */
export const firstLine = (text: string): string => {
  const newline = text.indexOf("\n")
  const line = (newline >= 0 ? text.slice(0, newline) : text).trim()
  return line.length <= STATS_TEXT_MAX ? line : `${line.slice(0, STATS_TEXT_MAX - 1)}…`
}

interface UsageJson {
  readonly input?: number
  readonly output?: number
  readonly reasoning?: number
  readonly cacheRead?: number
  readonly cacheWrite?: number
  readonly cost?: number
  readonly costKnown?: boolean
}

/** A payload as stored (JSON text) or already parsed. */
export type PayloadJson = string | object

const parse = <A>(payload: PayloadJson): A => (typeof payload === "string" ? JSON.parse(payload) : payload) as A

/**
 * Folds one stored event into the cursor (in place), handing the rows it completes to `sink`. Only
 * the `STATS_TYPES` look at their payload.
 */
export const deriveStats = (
  c: StatsCursor,
  sink: StatsSink,
  sessionId: string,
  seq: number,
  type: string,
  at: number,
  json: PayloadJson
): void => {
  switch (type) {
    case "text.delta":
    case "reasoning.delta":
      if (c.stepAt !== null && c.stepFirstMs === null) c.stepFirstMs = Math.max(0, at - c.stepAt)
      return
    case "tool.pending": {
      if (c.stepAt !== null && c.stepFirstMs === null) c.stepFirstMs = Math.max(0, at - c.stepAt)
      const p = parse<{ callId: string; tool: string }>(json)
      sink.toolPending(sessionId, p.callId, seq, at, c.model, p.tool)
      return
    }
    case "session.created":
    case "assistant.started": {
      const model = parse<{ model?: string }>(json).model
      if (model !== undefined) c.model = model
      return
    }
    case "model.switched":
      c.model = parse<{ to: string }>(json).to
      return
    case "step.started":
      c.stepAt = at
      c.stepFirstMs = null
      return
    case "tool.invoked": {
      if (c.stepAt !== null && c.stepFirstMs === null) c.stepFirstMs = Math.max(0, at - c.stepAt)
      const p = parse<{ callId: string; tool: string }>(json)
      sink.toolInvoked(sessionId, p.callId, seq, at, c.model, p.tool)
      return
    }
    case "step.finished": {
      const p = parse<{ usage?: UsageJson; aborted?: boolean; promptVersion?: string }>(json)
      const u = p.usage ?? {}
      sink.step({
        sessionId,
        seq,
        at,
        model: c.model,
        promptVersion: p.promptVersion ?? null,
        aborted: p.aborted === true,
        input: u.input ?? 0,
        output: u.output ?? 0,
        reasoning: u.reasoning ?? 0,
        cacheRead: u.cacheRead ?? 0,
        cacheWrite: u.cacheWrite ?? 0,
        cost: u.cost ?? 0,
        costKnown: u.costKnown !== false,
        ttftMs: c.stepFirstMs
      })
      c.stepAt = null
      c.stepFirstMs = null
      return
    }
    case "tool.finished": {
      const p = parse<{ callId: string; metadata?: unknown }>(json)
      const exit = failedExit(p.metadata)
      if (exit === undefined) sink.toolEnded(sessionId, p.callId, at, "ok", null, null)
      else sink.toolEnded(sessionId, p.callId, at, "exit", `exit code ${exit.code}`, null)
      return
    }
    case "tool.failed": {
      const p = parse<{
        callId: string
        error: string
        interrupted?: boolean
        timedOut?: boolean
        reason?: string
      }>(json)
      const outcome = p.interrupted === true ? "interrupted" : p.timedOut === true ? "timeout" : "error"
      sink.toolEnded(sessionId, p.callId, at, outcome, firstLine(p.error), p.reason ?? null)
      return
    }
    case "turn.started":
      c.turnSeq = seq
      sink.turnStarted(sessionId, seq, at, c.model)
      return
    case "turn.finished":
    case "turn.interrupted": {
      const reason = parse<{ reason: string }>(json).reason
      sink.turnEnded(sessionId, c.turnSeq, seq, at, c.model, type === "turn.interrupted", reason)
      c.turnSeq = null
      return
    }
    case "model.retry": {
      const p = parse<{ message: string; status?: number }>(json)
      sink.retry(sessionId, seq, at, c.model, p.status ?? null, firstLine(p.message))
      return
    }
  }
}

/**
 * The stats index tables (migration `3_stats`); each row is one step, tool call, turn or retry.
 * `WITHOUT ROWID`: the primary key is the table, so a row the append path writes is one B-tree
 * insert plus the `at` index (the `--since` filter), not three.
 */
export const STATS_SCHEMA: ReadonlyArray<string> = [
  `CREATE TABLE stat_steps (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    at INTEGER NOT NULL,
    model TEXT,
    prompt_version TEXT,
    aborted INTEGER NOT NULL,
    input INTEGER NOT NULL,
    output INTEGER NOT NULL,
    reasoning INTEGER NOT NULL,
    cache_read INTEGER NOT NULL,
    cache_write INTEGER NOT NULL,
    cost REAL NOT NULL,
    cost_known INTEGER NOT NULL,
    ttft_ms INTEGER,
    PRIMARY KEY (session_id, seq)
  ) WITHOUT ROWID`,
  "CREATE INDEX stat_steps_at ON stat_steps (at)",
  `CREATE TABLE stat_tools (
    session_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    at INTEGER NOT NULL,
    model TEXT,
    tool TEXT NOT NULL,
    outcome TEXT NOT NULL,
    error TEXT,
    reason TEXT,
    ended_at INTEGER,
    PRIMARY KEY (session_id, call_id)
  ) WITHOUT ROWID`,
  "CREATE INDEX stat_tools_at ON stat_tools (at)",
  `CREATE TABLE stat_turns (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    at INTEGER NOT NULL,
    model TEXT,
    outcome TEXT NOT NULL,
    reason TEXT,
    ended_at INTEGER,
    PRIMARY KEY (session_id, seq)
  ) WITHOUT ROWID`,
  "CREATE INDEX stat_turns_at ON stat_turns (at)",
  `CREATE TABLE stat_retries (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    at INTEGER NOT NULL,
    model TEXT,
    status INTEGER,
    reason TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
  ) WITHOUT ROWID`,
  "CREATE INDEX stat_retries_at ON stat_retries (at)",
  "ALTER TABLE sessions ADD COLUMN stat_step_at INTEGER",
  "ALTER TABLE sessions ADD COLUMN stat_step_first_ms INTEGER",
  "ALTER TABLE sessions ADD COLUMN stat_turn_seq INTEGER"
]

/**
 * Migration `5_stats_calls`: every call the model sent gets a row (refused calls have no
 * `tool.invoked`), `ran` says whether it was invoked, and a command's non-zero exit is its outcome.
 * The tool rows are derived again from these event types (`tool.finished` read as its call id and
 * exit code only).
 */
export const STATS_CALLS_SCHEMA: ReadonlyArray<string> = [
  "ALTER TABLE stat_tools ADD COLUMN ran INTEGER NOT NULL DEFAULT 0",
  "DELETE FROM stat_tools"
]
export const STATS_CALL_TYPES: ReadonlyArray<string> = [
  "session.created",
  "assistant.started",
  "tool.pending",
  "tool.invoked",
  "tool.finished",
  "tool.failed"
]

/** The statements a `StatsSink` over SQLite runs (positional parameters, in the sink's order). */
export const STATS_SQL = {
  step: `INSERT OR REPLACE INTO stat_steps (session_id, seq, at, model, prompt_version, aborted, input, output,
    reasoning, cache_read, cache_write, cost, cost_known, ttft_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  toolPending: `INSERT OR IGNORE INTO stat_tools (session_id, call_id, seq, at, model, tool, outcome, ran)
    VALUES (?, ?, ?, ?, ?, ?, 'pending', 0)`,
  toolInvoked: `INSERT OR REPLACE INTO stat_tools (session_id, call_id, seq, at, model, tool, outcome, ran)
    VALUES (?, ?, ?, ?, ?, ?, 'open', 1)`,
  toolEnded: `UPDATE stat_tools SET ended_at = ?,
    outcome = CASE WHEN outcome = 'pending' AND ? = 'error' THEN 'refused' ELSE ? END, error = ?, reason = ?
    WHERE session_id = ? AND call_id = ? AND outcome IN ('pending', 'open')`,
  turnStarted: "INSERT OR REPLACE INTO stat_turns (session_id, seq, at, model, outcome) VALUES (?, ?, ?, ?, 'open')",
  turnEnded:
    "UPDATE stat_turns SET ended_at = ?, model = ?, outcome = ?, reason = ? WHERE session_id = ? AND seq = ? AND outcome = 'open'",
  turnOrphan: `INSERT OR REPLACE INTO stat_turns (session_id, seq, at, model, outcome, reason, ended_at)
    VALUES (?, ?, ?, ?, ?, ?, ?)`,
  retry: "INSERT OR REPLACE INTO stat_retries (session_id, seq, at, model, status, reason) VALUES (?, ?, ?, ?, ?, ?)"
} as const

/** A sink that runs `STATS_SQL` through `run(statement, params)` (better-sqlite3 statements or a client). */
export const sqlSink = (
  run: (statement: keyof typeof STATS_SQL, params: ReadonlyArray<unknown>) => void
): StatsSink => ({
  step: (r) =>
    run("step", [
      r.sessionId,
      r.seq,
      r.at,
      r.model,
      r.promptVersion,
      r.aborted ? 1 : 0,
      r.input,
      r.output,
      r.reasoning,
      r.cacheRead,
      r.cacheWrite,
      r.cost,
      r.costKnown ? 1 : 0,
      r.ttftMs
    ]),
  toolPending: (sessionId, callId, seq, at, model, tool) =>
    run("toolPending", [sessionId, callId, seq, at, model, tool]),
  toolInvoked: (sessionId, callId, seq, at, model, tool) =>
    run("toolInvoked", [sessionId, callId, seq, at, model, tool]),
  toolEnded: (sessionId, callId, at, outcome, error, reason) =>
    run("toolEnded", [at, outcome, outcome, error, reason, sessionId, callId]),
  turnStarted: (sessionId, seq, at, model) => run("turnStarted", [sessionId, seq, at, model]),
  turnEnded: (sessionId, startSeq, seq, at, model, interrupted, reason) => {
    const outcome = interrupted ? "interrupted" : "finished"
    if (startSeq === null) run("turnOrphan", [sessionId, seq, at, model, outcome, reason, at])
    else run("turnEnded", [at, model, outcome, reason, sessionId, startSeq])
  },
  retry: (sessionId, seq, at, model, status, reason) => run("retry", [sessionId, seq, at, model, status, reason])
})
