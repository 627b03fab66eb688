/**
 * Reasoning goes back to the provider that produced it (issue 9 §1), through the built binary, real
 * HTTP and the real `ai` providers, with streams recorded from the real APIs as data
 * (test/fixtures/recorded): over two turns and a `--continue` in a new process, each request holds
 * what the real API requires —
 * - Anthropic extended thinking: every thinking block with its signature, redacted thinking with its
 *   data, a signature-only block, in their places, before the tool use they led to;
 * - DeepSeek-style `reasoning_content`: sent back for every assistant message of a turn that made tool
 *   calls (the calls and the answer after their results), in every later request; not for a turn without;
 * - OpenAI Chat Completions (a recorded answer): `reasoning_effort` from the config or `--reasoning`, no reasoning back;
 * - and a session that switches provider never sends one provider's reasoning to another.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runCli } from "../support/cli.js"
import { anthropicReply, recordedChunks, recordedReply, recordedText } from "../support/recorded.js"
import { type RecordedRequest, Reply } from "../support/scriptedServer.js"
import {
  idle,
  keyedProviderEnv,
  latestSession,
  makeJanitor,
  makeWorkspace,
  notices,
  ofType,
  readLog
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const KEY = "sk-test-reasoning-0123456789abcdef"

// biome-ignore lint/suspicious/noExplicitAny: request bodies are arbitrary JSON
type Json = any

const bodyOf = (request: RecordedRequest): Json => request.body

/** A copy of a JSON value without its `cache_control` markers (prompt caching: test/integration/caching.test.ts). */
const withoutCacheMarks = (value: Json): Json =>
  Array.isArray(value)
    ? value.map(withoutCacheMarks)
    : value !== null && typeof value === "object"
      ? Object.fromEntries(
          Object.entries(value)
            .filter(([key]) => key !== "cache_control")
            .map(([key, v]) => [key, withoutCacheMarks(v)])
        )
      : value

/** The Anthropic request's messages (without cache markers). */
const anthropicMessages = (request: RecordedRequest): ReadonlyArray<Json> => withoutCacheMarks(bodyOf(request).messages)

/** A workspace with `a.txt` whose model is served by the scripted server through a provider the user's config defines. */
const workspace = async (provider: Record<string, unknown>, model: string) => {
  const server = await janitor.server()
  const ws = makeWorkspace(server, { config: { model } })
  fs.writeFileSync(path.join(ws.dir, "a.txt"), "hello\n")
  return { server, ws, env: keyedProviderEnv(server, model, provider, KEY) }
}

const readCall = (id: string) => ({ toolUse: { id, name: "read", input: ['{"path":', '"a.txt"}'] } })

describe("Anthropic extended thinking + tools", () => {
  it("sends every thinking block back signed and in place, over two turns and a --continue in new processes", async () => {
    const { server, ws, env } = await workspace(
      { type: "anthropic", models: { "claude-test": { reasoning: 4096 } } },
      "claude/claude-test"
    )
    server.enqueue(
      anthropicReply([{ thinking: ["I should ", "read it."], signature: "sig-one" }, readCall("toolu_1")]),
      anthropicReply([
        { redacted: "REDACTED-DATA" },
        { thinking: "", signature: "sig-empty" },
        { text: "It says hello." }
      ])
    )
    const first = await runCli([...ws.runArgs, "what does a.txt say?"], { env })
    expect(notices(first.stderr)).toEqual([])
    expect(first.code).toBe(0)
    expect(server.requests.map((r) => r.url)).toEqual(["/v1/messages", "/v1/messages"])

    // thinking is on as configured (a budget), in every request
    for (const request of server.requests) {
      expect(bodyOf(request).thinking).toEqual({ type: "enabled", budget_tokens: 4096 })
    }
    // step 2: the tool-use message starts with its thinking block, signature unchanged
    const toolUse = {
      role: "assistant",
      content: [
        { type: "thinking", thinking: "I should read it.", signature: "sig-one" },
        { type: "tool_use", id: "toolu_1", name: "read", input: { path: "a.txt" } }
      ]
    }
    const second = anthropicMessages(server.requests[1]!)
    expect(second[1]).toEqual(toolUse)
    expect(second[2].role).toBe("user")
    expect(second[2].content[0]).toMatchObject({ type: "tool_result", tool_use_id: "toolu_1" })

    // the log holds the metadata with its reasoning
    const sessionId = await latestSession(ws.db, ws.dir)
    const log = await readLog(ws.db, sessionId)
    const metadata = ofType(log, "reasoning.delta").flatMap((e) =>
      e.payload.metadata === undefined ? [] : [e.payload.metadata]
    )
    expect(metadata).toEqual([
      { anthropic: { signature: "sig-one" } },
      { anthropic: { redactedData: "REDACTED-DATA" } },
      { anthropic: { signature: "sig-empty" } }
    ])

    // turn 2, a new process: the recorded real stream (thinking with a real signature, then text)
    server.enqueue(recordedReply("anthropic-thinking-text.chunks.txt"))
    const again = await runCli([...ws.runArgs, "--continue", "divide it by 5"], { env })
    expect(notices(again.stderr)).toEqual([])
    expect(again.code).toBe(0)
    const third = anthropicMessages(server.requests[2]!)
    expect(third[1]).toEqual(toolUse)
    expect(third[3]).toEqual({
      role: "assistant",
      content: [
        { type: "redacted_thinking", data: "REDACTED-DATA" },
        { type: "thinking", thinking: "", signature: "sig-empty" },
        { type: "text", text: "It says hello." }
      ]
    })
    expect(third.at(-1)).toEqual({ role: "user", content: [{ type: "text", text: "divide it by 5" }] })

    // turn 3: the recorded block goes back exactly as Anthropic sent it
    const recorded = recordedChunks("anthropic-thinking-text.chunks.txt")
    const thinking = recorded
      .flatMap((c) => ((c.delta as Json)?.type === "thinking_delta" ? [(c.delta as Json).thinking as string] : []))
      .join("")
    const signature = recorded.flatMap((c) =>
      (c.delta as Json)?.type === "signature_delta" ? [(c.delta as Json).signature as string] : []
    )[0]
    expect(signature).toMatch(/^Ev/)
    server.enqueue(anthropicReply([{ text: "ok" }]))
    const last = await runCli([...ws.runArgs, "--continue", "thanks"], { env })
    expect(last.code).toBe(0)
    const fourth = anthropicMessages(server.requests[3]!)
    expect(fourth[5]).toEqual({
      role: "assistant",
      content: [
        { type: "thinking", thinking, signature },
        { type: "text", text: "925 ÷ 5 = 185" }
      ]
    })
    expect(ofType(await readLog(ws.db, sessionId), "session.status").at(-1)).toMatchObject(idle)
  })

  it("--reasoning overrides the config; off sends thinking disabled", async () => {
    const { server, ws, env } = await workspace(
      { type: "anthropic", models: { "claude-test": { reasoning: "high" } } },
      "claude/claude-test"
    )
    server.enqueue(anthropicReply([{ text: "a" }]), anthropicReply([{ text: "b" }]), anthropicReply([{ text: "c" }]))
    expect((await runCli([...ws.runArgs, "one"], { env })).code).toBe(0)
    expect((await runCli([...ws.runArgs, "--continue", "--reasoning", "low", "two"], { env })).code).toBe(0)
    expect((await runCli([...ws.runArgs, "--continue", "--reasoning", "off", "three"], { env })).code).toBe(0)
    expect(server.requests.map((r) => bodyOf(r).thinking)).toEqual([
      { type: "enabled", budget_tokens: 24_000 },
      { type: "enabled", budget_tokens: 4096 },
      { type: "disabled" }
    ])
  })

  it("a bad --reasoning is a usage error that names it, before anything is sent", async () => {
    const { server, ws, env } = await workspace({ type: "anthropic" }, "claude/claude-test")
    const result = await runCli([...ws.runArgs, "--reasoning", "lots", "hi"], { env })
    expect(result.code).toBe(2)
    expect(result.stderr).toContain("--reasoning")
    expect(result.stderr).toContain('"lots"')
    const small = await runCli([...ws.runArgs, "--reasoning", "100", "hi"], { env })
    expect(small.code).toBe(2)
    expect(small.stderr).toContain("1024")
    expect(server.requests).toHaveLength(0)
  })
})

describe("DeepSeek-style reasoning_content (openai-compatible)", () => {
  it("sends reasoning_content back for every assistant message of a turn with tool calls, also after --continue", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    // a recorded deepseek-reasoner step: reasoning, then a call of a tool logbook does not have
    server.enqueue(
      recordedReply("deepseek-reasoner-tool-call.chunks.txt"),
      recordedReply("deepseek-reasoner-text.chunks.txt")
    )
    const first = await runCli([...ws.runArgs, "what is the weather in San Francisco?"])
    expect(first.code).toBe(0)
    const { reasoning } = recordedText("deepseek-reasoner-tool-call.chunks.txt")
    expect(reasoning.length).toBeGreaterThan(50)

    const toolCallMessage = (request: RecordedRequest) =>
      (bodyOf(request).messages as ReadonlyArray<Json>).find(
        (m) => m.role === "assistant" && m.tool_calls !== undefined
      )
    const second = toolCallMessage(server.requests[1]!)
    expect(second.reasoning_content).toBe(reasoning)
    expect(second.tool_calls[0].id).toBe("call_00_ioIn7yN9p1ZOMNpDLwd4MgAF")

    // turn 2 makes no tool call: a recorded answer with reasoning
    server.enqueue(recordedReply("deepseek-reasoner-text.chunks.txt"), Reply.text("Fine."))
    const again = await runCli([...ws.runArgs, "--continue", "and tomorrow?"])
    expect(again.code).toBe(0)
    const answered = recordedText("deepseek-reasoner-text.chunks.txt")
    expect(answered.reasoning.length).toBeGreaterThan(50)
    const assistants = (request: RecordedRequest) =>
      (bodyOf(request).messages as ReadonlyArray<Json>).filter((m) => m.role === "assistant")
    // turn 1, as DeepSeek's thinking mode requires: the call and the final answer after its result,
    // each with its reasoning_content (the answer's, not the call's)
    const [call, answer] = assistants(server.requests[2]!)
    expect(call.reasoning_content).toBe(reasoning)
    expect(answer.tool_calls).toBeUndefined()
    expect(answer.content).toBe(answered.text)
    expect(answer.reasoning_content).toBe(answered.reasoning)

    const third = await runCli([...ws.runArgs, "--continue", "thanks"])
    expect(third.code).toBe(0)
    const later = assistants(server.requests[3]!)
    expect(later).toHaveLength(3)
    // turn 1 keeps its reasoning in every later request; turn 2 (no tool call) needs none
    expect(later.map((m) => m.reasoning_content)).toEqual([reasoning, answered.reasoning, undefined])
    expect(later[2].content).toBe(answered.text)
  })
})

describe("OpenAI Chat Completions", () => {
  it("sends reasoning_effort from the config and --reasoning, and no reasoning back", async () => {
    const { server, ws, env } = await workspace(
      { type: "openai", models: { "gpt-5-mini": { reasoning: "high" } } },
      "oa/gpt-5-mini"
    )
    server.enqueue(
      Reply.stream({
        reasoning: "thinking that must not go back",
        toolCalls: [{ id: "call_1", name: "read", arguments: '{"path":"a.txt"}' }]
      }),
      // the answer: a stream recorded from the real API
      recordedReply("openai-chat-text.chunks.txt"),
      Reply.text("again")
    )
    expect((await runCli([...ws.runArgs, "read a.txt"], { env })).code).toBe(0)
    expect((await runCli([...ws.runArgs, "--continue", "--reasoning", "minimal", "more"], { env })).code).toBe(0)
    expect(server.requests.map((r) => bodyOf(r).reasoning_effort)).toEqual(["high", "high", "minimal"])
    for (const request of server.requests) {
      expect(JSON.stringify(bodyOf(request))).not.toContain("must not go back")
    }
    const messages = bodyOf(server.requests[2]!).messages as ReadonlyArray<Json>
    const call = messages.find((m) => m.role === "assistant" && m.tool_calls !== undefined)
    expect(call.tool_calls[0].id).toBe("call_1")
    expect(messages.find((m) => m.role === "tool")?.tool_call_id).toBe("call_1")
    // the recorded answer went back as the assistant's text, whole
    const answer = messages.filter((m) => m.role === "assistant").at(-1)
    expect(answer.content).toBe(recordedText("openai-chat-text.chunks.txt").text)
    expect(answer.content.length).toBeGreaterThan(200)
  })
})

describe("a session that switches provider", () => {
  it("never sends Anthropic's thinking or signatures to another provider", async () => {
    const { server, ws, env } = await workspace({ type: "anthropic" }, "claude/claude-test")
    server.enqueue(
      anthropicReply([{ thinking: "secret plan", signature: "sig-x" }, readCall("toolu_1")]),
      anthropicReply([{ thinking: "more", signature: "sig-y" }, { text: "read it" }]),
      Reply.text("hi from local")
    )
    expect((await runCli([...ws.runArgs, "read a.txt"], { env })).code).toBe(0)
    const switched = await runCli([...ws.runArgs, "--continue", "--model", "local/scripted", "go on"], { env })
    expect(switched.code).toBe(0)
    const body = JSON.stringify(bodyOf(server.requests[2]!))
    expect(server.requests[2]!.url).toBe("/v1/chat/completions")
    expect(body).not.toContain("secret plan")
    expect(body).not.toContain("sig-")
    expect(body).not.toContain("reasoning_content")
    // the history itself is kept: the call and its result
    expect(body).toContain("toolu_1")
  })
})
