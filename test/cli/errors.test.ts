/**
 * Which database a command opens, and what the user sees when it cannot: one sentence on stderr,
 * exit code 2, and the file left exactly as it was.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "@effect/vitest"
import Database from "better-sqlite3"
import * as Events from "../../src/domain/Events.js"
import { CallId } from "../../src/domain/Ids.js"
import { runCli, sampleSession, scratchDb, scratchDir, seed, testHome } from "../support/cli.js"

const id = "0195a0b0-0000-7000-8000-000000000001"

/** Exactly one line on stderr, starting with `logbook: `, no stack trace. */
const expectOneSentence = (stderr: string) => {
  const lines = stderr.trimEnd().split("\n")
  expect(lines).toHaveLength(1)
  expect(lines[0]).toMatch(/^logbook: \S/)
  expect(stderr).not.toMatch(/\bat .*\(.*:\d+:\d+\)/)
  expect(stderr).not.toContain("Error:")
}

const filesIn = (dir: string) => fs.readdirSync(dir).sort()

describe("logbook database selection and errors", () => {
  let db: string
  beforeAll(async () => {
    db = scratchDb()
    await seed(db, [{ id, events: sampleSession() }])
  })

  it.each([
    [["sessions", "show", "0195ffff"]],
    [["events", "no-such-session"]],
    [["events", "no-such-session", "--follow"]]
  ])("an unknown session id (%j) exits 2 with one sentence", async (args) => {
    const result = await runCli([...args, "--db", db])
    expect(result.code).toBe(2)
    expect(result.stdout).toBe("")
    expectOneSentence(result.stderr)
    expect(result.stderr).toMatch(/no session matches ".*"; see `logbook sessions list`/)
  })

  it.each([[["sessions", "list"]], [["sessions", "show", id]], [["events", id]], [["events", id, "--follow"]]])(
    "a missing database (%j) exits 2 and is not created",
    async (args) => {
      const dir = scratchDir()
      const file = path.join(dir, "nothing-here.db")
      const result = await runCli([...args, "--db", file])
      expect(result.code).toBe(2)
      expect(result.stdout).toBe("")
      expectOneSentence(result.stderr)
      expect(result.stderr).toBe(
        `logbook: no logbook database at ${file}; pass --db <file> or set LOGBOOK_DB to read another one\n`
      )
      expect(filesIn(dir)).toEqual([])
    }
  )

  it("a missing database in a missing directory is not created either", async () => {
    const dir = scratchDir()
    const file = path.join(dir, "a", "b", "logbook.db")
    const result = await runCli(["sessions", "list", "--db", file])
    expect(result.code).toBe(2)
    expect(filesIn(dir)).toEqual([])
  })

  it.each([[["sessions", "list"]], [["sessions", "show", id]], [["events", id, "--format", "json"]]])(
    "a file that is not SQLite (%j) exits 2 and its bytes are unchanged",
    async (args) => {
      const dir = scratchDir()
      const file = path.join(dir, "garbage.db")
      const bytes = Buffer.from("this is not a database\n\u0000\u0001\u0002 just some bytes ".repeat(200))
      fs.writeFileSync(file, bytes)
      const mtime = fs.statSync(file).mtimeMs
      const result = await runCli([...args, "--db", file])
      expect(result.code).toBe(2)
      expect(result.stdout).toBe("")
      expectOneSentence(result.stderr)
      expect(result.stderr).toContain(`${file} is not a logbook database`)
      expect(fs.readFileSync(file).equals(bytes)).toBe(true)
      expect(fs.statSync(file).mtimeMs).toBe(mtime)
      expect(filesIn(dir)).toEqual(["garbage.db"]) // no -wal / -shm / journal files
    }
  )

  it("another application's SQLite database exits 2 and is not modified", async () => {
    const dir = scratchDir()
    const file = path.join(dir, "other.sqlite")
    const other = new Database(file)
    other.exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('keep me')")
    other.close()
    const before = fs.readFileSync(file)
    const result = await runCli(["sessions", "list", "--db", file])
    expect(result.code).toBe(2)
    expectOneSentence(result.stderr)
    expect(result.stderr).toContain("not a logbook database")
    expect(fs.readFileSync(file).equals(before)).toBe(true)
    expect(filesIn(dir)).toEqual(["other.sqlite"])
  })

  it("a damaged SQLite file exits 2 and its bytes are unchanged", async () => {
    const dir = scratchDir()
    const good = path.join(dir, "good.db")
    await seed(good, [{ id, events: sampleSession() }])
    const original = fs.readFileSync(good)
    // keep the 100-byte SQLite header, destroy every page after it
    const damaged = Buffer.concat([original.subarray(0, 100), Buffer.alloc(original.length - 100, 0x5a)])
    const file = path.join(dir, "damaged.db")
    fs.writeFileSync(file, damaged)
    const result = await runCli(["events", id, "--db", file])
    expect(result.code).toBe(2)
    expect(result.stdout).toBe("")
    expectOneSentence(result.stderr)
    expect(result.stderr).toContain(`${file} is a damaged SQLite database`)
    expect(fs.readFileSync(file).equals(damaged)).toBe(true)
  })

  it("a damaged page deep in the database (found by a query, not at open) is told the same way: exit 2", async () => {
    const dir = scratchDir()
    const file = path.join(dir, "deep.db")
    // a session of many events: the events table spans many b-tree pages (no overflow pages)
    const big = "x".repeat(200)
    await seed(file, [
      {
        id,
        events: [
          Events.make("session.created", { title: "big", cwd: "/w" }),
          ...Array.from({ length: 3000 }, (_, i) =>
            Events.make("user.message", { messageId: `m${i}` as never, text: big, mode: "prompt" })
          )
        ]
      }
    ])
    // one leaf page of the events table, in the middle of it, overwritten (found with SQLite's dbstat):
    // the header, the schema and the sessions index still read
    const raw = new Database(file)
    // everything in the file itself (no page of it left in the write-ahead log to shadow the damage)
    raw.pragma("wal_checkpoint(TRUNCATE)")
    raw.pragma("journal_mode = DELETE")
    const pageSize = Number(raw.pragma("page_size", { simple: true }))
    const leaves = raw
      .prepare("SELECT pageno FROM dbstat WHERE name = 'events' AND pagetype = 'leaf' ORDER BY pageno")
      .all() as ReadonlyArray<{ readonly pageno: number }>
    raw.close()
    expect(leaves.length).toBeGreaterThan(10)
    const page = leaves[Math.floor(leaves.length / 2)]!.pageno
    const bytes = fs.readFileSync(file)
    bytes.fill(0x5a, (page - 1) * pageSize, page * pageSize)
    fs.writeFileSync(file, bytes)
    expect(fs.existsSync(`${file}-wal`)).toBe(false)
    const opened = await runCli(["sessions", "list", "--db", file])
    expect(opened.code, opened.stderr).toBe(0)
    const result = await runCli(["events", id, "--db", file])
    expect(result.code, result.stderr).toBe(2)
    expectOneSentence(result.stderr)
    expect(result.stderr).toContain(`${file} is a damaged SQLite database and cannot be read`)
    expect(fs.readFileSync(file).equals(bytes)).toBe(true)
  })

  it("a database written by a newer logbook exits 2, asks for an upgrade, and is not modified", async () => {
    const file = scratchDb()
    await seed(file, [{ id, events: sampleSession() }])
    const raw = new Database(file)
    raw.exec("INSERT INTO logbook_migrations (migration_id, name) VALUES (9999, 'from-the-future')")
    raw.close()
    const before = fs.readFileSync(file)
    const result = await runCli(["sessions", "list", "--db", file])
    expect(result.code).toBe(2)
    expectOneSentence(result.stderr)
    expect(result.stderr).toBe(
      `logbook: ${file} was written by a newer version of logbook; upgrade logbook to read it\n`
    )
    expect(fs.readFileSync(file).equals(before)).toBe(true)
  })

  it("a log the projection cannot replay: show exits 1 with one sentence, events still prints it", async () => {
    const file = scratchDb()
    await seed(file, [
      {
        id: "broken",
        events: [
          Events.make("session.created", {}),
          Events.make("tool.finished", { callId: CallId.make("never-invoked"), output: "x" })
        ]
      }
    ])
    const show = await runCli(["sessions", "show", "broken", "--db", file])
    expect(show.code).toBe(1)
    expect(show.stdout).toBe("")
    expectOneSentence(show.stderr)
    expect(show.stderr).toContain("cannot replay session broken: event 2 (tool.finished)")
    const events = await runCli(["events", "broken", "--db", file])
    expect(events.code).toBe(0)
    expect(events.stdout).toContain("tool.finished")
  })

  it("a directory given as --db exits 2 with one sentence", async () => {
    const dir = scratchDir()
    const result = await runCli(["sessions", "list", "--db", dir])
    expect(result.code).toBe(2)
    expectOneSentence(result.stderr)
    expect(result.stderr).toContain("is a directory")
  })

  it("LOGBOOK_DB selects the database", async () => {
    const result = await runCli(["sessions", "list", "--format", "json"], { env: { LOGBOOK_DB: db } })
    expect(result.code).toBe(0)
    expect((JSON.parse(result.stdout) as Array<{ id: string }>).map((s) => s.id)).toEqual([id])
  })

  it("--db wins over LOGBOOK_DB", async () => {
    const empty = scratchDb()
    await seed(empty, [])
    const result = await runCli(["sessions", "list", "--format", "json", "--db", empty], { env: { LOGBOOK_DB: db } })
    expect(result.code).toBe(0)
    expect(JSON.parse(result.stdout)).toEqual([])
    const missing = await runCli(["sessions", "list", "--db", path.join(scratchDir(), "x.db")], {
      env: { LOGBOOK_DB: db }
    })
    expect(missing.code).toBe(2)
  })

  it("without --db or LOGBOOK_DB, uses $XDG_DATA_HOME/logbook/logbook.db, else ~/.local/share/logbook/logbook.db", async () => {
    // no database there yet (a new machine): no sessions, exit 0 (issue 10), and nothing is created
    const xdg = scratchDir()
    const viaXdg = await runCli(["sessions", "list"], { env: { XDG_DATA_HOME: xdg } })
    expect(viaXdg.code).toBe(0)
    expect(viaXdg.stdout).toBe(`No sessions yet (no database at ${path.join(xdg, "logbook", "logbook.db")}).\n`)
    const viaXdgJson = await runCli(["sessions", "list", "--format", "json"], { env: { XDG_DATA_HOME: xdg } })
    expect(viaXdgJson.code).toBe(0)
    expect(JSON.parse(viaXdgJson.stdout)).toEqual([])
    expect(filesIn(xdg)).toEqual([])
    const viaHome = await runCli(["sessions", "list"])
    expect(viaHome.code).toBe(0)
    expect(viaHome.stdout).toContain(
      `no database at ${path.join(testHome(), ".local", "share", "logbook", "logbook.db")}`
    )

    fs.mkdirSync(path.join(xdg, "logbook"), { recursive: true })
    fs.copyFileSync(db, path.join(xdg, "logbook", "logbook.db"))
    const found = await runCli(["sessions", "list", "--format", "json"], { env: { XDG_DATA_HOME: xdg } })
    expect(found.code).toBe(0)
    expect((JSON.parse(found.stdout) as Array<{ id: string }>).map((s) => s.id)).toEqual([id])
  })

  it("--db may also come before the command, as a global flag", async () => {
    for (const args of [
      ["--db", db, "sessions", "list", "--format", "json"],
      [`--db=${db}`, "sessions", "list", "--format", "json"]
    ]) {
      const result = await runCli(args)
      expect(result.code).toBe(0)
      expect((JSON.parse(result.stdout) as Array<{ id: string }>).map((s) => s.id)).toEqual([id])
    }
    const events = await runCli(["--db", db, "events", id, "--to", "1"])
    expect(events.stdout).toContain("session.created")
  })

  it.each([["postgresql://host/db"], ["postgres://u@localhost:5432/team"], ["file:x.db"], ["sqlite:logbook.db"]])(
    "a --db or LOGBOOK_DB with a URL scheme (%s) is refused, naming it: exit 2, nothing created",
    async (url) => {
      const cwd = scratchDir()
      const scheme = url.slice(0, url.indexOf(":"))
      for (const [args, env] of [
        [["sessions", "list", "--db", url], {}],
        [["run", "hello"], { LOGBOOK_DB: url }],
        [["import", path.join(cwd, "missing.jsonl")], { LOGBOOK_DB: url }],
        [["events", id], { LOGBOOK_DB: url }]
      ] as const) {
        const result = await runCli(args, { cwd, env })
        expect(result.code).toBe(2)
        expectOneSentence(result.stderr)
        expect(result.stderr).toContain(`${JSON.stringify(url)} is a ${scheme}: URL`)
      }
      expect(filesIn(cwd)).toEqual([])
    }
  )

  it.each([
    [["events", id, "--format", "jsn"], '--format: expected text or json, got "jsn"'],
    [["sessions", "list", "--limit", "abc"], '--limit: expected a whole number, got "abc"'],
    [["sessions", "list", "--format", "yaml"], '--format: expected table or json, got "yaml"'],
    [["stats", "--by", "user"], '--by: expected model, tool, prompt or day, got "user"'],
    [["replay", id, "--at", "x"], '--at: expected a whole number, got "x"'],
    [["replay", id, "--step", "1.5"], '--step: expected a whole number, got "1.5"'],
    [["events", id, "--from", "one"], '--from: expected a whole number, got "one"'],
    [["run", "--max-steps", "many", "hi"], '--max-steps: expected a whole number, got "many"'],
    [["rerun", id, "--from-step", "x"], '--from-step: expected a whole number, got "x"']
  ])("a bad flag value (%j) names its flag: exit 2, logbook: prefix", async (args, message) => {
    const result = await runCli([...args, "--db", db])
    expect(result.code).toBe(2)
    expect(result.stderr.trim()).toBe(`logbook: ${message}`)
  })

  it("a relative --db is resolved against the working directory", async () => {
    const result = await runCli(["sessions", "list", "--format", "json", "--db", path.basename(db)], {
      cwd: path.dirname(db)
    })
    expect(result.code).toBe(0)
    expect((JSON.parse(result.stdout) as Array<{ id: string }>).map((s) => s.id)).toEqual([id])
  })
})
