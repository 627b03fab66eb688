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
import { errnoCode } from "./fsErrors.js"

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
    // "pid (comm) state ppid pgrp … starttime …": comm may hold spaces and parentheses, so split
    // after the last ")"; starttime is the 22nd field, the 20th after comm
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return { state: fields[0]!, pgrp: Number(fields[2]), startTicks: Number(fields[19]) }
  } catch {
    return undefined
  }
}

/**
 * When process `pid` started, in `/proc`'s clock ticks after boot; `undefined` where `/proc` cannot
 * tell. A process a command started (in its group or out of it) started no earlier than the command:
 * the scans for a command's processes (`tokenCarriers`, `stopCommand`) read the environment only of
 * processes that started since (`since`), not of every process on the machine.
 */
export const startTicks = (pid: number): number | undefined => {
  const ticks = procStat(String(pid))?.startTicks
  return ticks === undefined || Number.isNaN(ticks) ? undefined : ticks
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

/** The process groups this process's commands run in, with their tokens, while they run (`trackGroup`). */
const tracked = new Map<number, string | undefined>()

/** Notes a command's process group (and its token) while it runs (`untrackGroup` when it is released). */
export const trackGroup = (pgid: number, token?: string): void => {
  tracked.set(pgid, token)
}
export const untrackGroup = (pgid: number): void => {
  tracked.delete(pgid)
}

/**
 * SIGKILLs every tracked process group at once, and every live process that carries one of their
 * tokens (the ones that left the group: `setsid`, a daemon): the last resort of an exit that cannot
 * wait for the cleanup (a third signal); the next open of the session repairs its log.
 */
export const killTrackedGroups = (): void => {
  const tokens = new Set<string>()
  for (const [pgid, token] of tracked) {
    signalGroup(pgid, "SIGKILL")
    if (token !== undefined && token !== "") tokens.add(token)
  }
  if (tokens.size === 0) return
  for (const found of scanCarriers(tokens)) signalProcess(found.pid, "SIGKILL")
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

const signalProcess = (pid: number, signal: NodeJS.Signals): void => {
  try {
    process.kill(pid, signal)
  } catch {
    // ESRCH: gone already; EPERM: not ours to stop (it is reported as still running)
  }
}

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

/** A process as a command's report names it: its pid and its command line. */
export interface ProcessInfo {
  readonly pid: number
  readonly command: string
}

/** Characters of a command line kept in a report. */
const MAX_COMMAND_CHARS = 200

/** The command line of `pid` (`/proc/<pid>/cmdline`, arguments joined by spaces); its name when that is empty. */
const commandLine = (pid: number): string => {
  try {
    const args = fs
      .readFileSync(`/proc/${pid}/cmdline`)
      .toString("utf8")
      .split("\0")
      .filter((a) => a !== "")
    const text = args.length > 0 ? args.join(" ") : `[${fs.readFileSync(`/proc/${pid}/comm`, "utf8").trim()}]`
    return text.length > MAX_COMMAND_CHARS ? `${text.slice(0, MAX_COMMAND_CHARS - 1)}…` : text
  } catch {
    return "(gone)"
  }
}

const isPid = (name: string): boolean => name.length > 0 && [...name].every((c) => c >= "0" && c <= "9")

const isLivePid = (pid: number): boolean => {
  const stat = procStat(String(pid))
  return stat !== undefined && stat.state !== "Z" && stat.state !== "X"
}

/**
 * Every live process (not this one) whose environment carries one of `tokens` as `PROCESS_TOKEN_ENV`,
 * from `/proc`: also the ones that left their command's group (`setsid`, a double fork into a new
 * session). Empty where `/proc` cannot be read. A process that cleared its environment (`env -i`),
 * or one of another user's, cannot be found this way.
 */
const scanCarriers = (tokens: ReadonlySet<string>, since?: number): Array<ProcessInfo> => {
  let names: Array<string>
  try {
    names = fs.readdirSync("/proc")
  } catch {
    return []
  }
  const entries = [...tokens].map((token) => `${PROCESS_TOKEN_ENV}=${token}`)
  const found: Array<ProcessInfo> = []
  for (const name of names) {
    if (!isPid(name) || Number(name) === process.pid) continue
    const stat = procStat(name)
    if (stat === undefined || stat.state === "Z" || stat.state === "X") continue
    // older than the command: not one of its processes
    if (since !== undefined && stat.startTicks < since) continue
    if (entries.some((entry) => environHas(name, entry)))
      found.push({ pid: Number(name), command: commandLine(Number(name)) })
  }
  return found
}

/**
 * The live processes that carry `token` (`scanCarriers`); with `since` (`startTicks` of the
 * command's first process), only among the processes that started since.
 */
export const tokenCarriers = (token: string | undefined, since?: number): Array<ProcessInfo> =>
  token === undefined || token === "" ? [] : scanCarriers(new Set([token]), since)

/** What stopping a command did: the processes it stopped, and the ones still running after it. */
export interface StopReport {
  readonly stopped: ReadonlyArray<ProcessInfo>
  readonly stillRunning: ReadonlyArray<ProcessInfo>
}

/**
 * What `stopCommand` stops: a process group (`pgid`; undefined when it is not to be signalled as a
 * group) and the processes that carry `token`.
 */
interface Target {
  readonly pgid: number | undefined
  readonly token?: string | undefined
  /** `startTicks` of the command's first process, when known */
  readonly since?: number | undefined
}

const targetAlive = (target: Target): boolean => target.pgid !== undefined && groupAlive(target.pgid)

const signalTarget = (target: Target, signal: NodeJS.Signals): void => {
  if (target.pgid !== undefined) signalGroup(target.pgid, signal)
}

/**
 * Whether `pid` is the sandbox's init leading the group `pgid`: the leader, without the token the
 * command's processes carry (bwrap's pid 1, Sandbox.ts) — signalled with the group, not named.
 */
const isSandboxInit = (pid: string, target: Target): boolean =>
  Number(pid) === target.pgid &&
  target.token !== undefined &&
  target.token !== "" &&
  !environHas(pid, `${PROCESS_TOKEN_ENV}=${target.token}`)

/** The live processes of `target`: its group's members, and every process that carries its token. */
const liveProcessesOf = (target: Target): Array<ProcessInfo> => {
  const members = (target.pgid === undefined ? [] : (liveMembers(target.pgid) ?? []))
    .filter((pid) => !isSandboxInit(pid, target))
    .map((pid) => ({ pid: Number(pid), command: commandLine(Number(pid)) }))
  const known = new Set(members.map((m) => m.pid))
  return [...members, ...tokenCarriers(target.token, target.since).filter((c) => !known.has(c.pid))]
}

/**
 * Whether anything of a command is still running once its shell ended: a member of its group
 * other than the sandbox's init (which ends by itself after the shell), or a process with its token.
 */
export const commandAlive = (group: ProcessGroup, since?: number): boolean =>
  liveProcessesOf({ ...group, since }).length > 0

/** Polls until none of `pids` is alive and the group is gone; `false` when `ms` passed first. */
const awaitAllGone = (target: Target, pids: ReadonlyArray<number>, ms: number): Effect.Effect<boolean> =>
  Effect.gen(function* () {
    for (let waited = 0; ; waited += POLL_MS) {
      if (!targetAlive(target) && !pids.some(isLivePid)) return true
      if (waited >= ms) return false
      yield* Effect.sleep(Duration.millis(POLL_MS))
    }
  })

/**
 * Stops everything a command left: its process group (`stopGroup`'s SIGTERM, then SIGKILL after
 * `KILL_GRACE_MS`) and every live process that carries its token but left the group (`setsid`, a
 * daemon's double fork) — each signalled by its pid, the same way, found again before the SIGKILL
 * (a process may start others during the grace). Returns what it stopped and what is still
 * running (a process in uninterruptible sleep, one of another user's). Not found, so neither
 * stopped nor reported: a process that cleared its environment and left the group; everything
 * outside the group where `/proc` cannot be read (not Linux). Idempotent.
 */
export const stopCommand = (group: ProcessGroup, since?: number): Effect.Effect<StopReport> =>
  stopTarget({ ...group, since })

const stopTarget = (group: Target): Effect.Effect<StopReport> =>
  Effect.gen(function* () {
    const seen = new Map<number, ProcessInfo>()
    const note = (list: ReadonlyArray<ProcessInfo>) => {
      for (const info of list) if (!seen.has(info.pid)) seen.set(info.pid, info)
    }
    const first = liveProcessesOf(group)
    note(first)
    if (first.length === 0 && !targetAlive(group)) return { stopped: [], stillRunning: [] }
    signalTarget(group, "SIGTERM")
    for (const info of first) signalProcess(info.pid, "SIGTERM")
    if (!(yield* awaitAllGone(group, [...seen.keys()], KILL_GRACE_MS))) {
      const left = liveProcessesOf(group)
      note(left)
      signalTarget(group, "SIGKILL")
      for (const info of left) signalProcess(info.pid, "SIGKILL")
      yield* awaitAllGone(group, [...seen.keys()], AFTER_KILL_MS)
    }
    const stillRunning = liveProcessesOf(group)
    const running = new Set(stillRunning.map((info) => info.pid))
    return { stopped: [...seen.values()].filter((info) => !running.has(info.pid)), stillRunning }
  })

/**
 * Whether `group` is still the group that was recorded: a live process carries its token in its
 * environment — one of the group `pgid`, or one that left it (`setsid`, a daemon). Group ids are reused (once a group is gone, its number can go to another
 * process, which may lead a group of its own, or leave one without a leader), and a database can
 * be shared across machines or containers; the token (random, per command) is what tells. Without
 * a token, or where `/proc` cannot be read (not Linux, another user's processes), the answer is
 * `false`: a group that cannot be identified is never signalled.
 */
export const isRecordedGroup = (group: ProcessGroup): boolean => {
  if (group.token === undefined || group.token === "") return false
  const entry = `${PROCESS_TOKEN_ENV}=${group.token}`
  return (liveMembers(group.pgid) ?? []).some((pid) => environHas(pid, entry)) || tokenCarriers(group.token).length > 0
}

/**
 * Stops what is left of a recorded group when it is still that group (`isRecordedGroup`): the group
 * and the processes that left it with its token (`stopCommand`); returns whether it did.
 */
export const stopRecordedGroup = (group: ProcessGroup): Effect.Effect<boolean> =>
  Effect.gen(function* () {
    if (!isRecordedGroup(group)) return false
    // the group is signalled only when a member still proves it; the carriers prove themselves
    const entry = `${PROCESS_TOKEN_ENV}=${group.token}`
    const groupProven = (liveMembers(group.pgid) ?? []).some((pid) => environHas(pid, entry))
    yield* stopTarget(groupProven ? group : { pgid: undefined, token: group.token })
    return true
  })
