/**
 * `logbook run` stopped while a command runs: Ctrl-C (SIGINT) and kill -9, then `--continue`.
 * The built binary, real HTTP, real shells; the test waits on files the commands write and on
 * events in the SQLite log, never on the clock.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runCli, spawnCli } from "../support/cli.js"
import { groupOf, hostPid } from "../support/pids.js"
import { Reply } from "../support/scriptedServer.js"
import {
  contentText,
  fileLines,
  idle,
  isLive,
  latestSession,
  makeJanitor,
  makeWorkspace,
  messagesOf,
  notices,
  ofType,
  readLog,
  restoreState,
  toolResult,
  unanswered,
  until
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

/** Kills the process group whose leader's pid the command wrote to `file`, at cleanup. */
describe("logbook run: Ctrl-C during a long command", () => {
  it("exits 130, kills every process the command started, records the interrupt, and --continue goes on", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const pidsFile = path.join(ws.dir, "pids")
    const shellFile = path.join(ws.dir, "shell.pid")
    janitor.killGroupIn(shellFile)
    const command = "echo $$ > shell.pid; sleep 300 & echo $! > pids; sleep 300 & echo $! >> pids; wait"
    server.enqueue(
      Reply.stream({
        text: "Starting the workers.",
        toolCalls: [{ id: "call_long", name: "bash", arguments: JSON.stringify({ command }) }]
      })
    )

    const live = spawnCli([...ws.runArgs, "start", "the", "workers"])
    janitor.defer(() => live.child.kill("SIGKILL"))
    // the pids the command wrote are its own (the sandbox's); these are the host's
    const pids = (await fileLines(pidsFile, 2)).map((pid) => hostPid(Number(pid), ws.dir))
    const shell = hostPid(Number(fs.readFileSync(shellFile, "utf8").trim()), ws.dir)
    expect(pids.every((pid) => isLive(pid))).toBe(true)
    expect(isLive(shell)).toBe(true)

    live.child.kill("SIGINT")
    const exit = await live.exited
    expect(exit.code).toBe(130)

    // nothing the command started is left running (a reaped pid is gone; an orphan init does not reap is a zombie)
    for (const pid of [shell, ...pids]) expect(isLive(pid), `process ${pid}`).toBe(false)

    const id = await latestSession(ws.db, ws.dir)
    expect(notices(live.stderr())).toEqual(["logbook: interrupting: stopping the model and any running commands…"])
    // the session is named once, at the end, with how to go on
    expect(live.stderr()).toMatch(/\ntokens in .*\ncontinue this session: logbook run -s \S+ --db \S+ "…"\n$/)
    expect(live.stderr().split(id)).toHaveLength(2)
    // a turn that did not finish has no answer: stdout stays empty; the transcript is on stderr
    expect(live.lines()).toEqual([])
    const out = live.stderr()
    expect(out).toContain("Starting the workers.\n⋯ bash echo $$ > shell.pid; sleep 300 &")
    expect(out).toMatch(/✗ bash echo \$\$ > shell\.pid.* {2}interrupted \(user\)/)

    const log = await readLog(ws.db, id)
    expect(ofType(log, "tool.failed").map((e) => e.payload)).toEqual([
      {
        callId: "call_long",
        error: expect.stringContaining("interrupted"),
        interrupted: true,
        reason: "user",
        // the stopped command's record
        metadata: expect.objectContaining({
          exitCode: 143,
          signal: "SIGTERM",
          command: expect.stringContaining("sleep 300")
        })
      }
    ])
    expect(ofType(log, "turn.interrupted").map((e) => e.payload.reason)).toEqual(["user"])
    expect(ofType(log, "turn.finished")).toEqual([])
    expect(log.at(-1)).toMatchObject(idle)
    const state = await restoreState(ws.db, id)
    expect(state.status._tag).toBe("idle")
    expect(state.turn).toBeNull()
    expect(state.toolParts.get("call_long" as never)?.state._tag).toBe("error")

    // --continue: the interrupted call goes back to the model as an error result
    server.enqueue(Reply.text("The workers were stopped; going on."))
    const next = await runCli([...ws.runArgs, "--continue", "go on"])
    expect(notices(next.stderr)).toEqual([])
    expect(next.code).toBe(0)
    expect(next.stdout).toBe("The workers were stopped; going on.\n")
    expect(server.requests).toHaveLength(2)
    const request = server.requests[1]!
    expect(unanswered(request)).toEqual([])
    const result = toolResult(request, "call_long")
    expect(result).toBeDefined()
    expect(contentText(result)).toMatch(/interrupted/)
    const messages = messagesOf(request)
    expect(messages[0]).toEqual({ role: "user", content: "start the workers" })
    expect(messages.at(-1)).toEqual({ role: "user", content: "go on" })
    expect(await latestSession(ws.db, ws.dir)).toBe(id)
    const after = await readLog(ws.db, id)
    expect(ofType(after, "turn.finished").map((e) => e.payload.reason)).toEqual(["stop"])
    expect(after.at(-1)).toMatchObject(idle)
  })
})

describe("logbook run --format json: Ctrl-C during a command", () => {
  it("the done line says interrupted, exit 130, with the session, the text so far and the usage", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const shellFile = path.join(ws.dir, "shell.pid")
    janitor.killGroupIn(shellFile)
    server.enqueue(
      Reply.stream({
        text: "Waiting a while.",
        toolCalls: [
          { id: "call_wait", name: "bash", arguments: JSON.stringify({ command: "echo $$ > shell.pid; sleep 300" }) }
        ],
        usage: { prompt_tokens: 40, completion_tokens: 4 }
      })
    )
    const live = spawnCli([...ws.runArgs, "--format", "json", "wait"])
    janitor.defer(() => live.child.kill("SIGKILL"))
    await fileLines(shellFile, 1)
    live.child.kill("SIGINT")
    expect((await live.exited).code).toBe(130)
    const id = await latestSession(ws.db, ws.dir)
    const done = JSON.parse(live.lines().at(-1)!)
    expect(done).toMatchObject({
      type: "done",
      sessionId: id,
      reason: "interrupted",
      text: "Waiting a while.",
      steps: 1,
      costKnown: true,
      exitCode: 130
    })
    expect(done.usage).toMatchObject({ input: 40, output: 4 })
    // no session line in json (the done line has the id): the notice says how to go on
    expect(live.stderr()).toBe(
      "logbook: interrupting: stopping the model and any running commands…\n" +
        `logbook: interrupted; resume with: logbook run -s ${id} --db ${ws.db} "…"\n`
    )
    expect(typeof done.cost).toBe("number")
    expect(typeof done.durationMs).toBe("number")
  })
})

describe("logbook run: kill -9 during a command", () => {
  it("--continue sweeps what the dead process left open and answers every earlier call", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    fs.writeFileSync(path.join(ws.dir, "notes.txt"), "remember the milk\n")
    const shellFile = path.join(ws.dir, "shell.pid")
    janitor.killGroupIn(shellFile)
    server.enqueue(
      Reply.stream({
        toolCalls: [
          { id: "call_read", name: "read", arguments: '{"path":"notes.txt"}' },
          { id: "call_sleep", name: "bash", arguments: JSON.stringify({ command: "echo $$ > shell.pid; sleep 300" }) }
        ]
      })
    )

    const live = spawnCli([...ws.runArgs, "read the notes and wait"])
    janitor.defer(() => live.child.kill("SIGKILL"))
    await fileLines(shellFile, 1)
    const id = await latestSession(ws.db, ws.dir)
    // the read has finished and the command is running (its tool.invoked is written ahead), and its
    // process group is recorded (written once the shell exists, racing the shell's own pid file)
    await until("call_read finished, call_sleep invoked and its group recorded", async () => {
      const log = await readLog(ws.db, id)
      const finished = ofType(log, "tool.finished").some((e) => e.payload.callId === "call_read")
      const invoked = ofType(log, "tool.invoked").some((e) => e.payload.callId === "call_sleep")
      const recorded = ofType(log, "tool.process").some((e) => e.payload.callId === "call_sleep")
      return finished && invoked && recorded ? true : undefined
    })

    live.child.kill("SIGKILL")
    const exit = await live.exited
    expect(exit.signal).toBe("SIGKILL")
    const shell = hostPid(Number(fs.readFileSync(shellFile, "utf8").trim()), ws.dir)
    // SIGKILL runs no finalizer: the command runs in a process group of its own, which outlives
    // logbook — until the next run opens the session (below)
    expect(isLive(shell)).toBe(true)
    // the group was recorded (tool.process) once the command started
    const recorded = ofType(await readLog(ws.db, id), "tool.process")
    expect(recorded.map((e) => [e.payload.callId, e.payload.pgid])).toEqual([["call_sleep", groupOf(shell)]])

    const before = await readLog(ws.db, id)
    expect(before.at(-1)?.type).not.toBe("session.status") // the dead process left the turn open
    const calls = ["call_read", "call_sleep"]

    server.enqueue(Reply.text("The command was cut short by a crash."))
    const next = await runCli([...ws.runArgs, "--continue", "what happened?"])
    // the orphaned command is stopped before the session goes on, and the user is told
    expect(notices(next.stderr)).toEqual([
      "logbook: stopping commands the session's last run left running when it died…"
    ])
    expect(next.code).toBe(0)
    expect(next.stdout).toBe("The command was cut short by a crash.\n")
    // the sweep's events are part of this run's output
    // the crash-repair line names the tool and its input, as the run that started it did
    expect(next.stderr).toMatch(/\n✗ bash echo \$\$ > shell\.pid; sleep 300 {2}interrupted \(crash\)\n/)
    // opening the session stopped what the dead process left running
    expect(isLive(shell)).toBe(false)

    // the model got a result for every call of the first step
    expect(server.requests).toHaveLength(2)
    const request = server.requests[1]!
    const assistant = messagesOf(request).find((m) => m.role === "assistant")
    expect(assistant?.tool_calls?.map((c) => c.id)).toEqual(calls)
    expect(unanswered(request)).toEqual([])
    expect(contentText(toolResult(request, "call_read"))).toContain("remember the milk")
    expect(contentText(toolResult(request, "call_sleep"))).toMatch(
      /\(crash\); its outcome is unknown\. Its command was still running and was stopped\./
    )
    expect(messagesOf(request).at(-1)).toEqual({ role: "user", content: "what happened?" })

    // the sweep: the running call failed (crash), the turn interrupted (crash), then the new turn
    const log = await readLog(ws.db, id)
    const swept = log.slice(before.length)
    expect(ofType(swept, "tool.failed").map((e) => e.payload)).toEqual([
      { callId: "call_sleep", error: expect.stringContaining("crash"), interrupted: true, reason: "crash" }
    ])
    expect(ofType(swept, "turn.interrupted").map((e) => e.payload.reason)).toEqual(["crash"])
    const sweptTypes = swept.map((e) => e.type)
    expect(sweptTypes.indexOf("turn.interrupted")).toBeLessThan(sweptTypes.indexOf("user.message"))
    expect(ofType(swept, "turn.finished").map((e) => e.payload.reason)).toEqual(["stop"])
    expect(log.at(-1)).toMatchObject(idle)
    expect(log.map((e) => e.seq)).toEqual(log.map((_, i) => i + 1))
  })
})
