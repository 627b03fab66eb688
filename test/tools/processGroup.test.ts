/**
 * Process groups after a crash (src/tools/processGroup.ts): a recorded group is recognised by the
 * token its processes carry in their environment, and stopped; a group of the same id without the
 * token (the id reused, another user's, no /proc) is left alone.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import {
  groupAlive,
  isRecordedGroup,
  killTrackedGroups,
  newProcessToken,
  PROCESS_TOKEN_ENV,
  startTicks,
  stopCommand,
  stopRecordedGroup,
  tokenCarriers,
  trackGroup,
  untrackGroup
} from "../../src/tools/processGroup.js"
import { isLive } from "../integration/support.js"
import { tempDir } from "../support/tmp.js"

const onLinux = process.platform === "linux"
const groups: Array<number> = []
afterEach(() => {
  for (const pgid of groups.splice(0)) {
    try {
      process.kill(-pgid, "SIGKILL")
    } catch {
      // gone
    }
  }
})

/**
 * Starts `sh -c script` leading a group of its own, with `token` (if any) in its environment;
 * resolves once the file READY stands for holds a line (the script writes it).
 */
const startGroup = async (script: string, token: string | undefined) => {
  const dir = tempDir("logbook-pgroup-")
  const ready = path.join(dir, "ready")
  const env = { ...process.env, ...(token === undefined ? {} : { [PROCESS_TOKEN_ENV]: token }) }
  const child = spawn("sh", ["-c", script.replaceAll("READY", ready)], { detached: true, stdio: "ignore", env })
  groups.push(child.pid!)
  for (let i = 0; i < 1500 && !(fs.existsSync(ready) && fs.readFileSync(ready, "utf8").endsWith("\n")); i++) {
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  if (!fs.existsSync(ready)) throw new Error(`the test's process group did not start within 30s (${script})`)
  return { pgid: child.pid!, child, readyFile: ready, ready: fs.readFileSync(ready, "utf8").trim() }
}

describe.skipIf(!onLinux)("process groups after a crash", () => {
  it("a live group whose processes carry the token is the recorded one", async () => {
    const token = newProcessToken()
    const { pgid } = await startGroup("echo ok > READY; exec sleep 30", token)
    expect(isRecordedGroup({ pgid, token })).toBe(true)
  })

  it("the same id without the token (reused, or recorded by another run), or no token: left alone", async () => {
    const { pgid } = await startGroup("echo ok > READY; exec sleep 30", newProcessToken())
    expect(isRecordedGroup({ pgid, token: newProcessToken() })).toBe(false)
    expect(isRecordedGroup({ pgid })).toBe(false)
    const unmarked = await startGroup("echo ok > READY; exec sleep 30", undefined)
    expect(isRecordedGroup({ pgid: unmarked.pgid, token: newProcessToken() })).toBe(false)
    // none of these is signalled
    expect(await Effect.runPromise(stopRecordedGroup({ pgid, token: newProcessToken() }))).toBe(false)
    expect(await Effect.runPromise(stopRecordedGroup({ pgid: unmarked.pgid, token: "" }))).toBe(false)
    expect(groupAlive(pgid)).toBe(true)
    expect(groupAlive(unmarked.pgid)).toBe(true)
  })

  it("stops the whole group, also when its leader has exited and a child (with the token) holds it", async () => {
    const token = newProcessToken()
    // the leader starts a background sleep, reports its pid, and exits when told to
    const { pgid, child, ready, readyFile } = await startGroup(
      'sleep 30 & echo $! > READY; while [ ! -f "READY.go" ]; do sleep 0.02; done; exit 0',
      token
    )
    fs.writeFileSync(`${readyFile}.go`, "")
    await new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : child.once("exit", () => resolve())))
    const sleeper = Number(ready)
    expect(groupAlive(pgid)).toBe(true)
    // the leader is gone: the child's environment still proves the group
    expect(isRecordedGroup({ pgid, token })).toBe(true)
    expect(await Effect.runPromise(stopRecordedGroup({ pgid, token }))).toBe(true)
    expect(groupAlive(pgid)).toBe(false)
    // gone, or a zombie nobody reaps (a container whose init does not)
    expect(isLive(sleeper)).toBe(false)
    // nothing left: nothing to stop
    expect(await Effect.runPromise(stopRecordedGroup({ pgid, token }))).toBe(false)
  })

  /** A group whose leader starts a `setsid` daemon (outside the group), reports its pid and exits. */
  const startWithDaemon = async (token: string) => {
    const { pgid, child, ready } = await startGroup(
      "setsid sh -c 'echo $$ > READY; exec sleep 1000' > /dev/null 2>&1 < /dev/null & " +
        'while [ ! -s "READY" ]; do sleep 0.01; done; exit 0',
      token
    )
    await new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : child.once("exit", () => resolve())))
    const daemon = Number(ready)
    groups.push(daemon)
    return { pgid, daemon }
  }

  it("after a crash, a daemon that left the group (setsid) with the token is found and stopped", async () => {
    const token = newProcessToken()
    const { pgid, daemon } = await startWithDaemon(token)
    // the group is gone; the daemon lives in a session of its own, with the token
    expect(groupAlive(pgid)).toBe(false)
    expect(tokenCarriers(token).map((p) => p.pid)).toEqual([daemon])
    expect(isRecordedGroup({ pgid, token })).toBe(true)
    expect(await Effect.runPromise(stopRecordedGroup({ pgid, token }))).toBe(true)
    expect(isLive(daemon)).toBe(false)
    expect(tokenCarriers(token)).toEqual([])
    expect(await Effect.runPromise(stopRecordedGroup({ pgid, token }))).toBe(false)
  })

  it("stopCommand reports what it stopped, by pid and command line", async () => {
    const token = newProcessToken()
    const { pgid, daemon } = await startWithDaemon(token)
    const report = await Effect.runPromise(stopCommand({ pgid, token }))
    expect(report).toEqual({ stopped: [{ pid: daemon, command: "sleep 1000" }], stillRunning: [] })
    expect(isLive(daemon)).toBe(false)
  })

  it("the forced exit (a third signal) kills the daemons that left a tracked group too", async () => {
    const token = newProcessToken()
    const { pgid, daemon } = await startWithDaemon(token)
    trackGroup(pgid, token)
    try {
      killTrackedGroups()
    } finally {
      untrackGroup(pgid)
    }
    for (let i = 0; i < 500 && isLive(daemon); i++) await new Promise((resolve) => setTimeout(resolve, 10))
    expect(isLive(daemon)).toBe(false)
  })
})

describe.skipIf(!onLinux)("the scans for a command's processes", () => {
  it("look only at processes started since the command, and still find one that left the group", async () => {
    const token = newProcessToken()
    const before = startTicks(process.pid)
    // a process that leaves the group (setsid) with the token: found only by its environment
    const { pgid, ready } = await startGroup("setsid sh -c 'echo $$ > READY; exec sleep 30' &\nwait", token)
    const since = startTicks(pgid)
    const escaped = Number(ready)
    groups.push(escaped)
    expect(before).toBeDefined()
    expect(since).toBeDefined()
    expect(since!).toBeGreaterThanOrEqual(before!)
    expect(startTicks(escaped)!).toBeGreaterThanOrEqual(since!)
    expect(tokenCarriers(token).map((p) => p.pid)).toContain(escaped)
    expect(tokenCarriers(token, since).map((p) => p.pid)).toContain(escaped)
    // a bound after it started leaves it out: the environment of older processes is not read
    expect(tokenCarriers(token, startTicks(escaped)! + 1).map((p) => p.pid)).not.toContain(escaped)
    const report = await Effect.runPromise(stopCommand({ pgid, token }, since))
    expect(report.stopped.map((p) => p.pid)).toContain(escaped)
    expect(isLive(escaped)).toBe(false)
  })
})
