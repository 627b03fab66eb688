/**
 * The read commands work with read access only (issue 10 §2): a colleague's database, a backup on a
 * read-only mount. The tests run as root, which ignores file modes, so the binary is run as an
 * ordinary user (nobody, 65534) against databases root owns: the file 0644 in a 0755 directory,
 * and 0444 in a 0555 directory. SQLite cannot read a WAL database in place there once its last
 * writer has closed (it would have to create the -shm index next to it), so logbook reads a
 * private copy; with a writer running, it reads in place and follows live.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import Database from "better-sqlite3"
import * as Events from "../../src/domain/Events.js"
import { CallId } from "../../src/domain/Ids.js"
import { LATEST_MIGRATION } from "../../src/store/Sqlite.js"
import { type RunOptions, runCli, sampleSession, seed, spawnCli } from "../support/cli.js"
import { downgradeToSchema1, schemaOf } from "../support/oldSchema.js"

const NOBODY = 65534
const isRoot = process.getuid?.() === 0
const id = "0195a0b0-0000-7000-8000-000000000001"
const progress = (n: number) => Events.make("tool.progress", { callId: CallId.make("call-ok"), output: `late ${n}` })

const dirs: Array<string> = []
/** A directory nobody can enter (under the OS temp directory, 1777), removed after the tests. */
const sharedDir = (): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "logbook-ro-test-"))
  dirs.push(dir)
  fs.chmodSync(dir, 0o755)
  return dir
}

/** nobody's own temporary directory (its TMPDIR), where a private copy of a database goes */
let nobodyTmp: string
/**
 * What logbook left in nobody's TMPDIR: everything there but Node's compile cache (on Node ≥ 22 the
 * CLI turns it on, and Node keeps it in `node-compile-cache` of the temporary directory: not a copy).
 */
const copiesIn = () => fs.readdirSync(nobodyTmp).filter((name) => name !== "node-compile-cache")

/**
 * Runs as nobody, with a HOME nobody can read (the scratch HOME of the other tests is root's
 * 0700) and a TMPDIR of its own, so the test sees whether a copy was made and removed.
 */
const asNobody = (extra: RunOptions = {}): RunOptions => ({
  ...extra,
  uid: NOBODY,
  gid: NOBODY,
  env: { HOME: "/", TMPDIR: nobodyTmp }
})
afterAll(() => {
  for (const dir of dirs) {
    fs.chmodSync(dir, 0o755)
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

/** A database root owns, with the session seeded and every writer closed (no -wal, no -shm left). */
const rootDb = async (modes: { readonly file: number; readonly dir: number }) => {
  const dir = sharedDir()
  const file = path.join(dir, "logbook.db")
  await seed(file, [{ id, events: sampleSession() }])
  fs.chmodSync(file, modes.file)
  fs.chmodSync(dir, modes.dir)
  return { dir, file }
}

const snapshotOf = (dir: string) =>
  Object.fromEntries(
    fs
      .readdirSync(dir)
      .sort()
      .map((name) => {
        const stat = fs.statSync(path.join(dir, name))
        return [name, { size: stat.size, mtimeMs: stat.mtimeMs, bytes: fs.readFileSync(path.join(dir, name)) }]
      })
  )

describe.runIf(isRoot)("read commands with read access only (run as nobody)", () => {
  beforeAll(async () => {
    nobodyTmp = sharedDir()
    fs.chownSync(nobodyTmp, NOBODY, NOBODY)
    // nobody must be able to run the binary and load its native module from here
    const probe = await runCli(["--version"], asNobody())
    if (probe.code !== 0) {
      throw new Error(`nobody (65534) cannot run dist/bin.js (check the modes of ${process.cwd()}): ${probe.stderr}`)
    }
  })

  it.each([
    ["0644 in a 0755 directory", { file: 0o644, dir: 0o755 }],
    ["0444 in a 0555 directory", { file: 0o444, dir: 0o555 }]
  ])("a database root owns, %s: list, show and events work, and nothing is written", async (_name, modes) => {
    const { dir, file } = await rootDb(modes)
    expect(fs.readdirSync(dir)).toEqual(["logbook.db"])
    const before = snapshotOf(dir)

    const list = await runCli(["sessions", "list", "--db", file, "--format", "json"], asNobody())
    expect(list.stderr).toBe("")
    expect(list.code).toBe(0)
    expect(JSON.parse(list.stdout)).toMatchObject([{ id, title: "Fix the failing test", model: "test-model" }])
    const table = await runCli(["sessions", "list", "--db", file], asNobody())
    expect(table.code).toBe(0)
    expect(table.stdout).toContain("Fix the failing test")

    const show = await runCli(["sessions", "show", id.slice(0, 8), "--db", file], asNobody())
    expect(show.stderr).toBe("")
    expect(show.code).toBe(0)
    expect(show.stdout).toMatch(/^Fix the failing test\n/)

    const events = await runCli(["events", "latest", "--db", file, "--format", "json"], asNobody())
    expect(events.code).toBe(0)
    expect(events.stdout.trimEnd().split("\n")).toHaveLength(20)

    // the directory holds what it held, byte for byte: no -wal, -shm or journal next to the file
    expect(snapshotOf(dir)).toEqual(before)
    // the private copies it read are gone
    expect(copiesIn()).toEqual([])
  })

  it("in a directory anyone may write, a reader creates no -wal / -shm next to another user's database", async () => {
    // nobody owns the database; another ordinary user (65533) reads it; then nobody writes to it
    const dir = sharedDir()
    fs.chmodSync(dir, 0o777)
    const file = path.join(dir, "logbook.db")
    await seed(file, [{ id, events: sampleSession() }])
    fs.chmodSync(file, 0o644)
    fs.chownSync(file, NOBODY, NOBODY)
    const before = snapshotOf(dir)
    const other = { ...asNobody(), uid: NOBODY - 1, gid: NOBODY - 1 }
    fs.chownSync(nobodyTmp, NOBODY - 1, NOBODY - 1)
    try {
      const list = await runCli(["sessions", "list", "--db", file, "--format", "json"], other)
      expect(list.code).toBe(0)
      expect(JSON.parse(list.stdout)).toMatchObject([{ id }])
      expect(snapshotOf(dir)).toEqual(before)
    } finally {
      fs.chownSync(nobodyTmp, NOBODY, NOBODY)
    }
    // the owner's writer still works (it would not with another user's -shm next to its file)
    const deleted = await runCli(["sessions", "delete", id, "--db", file], asNobody())
    expect(deleted.stderr).toBe("")
    expect(deleted.code).toBe(0)
  })

  it("a command that writes says the database is read-only to this user", async () => {
    const { dir, file } = await rootDb({ file: 0o644, dir: 0o755 })
    const before = snapshotOf(dir)
    const result = await runCli(["sessions", "delete", id, "--db", file], asNobody())
    expect(result.code).toBe(2)
    expect(result.stderr).toBe(
      `logbook: ${file} is read-only to this user: a command that writes (run, compact, sessions delete) cannot use it, the read commands can\n`
    )
    expect(snapshotOf(dir)).toEqual(before)
  })

  it("events --follow of a database nobody writes now shows what another process appends later", async () => {
    const { file } = await rootDb({ file: 0o644, dir: 0o755 })
    const follow = spawnCli(["events", id, "--db", file, "--from", "19", "--follow"], asNobody())
    try {
      const stored = await follow.waitForLines(2)
      expect(stored[1]).toMatch(/^\s+20 .* session\.status/)
      // SQLite cannot read it in place: it reads a private copy
      expect(copiesIn()).toEqual([expect.stringMatching(/^logbook-copy-/)])
      // root appends, and closes its writer (so the -wal and -shm are gone again)
      await seed(file, [{ id, events: [progress(1)] }])
      const lines = await follow.waitForLines(3)
      expect(lines[2]).toMatch(/^\s+21 .* tool\.progress\s+call=call-ok "late 1"$/)
      await seed(file, [{ id, events: [progress(2)] }])
      expect((await follow.waitForLines(4))[3]).toMatch(/^\s+22 .* "late 2"$/)
    } finally {
      follow.child.kill("SIGINT")
    }
    expect((await follow.exited).code).toBe(130)
    expect(follow.stderr()).toBe("")
    expect(copiesIn()).toEqual([])
  })

  it("events --follow while a writer runs reads in place and sees each commit", async () => {
    const { dir, file } = await rootDb({ file: 0o644, dir: 0o755 })
    // a writer that stays open: its -wal and -shm (created 0644, like the file) stay next to it
    const writer = new Database(file)
    writer.pragma("journal_mode = WAL")
    try {
      expect(fs.readdirSync(dir).sort()).toEqual(["logbook.db", "logbook.db-shm", "logbook.db-wal"])
      const follow = spawnCli(["events", id, "--db", file, "--from", "20", "--follow"], asNobody())
      try {
        await follow.waitForLines(1)
        await seed(file, [{ id, events: [progress(1)] }])
        expect((await follow.waitForLines(2))[1]).toMatch(/^\s+21 .* "late 1"$/)
        // in place: no copy
        expect(copiesIn()).toEqual([])
        await seed(file, [{ id, events: [progress(2), progress(3)] }])
        expect((await follow.waitForLines(4)).slice(2)).toEqual([
          expect.stringMatching(/^\s+22 .* "late 2"$/),
          expect.stringMatching(/^\s+23 .* "late 3"$/)
        ])
      } finally {
        follow.child.kill("SIGINT")
      }
      expect((await follow.exited).code).toBe(130)
    } finally {
      writer.close()
    }
  })

  it("a database of the older schema: read from an upgraded copy (with a warning), upgraded by a command that writes", async () => {
    const { dir, file } = await rootDb({ file: 0o644, dir: 0o755 })
    fs.chmodSync(dir, 0o755)
    downgradeToSchema1(file)
    fs.chmodSync(file, 0o644)
    const before = snapshotOf(dir)
    const old = await runCli(["sessions", "list", "--db", file, "--format", "json"], asNobody())
    expect(old.code).toBe(0)
    // the outcome, model and cost the old index lacks come from the events
    expect(JSON.parse(old.stdout)).toMatchObject([
      { id, model: "test-model", outcome: "interrupted", cost: 0.0123, costKnown: true }
    ])
    expect(old.stderr).toBe(
      `logbook: warn: ${file} was written by an older logbook (it has schema 1, older than this logbook's ${LATEST_MIGRATION}): ` +
        "read from an upgraded private copy; the next logbook command that writes to it (run, compact, sessions delete) upgrades it in place\n"
    )
    expect(snapshotOf(dir)).toEqual(before)
    expect(schemaOf(file)).toBe(1)
    expect(copiesIn()).toEqual([])

    // root (the owner) deletes a session: the writable open upgrades the file
    const deleted = await runCli(["sessions", "delete", id, "--db", file])
    expect(deleted.code).toBe(0)
    expect(schemaOf(file)).toBe(LATEST_MIGRATION)
    const now = await runCli(["sessions", "list", "--all", "--db", file, "--format", "json"], asNobody())
    expect(now.stderr).toBe("")
    expect(JSON.parse(now.stdout)).toMatchObject([{ id, deleted: true, outcome: "interrupted" }])
  })
})

describe.runIf(!isRoot)("read commands with read access only", () => {
  it.skip("needs root to create databases owned by another user (this process is not root)", () => {})
})
