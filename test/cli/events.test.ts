/**
 * `logbook events`: text and JSON output, filters, and --follow across processes.
 */
import { beforeAll, describe, expect, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { summarize } from "../../src/cli/eventText.js"
import { makeStyle } from "../../src/cli/render.js"
import * as Events from "../../src/domain/Events.js"
import { CallId } from "../../src/domain/Ids.js"
import { runCli, sampleSession, scratchDb, seed, spawnCli } from "../support/cli.js"

const id = "0195a0b0-0000-7000-8000-000000000001"
const other = "0195a0b0-0000-7000-8000-000000000002"

const progress = (n: number): Events.NewEvent =>
  Events.make("tool.progress", { callId: CallId.make("call-x"), output: `line ${n}` })
const titled = (n: number): Events.NewEvent => Events.make("session.titled", { title: `title ${n}` })

const parseLines = (stdout: string) =>
  stdout
    .trimEnd()
    .split("\n")
    .map((line) => JSON.parse(line) as Events.Envelope)

describe("logbook events", () => {
  let db: string
  let stored: ReadonlyArray<Events.Envelope>
  beforeAll(async () => {
    db = scratchDb()
    const all = await seed(db, [
      { id, events: sampleSession() },
      { id: other, events: sampleSession("Other").slice(0, 2) }
    ])
    stored = all.filter((e) => e.sessionId === id)
  })

  it("text: one line per event with seq, local time, type and a summary", async () => {
    const result = await runCli(["events", id, "--db", db])
    expect(result.code).toBe(0)
    expect(result.stderr).toBe("")
    const lines = result.stdout.trimEnd().split("\n")
    expect(lines).toHaveLength(20)
    expect(lines[0]).toMatch(
      /^ {3}1 {2}2025-01-15 15:30:00\.000 {2}session\.created +title="Fix the failing test" cwd="\/home\/dev\/project"/
    )
    expect(lines[1]).toMatch(
      /^ {3}2 {2}2025-01-15 15:30:01\.000 {2}user\.message +\[prompt\] "Please fix the failing test"$/
    )
    expect(lines[9]).toMatch(/^ {2}10 .* tool\.invoked +bash call=call-ok input=\{"command":"npm test"\}$/)
    expect(lines[10]).toMatch(/tool\.finished +call=call-ok output="1 passed⏎all good"$/)
    expect(lines[12]).toMatch(/tool\.failed +call=call-int interrupted reason="user" error="cancelled by the user"$/)
    expect(lines[14]).toMatch(/tool\.timeout +call=call-slow after 30s$/)
    expect(lines[16]).toMatch(/step\.finished +step=0 finish=tool-calls in=1200 out=80 reasoning=10 cost=\$0\.0123$/)
    expect(lines.map((l) => Number(l.trim().split(" ")[0]))).toEqual(stored.map((e) => e.seq))
    expect(result.stdout).not.toContain("\u001b[")
  })

  it("json: one line per event, each exactly the stored envelope", async () => {
    const result = await runCli(["events", id, "--format", "json", "--db", db])
    expect(result.code).toBe(0)
    const lines = result.stdout.trimEnd().split("\n")
    for (const line of lines) {
      expect(Object.keys(JSON.parse(line))).toEqual([
        "id",
        "sessionId",
        "seq",
        "type",
        "at",
        "parentId",
        "v",
        "payload"
      ])
    }
    expect(parseLines(result.stdout)).toEqual(stored)
  })

  it("--type filters by type (repeatable, comma-separated, and tool.* for a family)", async () => {
    const repeated = await runCli([
      "events",
      id,
      "--format",
      "json",
      "--type",
      "tool.invoked",
      "-t",
      "user.message",
      "--db",
      db
    ])
    expect(repeated.code).toBe(0)
    expect(parseLines(repeated.stdout).map((e) => e.seq)).toEqual(
      stored.filter((e) => e.type === "tool.invoked" || e.type === "user.message").map((e) => e.seq)
    )
    const comma = await runCli(["events", id, "--format", "json", "--type", "tool.invoked,user.message", "--db", db])
    expect(comma.stdout).toBe(repeated.stdout)
    const family = await runCli(["events", id, "--format", "json", "--type", "tool.*", "--db", db])
    expect(parseLines(family.stdout)).toEqual(stored.filter((e) => e.type.startsWith("tool.")))
  })

  it("an unknown --type is a usage error naming the known types", async () => {
    const result = await runCli(["events", id, "--type", "tool.invokd", "--db", db])
    expect(result.code).toBe(2)
    expect(result.stdout).toBe("")
    expect(result.stderr).toMatch(
      /^logbook: unknown event type "tool\.invokd"; known types: session\.created, .*tool\.invoked/
    )
    expect(result.stderr.trimEnd().split("\n")).toHaveLength(1)
  })

  it("--from and --to are inclusive seq bounds", async () => {
    const result = await runCli(["events", id, "--format", "json", "--from", "5", "--to", "8", "--db", db])
    expect(result.code).toBe(0)
    expect(parseLines(result.stdout)).toEqual(stored.filter((e) => e.seq >= 5 && e.seq <= 8))
    const text = await runCli(["events", id, "--from", "19", "--db", db])
    expect(
      text.stdout
        .trimEnd()
        .split("\n")
        .map((l) => l.trim().split(" ")[0])
    ).toEqual(["19", "20"])
    const inverted = await runCli(["events", id, "--from", "9", "--to", "3", "--db", db])
    expect(inverted.code).toBe(2)
    expect(inverted.stderr).toBe("logbook: --from 9 is after --to 3\n")
  })

  it("accepts a unique id prefix", async () => {
    const result = await runCli(["events", "0195a0b0-0000-7000-8000-0000000000", "--db", db])
    expect(result.code).toBe(2) // two sessions share this prefix
    const unique = await runCli(["events", "0195a0b0-0000-7000-8000-000000000002", "--format", "json", "--db", db])
    expect(parseLines(unique.stdout).map((e) => e.sessionId)).toEqual([other, other])
  })

  describe("--follow", () => {
    it("prints stored events, then events another process appends, in order and once each; SIGINT exits 130", async () => {
      const file = scratchDb()
      const session = "follow-session-1"
      await seed(file, [{ id: session, events: [Events.make("session.created", { title: "live" }), titled(1)] }])
      const live = spawnCli(["events", session, "--follow", "--format", "json", "--db", file])
      try {
        await live.waitForLines(2)
        await seed(file, [{ id: session, events: [titled(2), titled(3)] }])
        await live.waitForLines(4)
        for (let n = 4; n <= 8; n++) await seed(file, [{ id: session, events: [titled(n)] }])
        await seed(file, [{ id: session, events: Array.from({ length: 30 }, (_, i) => titled(100 + i)) }])
        const lines = await live.waitForLines(39)
        const seqs = lines.map((line) => (JSON.parse(line) as Events.Envelope).seq)
        expect(seqs).toEqual(Array.from({ length: 39 }, (_, i) => i + 1))
        expect((JSON.parse(lines[38]!) as Events.Envelope).payload).toEqual({ title: "title 129" })
      } finally {
        live.child.kill("SIGINT")
      }
      const exit = await live.exited
      expect(exit).toEqual({ code: 130, signal: null })
      expect(live.stderr()).toBe("")
      expect(live.lines()).toHaveLength(39)
    })

    it("SIGTERM ends it with exit code 130 too; --type and --from apply to live events", async () => {
      const file = scratchDb()
      const session = "follow-session-2"
      await seed(file, [{ id: session, events: [Events.make("session.created", {}), progress(1), titled(1)] }])
      const live = spawnCli(["events", session, "-f", "--from", "2", "--type", "session.titled", "--db", file])
      try {
        await live.waitForLines(1)
        await seed(file, [{ id: session, events: [progress(2), titled(2), progress(3)] }])
        await seed(file, [{ id: session, events: [titled(3)] }])
        const lines = await live.waitForLines(3)
        expect(lines.map((l) => l.trim().split(/\s+/)[0])).toEqual(["3", "5", "7"])
        expect(lines.every((l) => l.includes("session.titled"))).toBe(true)
      } finally {
        live.child.kill("SIGTERM")
      }
      expect(await live.exited).toEqual({ code: 130, signal: null })
    })

    it("prints events of a type this version does not know, exactly as stored, like plain `events`", async () => {
      const file = scratchDb()
      const session = "follow-session-4"
      await seed(file, [{ id: session, events: [Events.make("session.created", {}), titled(1)] }])
      const raw = new Database(file)
      raw
        .prepare(
          "INSERT INTO events (session_id, seq, id, type, at, parent_id, v, payload) VALUES (?, 3, 'future-1', 'tool.approved', 0, NULL, 1, ?)"
        )
        .run(session, JSON.stringify({ callId: "c", by: "someone", extra: [1, 2] }))
      raw.close()
      const live = spawnCli(["events", session, "--follow", "--to", "3", "--format", "json", "--db", file])
      try {
        expect(await live.exited).toEqual({ code: 0, signal: null })
        const lines = live.lines().map((l) => JSON.parse(l) as Events.RawEnvelope)
        expect(lines.map((e) => e.seq)).toEqual([1, 2, 3])
        expect(lines[2]).toMatchObject({
          type: "tool.approved",
          payload: { callId: "c", by: "someone", extra: [1, 2] }
        })
      } finally {
        live.child.kill("SIGKILL")
      }
    })

    it("with --to, exits 0 once that seq has been printed", async () => {
      const file = scratchDb()
      const session = "follow-session-3"
      await seed(file, [{ id: session, events: [Events.make("session.created", {}), titled(1)] }])
      const live = spawnCli(["events", session, "--follow", "--to", "4", "--format", "json", "--db", file])
      try {
        await live.waitForLines(2)
        await seed(file, [{ id: session, events: [titled(2), titled(3), titled(4)] }])
        expect(await live.exited).toEqual({ code: 0, signal: null })
        expect(live.lines().map((l) => (JSON.parse(l) as Events.Envelope).seq)).toEqual([1, 2, 3, 4])
      } finally {
        live.child.kill("SIGKILL")
      }
    })
  })
})

describe("summarize: the one-line text of an event", () => {
  const plain = makeStyle(false)
  it("tool.process shows the call and its group; an unanswered ask's reply says interrupted", () => {
    expect(summarize("tool.process", { callId: "c1", pgid: 4242, token: "t" }, plain)).toBe("call=c1 pgid=4242")
    expect(summarize("permission.replied", { permissionId: "p1", reply: "reject", interrupted: true }, plain)).toBe(
      'reply="reject" interrupted=true permissionId="p1"'
    )
  })

  it("step.finished shows the cost as unknown, or as a lower bound, when steps had no price", () => {
    const step = (usage: Record<string, unknown>) =>
      summarize("step.finished", { messageId: "m", step: 0, finishReason: "stop", usage }, plain)
    const tokens = { input: 10, output: 2, reasoning: 0, cacheRead: 0, cacheWrite: 0 }
    expect(step({ ...tokens, cost: 0, costKnown: false })).toBe("step=0 finish=stop in=10 out=2 cost=unknown")
    expect(step({ ...tokens, cost: 0.0123, costKnown: false })).toBe("step=0 finish=stop in=10 out=2 cost=≥$0.0123")
    expect(step({ ...tokens, cost: 0.0123 })).toBe("step=0 finish=stop in=10 out=2 cost=$0.0123")
  })

  it("file.changed says a change a snapshot observed and a content not stored; workspace.snapshot its counts and bounds", () => {
    expect(summarize("file.changed", { path: "a.ts", op: "update", callId: "c1" }, plain)).toBe("update a.ts call=c1")
    expect(
      summarize(
        "file.changed",
        {
          path: "big.bin",
          op: "update",
          callId: "c1",
          observed: true,
          beforeOmitted: "too-large",
          afterOmitted: "too-large"
        },
        plain
      )
    ).toBe("update big.bin call=c1 observed content not stored (too-large, too-large)")
    expect(
      summarize(
        "workspace.snapshot",
        { callId: "c1", phase: "baseline", manifest: "ab12", files: 812, limits: [{ limit: "fileBytes", files: 1 }] },
        plain
      )
    ).toBe("baseline call=c1 files=812 manifest=ab12 limits=fileBytes:1")
    expect(summarize("workspace.snapshot", { callId: "c1", phase: "after", files: 813, changed: 2 }, plain)).toBe(
      "after call=c1 files=813 changed=2"
    )
  })
})
