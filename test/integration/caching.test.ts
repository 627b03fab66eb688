/**
 * Prompt caching (issue 9 §3), through the built binary and the real `ai` providers over HTTP:
 * - Anthropic: a 30-step turn sends cache breakpoints on the stable prefix (the system prompt, which
 *   caches the tools before it) and on the newest messages, every step; the cache reads and writes
 *   the server reports are in each `step.finished` and priced with the cache prices;
 * - OpenAI: every request of a session carries the same `prompt_cache_key` (the session id), and
 *   the prefix (system prompt and tools) is byte-identical from request to request.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runCli } from "../support/cli.js"
import { anthropicReply } from "../support/recorded.js"
import { Reply } from "../support/scriptedServer.js"
import { jsonLines, keyedProviderEnv, latestSession, makeJanitor, makeWorkspace, ofType, readLog } from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

// biome-ignore lint/suspicious/noExplicitAny: request bodies are arbitrary JSON
type Json = any

/** Every `cache_control` marker in a request body, with where it is. */
const breakpoints = (body: Json): ReadonlyArray<string> => {
  const found: Array<string> = []
  const walk = (value: Json, where: string) => {
    if (Array.isArray(value)) {
      value.forEach((v, i) => {
        walk(v, `${where}[${i}]`)
      })
    } else if (value !== null && typeof value === "object") {
      for (const [key, v] of Object.entries(value)) {
        if (key === "cache_control") found.push(where)
        else walk(v, `${where}.${key}`)
      }
    }
  }
  walk(body, "")
  return found
}

const workspace = async (provider: Record<string, unknown>, model: string) => {
  const server = await janitor.server()
  const ws = makeWorkspace(server, { config: { model, maxSteps: 40 } })
  fs.writeFileSync(path.join(ws.dir, "a.txt"), "hello\n")
  return { server, ws, env: keyedProviderEnv(server, model, provider, "sk-test-caching-0123456789abcdef") }
}

describe("Anthropic prompt caching", () => {
  it("a 30-step turn sends breakpoints on the system prompt and the newest messages; cache reads are in every step and priced", async () => {
    const price = { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 }
    const { server, ws, env } = await workspace(
      { type: "anthropic", models: { "claude-test": { price } } },
      "claude/claude-test"
    )
    const steps = 30
    const usageOf = (i: number) => ({
      input_tokens: 20,
      output_tokens: 10,
      cache_creation_input_tokens: 300,
      cache_read_input_tokens: i === 0 ? 0 : 2000 + 300 * i
    })
    for (let i = 0; i < steps - 1; i++) {
      server.enqueue(
        anthropicReply([{ toolUse: { id: `toolu_${i}`, name: "read", input: '{"path":"a.txt"}' } }], {
          usage: usageOf(i)
        })
      )
    }
    server.enqueue(anthropicReply([{ text: "read it 29 times" }], { usage: usageOf(steps - 1) }))

    const result = await runCli([...ws.runArgs, "--format", "json", "read a.txt again and again"], {
      env,
      timeoutMs: 120_000
    })
    expect(result.stderr).toBe("")
    expect(result.code).toBe(0)
    expect(server.requests).toHaveLength(steps)

    server.requests.forEach((request, i) => {
      const body = request.body
      // the system prompt is one block with a breakpoint: tools + system are the cached prefix
      expect(body.system).toEqual([expect.objectContaining({ type: "text", cache_control: { type: "ephemeral" } })])
      const marks = breakpoints(body)
      expect(marks.length).toBeLessThanOrEqual(4)
      const last = body.messages.length - 1
      // the newest messages carry one each (on their last block); the first request has one message
      const tail = i === 0 ? [last] : [last - 1, last]
      for (const m of tail) {
        const content = body.messages[m].content
        expect(content.at(-1).cache_control, `request ${i}, message ${m}`).toEqual({ type: "ephemeral" })
      }
      expect(marks).toHaveLength(1 + tail.length)
    })
    // the prefix is stable: the same tools and system prompt in every request
    const prefix = (i: number) => JSON.stringify([server.requests[i]!.body.tools, server.requests[i]!.body.system])
    for (let i = 1; i < steps; i++) expect(prefix(i)).toBe(prefix(0))

    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    const finished = ofType(log, "step.finished").filter((e) => e.payload.aborted !== true)
    expect(finished).toHaveLength(steps)
    finished.forEach((event, i) => {
      const u = usageOf(i)
      expect(event.payload.usage).toMatchObject({
        input: u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens,
        cacheRead: u.cache_read_input_tokens,
        cacheWrite: u.cache_creation_input_tokens,
        output: u.output_tokens
      })
      const cost =
        (u.input_tokens * price.input +
          u.cache_read_input_tokens * price.cacheRead +
          u.cache_creation_input_tokens * price.cacheWrite +
          u.output_tokens * price.output) /
        1_000_000
      expect(event.payload.usage.cost).toBeCloseTo(cost, 12)
    })
    const done = jsonLines(result.stdout).find((line) => line.type === "done") as Json
    const totalRead = Array.from({ length: steps }, (_, i) => usageOf(i).cache_read_input_tokens).reduce(
      (a, b) => a + b
    )
    expect(done.usage.cacheRead).toBe(totalRead)
    expect(done.usage.cacheWrite).toBe(300 * steps)
  })
})

describe("Anthropic prompt caching without a price", () => {
  it("the cache reads are counted and the cost line says unknown, not $0", async () => {
    const { server, ws, env } = await workspace({ type: "anthropic" }, "claude/claude-not-in-any-catalog")
    server.enqueue(
      anthropicReply([{ toolUse: { id: "toolu_0", name: "read", input: '{"path":"a.txt"}' } }], {
        usage: { input_tokens: 20, output_tokens: 10, cache_creation_input_tokens: 300, cache_read_input_tokens: 0 }
      }),
      anthropicReply([{ text: "done" }], {
        usage: { input_tokens: 20, output_tokens: 10, cache_creation_input_tokens: 40, cache_read_input_tokens: 300 }
      })
    )
    const result = await runCli([...ws.runArgs, "read a.txt"], { env })
    expect(result.code).toBe(0)
    expect(result.stdout).toBe("done\n")
    expect(result.stderr).toMatch(/cached 300/)
    expect(result.stderr).toMatch(/cost unknown/)
    expect(result.stderr).not.toMatch(/\$0(\.0+)?\b/)
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    for (const event of ofType(log, "step.finished")) expect(event.payload.usage.costKnown).toBe(false)
  })
})

describe("OpenAI prompt caching", () => {
  it("every request of a session carries the session id as prompt_cache_key, also after --continue", async () => {
    const { server, ws, env } = await workspace({ type: "openai" }, "oa/gpt-4.1")
    server.enqueue(
      Reply.stream({ toolCalls: [{ id: "call_1", name: "read", arguments: '{"path":"a.txt"}' }] }),
      Reply.text("done"),
      Reply.text("again")
    )
    expect((await runCli([...ws.runArgs, "read a.txt"], { env })).code).toBe(0)
    expect((await runCli([...ws.runArgs, "--continue", "more"], { env })).code).toBe(0)
    const sessionId = await latestSession(ws.db, ws.dir)
    expect(server.requests.map((r) => r.body.prompt_cache_key)).toEqual([sessionId, sessionId, sessionId])
    // no Anthropic markers leak into another provider's request
    for (const request of server.requests) expect(breakpoints(request.body)).toEqual([])
  })
})
