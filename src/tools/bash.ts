/**
 * The `bash` tool: runs a shell command in the working directory and returns its output and exit
 * code.
 *
 * The command runs as `bash -c` (`sh -c` where there is no bash) in a process group of its own
 * (`detached: true`), with stdin closed and `TERM=dumb`. Its stderr is joined to its stdout inside
 * the shell (`exec 2>&1`), so the two arrive in the order they were written; the shell's own stderr
 * (a syntax error) is collected into the same output.
 *
 * No process outlives the call. The shell is acquired with `Effect.acquireRelease`, and the release
 * stops the whole group: SIGTERM, then SIGKILL after `KILL_GRACE_MS`, and it returns only when no
 * live process is left in the group. That runs on interruption (timeout, user interrupt) as well as
 * at the end of a normal run, where background processes (`cmd &`) still running are stopped too
 * (the output says so). When a background process keeps the output pipe open after the shell has
 * exited, the call does not wait for it: after `CLOSE_GRACE_MS` the group is stopped and the call ends.
 *
 * The model reads the first and the last part of the output (`HeadTailBuffer`) with a marker saying
 * how many bytes were left out; the whole output (up to `FULL_OUTPUT_BYTES`) is stored as a blob and
 * named in the call's metadata with the command, exit code and duration — the command's record for
 * audit. A command stopped by a timeout or an interrupt leaves the same record (through
 * `context.recordStopped`, in its `tool.failed`). `context.progress` gets the tail of the output as
 * it arrives.
 *
 * "Live" means not a zombie: in a container whose init does not reap orphans, killed background
 * processes stay zombies forever; on Linux `/proc` tells them apart.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as os from "node:os"
import { Chunk, Clock, Duration, Effect, Exit, Option, Queue, Schema } from "effect"
import { HeadTailBuffer } from "./boundedOutput.js"
import { onPath } from "./executables.js"
import { type FsError, toFsError } from "./FsError.js"
import { errnoCode } from "./fsErrors.js"
import { statPath } from "./notFound.js"
import {
  AFTER_KILL_MS,
  commandAlive,
  newProcessToken,
  PROCESS_TOKEN_ENV,
  type ProcessGroup,
  type ProcessInfo,
  type StopReport,
  startTicks,
  stopCommand,
  trackGroup,
  untrackGroup
} from "./processGroup.js"
import {
  bwrapArgs,
  decide,
  defaultSandboxSettings,
  makePlan,
  probeSandbox,
  SANDBOX_INFO_FD,
  SANDBOX_READY_FD,
  type SandboxDecision,
  type SandboxOptions,
  sandboxDescription,
  sandboxDirs,
  sandboxHint
} from "./Sandbox.js"
import type { SecretsService } from "./Secrets.js"
import { defineTool, type ToolContext, type ToolDefinition, ToolFailure, type ToolOutput } from "./Tools.js"
import { intAtLeast, nonEmptyString } from "./toolInput.js"

/** The first bytes of the output the model reads. */
export const OUTPUT_HEAD_BYTES = 10 * 1024
/** The last bytes of the output the model reads. */
export const OUTPUT_TAIL_BYTES = 20 * 1024
/** How much of the output's tail a progress report carries. */
export const PROGRESS_BYTES = 4 * 1024
/** After the shell exits, how long its output may take to end before the group is stopped. */
export const CLOSE_GRACE_MS = 250
export { groupAlive, KILL_GRACE_MS, stopGroup } from "./processGroup.js"

/** The timeouts of a command when the config sets none (ms). */
export const defaultBashTimeouts = { timeoutMs: 120_000, maxTimeoutMs: 600_000 } as const

export interface BashSettings {
  /** the timeout of a call that does not give one (ms) */
  readonly timeoutMs: number
  /** the most a call may ask for (ms) */
  readonly maxTimeoutMs: number
  /** the sandbox of the commands (default `defaultSandboxSettings`: bubblewrap where it works); see `Sandbox.ts` */
  readonly sandbox?: SandboxOptions | undefined
}

export const BashInput = Schema.Struct({
  command: nonEmptyString("The shell command to run (bash syntax; several lines are fine)."),
  timeoutMs: Schema.optional(
    intAtLeast(
      1,
      "How long the command may run, in milliseconds, before it is stopped. Give it for commands that are known to take long (builds, test suites)."
    )
  ),
  description: Schema.optional(
    Schema.String.annotations({
      description:
        'What the command does, in 5-10 words, shown to the user (e.g. "Run the unit tests", "List changed files").'
    })
  )
})
export type BashInput = typeof BashInput.Type

/** The whole output of a command is kept as a blob up to this size (beyond it, only head and tail). */
export const FULL_OUTPUT_BYTES = 16 * 1024 * 1024

/** metadata of a command — its record for audit: what ran, how it ended, what it printed, how long it took */
export interface BashMetadata {
  readonly command: string
  /** the blob (SHA-256) of the whole output; absent when it was larger than `FULL_OUTPUT_BYTES` */
  readonly outputBlob?: string
  /** the exit code; 128 + the signal number when the shell was killed by a signal */
  readonly exitCode: number
  readonly signal?: string
  /** bytes of output in all */
  readonly bytes: number
  /** true when the middle of the output was left out */
  readonly truncated: boolean
  readonly durationMs: number
  /** background processes were still running when the shell ended, and were stopped */
  readonly stoppedBackground?: boolean
  /** whether the command ran in the sandbox (with or without network), or why not */
  readonly sandbox?: SandboxRecord
  /** the processes stopped when the command ended or was stopped (pid and command line) */
  readonly stoppedProcesses?: ReadonlyArray<ProcessInfo>
  /** processes of the command still running after it was stopped (they could not be stopped) */
  readonly stillRunning?: ReadonlyArray<ProcessInfo>
}

/** How a command was confined, for audit: `sandboxed`, and `network` or the `reason` it ran unconfined. */
export type SandboxRecord =
  | { readonly sandboxed: true; readonly network: boolean }
  | { readonly sandboxed: false; readonly reason: string }

// ---------------------------------------------------------------------------------------------
// running one command

type ShellEvent = "data" | "exit" | "close"

interface Running {
  readonly child: ChildProcess
  readonly pid: number
  /** the group and the token its processes carry */
  readonly group: ProcessGroup
  readonly events: Queue.Queue<ShellEvent>
  /** set by the child's `exit` event */
  exit: { readonly code: number | null; readonly signal: NodeJS.Signals | null } | undefined
  /** set by the child's `close` event: it exited and its pipes are closed */
  closed: boolean
  /**
   * when the spawned process started (`startTicks`): the command's processes started no earlier,
   * so the scans for them skip older ones; undefined where `/proc` cannot tell
   */
  readonly since: number | undefined
  /** set when, after the end, neither the group nor a process with the token was left: nothing to stop */
  clean: boolean
}

/** A sandboxed spawn: the bwrap binary and its options (before `--`). */
interface SandboxSpawn {
  readonly bwrap: string
  readonly args: ReadonlyArray<string>
}

/** The exit of bwrap as the shell's: bwrap reports a shell killed by signal N as exit code 128 + N. */
const sandboxedExit = (code: number | null, signal: NodeJS.Signals | null) => {
  if (code === null || code <= 128) return { code, signal }
  const name = (Object.keys(os.constants.signals) as Array<NodeJS.Signals>).find(
    (key) => os.constants.signals[key] === code - 128
  )
  return name === undefined ? { code, signal } : { code: null, signal: name }
}

/**
 * Spawns `shell -c script` in its own process group, feeding `output` and `events` from the
 * child's callbacks. Succeeds once the process exists; fails with the spawn error.
 *
 * Sandboxed, the child is bwrap, and the command runs in a session and group of its own
 * (`--new-session`) led by bwrap's init, whose host pid bwrap writes on `SANDBOX_INFO_FD`; the
 * shell writes a line on `SANDBOX_READY_FD` before the command runs, and that group is the one
 * recorded and stopped (bwrap exits when the shell does). When bwrap fails before the shell runs,
 * the group is bwrap's.
 */
const spawnShell = (
  shell: string,
  script: string,
  cwd: string,
  secrets: SecretsService,
  output: HeadTailBuffer,
  events: Queue.Queue<ShellEvent>,
  sandbox?: SandboxSpawn
): Effect.Effect<Running, FsError> =>
  // what fails is the spawn itself (no shell at the path, no such cwd, too many processes): errno errors
  Effect.async<Running, FsError>((resume) => {
    // in every process of the command: tells them apart later from others of a reused group id
    const token = newProcessToken()
    const env = { ...secrets.env, TERM: "dumb", [PROCESS_TOKEN_ENV]: token }
    let child: ChildProcess
    try {
      child =
        sandbox === undefined
          ? spawn(shell, ["-c", script], { cwd, detached: true, stdio: ["ignore", "pipe", "pipe"], env })
          : spawn(
              sandbox.bwrap,
              [
                ...sandbox.args,
                // the token goes to the shell, not to bwrap: bwrap is the launcher, not one of the
                // command's processes (stopped by its token, it would end before the shell it waits for)
                "--setenv",
                PROCESS_TOKEN_ENV,
                token,
                "--info-fd",
                String(SANDBOX_INFO_FD),
                "--",
                shell,
                "-c",
                `echo ready >&${SANDBOX_READY_FD}; exec ${SANDBOX_READY_FD}>&- ${SANDBOX_INFO_FD}>&-\n${script}`
              ],
              {
                cwd,
                detached: true,
                stdio: ["ignore", "pipe", "pipe", "pipe", "pipe"],
                env: { ...secrets.env, TERM: "dumb", TMPDIR: "/tmp" }
              }
            )
    } catch (error) {
      resume(Effect.fail(toFsError(error)))
      return
    }
    const state: Omit<Running, "pid" | "group" | "since"> = {
      child,
      events,
      exit: undefined,
      closed: false,
      clean: false
    }
    let since: number | undefined
    // masked before anything is cut or sampled from it (head and tail, progress, the whole output)
    const redactor = secrets.redactStream()
    const onData = (chunk: Buffer) => {
      const masked = redactor.push(chunk)
      if (masked.length > 0) output.append(Buffer.from(masked.buffer, masked.byteOffset, masked.byteLength))
      Queue.unsafeOffer(events, "data")
    }
    child.stdout?.on("data", onData)
    child.stderr?.on("data", onData)
    child.once("exit", (code, signal) => {
      state.exit = sandbox === undefined ? { code, signal } : sandboxedExit(code, signal)
      Queue.unsafeOffer(events, "exit")
    })
    child.once("close", () => {
      const rest = redactor.end()
      if (rest.length > 0) output.append(Buffer.from(rest.buffer, rest.byteOffset, rest.byteLength))
      state.closed = true
      Queue.unsafeOffer(events, "close")
    })
    const onSpawnError = (error: Error) => {
      // nothing runs: drop the listeners so a late event of this child cannot reach `events`
      child.removeAllListeners("exit")
      child.removeAllListeners("close")
      child.stdout?.destroy()
      child.stderr?.destroy()
      resume(Effect.fail(toFsError(error)))
    }
    child.once("error", onSpawnError)
    const started = (pgid: number) => {
      trackGroup(pgid, token)
      resume(Effect.succeed(Object.assign(state, { pid: pgid, group: { pgid, token }, since })))
    }
    child.once("spawn", () => {
      // read now, while the process is there (not reaped yet even when it already exited)
      since = startTicks(child.pid!)
      child.off("error", onSpawnError)
      // later errors (a failed kill) are not fatal: the exit and close events still tell the end
      child.on("error", () => {})
      const ready = child.stdio[SANDBOX_READY_FD]
      const info = child.stdio[SANDBOX_INFO_FD]
      if (sandbox === undefined || !isReadable(ready) || !isReadable(info)) {
        started(child.pid!)
        return
      }
      // the group is bwrap's init's (`--info-fd` names it) once the shell says it runs; bwrap's own
      // group when bwrap ends without either (a failed setup)
      let said = ""
      let bwrapInfo = ""
      let isReady = false
      let init: number | undefined
      let done = false
      const settle = (pgid: number) => {
        if (done) return
        done = true
        started(pgid)
      }
      const settleIfKnown = () => {
        if (isReady && init !== undefined) settle(init)
      }
      // both read to the end (nothing more comes), so the pipes close with bwrap
      ready.on("data", (chunk: Buffer) => {
        if (done || isReady) return
        said += chunk.toString("utf8")
        isReady = said.includes("\n")
        settleIfKnown()
      })
      info.on("data", (chunk: Buffer) => {
        if (done || init !== undefined) return
        bwrapInfo += chunk.toString("utf8")
        const pid = /"child-pid"\s*:\s*(\d+)/.exec(bwrapInfo)
        if (pid !== null) init = Number(pid[1])
        settleIfKnown()
      })
      let ended = 0
      const onEnd = () => {
        ended += 1
        if (ended === 2) settle(isReady && init !== undefined ? init : child.pid!)
      }
      ready.once("end", onEnd)
      info.once("end", onEnd)
      ready.on("error", () => settle(child.pid!))
      info.on("error", () => settle(child.pid!))
    })
  })

const isReadable = (stream: unknown): stream is NodeJS.ReadableStream & { destroy: () => void } =>
  stream !== null && stream !== undefined && typeof (stream as { on?: unknown }).on === "function"

/** Stops what is left of a command (its group and what left it with its token) and lets go of its pipes. */
const release = (running: Running): Effect.Effect<void> =>
  Effect.gen(function* () {
    // nothing was left at the end, and nothing can start a process since: no second scan of /proc
    if (!running.clean) yield* stopCommand(running.group, running.since)
    untrackGroup(running.pid)
    running.child.stdout?.destroy()
    running.child.stderr?.destroy()
    for (const fd of [SANDBOX_READY_FD, SANDBOX_INFO_FD]) {
      const stream = running.child.stdio[fd]
      if (isReadable(stream)) stream.destroy()
    }
    running.child.removeAllListeners()
  })

/** What stopping a command did, twice over: everything stopped, what is still running after the last. */
const mergeReports = (a: StopReport, b: StopReport): StopReport => {
  const known = new Set(a.stopped.map((p) => p.pid))
  return { stopped: [...a.stopped, ...b.stopped.filter((p) => !known.has(p.pid))], stillRunning: b.stillRunning }
}

const noneStopped: StopReport = { stopped: [], stillRunning: [] }

/**
 * Waits for the command to end, reporting progress as output arrives. Returns whether background
 * processes had to be stopped — ones that held the output open after the shell exited, or were
 * still running when everything was read: in its group, or carrying its token outside it
 * (`setsid`, a daemon) — and what stopping them did.
 */
const awaitEnd = (
  running: Running,
  output: HeadTailBuffer,
  progress: (text: string) => Effect.Effect<void>
): Effect.Effect<{ readonly stopped: boolean; readonly report: StopReport }> =>
  Effect.gen(function* () {
    let stopped = false
    let report = noneStopped
    let deadline: number | undefined // once the shell exited: when to stop waiting for the pipes to close
    while (!running.closed) {
      let next: Option.Option<ShellEvent>
      if (running.exit === undefined) {
        next = Option.some(yield* Queue.take(running.events))
      } else {
        const now = yield* Clock.currentTimeMillis
        deadline ??= now + CLOSE_GRACE_MS
        next =
          now >= deadline
            ? Option.none()
            : yield* Queue.take(running.events).pipe(Effect.timeout(Duration.millis(deadline - now)), Effect.option)
      }
      if (Option.isNone(next)) {
        // the pipes stay open after the group is gone: a process escaped into another group
        // (setsid) and holds them; stop reading rather than wait for it
        if (stopped) break
        // the shell exited but something it started holds the output open
        stopped = true
        report = mergeReports(report, yield* stopCommand(running.group, running.since))
        deadline = (yield* Clock.currentTimeMillis) + AFTER_KILL_MS
        continue
      }
      const rest = yield* Queue.takeAll(running.events)
      const all = Chunk.prepend(rest, next.value)
      if (Chunk.some(all, (e) => e === "data")) yield* progress(output.last(PROGRESS_BYTES))
    }
    if (commandAlive(running.group, running.since)) {
      stopped = true
      report = mergeReports(report, yield* stopCommand(running.group, running.since))
    } else running.clean = true
    return { stopped, report: sortedReport(report) }
  })

/** Processes named in the output at most; the metadata has them all. */
const MAX_NAMED_PROCESSES = 10

const nameProcesses = (list: ReadonlyArray<ProcessInfo>): string => {
  const named = list.slice(0, MAX_NAMED_PROCESSES).map((p) => `${p.pid} ${p.command}`)
  const more = list.length - named.length
  return more > 0 ? `${named.join("; ")}; and ${more} more` : named.join("; ")
}

/**
 * The command lines of stopped processes, the same ones counted (`2 × sleep 30; node server.js`),
 * in order: without pids, so the same command gives the same output in every run (a re-run
 * compares them); the pids are in the metadata.
 */
const nameStopped = (list: ReadonlyArray<ProcessInfo>): string => {
  const counts = new Map<string, number>()
  for (const p of list) counts.set(p.command, (counts.get(p.command) ?? 0) + 1)
  const named = [...counts].slice(0, MAX_NAMED_PROCESSES).map(([command, n]) => (n > 1 ? `${n} × ${command}` : command))
  const more = counts.size - named.length
  return more > 0 ? `${named.join("; ")}; and ${more} more` : named.join("; ")
}

/** A report in a stable order: by command line, then pid. */
const sortedReport = (report: StopReport): StopReport => {
  const order = (a: ProcessInfo, b: ProcessInfo) =>
    a.command < b.command ? -1 : a.command > b.command ? 1 : a.pid - b.pid
  return { stopped: [...report.stopped].sort(order), stillRunning: [...report.stillRunning].sort(order) }
}

/** The lines that say what was stopped and what still runs (none when nothing was). */
export const stopLines = (stopped: boolean, report: StopReport): Array<string> => {
  const lines: Array<string> = []
  if (report.stopped.length > 0) {
    lines.push(
      `(background processes still running when the command ended were stopped: ${nameStopped(report.stopped)})`
    )
  } else if (stopped) {
    lines.push("(background processes still running when the command ended were stopped)")
  }
  if (report.stillRunning.length > 0) {
    lines.push(`(still running — they could not be stopped: ${nameProcesses(report.stillRunning)})`)
  }
  return lines
}

const formatOutput = (
  output: HeadTailBuffer,
  exitCode: number,
  signal: string | undefined,
  stopped: boolean,
  report: StopReport
) => {
  const text = output.bytes === 0 ? "(no output)" : output.text().replace(/\n$/, "")
  const lines = [text, "", ...stopLines(stopped, report)]
  lines.push(signal === undefined ? `Exit code: ${exitCode}` : `Exit code: ${exitCode} (killed by ${signal})`)
  return lines.join("\n")
}

const signalNumber = (signal: NodeJS.Signals): number => os.constants.signals[signal] ?? 0

/** Waits (at most `AFTER_KILL_MS`) for the shell's pipes to close, so the output read so far is all of it. */
const awaitClosed = (running: Running): Effect.Effect<void> =>
  Effect.gen(function* () {
    const deadline = (yield* Clock.currentTimeMillis) + AFTER_KILL_MS
    while (!running.closed) {
      const left = deadline - (yield* Clock.currentTimeMillis)
      if (left <= 0) return
      const next = yield* Queue.take(running.events).pipe(Effect.timeout(Duration.millis(left)), Effect.option)
      if (Option.isNone(next)) return
    }
  })

/** The command's record (see `BashMetadata`): the whole output is stored as a blob when it was kept. */
const recordOf = (
  command: string,
  running: Running,
  output: HeadTailBuffer,
  started: number,
  context: ToolContext,
  stoppedBackground: boolean,
  sandbox: SandboxRecord,
  report: StopReport
): Effect.Effect<BashMetadata, ToolFailure> =>
  Effect.gen(function* () {
    const durationMs = (yield* Clock.currentTimeMillis) - started
    const code = running.exit?.code ?? null
    const signal = running.exit?.signal ?? undefined
    const whole = output.whole()
    const outputBlob = whole === undefined ? undefined : yield* context.storeBlob(whole)
    return {
      command,
      ...(outputBlob === undefined ? {} : { outputBlob }),
      exitCode: code ?? (signal === undefined ? -1 : 128 + signalNumber(signal)),
      ...(signal === undefined ? {} : { signal }),
      bytes: output.bytes,
      truncated: output.truncated,
      durationMs,
      ...(stoppedBackground ? { stoppedBackground: true } : {}),
      sandbox,
      ...(report.stopped.length > 0 ? { stoppedProcesses: report.stopped } : {}),
      ...(report.stillRunning.length > 0 ? { stillRunning: report.stillRunning } : {})
    }
  })

/** How this call's command runs: the settings, and the probe (once per process) when not given. */
const decideSandbox = (options: SandboxOptions): Effect.Effect<SandboxDecision> =>
  options.mode === "off"
    ? Effect.succeed(decide(options, undefined))
    : Effect.map(
        options.status === undefined ? probeSandbox({ network: options.network }) : Effect.succeed(options.status),
        (status) => decide(options, status)
      )

const recordOfDecision = (decision: SandboxDecision, options: SandboxOptions): SandboxRecord =>
  decision._tag === "Sandboxed"
    ? { sandboxed: true, network: options.network }
    : { sandboxed: false, reason: decision._tag === "Unconfined" ? decision.reason : decision.message }

/** The bwrap spawn of a command in `context.cwd` (the workspace), or undefined to run it unconfined. */
const sandboxSpawn = (
  decision: SandboxDecision,
  options: SandboxOptions,
  context: ToolContext
): SandboxSpawn | undefined => {
  if (decision._tag !== "Sandboxed") return undefined
  const plan = makePlan({
    workspace: context.cwd,
    cwd: context.cwd,
    settings: options,
    env: context.secrets.env,
    dirs: sandboxDirs()
  })
  return { bwrap: decision.bwrap, args: bwrapArgs(plan) }
}

const run = Effect.fn("tools.bash")(function* (input: BashInput, context: ToolContext, options: SandboxOptions) {
  const cwd = yield* statPath(context.cwd, context.cwd, "Working directory")
  if (!cwd.isDirectory()) {
    return yield* new ToolFailure({ message: `The working directory ${context.cwd} is not a directory.` })
  }
  const decision = yield* decideSandbox(options)
  const confinement = recordOfDecision(decision, options)
  if (decision._tag === "Refused") {
    return yield* new ToolFailure({
      message: decision.message,
      metadata: { command: input.command, sandbox: confinement }
    })
  }
  const sandbox = sandboxSpawn(decision, options, context)
  const started = yield* Clock.currentTimeMillis
  const output = new HeadTailBuffer(OUTPUT_HEAD_BYTES, OUTPUT_TAIL_BYTES).keepAll(FULL_OUTPUT_BYTES)
  const events = yield* Queue.unbounded<ShellEvent>()
  const script = `exec 2>&1; ${input.command}`
  // sandboxed, the shell is looked up as bwrap will look it up: on the command's PATH
  const firstShell = sandbox === undefined || onPath("bash", context.secrets.env.PATH) !== undefined ? "bash" : "sh"
  const running = yield* Effect.acquireRelease(
    spawnShell(firstShell, script, context.cwd, context.secrets, output, events, sandbox).pipe(
      Effect.catchIf(
        (error) => sandbox === undefined && errnoCode(error) === "ENOENT",
        () => spawnShell("sh", script, context.cwd, context.secrets, output, events)
      ),
      Effect.mapError((error) => new ToolFailure({ message: `Could not start the command: ${error.message}` })),
      // the group, so that a later run can stop it if this process dies (kill -9) while it runs;
      // recorded in the (uninterruptible) acquire: an interrupt right after the spawn finds it recorded
      // (when the record cannot be written, the command is stopped: nothing runs unrecorded)
      Effect.tap((running) => context.recordProcess(running.group).pipe(Effect.onError(() => release(running))))
    ),
    (running, exit) =>
      Exit.isInterrupted(exit)
        ? // stopped by a timeout or an interrupt: the group is stopped, then what it did is recorded
          stopCommand(running.group, running.since).pipe(
            Effect.tap(() => awaitClosed(running)),
            Effect.flatMap((report) =>
              recordOf(input.command, running, output, started, context, false, confinement, sortedReport(report))
            ),
            Effect.flatMap(context.recordStopped),
            // the log is failing (the caller fails the turn with its error): the group is stopped anyway
            Effect.catchAll(() => Effect.void),
            Effect.ensuring(release(running))
          )
        : release(running)
  )
  const { stopped, report } = yield* awaitEnd(running, output, context.progress)
  const metadata = yield* recordOf(input.command, running, output, started, context, stopped, confinement, report)
  const text = formatOutput(output, metadata.exitCode, metadata.signal, stopped, report)
  const hint = sandbox === undefined ? undefined : sandboxHint(options, metadata.exitCode, output.text())
  return { output: hint === undefined ? text : `${text}\n${hint}`, metadata } satisfies ToolOutput
}, Effect.scoped)

/** Whether the tool's description should tell the model about the sandbox. */
const describesSandbox = (options: SandboxOptions): boolean =>
  options.mode === "on" || (options.mode === "auto" && options.status?._tag === "Available")

/**
 * The `bash` tool `tool` (as `makeBash` made it) with its commands run in `sandbox` instead of the
 * one it was made with; what the model is told (its description) and its timeouts stay as they
 * were. A re-run confines its commands so (docs/rerun.md).
 */
export const withSandbox = (tool: ToolDefinition<BashInput>, sandbox: SandboxOptions): ToolDefinition<BashInput> => ({
  ...tool,
  execute: (input, context) => run(input, context, sandbox)
})

/** Makes the `bash` tool with the configured default and maximum timeouts and sandbox. */
export const makeBash = (settings: BashSettings) => {
  const sandbox = settings.sandbox ?? defaultSandboxSettings
  return defineTool<BashInput>({
    name: "bash",
    description: [
      "Runs a shell command (bash -c) in the working directory and returns its output and exit code.",
      "- Each call starts a fresh shell: `cd`, `export` and shell variables do not carry over to the next call. Chain dependent steps with `&&` in one command, or use absolute paths.",
      "- stdin is closed: interactive commands cannot be answered. Pass flags that make them non-interactive (`--yes`, `-y`, `--no-edit`, `CI=1`); `TERM` is `dumb`.",
      "- stdout and stderr are merged, in the order they were written.",
      `- The output is capped: beyond ${Math.round((OUTPUT_HEAD_BYTES + OUTPUT_TAIL_BYTES) / 1024)} KB only the first ${OUTPUT_HEAD_BYTES / 1024} KB and the last ${OUTPUT_TAIL_BYTES / 1024} KB are shown. Filter long output yourself (\`| tail -50\`, \`| grep error\`, \`| head\`).`,
      "- The output ends with `Exit code: N`. A non-zero exit code is not a tool error: read the output to see what went wrong.",
      `- Timeout: ${settings.timeoutMs} ms unless you give \`timeoutMs\` (at most ${settings.maxTimeoutMs} ms). A command that runs out of time is stopped together with everything it started.`,
      "- Background processes (`cmd &`) are stopped when the command ends: this tool cannot keep a server running after the call.",
      "- Prefer the read, list, glob and grep tools over `cat`, `ls`, `find` and `grep` to look at files; use bash for git, builds, tests, package managers and the like.",
      "- Quote paths that contain spaces.",
      ...(describesSandbox(sandbox) ? sandboxDescription(sandbox) : [])
    ].join("\n"),
    input: BashInput,
    permission: (input) => ({ subject: input.command }),
    // a command can change any file: the workspace is snapshotted around it
    snapshotWorkspace: true,
    timeoutMs: (input) => Math.min(input.timeoutMs ?? settings.timeoutMs, settings.maxTimeoutMs),
    execute: (input, context) => run(input, context, sandbox)
  })
}
