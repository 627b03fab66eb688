/**
 * Process groups: whether one has a live member, stopping all of it, and telling after a crash
 * whether a recorded group is still the one a tool started.
 *
 * "Live" means not a zombie: in a container whose init does not reap orphans, killed background
 * processes stay zombies forever; on Linux `/proc` tells them apart.
 */
import * as fs from "node:fs"
import { Duration, Effect } from "effect"
import { errnoCode } from "./shared.js"

/** How long a process group gets between SIGTERM and SIGKILL. */
export const KILL_GRACE_MS = 1500
/** how long to wait for a group to die after SIGKILL */
export const AFTER_KILL_MS = 3000
const POLL_MS = 20

/**
 * The state letter (`R`, `S`, `Z` …), group and start time (clock ticks after boot) of
 * `/proc/<pid>/stat`; `undefined` where it cannot be read.
 */
const procStat = (
  pid: string
): { readonly state: string; readonly pgrp: number; readonly startTicks: number } | undefined => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    // "pid (comm) state ppid pgrp … starttime(22) …": comm may hold spaces and parentheses, so split
    // after the last ")"; field n is then at index n - 3
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return { state: fields[0]!, pgrp: Number(fields[2]), startTicks: Number(fields[19]) }
  } catch {
    return undefined
  }
}

/** Whether the process group `pgid` has a live member. */
export const groupAlive = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0)
  } catch (error) {
    return errnoCode(error) === "EPERM"
  }
  // kill(2) counts zombies; where /proc exists, look for a member that is not one
  if (process.platform !== "linux") return true
  let pids: Array<string>
  try {
    pids = fs.readdirSync("/proc")
  } catch {
    return true
  }
  for (const pid of pids) {
    if (pid.charCodeAt(0) < 48 || pid.charCodeAt(0) > 57) continue
    const stat = procStat(pid)
    if (stat !== undefined && stat.pgrp === pgid && stat.state !== "Z" && stat.state !== "X") return true
  }
  return false
}

const signalGroup = (pgid: number, signal: NodeJS.Signals): void => {
  try {
    process.kill(-pgid, signal)
  } catch {
    // ESRCH: the group is gone already
  }
}

/** Polls until the group has no live member; `false` when `ms` passed first. */
const awaitGroupGone = (pgid: number, ms: number): Effect.Effect<boolean> =>
  Effect.gen(function* () {
    for (let waited = 0; ; waited += POLL_MS) {
      if (!groupAlive(pgid)) return true
      if (waited >= ms) return false
      yield* Effect.sleep(Duration.millis(POLL_MS))
    }
  })

/**
 * Stops every process of the group `pgid`: SIGTERM, then SIGKILL when some are still alive after
 * `KILL_GRACE_MS`; returns when none is left (or, after SIGKILL, when `AFTER_KILL_MS` passed: a
 * process in uninterruptible sleep cannot be waited for). Idempotent.
 */
export const stopGroup = (pgid: number): Effect.Effect<void> =>
  Effect.gen(function* () {
    if (!groupAlive(pgid)) return
    signalGroup(pgid, "SIGTERM")
    if (yield* awaitGroupGone(pgid, KILL_GRACE_MS)) return
    signalGroup(pgid, "SIGKILL")
    yield* awaitGroupGone(pgid, AFTER_KILL_MS)
  })

// ---------------------------------------------------------------------------------------------
// after a crash

/**
 * A process group a tool started, as recorded in `tool.process`: its id and, where `/proc` tells,
 * its leader's start time and the boot (of this machine) it ran in.
 */
export interface ProcessGroup {
  readonly pgid: number
  readonly startTicks?: number | undefined
  readonly bootId?: string | undefined
}

let bootId: string | undefined | null = null
/** `/proc/sys/kernel/random/boot_id`: different on another machine and after a reboot. */
export const currentBootId = (): string | undefined => {
  if (bootId === null) {
    try {
      bootId = fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim() || undefined
    } catch {
      bootId = undefined
    }
  }
  return bootId
}

/** The identity of the group `pid` leads (a process spawned `detached` leads its own group). */
export const identifyGroup = (pid: number): ProcessGroup => {
  const stat = procStat(String(pid))
  const boot = currentBootId()
  return {
    pgid: pid,
    ...(stat === undefined || !Number.isFinite(stat.startTicks) ? {} : { startTicks: stat.startTicks }),
    ...(boot === undefined ? {} : { bootId: boot })
  }
}

/**
 * Whether `group` is still the group that was recorded: the same boot of the same machine, and its
 * leader, while there is one, the process that was recorded (same start time). A group id cannot be
 * given to a new process while any process of the group lives (Linux keeps the id in use), so once
 * the leader is gone, live members of `pgid` are the recorded group's. Without the start time and
 * the boot id nothing can be told, and the answer is `false`: a group that cannot be identified is
 * never signalled.
 */
export const isRecordedGroup = (group: ProcessGroup): boolean => {
  if (group.startTicks === undefined || group.bootId === undefined) return false
  if (currentBootId() !== group.bootId) return false
  const leader = procStat(String(group.pgid))
  if (leader === undefined) return true
  return leader.startTicks === group.startTicks && leader.pgrp === group.pgid
}

/**
 * Stops what is left of a recorded group (`stopGroup`) when it is still that group and has a live
 * member; returns whether it did.
 */
export const stopRecordedGroup = (group: ProcessGroup): Effect.Effect<boolean> =>
  Effect.gen(function* () {
    if (!isRecordedGroup(group) || !groupAlive(group.pgid)) return false
    yield* stopGroup(group.pgid)
    return true
  })
