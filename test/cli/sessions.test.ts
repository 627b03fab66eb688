/**
 * `logbook sessions list` and `logbook sessions show` against real SQLite files.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Events from "../../src/domain/Events.js"
import { MessageId, SessionId, TurnId } from "../../src/domain/Ids.js"
import { EventStore } from "../../src/store/EventStore.js"
import { runCli, sampleSession, scratchDb, scratchDir, seed, T0 } from "../support/cli.js"

/**
 * A session with one turn: a user message, an assistant message with one step (its `usage`
 * cost) and, when `end` is given, the turn's end (else the turn stays open and the session busy).
 */
const turnSession = (options: {
  readonly title: string
  readonly model?: string
  readonly usage?: { readonly cost: number; readonly costKnown?: boolean }
  readonly end?: { readonly type: "turn.finished" | "turn.interrupted"; readonly reason: string }
  readonly at: number
}): ReadonlyArray<Events.NewEvent> => {
  const user = MessageId.make("m-user")
  const assistant = MessageId.make("m-assistant")
  const turnId = TurnId.make("turn-1")
  const usage = { input: 100, output: 10, reasoning: 0, cacheRead: 0, cacheWrite: 0, ...(options.usage ?? { cost: 0 }) }
  const events: Array<Events.NewEvent> = [
    Events.make("session.created", { title: options.title, cwd: "/work", model: options.model ?? "test-model" }),
    Events.make("user.message", { messageId: user, text: options.title, mode: "prompt" }),
    Events.make("turn.started", { turnId, messageIds: [user] }),
    Events.make("session.status", { status: { _tag: "busy" } }),
    Events.make("assistant.started", { messageId: assistant, ...(options.model ? { model: options.model } : {}) }),
    Events.make("step.started", { messageId: assistant, step: 0 }),
    Events.make("step.finished", { messageId: assistant, step: 0, finishReason: "stop", usage })
  ]
  if (options.end !== undefined) {
    events.push(
      Events.make("assistant.completed", { messageId: assistant, finishReason: "stop" }),
      options.end.type === "turn.finished"
        ? Events.make("turn.finished", { turnId, reason: options.end.reason })
        : Events.make("turn.interrupted", { turnId, reason: options.end.reason }),
      Events.make("session.status", { status: { _tag: "idle" } })
    )
  }
  return events.map((e, i) => ({ ...e, at: options.at + i }))
}

/** Takes the lease of a session for `owner`, for an hour: as a live driver holds it. */
const holdLease = (file: string, sessionId: string, owner: string) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const store = yield* EventStore
      yield* store.acquireLease(SessionId.make(sessionId), owner, 3_600_000)
    }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file })))
  )

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
      expect(lines[0]).toMatch(/^ID\s+STATUS\s+UPDATED\s+COST\s+MODEL\s+TITLE$/)
      expect(lines).toHaveLength(3) // the deleted session is hidden
      // these fixture ids differ only near their end: their short ids are long, but unique
      // before this year: the date only
      expect(lines[1]).toMatch(/^0195a0b0-0000-7000-8000-0000000000b\s+crashed\s+2025-01-16\s+\$0\s+test-model\s+Sec/)
      expect(lines[2]).toMatch(
        /^0195a0b0-0000-7000-8000-00000000000\s+interrupted\s+2025-01-15\s+\$0\.0123\s+test-model\s+Fix/
      )
      expect(result.stdout).not.toContain("\u001b[")
    })

    it("shows when in the TZ of the user: MM-DD HH:MM this year, the date before", async () => {
      const file = scratchDb()
      // 20:00 UTC is 01:30 the next day in Asia/Kolkata
      const late = Date.UTC(2025, 0, 15, 20, 0, 0)
      const now = Date.now()
      await seed(file, [
        { id: "0195a0d0-0000-7000-8000-000000000001", events: [{ ...Events.make("session.created", {}), at: late }] },
        { id: "0195a0d1-0000-7000-8000-000000000002", events: [{ ...Events.make("session.created", {}), at: now }] }
      ])
      const utc = await runCli(["sessions", "list", "--db", file], { env: { TZ: "UTC" } })
      const d = new Date(now)
      const pad = (n: number) => String(n).padStart(2, "0")
      expect(utc.stdout).toMatch(
        new RegExp(
          `^0195a0d1\\s+new\\s+${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}\\s`,
          "m"
        )
      )
      expect(utc.stdout).toMatch(/^0195a0d0\s+new\s+2025-01-15\s/m)
      const kolkata = await runCli(["sessions", "list", "--db", file])
      expect(kolkata.stdout).toMatch(/^0195a0d0\s+new\s+2025-01-16\s/m)
    })

    it("--all includes deleted sessions and --limit cuts the list", async () => {
      const all = await runCli(["sessions", "list", "--db", db, "--all"])
      expect(all.stdout).toMatch(/0195a0b0-0000-7000-8000-0000000000c\s+deleted\s+.*Thro/)
      const zero = await runCli(["sessions", "list", "--db", db, "--limit", "0"])
      expect(zero.code).toBe(2)
      expect(zero.stderr).toBe("logbook: --limit must be at least 1 (got 0)\n")
      const limited = await runCli(["sessions", "list", "--db", db, "--limit", "1"])
      expect(limited.stdout.trimEnd().split("\n")).toHaveLength(2)
      expect(limited.stdout).toContain("0195a0b0-0000-7000-8000-0000000000b ")
    })

    it("--format json prints the index as a JSON array, with full ids and the outcome, model and cost", async () => {
      const result = await runCli(["sessions", "list", "--format", "json", "--db", db])
      expect(result.code).toBe(0)
      const sessions = JSON.parse(result.stdout) as Array<Record<string, unknown>>
      expect(sessions.map((s) => s.id)).toEqual([second, first])
      expect(sessions[1]).toEqual({
        id: first,
        shortId: "0195a0b0-0000-7000-8000-00000000000",
        title: "Fix the failing test",
        outcome: "interrupted",
        status: "idle",
        model: "test-model",
        cost: 0.0123,
        costKnown: true,
        cwd: "/home/dev/project",
        createdAt: T0,
        updatedAt: T0 + 35_400,
        lastSeq: 20,
        lastTurn: { reason: "user", interrupted: true },
        deleted: false
      })
      expect(sessions[0]).toMatchObject({ id: second, outcome: "crashed", lastTurn: null })
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

    it("a database whose sessions are all deleted says so, and how to list them", async () => {
      const file = scratchDb()
      await seed(file, [
        { id: deleted, events: [Events.make("session.created", {}), Events.make("session.deleted", {})] }
      ])
      const result = await runCli(["sessions", "list", "--db", file])
      expect(result.code).toBe(0)
      expect(result.stdout).toBe(`No sessions in ${file}, but 1 deleted one: logbook sessions list --all lists it.\n`)
    })
  })

  describe("list: outcome, model, cost, short ids, 80 columns", () => {
    let file: string
    const ids = {
      finished: "0195a0b1-1111-7aaa-8000-000000000001",
      failed: "0195a0b2-2222-7bbb-8000-000000000002",
      maxSteps: "0195a0b3-3333-7ccc-8000-000000000003",
      interrupted: "0195a0b4-4444-7ddd-8000-000000000004",
      crashed: "0195a0b5-5555-7eee-8000-000000000005",
      running: "0195a0b6-6666-7fff-8000-000000000006",
      fresh: "0195a0b7-7777-7000-8000-000000000007",
      repaired: "0195a0b8-8888-7111-8000-000000000008",
      gone: "0195a0b9-9999-7222-8000-000000000009",
      twinA: "0195a0ba-0000-7333-8000-00000000000a",
      twinB: "0195a0ba-0001-7444-8000-00000000000b"
    }
    beforeAll(async () => {
      file = scratchDb()
      let t = T0
      const next = () => (t += 60_000)
      await seed(file, [
        {
          id: ids.finished,
          events: turnSession({
            title: "Refactor the event store so that snapshots are taken at every turn's end and pruned",
            model: "anthropic/claude-sonnet-4-5-20250929",
            usage: { cost: 0.04 },
            end: { type: "turn.finished", reason: "stop" },
            at: next()
          })
        },
        {
          id: ids.failed,
          events: turnSession({
            title: "A model without a price",
            model: "local/qwen3",
            usage: { cost: 0, costKnown: false },
            end: { type: "turn.finished", reason: "error" },
            at: next()
          })
        },
        {
          id: ids.maxSteps,
          events: turnSession({
            title: "Partly priced",
            model: "openai/gpt-5",
            usage: { cost: 0.01, costKnown: false },
            end: { type: "turn.finished", reason: "max-steps" },
            at: next()
          })
        },
        {
          id: ids.interrupted,
          events: turnSession({
            title: "Stopped with Ctrl-C",
            end: { type: "turn.interrupted", reason: "user" },
            at: next()
          })
        },
        { id: ids.crashed, events: turnSession({ title: "Its process was killed", at: next() }) },
        { id: ids.running, events: turnSession({ title: "Still working", at: next() }) },
        { id: ids.fresh, events: [{ ...Events.make("session.created", { title: "Nothing yet" }), at: next() }] },
        {
          id: ids.repaired,
          events: turnSession({
            title: "Repaired after a crash",
            end: { type: "turn.interrupted", reason: "crash" },
            at: next()
          })
        },
        {
          id: ids.gone,
          events: [
            { ...Events.make("session.created", { title: "Deleted" }), at: next() },
            { ...Events.make("session.deleted", {}), at: next() }
          ]
        },
        { id: ids.twinA, events: [{ ...Events.make("session.created", { title: "Twin A" }), at: next() }] },
        { id: ids.twinB, events: [{ ...Events.make("session.created", { title: "Twin B" }), at: next() }] }
      ])
      // a live process (this one) drives `running`; `crashed` has an open turn and nobody drives it
      await holdLease(file, ids.running, `${os.hostname()}:${process.pid}:test`)
    })

    it("each row says how the session stands, with its model and cost, in 80 columns", async () => {
      const result = await runCli(["sessions", "list", "--db", file])
      expect(result.code).toBe(0)
      expect(result.stderr).toBe("")
      const lines = result.stdout.trimEnd().split("\n")
      for (const line of lines) expect(Array.from(line).length).toBeLessThanOrEqual(80)
      const row = (title: string) => lines.find((line) => line.includes(title.slice(0, 10)))
      expect(lines[0]).toMatch(/^ID\s+STATUS\s+UPDATED\s+COST\s+MODEL\s+TITLE$/)
      // the title is cut to fit, the model loses its provider (and is cut) when it does not fit
      expect(row("Refactor the event store")).toMatch(
        /^0195a0b1\s+finished\s+2025-01-15\s+\$0\.0400\s+claude-so…\s+Refactor the eve…$/
      )
      expect(row("A model without")).toMatch(/^0195a0b2\s+failed\s+2025-01-15\s+unknown\s+qwen3\s+A model without …$/)
      expect(row("Partly priced")).toMatch(/^0195a0b3\s+max-steps\s+2025-01-15\s+≥ \$0\.0100\s+gpt-5\s+Partly priced$/)
      expect(row("Stopped with Ctrl-C")).toMatch(
        /^0195a0b4\s+interrupted\s+2025-01-15\s+\$0\s+test-model\s+Stopped with Ctr…$/
      )
      expect(row("Its process was killed")).toMatch(/^0195a0b5\s+crashed\s/)
      expect(row("Still working")).toMatch(/^0195a0b6\s+running\s/)
      expect(row("Nothing yet")).toMatch(/^0195a0b7\s+new\s+2025-01-15\s+\$0\s+-\s+Nothing yet$/)
      expect(row("Repaired after a crash")).toMatch(/^0195a0b8\s+crashed\s/)
      expect(row("Twin A")).toMatch(/^0195a0ba-0000\s+new\s/)
      expect(row("Twin B")).toMatch(/^0195a0ba-0001\s+new\s/)
      expect(result.stdout).not.toContain("Deleted")
      // most recently updated first
      expect(lines.slice(1).map((line) => line.split(" ")[0])).toEqual([
        "0195a0ba-0001",
        "0195a0ba-0000",
        "0195a0b8",
        "0195a0b7",
        "0195a0b6",
        "0195a0b5",
        "0195a0b4",
        "0195a0b3",
        "0195a0b2",
        "0195a0b1"
      ])
    })

    it("every printed short id names its session (deleted ones too)", async () => {
      const result = await runCli(["sessions", "list", "--all", "--db", file, "--format", "json"])
      const listed = JSON.parse(result.stdout) as Array<{ id: string; shortId: string }>
      expect(listed).toHaveLength(Object.keys(ids).length)
      expect(new Set(listed.map((s) => s.shortId)).size).toBe(listed.length)
      for (const { id, shortId } of listed) {
        expect(id.startsWith(shortId)).toBe(true)
        const events = await runCli(["events", shortId, "--to", "1", "--format", "json", "--db", file])
        expect(events.code, shortId).toBe(0)
        expect(JSON.parse(events.stdout).sessionId).toBe(id)
      }
    })

    it("--format json has the outcome, model and cost (a lower bound when costKnown is false)", async () => {
      const result = await runCli(["sessions", "list", "--all", "--db", file, "--format", "json"])
      const byId = new Map((JSON.parse(result.stdout) as Array<Record<string, unknown>>).map((s) => [s.id, s]))
      expect(byId.get(ids.finished)).toMatchObject({
        outcome: "finished",
        model: "anthropic/claude-sonnet-4-5-20250929",
        cost: 0.04,
        costKnown: true,
        lastTurn: { reason: "stop", interrupted: false }
      })
      expect(byId.get(ids.failed)).toMatchObject({ outcome: "failed", cost: 0, costKnown: false })
      expect(byId.get(ids.maxSteps)).toMatchObject({ outcome: "max-steps", cost: 0.01, costKnown: false })
      expect(byId.get(ids.running)).toMatchObject({ outcome: "running", status: "busy" })
      expect(byId.get(ids.crashed)).toMatchObject({ outcome: "crashed", status: "busy", lastTurn: null })
      expect(byId.get(ids.repaired)).toMatchObject({
        outcome: "crashed",
        lastTurn: { reason: "crash", interrupted: true }
      })
      expect(byId.get(ids.fresh)).toMatchObject({ outcome: "new", model: null, lastTurn: null })
      expect(byId.get(ids.gone)).toMatchObject({ deleted: true, outcome: "new" })
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

  describe("delete", () => {
    const victim = "0195a0c0-1234-7000-8000-000000000001"
    const other = "0195a0c1-5678-7000-8000-000000000002"
    const fresh = async () => {
      const file = scratchDb()
      await seed(file, [
        { id: victim, events: sampleSession("To be deleted") },
        { id: other, events: sampleSession("Stays", T0 + 1000) }
      ])
      return file
    }
    const eventCount = async (file: string, id: string) =>
      (await runCli(["events", id, "--format", "json", "--db", file])).stdout.trimEnd().split("\n").length

    it("hides the session from list, keeps its events, and show and events say it is deleted", async () => {
      const file = await fresh()
      const result = await runCli(["sessions", "delete", "0195a0c0", "--db", file])
      expect(result.code).toBe(0)
      expect(result.stderr).toBe("")
      expect(result.stdout).toBe(
        'Deleted session 0195a0c0 "To be deleted": it is hidden from logbook sessions list (--all lists it) and ' +
          "cannot be continued. Nothing was removed: its events stay in the log (the deletion is event 21), and " +
          "logbook sessions show 0195a0c0 and logbook events 0195a0c0 still read it.\n"
      )
      const list = await runCli(["sessions", "list", "--db", file])
      expect(list.stdout).not.toContain("To be deleted")
      expect(list.stdout).toContain("Stays")
      const all = await runCli(["sessions", "list", "--all", "--db", file])
      expect(all.stdout).toMatch(/^0195a0c0\s+deleted\s+.*To be deleted$/m)

      const show = await runCli(["sessions", "show", "0195a0c0", "--db", file])
      expect(show.code).toBe(0)
      expect(show.stdout).toMatch(
        /status\s+deleted at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(logbook sessions delete\): hidden from sessions list, its events are kept/
      )
      expect(show.stdout).toContain("Please fix the failing test") // the conversation is all there
      const events = await runCli(["events", "0195a0c0", "--db", file])
      expect(events.code).toBe(0)
      expect(events.stdout.trimEnd().split("\n")).toHaveLength(21)
      expect(events.stdout.trimEnd().split("\n")[20]).toMatch(/^\s+21 .* session\.deleted/)
      expect(events.stderr).toMatch(
        new RegExp(
          `^logbook: session ${victim} was deleted at .* \\(logbook sessions delete\\): hidden from sessions list, its events are kept\n$`
        )
      )
      // the JSON output stays exactly the log (the note is on stderr)
      expect(await eventCount(file, victim)).toBe(21)
    })

    it("deleting it again says so and changes nothing", async () => {
      const file = await fresh()
      expect((await runCli(["sessions", "delete", victim, "--db", file])).code).toBe(0)
      const again = await runCli(["sessions", "delete", victim, "--db", file])
      expect(again.code).toBe(0)
      expect(again.stderr).toBe("")
      expect(again.stdout).toMatch(
        /^Session 0195a0c0 "To be deleted" was already deleted at .* \(logbook sessions delete\): hidden from sessions list, its events are kept; nothing changed\. logbook sessions show 0195a0c0 still reads it\.\n$/
      )
      expect(await eventCount(file, victim)).toBe(21)
    })

    it("refuses while another live process drives the session, and writes nothing", async () => {
      const file = await fresh()
      const owner = `${os.hostname()}:${process.pid}:driver`
      await holdLease(file, victim, owner)
      const result = await runCli(["sessions", "delete", victim, "--db", file])
      expect(result.code).toBe(1)
      expect(result.stdout).toBe("")
      expect(result.stderr).toBe(
        `logbook: session ${victim} is being driven by another logbook process (${owner}); it was not deleted: ` +
          "wait for that process to finish, or stop it, and delete the session then\n"
      )
      expect(await eventCount(file, victim)).toBe(20)
    })

    it("takes over a lease a dead process left, and deletes", async () => {
      const file = await fresh()
      const dead = spawnSync(process.execPath, ["-e", "0"]).pid!
      await holdLease(file, victim, `${os.hostname()}:${dead}:crashed`)
      const result = await runCli(["sessions", "delete", victim, "--db", file])
      expect(result.code).toBe(0)
      expect(await eventCount(file, victim)).toBe(21)
    })

    it("latest deletes the most recently updated session; an unknown id or a missing database is exit 2", async () => {
      const file = await fresh()
      const latest = await runCli(["sessions", "delete", "latest", "--db", file])
      expect(latest.stdout).toContain('Deleted session 0195a0c1 "Stays"')
      const unknown = await runCli(["sessions", "delete", "0195ffff", "--db", file])
      expect(unknown.code).toBe(2)
      expect(unknown.stderr).toBe('logbook: no session matches "0195ffff"; see `logbook sessions list` for the ids\n')
      const dir = scratchDir()
      const missing = path.join(dir, "nothing.db")
      const result = await runCli(["sessions", "delete", "latest", "--db", missing])
      expect(result.code).toBe(2)
      expect(result.stderr).toBe(
        `logbook: no logbook database at ${missing}; pass --db <file> or set LOGBOOK_DB to read another one\n`
      )
      expect(fs.readdirSync(dir)).toEqual([])
    })
  })
})
