/**
 * The SQLite EventStore backend (the default): one database file, WAL, `synchronous=NORMAL`,
 * a busy timeout, created with mode 0600, migrations as an append-only record.
 *
 * Before anything touches the file, `preflight` opens it read-only and checks that it is a
 * logbook database this version understands; a foreign, corrupt or newer file gets a
 * `DatabaseError` naming the file and is never modified.
 *
 * Reads and writes share the one connection of the `SqlClient`. Every write runs in `BEGIN
 * IMMEDIATE` (`immediate`), so two processes appending to the same session queue on SQLite's write
 * lock (with the busy timeout) instead of failing on a stale read snapshot; seqs are computed
 * inside that transaction and stay gapless.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import Database from "better-sqlite3"
import { Cause, Clock, Effect, Layer, Option, type Scope, Stream } from "effect"
import type { EnvelopeHeader } from "../domain/Events.js"
import type { EventId, SessionId } from "../domain/Ids.js"
import { DatabaseError, EventStoreError, LeaseHeld } from "./Errors.js"
import { eventHash, genesisHash } from "./internal/chain.js"
import { layerReadOnly, type ReadPlan } from "./internal/readOnly.js"
import type { Lease, SessionStatusName, SessionSummary, Snapshot } from "./internal/records.js"
import {
  deriveStats,
  emptyCursor,
  STATS_CALL_TYPES,
  STATS_CALLS_SCHEMA,
  STATS_SCHEMA,
  STATS_SQL,
  STATS_TYPES,
  type StatsCursor,
  sqlSink
} from "./internal/statsIndex.js"
import {
  type Backend,
  type BackendImportItem,
  type ChainMark,
  type ChainRow,
  type CommitRequest,
  emptySummary,
  eventExistsError,
  fencedError,
  type PreparedEvent,
  RELEASED_LEASE,
  repeatedEventError,
  type StoredRow,
  type StoredSnapshot,
  sessionExistsError,
  storeError,
  summarize,
  summarizeEvent
} from "./internal/storeService.js"
import {
  consistentRead,
  describeSqliteError,
  makeImmediate,
  reservedWriteTransaction,
  singleConnection,
  type WriteTransaction,
  writeTransaction
} from "./internal/writeTransaction.js"

/** `PRAGMA application_id` of every logbook database: "LOGB". */
export const APPLICATION_ID = 0x4c4f4742
export const MIGRATIONS_TABLE = "logbook_migrations"

/** The append-only migration record. Never edit an entry; add a new one. */
export const migrations: Record<string, Effect.Effect<void, SqlError, SqlClient.SqlClient>> = {
  "1_init": Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE events (
      session_id TEXT NOT NULL,
      seq INTEGER NOT NULL,
      id TEXT NOT NULL,
      type TEXT NOT NULL,
      at INTEGER NOT NULL,
      parent_id TEXT,
      v INTEGER NOT NULL,
      payload TEXT NOT NULL,
      PRIMARY KEY (session_id, seq)
    )`
    yield* sql`CREATE UNIQUE INDEX events_id ON events (id)`
    yield* sql`CREATE INDEX events_type_at ON events (type, at)`
    yield* sql`CREATE TABLE sessions (
      id TEXT PRIMARY KEY,
      title TEXT,
      cwd TEXT,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      last_seq INTEGER NOT NULL,
      status TEXT NOT NULL,
      deleted INTEGER NOT NULL DEFAULT 0
    )`
    yield* sql`CREATE INDEX sessions_updated ON sessions (updated_at)`
    yield* sql`CREATE TABLE snapshots (
      session_id TEXT NOT NULL,
      version INTEGER NOT NULL,
      seq INTEGER NOT NULL,
      at INTEGER NOT NULL,
      state TEXT NOT NULL,
      hash TEXT,
      PRIMARY KEY (session_id, version, seq)
    )`
    yield* sql`CREATE TABLE blobs (hash TEXT PRIMARY KEY, size INTEGER NOT NULL, data BLOB NOT NULL)`
    yield* sql`CREATE TABLE leases (session_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at INTEGER NOT NULL)`
    yield* sql.unsafe(`PRAGMA application_id = ${APPLICATION_ID}`)
  }),
  // what `sessions list` shows without folding events: the model, how the last turn ended (or that
  // one is open) and the cost, kept by `summarize` on every append; older rows are filled in from
  // their events by the same fold (`summarizeEvent`), reading only the event types it needs
  "2_session_outcome": Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`ALTER TABLE sessions ADD COLUMN model TEXT`
    yield* sql`ALTER TABLE sessions ADD COLUMN turn_open INTEGER NOT NULL DEFAULT 0`
    yield* sql`ALTER TABLE sessions ADD COLUMN last_turn_reason TEXT`
    yield* sql`ALTER TABLE sessions ADD COLUMN last_turn_interrupted INTEGER NOT NULL DEFAULT 0`
    yield* sql`ALTER TABLE sessions ADD COLUMN cost REAL NOT NULL DEFAULT 0`
    yield* sql`ALTER TABLE sessions ADD COLUMN cost_known INTEGER NOT NULL DEFAULT 1`
    const types = ["session.created", "assistant.started", "step.finished", "compaction.done", ...TURN_TYPES]
    const ids = yield* sql<{ id: string }>`SELECT id FROM sessions`
    for (const { id } of ids) {
      const rows = yield* sql<{ type: string; payload: string }>`SELECT type, payload FROM events
        WHERE session_id = ${id} AND ${sql.in("type", types)} ORDER BY seq`
      const s = { ...emptySummary(id as SessionId, 0) }
      for (const row of rows) summarizeEvent(s, row.type, row.payload)
      yield* sql`UPDATE sessions SET model = ${s.model}, turn_open = ${s.turnOpen ? 1 : 0},
        last_turn_reason = ${s.lastTurn?.reason ?? null}, last_turn_interrupted = ${s.lastTurn?.interrupted ? 1 : 0},
        cost = ${s.cost}, cost_known = ${s.costKnown ? 1 : 0} WHERE id = ${id}`
    }
  }),
  // the stats index (`internal/statsIndex.ts`, read by `Stats.ts`): a row per step, tool call, turn
  // and retry, kept by the append path; older sessions are filled in from their events by the same
  // fold (`deriveStats`), reading only the event types it needs, one session at a time
  "3_stats": Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    for (const statement of STATS_SCHEMA) yield* sql.unsafe(statement)
    const ids = yield* sql<{ id: string }>`SELECT id FROM sessions`
    for (const { id } of ids) {
      // deltas only mark a step's first token: their (many, large) payloads are not read
      const rows = yield* sql<{ seq: number; type: string; at: number; payload: string }>`SELECT seq, type, at,
        CASE WHEN type IN ('text.delta', 'reasoning.delta', 'tool.pending') THEN '{}' ELSE payload END AS payload
        FROM events WHERE session_id = ${id} AND ${sql.in("type", STATS_TYPES)} ORDER BY seq`
      const writes: Array<readonly [keyof typeof STATS_SQL, ReadonlyArray<unknown>]> = []
      // the tool rows are migration 5's (`5_stats_calls` derives them, with the column it adds)
      const sink = {
        ...sqlSink((statement, params) => writes.push([statement, params])),
        toolPending: () => {},
        toolInvoked: () => {},
        toolEnded: () => {}
      }
      const cursor = emptyCursor()
      for (const row of rows) deriveStats(cursor, sink, id, row.seq, row.type, row.at, row.payload)
      for (const [statement, params] of writes) {
        yield* sql.unsafe(STATS_SQL[statement], params as Array<unknown>)
      }
      yield* sql`UPDATE sessions SET stat_step_at = ${cursor.stepAt}, stat_step_first_ms = ${cursor.stepFirstMs},
        stat_turn_seq = ${cursor.turnSeq} WHERE id = ${id}`
    }
  }),
  // the hash chain (`internal/chain.ts`, docs/event-log.md "The hash chain"): every row's hash over
  // its content and the previous row's hash, written by the append path from now on; the rows of
  // older sessions are chained here, one session at a time in pages, and the session is marked
  // `migrated` through its last seq, so `verify` can say since when its chain guards it
  "4_chain": Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`ALTER TABLE events ADD COLUMN prev_hash TEXT`
    yield* sql`ALTER TABLE events ADD COLUMN hash TEXT`
    yield* sql`CREATE TABLE chain_marks (session_id TEXT PRIMARY KEY, reason TEXT NOT NULL,
      through_seq INTEGER NOT NULL, at INTEGER NOT NULL)`
    const now = yield* Clock.currentTimeMillis
    const ids = yield* sql<{ session_id: string }>`SELECT DISTINCT session_id FROM events`
    for (const { session_id: sessionId } of ids) {
      let prev = genesisHash(sessionId)
      let after = 0
      while (true) {
        const rows = yield* sql<EventRow & { payload: string }>`SELECT session_id, seq, id, type, at, parent_id, v,
          payload FROM events WHERE session_id = ${sessionId} AND seq > ${after} ORDER BY seq LIMIT 1000`
        if (rows.length === 0) break
        // one UPDATE … FROM (VALUES …) per 200 rows, not a statement per row
        for (let i = 0; i < rows.length; i += 200) {
          const params: Array<unknown> = []
          for (const r of rows.slice(i, i + 200)) {
            const hash = eventHash(prev, { ...toHeader(r), json: r.payload })
            params.push(r.seq, prev, hash)
            prev = hash
            after = r.seq
          }
          const values = Array.from({ length: params.length / 3 }, () => "(?, ?, ?)").join(", ")
          yield* sql.unsafe(
            `UPDATE events SET prev_hash = v.column2, hash = v.column3 FROM (VALUES ${values}) AS v
            WHERE events.session_id = ? AND events.seq = v.column1`,
            [...params, sessionId]
          )
        }
      }
      yield* sql`INSERT INTO chain_marks (session_id, reason, through_seq, at) VALUES (${sessionId}, 'migrated', ${after}, ${now})`
    }
  }),
  // the stats index counts every call the model sent (docs/stats.md): a row from `tool.pending`, so a
  // call refused before it ran counts, `ran` for the calls that were invoked, and a command's
  // non-zero exit as its outcome; the tool rows are derived again by the same fold
  "5_stats_calls": Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    for (const statement of STATS_CALLS_SCHEMA) yield* sql.unsafe(statement)
    const ids = yield* sql<{ id: string }>`SELECT id FROM sessions`
    const none = () => {}
    for (const { id } of ids) {
      // a finished call's output is not read: its call id and exit code are all the fold needs
      const rows = yield* sql<{ seq: number; type: string; at: number; payload: string }>`SELECT seq, type, at,
        CASE WHEN type = 'tool.finished' THEN json_object('callId', json_extract(payload, '$.callId'),
          'metadata', json_object('exitCode', json_extract(payload, '$.metadata.exitCode'))) ELSE payload END AS payload
        FROM events WHERE session_id = ${id} AND ${sql.in("type", STATS_CALL_TYPES)} ORDER BY seq`
      const writes: Array<readonly [keyof typeof STATS_SQL, ReadonlyArray<unknown>]> = []
      const sink = {
        ...sqlSink((statement, params) => writes.push([statement, params])),
        step: none,
        turnStarted: none,
        turnEnded: none,
        retry: none
      }
      const cursor = emptyCursor()
      for (const row of rows) deriveStats(cursor, sink, id, row.seq, row.type, row.at, row.payload)
      for (const [statement, params] of writes) {
        yield* sql.unsafe(STATS_SQL[statement], params as Array<unknown>)
      }
    }
  })
}

const TURN_TYPES = ["turn.started", "turn.finished", "turn.interrupted"]

export const LATEST_MIGRATION = Math.max(...Object.keys(migrations).map((k) => Number(k.split("_")[0])))

export interface SqliteOptions {
  readonly filename: string
  /** create the file (and its directory) when missing; default true */
  readonly create?: boolean | undefined
  /**
   * open for reading only: nothing is created, migrated or written, and the file may belong to
   * another user (read permission is enough). Writes fail with `EventStoreError`. Implies
   * `create: false`.
   */
  readonly readonly?: boolean | undefined
  /** how long a write waits for another process's lock (ms); default 10000 */
  readonly busyTimeoutMs?: number | undefined
  /**
   * read-only, while reading a private copy: how often to look whether the file changed (ms);
   * default 1000
   */
  readonly refreshMs?: number | undefined
}

const SQLITE_MAGIC = "SQLite format 3\u0000"

const dbError = (file: string, reason: DatabaseError["reason"], message: string) =>
  new DatabaseError({ file, reason, message })

/** What the read-only look at an existing SQLite file found. */
type Inspection =
  | { readonly _tag: "logbook"; readonly schema: number }
  /** an SQLite file with nothing in it yet (no tables, no ids): ours to set up */
  | { readonly _tag: "blank" }
  /**
   * a WAL database SQLite cannot open read-only where it is: its -wal / -shm files are missing
   * (or unreadable) and the directory is not writable, so the shared index cannot be made
   */
  | { readonly _tag: "no-wal-index"; readonly message: string }
  | { readonly _tag: "refused"; readonly error: DatabaseError }

const IN_PLACE: ReadPlan = { _tag: "in-place" }

/**
 * Checks a database file without modifying it: absent (created when `create`), empty, or a logbook
 * database this version understands. Anything else is a `DatabaseError` naming the file. For a
 * read-only open it also says how to read the file (`ReadPlan`).
 */
export const preflight = (
  file: string,
  options: { readonly create: boolean; readonly readonly: boolean }
): Effect.Effect<ReadPlan, DatabaseError> =>
  Effect.suspend(() => {
    const create = options.create && !options.readonly
    let stat: fs.Stats | undefined
    try {
      stat = fs.statSync(file)
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") {
        return Effect.fail(dbError(file, "unreadable", `cannot read ${file}: ${(e as Error).message}`))
      }
    }
    if (stat === undefined) {
      if (!create) return Effect.fail(dbError(file, "missing", `no logbook database at ${file}`))
      try {
        fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 })
        fs.closeSync(fs.openSync(file, "wx", 0o600))
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") {
          return Effect.fail(dbError(file, "unreadable", `cannot create ${file}: ${(e as Error).message}`))
        }
      }
      return Effect.succeed(IN_PLACE)
    }
    if (stat.isDirectory()) {
      return Effect.fail(dbError(file, "unreadable", `${file} is a directory, not a database file`))
    }
    if (!options.readonly) {
      const denied = writeDenied(file)
      if (denied !== undefined) return Effect.fail(dbError(file, "read-only", denied))
    }
    if (stat.size === 0) {
      return create
        ? Effect.succeed(IN_PLACE)
        : Effect.fail(dbError(file, "missing", `${file} is empty: no logbook database yet`))
    }
    let header: Buffer
    try {
      const fd = fs.openSync(file, "r")
      try {
        header = Buffer.alloc(20)
        fs.readSync(fd, header, 0, 20, 0)
      } finally {
        fs.closeSync(fd)
      }
    } catch (e) {
      return Effect.fail(dbError(file, "unreadable", `cannot read ${file}: ${(e as Error).message}`))
    }
    if (header.subarray(0, 16).toString("latin1") !== SQLITE_MAGIC) {
      return Effect.fail(dbError(file, "not-logbook", `${file} is not a logbook database (not an SQLite file)`))
    }
    // A read-only connection to a WAL database may create -wal / -shm files. When the file turns out
    // not to be ours, remove the ones this check made — only while they are still empty or alone,
    // so a file another program has started to use meanwhile is never touched.
    const wal = `${file}-wal`
    const shm = `${file}-shm`
    const hadWal = fs.existsSync(wal)
    const hadShm = fs.existsSync(shm)
    // bytes 18 and 19 of the header are 2 in WAL mode
    const walMode = header[18] === 2
    // Reading in place would create the -wal / -shm files. Next to another user's file they would be
    // this user's, and its owner's writers could no longer write them: read a copy instead. (Root's
    // are handed to the file's owner by SQLite itself.)
    const uid = process.getuid?.()
    if (options.readonly && walMode && (!hadWal || !hadShm) && uid !== undefined && uid !== 0 && uid !== stat.uid) {
      return Effect.succeed<ReadPlan>({
        _tag: "copy",
        why: "it belongs to another user and has no -wal / -shm files, which reading it in place would create"
      })
    }
    const found = inspect(file, { walMode })
    const refuse = (error: DatabaseError) => {
      if (!hadWal && fs.existsSync(wal) && fs.statSync(wal).size === 0) fs.rmSync(wal, { force: true })
      if (!hadShm && !fs.existsSync(wal)) fs.rmSync(shm, { force: true })
      return Effect.fail(error)
    }
    return planFor(file, found, options, refuse)
  })

/** What `preflight` makes of an inspection (also of a private copy's, named by the original `file`). */
export const planFor = (
  file: string,
  found: Inspection,
  options: { readonly create: boolean; readonly readonly: boolean },
  refuse: (error: DatabaseError) => Effect.Effect<never, DatabaseError> = Effect.fail
): Effect.Effect<ReadPlan, DatabaseError> => {
  switch (found._tag) {
    case "refused":
      return refuse(found.error)
    case "no-wal-index":
      return options.readonly
        ? Effect.succeed({ _tag: "copy", why: found.message })
        : Effect.fail(dbError(file, "read-only", `cannot open ${file} for writing: ${found.message}`))
    case "blank":
      return options.create && !options.readonly
        ? Effect.succeed(IN_PLACE)
        : refuse(dbError(file, "missing", `${file} holds no logbook data yet`))
    case "logbook":
      if (found.schema > LATEST_MIGRATION) {
        return Effect.fail(
          dbError(
            file,
            "newer-schema",
            `${file} was written by a newer logbook (schema ${found.schema}, this version knows up to ${LATEST_MIGRATION}); upgrade logbook`
          )
        )
      }
      if (options.readonly && found.schema < LATEST_MIGRATION) {
        return Effect.succeed({
          _tag: "copy",
          olderSchema: found.schema,
          why: `it has schema ${found.schema}, older than this logbook's ${LATEST_MIGRATION}`
        })
      }
      return Effect.succeed(IN_PLACE)
  }
}

/** Why this user may not write the database file or its directory (SQLite needs both), if so. */
const writeDenied = (file: string): string | undefined => {
  try {
    fs.accessSync(file, fs.constants.W_OK)
  } catch {
    return `${file} is read-only to this user: a command that writes (run, compact, sessions delete) cannot use it, the read commands can`
  }
  const dir = path.dirname(file)
  try {
    fs.accessSync(dir, fs.constants.W_OK)
  } catch {
    return `the directory of ${file} is read-only to this user (SQLite writes its -wal and -shm files there): a command that writes (run, compact, sessions delete) cannot use it, the read commands can`
  }
  return undefined
}

/** The codes of a read-only WAL open that failed for want of the -wal / -shm index, not of the file. */
const NO_WAL_INDEX = new Set(["SQLITE_READONLY_DIRECTORY", "SQLITE_CANTOPEN", "SQLITE_READONLY_CANTINIT"])

/**
 * Looks at an SQLite file read-only: is it a logbook database, and of which schema? `name` is
 * the file the messages name (the original, when `file` is a private copy of it).
 */
export const inspect = (
  file: string,
  options: { readonly walMode?: boolean | undefined; readonly name?: string | undefined } = {}
): Inspection => {
  const name = options.name ?? file
  let db: Database.Database | undefined
  try {
    db = new Database(file, { readonly: true, fileMustExist: true })
    const appId = db.pragma("application_id", { simple: true }) as number
    const userVersion = db.pragma("user_version", { simple: true }) as number
    const tables = db.prepare("SELECT name FROM sqlite_master").pluck().all() as Array<string>
    if (appId !== APPLICATION_ID) {
      if (tables.length === 0 && appId === 0 && userVersion === 0) return { _tag: "blank" }
      return {
        _tag: "refused",
        error: dbError(name, "not-logbook", `${name} is an SQLite database, but not a logbook database`)
      }
    }
    const schema = tables.includes(MIGRATIONS_TABLE)
      ? ((db.prepare(`SELECT max(migration_id) FROM ${MIGRATIONS_TABLE}`).pluck().get() as number | null) ?? 0)
      : 0
    return { _tag: "logbook", schema }
  } catch (e) {
    const code = (e as { code?: string }).code ?? ""
    if (code === "SQLITE_CORRUPT" || code === "SQLITE_NOTADB") {
      return {
        _tag: "refused",
        error: dbError(name, "corrupt", `${name} is damaged (${(e as Error).message}); it was not modified`)
      }
    }
    if (options.walMode === true && NO_WAL_INDEX.has(code)) {
      return {
        _tag: "no-wal-index",
        message:
          `it is a WAL database whose ${path.basename(file)}-wal / -shm files are missing or unreadable, ` +
          `and this user cannot create them in ${path.dirname(file)}`
      }
    }
    return { _tag: "refused", error: dbError(name, "unreadable", `cannot open ${name}: ${(e as Error).message}`) }
  } finally {
    db?.close()
  }
}

interface SessionRow {
  readonly id: string
  readonly title: string | null
  readonly cwd: string | null
  readonly created_at: number
  readonly updated_at: number
  readonly last_seq: number
  readonly status: string
  readonly deleted: number
  readonly model: string | null
  readonly turn_open: number
  readonly last_turn_reason: string | null
  readonly last_turn_interrupted: number
  readonly cost: number
  readonly cost_known: number
  readonly stat_step_at: number | null
  readonly stat_step_first_ms: number | null
  readonly stat_turn_seq: number | null
}

/** A row of `SELECT_COMMIT_STATE`: the session's columns are all NULL when it has no index row. */
type CommitStateRow = { readonly [K in keyof SessionRow]: SessionRow[K] | null } & {
  readonly lease_owner: string | null
  readonly last_row_seq: number | null
  readonly last_row_hash: string | null
}

const toCursor = (r: SessionRow | undefined): StatsCursor =>
  r === undefined
    ? emptyCursor()
    : { model: r.model, stepAt: r.stat_step_at, stepFirstMs: r.stat_step_first_ms, turnSeq: r.stat_turn_seq }

const toSummary = (r: SessionRow): SessionSummary => ({
  id: r.id as SessionId,
  title: r.title,
  cwd: r.cwd,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  lastSeq: r.last_seq,
  status: r.status as SessionStatusName,
  deleted: r.deleted !== 0,
  model: r.model,
  turnOpen: r.turn_open !== 0,
  lastTurn:
    r.last_turn_reason === null ? null : { reason: r.last_turn_reason, interrupted: r.last_turn_interrupted !== 0 },
  cost: r.cost,
  costKnown: r.cost_known !== 0
})

interface EventRow {
  readonly session_id: string
  readonly seq: number
  readonly id: string
  readonly type: string
  readonly at: number
  readonly parent_id: string | null
  readonly v: number
}

const toHeader = (r: EventRow): EnvelopeHeader => ({
  id: r.id as EventId,
  sessionId: r.session_id as SessionId,
  seq: r.seq,
  type: r.type,
  at: r.at,
  parentId: r.parent_id as EventId | null,
  v: r.v
})

/** Rows per multi-row INSERT statement (10 parameters each, well below SQLite's limit). */
const INSERT_CHUNK = 100
const EVENT_COLUMNS = 10
const INSERT_PREFIX =
  "INSERT INTO events (session_id, seq, id, type, at, parent_id, v, payload, prev_hash, hash) VALUES "
const INSERT_ROW = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
/**
 * What a commit reads of a session, in one statement: its index row (all NULL when it has none),
 * its lease holder, and its last row's seq and hash, what the next row chains from (primary-key
 * lookups). Parameters: the session id three times.
 */
const SELECT_COMMIT_STATE = `SELECT s.*, (SELECT owner FROM leases WHERE session_id = ?) AS lease_owner,
    l.seq AS last_row_seq, l.hash AS last_row_hash
  FROM (SELECT ? AS id) AS k LEFT JOIN sessions AS s ON s.id = k.id
  LEFT JOIN (SELECT seq, hash FROM events WHERE session_id = ? ORDER BY seq DESC LIMIT 1) AS l ON 1`
/**
 * Whether the database is as this process's last commit left it: `data_version` (moved by another
 * connection's commit) and this connection's `total_changes()` (moved by any row it changes).
 */
const SELECT_VALIDITY = "SELECT data_version AS dv, total_changes() AS tc FROM pragma_data_version()"
interface Validity {
  readonly dv: number
  readonly tc: number
}
/** A session as this process's last commit of it left it (`makeWriter`'s `known`). */
interface KnownSession {
  /** its index row; none when it had none */
  readonly summary: SessionSummary | undefined
  readonly cursor: StatsCursor
  readonly holder: string | undefined
  readonly seq: number
  /** the hash its next row chains to */
  readonly prev: string
}
/** the most sessions `known` keeps (it starts over beyond) */
const KNOWN_SESSIONS = 256
/** what a row whose predecessor has no hash (a row written around logbook) is chained to */
export const UNCHAINED_PREV = "0".repeat(64)
const UPSERT_SESSION = `INSERT INTO sessions (id, title, cwd, created_at, updated_at, last_seq, status, deleted,
    model, turn_open, last_turn_reason, last_turn_interrupted, cost, cost_known, stat_step_at, stat_step_first_ms,
    stat_turn_seq)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (id) DO UPDATE SET title = excluded.title, cwd = excluded.cwd, updated_at = excluded.updated_at,
    last_seq = excluded.last_seq, status = excluded.status, deleted = excluded.deleted, model = excluded.model,
    turn_open = excluded.turn_open, last_turn_reason = excluded.last_turn_reason,
    last_turn_interrupted = excluded.last_turn_interrupted, cost = excluded.cost, cost_known = excluded.cost_known,
    stat_step_at = excluded.stat_step_at, stat_step_first_ms = excluded.stat_step_first_ms,
    stat_turn_seq = excluded.stat_turn_seq`

/** The statement that inserts `rows` events (1 to `INSERT_CHUNK`), built once per row count. */
const insertSql: Array<string> = []
const insertRows = (rows: number): string =>
  (insertSql[rows] ??= INSERT_PREFIX + Array.from({ length: rows }, () => INSERT_ROW).join(", "))

const SELECT_LEASE = "SELECT owner, expires_at FROM leases WHERE session_id = ?"
const PUT_BLOB = "INSERT OR IGNORE INTO blobs (hash, size, data) VALUES (?, ?, ?)"
const SELECT_EVENT_SESSION = "SELECT session_id FROM events WHERE id = ?"
const SESSION_EXISTS =
  "SELECT 1 AS one FROM sessions WHERE id = ? UNION ALL SELECT 1 FROM events WHERE session_id = ? LIMIT 1"
const MARK_CHAIN = "INSERT OR REPLACE INTO chain_marks (session_id, reason, through_seq, at) VALUES (?, ?, ?, ?)"
const INSERT_SNAPSHOT =
  "INSERT OR REPLACE INTO snapshots (session_id, version, seq, at, state, hash) VALUES (?, ?, ?, ?, ?, ?)"
const PRUNE_SNAPSHOTS = `DELETE FROM snapshots WHERE session_id = ? AND version = ? AND seq NOT IN
  (SELECT seq FROM snapshots WHERE session_id = ? AND version = ? ORDER BY seq DESC LIMIT ?)`
const UPSERT_LEASE = `INSERT INTO leases (session_id, owner, expires_at) VALUES (?, ?, ?)
  ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at`
const DELETE_LEASE = "DELETE FROM leases WHERE session_id = ? AND owner = ?"

const blobBytes = (content: Uint8Array) => Buffer.from(content.buffer, content.byteOffset, content.byteLength)

/**
 * What the writer's steps share: its transactions, and what the last commits of this process left
 * of each session they wrote — its index row, stats cursor, lease holder, last seq and the hash the
 * next row chains to — so a commit need not read them again. `known` is valid only while nothing
 * else changed the database: `valid` is the database's `data_version` (changed by every commit of
 * another connection, i.e. another process) and this connection's `total_changes()` (changed by
 * every row any other write of this process touches: a lease, a snapshot, a statement through the
 * `SqlClient`) as the last commit left them. A commit checks both first, inside its transaction,
 * and forgets everything when either moved.
 */
interface Writer {
  readonly transact: WriteTransaction
  /** for a write whose body waits for something else (an import reading its file): reserves the connection */
  readonly reserved: WriteTransaction
  readonly known: Map<SessionId, KnownSession>
  valid: Validity | undefined
}

/** A commit's requests by session, in order of first appearance: the indexes of each session's requests. */
const bySession = (requests: ReadonlyArray<CommitRequest>): Map<SessionId, Array<number>> => {
  const sessions = new Map<SessionId, Array<number>>()
  requests.forEach((r, i) => {
    const list = sessions.get(r.sessionId)
    if (list === undefined) sessions.set(r.sessionId, [i])
    else list.push(i)
  })
  return sessions
}

/** A session as `SELECT_COMMIT_STATE` found it. */
const knownFrom = (sessionId: SessionId, state: CommitStateRow): KnownSession => {
  const current: SessionRow | undefined = state.id === null ? undefined : (state as SessionRow)
  return {
    summary: current ? toSummary(current) : undefined,
    cursor: toCursor(current),
    holder: state.lease_owner ?? undefined,
    seq: state.last_row_seq ?? 0,
    prev: state.last_row_seq === null ? genesisHash(sessionId) : (state.last_row_hash ?? UNCHAINED_PREV)
  }
}

/**
 * The fence: a request written for a lease owner goes in only while that owner holds the lease
 * (one lease read per session, not per request). The refusal of the first that does not.
 */
const fenced = (
  sessionId: SessionId,
  holder: string | undefined,
  requests: ReadonlyArray<CommitRequest>,
  indexes: ReadonlyArray<number>
): EventStoreError | undefined => {
  for (const i of indexes) {
    const owner = requests[i]!.owner
    if (owner !== undefined && holder !== owner) return fencedError(sessionId, owner, holder)
  }
  return undefined
}

/** What a session's requests in a commit come to: its rows, its stats statements and its state after them. */
interface SessionWrite {
  /** the rows' columns, `EVENT_COLUMNS` per row */
  readonly params: Array<unknown>
  /** the stats statements in the order the fold made them */
  readonly stats: Array<readonly [keyof typeof STATS_SQL, ReadonlyArray<unknown>]>
  readonly summary: SessionSummary
  readonly cursor: StatsCursor
  readonly seq: number
  readonly prev: string
}

/**
 * Numbers, chains and folds a session's requests after `before`: each event's row with its hash,
 * the stats the fold derives, and the index row after them; `firstSeqs[i]` gets request i's first seq.
 */
const foldSession = (
  sessionId: SessionId,
  before: KnownSession,
  requests: ReadonlyArray<CommitRequest>,
  indexes: ReadonlyArray<number>,
  firstSeqs: Array<number>
): SessionWrite => {
  let seq = before.seq
  let prev = before.prev
  let summary = before.summary
  // a copy: the fold below moves it, and `known` keeps what was committed
  const cursor: StatsCursor = { ...before.cursor }
  const stats: Array<readonly [keyof typeof STATS_SQL, ReadonlyArray<unknown>]> = []
  const statsSink = sqlSink((statement, params) => {
    stats.push([statement, params])
  })
  const params: Array<unknown> = []
  for (const i of indexes) {
    const events = requests[i]!.events
    firstSeqs[i] = seq + 1
    summary = summarize(summary, sessionId, seq + 1, events)
    for (const e of events) {
      seq++
      const hash = eventHash(prev, {
        sessionId,
        seq,
        id: e.id,
        type: e.type,
        at: e.at,
        parentId: e.parentId,
        v: e.v,
        json: e.json
      })
      params.push(sessionId, seq, e.id, e.type, e.at, e.parentId, e.v, e.json, prev, hash)
      prev = hash
      deriveStats(cursor, statsSink, sessionId, seq, e.type, e.at, e.json)
    }
  }
  return { params, stats, summary: summary!, cursor, seq, prev }
}

/** The parameters of `UPSERT_SESSION` for an index row and its stats cursor. */
const sessionParams = (s: SessionSummary, cursor: StatsCursor): ReadonlyArray<unknown> => [
  s.id,
  s.title,
  s.cwd,
  s.createdAt,
  s.updatedAt,
  s.lastSeq,
  s.status,
  s.deleted ? 1 : 0,
  s.model,
  s.turnOpen ? 1 : 0,
  s.lastTurn?.reason ?? null,
  s.lastTurn?.interrupted ? 1 : 0,
  s.cost,
  s.costKnown ? 1 : 0,
  cursor.stepAt,
  cursor.stepFirstMs,
  cursor.turnSeq
]

/**
 * The statements of a commit (its own transaction, or part of an import's, which does not use
 * `known`): per session, its state read (unless known), the fence, then the stats rows, the event
 * rows (one statement per `INSERT_CHUNK` rows, and one for the rest) and the index row.
 * `committed` brings `known` up to date once the transaction has committed.
 */
const commitBody = (w: Writer, conn: Connection, requests: ReadonlyArray<CommitRequest>, useKnown: boolean) =>
  Effect.gen(function* () {
    const run = (statement: string, params: ReadonlyArray<unknown>) => conn.execute(statement, params, undefined)
    // rows this body changes (a write's `changes`), for the validity it leaves
    let changes = 0
    const write = (statement: string, params: ReadonlyArray<unknown>) =>
      Effect.map(conn.executeRaw(statement, params), (result) => {
        changes += (result as { readonly changes: number }).changes
      })
    let checked: Validity | undefined
    if (useKnown) {
      checked = (yield* run(SELECT_VALIDITY, []))[0] as Validity
      if (w.valid === undefined || checked.dv !== w.valid.dv || checked.tc !== w.valid.tc) w.known.clear()
    }
    // one read of the last seq and one index update per session, however many requests it has
    const out: Array<number> = new Array(requests.length)
    const after: Array<readonly [SessionId, KnownSession]> = []
    for (const [sessionId, indexes] of bySession(requests)) {
      const before =
        (useKnown ? w.known.get(sessionId) : undefined) ??
        knownFrom(sessionId, (yield* run(SELECT_COMMIT_STATE, [sessionId, sessionId, sessionId]))[0] as CommitStateRow)
      const refused = fenced(sessionId, before.holder, requests, indexes)
      if (refused !== undefined) return yield* Effect.fail(refused)
      const { params, stats, summary, cursor, seq, prev } = foldSession(sessionId, before, requests, indexes, out)
      for (const [statement, values] of stats) yield* write(STATS_SQL[statement], values)
      for (let from = 0; from < params.length; from += INSERT_CHUNK * EVENT_COLUMNS) {
        const chunk = params.slice(from, from + INSERT_CHUNK * EVENT_COLUMNS)
        yield* write(insertRows(chunk.length / EVENT_COLUMNS), chunk)
      }
      yield* write(UPSERT_SESSION, sessionParams(summary, cursor))
      // what a read of the row just written would give (`toCursor` takes the model from the row)
      after.push([
        sessionId,
        {
          summary,
          cursor: { ...cursor, model: summary.model },
          holder: before.holder,
          seq,
          prev
        } satisfies KnownSession
      ])
    }
    const committed = (): void => {
      if (checked === undefined) return
      if (w.known.size + after.length > KNOWN_SESSIONS) w.known.clear()
      for (const [sessionId, state] of after) w.known.set(sessionId, state)
      w.valid = { dv: checked.dv, tc: checked.tc + changes }
    }
    return { firstSeqs: out as ReadonlyArray<number>, committed }
  })

/** Commits requests in one transaction; `known` is brought up to date right after COMMIT, before the connection is given back. */
const commit = (w: Writer) => (requests: ReadonlyArray<CommitRequest>) =>
  w
    .transact(
      (conn) => commitBody(w, conn, requests, true),
      (result) => result.committed()
    )
    .pipe(Effect.map((result) => result.firstSeqs))

/** Saves a snapshot and prunes the session's older ones of its version to the newest `keep`. */
const saveSnapshot = (w: Writer) => (s: Omit<Snapshot, "state">, stored: StoredSnapshot, keep: number) =>
  w.transact((conn) =>
    Effect.zipRight(
      conn.execute(INSERT_SNAPSHOT, [s.sessionId, s.version, s.seq, s.at, stored.json, stored.hash], undefined),
      conn.execute(PRUNE_SNAPSHOTS, [s.sessionId, s.version, s.sessionId, s.version, keep], undefined)
    )
  )

/** Stores a blob unless its hash is there already. */
const putBlob = (w: Writer) => (hash: string, content: Uint8Array) =>
  w.transact((conn) => conn.execute(PUT_BLOB, [hash, content.byteLength, blobBytes(content)], undefined))

/** Whether the database holds the session already (an index row or events). */
const sessionExists = (conn: Connection, sessionId: SessionId) =>
  Effect.map(conn.execute(SESSION_EXISTS, [sessionId, sessionId], undefined), (rows) => rows.length > 0)

/**
 * A whole session in one transaction: the check, the blobs, the events, the index row and the
 * chain mark (the file carried no hashes: the chain starts here).
 */
const importSession =
  (w: Writer) =>
  (
    sessionId: SessionId,
    events: ReadonlyArray<PreparedEvent>,
    blobs: ReadonlyArray<{ readonly hash: string; readonly content: Uint8Array }>,
    now: number
  ) =>
    w.transact((conn) =>
      Effect.gen(function* () {
        if (yield* sessionExists(conn, sessionId)) return yield* Effect.fail(sessionExistsError(sessionId))
        for (let i = 0; i < events.length; i++) {
          const other: { session_id: string } | undefined = (yield* conn.execute(
            SELECT_EVENT_SESSION,
            [events[i]!.id],
            undefined
          ))[0]
          if (other !== undefined) return yield* Effect.fail(eventExistsError(events[i]!.id, i + 1, other.session_id))
        }
        for (const { hash, content } of blobs) {
          yield* conn.execute(PUT_BLOB, [hash, content.byteLength, blobBytes(content)], undefined)
        }
        yield* commitBody(w, conn, [{ sessionId, events }], false)
        yield* conn.execute(MARK_CHAIN, [sessionId, "imported", events.length, now], undefined)
      })
    )

/** Where an import stands: its session (once given) and how many of its events are written. */
interface ImportProgress {
  sessionId: SessionId | undefined
  count: number
}

/**
 * Writes one item of an import: the session (refused when it exists), a blob, or a chunk of
 * events, whose ids are checked against the rows written so far and the chunk's own earlier ones.
 */
const importItem = (w: Writer, conn: Connection, progress: ImportProgress, item: BackendImportItem) =>
  Effect.gen(function* () {
    if (item._tag === "session") {
      if (yield* sessionExists(conn, item.sessionId)) return yield* Effect.fail(sessionExistsError(item.sessionId))
      progress.sessionId = item.sessionId
    } else if (item._tag === "blob") {
      yield* conn.execute(PUT_BLOB, [item.hash, item.content.byteLength, blobBytes(item.content)], undefined)
    } else {
      const batch = new Set<string>()
      for (let i = 0; i < item.events.length; i++) {
        const id = item.events[i]!.id
        const seq = progress.count + i + 1
        if (batch.has(id)) return yield* Effect.fail(repeatedEventError(id, seq))
        batch.add(id)
        const other: { session_id: string } | undefined = (yield* conn.execute(
          SELECT_EVENT_SESSION,
          [id],
          undefined
        ))[0]
        if (other !== undefined)
          return yield* Effect.fail(
            other.session_id === progress.sessionId
              ? repeatedEventError(id, seq)
              : eventExistsError(id, seq, other.session_id)
          )
      }
      yield* commitBody(w, conn, [{ sessionId: progress.sessionId!, events: item.events }], false)
      progress.count += item.events.length
    }
  })

/** `importSession` as the items come: a transaction of its own (its body waits for them), so it reserves the connection. */
const importStream =
  (w: Writer) =>
  <E>(items: Stream.Stream<BackendImportItem, E>, now: number) =>
    w.reserved((conn) =>
      Effect.gen(function* () {
        const progress: ImportProgress = { sessionId: undefined, count: 0 }
        yield* Stream.runForEach(items, (item) => importItem(w, conn, progress, item))
        const sessionId = progress.sessionId
        if (sessionId === undefined) {
          return yield* Effect.fail(storeError("importSession", undefined, "importSession: no session was given", true))
        }
        yield* conn.execute(MARK_CHAIN, [sessionId, "imported", progress.count, now], undefined)
        return sessionId
      })
    )

/** Takes or renews a session's lease: refused while another owner holds it unexpired (or, renewing, when this one lost it). */
const acquireLease =
  (w: Writer) => (sessionId: SessionId, owner: string, now: number, ttlMs: number, renewOnly: boolean) =>
    w.transact((conn) =>
      Effect.gen(function* () {
        const current: { owner: string; expires_at: number } | undefined = (yield* conn.execute(
          SELECT_LEASE,
          [sessionId],
          undefined
        ))[0]
        if (renewOnly && current?.owner !== owner) {
          return yield* Effect.fail(
            new LeaseHeld({
              sessionId,
              owner: current?.owner ?? RELEASED_LEASE,
              expiresAt: current?.expires_at ?? 0
            })
          )
        }
        if (current !== undefined && current.owner !== owner && current.expires_at > now) {
          return yield* Effect.fail(new LeaseHeld({ sessionId, owner: current.owner, expiresAt: current.expires_at }))
        }
        yield* conn.execute(UPSERT_LEASE, [sessionId, owner, now + ttlMs], undefined)
        const lease: Lease = { sessionId, owner, expiresAt: now + ttlMs }
        return lease
      })
    )

/** Releases the session's lease if this owner holds it. */
const releaseLease = (w: Writer) => (sessionId: SessionId, owner: string) =>
  w.transact((conn) => conn.execute(DELETE_LEASE, [sessionId, owner], undefined))

/**
 * The writes, on the `SqlClient`'s one connection: each write is one `BEGIN IMMEDIATE` transaction
 * whose statements run on the transaction's connection with the client's prepared-statement cache
 * (`Connection.execute`), as few per commit as the data allows. Not `sql.unsafe`: its span,
 * compile and scope per statement cost several times what `execute` does, and a commit runs
 * several. Reads go through the same client; none runs while a write is open (`writeTransaction`:
 * no other fiber runs; a reserved one: the client's semaphore).
 */
const makeWriter = (sql: SqlClient.SqlClient, conn: Connection | undefined) => {
  const w: Writer = {
    transact: writeTransaction(sql, conn),
    reserved: reservedWriteTransaction(sql),
    known: new Map(),
    valid: undefined
  }
  return {
    commit: commit(w),
    saveSnapshot: saveSnapshot(w),
    putBlob: putBlob(w),
    importSession: importSession(w),
    importStream: importStream(w),
    acquireLease: acquireLease(w),
    releaseLease: releaseLease(w)
  }
}

type SqliteWriter = ReturnType<typeof makeWriter>

/** What the backend's parts share: the client, the writer (none when read-only) and the file, named in failures. */
interface Db {
  readonly sql: SqlClient.SqlClient
  readonly writer: SqliteWriter | undefined
  readonly filename: string
}

/** A failure because the file is damaged names it (told as a damaged file's is). */
const withDamagedFile = (db: Db, error: EventStoreError): EventStoreError => {
  const code = (error.cause as { readonly code?: unknown } | undefined)?.code
  if (code !== "SQLITE_CORRUPT" && code !== "SQLITE_NOTADB") return error
  return new EventStoreError({
    method: error.method,
    message: error.message,
    reason: error.reason,
    cause: error.cause,
    damagedFile: path.resolve(db.filename)
  })
}

/** SQLite's failure (or a defect) of a write as an `EventStoreError`: a constraint is a refusal. */
const writeError = (db: Db, method: string, e: unknown): EventStoreError =>
  withDamagedFile(
    db,
    storeError(
      method,
      e,
      `${method}: ${describeSqliteError(e)}`,
      String((e as { code?: unknown } | undefined)?.code ?? "").startsWith("SQLITE_CONSTRAINT")
    )
  )

/** Runs a write (one transaction, see internal/writeTransaction.ts), mapping SQLite's failures to `EventStoreError`. */
const write = <A, E>(
  db: Db,
  method: string,
  f: (w: SqliteWriter) => Effect.Effect<A, E | SqlError>
): Effect.Effect<A, Exclude<E, SqlError> | EventStoreError> =>
  db.writer === undefined
    ? Effect.fail(storeError(method, undefined, `${method}: the database was opened read-only`))
    : (f(db.writer).pipe(
        Effect.catchIf(
          (e): e is SqlError => e instanceof SqlError,
          (e) => Effect.fail(writeError(db, method, e.cause ?? e))
        ),
        // a ROLLBACK that failed because the file is damaged is told as a damaged file's failure
        Effect.catchIf(
          (e): e is EventStoreError => e instanceof EventStoreError,
          (e) => Effect.fail(withDamagedFile(db, e))
        ),
        Effect.catchAllDefect((defect) => Effect.fail(writeError(db, method, defect)))
      ) as Effect.Effect<A, Exclude<E, SqlError> | EventStoreError>)

/** A read's SQLite failure as an `EventStoreError` of `method`. */
const readFailed =
  (db: Db, method: string) =>
  <A, R>(effect: Effect.Effect<A, SqlError, R>): Effect.Effect<A, EventStoreError, R> =>
    Effect.mapError(effect, (e) =>
      withDamagedFile(db, storeError(method, e.cause ?? e, `${method}: ${describeSqliteError(e.cause ?? e)}`))
    )

/** The backend's writes, each through the writer in a transaction of its own. */
const writes = (
  db: Db
): Pick<
  Backend,
  "commit" | "saveSnapshot" | "putBlob" | "importSession" | "importStream" | "acquireLease" | "releaseLease"
> => ({
  commit: (requests) => write(db, "append", (w) => w.commit(requests)),
  saveSnapshot: (snapshot, stored, keep) =>
    Effect.asVoid(write(db, "saveSnapshot", (w) => w.saveSnapshot(snapshot, stored, keep))),
  putBlob: (hash, content) => Effect.asVoid(write(db, "putBlob", (w) => w.putBlob(hash, content))),
  importSession: (sessionId, events, blobs, now) =>
    write(db, "importSession", (w) => w.importSession(sessionId, events, blobs, now)),
  importStream: (items, now) => write(db, "importSession", (w) => w.importStream(items, now)),
  acquireLease: (sessionId, owner, now, ttlMs, renewOnly) =>
    write(db, "acquireLease", (w) => w.acquireLease(sessionId, owner, now, ttlMs, renewOnly)),
  releaseLease: (sessionId, owner) => Effect.asVoid(write(db, "releaseLease", (w) => w.releaseLease(sessionId, owner)))
})

/** Reads of one state of the database (`consistentRead`), SQLite's failures as `EventStoreError`. */
const consistent =
  (db: Db): Backend["consistent"] =>
  (effect) =>
    consistentRead(db.sql)(effect).pipe(
      Effect.catchIf(
        (e): e is SqlError => e instanceof SqlError,
        (e) =>
          Effect.fail(
            withDamagedFile(db, storeError("consistent", e.cause ?? e, `read: ${describeSqliteError(e.cause ?? e)}`))
          )
      )
    )

/** The event rows: a session's pages (with or without their chain columns), its last seq, and queries across sessions. */
const eventReads = (db: Db): Pick<Backend, "readPage" | "readChainPage" | "queryPage" | "lastSeq"> => {
  const { sql } = db
  return {
    readPage: (sessionId, from, to, limit) =>
      sql<EventRow & { payload: string }>`SELECT session_id, seq, id, type, at, parent_id, v, payload FROM events
        WHERE session_id = ${sessionId} AND seq >= ${from} AND seq <= ${to} ORDER BY seq LIMIT ${limit}`.pipe(
        Effect.map((rows): ReadonlyArray<StoredRow> => rows.map((r) => ({ ...toHeader(r), json: r.payload }))),
        readFailed(db, "read")
      ),
    readChainPage: (sessionId, from, to, limit) =>
      sql<EventRow & { payload: string; prev_hash: string | null; hash: string | null }>`SELECT session_id, seq, id,
        type, at, parent_id, v, payload, prev_hash, hash FROM events
        WHERE session_id = ${sessionId} AND seq >= ${from} AND seq <= ${to} ORDER BY seq LIMIT ${limit}`.pipe(
        Effect.map(
          (rows): ReadonlyArray<ChainRow> =>
            rows.map((r) => ({ ...toHeader(r), json: r.payload, prevHash: r.prev_hash, hash: r.hash }))
        ),
        readFailed(db, "readChain")
      ),
    queryPage: (query, after, limit) => {
      const conditions = [
        query.types === undefined ? undefined : sql.in("type", query.types),
        query.sessionId === undefined ? undefined : sql`session_id = ${query.sessionId}`,
        query.since === undefined ? undefined : sql`at >= ${query.since}`,
        query.until === undefined ? undefined : sql`at < ${query.until}`,
        after === undefined
          ? undefined
          : sql`(at > ${after.at} OR (at = ${after.at} AND (session_id > ${after.sessionId} OR (session_id = ${after.sessionId} AND seq > ${after.seq}))))`
      ].filter((c) => c !== undefined)
      return sql<EventRow>`SELECT session_id, seq, id, type, at, parent_id, v FROM events
        WHERE ${sql.and(conditions)} ORDER BY at, session_id, seq LIMIT ${limit}`.pipe(
        Effect.map((rows) => rows.map(toHeader)),
        readFailed(db, "query")
      )
    },
    lastSeq: (sessionId) =>
      sql<{ last: number | null }>`SELECT max(seq) AS last FROM events WHERE session_id = ${sessionId}`.pipe(
        Effect.map((r) => r[0]?.last ?? 0),
        readFailed(db, "lastSeq")
      )
  }
}

/** A session's chain: its row count and seq bounds with its chain mark, and the gaps in its seqs. */
const chainReads = (db: Db): Pick<Backend, "chainInfo" | "seqGaps"> => {
  const { sql } = db
  return {
    chainInfo: (sessionId) =>
      Effect.all({
        counts: sql<{ count: number; first: number | null; last: number | null }>`SELECT count(*) AS count,
            min(seq) AS first, max(seq) AS last FROM events WHERE session_id = ${sessionId}`.pipe(
          Effect.map((r) => ({ count: r[0]?.count ?? 0, first: r[0]?.first ?? 0, last: r[0]?.last ?? 0 }))
        ),
        mark: sql<{ reason: string; through_seq: number; at: number }>`SELECT reason, through_seq, at
            FROM chain_marks WHERE session_id = ${sessionId}`.pipe(
          Effect.map((r) =>
            Option.fromNullable(r[0]).pipe(
              Option.map(
                (m): ChainMark => ({
                  reason: m.reason === "imported" ? "imported" : "migrated",
                  throughSeq: m.through_seq,
                  at: m.at
                })
              )
            )
          )
        )
      }).pipe(readFailed(db, "chainInfo")),
    seqGaps: (sessionId) =>
      sql<{ from_seq: number; to_seq: number }>`SELECT seq + 1 AS from_seq, next - 1 AS to_seq FROM
        (SELECT seq, lead(seq) OVER (ORDER BY seq) AS next FROM events WHERE session_id = ${sessionId})
        WHERE next > seq + 1 ORDER BY seq`.pipe(
        Effect.map((rows) => rows.map((r) => ({ from: r.from_seq, to: r.to_seq }))),
        readFailed(db, "seqGaps")
      )
  }
}

/** The session index: the sessions listed, one session's row, every session's id. */
const indexReads = (db: Db): Pick<Backend, "sessions" | "session" | "sessionIds"> => {
  const { sql } = db
  return {
    sessions: (options) =>
      sql<SessionRow>`SELECT * FROM sessions WHERE ${sql.and([
        ...(options.includeDeleted ? [] : [sql`deleted = 0`]),
        ...(options.cwd === undefined ? [] : [sql`cwd = ${options.cwd}`])
      ])} ORDER BY updated_at DESC, id DESC LIMIT ${options.limit !== undefined && options.limit >= 0 ? options.limit : -1}`.pipe(
        Effect.map((rows) => rows.map(toSummary)),
        readFailed(db, "sessions")
      ),
    session: (sessionId) =>
      sql<SessionRow>`SELECT * FROM sessions WHERE id = ${sessionId}`.pipe(
        Effect.map((rows) => Option.fromNullable(rows[0]).pipe(Option.map(toSummary))),
        readFailed(db, "session")
      ),
    sessionIds: sql<{ id: string }>`SELECT id FROM sessions`.pipe(
      Effect.map((rows) => rows.map((r) => r.id as SessionId)),
      readFailed(db, "sessionIds")
    )
  }
}

/** Snapshots (the seqs of a session's, the newest at or below a seq) and blobs by hash. */
const snapshotAndBlobReads = (db: Db): Pick<Backend, "snapshotSeqs" | "loadSnapshot" | "getBlob"> => {
  const { sql } = db
  return {
    snapshotSeqs: (sessionId, version) =>
      sql<{ seq: number }>`SELECT seq FROM snapshots WHERE session_id = ${sessionId} AND version = ${version}
        ORDER BY seq`.pipe(
        Effect.map((rows) => rows.map((r) => r.seq)),
        readFailed(db, "snapshotSeqs")
      ),
    loadSnapshot: (sessionId, version, atOrBelow) =>
      sql<{ seq: number; at: number; state: string; hash: string | null }>`SELECT seq, at, state, hash FROM snapshots
        WHERE session_id = ${sessionId} AND version = ${version} AND seq <= ${atOrBelow}
        ORDER BY seq DESC LIMIT 1`.pipe(
        Effect.map((rows) =>
          Option.fromNullable(rows[0]).pipe(
            Option.map((r) => ({ sessionId, version, seq: r.seq, at: r.at, json: r.state, hash: r.hash }))
          )
        ),
        readFailed(db, "loadSnapshot")
      ),
    getBlob: (hash) =>
      sql<{ data: Uint8Array }>`SELECT data FROM blobs WHERE hash = ${hash}`.pipe(
        Effect.map((rows) => Option.fromNullable(rows[0]).pipe(Option.map((r) => new Uint8Array(r.data)))),
        readFailed(db, "getBlob")
      )
  }
}

/** The leases: one session's, and all of them. */
const leaseReads = (db: Db): Pick<Backend, "lease" | "leases"> => {
  const { sql } = db
  return {
    lease: (sessionId) =>
      sql<{
        owner: string
        expires_at: number
      }>`SELECT owner, expires_at FROM leases WHERE session_id = ${sessionId}`.pipe(
        Effect.map((rows) =>
          Option.fromNullable(rows[0]).pipe(
            Option.map((r): Lease => ({ sessionId, owner: r.owner, expiresAt: r.expires_at }))
          )
        ),
        readFailed(db, "lease")
      ),
    leases: sql<{
      session_id: string
      owner: string
      expires_at: number
    }>`SELECT session_id, owner, expires_at FROM leases`.pipe(
      Effect.map((rows) =>
        rows.map((r): Lease => ({ sessionId: r.session_id as SessionId, owner: r.owner, expiresAt: r.expires_at }))
      ),
      readFailed(db, "leases")
    )
  }
}

const DEFAULT_BUSY_TIMEOUT_MS = 10_000

/** The SQLite backend over the `SqlClient`: the writer's transactions (none read-only) and the reads. */
export const makeSqliteBackend = (
  options: SqliteOptions
): Effect.Effect<Backend, never, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const writer = options.readonly
      ? undefined
      : makeWriter(
          sql,
          // a client that cannot be reserved now (it will fail its writes the same way) reserves per write
          yield* Effect.orElseSucceed(singleConnection(sql), () => undefined)
        )
    const db: Db = { sql, writer, filename: options.filename }
    const backend: Backend = {
      ...writes(db),
      consistent: consistent(db),
      ...eventReads(db),
      ...chainReads(db),
      ...indexReads(db),
      ...snapshotAndBlobReads(db),
      ...leaseReads(db)
    }
    return backend
  })

/** Runs the migrations in one `BEGIN IMMEDIATE` transaction. */
const migrate = (sql: SqlClient.SqlClient) =>
  makeImmediate(sql)(Migrator.make({})({ loader: Migrator.fromRecord(migrations), table: MIGRATIONS_TABLE }))

const prepareError = (file: string) => (e: SqlError | Migrator.MigrationError) =>
  dbError(
    file,
    "unreadable",
    `cannot prepare ${file}: ${"cause" in e && e.cause ? String((e.cause as Error).message ?? e.cause) : e.message}`
  )

/**
 * `SqliteClient.layer` for `file`, failing with `DatabaseError` when it cannot open it. Its layer is
 * typed as failing with a `ConfigError` (of its config), and it throws — a defect — when SQLite
 * refuses the file (opening it, or switching it to WAL while another connection holds a lock):
 * both are the file's error. An interrupt stays one.
 */
const openClient = (file: string): Layer.Layer<SqlClient.SqlClient | SqliteClient.SqliteClient, DatabaseError> =>
  SqliteClient.layer({ filename: file }).pipe(
    Layer.mapError((e) => dbError(file, "unreadable", `cannot open ${file}: ${e.message}`)),
    Layer.catchAllCause(
      (cause): Layer.Layer<SqlClient.SqlClient | SqliteClient.SqliteClient, DatabaseError> =>
        Layer.failCause(
          Option.isSome(Cause.failureOption(cause)) || Cause.isInterruptedOnly(cause)
            ? cause
            : Cause.fail(dbError(file, "unreadable", `cannot open ${file}: ${defectMessage(Cause.squash(cause))}`))
        )
    )
  )

/** A thrown error's message (SQLite's own, e.g. "database is locked"), or what it is. */
const defectMessage = (defect: unknown): string => (defect instanceof Error ? defect.message : String(defect))

/**
 * The SqlClient for a logbook database: preflight, connection pragmas and migrations.
 * Fails with `DatabaseError` before touching a file that is not ours. Read-only, nothing is
 * migrated or written: the file is read where it is, or from a private copy when SQLite cannot
 * read it in place or its schema is older (`internal/readOnly.ts`).
 */
export const layerClient = (options: SqliteOptions): Layer.Layer<SqlClient.SqlClient, DatabaseError> => {
  const file = path.resolve(options.filename)
  const readonly = options.readonly ?? false
  const busyTimeout = Math.max(0, Math.floor(options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS))
  if (readonly) {
    return layerReadOnly(file, {
      plan: preflight(file, { create: false, readonly: true }),
      planCopy: (copy) => planFor(file, inspect(copy, { name: file }), { create: false, readonly: true }),
      setup: (sql) => Effect.mapError(sql.unsafe(`PRAGMA busy_timeout = ${busyTimeout}`), prepareError(file)),
      upgrade: (sql) =>
        migrate(sql).pipe(
          Effect.provideService(SqlClient.SqlClient, sql),
          Effect.asVoid,
          Effect.mapError(prepareError(file))
        ),
      refreshMs: options.refreshMs
    })
  }
  const setup = Layer.effectDiscard(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql.unsafe(`PRAGMA busy_timeout = ${busyTimeout}`)
      yield* sql.unsafe("PRAGMA synchronous = NORMAL")
      yield* migrate(sql)
    }).pipe(Effect.mapError(prepareError(file)))
  )
  return Layer.unwrapEffect(
    Effect.as(
      preflight(file, { create: options.create ?? true, readonly: false }),
      Layer.provideMerge(setup, openClient(file))
    )
  )
}
