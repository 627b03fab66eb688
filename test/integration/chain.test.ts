/**
 * A tamper-evident log (issue 12 §6), through the built binary: a scripted session is run, then its
 * database is changed behind logbook's back as the command did (`update …; delete … seq=3`),
 * a snapshot is edited, one row is re-hashed; `logbook verify` names the session, the seq and what,
 * with exit 1; `events` prints a line at the gap and exits 1; `sessions show` warns on stderr. An
 * untouched database verifies (exit 0), and so does one from before the chain, once upgraded.
 */
import { createHash } from "node:crypto"
import Database from "better-sqlite3"
import { afterEach, describe, expect, it } from "vitest"
import { eventHash } from "../../src/store/internal/chain.js"
import { LATEST_MIGRATION } from "../../src/store/Sqlite.js"
import { runCli } from "../support/cli.js"
import { downgradeToSchema3, schemaOf } from "../support/oldSchema.js"
import { Reply } from "../support/scriptedServer.js"
import { bashReply, latestSession, makeJanitor, makeWorkspace } from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

/** A finished session with a command and an answer (a snapshot is taken at the turn's end). */
const scriptedSession = async () => {
  const server = await janitor.server()
  const ws = makeWorkspace(server)
  server.enqueue(bashReply("call_1", "echo hello"), Reply.text("It said hello.", { chunks: 3 }))
  const run = await runCli([...ws.runArgs, "say hello"])
  expect(run.code).toBe(0)
  const id = await latestSession(ws.db, ws.dir)
  return { ws, id }
}

/** Changes the database directly, as a command the agent ran could (`sqlite3 "$LOGBOOK_DB" "…"`). */
const tamper = <A>(db: string, f: (conn: Database.Database) => A): A => {
  const conn = new Database(db)
  try {
    return f(conn)
  } finally {
    conn.close()
  }
}

const seqOf = (db: string, id: string, type: string): number =>
  tamper(db, (c) =>
    c.prepare("SELECT min(seq) FROM events WHERE session_id = ? AND type = ?").pluck().get(id, type)
  ) as number

describe("a tamper-evident log", () => {
  it("an untouched session verifies (exit 0); events and sessions show say nothing on stderr", async () => {
    const { ws, id } = await scriptedSession()
    const verify = await runCli(["verify", id, "--db", ws.db])
    expect(verify.stderr).toBe("")
    expect(verify.code).toBe(0)
    expect(verify.stdout).toMatch(
      new RegExp(`^✓ ${id.slice(0, 8)}\\S*  "say hello"  \\d+ events: seqs, chain and 1 snapshot verify`)
    )
    const all = await runCli(["verify", "--db", ws.db, "--format", "json"])
    expect(all.code).toBe(0)
    const report = JSON.parse(all.stdout) as { ok: boolean; sessions: Array<Record<string, unknown>> }
    expect(report.ok).toBe(true)
    expect(report.sessions).toEqual([
      expect.objectContaining({ id, ok: true, chainedSince: 1, mark: null, problems: [], snapshots: 1 })
    ])
    const events = await runCli(["events", id, "--db", ws.db])
    expect(events.code).toBe(0)
    expect(events.stderr).toBe("")
    const show = await runCli(["sessions", "show", id, "--db", ws.db])
    expect(show.code).toBe(0)
    expect(show.stderr).toBe("")
  })

  it("the issue's edit (update a payload; delete seq=3): verify names both seqs (exit 1), events shows the gap (exit 1), sessions show warns", async () => {
    const { ws, id } = await scriptedSession()
    const message = seqOf(ws.db, id, "user.message")
    expect(message).not.toBe(3)
    tamper(ws.db, (c) => {
      c.prepare(
        "UPDATE events SET payload = json_set(payload, '$.text', 'say goodbye') WHERE session_id = ? AND seq = ?"
      ).run(id, message)
      c.prepare("DELETE FROM events WHERE session_id = ? AND seq = 3").run(id)
    })

    const verify = await runCli(["verify", id, "--db", ws.db])
    expect(verify.code).toBe(1)
    const [first, ...problems] = verify.stdout.trimEnd().split("\n")
    expect(first).toMatch(new RegExp(`^✗ ${id.slice(0, 8)}\\S*  "say hello"  \\d+ events: 3 problems$`))
    const content = `content changed at seq ${message} (its hash does not match it)`
    // in seq order; the snapshot (at the turn's end) no longer agrees with the events before it
    expect(problems.map((l) => l.trim())).toEqual([
      ...(message < 3 ? [content, "seq 3 missing"] : ["seq 3 missing", content]),
      expect.stringMatching(/^snapshot at seq \d+ disagrees with events \(/)
    ])
    expect(verify.stderr).toMatch(new RegExp(`^logbook: the log of session ${id} is broken: .*seq 3 missing`))
    const json = JSON.parse((await runCli(["verify", id, "--db", ws.db, "--format", "json"])).stdout) as {
      ok: boolean
      sessions: Array<{ problems: Array<Record<string, unknown>> }>
    }
    expect(json.ok).toBe(false)
    expect(json.sessions[0]!.problems.slice(0, 2)).toEqual(
      message < 3
        ? [
            { _tag: "content", seq: message, message: expect.any(String) },
            { _tag: "missing", from: 3, to: 3, atEnd: false, message: "seq 3 missing" }
          ]
        : [
            { _tag: "missing", from: 3, to: 3, atEnd: false, message: "seq 3 missing" },
            { _tag: "content", seq: message, message: expect.any(String) }
          ]
    )

    // events: a line where seq 3 should be, the rest printed, the problems on stderr, exit 1
    const events = await runCli(["events", id, "--db", ws.db])
    expect(events.code).toBe(1)
    const lines = events.stdout.split("\n")
    const gap = lines.findIndex((l) => /^ {3}! {2}seq 3 missing$/.test(l))
    expect(gap).toBeGreaterThan(0)
    expect(lines[gap - 1]).toMatch(/^ {3}2 {2}/)
    expect(lines[gap + 1]).toMatch(/^ {3}4 {2}/)
    expect(lines).toContain(`   !  ${content}`)
    expect(events.stderr).toMatch(new RegExp(`^logbook: the log of session ${id} is damaged: .*seq 3 missing`))
    // JSON lines stay JSON lines: the gap is on stderr only
    const jsonEvents = await runCli(["events", id, "--db", ws.db, "--format", "json"])
    expect(jsonEvents.code).toBe(1)
    for (const line of jsonEvents.stdout.trimEnd().split("\n")) expect(() => JSON.parse(line)).not.toThrow()
    expect(jsonEvents.stderr).toContain("seq 3 missing")

    // sessions show reads its snapshot, and says the log disagrees
    const show = await runCli(["sessions", "show", id, "--db", ws.db])
    expect(show.code).toBe(0)
    expect(show.stderr).toContain(
      `logbook: warning: the log of session ${id} is damaged: seq 3 missing; run logbook verify ${id}`
    )
    const showJson = await runCli(["sessions", "show", id, "--db", ws.db, "--format", "json"])
    expect(() => JSON.parse(showJson.stdout)).not.toThrow()
    expect(showJson.stderr).toContain("seq 3 missing")
  })

  it("a row re-hashed to match its new content breaks the chain to the next row; a cut-off tail is missing at the end", async () => {
    const { ws, id } = await scriptedSession()
    const message = seqOf(ws.db, id, "user.message")
    const last = tamper(ws.db, (c) => {
      const row = c.prepare("SELECT * FROM events WHERE session_id = ? AND seq = ?").get(id, message) as Record<
        string,
        string | number | null
      >
      const payload = JSON.stringify({ ...JSON.parse(row.payload as string), text: "say goodbye" })
      const hash = eventHash(row.prev_hash as string, {
        sessionId: id,
        seq: message,
        id: row.id as string,
        type: row.type as string,
        at: row.at as number,
        parentId: row.parent_id as string | null,
        v: row.v as number,
        json: payload
      })
      c.prepare("UPDATE events SET payload = ?, hash = ? WHERE session_id = ? AND seq = ?").run(
        payload,
        hash,
        id,
        message
      )
      const lastSeq = c.prepare("SELECT max(seq) FROM events WHERE session_id = ?").pluck().get(id) as number
      c.prepare("DELETE FROM events WHERE session_id = ? AND seq = ?").run(id, lastSeq)
      return lastSeq
    })
    const verify = await runCli(["verify", id, "--db", ws.db])
    expect(verify.code).toBe(1)
    expect(verify.stdout).toContain(`chain broken between ${message} and ${message + 1}`)
    expect(verify.stdout).toContain(`seq ${last} missing (the log ends before the last seq the session index holds)`)
    expect(verify.stdout).not.toContain(`content changed at seq ${message}`)
    // the read commands see the cut-off tail at once (the seqs against the index)
    const show = await runCli(["sessions", "show", id, "--db", ws.db])
    expect(show.stderr).toContain(`seq ${last} missing`)
  })

  it("an edited snapshot: verify names its seq (exit 1); sessions show does not use it", async () => {
    const { ws, id } = await scriptedSession()
    const snapshotSeq = tamper(ws.db, (c) => {
      c.prepare("UPDATE snapshots SET state = json_set(state, '$.title', 'forged title') WHERE session_id = ?").run(id)
      return c.prepare("SELECT max(seq) FROM snapshots WHERE session_id = ?").pluck().get(id) as number
    })
    const verify = await runCli(["verify", "--db", ws.db])
    expect(verify.code).toBe(1)
    expect(verify.stdout).toContain(
      `snapshot at seq ${snapshotSeq} disagrees with events (its JSON was changed after it was saved; title differs from the fold of events 1–${snapshotSeq})`
    )
    const show = await runCli(["sessions", "show", id, "--db", ws.db])
    expect(show.code).toBe(0)
    expect(show.stdout).not.toContain("forged title")
    expect(show.stdout).toMatch(/^say hello$/m)
    expect(show.stderr).toContain(`ignoring the snapshot of session ${id} at seq ${snapshotSeq}`)

    // a snapshot whose SHA-256 was written again too is still told apart from the events by verify
    tamper(ws.db, (c) => {
      const state = c.prepare("SELECT state FROM snapshots WHERE session_id = ?").pluck().get(id) as string
      c.prepare("UPDATE snapshots SET hash = ? WHERE session_id = ?").run(
        createHash("sha256").update(state).digest("hex"),
        id
      )
    })
    const again = await runCli(["verify", id, "--db", ws.db])
    expect(again.code).toBe(1)
    expect(again.stdout).toContain(
      `snapshot at seq ${snapshotSeq} disagrees with events (title differs from the fold of events 1–${snapshotSeq})`
    )
  })

  it("a database from before the chain verifies (read from an upgraded copy, then upgraded), its rows marked as chained at the upgrade", async () => {
    const { ws, id } = await scriptedSession()
    downgradeToSchema3(ws.db)
    expect(schemaOf(ws.db)).toBe(3)
    const read = await runCli(["verify", id, "--db", ws.db])
    expect(read.code).toBe(0)
    expect(read.stdout).toContain("were chained when the database was upgraded to the chain")
    expect(schemaOf(ws.db)).toBe(3)
    // a command that writes upgrades the file: the old rows are chained, new ones chain on from them
    const deleted = await runCli(["sessions", "delete", id, "--db", ws.db])
    expect(deleted.code).toBe(0)
    expect(schemaOf(ws.db)).toBe(LATEST_MIGRATION)
    const verify = await runCli(["verify", id, "--db", ws.db, "--format", "json"])
    expect(verify.code).toBe(0)
    const session = (JSON.parse(verify.stdout) as { sessions: Array<Record<string, unknown>> }).sessions[0]!
    const events = session.events as number
    expect(session).toMatchObject({
      ok: true,
      mark: { reason: "migrated", throughSeq: events - 1 },
      chainedSince: events
    })
    // and an old row changed afterwards is found like any other
    tamper(ws.db, (c) => c.prepare("DELETE FROM events WHERE session_id = ? AND seq = 3").run(id))
    const broken = await runCli(["verify", id, "--db", ws.db])
    expect(broken.code).toBe(1)
    expect(broken.stdout).toContain("seq 3 missing")
  })
})
