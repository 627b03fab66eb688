/**
 * Runs one command hook (docs/hooks.md): a shell command given an event as JSON on stdin, whose
 * exit code, stdout and stderr are its answer. It runs as `bash` commands do: `bash -c` (`sh -c`
 * where there is no bash) in the workspace, in a process group of its own, in the same sandbox
 * (Sandbox.ts) when one is used, with the same environment (logbook's API keys removed) plus
 * `$CLAUDE_PROJECT_DIR` / `$LOGBOOK_PROJECT_DIR`. Past its timeout, or when the caller is
 * interrupted, the whole group is stopped (processGroup.ts). stdout and stderr are kept up to a
 * bound each; what is beyond is counted, not kept.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { Clock, Deferred, Duration, Effect, Exit, Schema } from "effect"
import { onPath } from "./executables.js"
import {
  newProcessToken,
  PROCESS_TOKEN_ENV,
  type ProcessGroup,
  startTicks,
  stopCommand,
  trackGroup,
  untrackGroup
} from "./processGroup.js"
import { bwrapArgs, decide, makePlan, probeSandbox, type SandboxOptions, sandboxDirs } from "./Sandbox.js"

/** The most bytes of a hook's stdout, and of its stderr, that are kept. */
export const HOOK_OUTPUT_BYTES = 256 * 1024

export interface CommandHookSpec {
  /** the shell command (`bash -c`) */
  readonly command: string
  /** the workspace: the command's working directory and `$CLAUDE_PROJECT_DIR` */
  readonly cwd: string
  /** the event, as JSON text on stdin */
  readonly input: string
  readonly timeoutMs: number
  /** the environment it starts from (`Secrets.env`: the API key variables removed) */
  readonly env: Readonly<Record<string, string | undefined>>
  readonly sandbox: SandboxOptions
  /** the most bytes kept of stdout and of stderr each (default `HOOK_OUTPUT_BYTES`) */
  readonly maxOutputBytes?: number | undefined
}

/** How a hook command ended. */
export interface CommandHookResult {
  /** its exit code; undefined when it was stopped (timed out) or killed by a signal */
  readonly exitCode: number | undefined
  readonly signal?: string | undefined
  readonly stdout: string
  readonly stderr: string
  /** stdout or stderr was longer than the bound: only its start is kept */
  readonly truncated: boolean
  readonly timedOut: boolean
  readonly ms: number
  readonly sandboxed: boolean
}

/** The hook could not be started (no shell, no such directory, a sandbox required and missing). */
export class CommandHookError extends Schema.TaggedError<CommandHookError>()("CommandHookError", {
  message: Schema.String
}) {}

/** The start of a byte stream, up to `max` bytes, and how many came in all. */
class Capped {
  private readonly chunks: Array<Buffer> = []
  private kept = 0
  bytes = 0
  constructor(private readonly max: number) {}
  append(chunk: Buffer): void {
    this.bytes += chunk.length
    if (this.kept >= this.max) return
    const take = chunk.subarray(0, this.max - this.kept)
    this.chunks.push(take)
    this.kept += take.length
  }
  get truncated(): boolean {
    return this.bytes > this.kept
  }
  text(): string {
    return Buffer.concat(this.chunks).toString("utf8")
  }
}

interface Started {
  readonly child: ChildProcess
  readonly group: ProcessGroup
  readonly since: number | undefined
  readonly ended: Deferred.Deferred<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
}

const spawnHook = (
  shell: string,
  spec: CommandHookSpec,
  bwrap: { readonly path: string; readonly args: ReadonlyArray<string> } | undefined,
  stdout: Capped,
  stderr: Capped
): Effect.Effect<Started, CommandHookError> =>
  Effect.flatMap(Deferred.make<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>(), (ended) =>
    Effect.async<Started, CommandHookError>((resume) => {
      const token = newProcessToken()
      const env = {
        ...spec.env,
        TERM: "dumb",
        CLAUDE_PROJECT_DIR: spec.cwd,
        LOGBOOK_PROJECT_DIR: spec.cwd,
        [PROCESS_TOKEN_ENV]: token
      }
      let child: ChildProcess
      try {
        child =
          bwrap === undefined
            ? spawn(shell, ["-c", spec.command], { cwd: spec.cwd, detached: true, stdio: "pipe", env })
            : spawn(
                bwrap.path,
                [...bwrap.args, "--setenv", PROCESS_TOKEN_ENV, token, "--", shell, "-c", spec.command],
                { cwd: spec.cwd, detached: true, stdio: "pipe", env: { ...env, TMPDIR: "/tmp" } }
              )
      } catch (error) {
        resume(Effect.fail(new CommandHookError({ message: `could not start the hook: ${String(error)}` })))
        return
      }
      child.stdout?.on("data", (chunk: Buffer) => stdout.append(chunk))
      child.stderr?.on("data", (chunk: Buffer) => stderr.append(chunk))
      // a hook that does not read its stdin closes the pipe: not an error of ours
      child.stdin?.on("error", () => {})
      child.once("close", (code, signal) => Deferred.unsafeDone(ended, Exit.succeed({ code, signal })))
      child.once("error", (error) => {
        child.removeAllListeners("close")
        resume(Effect.fail(new CommandHookError({ message: `could not start the hook: ${error.message}` })))
      })
      child.once("spawn", () => {
        child.removeAllListeners("error")
        child.on("error", () => {})
        const pgid = child.pid!
        trackGroup(pgid, token)
        child.stdin?.end(spec.input)
        resume(Effect.succeed({ child, group: { pgid, token }, since: startTicks(pgid), ended }))
      })
    })
  )

/** Stops whatever of the hook is left (its group, and what carries its token) and lets go of its pipes. */
const release = (started: Started): Effect.Effect<void> =>
  Effect.gen(function* () {
    yield* stopCommand(started.group, started.since)
    untrackGroup(started.group.pgid)
    started.child.stdin?.destroy()
    started.child.stdout?.destroy()
    started.child.stderr?.destroy()
    started.child.removeAllListeners()
  })

/** Runs a hook command to its end or its timeout (then its group is stopped); fails only when it cannot start. */
export const runCommandHook = Effect.fn("tools.commandHook")(function* (spec: CommandHookSpec) {
  const decision =
    spec.sandbox.mode === "off"
      ? decide(spec.sandbox, undefined)
      : decide(spec.sandbox, spec.sandbox.status ?? (yield* probeSandbox({ network: spec.sandbox.network })))
  if (decision._tag === "Refused") return yield* new CommandHookError({ message: decision.message })
  const bwrap =
    decision._tag === "Sandboxed"
      ? {
          path: decision.bwrap,
          args: bwrapArgs(
            makePlan({ workspace: spec.cwd, cwd: spec.cwd, settings: spec.sandbox, env: spec.env, dirs: sandboxDirs() })
          )
        }
      : undefined
  const max = spec.maxOutputBytes ?? HOOK_OUTPUT_BYTES
  const stdout = new Capped(max)
  const stderr = new Capped(max)
  const shell = onPath("bash", spec.env.PATH) !== undefined ? "bash" : "sh"
  const started = yield* Clock.currentTimeMillis
  const running = yield* Effect.acquireRelease(spawnHook(shell, spec, bwrap, stdout, stderr), release)
  const exit = yield* Deferred.await(running.ended).pipe(Effect.timeout(Duration.millis(spec.timeoutMs)), Effect.option)
  const ms = (yield* Clock.currentTimeMillis) - started
  const base = {
    stdout: stdout.text(),
    stderr: stderr.text(),
    truncated: stdout.truncated || stderr.truncated,
    ms,
    sandboxed: bwrap !== undefined
  }
  if (exit._tag === "None") return { ...base, exitCode: undefined, timedOut: true } satisfies CommandHookResult
  const { code, signal } = exit.value
  return {
    ...base,
    exitCode: code ?? undefined,
    ...(signal !== null ? { signal } : {}),
    timedOut: false
  } satisfies CommandHookResult
}, Effect.scoped)
