/**
 * `logbook sessions list` and `logbook sessions show` against real SQLite files.
 */
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "@effect/vitest"
import { runCli, sampleSession, scratchDb, scratchDir, seed, T0 } from "../support/cli.js"

const first = "0195a0b0-0000-7000-8000-000000000001"
const second = "0195a0b0-0000-7000-8000-0000000000b2"
const deleted = "0195a0b0-0000-7000-8000-0000000000c3"

describe("logbook sessions", () => {
  let db: string
  beforeAll(async () => {
    db = scratchDb()
    await seed(db, [
      { id: first, events: sampleSession() },
      { id: second, events: sampleSession("Second session", T0 + 86_400_000).slice(0, 3) },
      {
        id: deleted,
        events: [
          ...sampleSession("Thrown away", T0 - 86_400_000).slice(0, 1),
          { type: "session.deleted", payload: {}, at: T0 - 86_000_000 }
        ]
      }
    ])
  })

  describe("list", () => {
    it("prints a table, most recently updated first, times in local time", async () => {
      const result = await runCli(["sessions", "list", "--db", db])
      expect(result.code).toBe(0)
      expect(result.stderr).toBe("")
      const lines = result.stdout.trimEnd().split("\n")
      expect(lines[0]).toMatch(/^ID\s+TITLE\s+STATUS\s+UPDATED\s+EVENTS\s+CWD$/)
      expect(lines).toHaveLength(3) // the deleted session is hidden
      expect(lines[1]).toContain(second)
      expect(lines[1]).toContain("Second session")
      expect(lines[2]).toContain(first)
      // T0 + 35.4 s in Asia/Kolkata (UTC+05:30); 20 events
      expect(lines[2]).toMatch(/Fix the failing test\s+idle\s+2025-01-15 15:30:35\s+20\s+\/home\/dev\/project$/)
      expect(result.stdout).not.toContain("\u001b[")
    })

    it("shows times in the TZ of the user", async () => {
      const result = await runCli(["sessions", "list", "--db", db], { env: { TZ: "UTC" } })
      expect(result.stdout).toContain("2025-01-15 10:00:35")
    })

    it("--all includes deleted sessions and --limit cuts the list", async () => {
      const all = await runCli(["sessions", "list", "--db", db, "--all"])
      expect(all.stdout).toContain(deleted)
      expect(all.stdout).toMatch(/Thrown away\s+deleted/)
      const zero = await runCli(["sessions", "list", "--db", db, "--limit", "0"])
      expect(zero.code).toBe(2)
      expect(zero.stderr).toBe("logbook: --limit must be at least 1 (got 0)\n")
      const limited = await runCli(["sessions", "list", "--db", db, "--limit", "1"])
      expect(limited.stdout.trimEnd().split("\n")).toHaveLength(2)
      expect(limited.stdout).toContain(second)
    })

    it("--format json prints the index as a JSON array", async () => {
      const result = await runCli(["sessions", "list", "--format", "json", "--db", db])
      expect(result.code).toBe(0)
      const sessions = JSON.parse(result.stdout) as Array<Record<string, unknown>>
      expect(sessions.map((s) => s.id)).toEqual([second, first])
      expect(sessions[1]).toEqual({
        id: first,
        title: "Fix the failing test",
        status: "idle",
        cwd: "/home/dev/project",
        createdAt: T0,
        updatedAt: T0 + 35_400,
        lastSeq: 20,
        deleted: false
      })
    })

    it("an empty database says there are no sessions (and [] in JSON)", async () => {
      const empty = path.join(scratchDir(), "empty.db")
      await seed(empty, [])
      const table = await runCli(["sessions", "list", "--db", empty])
      expect(table.code).toBe(0)
      expect(table.stdout).toMatch(/^No sessions in .*empty\.db yet/)
      const json = await runCli(["sessions", "list", "--db", empty, "--format", "json"])
      expect(JSON.parse(json.stdout)).toEqual([])
    })
  })

  describe("show", () => {
    it("shows the conversation: messages, reasoning, tools with state and duration, totals", async () => {
      const result = await runCli(["sessions", "show", first, "--db", db])
      expect(result.code).toBe(0)
      expect(result.stderr).toBe("")
      const out = result.stdout
      expect(out).toMatch(/^Fix the failing test\n/)
      expect(out).toMatch(/status\s+idle/)
      expect(out).toMatch(/created\s+2025-01-15 15:30:00/)
      expect(out).toMatch(/updated\s+2025-01-15 15:30:35/)
      expect(out).toMatch(/turn\s+interrupted \(user\)/)
      expect(out).toMatch(/tokens\s+in 1,200 · out 80 · reasoning 10 · cost \$0\.0123/)
      // messages in order
      const user = out.indexOf("Please fix the failing test")
      const reasoning = out.indexOf("~ Let me look at the test.")
      const text = out.indexOf("I will run the tests first.")
      const ok = out.indexOf("▸ bash completed 1.2s")
      const interrupted = out.indexOf("▸ read error (interrupted: user) 250ms")
      const timedOut = out.indexOf("▸ bash error (timed out) 30s")
      expect([user, reasoning, text, ok, interrupted, timedOut].every((i) => i >= 0)).toBe(true)
      expect([user, reasoning, text, ok, interrupted, timedOut]).toEqual(
        [user, reasoning, text, ok, interrupted, timedOut].slice().sort((a, b) => a - b)
      )
      expect(out).toContain('input   {"command":"npm test"}')
      expect(out).toMatch(/output {2}1 passed\n\s+all good/)
      expect(out).toContain("error   cancelled by the user")
      expect(out).toContain("error   timed out after 30s")
      expect(out).not.toContain("\u001b[")
    })

    it("accepts a unique prefix of the id", async () => {
      const result = await runCli(["sessions", "show", "0195a0b0-0000-7000-8000-0000000000b", "--db", db])
      expect(result.code).toBe(0)
      expect(result.stdout).toMatch(/^Second session\n/)
      expect(result.stdout).toContain(`id       ${second}`)
    })

    it("--at replays the session to an earlier seq", async () => {
      const result = await runCli(["sessions", "show", first, "--at", "12", "--db", db])
      expect(result.code).toBe(0)
      expect(result.stdout).toMatch(/events\s+12 of 20 \(replayed to seq 12\)/)
      expect(result.stdout).toContain("▸ bash completed 1.2s")
      expect(result.stdout).toContain("▸ read running since 2025-01-15 15:30:04")
      expect(result.stdout).not.toContain("timed out after 30s")
    })

    it("--format json prints the projected state", async () => {
      const result = await runCli(["sessions", "show", first, "--format", "json", "--db", db])
      expect(result.code).toBe(0)
      const state = JSON.parse(result.stdout)
      expect(state).toMatchObject({ sessionId: first, title: "Fix the failing test", lastSeq: 20 })
      expect(state.toolParts["call-ok"].state).toMatchObject({ _tag: "completed", output: "1 passed\nall good" })
      expect(state.toolParts["call-int"].state).toMatchObject({ _tag: "error", interrupted: true })
    })

    it("reasoning is dimmed when color is forced, and NO_COLOR wins", async () => {
      const colored = await runCli(["sessions", "show", first, "--db", db], { env: { FORCE_COLOR: "1" } })
      expect(colored.stdout).toContain("\u001b[2m")
      const plain = await runCli(["sessions", "show", first, "--db", db], {
        env: { FORCE_COLOR: "1", NO_COLOR: "1" }
      })
      expect(plain.stdout).not.toContain("\u001b[")
    })

    it("an ambiguous prefix is a usage error that lists the candidates", async () => {
      const result = await runCli(["sessions", "show", "0195a0b0", "--db", db])
      expect(result.code).toBe(2)
      expect(result.stdout).toBe("")
      expect(result.stderr).toMatch(/^logbook: "0195a0b0" matches 3 sessions .*; give more of the id\n$/)
    })

    it("--at outside the session is a usage error", async () => {
      const result = await runCli(["sessions", "show", first, "--at", "99", "--db", db])
      expect(result.code).toBe(2)
      expect(result.stderr).toBe("logbook: --at 99 is outside the session's events (1 to 20)\n")
    })
  })
})
