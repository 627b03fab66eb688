import * as net from "node:net"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Chunk, Clock, Deferred, Effect, Either, Exit, Fiber, Option, Stream, TestClock } from "effect"
import {
  type AiSdkOptions,
  defaultMaxOutputTokens,
  defaultStreamIdleTimeoutMs,
  layerAiSdk,
  makeAiSdkModel,
  toSdkMessages
} from "../../src/model/AiSdk.js"
import { endpointOf, networkKind, providerMessage } from "../../src/model/internal/providerError.js"
import { Model, ModelError, type ModelEvent, type ModelMessage, type ModelRequest } from "../../src/model/Model.js"
import { describe as describeError } from "../../src/model/Retry.js"
import { consumeBatched } from "../../src/session/internal/modelReader.js"
import { keepsPull, openPull } from "../../src/stream/internal/pull.js"
import { anthropicReply } from "../support/recorded.js"
import { Reply, type ScriptedResponse, type ScriptedServer, startScriptedServer } from "../support/scriptedServer.js"

const apiKey = "sk-test-7f3a9c1e5b2d4f6a8c0e"

const scriptedServer = Effect.acquireRelease(
  Effect.promise(() => startScriptedServer()),
  (server) => Effect.promise(() => server.close())
)

const modelFor = (server: ScriptedServer, options: Partial<AiSdkOptions> = {}) =>
  makeAiSdkModel({
    name: "local/test-model",
    type: "openai-compatible",
    baseURL: `${server.url}/v1`,
    apiKey,
    modelId: "test-model",
    ...options
  })

const readTool = {
  name: "read",
  description: "Read a file",
  inputSchema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] }
}

const request: ModelRequest = {
  system: "You are a test.",
  messages: [{ role: "user", content: "hi" }],
  tools: [readTool]
}

/** Runs the stream; returns the events that went out and the exit. */
const run = (stream: Stream.Stream<ModelEvent, ModelError>) =>
  Effect.gen(function* () {
    const events: Array<ModelEvent> = []
    const exit = yield* Stream.runForEach(stream, (event) => Effect.sync(() => events.push(event))).pipe(Effect.exit)
    return { events, exit }
  })

/** Pulls to the stream's end (which must be an end, not a failure); the events in order. */
const drainPull = (pull: Effect.Effect<Chunk.Chunk<ModelEvent>, Option.Option<ModelError>>) =>
  Effect.gen(function* () {
    const events: Array<ModelEvent> = []
    while (true) {
      const next = yield* Effect.either(pull)
      if (Either.isLeft(next)) {
        expect(next.left).toEqual(Option.none())
        return events
      }
      events.push(...next.right)
    }
  })

const failure = (exit: Exit.Exit<unknown, ModelError>): ModelError => {
  if (Exit.isSuccess(exit)) throw new Error("expected the stream to fail")
  const error = Cause.failureOption(exit.cause)
  if (Option.isNone(error)) throw new Error(`expected a typed failure, got ${Cause.pretty(exit.cause)}`)
  return error.value
}

const expectNoKey = (value: unknown) => {
  expect(JSON.stringify(value)).not.toContain(apiKey)
  expect(String(value)).not.toContain(apiKey)
}

describe("layerAiSdk (openai-compatible, real HTTP)", () => {
  it.scopedLive("streams text as TextDelta events, then Finish with usage", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue(
        Reply.stream({
          text: ["Hel", "lo ", "world"],
          usage: {
            prompt_tokens: 120,
            completion_tokens: 30,
            prompt_tokens_details: { cached_tokens: 100 },
            completion_tokens_details: { reasoning_tokens: 4 }
          }
        })
      )
      const { events, exit } = yield* run(modelFor(server).stream(request))
      expect(Exit.isSuccess(exit)).toBe(true)
      expect(events).toEqual([
        { _tag: "TextDelta", id: "txt-0", delta: "Hel" },
        { _tag: "TextDelta", id: "txt-0", delta: "lo " },
        { _tag: "TextDelta", id: "txt-0", delta: "world" },
        {
          _tag: "Finish",
          finishReason: "stop",
          usage: { input: 120, output: 30, reasoning: 4, cacheRead: 100, cacheWrite: 0 },
          // the model the provider says answered (the scripted server's "model")
          responseModel: "scripted"
        }
      ])
      expect(server.requests).toHaveLength(1)
      expect(server.requests[0]!.body.stream_options).toEqual({ include_usage: true })
    })
  )

  it.scopedLive("its stream keeps its pull: the kernel's reader (consumeBatched) gets the same events", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      const reply = Reply.stream({
        text: ["Hel", "lo"],
        toolCalls: [{ id: "call_1", name: "read", arguments: ['{"path":', '"a.txt"}'] }],
        usage: { prompt_tokens: 10, completion_tokens: 2 }
      })
      server.enqueue(reply)
      server.enqueue(reply)
      const model = modelFor(server)
      const stream = model.stream(request)
      expect(keepsPull(stream)).toBe(true)
      const viaStream = yield* run(stream)
      const batched: Array<ModelEvent> = []
      yield* consumeBatched(model.stream(request), (batch) => Effect.sync(() => batched.push(...batch)))
      expect(Exit.isSuccess(viaStream.exit)).toBe(true)
      expect(batched).toEqual(viaStream.events)
      expect(batched.map((event) => event._tag)).toEqual([
        "TextDelta",
        "TextDelta",
        "ToolInputStart",
        "ToolInputDelta",
        "ToolInputDelta",
        "ToolCall",
        "Finish"
      ])
    })
  )

  it.scopedLive("a pull takes the parts the response has in hand at once, and does not wait for more", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      const go = yield* Deferred.make<void>()
      // three parts in one write (one network read), then the server waits for the test
      const together = [
        Reply.chunk({ role: "assistant", content: "a" }),
        Reply.chunk({ content: "b" }),
        Reply.chunk({ content: "c" })
      ]
        .map((chunk) => JSON.stringify(chunk))
        .join("\n\ndata: ")
      server.enqueue({
        type: "sse",
        steps: [
          { type: "raw", data: together },
          { type: "wait", until: Effect.runPromise(Deferred.await(go)) },
          { type: "chunk", chunk: Reply.chunk({}, "stop") },
          { type: "done" }
        ]
      })
      const { first, rest } = yield* Effect.scoped(
        Effect.gen(function* () {
          const pull = yield* openPull(modelFor(server).stream(request))
          // returns while the server still waits: a pull that waited for more would never return
          const first = yield* pull
          yield* Deferred.succeed(go, undefined)
          return { first, rest: yield* drainPull(pull) }
        })
      )
      expect(Chunk.toReadonlyArray(first)).toEqual(
        ["a", "b", "c"].map((delta) => ({ _tag: "TextDelta", id: "txt-0", delta }))
      )
      expect(rest.map((event) => event._tag)).toEqual(["Finish"])
    })
  )

  it.scopedLive("a pull interrupted while it waits loses nothing: the pulls after it give the rest, in order", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      const go = yield* Deferred.make<void>()
      // "a", then the server waits for the test; then "b", "c" and the finish
      server.enqueue(Reply.waitAfter(1, Effect.runPromise(Deferred.await(go)), Reply.stream({ text: ["a", "b", "c"] })))
      const events = yield* Effect.scoped(
        Effect.gen(function* () {
          const pull = yield* openPull(modelFor(server).stream(request))
          const out: Array<ModelEvent> = [...(yield* pull)]
          // a pull that waits for the server, interrupted (as a steer or Ctrl-C does)
          const waiting = yield* Effect.fork(pull)
          // let it start its read (a few scheduler turns; the outcome must not depend on how many)
          for (let turn = 0; turn < 5; turn++) yield* Effect.yieldNow()
          yield* Fiber.interrupt(waiting)
          yield* Deferred.succeed(go, undefined)
          return [...out, ...(yield* drainPull(pull))]
        })
      )
      expect(events.map((event) => (event._tag === "TextDelta" ? event.delta : event._tag))).toEqual([
        "a",
        "b",
        "c",
        "Finish"
      ])
    })
  )

  it.scopedLive("usage is 0 when the provider reports none", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue(Reply.text("ok"))
      const { events } = yield* run(modelFor(server).stream(request))
      expect(events.at(-1)).toEqual({
        _tag: "Finish",
        finishReason: "stop",
        usage: { input: 0, output: 0, reasoning: 0, cacheRead: 0, cacheWrite: 0 },
        // the model the provider says answered (the scripted server's "model")
        responseModel: "scripted"
      })
    })
  )

  it.scopedLive("streams reasoning_content as ReasoningDelta events before the text", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue(Reply.stream({ reasoning: ["Let me ", "think."], text: "Answer." }))
      const { events, exit } = yield* run(modelFor(server).stream(request))
      expect(Exit.isSuccess(exit)).toBe(true)
      expect(events.map((e) => e._tag)).toEqual(["ReasoningDelta", "ReasoningDelta", "TextDelta", "Finish"])
      expect(events[0]).toEqual({ _tag: "ReasoningDelta", id: "reasoning-0", delta: "Let me " })
      expect(events[1]).toEqual({ _tag: "ReasoningDelta", id: "reasoning-0", delta: "think." })
    })
  )

  it.scopedLive("maps parallel tool calls with split arguments; one step only (the SDK does not loop)", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue(
        Reply.stream({
          text: "Reading both.",
          toolCalls: [
            { id: "call_1", name: "read", arguments: ['{"pa', 'th": "a', '.txt"}'] },
            { id: "call_2", name: "read", arguments: ['{"path"', ': "b.txt"}'] }
          ],
          usage: { prompt_tokens: 50, completion_tokens: 20 }
        })
      )
      const { events, exit } = yield* run(modelFor(server).stream(request))
      expect(Exit.isSuccess(exit)).toBe(true)
      expect(events).toEqual([
        { _tag: "TextDelta", id: "txt-0", delta: "Reading both." },
        { _tag: "ToolInputStart", callId: "call_1", tool: "read" },
        { _tag: "ToolInputDelta", callId: "call_1", delta: '{"pa' },
        { _tag: "ToolInputDelta", callId: "call_1", delta: 'th": "a' },
        { _tag: "ToolInputDelta", callId: "call_1", delta: '.txt"}' },
        { _tag: "ToolInputStart", callId: "call_2", tool: "read" },
        { _tag: "ToolInputDelta", callId: "call_2", delta: '{"path"' },
        { _tag: "ToolInputDelta", callId: "call_2", delta: ': "b.txt"}' },
        { _tag: "ToolCall", callId: "call_1", tool: "read", input: { path: "a.txt" }, inputText: '{"path": "a.txt"}' },
        { _tag: "ToolCall", callId: "call_2", tool: "read", input: { path: "b.txt" }, inputText: '{"path": "b.txt"}' },
        {
          _tag: "Finish",
          finishReason: "tool-calls",
          usage: { input: 50, output: 20, reasoning: 0, cacheRead: 0, cacheWrite: 0 },
          // the model the provider says answered (the scripted server's "model")
          responseModel: "scripted"
        }
      ])
      expect(server.requests).toHaveLength(1)
    })
  )

  it.scopedLive("invalid tool-call JSON: input undefined, inputText keeps what the model sent", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue(
        Reply.stream({
          toolCalls: [
            { id: "call_bad", name: "read", arguments: ['{"path": ', '"a.txt"'] },
            { id: "call_ok", name: "read", arguments: '{"path": "b.txt"}' }
          ]
        })
      )
      const { events, exit } = yield* run(modelFor(server).stream(request))
      expect(Exit.isSuccess(exit)).toBe(true)
      const calls = events.filter((e) => e._tag === "ToolCall")
      expect(calls).toEqual([
        { _tag: "ToolCall", callId: "call_bad", tool: "read", input: undefined, inputText: '{"path": "a.txt"' },
        { _tag: "ToolCall", callId: "call_ok", tool: "read", input: { path: "b.txt" }, inputText: '{"path": "b.txt"}' }
      ])
      expect(events.at(-1)?._tag).toBe("Finish")
    })
  )

  it.scopedLive("a call to a tool that was not declared keeps its parsed input (the kernel rejects it)", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue(Reply.stream({ toolCalls: [{ id: "call_x", name: "write", arguments: '{"path":"x"}' }] }))
      const { events } = yield* run(modelFor(server).stream(request))
      expect(events.find((e) => e._tag === "ToolCall")).toEqual({
        _tag: "ToolCall",
        callId: "call_x",
        tool: "write",
        input: { path: "x" },
        inputText: '{"path":"x"}'
      })
    })
  )

  for (const status of [429, 500, 503, 529]) {
    it.scopedLive(`HTTP ${status} → ModelError http with status, retry-after headers and body; no SDK retry`, () =>
      Effect.gen(function* () {
        const server = yield* scriptedServer
        server.enqueue(
          Reply.error(status, {
            headers: { "Retry-After": "7", "retry-after-ms": "6500" },
            message: `scripted ${status} failure`
          })
        )
        const { events, exit } = yield* run(modelFor(server).stream(request))
        expect(events).toEqual([])
        const error = failure(exit)
        expect(error).toBeInstanceOf(ModelError)
        expect(error.reason).toBe("http")
        expect(error.status).toBe(status)
        expect(error.headers?.["retry-after"]).toBe("7")
        expect(error.headers?.["retry-after-ms"]).toBe("6500")
        expect(error.body).toContain(`scripted ${status} failure`)
        expect(error.message).toContain(`HTTP ${status}`)
        expectNoKey(error)
        // maxRetries: 0 — the SDK made exactly one request
        expect(server.requests).toHaveLength(1)
      })
    )
  }

  it.scopedLive("a redirect is not followed: a 307 is an http error naming it, and nothing else is requested", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue({
        type: "http",
        status: 307,
        headers: { location: `${server.url}/elsewhere/chat/completions` },
        body: ""
      })
      const error = failure((yield* run(modelFor(server).stream(request))).exit)
      expect(error).toMatchObject({ reason: "http", status: 307 })
      expect(error.headers?.location).toBe(`${server.url}/elsewhere/chat/completions`)
      expect(server.requests).toHaveLength(1)
    })
  )

  it.scopedLive("an error body larger than 256 kB is read no further: the error keeps its start", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue(Reply.error(500, { body: `start ${"x".repeat(2_000_000)}` }))
      const error = failure((yield* run(modelFor(server).stream(request))).exit)
      expect(error).toMatchObject({ reason: "http", status: 500 })
      expect(error.body!.startsWith("start xxx")).toBe(true)
      // cut to 4,096 characters, and the length said is what was read: 256 kB, not the 2 MB sent
      expect(error.body).toContain(`(${256 * 1024} characters)`)
    })
  )

  it.scopedLive("cuts the response body to a few kB", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue(Reply.error(500, { body: "x".repeat(20_000) }))
      const error = failure((yield* run(modelFor(server).stream(request))).exit)
      expect(error.body!.length).toBeLessThan(4200)
      expect(error.body).toContain("(20000 characters)")
    })
  )

  it.scopedLive("a stream cut mid-way → stream-cut, after the events that arrived", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue(Reply.cutAfter(2, Reply.stream({ text: ["one ", "two ", "three"] })))
      const { events, exit } = yield* run(modelFor(server).stream(request))
      expect(events).toEqual([
        { _tag: "TextDelta", id: "txt-0", delta: "one " },
        { _tag: "TextDelta", id: "txt-0", delta: "two " }
      ])
      const error = failure(exit)
      expect(error.reason).toBe("stream-cut")
      expectNoKey(error)
    })
  )

  it.scopedLive("a stream that ends without a finish reason → stream-cut", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue(Reply.stream({ text: "partial", finishReason: null, done: false }))
      const { events, exit } = yield* run(modelFor(server).stream(request))
      expect(events.map((e) => e._tag)).toEqual(["TextDelta"])
      expect(failure(exit).reason).toBe("stream-cut")
    })
  )

  it.scopedLive("a malformed chunk → invalid-response, after the events before it", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue(Reply.malformedAfter(1, Reply.stream({ text: ["ok ", "more"] })))
      const { events, exit } = yield* run(modelFor(server).stream(request))
      expect(events).toEqual([{ _tag: "TextDelta", id: "txt-0", delta: "ok " }])
      const error = failure(exit)
      expect(error.reason).toBe("invalid-response")
      expect(error.message).toContain("a chunk is not JSON")
    })
  )

  it.scopedLive("a JSON chunk of the wrong shape → invalid-response, saying what is wrong", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue({ type: "sse", steps: [{ type: "raw", data: '{"choices": "nope"}' }, { type: "done" }] })
      const error = failure((yield* run(modelFor(server).stream(request))).exit)
      expect(error.reason).toBe("invalid-response")
      expect(error.message).toContain("choices is not an array")
    })
  )

  it.scopedLive.each<[string, ScriptedResponse, string]>([
    ["a malformed chunk", Reply.malformedAfter(1, Reply.stream({ text: ["ok ", "more"] })), "AI_JSONParseError"],
    [
      "a JSON chunk of the wrong shape",
      { type: "sse", steps: [{ type: "raw", data: '{"choices": "nope"}' }, { type: "done" }] },
      "AI_TypeValidationError"
    ]
  ])("through the SDK's provider package: %s → invalid-response (the SDK's error)", ([, reply, name]) =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue(reply)
      const model = makeAiSdkModel({
        name: "local/test-model",
        type: "openai-compatible",
        baseURL: `${server.url}/v1`,
        apiKey,
        modelId: "test-model",
        viaSdk: true
      })
      const error = failure((yield* run(model.stream(request))).exit)
      expect(error.reason).toBe("invalid-response")
      expect(error.cause).toMatchObject({ name })
    })
  )

  it.scopedLive.each([
    [
      { message: "Overloaded", type: "overloaded_error", code: 529 },
      { reason: "http", status: 529 }
    ],
    [
      { message: "Incorrect API key", code: 401 },
      { reason: "http", status: 401 }
    ],
    [{ message: "Something broke", type: "weird" }, { reason: "stream-cut" }]
  ] as const)(
    "an error object sent inside the stream %j → an http error when it carries a status, else stream-cut",
    ([providerError, expected]) =>
      Effect.gen(function* () {
        const server = yield* scriptedServer
        server.enqueue({
          type: "sse",
          steps: [
            { type: "chunk", chunk: Reply.chunk({ content: "a" }) },
            { type: "chunk", chunk: { error: providerError } },
            { type: "done" }
          ]
        })
        const { events, exit } = yield* run(modelFor(server).stream(request))
        expect(events.map((e) => e._tag)).toEqual(["TextDelta"])
        const error = failure(exit)
        expect(error).toMatchObject(expected)
        expect(error.message).toContain(providerError.message)
        expect(error.body).toContain(providerError.message)
      })
  )

  it.scopedLive("interrupting the stream aborts the HTTP request (the server sees the connection close)", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue(Reply.waitAfter(1, new Promise(() => {}), Reply.stream({ text: ["first", "never"] })))
      const firstDelta = yield* Deferred.make<void>()
      const fiber = yield* modelFor(server)
        .stream(request)
        .pipe(
          Stream.runForEach(() => Deferred.succeed(firstDelta, undefined)),
          Effect.fork
        )
      yield* Deferred.await(firstDelta)
      const recorded = yield* Effect.promise(() => server.request(0))
      yield* Fiber.interrupt(fiber)
      yield* Effect.promise(() => recorded.aborted).pipe(Effect.timeout("30 seconds"))
    })
  )

  it.scopedLive("sends our messages and tools in OpenAI format, the key only in the Authorization header", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue(Reply.text("done"))
      const { exit } = yield* run(
        modelFor(server).stream({
          system: "Be brief.",
          maxOutputTokens: 256,
          tools: [readTool],
          messages: [
            { role: "user", content: "read a.txt" },
            {
              role: "assistant",
              parts: [
                { type: "text", text: "Reading." },
                { type: "tool-call", callId: "call_1", tool: "read", input: { path: "a.txt" } },
                { type: "tool-call", callId: "call_2", tool: "read", input: { path: "b.txt" } }
              ]
            },
            {
              role: "tool",
              results: [
                { callId: "call_1", tool: "read", output: "contents of a", isError: false },
                { callId: "call_2", tool: "read", output: "ENOENT: b.txt", isError: true }
              ]
            },
            { role: "user", content: "thanks" }
          ]
        })
      )
      expect(Exit.isSuccess(exit)).toBe(true)
      const received = server.requests[0]!
      expect(received.body).toMatchObject({
        model: "test-model",
        stream: true,
        max_tokens: 256,
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "read a.txt" },
          {
            role: "assistant",
            content: "Reading.",
            tool_calls: [
              { id: "call_1", type: "function", function: { name: "read", arguments: '{"path":"a.txt"}' } },
              { id: "call_2", type: "function", function: { name: "read", arguments: '{"path":"b.txt"}' } }
            ]
          },
          { role: "tool", tool_call_id: "call_1", content: "contents of a" },
          { role: "tool", tool_call_id: "call_2", content: "ENOENT: b.txt" },
          { role: "user", content: "thanks" }
        ],
        tools: [
          { type: "function", function: { name: "read", description: "Read a file", parameters: readTool.inputSchema } }
        ]
      })
      expect(received.headers.authorization).toBe(`Bearer ${apiKey}`)
      const { authorization: _, ...otherHeaders } = received.headers
      expectNoKey(otherHeaders)
      expectNoKey(received.body)
    })
  )

  it.scopedLive("the API key never appears in a ModelError, even when the provider echoes it back", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue(
        Reply.error(401, {
          headers: { "x-echo-authorization": `Bearer ${apiKey}` },
          message: `Incorrect API key provided: ${apiKey}`
        })
      )
      const error = failure((yield* run(modelFor(server).stream(request))).exit)
      expect(error.reason).toBe("http")
      expect(error.status).toBe(401)
      expectNoKey(error)
      expectNoKey(error.cause)
      expect(error.body).toContain("[redacted]")
      expect(error.headers?.["x-echo-authorization"]).toBe("Bearer [redacted]")
      expect(error.headers?.authorization).toBeUndefined()
    })
  )

  it.scopedLive("nothing listening → network, kind refused, with the host and port of the baseURL", () =>
    Effect.gen(function* () {
      // port 2: nothing listens there (and listen(0) never hands it out to another test's server);
      // port 1 is on fetch's list of blocked ports, so it would never even be tried (below)
      const model = makeAiSdkModel({
        name: "local/m",
        type: "openai-compatible",
        baseURL: "http://127.0.0.1:2/v1",
        apiKey,
        modelId: "m"
      })
      const error = failure((yield* run(model.stream(request))).exit)
      expect(error).toMatchObject({
        reason: "network",
        network: "refused",
        host: "127.0.0.1",
        port: 2,
        provider: "local"
      })
      expect(describeError(error)).toBe("cannot connect to 127.0.0.1:2 (connection refused)")
      expectNoKey(error)
    })
  )

  it.scopedLive("a host that does not resolve → network, kind dns (a name under .invalid never resolves)", () =>
    Effect.gen(function* () {
      const model = makeAiSdkModel({
        name: "remote/m",
        type: "openai-compatible",
        baseURL: "https://logbook-test.invalid/v1",
        apiKey,
        modelId: "m"
      })
      const error = failure((yield* run(model.stream(request))).exit)
      expect(error).toMatchObject({
        reason: "network",
        network: "dns",
        host: "logbook-test.invalid",
        port: 443,
        provider: "remote"
      })
      expect(describeError(error)).toBe("the host logbook-test.invalid does not resolve")
      expectNoKey(error)
    })
  )

  it.scopedLive("through the SDK's provider package, a port fetch blocks (1) → network, kind blocked-port", () =>
    Effect.gen(function* () {
      const model = makeAiSdkModel({
        name: "local/m",
        type: "openai-compatible",
        baseURL: "http://127.0.0.1:1/v1",
        modelId: "m",
        viaSdk: true
      })
      const error = failure((yield* run(model.stream(request))).exit)
      expect(error).toMatchObject({ reason: "network", network: "blocked-port", host: "127.0.0.1", port: 1 })
    })
  )

  it.scopedLive(
    "a baseURL that is not an http(s) URL (a layer built without config's check) → config, naming the key",
    () =>
      Effect.gen(function* () {
        for (const baseURL of ["localhost:11434/v1", "ftp://host/v1", "http://"]) {
          const model = makeAiSdkModel({ name: "local/m", type: "openai-compatible", baseURL, modelId: "m" })
          const error = failure((yield* run(model.stream(request))).exit)
          expect(error).toMatchObject({ reason: "config", provider: "local" })
          expect(error.message).toContain("provider.local.baseURL")
        }
      })
  )

  it.scopedLive("our own request blocks no port: nothing listens at 1 → network, kind refused", () =>
    Effect.gen(function* () {
      const model = makeAiSdkModel({
        name: "local/m",
        type: "openai-compatible",
        baseURL: "http://127.0.0.1:1/v1",
        modelId: "m"
      })
      const error = failure((yield* run(model.stream(request))).exit)
      expect(error).toMatchObject({ reason: "network", network: "refused", host: "127.0.0.1", port: 1 })
    })
  )

  it.scopedLive.each([
    [
      "OpenAI style",
      { error: { message: "Unsupported parameter: 'max_tokens'", type: "invalid_request_error", code: "x" } },
      "Unsupported parameter: 'max_tokens'"
    ],
    [
      "Anthropic style",
      { type: "error", error: { type: "invalid_request_error", message: "messages.1.content.0: Expected `thinking`" } },
      "messages.1.content.0: Expected `thinking`"
    ],
    ["a plain-text body", "model 'qwen3' is not loaded\ntry again later", "model 'qwen3' is not loaded try again later"]
  ] as const)("a 400 with %s keeps the provider's message (providerMessage)", ([, body, expected]) =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue(Reply.error(400, { body }))
      const error = failure((yield* run(modelFor(server).stream(request))).exit)
      expect(error).toMatchObject({ reason: "http", status: 400, providerMessage: expected, provider: "local" })
      expect(describeError(error)).toBe(`400 bad request: ${expected}`)
    })
  )

  it.scopedLive("the provider's message has the key masked and is cut to one line of 300 characters", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue(
        Reply.error(401, {
          message: `Incorrect API key provided: ${apiKey}.\n${"You can find your key at … ".repeat(40)}`
        })
      )
      const error = failure((yield* run(modelFor(server).stream(request))).exit)
      expect(error.providerMessage).toMatch(/^Incorrect API key provided: \[redacted\]\. You can find/)
      expect(error.providerMessage).not.toContain("\n")
      expect(Array.from(error.providerMessage!).length).toBeLessThanOrEqual(300)
      expect(error.providerMessage!.endsWith("…")).toBe(true)
      expectNoKey(error)
    })
  )

  it.scopedLive("an error object sent inside the stream keeps its message as providerMessage", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue({
        type: "sse",
        steps: [
          { type: "chunk", chunk: Reply.chunk({ content: "a" }) },
          { type: "chunk", chunk: { error: { message: "Upstream model crashed", code: 502 } } },
          { type: "done" }
        ]
      })
      const error = failure((yield* run(modelFor(server).stream(request))).exit)
      expect(error).toMatchObject({ reason: "http", status: 502, providerMessage: "Upstream model crashed" })
    })
  )

  it.scopedLive("type openai speaks Chat Completions to its baseURL", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue(Reply.stream({ text: "hi from openai", usage: { prompt_tokens: 3, completion_tokens: 4 } }))
      const { events, exit } = yield* run(modelFor(server, { type: "openai", name: "openai/gpt-test" }).stream(request))
      expect(Exit.isSuccess(exit)).toBe(true)
      expect(events.filter((e) => e._tag === "TextDelta").map((e) => e.delta)).toEqual(["hi from openai"])
      expect(events.at(-1)).toMatchObject({ _tag: "Finish", usage: { input: 3, output: 4 } })
      expect(server.requests[0]!.url).toBe("/v1/chat/completions")
      expect(server.requests[0]!.headers.authorization).toBe(`Bearer ${apiKey}`)
    })
  )

  it.scopedLive("type anthropic posts to /v1/messages with x-api-key; the error keeps no key", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      // the server answers /v1/messages from its queue (Anthropic streams); here with an error naming the key
      server.enqueue(Reply.error(404, { message: `no model for key ${apiKey}` }))
      const model = modelFor(server, { type: "anthropic", name: "anthropic/claude-test", modelId: "claude-test" })
      const error = failure((yield* run(model.stream(request))).exit)
      expect(error.reason).toBe("http")
      expect(error.status).toBe(404)
      expect(server.requests[0]!.url).toBe("/v1/messages")
      expect(server.requests[0]!.headers["x-api-key"]).toBe(apiKey)
      expectNoKey(error)
    })
  )

  it.scopedLive("every provider path sends max_tokens: the request's limit, else the provider type's default", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      const paths: ReadonlyArray<[string, Partial<AiSdkOptions>, number]> = [
        ["openai-compatible", {}, defaultMaxOutputTokens["openai-compatible"]],
        ["openai-compatible through the SDK", { viaSdk: true }, defaultMaxOutputTokens["openai-compatible"]],
        ["openai", { type: "openai", name: "openai/gpt-test" }, defaultMaxOutputTokens.openai],
        [
          "anthropic",
          { type: "anthropic", name: "anthropic/claude-test", modelId: "claude-test" },
          defaultMaxOutputTokens.anthropic
        ]
      ]
      const sent: Array<[string, unknown, unknown]> = []
      for (const [name, options, fallback] of paths) {
        const model = modelFor(server, options)
        for (const limit of [undefined, 300]) {
          // the answer does not matter: the request body is what is checked
          server.enqueue(Reply.error(400))
          yield* run(model.stream({ ...request, maxOutputTokens: limit }))
          sent.push([name, server.requests.at(-1)!.body.max_tokens, limit ?? fallback])
        }
      }
      for (const [name, got, expected] of sent) expect([name, got]).toEqual([name, expected])
      expect(defaultMaxOutputTokens).toEqual({ anthropic: 32_000, openai: 16_384, "openai-compatible": 8_192 })
    })
  )

  it.effect("config errors: openai-compatible without baseURL, openai/anthropic without a key", () =>
    Effect.gen(function* () {
      const cases: Array<AiSdkOptions> = [
        { name: "local/m", type: "openai-compatible", modelId: "m" },
        { name: "openai/gpt", type: "openai", modelId: "gpt" },
        { name: "anthropic/claude", type: "anthropic", modelId: "claude", apiKey: "" }
      ]
      for (const options of cases) {
        const error = failure((yield* run(makeAiSdkModel(options).stream(request))).exit)
        expect(error.reason).toBe("config")
        expect(error.message).toContain(options.name.split("/")[0])
      }
    })
  )

  it.scopedLive("layerAiSdk provides Model with the configured name", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue(Reply.text("via layer"))
      const model = yield* Model.pipe(
        Effect.provide(
          layerAiSdk({ name: "local/x", type: "openai-compatible", baseURL: `${server.url}/v1`, modelId: "x" })
        )
      )
      expect(model.name).toBe("local/x")
      const { events } = yield* run(model.stream(request))
      expect(events[0]).toEqual({ _tag: "TextDelta", id: "txt-0", delta: "via layer" })
      // no key configured: no Authorization header
      expect(server.requests[0]!.headers.authorization).toBeUndefined()
    })
  )
})

/** Moves the TestClock on in steps until `fiber` is done (the stream's I/O is real, its timer is the TestClock's). */
const adjustUntilDone = <A, E>(fiber: Fiber.RuntimeFiber<A, E>, step: number) =>
  Effect.gen(function* () {
    for (let i = 0; i < 1000; i++) {
      if (Option.isSome(yield* Fiber.poll(fiber))) return yield* Fiber.join(fiber)
      yield* TestClock.adjust(step)
      // real time for the socket and the SDK's promises
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
    }
    throw new Error("the stream did not end")
  })

/**
 * The stream of `fiber` (started with `streamIdleTimeoutMs: 10_000`, its timer at 0) is still
 * waiting at 9.999 s and then cut as idle, with no event: the cut's error.
 */
const cutAfterTenSeconds = (
  fiber: Fiber.RuntimeFiber<{ events: Array<ModelEvent>; exit: Exit.Exit<void, ModelError> }>
) =>
  Effect.gen(function* () {
    // every timer was started at 0 or later: none can end before 10 s
    yield* TestClock.adjust(9_999)
    yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
    expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
    const { events, exit } = yield* adjustUntilDone(fiber, 1_000)
    expect(events).toEqual([])
    const error = failure(exit)
    expect(error.reason).toBe("stream-cut")
    expect(error.message).toBe(
      "local/test-model: no data from the provider for 10s (provider.local.streamIdleTimeoutMs)"
    )
    return error
  })

describe("layerAiSdk: a stream that stalls (TestClock)", () => {
  it("the default idle timeout is 120 s", () => {
    expect(defaultStreamIdleTimeoutMs).toBe(120_000)
  })

  it.scoped(
    "no part for streamIdleTimeoutMs → stream-cut; not a moment before; the wait for the first part counts",
    () =>
      Effect.gen(function* () {
        const server = yield* scriptedServer
        // the response's headers go out, then nothing
        server.enqueue(Reply.waitAfter(0, new Promise(() => {}), Reply.stream({ text: "never" })))
        const fiber = yield* Effect.fork(run(modelFor(server, { streamIdleTimeoutMs: 10_000 }).stream(request)))
        yield* Effect.promise(() => server.request(0))
        const error = yield* cutAfterTenSeconds(fiber)
        expect(describeError(error)).toMatch(/^stream cut: /)
        // the cut aborted the request: the server sees the connection close
        yield* Effect.promise(() => server.requests[0]!.aborted)
      })
  )

  it.scoped("a server that takes the request and never answers (no headers) is cut too, and the request aborted", () =>
    Effect.gen(function* () {
      // a socket that reads the request and never writes: the provider's fetch waits for headers
      const sockets: Array<net.Socket> = []
      const closed: Array<Promise<void>> = []
      const connected = yield* Deferred.make<void>()
      const silent = net.createServer((socket) => {
        sockets.push(socket)
        // read what comes (so the client's close is seen); write nothing
        socket.resume()
        socket.on("error", () => undefined)
        closed.push(new Promise((resolve) => socket.once("close", () => resolve())))
        Effect.runSync(Deferred.succeed(connected, undefined))
      })
      yield* Effect.acquireRelease(
        Effect.promise(() => new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", () => resolve()))),
        () =>
          Effect.promise(
            () =>
              new Promise<void>((resolve) => {
                for (const socket of sockets) socket.destroy()
                silent.close(() => resolve())
              })
          )
      )
      const { port } = silent.address() as net.AddressInfo
      const model = makeAiSdkModel({
        name: "local/test-model",
        type: "openai-compatible",
        baseURL: `http://127.0.0.1:${port}/v1`,
        modelId: "test-model",
        streamIdleTimeoutMs: 10_000
      })
      const fiber = yield* Effect.fork(run(model.stream(request)))
      yield* Deferred.await(connected)
      yield* cutAfterTenSeconds(fiber)
      // the cut aborted the request: the client closed its connection
      yield* Effect.promise(() => closed[0]!)
    })
  )

  it.scoped("the timer restarts with every part: a slow stream whose parts come in time is not cut", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      let release!: () => void
      const gate = new Promise<void>((resolve) => {
        release = resolve
      })
      // "first", then a pause the test ends, then the rest and the finish; then a second stall
      server.enqueue(Reply.waitAfter(1, gate, Reply.stream({ text: ["first", "second"] })))
      const seen: Array<{ readonly delta: string; readonly at: number }> = []
      const second = yield* Deferred.make<void>()
      const fiber = yield* modelFor(server, { streamIdleTimeoutMs: 10_000 })
        .stream(request)
        .pipe(
          Stream.runForEach((event) =>
            Effect.gen(function* () {
              if (event._tag !== "TextDelta") return
              seen.push({ delta: event.delta, at: yield* Clock.currentTimeMillis })
              if (event.delta === "second") yield* Deferred.succeed(second, undefined)
            })
          ),
          Effect.exit,
          Effect.fork
        )
      yield* Effect.promise(() => server.request(0))
      // 9 s of silence, then the next part: in time
      yield* TestClock.adjust(9_000)
      release()
      yield* Deferred.await(second)
      // 18 s since the stream started: a deadline for the whole stream would have passed
      yield* TestClock.adjust(9_000)
      const exit = yield* Fiber.join(fiber)
      expect(Exit.isSuccess(exit)).toBe(true)
      expect(seen.map((s) => s.delta)).toEqual(["first", "second"])
      expect(seen[1]!.at).toBe(9_000)
    })
  )
})

describe("providerMessage (recorded error bodies)", () => {
  const none = (s: string) => s
  // packages/anthropic/src/__fixtures__/anthropic-fallback-replay-without-beta.error.json of vercel/ai
  const anthropicFallback = JSON.stringify({
    type: "error",
    error: {
      type: "invalid_request_error",
      message:
        "messages.1.content.0: Input tag 'fallback' found using 'type' does not match any of the expected tags: 'bash_code_execution_tool_result', 'code_execution_tool_result', 'connector_text', 'container_upload', 'document', 'image', 'mid_conv_system', 'redacted_thinking', 'search_result', 'server_tool_use', 'text', 'text_editor_code_execution_tool_result', 'thinking', 'tool_result', 'tool_search_tool_result', 'tool_use', 'web_fetch_tool_result', 'web_search_tool_result'"
    },
    request_id: "req_011CffsirYGiLLcYcNXyb8wu"
  })
  // packages/anthropic/src/__fixtures__/anthropic-issue-17366-error.json of vercel/ai (before its fix)
  const anthropic17366 = JSON.stringify({
    type: "error",
    error: {
      type: "invalid_request_error",
      message:
        "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: srvtoolu_issue_17366_invalid. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
    },
    request_id: "req_011Cd65WVh8Zrvno3NunpJ73"
  })
  // packages/openai/src/chat/__fixtures__/reasoning-model-legacy-parameter-error.json of vercel/ai
  const openaiLegacy = JSON.stringify(
    {
      error: {
        message:
          "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
        type: "invalid_request_error",
        param: "max_tokens",
        code: "unsupported_parameter"
      }
    },
    null,
    2
  )

  it("Anthropic bodies: the error's message, cut to 300 characters on one line", () => {
    expect(providerMessage(anthropic17366, none)).toBe(
      "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: srvtoolu_issue_17366_invalid. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
    )
    const long = providerMessage(anthropicFallback, none)!
    expect(Array.from(long)).toHaveLength(300)
    expect(long.startsWith("messages.1.content.0: Input tag 'fallback' found using 'type' does not match")).toBe(true)
    expect(long.endsWith("…")).toBe(true)
  })

  it("OpenAI bodies (pretty-printed JSON too): the error's message", () => {
    expect(providerMessage(openaiLegacy, none)).toBe(
      "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
    )
  })

  it("other shapes: Ollama, vLLM, FastAPI, OpenRouter, an array, a code alone, plain text, HTML", () => {
    expect(providerMessage('{"error":"model \'llama9\' not found, try pulling it first"}', none)).toBe(
      "model 'llama9' not found, try pulling it first"
    )
    expect(
      providerMessage(
        '{"object":"error","message":"max_tokens is too large","type":"BadRequestError","code":400}',
        none
      )
    ).toBe("max_tokens is too large")
    expect(providerMessage('{"detail":[{"loc":["body","model"],"msg":"field required"}]}', none)).toBe("field required")
    expect(
      providerMessage(
        JSON.stringify({
          error: {
            message: "Provider returned error",
            code: 400,
            metadata: { raw: '{"error":{"message":"context too long"}}', provider_name: "Groq" }
          }
        }),
        none
      )
    ).toBe("Provider returned error (Groq: context too long)")
    expect(
      providerMessage('[{"error":{"code":400,"message":"API key not valid","status":"INVALID_ARGUMENT"}}]', none)
    ).toBe("API key not valid")
    expect(providerMessage('{"error":{"code":"content_policy_violation"}}', none)).toBe("content_policy_violation")
    expect(providerMessage("upstream connect error\n  or disconnect", none)).toBe(
      "upstream connect error or disconnect"
    )
    expect(
      providerMessage("<html><head><title>502 Bad Gateway</title></head><body><h1>502</h1></body></html>", none)
    ).toBe("502 Bad Gateway")
    expect(providerMessage("", none)).toBeUndefined()
    expect(providerMessage("{}", none)).toBeUndefined()
    expect(providerMessage("   ", none)).toBeUndefined()
  })

  it("an error object from a stream (Anthropic `event: error`, an OpenAI-style chunk)", () => {
    expect(providerMessage({ type: "overloaded_error", message: "Overloaded" }, none)).toBe("Overloaded")
    expect(providerMessage({ message: "Something broke", type: "weird" }, none)).toBe("Something broke")
    expect(providerMessage({ error: { message: "nested", code: 500 } }, none)).toBe("nested")
  })

  it("masks the key (via redact) and key-like tokens before cutting", () => {
    const key = "sk-live-0123456789abcdefghij"
    const redact = (s: string) => s.split(key).join("[redacted]")
    expect(providerMessage(JSON.stringify({ error: { message: `bad key ${key}` } }), redact)).toBe("bad key [redacted]")
    expect(providerMessage("another key sk-proj-ABCDEFGHIJKLMNOPQRSTUV was refused", none)).toBe(
      "another key [redacted] was refused"
    )
    expect(providerMessage("header Authorization: Bearer abcdefghijklmnop1234 rejected", none)).toBe(
      "header Authorization: Bearer [redacted] rejected"
    )
    // a key at the cut is masked whole, never left half visible
    const atCut = `${"x".repeat(290)} ${key}`
    const cut = providerMessage(atCut, redact)!
    expect(cut).not.toContain("sk-live")
    expect(Array.from(cut).length).toBeLessThanOrEqual(300)
  })
})

describe("networkKind and endpointOf", () => {
  const sys = (code: string, message = code) => Object.assign(new Error(message), { code })
  const wrapped = (cause: unknown) => new Error("Cannot connect to API: …", { cause })

  it("classifies the cause chain: DNS, refused (also among several addresses), a blocked port, the rest", () => {
    expect(networkKind(wrapped(sys("ENOTFOUND", "getaddrinfo ENOTFOUND x.invalid")))).toBe("dns")
    expect(networkKind(wrapped(sys("EAI_AGAIN")))).toBe("dns")
    expect(networkKind(wrapped(sys("ECONNREFUSED")))).toBe("refused")
    expect(networkKind(wrapped(new AggregateError([sys("ECONNREFUSED"), sys("ECONNREFUSED")])))).toBe("refused")
    expect(networkKind(wrapped(new Error("bad port")))).toBe("blocked-port")
    expect(networkKind(wrapped(sys("ECONNRESET")))).toBeUndefined()
    expect(networkKind(wrapped(sys("UND_ERR_SOCKET")))).toBeUndefined()
    expect(networkKind("not an error")).toBeUndefined()
  })

  it("the host and port of the baseURL, or of the SDK's default URL", () => {
    expect(endpointOf("http://localhost:11434/v1", "openai-compatible")).toEqual({ host: "localhost", port: 11434 })
    expect(endpointOf("http://[::1]/v1", "openai-compatible")).toEqual({ host: "[::1]", port: 80 })
    expect(endpointOf(undefined, "openai")).toEqual({ host: "api.openai.com", port: 443 })
    expect(endpointOf(undefined, "anthropic")).toEqual({ host: "api.anthropic.com", port: 443 })
    expect(endpointOf(undefined, "openai-compatible")).toBeUndefined()
  })
})

describe("toSdkMessages", () => {
  it("a tool call whose input was not JSON is sent back with an empty input object, never without one", () => {
    const [assistant] = toSdkMessages([
      { role: "assistant", parts: [{ type: "tool-call", callId: "c1", tool: "read", input: undefined }] }
    ])
    expect(assistant).toMatchObject({
      role: "assistant",
      content: [{ type: "tool-call", toolCallId: "c1", input: {} }]
    })
  })
})

describe("toSdkMessages: remembered by message", () => {
  const target = { type: "openai-compatible" as const, optionsKey: "local" }
  const result = (callId: string) => ({ callId, tool: "read", output: `out ${callId}`, isError: false })
  const user: ModelMessage = { role: "user", content: "hi" }
  const call: ModelMessage = {
    role: "assistant",
    parts: [
      { type: "tool-call", callId: "c1", tool: "read", input: { path: "a" } },
      { type: "tool-call", callId: "c2", tool: "read", input: { path: "b" } }
    ]
  }
  const first: ModelMessage = { role: "tool", results: [result("c1")] }
  const second: ModelMessage = { role: "tool", results: [result("c2")] }

  it("a message seen before is the same provider message; tool messages in a row still become one", () => {
    const once = toSdkMessages([user, call, first, second], target)
    const again = toSdkMessages([user, call, first, second], target)
    expect(again).toEqual(once)
    expect(again[0]).toBe(once[0])
    expect(again[1]).toBe(once[1])
    expect(once[2]).toEqual({
      role: "tool",
      content: ["c1", "c2"].map((id) => ({
        type: "tool-result",
        toolCallId: id,
        toolName: "read",
        output: { type: "text", value: `out ${id}` }
      }))
    })
    // joining them did not change what the first one is remembered as
    expect(toSdkMessages([first], target)).toEqual([
      {
        role: "tool",
        content: [
          { type: "tool-result", toolCallId: "c1", toolName: "read", output: { type: "text", value: "out c1" } }
        ]
      }
    ])
  })

  it("another target converts the message again", () => {
    const reasoning: ModelMessage = {
      role: "assistant",
      parts: [
        { type: "reasoning", text: "why" },
        { type: "text", text: "ok" }
      ]
    }
    const plain = toSdkMessages([reasoning])
    const anthropic = toSdkMessages([reasoning], { type: "anthropic", optionsKey: "anthropic" })
    expect(plain[0]!.content).toHaveLength(2)
    // unsigned reasoning is not sent back to Anthropic
    expect(anthropic[0]!.content).toEqual([{ type: "text", text: "ok" }])
    expect(toSdkMessages([reasoning])).toEqual(plain)
  })
})

describe("toSdkMessages: reasoning per target", () => {
  const signed = { anthropic: { signature: "sig" } }
  const messages = [
    {
      role: "assistant" as const,
      parts: [
        { type: "reasoning" as const, text: "plan", metadata: { ...signed, other: { secret: "x" } } },
        { type: "reasoning" as const, text: "unsigned" },
        { type: "reasoning" as const, text: "", metadata: { anthropic: { redactedData: "data" } } },
        { type: "tool-call" as const, callId: "c1", tool: "read", input: { path: "a" } }
      ]
    },
    {
      role: "assistant" as const,
      parts: [
        { type: "reasoning" as const, text: "why" },
        { type: "text" as const, text: "ok" }
      ]
    }
  ]
  const contentOf = (target: Parameters<typeof toSdkMessages>[1]) =>
    toSdkMessages(messages, target).map((m) => (m.role === "assistant" ? m.content : m.content))

  it("anthropic: only signed or redacted reasoning, with only the anthropic metadata, in place", () => {
    expect(contentOf({ type: "anthropic", optionsKey: "anthropic" })).toEqual([
      [
        { type: "reasoning", text: "plan", providerOptions: signed },
        { type: "reasoning", text: "", providerOptions: { anthropic: { redactedData: "data" } } },
        { type: "tool-call", toolCallId: "c1", toolName: "read", input: { path: "a" } }
      ],
      [{ type: "text", text: "ok" }]
    ])
  })

  it("openai-compatible: the reasoning of messages with tool calls, without other providers' metadata", () => {
    expect(contentOf({ type: "openai-compatible", optionsKey: "deepseek" })).toEqual([
      [
        { type: "reasoning", text: "plan" },
        { type: "reasoning", text: "unsigned" },
        { type: "tool-call", toolCallId: "c1", toolName: "read", input: { path: "a" } }
      ],
      [{ type: "text", text: "ok" }]
    ])
  })

  it("openai: no reasoning", () => {
    expect(contentOf({ type: "openai", optionsKey: "openai" })).toEqual([
      [{ type: "tool-call", toolCallId: "c1", toolName: "read", input: { path: "a" } }],
      [{ type: "text", text: "ok" }]
    ])
  })
})

describe("layerAiSdk (anthropic, real HTTP): thinking", () => {
  it.scopedLive("maps a thinking block's signature and a redacted block to ReasoningDelta metadata, in order", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue(
        anthropicReply([{ thinking: ["a ", "plan"], signature: "sig-1" }, { redacted: "opaque" }, { text: "done" }])
      )
      const model = makeAiSdkModel({
        name: "claude/c",
        type: "anthropic",
        baseURL: `${server.url}/v1`,
        apiKey,
        modelId: "c",
        reasoning: "low"
      })
      const { events, exit } = yield* run(model.stream(request))
      expect(Exit.isSuccess(exit)).toBe(true)
      const reasoning = events.filter((e) => e._tag === "ReasoningDelta")
      expect(reasoning.map((e) => [e.delta, e.metadata])).toEqual([
        ["a ", undefined],
        ["plan", undefined],
        ["", { anthropic: { signature: "sig-1" } }],
        ["", { anthropic: { redactedData: "opaque" } }]
      ])
      // the thinking block and the redacted one are two parts; the text comes after both
      expect(new Set(reasoning.map((e) => e.id)).size).toBe(2)
      expect(events.findIndex((e) => e._tag === "TextDelta")).toBeGreaterThan(
        events.findIndex((e) => e._tag === "ReasoningDelta" && e.metadata?.anthropic?.redactedData !== undefined)
      )
      expect(server.requests[0]!.body.thinking).toEqual({ type: "enabled", budget_tokens: 4096 })
    })
  )
})

describe("toSdkMessages: an assistant message left with nothing to send", () => {
  // a step stopped by a steered message while the model was thinking: its reasoning has no signature
  // yet (Anthropic sends it at the end of the block), and its step made no call — History sends it
  // (it is not aborted), the model layer cannot (Anthropic refuses unsigned thinking, Chat
  // Completions take no reasoning)
  const steeredMidThinking: ReadonlyArray<ModelMessage> = [
    { role: "user", content: "hi" },
    { role: "assistant", parts: [{ type: "reasoning", text: "Let me think about" }] },
    { role: "user", content: "actually, do this instead" }
  ]

  it("is left out for every target, never sent empty", () => {
    for (const target of [
      { type: "anthropic", optionsKey: "anthropic" },
      { type: "openai-compatible", optionsKey: "deepseek" },
      { type: "openai", optionsKey: "openai" }
    ] as const) {
      const sent = toSdkMessages(steeredMidThinking, target)
      expect(sent.map((m) => m.role)).toEqual(["user", "user"])
    }
  })

  it.scopedLive("Anthropic (real HTTP): no message of the request has empty content", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      server.enqueue(anthropicReply([{ text: "done" }]))
      const model = makeAiSdkModel({
        name: "claude/c",
        type: "anthropic",
        baseURL: `${server.url}/v1`,
        apiKey,
        modelId: "c",
        reasoning: "low"
      })
      const { exit } = yield* run(model.stream({ ...request, messages: steeredMidThinking }))
      expect(Exit.isSuccess(exit)).toBe(true)
      // the API answers 400 "all messages must have non-empty content except for the optional final assistant message"
      const messages = server.requests[0]!.body.messages as ReadonlyArray<{ role: string; content: unknown }>
      for (const message of messages) expect(message.content).not.toEqual([])
    })
  )
})
