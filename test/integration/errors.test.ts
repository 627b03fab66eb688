/**
 * `logbook run` against a model server that fails: rate limits, server errors, a bad key, a stream
 * cut mid-way, a malformed chunk, slow chunks, and retrying until it gives up. The built binary,
 * real HTTP, the real retry policy (with short waits from the test config).
 */
import { afterEach, describe, expect, it } from "vitest"
import { runCli, spawnCli } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import {
  contentText,
  idle,
  jsonLines,
  latestSession,
  makeJanitor,
  makeWorkspace,
  messagesOf,
  notices,
  ofType,
  readLog,
  types,
  userConfigEnv
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

describe("logbook run: retried model errors", () => {
  it("429 with Retry-After: 1 waits a second, says so, then succeeds", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(
      Reply.error(429, { headers: { "retry-after": "1" }, message: "Rate limit reached" }),
      Reply.text("Answer after the wait.")
    )
    const result = await runCli([...ws.runArgs, "hello"])
    expect(notices(result.stderr)).toEqual([])
    expect(result.code).toBe(0)
    // the provider's reason follows the status
    expect(result.stderr).toMatch(/^retry 2\/8 in 1s: 429 rate limited: Rate limit reached\nAnswer after the wait\.\n/)
    expect(result.stdout).toBe("Answer after the wait.\n")

    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    const retries = ofType(log, "model.retry")
    expect(retries.map((e) => e.payload)).toEqual([
      {
        attempt: 2,
        delayMs: 1000,
        nextAt: expect.any(Number),
        message: "429 rate limited: Rate limit reached",
        status: 429
      }
    ])
    // the failed attempt is a step of its own, ended aborted; the retry is the next step
    const steps = ofType(log, "step.finished")
    expect(steps.map((e) => [e.payload.step, e.payload.aborted === true])).toEqual([
      [0, true],
      [1, false]
    ])
    const statuses = ofType(log, "session.status").map((e) => e.payload.status._tag)
    expect(statuses).toEqual(["busy", "retry", "busy", "idle"])
    expect(log.at(-1)).toMatchObject(idle)
    expect(server.requests).toHaveLength(2)
    expect(messagesOf(server.requests[1]!)).toEqual(messagesOf(server.requests[0]!))
  })

  it("retry-after-ms below the floor is raised to 500 ms", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.error(429, { headers: { "retry-after-ms": "1" } }), Reply.text("ok"))
    const result = await runCli([...ws.runArgs, "--format", "json", "hello"])
    expect(result.code).toBe(0)
    const retry = jsonLines(result.stdout).find((line) => line.type === "model.retry")
    expect(retry?.payload).toMatchObject({ attempt: 2, delayMs: 500, status: 429 })
  })

  it("500, 503 and 529 are retried with backoff, then the answer comes", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(
      Reply.error(500),
      Reply.error(503),
      Reply.error(529, { body: { type: "error", error: { type: "overloaded_error", message: "Overloaded" } } }),
      Reply.text("Finally.")
    )
    const result = await runCli([...ws.runArgs, "hello"])
    expect(notices(result.stderr)).toEqual([])
    expect(result.code).toBe(0)
    expect(result.stdout).toBe("Finally.\n")
    // the provider's words after the status; Anthropic's "Overloaded" only repeats it and is left out
    expect(result.stderr).toMatch(
      /^retry 2\/8 in [\d.]+m?s: 500 internal server error: scripted error 500\nretry 3\/8 in [\d.]+m?s: 503 service unavailable: scripted error 503\nretry 4\/8 in [\d.]+m?s: 529 overloaded\nFinally\.\n/
    )
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    const retries = ofType(log, "model.retry").map((e) => e.payload)
    expect(retries.map((p) => [p.attempt, p.status, p.message])).toEqual([
      [2, 500, "500 internal server error: scripted error 500"],
      [3, 503, "503 service unavailable: scripted error 503"],
      [4, 529, "529 overloaded"]
    ])
    // the config's backoff (1 ms, capped at 5 ms), not the defaults
    for (const p of retries) expect(p.delayMs).toBeLessThanOrEqual(5)
    expect(ofType(log, "turn.finished").map((e) => e.payload.reason)).toEqual(["stop"])
    expect(ofType(log, "model.error")).toEqual([])
    expect(log.at(-1)).toMatchObject(idle)
    expect(server.requests).toHaveLength(4)
  })

  it("gives up after retry.maxAttempts: exit 1, model.error, the reason on stderr", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, { retry: { maxAttempts: 2, initialDelayMs: 1, maxDelayMs: 5 } })
    server.enqueue(Reply.error(503), Reply.error(503), Reply.text("never sent"))
    const result = await runCli([...ws.runArgs, "hello"])
    expect(result.code).toBe(1)
    expect(notices(result.stderr)).toEqual([
      "logbook: gave up after 2 attempts: 503 service unavailable: scripted error 503"
    ])
    expect(result.stderr).toMatch(/^retry 2\/2 in [\d.]+m?s: 503 service unavailable: scripted error 503\n/)
    expect(result.stdout).toBe("")
    expect(server.requests).toHaveLength(2)
    expect(server.pending()).toBe(1)
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "model.error").map((e) => e.payload)).toEqual([
      {
        message: "gave up after 2 attempts: 503 service unavailable: scripted error 503",
        status: 503,
        retryable: true,
        providerMessage: "scripted error 503"
      }
    ])
    expect(ofType(log, "turn.finished").map((e) => e.payload.reason)).toEqual(["error"])
    expect(log.at(-1)).toMatchObject(idle)
  })
})

describe("logbook run: final model errors", () => {
  it("401 is not retried: exit 1, model.error, the message on stderr", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.error(401, { message: "Incorrect API key provided" }), Reply.text("never sent"))
    const result = await runCli([...ws.runArgs, "--format", "json", "hello"])
    expect(result.code).toBe(1)
    expect(server.requests).toHaveLength(1)
    expect(result.stderr).toMatch(
      /^logbook: 401 unauthorized \(authentication failed\), not retried: check the API key/
    )
    expect(result.stderr.trimEnd().split("\n")).toHaveLength(1)
    const lines = jsonLines(result.stdout)
    expect(lines.at(-1)).toMatchObject({ type: "done", reason: "error", exitCode: 1, steps: 0 })
    const events = lines.slice(0, -1)
    expect(events.map((e) => e.type)).not.toContain("model.retry")
    const error = events.find((e) => e.type === "model.error")
    expect(error?.payload).toMatchObject({
      status: 401,
      retryable: false,
      providerMessage: "Incorrect API key provided"
    })
    expect(result.stderr).toContain(". The provider said: Incorrect API key provided\n")
    expect(events.at(-1)).toMatchObject(idle)
    expect(
      events.filter((e) => e.type === "turn.finished").map((e) => (e.payload as { reason: string }).reason)
    ).toEqual(["error"])
  })
})

describe("logbook run: the provider's own words", () => {
  // what Anthropic answers when a thinking model's history lacks its thinking blocks
  const thinking =
    "messages.1.content.0: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is " +
    "enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of " +
    "`tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid " +
    "this requirement, disable `thinking`. Please consult our documentation at " +
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"

  it("a 400 with an Anthropic-style body: the message on stderr, in model.error and in sessions show", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(
      Reply.error(400, { body: { type: "error", error: { type: "invalid_request_error", message: thinking } } }),
      Reply.text("never sent")
    )
    const result = await runCli([...ws.runArgs, "hello"])
    expect(result.code).toBe(1)
    expect(server.requests).toHaveLength(1)
    // one line: our sentence, then the provider's words, cut to 300 characters
    const shown = `${thinking.slice(0, 299)}…`
    expect(notices(result.stderr)).toEqual([
      `logbook: 400 bad request (invalid request), not retried. The provider said: ${shown}`
    ])

    const sessionId = await latestSession(ws.db, ws.dir)
    const log = await readLog(ws.db, sessionId)
    expect(ofType(log, "model.error").map((e) => e.payload)).toEqual([
      {
        message: `400 bad request (invalid request), not retried. The provider said: ${shown}`,
        status: 400,
        retryable: false,
        providerMessage: shown
      }
    ])
    const show = await runCli(["sessions", "show", sessionId, "--db", ws.db])
    expect(show.code).toBe(0)
    expect(show.stdout).toContain("The provider said: messages.1.content.0: Expected `thinking` or `redacted_thinking`")
  })

  it("a 400 with an OpenAI-style body, --format json: the message in the model.error line and the done line", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    // the body of the ai repository's reasoning-model-legacy-parameter-error.json fixture
    const message =
      "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
    server.enqueue(
      Reply.error(400, {
        body: { error: { message, type: "invalid_request_error", param: "max_tokens", code: "unsupported_parameter" } }
      })
    )
    const result = await runCli([...ws.runArgs, "--format", "json", "hello"])
    expect(result.code).toBe(1)
    const sentence = `400 bad request (invalid request), not retried. The provider said: ${message}`
    expect(result.stderr).toBe(`logbook: ${sentence}\n`)
    const lines = jsonLines(result.stdout)
    expect(lines.find((line) => line.type === "model.error")?.payload).toEqual({
      message: sentence,
      status: 400,
      retryable: false,
      providerMessage: message
    })
    expect(lines.at(-1)).toMatchObject({ type: "done", reason: "error", message: sentence, text: "", exitCode: 1 })
  })
})

describe("logbook run: connection failures", () => {
  it("a closed port on 127.0.0.1: the fast policy (3 attempts, waits under a second), then host, port and what to check", async () => {
    // port 2: nothing listens there, and no other test's server can get it (listen(0) never hands it out);
    // the real retry defaults (8 attempts, 300 s budget), which the fast policy tightens
    const ws = makeWorkspace({ url: "http://127.0.0.1:2" } as Parameters<typeof makeWorkspace>[0], { retry: {} })
    const result = await runCli([...ws.runArgs, "hello"])
    expect(result.code).toBe(1)
    expect(notices(result.stderr)).toEqual([
      "logbook: gave up after 3 attempts: cannot connect to 127.0.0.1:2 (connection refused): is the server running? " +
        "check provider.local.baseURL"
    ])
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    const retries = ofType(log, "model.retry").map((e) => e.payload)
    expect(retries.map((p) => [p.attempt, p.message])).toEqual([
      [2, "cannot connect to 127.0.0.1:2 (connection refused)"],
      [3, "cannot connect to 127.0.0.1:2 (connection refused)"]
    ])
    // the fast policy's waits (0.25-0.5 s, 0.5-1 s), not the default backoff's
    expect(retries[0]!.delayMs).toBeLessThanOrEqual(500)
    expect(retries[1]!.delayMs).toBeLessThanOrEqual(1000)
    expect(ofType(log, "model.error").map((e) => e.payload.retryable)).toEqual([true])
    expect(ofType(log, "step.finished").map((e) => e.payload.aborted)).toEqual([true, true, true])
    expect(log.at(-1)).toMatchObject(idle)
  })

  it("a host that does not resolve (under .invalid): the fast policy, then the host and what to check", async () => {
    // a remote provider must come from the user's own config (a project file may only point at this machine)
    const env = userConfigEnv({
      provider: { remote: { type: "openai-compatible", baseURL: "http://logbook-test.invalid/v1" } }
    })
    const ws = makeWorkspace({ url: "http://127.0.0.1:2" } as Parameters<typeof makeWorkspace>[0], {
      config: { model: "remote/m" }
    })
    const result = await runCli([...ws.runArgs, "hello"], { env })
    expect(result.code).toBe(1)
    expect(notices(result.stderr)).toEqual([
      "logbook: gave up after 3 attempts: the host logbook-test.invalid does not resolve: check provider.remote.baseURL " +
        "and your network"
    ])
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "model.retry").map((e) => e.payload.message)).toEqual([
      "the host logbook-test.invalid does not resolve",
      "the host logbook-test.invalid does not resolve"
    ])
    expect(log.at(-1)).toMatchObject(idle)
  })
})

describe("logbook run: broken streams", () => {
  it("a stream that stalls past provider.<id>.streamIdleTimeoutMs is cut and retried; the retry completes the turn", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, {
      config: {
        provider: {
          local: { type: "openai-compatible", baseURL: `${server.url}/v1`, streamIdleTimeoutMs: 1000 }
        }
      }
    })
    let release!: () => void
    const never = new Promise<void>((resolve) => {
      release = resolve
    })
    janitor.defer(release)
    // role+"Stalled ", then nothing (until the client goes away)
    server.enqueue(
      Reply.waitAfter(1, never, Reply.stream({ text: ["Stalled ", "never sent"] })),
      Reply.text("Complete answer.")
    )
    const result = await runCli([...ws.runArgs, "hello"])
    expect(notices(result.stderr)).toEqual([])
    expect(result.code).toBe(0)
    expect(result.stderr).toMatch(/^Stalled \n\(the response was cut off\)\nretry 2\/8 in [\d.]+m?s: stream cut: /)
    expect(result.stderr).toContain("\nComplete answer.\n")
    expect(result.stdout).toBe("Complete answer.\n")
    expect(server.requests).toHaveLength(2)
    // the cut closed the first connection
    await server.requests[0]!.aborted

    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "model.retry").map((e) => e.payload.message)).toEqual([
      "stream cut: local/scripted: no data from the provider for 1s (provider.local.streamIdleTimeoutMs)"
    ])
    expect(ofType(log, "step.finished").map((e) => [e.payload.step, e.payload.aborted === true])).toEqual([
      [0, true],
      [1, false]
    ])
    expect(ofType(log, "turn.finished").map((e) => e.payload.reason)).toEqual(["stop"])
    expect(log.at(-1)).toMatchObject(idle)
  })

  it("a stream cut mid-way: the step ends aborted, is retried, and the partial text is not sent again", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(
      // role+"Partial ", "answer " are written, then the socket is destroyed
      Reply.cutAfter(2, Reply.stream({ text: ["Partial ", "answer ", "that never ends"] })),
      Reply.text("Complete answer.")
    )
    const result = await runCli([...ws.runArgs, "hello"])
    expect(notices(result.stderr)).toEqual([])
    expect(result.code).toBe(0)
    expect(result.stderr).toMatch(/^Partial answer \n\(the response was cut off\)\nretry 2\/8 in [\d.]+m?s: stream cut/)
    expect(result.stderr).toContain("\nComplete answer.\n")
    // the cut text of the retried step is not part of the answer
    expect(result.stdout).toBe("Complete answer.\n")

    expect(server.requests).toHaveLength(2)
    const resent = JSON.stringify(server.requests[1]!.body.messages)
    expect(resent).not.toContain("Partial")
    expect(messagesOf(server.requests[1]!)).toEqual([{ role: "user", content: "hello" }])

    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    const steps = ofType(log, "step.finished")
    expect(steps.map((e) => [e.payload.step, e.payload.aborted === true])).toEqual([
      [0, true],
      [1, false]
    ])
    expect(ofType(log, "model.retry")).toHaveLength(1)
    expect(ofType(log, "model.retry")[0]!.payload.message).toMatch(/^stream cut/)
    // the cut step's deltas stay in the log (it is append-only), tied to step 0
    const deltas = ofType(log, "text.delta")
      .map((e) => e.payload.delta)
      .join("")
    expect(deltas).toBe("Partial answer Complete answer.")
    expect(log.at(-1)).toMatchObject(idle)
  })

  it("a malformed chunk is an invalid response: not retried, exit 1, and the session ends idle", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.malformedAfter(1, Reply.stream({ text: ["Before ", "after"] })), Reply.text("never sent"))
    const result = await runCli([...ws.runArgs, "hello"])
    expect(result.code).toBe(1)
    expect(server.requests).toHaveLength(1)
    expect(notices(result.stderr)).toEqual([expect.stringMatching(/^logbook: invalid response: .*not retried/)])
    // the error is said once, after the cut response and the usage line
    expect(result.stderr).toMatch(
      /^Before \n\(the response was cut off\)\ntokens in .*\n(.*\n)?logbook: invalid response: /
    )
    expect(result.stderr.match(/invalid response/g)).toHaveLength(1)
    // a turn that did not finish has no answer
    expect(result.stdout).toBe("")
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "model.retry")).toEqual([])
    expect(ofType(log, "model.error").map((e) => e.payload.retryable)).toEqual([false])
    expect(ofType(log, "step.finished").map((e) => e.payload.aborted)).toEqual([true])
    expect(ofType(log, "turn.finished").map((e) => e.payload.reason)).toEqual(["error"])
    expect(log.at(-1)).toMatchObject(idle)
  })

  it("slow chunks: the first deltas are committed and printed while the stream waits, then it completes", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    let release!: () => void
    const gate = new Promise<void>((resolve) => {
      release = resolve
    })
    janitor.defer(release)
    server.enqueue(Reply.waitAfter(2, gate, Reply.stream({ text: ["First ", "half, ", "second half."] })))
    const live = spawnCli([...ws.runArgs, "--format", "json", "hello"])
    janitor.defer(() => live.child.kill("SIGKILL"))

    // wait until the deltas before the wait are out (one JSON line per event: find them)
    const deltaText = (lines: ReadonlyArray<string>) =>
      lines
        .map((line) => JSON.parse(line) as { type: string; payload: { delta?: string } })
        .filter((e) => e.type === "text.delta")
        .map((e) => e.payload.delta)
        .join("")
    for (let n = 1; ; n++) {
      const lines = await live.waitForLines(n)
      if (deltaText(lines) === "First half, ") break
    }
    expect(live.lines().some((line) => line.includes('"type":"step.finished"'))).toBe(false)
    release()

    const exit = await live.exited
    expect(live.stderr()).toBe("")
    expect(exit.code).toBe(0)
    const lines = live.lines()
    expect(deltaText(lines.slice(0, -1))).toBe("First half, second half.")
    expect(JSON.parse(lines.at(-1)!)).toMatchObject({ type: "done", reason: "stop", exitCode: 0 })
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(types(log)).not.toContain("model.retry")
    expect(log.at(-1)).toMatchObject(idle)
    expect(contentText(messagesOf(server.requests[0]!)[0])).toBe("hello")
  })
})
