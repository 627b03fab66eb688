/**
 * Process groups: whether one has a live member, stopping all of it, and telling after a crash
 * whether a recorded group is still the one a tool started (by a token in its processes' environment).
 *
 * "Live" means not a zombie: in a container whose init does not reap orphans, killed background
 * processes stay zombies forever; on Linux `/proc` tells them apart.
 */
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import { Duration, Effect } from "effect"
import { errnoCode } from "./shared.js"

/** How long a process group gets between SIGTERM and SIGKILL. */
export const KILL_GRACE_MS = 1500
/** how long to wait for a group to die after SIGKILL */
export const AFTER_KILL_MS = 3000
const POLL_MS = 20

/** The state letter (`R`, `S`, `Z` …) and group of `/proc/<pid>/stat`; `undefined` where it cannot be read. */
const procStat = (pid: string): { readonly state: string; readonly pgrp: number } | undefined => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    // "pid (comm) state ppid pgrp …": comm may hold spaces and parentheses, so split after the last ")"
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return { state: fields[0]!, pgrp: Number(fields[2]) }
  } catch {
    return undefined
  }
}

/**
 * Whether process `pid` has exited but was never reaped (a zombie: its parent died, and the
 * container's init does not reap orphans). `false` where /proc cannot tell (not Linux, gone).
 */
export const isZombie = (pid: number): boolean => {
  const state = procStat(String(pid))?.state
  return state === "Z" || state === "X"
}

/**
 * The pids of the live (not zombie) processes of group `pgid`, from `/proc`; `undefined` where it
 * cannot be read.
 */
const liveMembers = (pgid: number): ReadonlyArray<string> | undefined => {
  let pids: Array<string>
  try {
    pids = fs.readdirSync("/proc")
  } catch {
    return undefined
  }
  return pids.filter((pid) => {
    if (pid.charCodeAt(0) < 48 || pid.charCodeAt(0) > 57) return false
    const stat = procStat(pid)
    return stat !== undefined && stat.pgrp === pgid && stat.state !== "Z" && stat.state !== "X"
  })
}

/** The process groups this process's commands run in, while they run (`trackGroup`). */
const tracked = new Set<number>()

/** Notes a command's process group while it runs (`untrackGroup` when it is released). */
export const trackGroup = (pgid: number): void => {
  tracked.add(pgid)
}
export const untrackGroup = (pgid: number): void => {
  tracked.delete(pgid)
}

/**
 * SIGKILLs every tracked process group at once: the last resort of an exit that cannot wait for
 * the cleanup (a third signal); the next open of the session repairs its log.
 */
export const killTrackedGroups = (): void => {
  for (const pgid of tracked) signalGroup(pgid, "SIGKILL")
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
  const members = liveMembers(pgid)
  return members === undefined || members.length > 0
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

/** The environment variable that marks every process of a command with its group's token. */
export const PROCESS_TOKEN_ENV = "LOGBOOK_PROCESS_TOKEN"

/**
 * A process group a tool started, as recorded in `tool.process`: its id, and the random token its
 * processes carry in their environment (`PROCESS_TOKEN_ENV`), which proves later that a live
 * process of that id is still one of them.
 */
export interface ProcessGroup {
  readonly pgid: number
  readonly token?: string | undefined
}

/** A new random token for a group about to be started. */
export const newProcessToken = (): string => randomUUID()

/** Whether the environment of process `pid` holds `name=value` (false when it cannot be read). */
const environHas = (pid: string, entry: string): boolean => {
  try {
    return fs.readFileSync(`/proc/${pid}/environ`).toString("utf8").split("\0").includes(entry)
  } catch {
    return false
  }
}

/**
 * Whether `group` is still the group that was recorded: a live process of `pgid` carries its token
 * in its environment. Group ids are reused (once a group is gone, its number can go to another
 * process, which may lead a group of its own, or leave one without a leader), and a database can
 * be shared across machines or containers; the token (random, per command) is what tells. Without
 * a token, or where `/proc` cannot be read (not Linux, another user's processes), the answer is
 * `false`: a group that cannot be identified is never signalled.
 */
export const isRecordedGroup = (group: ProcessGroup): boolean => {
  if (group.token === undefined || group.token === "") return false
  const entry = `${PROCESS_TOKEN_ENV}=${group.token}`
  return (liveMembers(group.pgid) ?? []).some((pid) => environHas(pid, entry))
}

/**
 * Stops what is left of a recorded group (`stopGroup`) when it is still that group; returns whether
 * it did.
 */
export const stopRecordedGroup = (group: ProcessGroup): Effect.Effect<boolean> =>
  Effect.gen(function* () {
    if (!isRecordedGroup(group)) return false
    yield* stopGroup(group.pgid)
    return true
  })
