/**
 * Pids as the host sees them, of processes a command named as it saw them: in the sandbox a
 * command runs in a PID namespace of its own (src/tools/Sandbox.ts), so its `$$` and `$!` are that
 * namespace's numbers.
 */
import * as fs from "node:fs"

/** The last pid of `NSpid` in `/proc/<pid>/status`: the process's pid inside its own PID namespace. */
const innerPid = (pid: string): number | undefined => {
  try {
    const line = fs
      .readFileSync(`/proc/${pid}/status`, "utf8")
      .split("\n")
      .find((l) => l.startsWith("NSpid:"))
    return line === undefined ? undefined : Number(line.trim().split(/\s+/).at(-1))
  } catch {
    return undefined
  }
}

const pidNamespace = (pid: number | string): string | undefined => {
  try {
    return fs.readlinkSync(`/proc/${pid}/ns/pid`)
  } catch {
    return undefined
  }
}

/** The real path of the directory process `pid` works in; undefined when it is gone. */
const cwdOf = (pid: string): string | undefined => {
  try {
    return fs.realpathSync(`/proc/${pid}/cwd`)
  } catch {
    return undefined
  }
}

/**
 * The host pid of a process a command named as it saw it (`echo $$ > shell.pid`, `$!`), while it
 * runs: in the sandbox that number is a pid of the sandbox's own PID namespace, so the process is
 * the one with that pid in its namespace working in `cwd` (the workspace); unsandboxed it is the
 * same number. Throws when no such process runs (a test must not check a pid that means nothing).
 */
export const hostPid = (pid: number, cwd: string): number => {
  const dir = fs.realpathSync(cwd)
  const found = fs
    .readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name) && innerPid(name) === pid && cwdOf(name) === dir)
    .map(Number)
  if (found.length !== 1)
    throw new Error(`no single process ${pid} (as its namespace names it) works in ${dir}: ${found}`)
  return found[0]!
}

/** The process group of host process `pid`; undefined when it is gone. */
export const groupOf = (pid: number): number | undefined => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2])
  } catch {
    return undefined
  }
}

/**
 * The host pids of the processes a command named as it saw them (`echo $$`, `$!`): in the sandbox
 * those are pids of its PID namespace, the one the recorded group's leader `pgid` (`tool.process`)
 * is in; unsandboxed they are host pids already. Processes already gone are left out.
 */
export const hostPids = (pgid: number, inner: ReadonlyArray<number>): Array<number> => {
  const namespace = pidNamespace(pgid)
  if (namespace === undefined) return []
  const wanted = new Set(inner)
  return fs
    .readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name) && pidNamespace(name) === namespace && wanted.has(innerPid(name) ?? -1))
    .map(Number)
}
