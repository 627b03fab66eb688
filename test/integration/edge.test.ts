/**
 * `logbook run` at the edges: interrupts while the model streams or while a retry waits, a
 * command that ignores SIGTERM, a second process on a busy session, a stream cut inside a tool
 * call, a Retry-After past the ceiling, an unreachable server. The built binary and real HTTP.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runCli, spawnCli } from "../support/cli.js"
import { hostPid } from "../support/pids.js"
import { Reply } from "../support/scriptedServer.js"
import {
  contentText,
  fileLines,
  idle,
  isLive,
  keyedProviderEnv,
  latestSession,
  makeJanitor,
  makeWorkspace,
  messagesOf,
  notices,
  ofType,
  readLog,
  toolResult,
  unanswered,
  until
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

/** A promise the test resolves (resolved at cleanup whatever happens). */
const makeGate = () => {
  let open!: () => void
  const promise = new Promise<void>((resolve) => {
    open = resolve
  })
  janitor.defer(open)
  return { promise, open }
}

/**
 * `logbook run` whose model calls bash with a command that ignores SIGTERM (a shell that records its
 * pid and a background sleep); resolves once both run. The group is killed at cleanup whatever
 * happens.
 */
const runStubbornCommand = async (callId: string) => {
  const server = await janitor.server()
  const ws = makeWorkspace(server)
  const shellFile = path.join(ws.dir, "shell.pid")
  janitor.killGroupIn(shellFile)
  const command = `trap "" TERM; echo $$ > shell.pid; sleep 300 & echo $! > pids; wait`
  server.enqueue(Reply.stream({ toolCalls: [{ id: callId, name: "bash", arguments: JSON.stringify({ command }) }] }))
  const live = spawnCli([...ws.runArgs, "run it"])
  janitor.defer(() => live.child.kill("SIGKILL"))
  // the pids the command wrote are its own (the sandbox's); these are the host's
  const [sleeper] = (await fileLines(path.join(ws.dir, "pids"), 1)).map((pid) => hostPid(Number(pid), ws.dir))
  const shell = hostPid(Number((await fileLines(shellFile, 1))[0]), ws.dir)
  return { ws, live, sleeper: sleeper!, shell, command }
}

describe("logbook run: interrupted outside a tool", () => {
  it("Ctrl-C while the model streams: exit 130, the step ends aborted, idle; --continue leaves the partial text out", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const gate = makeGate()
    server.enqueue(Reply.waitAfter(2, gate.promise, Reply.stream({ text: ["Half an ", "answer ", "and the rest"] })))
    const live = spawnCli([...ws.runArgs, "--format", "json", "explain"])
    janitor.defer(() => live.child.kill("SIGKILL"))
    // wait for the deltas written before the server holds the stream
    await until("the partial text", () => {
      const text = live
        .lines()
        .map((line) => JSON.parse(line) as { type: string; payload: { delta?: string } })
        .filter((e) => e.type === "text.delta")
        .map((e) => e.payload.delta)
        .join("")
      return text === "Half an answer " ? true : undefined
    })
    live.child.kill("SIGINT")
    const exit = await live.exited
    expect(exit.code).toBe(130)
    await server.requests[0]!.aborted
    const lines = live.lines().map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(lines.at(-1)).toMatchObject({ type: "done", reason: "interrupted", exitCode: 130 })

    const id = await latestSession(ws.db, ws.dir)
    const log = await readLog(ws.db, id)
    expect(ofType(log, "step.finished").map((e) => [e.payload.aborted, e.payload.finishReason])).toEqual([
      [true, "user"]
    ])
    expect(ofType(log, "turn.interrupted").map((e) => e.payload.reason)).toEqual(["user"])
    expect(log.at(-1)).toMatchObject(idle)

    server.enqueue(Reply.text("A whole answer."))
    const next = await runCli([...ws.runArgs, "--continue", "again please"])
    expect(next.code).toBe(0)
    expect(JSON.stringify(server.requests[1]!.body.messages)).not.toContain("Half an")
    expect(messagesOf(server.requests[1]!)).toEqual([
      { role: "user", content: "explain" },
      { role: "user", content: "again please" }
    ])
  })

  it("Ctrl-C during a retry wait: exit 130 and the session ends idle, not waiting to retry", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.error(429, { headers: { "retry-after": "50" } }), Reply.text("never sent"))
    const live = spawnCli([...ws.runArgs, "--format", "json", "hello"])
    janitor.defer(() => live.child.kill("SIGKILL"))
    await until("the model.retry event", () =>
      live.lines().some((line) => line.includes('"type":"model.retry"')) ? true : undefined
    )
    live.child.kill("SIGINT")
    const exit = await live.exited
    expect(exit.code).toBe(130)
    expect(server.requests).toHaveLength(1)
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    const statuses = ofType(log, "session.status").map((e) => e.payload.status._tag)
    expect(statuses.slice(-2)).toEqual(["retry", "idle"])
    expect(ofType(log, "turn.interrupted").map((e) => e.payload.reason)).toEqual(["user"])
    expect(log.at(-1)).toMatchObject(idle)
  })

  it("SIGTERM during a command that ignores SIGTERM: its group is killed anyway, exit 130", async () => {
    const { ws, live, sleeper, shell } = await runStubbornCommand("call_stubborn")
    live.child.kill("SIGTERM")
    const exit = await live.exited
    expect(exit.code).toBe(130)
    expect(isLive(shell)).toBe(false)
    expect(isLive(sleeper!)).toBe(false)
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "tool.failed").map((e) => [e.payload.callId, e.payload.interrupted])).toEqual([
      ["call_stubborn", true]
    ])
    expect(log.at(-1)).toMatchObject(idle)
  })
})

describe("logbook run: the interrupted call is recorded after its command is stopped", () => {
  // The tool runs inside a race with its timeout; an interrupt of the turn does not wait for the
  // race's fibers, so Actions waits for the execution's end (its finalizers: the process group
  // killed) before it appends `tool.failed {interrupted}`.
  it("Ctrl-C: tool.failed is committed only once the command's processes are gone", async () => {
    // the shell and its child ignore SIGTERM: stopping them takes the SIGKILL after the grace period
    const { ws, live, sleeper, command } = await runStubbornCommand("call_slow_stop")
    const id = await latestSession(ws.db, ws.dir)
    live.child.kill("SIGINT")
    // watch the log until logbook exits: whenever tool.failed is there, the command must be gone
    let recordedWhileRunning = false
    while (live.child.exitCode === null && live.child.signalCode === null) {
      const log = await readLog(ws.db, id)
      if (ofType(log, "tool.failed").length > 0 && isLive(sleeper!)) recordedWhileRunning = true
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    expect((await live.exited).code).toBe(130)
    expect(isLive(sleeper!)).toBe(false)
    expect(recordedWhileRunning).toBe(false)
    // the command's record is in the interrupted call's tool.failed: it ignored SIGTERM, so SIGKILL (128 + 9)
    const failed = ofType(await readLog(ws.db, id), "tool.failed")
    expect(failed.map((e) => [e.payload.interrupted, e.payload.reason])).toEqual([[true, "user"]])
    expect(failed[0]!.payload.metadata).toMatchObject({ command, exitCode: 137, signal: "SIGKILL" })
  })
})

describe("logbook run: one session, one driver", () => {
  it("a second run on a session another process is driving fails (exit 1) and leaves it alone", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const gate = makeGate()
    server.enqueue(Reply.waitAfter(1, gate.promise, Reply.text("First run's answer.")))
    const first = spawnCli([...ws.runArgs, "--format", "json", "first"])
    janitor.defer(() => first.child.kill("SIGKILL"))
    await server.request(0)

    const second = await runCli([...ws.runArgs, "--continue", "second"])
    expect(second.code).toBe(1)
    expect(second.stderr).toMatch(/^logbook: session \S+ is being driven by another logbook process/)
    expect(server.requests).toHaveLength(1)

    gate.open()
    const exit = await first.exited
    expect(exit.code).toBe(0)
    const lines = first.lines().map((line) => JSON.parse(line) as { type: string; seq?: number })
    expect(lines.at(-1)).toMatchObject({ type: "done", exitCode: 0 })
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    // the second process appended nothing: every event is the first run's
    expect(log.map((e) => e.seq)).toEqual(lines.slice(0, -1).map((e) => e.seq))
    expect(ofType(log, "user.message").map((e) => e.payload.text)).toEqual(["first"])
    expect(log.at(-1)).toMatchObject(idle)
  })
})

describe("logbook run: more model failures", () => {
  it("a stream cut inside a tool call's arguments: retried, the tool runs once, every call answered", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const call = { id: "call_touch", name: "bash", arguments: ['{"command":', ' "echo run >> runs.txt"}'] }
    server.enqueue(
      // the call's first argument chunk arrives, then the connection breaks
      Reply.cutAfter(1, Reply.stream({ toolCalls: [call] })),
      Reply.stream({ toolCalls: [call] }),
      Reply.text("Touched once.")
    )
    const result = await runCli([...ws.runArgs, "touch it"])
    expect(notices(result.stderr)).toEqual([])
    expect(result.code).toBe(0)
    expect(fs.readFileSync(path.join(ws.dir, "runs.txt"), "utf8")).toBe("run\n")
    expect(server.requests).toHaveLength(3)
    for (const request of server.requests) expect(unanswered(request)).toEqual([])
    // the cut attempt's call never ran and is not in the history; the retried one is, with its result
    const last = messagesOf(server.requests[2]!)
    const calls = last.flatMap((m) => m.tool_calls ?? [])
    expect(calls).toHaveLength(1)
    expect(contentText(toolResult(server.requests[2]!, calls[0]!.id))).toMatch(/Exit code: 0/)
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "tool.invoked")).toHaveLength(1)
    expect(ofType(log, "tool.failed").map((e) => [e.payload.interrupted, e.payload.reason])).toEqual([
      [true, "stream-failed"]
    ])
    expect(log.at(-1)).toMatchObject(idle)
  })

  it("a Retry-After past retry.maxRetryAfterMs fails at once, naming the wait", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.error(429, { headers: { "retry-after": "120" } }), Reply.text("never sent"))
    const result = await runCli([...ws.runArgs, "hello"])
    expect(result.code).toBe(1)
    expect(notices(result.stderr)).toEqual([
      "logbook: the provider asked to wait 120s, more than retry.maxRetryAfterMs (60s): 429 rate limited: scripted error 429"
    ])
    expect(server.requests).toHaveLength(1)
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "model.retry")).toEqual([])
    expect(ofType(log, "model.error").map((e) => e.payload.status)).toEqual([429])
    expect(log.at(-1)).toMatchObject(idle)
  })

  it("a port fetch never connects to (1), for an openai provider (the SDK's fetch): not retried, exit 1, the sentence says what to do", async () => {
    // port 1 is on the fetch standard's list of blocked ports: undici fails with "bad port" before connecting
    const server = { url: "http://127.0.0.1:1" } as Parameters<typeof makeWorkspace>[0]
    const model = "remote/gpt"
    const ws = makeWorkspace(server, { retry: { maxAttempts: 2, initialDelayMs: 1, maxDelayMs: 5 }, config: { model } })
    const env = keyedProviderEnv(server, model, { type: "openai" }, "sk-test-port-0123456789abcdef")
    const result = await runCli([...ws.runArgs, "hello"], { env })
    expect(result.code).toBe(1)
    expect(notices(result.stderr)).toEqual([
      "logbook: cannot connect to 127.0.0.1:1 (blocked port), not retried: fetch never connects to port 1 (it is on " +
        "the fetch standard's list of blocked ports); run the server on another port and change provider.remote.baseURL"
    ])
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "model.retry")).toEqual([])
    expect(ofType(log, "model.error").map((e) => e.payload.retryable)).toEqual([false])
    expect(log.at(-1)).toMatchObject(idle)
  })

  it("an openai-compatible provider at port 1 (our own request blocks no port): connection refused, as at any port", async () => {
    const server = { url: "http://127.0.0.1:1" } as Parameters<typeof makeWorkspace>[0]
    const ws = makeWorkspace(server, { retry: { maxAttempts: 2, initialDelayMs: 1, maxDelayMs: 5 } })
    const result = await runCli([...ws.runArgs, "hello"])
    expect(result.code).toBe(1)
    expect(notices(result.stderr).join("\n")).toContain("cannot connect to 127.0.0.1:1 (connection refused)")
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "model.error").length).toBeGreaterThan(0)
    expect(log.at(-1)).toMatchObject(idle)
  })
})
