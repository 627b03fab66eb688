/**
 * What goes over the wire, pinned byte for byte: for each provider type, the request body (and
 * headers) the model layer sends for a history with every kind of part, and the events it makes of
 * a streamed answer with every kind of chunk. The files under `__wire__/` were recorded from the
 * layer when it went through the SDK's `streamText`; the layer now calls the provider's
 * `LanguageModelV3.doStream` itself (issue 13 §2) and must send exactly the same bytes and read the
 * same events. CI (`CI=true`) never writes a missing file: it fails.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Stream } from "effect"
import { type AiSdkOptions, makeAiSdkModel } from "../../src/model/AiSdk.js"
import type { ModelEvent, ModelMessage, ModelRequest } from "../../src/model/Model.js"
import { anthropicReply } from "../support/recorded.js"
import { type RecordedRequest, Reply, type ScriptedResponse, startScriptedServer } from "../support/scriptedServer.js"

const tools = [
  {
    name: "read",
    description: "Read a file",
    inputSchema: {
      type: "object",
      properties: { path: { type: "string", description: "the file" }, offset: { type: "integer", minimum: 1 } },
      required: ["path"],
      additionalProperties: false
    }
  },
  {
    name: "bash",
    description: "Run a command",
    inputSchema: { type: "object", properties: { command: { type: "string" } }, required: ["command"] }
  }
]

/** Every kind of part the kernel sends, for every provider's way of taking reasoning back. */
const history: ReadonlyArray<ModelMessage> = [
  { role: "user", content: "Fix the bug in a.ts" },
  {
    role: "assistant",
    parts: [
      {
        type: "reasoning",
        text: "Let me look at the file first.",
        metadata: { anthropic: { signature: "sig-1" }, deepseek: { note: "kept" }, other: { x: 1 } }
      },
      { type: "text", text: "I'll read it." },
      { type: "tool-call", callId: "call_1", tool: "read", input: { path: "a.ts" } },
      // a call whose input was not JSON
      { type: "tool-call", callId: "call_2", tool: "bash", input: undefined }
    ]
  },
  {
    role: "tool",
    results: [
      { callId: "call_1", tool: "read", output: "1: const a = 1\n", isError: false },
      { callId: "call_2", tool: "bash", output: "the input is not JSON", isError: true }
    ]
  },
  {
    role: "assistant",
    parts: [
      { type: "reasoning", text: "", metadata: { anthropic: { redactedData: "opaque-data" } } },
      { type: "tool-call", callId: "call_3", tool: "bash", input: { command: "npm test" } }
    ]
  },
  { role: "tool", results: [{ callId: "call_3", tool: "bash", output: "ok ✓ ünïcode", isError: false }] },
  // the answer after the calls' results: its reasoning goes back too (DeepSeek's thinking mode)
  {
    role: "assistant",
    parts: [
      { type: "reasoning", text: "The tests pass now." },
      { type: "text", text: "Done: the bug was on line 1." }
    ]
  },
  { role: "user", content: "now explain" },
  // a step a steered message stopped mid-thinking: no signature, no call
  { role: "assistant", parts: [{ type: "reasoning", text: "Let me think about" }] },
  { role: "user", content: "please, briefly" }
]

const request: ModelRequest = {
  system: "You are a test.\nBe brief.",
  messages: history,
  tools,
  maxOutputTokens: 1_000,
  cacheKey: "session-1"
}

interface Case {
  readonly name: string
  readonly options: Omit<AiSdkOptions, "baseURL">
  readonly reply: ScriptedResponse
}

const cases: ReadonlyArray<Case> = [
  {
    name: "openai-compatible",
    options: {
      name: "deepseek/chat",
      type: "openai-compatible",
      apiKey: "sk-wire",
      modelId: "deepseek-chat",
      reasoning: "high",
      headers: { "x-extra": "1" }
    },
    reply: Reply.stream({
      reasoning: ["Thinking ", "hard."],
      text: ["Reading ", "the file."],
      toolCalls: [
        { id: "call_a", name: "read", arguments: ['{"path":', '"b.ts"}'] },
        { id: "call_b", name: "bash", arguments: ["not json"] },
        { id: "call_c", name: "nope", arguments: [""] }
      ],
      usage: { prompt_tokens: 1_200, completion_tokens: 30, prompt_tokens_details: { cached_tokens: 1_000 } }
    })
  },
  {
    name: "openai",
    options: { name: "openai/gpt", type: "openai", apiKey: "sk-wire", modelId: "gpt-4.1", reasoning: "low" },
    reply: Reply.stream({
      text: ["Done."],
      usage: {
        prompt_tokens: 900,
        completion_tokens: 12,
        prompt_tokens_details: { cached_tokens: 800 },
        completion_tokens_details: { reasoning_tokens: 4 }
      }
    })
  },
  {
    name: "anthropic",
    options: { name: "claude/c", type: "anthropic", apiKey: "sk-wire", modelId: "claude-c", reasoning: "low" },
    reply: anthropicReply(
      [
        { thinking: ["a ", "plan"], signature: "sig-2" },
        { redacted: "opaque-2" },
        { text: ["Running ", "it."] },
        { toolUse: { id: "toolu_1", name: "bash", input: ['{"command"', ':"ls"}'] } }
      ],
      {
        stopReason: "tool_use",
        usage: { input_tokens: 50, output_tokens: 20, cache_read_input_tokens: 40, cache_creation_input_tokens: 5 },
        model: "claude-c-20260101"
      }
    )
  }
]

/**
 * The headers the SDK sends, with the versions in the user agent masked: the runtime's differs
 * between CI's Node versions, and a provider package's own version is no change of the wire.
 */
const sentHeaders = (recorded: RecordedRequest) =>
  Object.fromEntries(
    Object.entries(recorded.headers)
      .filter(([name]) => !["host", "content-length", "connection"].includes(name))
      .map(([name, value]) => [
        name,
        name === "user-agent" ? String(value).replace(/\/v?\d+(\.\d+)*/g, "/*") : String(value)
      ])
      .sort(([a], [b]) => a!.localeCompare(b!))
  )

const events = (stream: Stream.Stream<ModelEvent, unknown>) =>
  Effect.gen(function* () {
    const out: Array<ModelEvent> = []
    const exit = yield* Stream.runForEach(stream, (event) => Effect.sync(() => out.push(event))).pipe(Effect.exit)
    return { out, exit }
  })

/** One request of a case to a fresh scripted server: what was sent and the events read. */
const exchange = (c: Case, extra: Partial<AiSdkOptions> = {}) =>
  Effect.gen(function* () {
    const server = yield* Effect.acquireRelease(
      Effect.promise(() => startScriptedServer()),
      (s) => Effect.promise(() => s.close())
    )
    server.enqueue(c.reply)
    const model = makeAiSdkModel({ ...c.options, baseURL: `${server.url}/v1`, ...extra })
    const { out, exit } = yield* events(model.stream(request))
    expect(Exit.isSuccess(exit)).toBe(true)
    expect(server.requests).toHaveLength(1)
    return { sent: server.requests[0]!, out }
  })

describe("the wire, byte for byte", () => {
  for (const c of cases) {
    // openai-compatible requests are our own (OpenAiCompatibleWire.ts): the SDK's are pinned here, ours below
    it.live(`${c.name}: the request body and headers, and the events of the answer`, () =>
      Effect.gen(function* () {
        const { sent, out } = yield* exchange(c, { viaSdk: true })
        yield* Effect.promise(() =>
          expect(
            `${sent.method} ${sent.url}\n${JSON.stringify(sentHeaders(sent), null, 2)}\n${sent.text}\n`
          ).toMatchFileSnapshot(`__wire__/${c.name}.request.txt`)
        )
        yield* Effect.promise(() =>
          expect(`${JSON.stringify(out, null, 2)}\n`).toMatchFileSnapshot(`__wire__/${c.name}.events.json`)
        )
      }).pipe(Effect.scoped)
    )
  }

  it.live("openai-compatible, our own request: the SDK's body to the byte, the same events, our headers", () =>
    Effect.gen(function* () {
      const c = cases[0]!
      const sdk = yield* exchange(c, { viaSdk: true })
      const own = yield* exchange(c)
      expect(`${own.sent.method} ${own.sent.url}`).toBe(`${sdk.sent.method} ${sdk.sent.url}`)
      expect(own.sent.text).toBe(sdk.sent.text)
      expect(own.out).toEqual(sdk.out)
      // the key as a bearer token, config's headers, the length; none of undici's defaults
      yield* Effect.promise(() =>
        expect(`${JSON.stringify(sentHeaders(own.sent), null, 2)}\n`).toMatchFileSnapshot(
          "__wire__/openai-compatible.own-headers.json"
        )
      )
      expect(Number(own.sent.headers["content-length"])).toBe(Buffer.byteLength(own.sent.text))
    }).pipe(Effect.scoped)
  )
})

describe("part ids within a step", () => {
  it.live(
    "a provider that starts a second part under an id it used before: the second part gets an id of its own",
    () =>
      Effect.gen(function* () {
        const server = yield* Effect.acquireRelease(
          Effect.promise(() => startScriptedServer()),
          (s) => Effect.promise(() => s.close())
        )
        // openai-compatible names every reasoning part `reasoning-0` and every text part `txt-0`
        const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
          type: "chunk" as const,
          chunk: Reply.chunk(delta, finish)
        })
        server.enqueue({
          type: "sse",
          steps: [
            chunk({ role: "assistant", reasoning_content: "first thought" }),
            chunk({ content: "first words" }),
            chunk({ reasoning_content: "second thought" }),
            chunk({ content: "second words" }),
            chunk({}, "stop"),
            { type: "done" }
          ]
        })
        const model = makeAiSdkModel({ ...cases[0]!.options, baseURL: `${server.url}/v1` })
        const { out, exit } = yield* events(model.stream(request))
        expect(Exit.isSuccess(exit)).toBe(true)
        expect(
          out
            .filter((e) => e._tag !== "Finish")
            .map((e) => [e._tag, "id" in e ? e.id : "", "delta" in e ? e.delta : ""])
        ).toEqual([
          ["ReasoningDelta", "reasoning-0", "first thought"],
          ["TextDelta", "txt-0", "first words"],
          ["ReasoningDelta", "reasoning-0-1", "second thought"],
          ["TextDelta", "txt-0-1", "second words"]
        ])
        expect(out.at(-1)).toMatchObject({ _tag: "Finish", finishReason: "stop" })
      }).pipe(Effect.scoped)
  )
})
