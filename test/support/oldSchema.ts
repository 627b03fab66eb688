/**
 * Databases of an older schema, for the upgrade tests: `downgradeToSchema1` turns a database this
 * version wrote into exactly what logbook wrote before migration 2 (`2_session_outcome`): the
 * columns that migration (and the later ones) add are dropped and their rows in
 * `logbook_migrations` are removed. `downgradeToSchema2` does the same for migration 3 (`3_stats`):
 * the stats index tables and the cursor columns are dropped. `downgradeToSchema3` for migration 4
 * (`4_chain`): the chain columns of `events` and the `chain_marks` table are dropped.
 * `downgradeToSchema4` for migration 5 (`5_stats_calls`): the tool rows as schema 4 kept them.
 */
import Database from "better-sqlite3"

/** The columns of `sessions` as migration 1 (`1_init`) created them. */
export const SCHEMA_1_SESSION_COLUMNS = [
  "id",
  "title",
  "cwd",
  "created_at",
  "updated_at",
  "last_seq",
  "status",
  "deleted"
]

export const sessionColumns = (file: string): Array<string> => {
  const db = new Database(file, { readonly: true })
  try {
    return (db.prepare("PRAGMA table_info(sessions)").all() as Array<{ name: string }>).map((c) => c.name)
  } finally {
    db.close()
  }
}

export const schemaOf = (file: string): number => {
  const db = new Database(file, { readonly: true })
  try {
    return db.prepare("SELECT max(migration_id) FROM logbook_migrations").pluck().get() as number
  } finally {
    db.close()
  }
}

/** Rewrites `file` (closed by every writer) as a schema-1 database, checkpointed into the main file. */
export const downgradeToSchema1 = (file: string): void => {
  downgradeToSchema2(file)
  const db = new Database(file)
  try {
    for (const column of ["model", "turn_open", "last_turn_reason", "last_turn_interrupted", "cost", "cost_known"]) {
      db.exec(`ALTER TABLE sessions DROP COLUMN ${column}`)
    }
    db.exec("DELETE FROM logbook_migrations WHERE migration_id > 1")
    db.pragma("wal_checkpoint(TRUNCATE)")
  } finally {
    db.close()
  }
}

/** The tables migration 3 (`3_stats`) creates. */
export const STATS_TABLES = ["stat_steps", "stat_tools", "stat_turns", "stat_retries"]

/**
 * Rewrites `file` (closed by every writer) as a schema-4 database: the stats index as migration 3
 * kept it before migration 5 (`5_stats_calls`) — rows only for invoked calls, a non-zero exit `ok`,
 * no `ran` column.
 */
export const downgradeToSchema4 = (file: string): void => {
  const db = new Database(file)
  try {
    db.exec("DELETE FROM stat_tools WHERE ran = 0")
    db.exec("UPDATE stat_tools SET outcome = 'ok', error = NULL WHERE outcome = 'exit'")
    db.exec("ALTER TABLE stat_tools DROP COLUMN ran")
    db.exec("DELETE FROM logbook_migrations WHERE migration_id > 4")
    db.pragma("wal_checkpoint(TRUNCATE)")
  } finally {
    db.close()
  }
}

/** Rewrites `file` (closed by every writer) as a schema-3 database: no hash chain. */
export const downgradeToSchema3 = (file: string): void => {
  downgradeToSchema4(file)
  const db = new Database(file)
  try {
    db.exec("DROP TABLE IF EXISTS chain_marks")
    for (const column of ["prev_hash", "hash"]) db.exec(`ALTER TABLE events DROP COLUMN ${column}`)
    db.exec("DELETE FROM logbook_migrations WHERE migration_id > 3")
    db.pragma("wal_checkpoint(TRUNCATE)")
  } finally {
    db.close()
  }
}

/** Rewrites `file` (closed by every writer) as a schema-2 database: no stats index. */
export const downgradeToSchema2 = (file: string): void => {
  downgradeToSchema3(file)
  const db = new Database(file)
  try {
    for (const table of STATS_TABLES) db.exec(`DROP TABLE IF EXISTS ${table}`)
    for (const column of ["stat_step_at", "stat_step_first_ms", "stat_turn_seq"]) {
      db.exec(`ALTER TABLE sessions DROP COLUMN ${column}`)
    }
    db.exec("DELETE FROM logbook_migrations WHERE migration_id > 2")
    db.pragma("wal_checkpoint(TRUNCATE)")
  } finally {
    db.close()
  }
}
