/**
 * What a killed logbook leaves of its stdio MCP servers, and the sweep that stops it: each running
 * server's process group and token (`PROCESS_TOKEN_ENV`, in every process of the server) is a small
 * file in a directory of the user's data, named for the logbook process that started it (pid and
 * start time). The sweep stops the recorded groups of the processes that are gone — only where a
 * live process still carries the token, so a reused group id is never signalled — and removes
 * their files. docs/mcp.md, "Processes and bounds".
 */
import * as fs from "node:fs"
import * as nodePath from "node:path"
import { Effect } from "effect"
import { isRecordedGroup, type ProcessGroup, startTicks, stopRecordedGroup } from "../../tools/processGroup.js"

/** Where a process notes and forgets the groups of the servers it runs. */
export interface ServerRecords {
  readonly add: (group: ProcessGroup) => void
  readonly remove: (pgid: number) => void
}

/** `<owner pid>-<owner start ticks>-<group>.json` */
const RECORD = /^(\d+)-(\d+)-(\d+)\.json$/

const ownerTag = (): string => `${process.pid}-${startTicks(process.pid) ?? 0}`

/** The records of this process in `dir` (made on the first server, mode 0700). */
export const serverRecords = (dir: string): ServerRecords => ({
  add: (group) => {
    try {
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
      fs.writeFileSync(nodePath.join(dir, `${ownerTag()}-${group.pgid}.json`), JSON.stringify(group), { mode: 0o600 })
    } catch {
      // not recorded: the server is still stopped at exit, only a crash could leave it
    }
  },
  remove: (pgid) => {
    try {
      fs.rmSync(nodePath.join(dir, `${ownerTag()}-${pgid}.json`), { force: true })
    } catch {
      // left for the next sweep, which finds the group gone
    }
  }
})

/** Whether the process that wrote a record runs still: its pid is alive with the same start time. */
const ownerRuns = (pid: number, ticks: number): boolean => {
  if (pid === process.pid) return true
  const now = startTicks(pid)
  if (now !== undefined) return now === ticks
  try {
    process.kill(pid, 0)
    return process.platform !== "linux"
  } catch {
    return false
  }
}

const readGroup = (file: string): ProcessGroup | undefined => {
  try {
    const parsed = JSON.parse(fs.readFileSync(file, "utf8")) as { pgid?: unknown; token?: unknown }
    return typeof parsed.pgid === "number" && typeof parsed.token === "string"
      ? { pgid: parsed.pgid, token: parsed.token }
      : undefined
  } catch {
    return undefined
  }
}

/**
 * Stops the servers that logbook processes now gone left running (their recorded groups, still
 * proven by their token) and removes those processes' records. `onFound` is told once, before
 * the first is stopped. Returns how many groups it stopped.
 */
export const sweepOrphanServers = (dir: string, onFound?: Effect.Effect<void>): Effect.Effect<number> =>
  Effect.gen(function* () {
    let names: Array<string>
    try {
      names = fs.readdirSync(dir)
    } catch {
      return 0
    }
    let stopped = 0
    let told = false
    for (const name of names) {
      const match = RECORD.exec(name)
      if (match === null || ownerRuns(Number(match[1]), Number(match[2]))) continue
      const file = nodePath.join(dir, name)
      const group = readGroup(file)
      if (group !== undefined && isRecordedGroup(group)) {
        if (!told && onFound !== undefined) yield* onFound
        told = true
        if (yield* stopRecordedGroup(group)) stopped++
      }
      try {
        fs.rmSync(file, { force: true })
      } catch {
        // not ours to remove: the next sweep finds the group gone
      }
    }
    return stopped
  })
