/**
 * Process groups after a crash (src/tools/processGroup.ts): a recorded group is recognised — by its
 * leader's start time and the boot id — and stopped; a group that cannot be told apart from a reused
 * pid is left alone.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import {
  currentBootId,
  groupAlive,
  identifyGroup,
  isRecordedGroup,
  stopRecordedGroup
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

/** Starts `sh -c script` leading a group of its own; resolves once `ready` holds a line (the script writes it). */
const startGroup = async (script: string) => {
  const dir = tempDir("logbook-pgroup-")
  const ready = path.join(dir, "ready")
  const child = spawn("sh", ["-c", script.replaceAll("READY", ready)], { detached: true, stdio: "ignore" })
  groups.push(child.pid!)
  for (let i = 0; i < 500 && !(fs.existsSync(ready) && fs.readFileSync(ready, "utf8").endsWith("\n")); i++) {
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  return { pgid: child.pid!, child, readyFile: ready, ready: fs.readFileSync(ready, "utf8").trim() }
}

describe.skipIf(!onLinux)("process groups after a crash", () => {
  it("identifies a group by its leader's start time and the boot; the record matches while it runs", async () => {
    const { pgid } = await startGroup("echo ok > READY; exec sleep 30")
    const group = identifyGroup(pgid)
    expect(group.pgid).toBe(pgid)
    expect(group.startTicks).toBeGreaterThan(0)
    expect(group.bootId).toBe(currentBootId())
    expect(group.bootId).toMatch(/^[0-9a-f-]{36}$/)
    expect(isRecordedGroup(group)).toBe(true)
  })

  it("a different start time (the pid reused), another boot or machine, or no identity: not the recorded group", async () => {
    const { pgid } = await startGroup("echo ok > READY; exec sleep 30")
    const group = identifyGroup(pgid)
    expect(isRecordedGroup({ ...group, startTicks: group.startTicks! + 1 })).toBe(false)
    expect(isRecordedGroup({ ...group, bootId: "00000000-0000-0000-0000-000000000000" })).toBe(false)
    expect(isRecordedGroup({ pgid })).toBe(false)
    // none of these is signalled
    expect(await Effect.runPromise(stopRecordedGroup({ ...group, startTicks: group.startTicks! + 1 }))).toBe(false)
    expect(groupAlive(pgid)).toBe(true)
  })

  it("stops the whole group, also when its leader has exited and a child holds the group", async () => {
    // the leader starts a background sleep, reports its pid, and exits when told to
    const { pgid, child, ready, readyFile } = await startGroup(
      'sleep 30 & echo $! > READY; while [ ! -f "READY.go" ]; do sleep 0.02; done; exit 0'
    )
    const group = identifyGroup(pgid)
    expect(group.startTicks).toBeGreaterThan(0)
    fs.writeFileSync(`${readyFile}.go`, "")
    await new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : child.once("exit", () => resolve())))
    const sleeper = Number(ready)
    expect(groupAlive(pgid)).toBe(true)
    // the leader is gone (or a zombie): the live members are still the recorded group's
    expect(isRecordedGroup(group)).toBe(true)
    expect(await Effect.runPromise(stopRecordedGroup(group))).toBe(true)
    expect(groupAlive(pgid)).toBe(false)
    // gone, or a zombie nobody reaps (a container whose init does not)
    expect(isLive(sleeper)).toBe(false)
    // nothing left: nothing to stop
    expect(await Effect.runPromise(stopRecordedGroup(group))).toBe(false)
  })
})
