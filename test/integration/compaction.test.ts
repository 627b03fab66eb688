/**
 * A context that stays bounded (issue 9 §5), through the built binary and the scripted
 * OpenAI-compatible server: old tool outputs pruned and the session compacted before a request
 * that would not fit, an overflow error answered by exactly one compaction and one retry (and no
 * loop), and `logbook compact` on demand — and in every case the requests after it hold the
 * summary and what follows, while the log keeps everything.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { SUMMARY_PROMPT } from "../../src/session/Compaction.js"
import { summaryContent } from "../../src/session/History.js"
import { runCli } from "../support/cli.js"
import { type RecordedRequest, Reply } from "../support/scriptedServer.js"
import { latestSession, makeJanitor, makeWorkspace, messagesOf, notices, ofType, readLog, types } from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const isSummary = (request: RecordedRequest): boolean => {
  const last = messagesOf(request).at(-1)
  return last?.role === "user" && last.content === SUMMARY_PROMPT
}

/**
 * A workspace whose model has a small context window (8000 tokens, 1000 reserved; the system prompt
 * and the tool schemas alone are about 3200), with three files of about 1800 tokens each to read.
 */
const smallWindow = async (compaction: Record<string, unknown> = {}) => {
  const server = await janitor.server()
  const ws = makeWorkspace(server, {
    config: {
      provider: {
        local: {
          type: "openai-compatible",
          baseURL: `${server.url}/v1`,
          models: { scripted: { contextWindow: 8000, price: { input: 1, output: 2 } } }
        }
      },
      compaction: { reserveTokens: 1000, pruneProtectTokens: 1000, ...compaction }
    }
  })
  // 100 lines of 70 characters: `read` shows them whole (it cuts long lines)
  for (const name of ["a", "b", "c"]) {
    fs.writeFileSync(path.join(ws.dir, `${name}.txt`), `${name.repeat(70)}\n`.repeat(100))
  }
  return { server, ws }
}

const read = (id: string, file: string) => ({ id, name: "read", arguments: JSON.stringify({ path: file }) })

/** OpenAI's answer to a request longer than the model's window. */
const overflow = Reply.error(400, {
  body: {
    error: {
      message:
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9100 tokens. Please reduce the length of the messages.",
      type: "invalid_request_error",
      param: "messages",
      code: "context_length_exceeded"
    }
  }
})

describe("a long session through logbook run", () => {
  it("prunes old outputs, compacts before the window is full, and goes on correctly after it", async () => {
    const { server, ws } = await smallWindow()
    server.enqueue(
      Reply.stream({ toolCalls: [read("call_a", "a.txt")] }),
      Reply.stream({ toolCalls: [read("call_b", "b.txt")] }),
      Reply.stream({ toolCalls: [read("call_c", "c.txt")] }),
      // a long answer: not a tool output, so pruning cannot make room for it
      Reply.text(`read all three: ${"x".repeat(16_000)}`)
    )
    const first = await runCli([...ws.runArgs, "read a, b and c"])
    expect(notices(first.stderr)).toEqual([])
    expect(first.code).toBe(0)
    // the fourth request no longer carries a.txt and b.txt whole: they were pruned
    const fourth = messagesOf(server.requests[3]!)
    const output = (id: string) => String(fourth.find((m) => m.role === "tool" && m.tool_call_id === id)?.content)
    expect(output("call_a")).toMatch(/^\[output pruned from the context/)
    expect(output("call_b")).toMatch(/^\[output pruned from the context/)
    expect(output("call_c")).toContain("c".repeat(70))

    // turn 2 would not fit with all of turn 1 in it: the session compacts first
    server.enqueue(
      Reply.text("SUMMARY: read a.txt, b.txt and c.txt; each is one letter repeated", {
        usage: { prompt_tokens: 3000, completion_tokens: 50 }
      }),
      Reply.text("yes")
    )
    const second = await runCli([...ws.runArgs, "--continue", "were they all the same?"])
    expect(notices(second.stderr)).toEqual([])
    expect(second.code).toBe(0)
    expect(server.requests.map(isSummary)).toEqual([false, false, false, false, true, false])
    // the summary request holds what it summarises (the outputs cut), the same system prompt and tools
    const summaryRequest = server.requests[4]!
    expect(messagesOf(summaryRequest)[0]).toEqual({ role: "user", content: "read a, b and c" })
    expect(summaryRequest.body.tools).toEqual(server.requests[3]!.body.tools)
    // after it: the summary, then the new turn
    expect(messagesOf(server.requests[5]!)).toEqual([
      { role: "user", content: summaryContent("SUMMARY: read a.txt, b.txt and c.txt; each is one letter repeated") },
      { role: "user", content: "were they all the same?" }
    ])

    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    const pruned = ofType(log, "context.pruned")
    // each step pruned the call before the latest; turn 2 pruned c.txt first, then had to compact
    expect(pruned.map((e) => e.payload.callIds)).toEqual([["call_a"], ["call_b"], ["call_c"]])
    const done = ofType(log, "compaction.done")
    expect(done).toHaveLength(1)
    expect(done[0]!.payload).toMatchObject({ trigger: "auto", messages: 2 })
    expect(done[0]!.payload.tokensAfter).toBeLessThan(done[0]!.payload.tokensBefore!)
    // the log still holds every output whole
    expect(ofType(log, "tool.finished").map((e) => e.payload.output.split("a".repeat(70)).length - 1)).toEqual([
      100, 0, 0
    ])
    // the summary request is paid for: its usage is in the session's totals (`sessions show`)
    expect(done[0]!.payload.usage).toMatchObject({ input: 3000, output: 50 })
    const show = await runCli(["sessions", "show", "--db", ws.db, "--format", "json", done[0]!.sessionId])
    expect(show.code).toBe(0)
    const steps = ofType(log, "step.finished").reduce((sum, e) => sum + e.payload.usage.input, 0)
    expect(JSON.parse(show.stdout).totals.input).toBe(steps + 3000)
    const text = await runCli(["sessions", "show", "--db", ws.db, done[0]!.sessionId])
    expect(text.stdout).toContain("compacted")
  })
})

describe("a context-overflow error from the provider", () => {
  it("leads to exactly one compaction and one retry of the step", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.text("first answer"))
    expect((await runCli([...ws.runArgs, "first"])).code).toBe(0)
    server.enqueue(overflow, Reply.text("SUMMARY of the first turn"), Reply.text("second answer"))
    const result = await runCli([...ws.runArgs, "--continue", "second"])
    expect(notices(result.stderr)).toEqual([])
    expect(result.code).toBe(0)
    expect(result.stdout).toContain("second answer")
    expect(server.requests.map(isSummary)).toEqual([false, false, true, false])
    expect(messagesOf(server.requests[3]!)).toEqual([
      { role: "user", content: summaryContent("SUMMARY of the first turn") },
      { role: "user", content: "second" }
    ])
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "compaction.done").map((e) => e.payload.trigger)).toEqual(["overflow"])
    expect(types(log)).not.toContain("model.error")
  })

  it("cannot loop: when the retried step overflows again the turn fails, after one compaction", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.text("first answer"))
    expect((await runCli([...ws.runArgs, "first"])).code).toBe(0)
    server.enqueue(overflow, Reply.text("SUMMARY"), overflow, Reply.text("never asked for"))
    const result = await runCli([...ws.runArgs, "--continue", "second"])
    expect(result.code).toBe(1)
    expect(result.stderr).toMatch(/context/)
    expect(result.stderr).toContain("maximum context length is 8192 tokens")
    expect(server.requests).toHaveLength(4)
    expect(server.pending()).toBe(1)
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "compaction.done")).toHaveLength(1)
    expect(ofType(log, "model.error")).toHaveLength(1)
  })
})

describe("logbook compact", () => {
  it("summarises the whole conversation on demand; the next turn starts from the summary", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.text("first answer"))
    expect((await runCli([...ws.runArgs, "first"])).code).toBe(0)

    server.enqueue(Reply.text("SUMMARY of everything"))
    const compacted = await runCli(["compact", "--db", ws.db, "--cwd", ws.dir])
    expect(compacted.stderr).toBe("")
    expect(compacted.code).toBe(0)
    expect(compacted.stdout).toMatch(/compacted 2 messages into a summary/)
    expect(isSummary(server.requests[1]!)).toBe(true)

    // nothing new since: nothing to compact, and no request
    const again = await runCli(["compact", "--db", ws.db, "--cwd", ws.dir, "--format", "json"])
    expect(again.code).toBe(0)
    expect(JSON.parse(again.stdout)).toMatchObject({ type: "compacted", compacted: false })
    expect(server.requests).toHaveLength(2)

    server.enqueue(Reply.text("second answer"))
    expect((await runCli([...ws.runArgs, "--continue", "second"])).code).toBe(0)
    expect(messagesOf(server.requests[2]!)).toEqual([
      { role: "user", content: summaryContent("SUMMARY of everything") },
      { role: "user", content: "second" }
    ])
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "compaction.done").map((e) => e.payload.trigger)).toEqual(["manual"])
    // the session was busy while the summary was written, and idle after it
    const statuses = ofType(log, "session.status").map((e) => e.payload.status._tag)
    expect(statuses).toContain("busy")
    expect(statuses.at(-1)).toBe("idle")
  })

  it("an unknown session is a usage error", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.text("first answer"))
    expect((await runCli([...ws.runArgs, "first"])).code).toBe(0)
    const result = await runCli(["compact", "--db", ws.db, "--cwd", ws.dir, "nosuchsession"])
    expect(result.code).toBe(2)
    expect(result.stderr).toContain("nosuchsession")
  })
})
