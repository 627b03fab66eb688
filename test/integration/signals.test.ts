/**
 * Signals through the built binary (issue 12 §1): SIGHUP (the terminal closed) and SIGTERM stop a
 * run like Ctrl-C does — the running command stopped, every open part ended, the session idle —
 * with their own reasons (`hangup`, `shutdown`); a second signal during the cleanup does not cut it
 * short; a third forces the exit after killing the commands' process groups, and the next run
 * repairs the session.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { groupAlive } from "../../src/tools/processGroup.js"
import { runCli, scratchDir, spawnCli } from "../support/cli.js"
import { groupOf, hostPid } from "../support/pids.js"
import { Reply } from "../support/scriptedServer.js"
import {
  bashReply,
  fileLines,
  latestSession,
  makeJanitor,
  makeWorkspace,
  ofType,
  readLog,
  until,
  writableEnv
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

/** A run whose command writes its shell's pid to a file, then runs `rest`; resolves once it runs. */
const runningCommand = async (rest: string) => {
  const server = await janitor.server()
  const ws = makeWorkspace(server)
  const pidFile = path.join(scratchDir(), "shell.pid")
  // outside the workspace: the user's config lets the sandboxed command write there
  const env = writableEnv(path.dirname(pidFile))
  janitor.killGroupIn(pidFile, ws.dir)
  server.enqueue(bashReply("call_run", `echo $$ > ${pidFile}; ${rest}`), Reply.text("after"))
  const live = spawnCli([...ws.runArgs, "run it"], { env })
  janitor.defer(() => live.child.kill("SIGKILL"))
  // the shell's pid as the sandbox numbers it; its group as the host does
  const pgid = groupOf(hostPid(Number((await fileLines(pidFile, 1))[0]), ws.dir))!
  const session = await latestSession(ws.db, ws.dir)
  await until("the command's group recorded", async () =>
    ofType(await readLog(ws.db, session), "tool.process").length === 1 ? true : undefined
  )
  return { ws, live, pgid, session, env }
}

/** The session's log ended as an interrupt with `reason` does: the call, the turn, idle. */
const expectInterrupted = async (db: string, session: string, reason: string) => {
  const log = await readLog(db, session)
  expect(ofType(log, "turn.interrupted").map((e) => e.payload.reason)).toEqual([reason])
  expect(ofType(log, "tool.failed").map((e) => [e.payload.callId, e.payload.reason])).toEqual([["call_run", reason]])
  expect(log.at(-1)).toMatchObject({ type: "session.status", payload: { status: { _tag: "idle" } } })
}

describe("signals", () => {
  it("SIGHUP stops the run like an interrupt, with reason hangup", async () => {
    const { ws, live, pgid, session } = await runningCommand("sleep 300")
    live.child.kill("SIGHUP")
    expect((await live.exited).code).toBe(130)
    await expectInterrupted(ws.db, session, "hangup")
    expect(groupAlive(pgid)).toBe(false)
  })

  it("SIGTERM is recorded as shutdown, not as the user's interrupt", async () => {
    const { ws, live, pgid, session } = await runningCommand("sleep 300")
    live.child.kill("SIGTERM")
    expect((await live.exited).code).toBe(130)
    await expectInterrupted(ws.db, session, "shutdown")
    expect(groupAlive(pgid)).toBe(false)
  })

  it("a second Ctrl-C during the cleanup does not cut it short", async () => {
    // a command that ignores SIGTERM: stopping it takes the grace period, then SIGKILL
    const { ws, live, pgid, session } = await runningCommand("trap '' TERM; while true; do sleep 0.1; done")
    live.child.kill("SIGINT")
    await until("the cleanup begins", async () => (live.stderr().includes("interrupting") ? true : undefined))
    live.child.kill("SIGINT")
    expect((await live.exited).code).toBe(130)
    expect(live.stderr()).toContain("still stopping the model and the running commands")
    await expectInterrupted(ws.db, session, "user")
    expect(groupAlive(pgid)).toBe(false)
  })

  it("a third forces the exit, killing the command first; the next run repairs the session", async () => {
    const { ws, live, pgid, session, env } = await runningCommand("trap '' TERM; while true; do sleep 0.1; done")
    live.child.kill("SIGINT")
    await until("the cleanup begins", async () => (live.stderr().includes("interrupting") ? true : undefined))
    live.child.kill("SIGINT")
    await until("the second is taken", async () => (live.stderr().includes("still stopping") ? true : undefined))
    live.child.kill("SIGINT")
    expect((await live.exited).code).toBe(130)
    expect(live.stderr()).toContain("forced exit")
    // no command outlives the forced exit
    await until("the group is gone", async () => (groupAlive(pgid) ? undefined : true))
    const next = await runCli([...ws.runArgs, "-s", session, "go on"], { env })
    expect(next.code, next.stderr).toBe(0)
    const log = await readLog(ws.db, session)
    expect(ofType(log, "tool.failed").map((e) => e.payload.callId)).toEqual(["call_run"])
    expect(log.at(-1)).toMatchObject({ type: "session.status", payload: { status: { _tag: "idle" } } })
    expect(fs.existsSync(ws.db)).toBe(true)
  })
})
