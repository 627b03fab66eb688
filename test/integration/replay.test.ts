/**
 * `logbook replay` through the built binary, on sessions produced by real runs against the
 * scripted model server: the request it rebuilds is the one the server received (system prompt,
 * tools, messages, tool results), proved by the digest its step recorded — after a retry and
 * after a compaction too; a log altered afterwards is caught (exit 1); what cannot be proved is said.
 */
import Database from "better-sqlite3"
import { afterEach, describe, expect, it } from "vitest"
import { runCli } from "../support/cli.js"
import { type RecordedRequest, Reply } from "../support/scriptedServer.js"
import { latestSession, makeJanitor, makeWorkspace, ofType, readLog } from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

interface Replayed {
  readonly index: number
  readonly count: number
  readonly seq: number
  readonly proof: { readonly _tag: string; readonly digest?: string; readonly why?: string }
  readonly request: {
    readonly system: string | null
    readonly tools: ReadonlyArray<{ readonly name: string; readonly description: string }> | null
    readonly messages: ReadonlyArray<Record<string, unknown>>
  }
}

const replayJson = async (db: string, ...args: ReadonlyArray<string>) => {
  const result = await runCli(["replay", ...args, "--db", db, "--format", "json"])
  return { ...result, replayed: result.code === 0 ? (JSON.parse(result.stdout) as Replayed) : undefined }
}

/** What the server got, in the neutral shape: the system prompt, the tool names, the messages' texts. */
const wire = (request: RecordedRequest) => {
  const messages = request.body.messages as ReadonlyArray<Record<string, unknown>>
  return {
    system: messages.find((m) => m.role === "system")?.content,
    tools: (request.body.tools as ReadonlyArray<{ function: { name: string } }>).map((t) => t.function.name),
    texts: messages
      .filter((m) => m.role !== "system")
      .map((m) => [m.role, typeof m.content === "string" ? m.content : null])
  }
}

/** The same of a replayed request. */
const neutral = (r: Replayed) => ({
  system: r.request.system,
  tools: r.request.tools?.map((t) => t.name),
  texts: r.request.messages.map((m) =>
    m.role === "user"
      ? ["user", m.content]
      : m.role === "tool"
        ? ["tool", (m.results as ReadonlyArray<{ output: string }>)[0]!.output]
        : [
            "assistant",
            (m.parts as ReadonlyArray<{ type: string; text?: string }>).find((p) => p.type === "text")?.text ?? null
          ]
  )
})

describe("logbook replay", () => {
  it("rebuilds each request the server received and proves it by its digest; --at, --step; a retried attempt", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(
      Reply.error(500),
      Reply.stream({
        text: "Listing.",
        toolCalls: [{ id: "call_ls", name: "bash", arguments: JSON.stringify({ command: "echo listed" }) }]
      }),
      Reply.text("There is one file.")
    )
    const run = await runCli([...ws.runArgs, "what is here?"])
    expect(run.code, run.stderr).toBe(0)
    const id = await latestSession(ws.db, ws.dir)
    // three requests: the one the 500 cut, its retry, the step after the tool
    expect(server.requests).toHaveLength(3)

    const last = await replayJson(ws.db, "latest")
    expect(last.code, last.stderr).toBe(0)
    expect(last.replayed).toMatchObject({ index: 3, count: 3, proof: { _tag: "same" } })
    const sent = wire(server.requests[2]!)
    const rebuilt = neutral(last.replayed!)
    expect(rebuilt.system).toBe(sent.system)
    expect(rebuilt.tools).toEqual(sent.tools)
    expect(rebuilt.texts).toEqual([
      ["user", "what is here?"],
      ["assistant", "Listing."],
      ["tool", expect.stringContaining("listed")]
    ])
    expect(sent.texts[0]).toEqual(["user", "what is here?"])

    // every step is proved, the attempt the 500 cut included
    for (const step of [1, 2]) {
      const replayed = await replayJson(ws.db, id, "--step", String(step))
      expect(replayed.replayed, replayed.stderr).toMatchObject({ index: step, proof: { _tag: "same" } })
      expect(neutral(replayed.replayed!).texts).toEqual([["user", "what is here?"]])
    }
    // --at: the request of the step running at that seq
    const log = await readLog(ws.db, id)
    const starts = ofType(log, "step.started").map((e) => e.seq)
    const at = await replayJson(ws.db, id, "--at", String(starts[2]! + 1))
    expect(at.replayed).toMatchObject({ index: 3, seq: starts[2] })
    const atFirst = await replayJson(ws.db, id, "--at", String(starts[0]!))
    expect(atFirst.replayed).toMatchObject({ index: 1 })

    // text: the request for people, with the proof
    const text = await runCli(["replay", id, "--db", ws.db])
    expect(text.code).toBe(0)
    expect(text.stdout).toMatch(/^request 3 of 3 · session /)
    expect(text.stdout).toContain("✓ rebuilt byte for byte")
    expect(text.stdout).toContain(
      "── messages (3) ──\n[user]\n  what is here?\n[assistant]\n  Listing.\n  → bash call_ls"
    )

    // what is not a request
    const before = await replayJson(ws.db, id, "--at", "1")
    expect(before.code).toBe(2)
    expect(before.stderr).toContain(`no request was made at or before seq 1: the first step starts at seq ${starts[0]}`)
    const far = await replayJson(ws.db, id, "--step", "9")
    expect(far.code).toBe(2)
    expect(far.stderr).toContain("has steps 1 to 3; there is no step 9")
    const both = await replayJson(ws.db, id, "--step", "1", "--at", "5")
    expect(both.code).toBe(2)
  })

  it("a log altered after the fact is caught: the rebuilt request differs from the digest (exit 1)", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.text("Hello."))
    expect((await runCli([...ws.runArgs, "say hello"])).code).toBe(0)
    expect((await replayJson(ws.db, "latest")).replayed?.proof._tag).toBe("same")
    // someone rewrites what the user said (and the snapshots go, so nothing hides it)
    const db = new Database(ws.db)
    db.prepare(
      "UPDATE events SET payload = json_set(payload, '$.text', 'say goodbye') WHERE type = 'user.message'"
    ).run()
    db.prepare("DELETE FROM snapshots").run()
    db.close()
    const altered = await replayJson(ws.db, "latest")
    expect(altered.code).toBe(1)
    expect(altered.stderr).toContain("the request rebuilt from the log differs from the one request 1 sent")
    const shown = await runCli(["replay", "latest", "--db", ws.db, "--format", "json"])
    expect(JSON.parse(shown.stdout).proof._tag).toBe("different")
  })

  it("after a compaction the request holds the summary, and is proved; a step a crash cut is said to be unprovable", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.text("First answer."), Reply.text("The summary of it all."), Reply.text("Second answer."))
    expect((await runCli([...ws.runArgs, "first"])).code).toBe(0)
    expect((await runCli(["compact", "--db", ws.db, "--cwd", ws.dir])).code).toBe(0)
    expect((await runCli([...ws.runArgs, "-c", "second"])).code).toBe(0)
    const last = await replayJson(ws.db, "latest")
    expect(last.replayed, last.stderr).toMatchObject({ index: 2, proof: { _tag: "same" } })
    const texts = neutral(last.replayed!).texts
    expect(texts.at(-1)).toEqual(["user", "second"])
    expect(JSON.stringify(texts)).toContain("The summary of it all.")
    expect(JSON.stringify(texts)).not.toContain("First answer.")
    expect(wire(server.requests[2]!).texts).toEqual(texts)

    // a step whose end the crash sweep wrote (the request never went out): said, not guessed
    const id = await latestSession(ws.db, ws.dir)
    const db = new Database(ws.db)
    db.prepare(
      "UPDATE events SET payload = json_remove(payload, '$.promptVersion', '$.requestDigest') WHERE type = 'step.finished' AND session_id = ?"
    ).run(id)
    db.prepare("DELETE FROM snapshots").run()
    db.close()
    const unproved = await replayJson(ws.db, "latest")
    expect(unproved.code).toBe(0)
    expect(unproved.replayed?.proof).toMatchObject({
      _tag: "unknown",
      why: expect.stringContaining("no prompt version")
    })
    expect(unproved.replayed?.request.system).toBeNull()
  })
})
