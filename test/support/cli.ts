/**
 * Helpers to run the built `logbook` binary (dist/bin.js) as a user does, and to seed databases.
 *
 * Every run gets a controlled environment: HOME points at a fresh temporary directory (so the
 * default database path never touches the real home), XDG_DATA_HOME, LOGBOOK_DB, NO_COLOR and
 * FORCE_COLOR are removed unless given, and TZ is fixed so local times are deterministic.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"
import * as Events from "../../src/domain/Events.js"
import { CallId, EventId, MessageId, PartId, SessionId, TurnId } from "../../src/domain/Ids.js"
import { EventStore } from "../../src/store/EventStore.js"
import { tempDir } from "./tmp.js"

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")
export const binPath = path.join(root, "dist", "bin.js")

/** The time zone CLI runs use: UTC+05:30 with no DST, so local time visibly differs from UTC. */
export const TEST_TZ = "Asia/Kolkata"

export interface RunOptions {
  /** variables added to (or, when undefined, removed from) the controlled environment */
  readonly env?: Readonly<Record<string, string | undefined>>
  readonly cwd?: string
  readonly timeoutMs?: number
  /** written to the process's stdin, which is then closed (default: stdin is /dev/null) */
  readonly input?: string
  /** run as this user and group (the tests run as root; a read-only database needs an ordinary user) */
  readonly uid?: number
  readonly gid?: number
}

export interface RunResult {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

let scratchRoot: string | undefined
/** A new empty directory, inside one temporary directory per test file (removed at exit). */
export const scratchDir = (): string => {
  scratchRoot ??= tempDir("logbook-cli-")
  return fs.mkdtempSync(path.join(scratchRoot, "d-"))
}

/** A path for a new database file in a fresh scratch directory. */
export const scratchDb = (): string => path.join(scratchDir(), "logbook.db")

let home: string | undefined
/** One empty HOME per test file, so the default database path never points into the real home. */
export const testHome = (): string => {
  home ??= scratchDir()
  return home
}

/** `arg` as one word of a POSIX shell command line (single-quoted). */
export const shellQuote = (arg: string): string => `'${arg.replace(/'/g, `'\\''`)}'`

/** The environment CLI runs get: this one without logbook's variables, a scratch HOME, `TEST_TZ`. */
export const baseEnv = (extra: RunOptions["env"] = {}): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = { ...process.env }
  // nothing of the machine's own set-up reaches the CLI: its settings, config, keys and trace
  // export (a test sets what it needs in `extra`)
  for (const name of Object.keys(env)) if (name.startsWith("LOGBOOK_") || name.startsWith("OTEL_")) delete env[name]
  for (const name of [
    "XDG_DATA_HOME",
    "XDG_CONFIG_HOME",
    "NO_COLOR",
    "FORCE_COLOR",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY"
  ])
    delete env[name]
  env.HOME = testHome()
  env.TZ = TEST_TZ
  for (const [name, value] of Object.entries(extra)) {
    if (value === undefined) delete env[name]
    else env[name] = value
  }
  return env
}

const start = (args: ReadonlyArray<string>, options: RunOptions): ChildProcess => {
  const child = spawn(process.execPath, [binPath, ...args], {
    cwd: options.cwd ?? root,
    env: baseEnv(options.env),
    stdio: [options.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
    ...(options.uid === undefined ? {} : { uid: options.uid }),
    ...(options.gid === undefined ? {} : { gid: options.gid })
  })
  if (options.input !== undefined) {
    // a process that exits before reading its stdin makes the write fail with EPIPE: not an error here
    child.stdin!.on("error", () => {})
    child.stdin!.end(options.input)
  }
  return child
}

/** Runs `logbook <args>` to completion (killed after `timeoutMs`, default 30 s). */
export const runCli = (args: ReadonlyArray<string>, options: RunOptions = {}): Promise<RunResult> =>
  new Promise((resolve, reject) => {
    const child = start(args, options)
    let stdout = ""
    let stderr = ""
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk
    })
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk
    })
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`logbook ${args.join(" ")} did not finish in ${options.timeoutMs ?? 30_000} ms\n${stderr}`))
    }, options.timeoutMs ?? 30_000)
    child.on("error", (error) => {
      clearTimeout(timer)
      reject(error)
    })
    child.on("close", (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr })
    })
  })

/** A running `logbook` process whose stdout is read line by line. */
export interface LiveCli {
  readonly child: ChildProcess
  /** complete stdout lines so far */
  readonly lines: () => ReadonlyArray<string>
  readonly stderr: () => string
  /** resolves once at least `count` lines have arrived; rejects after `timeoutMs` (default 15 s) */
  readonly waitForLines: (count: number, timeoutMs?: number) => Promise<ReadonlyArray<string>>
  /** resolves with the exit code (or signal) when the process has ended */
  readonly exited: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
}

export const spawnCli = (args: ReadonlyArray<string>, options: RunOptions = {}): LiveCli => {
  const child = start(args, options)
  const lines: Array<string> = []
  let partial = ""
  let stderr = ""
  const waiters = new Set<() => void>()
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    partial += chunk
    const parts = partial.split("\n")
    partial = parts.pop()!
    lines.push(...parts)
    for (const wake of waiters) wake()
  })
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
    stderr += chunk
  })
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on("close", (code, signal) => {
      for (const wake of waiters) wake()
      resolve({ code, signal })
    })
  })
  const waitForLines = (count: number, timeoutMs = 30_000) =>
    new Promise<ReadonlyArray<string>>((resolve, reject) => {
      const check = () => {
        if (lines.length >= count) {
          cleanup()
          resolve(lines.slice())
        } else if (child.exitCode !== null || child.signalCode !== null) {
          cleanup()
          reject(
            new Error(
              `logbook exited (${child.exitCode ?? child.signalCode}) after ${lines.length} of ${count} lines\n${stderr}`
            )
          )
        }
      }
      const timer = setTimeout(() => {
        cleanup()
        reject(
          new Error(`waited ${timeoutMs} ms for ${count} lines, got ${lines.length}:\n${lines.join("\n")}\n${stderr}`)
        )
      }, timeoutMs)
      const cleanup = () => {
        clearTimeout(timer)
        waiters.delete(check)
      }
      waiters.add(check)
      check()
    })
  return { child, lines: () => lines.slice(), stderr: () => stderr, waitForLines, exited }
}

// ---------------------------------------------------------------------------------------------
// seeding databases (in-process, with the real SQLite layer)

/** Appends events to sessions of the database `file` (created when missing) and returns the envelopes. */
export const seed = (
  file: string,
  sessions: ReadonlyArray<{ readonly id: string; readonly events: ReadonlyArray<Events.NewEvent> }>
): Promise<ReadonlyArray<Events.Envelope>> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const store = yield* EventStore
      const out: Array<Events.Envelope> = []
      for (const session of sessions) {
        out.push(...(yield* store.append(SessionId.make(session.id), session.events)))
      }
      return out
    }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file })))
  )

/** 2025-01-15 10:00:00 UTC, i.e. 15:30:00 in TEST_TZ. */
export const T0 = Date.UTC(2025, 0, 15, 10, 0, 0)

const at = <E extends Events.Event>(event: E, ms: number, id?: string): Events.NewEvent =>
  ({ ...event, at: ms, ...(id === undefined ? {} : { id: EventId.make(id) }) }) as Events.NewEvent

/**
 * A session with a user message, an assistant message with reasoning and text, a completed tool
 * call (1234 ms), a call interrupted by the user (250 ms) and a call that timed out (30 s).
 */
export const sampleSession = (title = "Fix the failing test", t0 = T0): ReadonlyArray<Events.NewEvent> => {
  const m1 = MessageId.make("m-user-1")
  const a1 = MessageId.make("m-assistant-1")
  const turn = TurnId.make("turn-1")
  const usage = { input: 1200, output: 80, reasoning: 10, cacheRead: 0, cacheWrite: 0, cost: 0.0123 }
  return [
    at(Events.make("session.created", { title, cwd: "/home/dev/project", model: "test-model" }), t0),
    at(Events.make("user.message", { messageId: m1, text: "Please fix the failing test", mode: "prompt" }), t0 + 1000),
    at(Events.make("turn.started", { turnId: turn, messageIds: [m1] }), t0 + 1001),
    at(Events.make("session.status", { status: { _tag: "busy" } }), t0 + 1002),
    at(Events.make("assistant.started", { messageId: a1, model: "test-model" }), t0 + 1100),
    at(Events.make("step.started", { messageId: a1, step: 0 }), t0 + 1101),
    at(
      Events.make("reasoning.delta", { messageId: a1, partId: PartId.make("p-r"), delta: "Let me look at the test." }),
      t0 + 1200
    ),
    at(
      Events.make("text.delta", { messageId: a1, partId: PartId.make("p-t"), delta: "I will run the tests first." }),
      t0 + 1300
    ),
    at(Events.make("tool.pending", { messageId: a1, callId: CallId.make("call-ok"), tool: "bash" }), t0 + 1400),
    at(
      Events.make("tool.invoked", {
        messageId: a1,
        callId: CallId.make("call-ok"),
        tool: "bash",
        input: { command: "npm test" }
      }),
      t0 + 2000
    ),
    at(Events.make("tool.finished", { callId: CallId.make("call-ok"), output: "1 passed\nall good" }), t0 + 3234),
    at(
      Events.make("tool.invoked", {
        messageId: a1,
        callId: CallId.make("call-int"),
        tool: "read",
        input: { path: "src/app.ts" }
      }),
      t0 + 4000
    ),
    at(
      Events.make("tool.failed", {
        callId: CallId.make("call-int"),
        error: "cancelled by the user",
        interrupted: true,
        reason: "user"
      }),
      t0 + 4250
    ),
    at(
      Events.make("tool.invoked", {
        messageId: a1,
        callId: CallId.make("call-slow"),
        tool: "bash",
        input: { command: "sleep 100" }
      }),
      t0 + 5000
    ),
    at(Events.make("tool.timeout", { callId: CallId.make("call-slow"), timeoutMs: 30_000 }), t0 + 35_000),
    at(
      Events.make("tool.failed", { callId: CallId.make("call-slow"), error: "timed out after 30s", timedOut: true }),
      t0 + 35_000
    ),
    at(Events.make("step.finished", { messageId: a1, step: 0, finishReason: "tool-calls", usage }), t0 + 35_100),
    at(Events.make("assistant.completed", { messageId: a1, finishReason: "tool-calls" }), t0 + 35_200),
    at(Events.make("turn.interrupted", { turnId: turn, reason: "user" }), t0 + 35_300),
    at(Events.make("session.status", { status: { _tag: "idle" } }), t0 + 35_400)
  ]
}
