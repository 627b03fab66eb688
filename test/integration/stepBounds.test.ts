/**
 * The bounds of one model step, through the built binary against the scripted server: a model that
 * streams without end is cut at `step.maxOutputBytes` (the request aborted, the log holding that
 * much and no more, the turn ended `output-limit`), and a reply with more tool calls than
 * `step.maxToolCalls` runs that many and answers the rest as refused. Every request carries
 * `max_tokens`. Either way the next request's history answers every call.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import type { Envelope } from "../../src/domain/Events.js"
import { runCli } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import {
  contentText,
  idle,
  latestSession,
  makeJanitor,
  makeWorkspace,
  messagesOf,
  notices,
  ofType,
  readLog,
  toolCall,
  unanswered
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

/** The UTF-8 bytes of every text and reasoning delta of a log. */
const outputBytes = (log: ReadonlyArray<Envelope>) =>
  log.reduce(
    (sum, e) =>
      e.type === "text.delta" || e.type === "reasoning.delta" ? sum + Buffer.byteLength(e.payload.delta) : sum,
    0
  )

/** The size of the database with its write-ahead log. */
const dbBytes = (db: string) =>
  [db, `${db}-wal`].reduce((sum, file) => sum + (fs.existsSync(file) ? fs.statSync(file).size : 0), 0)

describe("logbook run: a model that streams without end", () => {
  it("is cut at step.maxOutputBytes: the request aborted, that much kept, the turn ended output-limit; --continue goes on", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, { config: { step: { maxOutputBytes: 16_384 } } })
    server.enqueue(Reply.endless("0123456789abcdef"))
    const result = await runCli([...ws.runArgs, "go"], { timeoutMs: 60_000 })
    expect(result.code).toBe(1)
    expect(notices(result.stderr)).toContainEqual(
      expect.stringMatching(/passed its limit of 16 KiB \(step\.maxOutputBytes\).*none of its tool calls ran/)
    )
    // the client went away: the server's endless response ended with the connection
    await server.requests[0]!.aborted
    expect(server.requests[0]!.body.max_tokens).toBe(8192)

    const id = await latestSession(ws.db, ws.dir)
    const log = await readLog(ws.db, id)
    expect(outputBytes(log)).toBe(16_384)
    expect(ofType(log, "step.finished").map((e) => e.payload.finishReason)).toEqual(["output-limit"])
    expect(ofType(log, "turn.finished").map((e) => e.payload.reason)).toEqual(["output-limit"])
    expect(log.at(-1)).toMatchObject(idle)
    // sessions list says how the turn ended: not `failed`
    const list = await runCli(["sessions", "list", "--db", ws.db, "--format", "json"])
    expect((JSON.parse(list.stdout) as Array<{ id: string; outcome: string }>).find((s) => s.id === id)?.outcome).toBe(
      "output-limit"
    )

    // the next turn sends the cut answer back as the model's, and goes on
    server.enqueue(Reply.text("Sorry about that."))
    const next = await runCli([...ws.runArgs, "--continue", "shorter, please"])
    expect(notices(next.stderr)).toEqual([])
    expect(next.code).toBe(0)
    const messages = messagesOf(server.requests[1]!)
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant", "user"])
    expect(contentText(messages[1])).toBe("0123456789abcdef".repeat(1024))
    expect(unanswered(server.requests[1]!)).toEqual([])
  })

  it("without a step setting, the default bound (4 MiB) holds, and the database stays that size", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.endless("x".repeat(1000)))
    const result = await runCli([...ws.runArgs, "go"], { timeoutMs: 120_000 })
    // (its stderr is not checked: a transcript of 4 MiB to a pipe can lose its tail at the exit)
    expect(result.code).toBe(1)
    await server.requests[0]!.aborted
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(outputBytes(log)).toBe(4 * 1024 * 1024)
    expect(ofType(log, "turn.finished").map((e) => e.payload.reason)).toEqual(["output-limit"])
    expect(log.at(-1)).toMatchObject(idle)
    expect(dbBytes(ws.db)).toBeLessThan(3 * 4 * 1024 * 1024)
  })
})

describe("logbook run: a reply with more tool calls than step.maxToolCalls", () => {
  it("500 calls with the cap at 10: 10 run, 490 are answered as refused, the next request answers all 500", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, { config: { step: { maxToolCalls: 10 } } })
    // a file each (the same call again and again would be a loop the permission gate asks about)
    for (let i = 0; i < 10; i++) fs.writeFileSync(path.join(ws.dir, `f${i}.txt`), `file ${i}\n`)
    const calls = Array.from({ length: 500 }, (_, i) => toolCall(`call_${i}`, "read", { path: `f${i}.txt` }))
    server.enqueue(Reply.stream({ toolCalls: calls }), Reply.text("Done."))
    const result = await runCli([...ws.runArgs, "read it many times"], { timeoutMs: 120_000 })
    expect(notices(result.stderr)).toEqual([])
    expect(result.code).toBe(0)

    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    const ids = calls.map((c) => c.id)
    expect(ofType(log, "tool.invoked").map((e) => e.payload.callId)).toEqual(ids.slice(0, 10))
    expect(ofType(log, "tool.finished").map((e) => e.payload.callId)).toEqual(ids.slice(0, 10))
    const refused = ofType(log, "tool.failed")
    expect(refused.map((e) => e.payload.callId)).toEqual(ids.slice(10))
    for (const [i, e] of refused.entries()) {
      expect(e.payload.error).toMatch(/^Not run: this reply made more than 10 tool calls.*\(step\.maxToolCalls\)/)
      expect(e.payload.input).toEqual({ path: `f${i + 10}.txt` })
    }
    expect(log.at(-1)).toMatchObject(idle)

    // every call of the reply has a result in the next request: 10 outputs, 490 refusals
    const last = server.requests[1]!
    expect(unanswered(last)).toEqual([])
    const results = messagesOf(last).filter((m) => m.role === "tool")
    expect(results).toHaveLength(500)
    expect(results.filter((m) => /\bfile \d\b/.test(contentText(m)))).toHaveLength(10)
    expect(results.filter((m) => /step\.maxToolCalls/.test(contentText(m)))).toHaveLength(490)
    for (const request of server.requests) expect(request.body.max_tokens).toBe(8192)
  })
})
