/**
 * The SQLite drivers side by side on the running Node: better-sqlite3 (the one installed) and, where
 * this Node has it, the built-in `node:sqlite`. The same schema, pragmas and rows (a realistic turn,
 * as bench/append.ts writes it): append in transactions of 1,000 rows, then read the session back in
 * seq order. The drivers take turns, run after run, so a change in the machine's load falls on all
 * of them alike. Prints one line per driver with the medians. See docs/platform.md.
 *
 * Usage: node --import tsx bench/driver.ts [events] [runs] [better-sqlite3 directory …]
 * (each directory an installed better-sqlite3 of another version, built for this Node, to compare)
 */
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import Database from "better-sqlite3"
import { realisticEvents } from "./append.js"
import { median, now } from "./util.js"

interface Statement {
  run(...params: ReadonlyArray<unknown>): unknown
  all(...params: ReadonlyArray<unknown>): ReadonlyArray<unknown>
}
interface Connection {
  exec(sql: string): void
  prepare(sql: string): Statement
  close(): void
}

const SCHEMA = `PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
  CREATE TABLE events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL, type TEXT NOT NULL,
    at INTEGER NOT NULL, parent_id TEXT, v INTEGER NOT NULL, payload TEXT NOT NULL, PRIMARY KEY (session_id, seq));
  CREATE UNIQUE INDEX events_id ON events (id); CREATE INDEX events_type_at ON events (type, at);`

const require = createRequire(import.meta.url)
const drivers: Array<{ readonly name: string; readonly open: (file: string) => Connection }> = [
  {
    name: `better-sqlite3 ${require("better-sqlite3/package.json").version}`,
    open: (file) => new Database(file) as unknown as Connection
  },
  ...process.argv.slice(4).map((dir) => {
    const Other = require(path.resolve(dir)) as new (file: string) => Connection
    return {
      name: `better-sqlite3 ${require(path.resolve(dir, "package.json")).version} (${dir})`,
      open: (file: string) => new Other(file)
    }
  })
]
const builtin = (() => {
  try {
    // `node:sqlite` is missing before Node 22.5 and behind a flag before 22.13
    return (process as unknown as { getBuiltinModule(id: string): unknown }).getBuiltinModule("node:sqlite") as
      | { DatabaseSync: new (file: string) => Connection }
      | undefined
  } catch {
    return undefined
  }
})()
if (builtin?.DatabaseSync) drivers.push({ name: "node:sqlite", open: (file) => new builtin.DatabaseSync(file) })

const count = Number(process.argv[2] ?? 50_000)
const runs = Number(process.argv[3] ?? 5)
const rows = realisticEvents(count).map((e, i) => [
  "bench",
  i + 1,
  `01a22dcf-fd2c-7a53-9d1f-${String(i).padStart(12, "0")}`,
  e.type,
  1_796_064_935_212 + i,
  null,
  1,
  JSON.stringify(e.payload)
])

const once = (open: (file: string) => Connection) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "logbook-bench-driver-"))
  try {
    const db = open(path.join(dir, "bench.db"))
    db.exec(SCHEMA)
    const insert = db.prepare("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
    const start = now()
    for (let i = 0; i < rows.length; i += 1000) {
      db.exec("BEGIN IMMEDIATE")
      for (const row of rows.slice(i, i + 1000)) insert.run(...row)
      db.exec("COMMIT")
    }
    const appended = now()
    const read = db.prepare("SELECT * FROM events WHERE session_id = ? ORDER BY seq").all("bench")
    const done = now()
    if (read.length !== rows.length) throw new Error(`read ${read.length} rows, expected ${rows.length}`)
    db.close()
    return { append: appended - start, read: done - appended }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

console.log(`Node ${process.version}, ${count} events, median of ${runs} runs`)
for (const driver of drivers) once(driver.open) // warm-up
const results = drivers.map(() => [] as Array<{ append: number; read: number }>)
for (let run = 0; run < runs; run++) {
  for (const [i, driver] of drivers.entries()) results[i]!.push(once(driver.open))
}
drivers.forEach((driver, i) => {
  const append = median(results[i]!.map((r) => r.append))
  const read = median(results[i]!.map((r) => r.read))
  console.log(
    `${driver.name}: append ${append.toFixed(0)} ms (${Math.round(count / (append / 1000))} events/s), read ${read.toFixed(0)} ms`
  )
})
