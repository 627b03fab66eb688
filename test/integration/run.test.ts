/**
 * `logbook run` end to end: the built binary, real HTTP to a scripted OpenAI-compatible server,
 * a real SQLite log, real tools in a scratch workspace.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runCli } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import {
  contentText,
  fastRetry,
  jsonLines,
  latestSession,
  makeJanitor,
  makeWorkspace,
  messagesOf,
  ofType,
  readLog,
  restoreState,
  toolResult,
  types,
  unanswered,
  userConfigEnv
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

describe("logbook run: a multi-step task", () => {
  it("reads a file, runs a command, answers; every result goes back to the model", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    fs.writeFileSync(path.join(ws.dir, "a.txt"), "hello world\n")
    server.enqueue(
      Reply.stream({
        text: ["I will read ", "the file."],
        toolCalls: [{ id: "call_read", name: "read", arguments: ['{"pa', 'th": "a.t', 'xt"}'] }],
        usage: { prompt_tokens: 100, completion_tokens: 10 }
      }),
      Reply.stream({
        toolCalls: [{ id: "call_bash", name: "bash", arguments: ['{"command": ', '"cat a.txt | wc -c"}'] }],
        usage: { prompt_tokens: 200, completion_tokens: 20 }
      }),
      Reply.text("a.txt holds hello world, 12 bytes.", {
        chunks: 3,
        usage: { prompt_tokens: 300, completion_tokens: 30 }
      })
    )

    const result = await runCli([...ws.runArgs, "how", "big", "is", "a.txt?"])
    expect(result.code).toBe(0)

    // stdout is not a terminal: it holds the answer (the last step's text) and nothing else
    expect(result.stdout).toBe("a.txt holds hello world, 12 bytes.\n")
    // stderr: the text as it streamed, one line per tool call start and end, usage
    const out = result.stderr
    const positions = [
      out.indexOf("I will read the file."),
      out.indexOf("⋯ read a.txt\n"),
      out.search(/✓ read a\.txt {2}\d/),
      out.indexOf("⋯ bash cat a.txt | wc -c\n"),
      out.search(/✓ bash cat a\.txt \| wc -c {2}\d/),
      out.indexOf("a.txt holds hello world, 12 bytes.\n")
    ]
    expect(positions.every((p) => p >= 0)).toBe(true)
    expect(positions).toEqual(positions.slice().sort((a, b) => a - b))
    // 600 in, 60 out at $1 / $2 per million: $0.00072
    expect(out).toMatch(/\ntokens in 600 · out 60 · cost \$0\.0007\d* · 3 steps · [\d.]+m?s\n/)
    // no escape sequence and no carriage return where stderr is not a terminal
    expect(out).not.toContain("\r")
    expect(out).not.toContain("\u001b")

    // the model got each tool's result, and every call it made is answered
    expect(server.requests).toHaveLength(3)
    const [first, second, third] = server.requests
    expect(messagesOf(first!)).toEqual([{ role: "user", content: "how big is a.txt?" }])
    expect(contentText(toolResult(second!, "call_read"))).toContain("hello world")
    expect(contentText(toolResult(third!, "call_read"))).toContain("hello world")
    expect(contentText(toolResult(third!, "call_bash"))).toMatch(/^\s*12\n[\s\S]*Exit code: 0$/)
    for (const request of server.requests) expect(unanswered(request)).toEqual([])
    // the assistant's text of the first step went back with its call
    const assistant = messagesOf(second!).find((m) => m.role === "assistant")
    expect(contentText(assistant)).toBe("I will read the file.")
    expect(assistant?.tool_calls?.map((c) => [c.id, c.function.name])).toEqual([["call_read", "read"]])

    // the log: two tool calls completed, the turn stopped, idle at the end, usage summed
    const id = await latestSession(ws.db, ws.dir)
    // the session is named once, in the last line, with how to go on
    expect(out.endsWith(`\ncontinue this session: logbook run -s ${id} --db ${ws.db} "…"\n`)).toBe(true)
    expect(out.split(id)).toHaveLength(2)
    expect(result.stdout).not.toContain(id)
    const log = await readLog(ws.db, id)
    expect(log.map((e) => e.seq)).toEqual(log.map((_, i) => i + 1))
    expect(ofType(log, "tool.invoked").map((e) => [e.payload.callId, e.payload.tool])).toEqual([
      ["call_read", "read"],
      ["call_bash", "bash"]
    ])
    expect(ofType(log, "tool.finished").map((e) => e.payload.callId)).toEqual(["call_read", "call_bash"])
    expect(ofType(log, "tool.failed")).toEqual([])
    expect(ofType(log, "turn.finished").map((e) => e.payload.reason)).toEqual(["stop"])
    expect(log.at(-1)).toMatchObject({ type: "session.status", payload: { status: { _tag: "idle" } } })
    const steps = ofType(log, "step.finished")
    expect(steps.map((e) => e.payload.usage.input)).toEqual([100, 200, 300])
    expect(steps.every((e) => e.payload.aborted !== true)).toBe(true)

    const state = await restoreState(ws.db, id)
    expect(state.status._tag).toBe("idle")
    expect(state.chatState).toBe("idle")
    expect(state.turn).toBeNull()
    expect(state.totals).toMatchObject({ input: 600, output: 60 })
    expect(state.totals.cost).toBeCloseTo(0.00072, 10)
    expect(Array.from(state.toolParts.values()).map((p) => p.state._tag)).toEqual(["completed", "completed"])
    expect(state.title).toBe("how big is a.txt?")
    expect(state.cwd).toBe(ws.dir)
  })
})

describe("logbook run --format json", () => {
  it("prints one event per line with consecutive seqs, then the done line; the API key appears nowhere", async () => {
    const server = await janitor.server()
    const secret = "sk-test-SECRET123456789"
    const ws = makeWorkspace(server)
    // the key variable of the provider is the user's to name (a project's logbook.json may not)
    const userConfig = userConfigEnv({
      provider: { local: { type: "openai-compatible", baseURL: `${server.url}/v1`, apiKeyEnv: "TEST_SCRIPTED_KEY" } }
    })
    server.enqueue(
      // the server echoes the key in an error body: it must not reach the log either
      Reply.error(500, { message: `internal error for key ${secret}` }),
      Reply.stream({
        toolCalls: [{ id: "call_echo", name: "bash", arguments: '{"command":"echo listed"}' }],
        usage: { prompt_tokens: 50, completion_tokens: 5 }
      }),
      Reply.text("Done.", { usage: { prompt_tokens: 70, completion_tokens: 3 } })
    )

    const result = await runCli([...ws.runArgs, "--format", "json", "list it"], {
      env: { TEST_SCRIPTED_KEY: secret, ...userConfig }
    })
    expect(result.stderr).toBe("")
    expect(result.code).toBe(0)

    const lines = jsonLines(result.stdout)
    const done = lines.at(-1)!
    const events = lines.slice(0, -1)
    // the done line: the session, the answer, tokens, the cost (120 in at $1, 8 out at $2 per million), how it ended
    expect(Object.keys(done).sort()).toEqual(
      [
        "costKnown",
        "cost",
        "durationMs",
        "exitCode",
        "finishReason",
        "reason",
        "sessionId",
        "steps",
        "text",
        "type",
        "usage"
      ].sort()
    )
    expect(done).toMatchObject({
      type: "done",
      text: "Done.",
      reason: "stop",
      finishReason: "stop",
      exitCode: 0,
      steps: 2,
      costKnown: true
    })
    expect(done.usage).toMatchObject({ input: 120, output: 8, cacheRead: 0, reasoning: 0 })
    expect(done.cost).toBeCloseTo(0.000136, 10)
    expect((done.usage as { cost: number }).cost).toBe(done.cost)
    expect(typeof done.durationMs).toBe("number")
    expect(done.durationMs as number).toBeGreaterThan(0)
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1))
    expect(new Set(events.map((e) => e.sessionId))).toEqual(new Set([done.sessionId]))
    for (const event of events) {
      expect(Object.keys(event).sort()).toEqual(["at", "id", "parentId", "payload", "seq", "sessionId", "type", "v"])
    }
    expect(events[0]!.type).toBe("session.created")
    expect(events.at(-1)).toMatchObject({ type: "session.status", payload: { status: { _tag: "idle" } } })
    expect(events.map((e) => e.type)).toContain("model.retry")
    // the JSON output is the log, event for event
    const log = await readLog(ws.db, done.sessionId as string)
    expect(events).toEqual(JSON.parse(JSON.stringify(log)))

    // the key went to the server, and nowhere else
    expect(server.requests.length).toBe(3)
    for (const request of server.requests) expect(request.headers.authorization).toBe(`Bearer ${secret}`)
    const needle = "SECRET123456789"
    expect(result.stdout).not.toContain(needle)
    expect(result.stderr).not.toContain(needle)
    const dbDir = path.dirname(ws.db)
    const files = fs.readdirSync(dbDir)
    expect(files).toContain("logbook.db")
    for (const file of files) {
      expect(fs.readFileSync(path.join(dbDir, file)).includes(needle), `${file} holds the key`).toBe(false)
    }
    const shown = await runCli(["events", done.sessionId as string, "--db", ws.db, "--format", "json"])
    expect(shown.code).toBe(0)
    expect(shown.stdout).not.toContain(needle)
  })
})

describe("logbook run: the cost", () => {
  /** The workspace's provider `local` (the scripted server), with `extra` settings (models, catalog). */
  const local = (server: { readonly url: string }, extra: Record<string, unknown> = {}) => ({
    provider: { local: { type: "openai-compatible", baseURL: `${server.url}/v1`, ...extra } }
  })
  const answer = () =>
    Reply.stream({
      toolCalls: [{ id: "call_1", name: "bash", arguments: '{"command":"echo hi"}' }],
      usage: { prompt_tokens: 400, completion_tokens: 40 }
    })
  const final = () => Reply.text("Done.", { usage: { prompt_tokens: 600, completion_tokens: 60 } })

  it("a model without a price: 'unknown' in the closing line, the done line, the log and sessions show", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, { config: local(server) })
    server.enqueue(answer(), final())
    const result = await runCli([...ws.runArgs, "say hi"])
    expect(result.code).toBe(0)
    expect(result.stdout).toBe("Done.\n")
    expect(result.stderr).toMatch(/\ntokens in 1,000 · out 100 · cost unknown · 2 steps · [\d.]+m?s\n/)
    expect(result.stderr).not.toContain("$0")

    const id = await latestSession(ws.db, ws.dir)
    const steps = ofType(await readLog(ws.db, id), "step.finished")
    expect(steps.map((e) => [e.payload.usage.input, e.payload.usage.cost, e.payload.usage.costKnown])).toEqual([
      [400, 0, false],
      [600, 0, false]
    ])
    const state = await restoreState(ws.db, id)
    expect(state.totals).toMatchObject({ input: 1000, output: 100, cost: 0, costKnown: false })

    const shown = await runCli(["sessions", "show", id, "--db", ws.db])
    expect(shown.code).toBe(0)
    expect(shown.stdout).toMatch(/tokens\s+in 1,000 · out 100 · cost unknown\n/)
    expect(shown.stdout).not.toContain("$0")

    // the JSON done line carries the log's usage, costKnown included
    server.enqueue(final())
    const json = await runCli([...ws.runArgs, "--continue", "--format", "json", "again"])
    expect(json.code).toBe(0)
    const done = jsonLines(json.stdout).at(-1)!
    expect(done.usage).toMatchObject({ input: 600, output: 60, cost: 0, costKnown: false })
    expect(done).toMatchObject({ cost: 0, costKnown: false, text: "Done." })
  })

  it("a price in the config: the cost is shown; a price of 0 is $0", async () => {
    const server = await janitor.server()
    // 1,000 in at $2, 100 out at $10 per million: $0.003
    const ws = makeWorkspace(server, {
      config: local(server, { models: { scripted: { price: { input: 2, output: 10 } } } })
    })
    server.enqueue(answer(), final())
    const priced = await runCli([...ws.runArgs, "say hi"])
    expect(priced.code).toBe(0)
    expect(priced.stderr).toMatch(/\ntokens in 1,000 · out 100 · cost \$0\.0030 · 2 steps · /)
    const id = await latestSession(ws.db, ws.dir)
    const steps = ofType(await readLog(ws.db, id), "step.finished")
    expect(steps.map((e) => e.payload.usage.costKnown)).toEqual([undefined, undefined])
    expect(steps.map((e) => e.payload.usage.cost).reduce((a, b) => a + b)).toBeCloseTo(0.003, 10)

    const free = makeWorkspace(server, {
      config: local(server, { models: { scripted: { price: { input: 0, output: 0 } } } })
    })
    server.enqueue(final())
    const result = await runCli([...free.runArgs, "say hi"])
    expect(result.code).toBe(0)
    expect(result.stderr).toMatch(/^Done.\ntokens in 600 · out 60 · cost \$0 · 1 step · /)
  })

  it("a session priced in one run and not in the next: the session's cost is a lower bound", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(final())
    const first = await runCli([...ws.runArgs, "one"])
    expect(first.code).toBe(0)
    // 600 in at $1, 60 out at $2 per million: $0.00072
    expect(first.stderr).toContain("cost $0.0007")
    fs.writeFileSync(
      path.join(ws.dir, "logbook.json"),
      JSON.stringify({ model: "local/scripted", retry: fastRetry, ...local(server) })
    )
    server.enqueue(final())
    const second = await runCli([...ws.runArgs, "--continue", "two"])
    expect(second.code).toBe(0)
    expect(second.stderr).toContain("cost unknown")
    const id = await latestSession(ws.db, ws.dir)
    const shown = await runCli(["sessions", "show", id, "--db", ws.db])
    expect(shown.stdout).toMatch(/tokens\s+in 1,200 · out 120 · cost ≥ \$0\.0007 \(partly unpriced\)\n/)
  })

  it("an openai-compatible provider with `catalog`: the catalog's prices", async () => {
    const server = await janitor.server()
    // the server stands in for one that serves OpenAI's gpt-4.1 ($2 in, $8 out per million)
    const ws = makeWorkspace(server, { config: { ...local(server, { catalog: "openai" }), model: "local/gpt-4.1" } })
    server.enqueue(final())
    const result = await runCli([...ws.runArgs, "hi"])
    expect(result.code).toBe(0)
    // 600 × 2 + 60 × 8 = 1,680 micro-dollars
    expect(result.stderr).toMatch(/^Done.\ntokens in 600 · out 60 · cost \$0\.0017 · 1 step · /)
    // the catalog has no output limit and none was configured: the openai-compatible default is sent
    expect(server.requests[0]!.body.max_tokens).toBe(8192)
  })

  it("a `catalog` the model catalog does not have is a config error (exit 2), with nothing sent", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, { config: local(server, { catalog: "deepseeek" }) })
    const result = await runCli([...ws.runArgs, "hi"])
    expect(result.code).toBe(2)
    expect(result.stderr).toMatch(
      /^logbook: invalid config in file .*logbook\.json at provider\.local\.catalog: "deepseeek" is not a provider of the model catalog/
    )
    expect(server.requests).toHaveLength(0)
  })

  it("maxOutput from the config is sent as max_tokens", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, { config: local(server, { models: { scripted: { maxOutput: 1234 } } }) })
    server.enqueue(final())
    const result = await runCli([...ws.runArgs, "hi"])
    expect(result.code).toBe(0)
    expect(server.requests[0]!.body.max_tokens).toBe(1234)
  })
})

describe("logbook run: the message and the flags", () => {
  it("reads the message from stdin", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.text("From stdin, understood."))
    const result = await runCli(ws.runArgs, { input: "  summarise the project\nin one line\n" })
    expect(result.code).toBe(0)
    expect(result.stdout).toBe("From stdin, understood.\n")
    expect(messagesOf(server.requests[0]!)).toEqual([{ role: "user", content: "summarise the project\nin one line" }])
    const state = await restoreState(ws.db, await latestSession(ws.db, ws.dir))
    expect(state.title).toBe("summarise the project")
  })

  it("piped stdin with a message is context: the model gets the message, then the input in <stdin> tags", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.text("Looks good."))
    const diff = "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-hello\n+hello world\n"
    const result = await runCli([...ws.runArgs, "review", "this"], { input: diff })
    expect(result.code).toBe(0)
    expect(result.stdout).toBe("Looks good.\n")
    expect(messagesOf(server.requests[0]!)).toEqual([
      { role: "user", content: `review this\n\n<stdin>\n${diff.trimEnd()}\n</stdin>` }
    ])
    // the title is the message's, not the input's
    const state = await restoreState(ws.db, await latestSession(ws.db, ws.dir))
    expect(state.title).toBe("review this")
  })

  it("more than 1 MiB on stdin is a usage error (exit 2), with nothing sent and no session made", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const result = await runCli([...ws.runArgs, "summarise this"], { input: "x".repeat(1024 * 1024 + 1) })
    expect(result.code).toBe(2)
    expect(result.stdout).toBe("")
    expect(result.stderr).toMatch(
      /^logbook: stdin holds more than 1,048,576 bytes \(1 MiB\), the most logbook run reads: /
    )
    expect(server.requests).toHaveLength(0)
    expect(fs.existsSync(ws.db)).toBe(false)
  })

  it("an empty message is a usage error (exit 2), with nothing sent", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const none = await runCli(ws.runArgs)
    expect(none.code).toBe(2)
    expect(none.stderr).toBe("logbook: no message: the arguments and stdin are empty\n")
    const blank = await runCli([...ws.runArgs, "   "], { input: " \n\t\n" })
    expect(blank.code).toBe(2)
    expect(blank.stderr).toBe("logbook: no message: the arguments and stdin are empty\n")
    expect(blank.stdout).toBe("")
    expect(server.requests).toHaveLength(0)
  })

  it("--session with --continue is a usage error (exit 2)", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const result = await runCli([...ws.runArgs, "--session", "0195a0b0", "--continue", "hi"])
    expect(result.code).toBe(2)
    expect(result.stderr).toMatch(/^logbook: --session and --continue cannot be used together/)
    expect(server.requests).toHaveLength(0)
  })

  it("--continue with no session in the directory is a usage error (exit 2)", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const result = await runCli([...ws.runArgs, "--continue", "go on"])
    expect(result.code).toBe(2)
    expect(result.stderr).toBe(`logbook: no session in ${ws.dir} to continue; run without --continue to start one\n`)
    expect(server.requests).toHaveLength(0)
  })

  it("a model of an unknown provider is a config error (exit 2) that says what to do", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const result = await runCli([...ws.runArgs, "--model", "nope/some-model", "hi"])
    expect(result.code).toBe(2)
    expect(result.stdout).toBe("")
    const lines = result.stderr.trimEnd().split("\n")
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^logbook: .*provider "nope" is not configured/)
    expect(lines[0]).toContain('"local/…"')
    expect(server.requests).toHaveLength(0)
    const zero = await runCli([...ws.runArgs, "--max-steps", "0", "hi"])
    expect(zero.code).toBe(2)
    expect(zero.stderr).toBe("logbook: --max-steps must be 1 or more, got 0\n")
  })

  it("--max-steps 1 with a model that keeps calling tools: exit 1, turn.finished max-steps, idle", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const call = (id: string) =>
      Reply.stream({ toolCalls: [{ id, name: "bash", arguments: '{"command":"echo again"}' }] })
    server.enqueue(call("call_1"), call("call_2"), call("call_3"))
    const result = await runCli([...ws.runArgs, "--max-steps", "1", "loop"])
    expect(result.code).toBe(1)
    expect(server.requests).toHaveLength(1)
    const id = await latestSession(ws.db, ws.dir)
    expect(result.stdout).toBe("")
    expect(result.stderr).toMatch(/^⋯ bash echo again\n✓ bash echo again {2}\d+m?s\ntokens in /)
    expect(
      result.stderr.endsWith(
        `\ncontinue this session: logbook run -s ${id} --db ${ws.db} "…"\n` +
          "logbook: stopped after 1 step (maxSteps); continue the session to go on (the line above says how)\n"
      )
    ).toBe(true)
    expect(result.stderr.split(id)).toHaveLength(2)
    const log = await readLog(ws.db, id)
    expect(ofType(log, "turn.finished").map((e) => e.payload.reason)).toEqual(["max-steps"])
    expect(ofType(log, "tool.finished").map((e) => e.payload.callId)).toEqual(["call_1"])
    expect(log.at(-1)).toMatchObject({ type: "session.status", payload: { status: { _tag: "idle" } } })
    expect(types(log).filter((t) => t === "turn.started")).toHaveLength(1)
  })
})
