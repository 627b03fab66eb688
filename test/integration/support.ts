/**
 * Shared pieces of the integration tests: a workspace whose `logbook.json` points `logbook run` at
 * a scripted OpenAI-compatible server, the log read back from the SQLite file in process, process
 * liveness checks, and bounded polling (tests wait on files and events, never on the clock).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect, Option, Stream } from "effect"
import type { Envelope } from "../../src/domain/Events.js"
import { SessionId } from "../../src/domain/Ids.js"
import { EventStore } from "../../src/store/EventStore.js"
import type { SessionState } from "../../src/store/Projection.js"
import { restore } from "../../src/store/Snapshots.js"
import { scratchDb, scratchDir } from "../support/cli.js"
import { groupOf, hostPid } from "../support/pids.js"
import {
  type RecordedRequest,
  Reply,
  type ScriptedServer,
  type ScriptedToolCall,
  startScriptedServer
} from "../support/scriptedServer.js"

/** Retry settings that keep backoff waits at a few milliseconds. */
/** A tool call of a scripted reply, its arguments as JSON. */
export const toolCall = (id: string, name: string, args: Record<string, unknown>): ScriptedToolCall => ({
  id,
  name,
  arguments: JSON.stringify(args)
})

/** A scripted reply that calls `bash` with `command`. */
export const bashReply = (id: string, command: string) =>
  Reply.stream({ toolCalls: [toolCall(id, "bash", { command })] })

export const fastRetry = { initialDelayMs: 1, maxDelayMs: 5 }

/** The event every run ends with: `session.status idle` (match with `toMatchObject`). */
export const idle = { type: "session.status", payload: { status: { _tag: "idle" } } }

export interface WorkspaceOptions {
  /** the `retry` object of the config (default `fastRetry`) */
  readonly retry?: Record<string, number>
  /** extra top-level config fields */
  readonly config?: Record<string, unknown>
}

export interface Workspace {
  /** the workspace directory, passed as `--cwd` */
  readonly dir: string
  /** a fresh database file, passed as `--db` */
  readonly db: string
  /** `run --db <db> --cwd <dir>` */
  readonly runArgs: ReadonlyArray<string>
}

/** A workspace whose config's model is `local/scripted`, served by `server`. */
export const makeWorkspace = (server: ScriptedServer, options: WorkspaceOptions = {}): Workspace => {
  const dir = scratchDir()
  const db = scratchDb()
  const config = {
    model: "local/scripted",
    retry: options.retry ?? fastRetry,
    provider: {
      local: {
        type: "openai-compatible",
        baseURL: `${server.url}/v1`,
        models: { scripted: { price: { input: 1, output: 2 } } }
      }
    },
    ...options.config
  }
  fs.writeFileSync(path.join(dir, "logbook.json"), JSON.stringify(config, null, 2))
  return { dir, db, runArgs: ["run", "--db", db, "--cwd", dir] }
}

/**
 * The user's own config file (`$XDG_CONFIG_HOME/logbook/config.json`, in a fresh directory) holding
 * `config`; returns the environment that points `logbook` at it. What only the user's file may say
 * (where an API key goes, permissions looser than the user's) goes here, not in the workspace's.
 */
export const userConfigEnv = (config: Record<string, unknown>): { readonly XDG_CONFIG_HOME: string } => {
  const home = scratchDir()
  fs.mkdirSync(path.join(home, "logbook"))
  fs.writeFileSync(path.join(home, "logbook", "config.json"), JSON.stringify(config, null, 2))
  return { XDG_CONFIG_HOME: home }
}

/**
 * The environment of a user whose own config lets the agent's sandboxed commands write in `dir`
 * (`tools.bash.writablePaths`): for a test whose commands leave files (their pids) outside the
 * workspace, which the sandbox otherwise refuses (docs/tools.md, "The sandbox").
 */
export const writableEnv = (dir: string): { readonly XDG_CONFIG_HOME: string } =>
  userConfigEnv({ tools: { bash: { writablePaths: [dir] } } })

/** The key variable a keyed provider of the user's config reads (`keyedProviderEnv`). */
export const TEST_KEY_ENV = "LOGBOOK_TEST_KEY"

/**
 * The environment for a workspace whose `model` (`<provider>/<model>`) names a provider the user's
 * own config defines (a keyed provider may only be routed there): `provider` settings served by
 * `server` (`baseURL` `${server.url}/v1`), its key in `TEST_KEY_ENV`; the developer's own
 * Anthropic and OpenAI keys stay out.
 */
export const keyedProviderEnv = (
  server: ScriptedServer,
  model: string,
  provider: Record<string, unknown>,
  key: string
): Record<string, string | undefined> => ({
  ...userConfigEnv({
    provider: { [model.split("/")[0]!]: { ...provider, baseURL: `${server.url}/v1`, apiKeyEnv: TEST_KEY_ENV } }
  }),
  [TEST_KEY_ENV]: key,
  ANTHROPIC_API_KEY: undefined,
  OPENAI_API_KEY: undefined
})

/** Collects servers and cleanup functions of one test; `release` runs them all (in `afterEach`). */
export const makeJanitor = () => {
  const tasks: Array<() => unknown> = []
  return {
    server: async (): Promise<ScriptedServer> => {
      const server = await startScriptedServer()
      tasks.push(() => server.close())
      return server
    },
    defer: (task: () => unknown) => {
      tasks.push(task)
    },
    /**
     * At cleanup, kills the process group of the shell whose pid `file` holds (a command's
     * `echo $$ > file`, run in `cwd`, default the file's directory), if it still runs.
     */
    killGroupIn: (file: string, cwd = path.dirname(file)) => {
      tasks.push(() => {
        if (!fs.existsSync(file)) return
        const pid = Number(fs.readFileSync(file, "utf8").trim())
        if (!Number.isInteger(pid) || pid < 1) return
        const pgid = groupOf(hostPid(pid, cwd))
        if (pgid !== undefined && pgid > 1) killGroup(pgid)
      })
    },
    release: async () => {
      for (const task of tasks.splice(0).reverse()) {
        try {
          await task()
        } catch {
          // cleanup goes on
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// the log

const withStore = <A, E>(db: string, effect: Effect.Effect<A, E, EventStore>): Promise<A> =>
  Effect.runPromise(effect.pipe(Effect.provide(EventStore.layerSqlite({ filename: db }))) as Effect.Effect<A>)

/** Every event of the session, in order. */
export const readLog = (db: string, sessionId: string): Promise<ReadonlyArray<Envelope>> =>
  withStore(
    db,
    Effect.flatMap(EventStore, (store) => Stream.runCollect(store.read(SessionId.make(sessionId)))).pipe(
      Effect.map((chunk) => Array.from(chunk))
    )
  )

/** A blob of the log as UTF-8 text (fails when it is missing). */
export const blobText = (db: string, hash: string): Promise<string> =>
  withStore(
    db,
    Effect.flatMap(EventStore, (store) => store.getBlob(hash)).pipe(
      Effect.map((blob) => new TextDecoder().decode(Option.getOrThrow(blob)))
    )
  )

/** The session's projection (newest snapshot + the events after it). */
export const restoreState = (db: string, sessionId: string): Promise<SessionState> =>
  withStore(db, restore(SessionId.make(sessionId)))

/** The id of the latest session of `cwd`. */
export const latestSession = (db: string, cwd: string): Promise<string> =>
  withStore(
    db,
    Effect.flatMap(EventStore, (store) => store.sessions({ cwd, limit: 1 })).pipe(
      Effect.map((list) => {
        if (list.length === 0) throw new Error(`no session in ${cwd}`)
        return list[0]!.id as string
      })
    )
  )

export const types = (log: ReadonlyArray<Envelope>): ReadonlyArray<string> => log.map((e) => e.type)

export const ofType = <T extends Envelope["type"]>(
  log: ReadonlyArray<Envelope>,
  type: T
): ReadonlyArray<Extract<Envelope, { type: T }>> =>
  log.filter((e): e is Extract<Envelope, { type: T }> => e.type === type)

// ---------------------------------------------------------------------------------------------
// the requests the model got

export interface WireMessage {
  readonly role: string
  readonly content?: unknown
  readonly tool_call_id?: string
  readonly tool_calls?: ReadonlyArray<{ readonly id: string; readonly function: { readonly name: string } }>
}

/** The messages of a recorded request, without the system prompt. */
export const messagesOf = (request: RecordedRequest): ReadonlyArray<WireMessage> =>
  (request.body.messages as ReadonlyArray<WireMessage>).filter((m) => m.role !== "system")

/** Tool call ids of the request's assistant messages that have no `tool` message answering them. */
export const unanswered = (request: RecordedRequest): ReadonlyArray<string> => {
  const messages = messagesOf(request)
  const answered = new Set(messages.filter((m) => m.role === "tool").map((m) => m.tool_call_id))
  return messages.flatMap((m) => (m.tool_calls ?? []).map((c) => c.id)).filter((id) => !answered.has(id))
}

export const toolResult = (request: RecordedRequest, callId: string): WireMessage | undefined =>
  messagesOf(request).find((m) => m.role === "tool" && m.tool_call_id === callId)

/** The text of a message's content (a string, or the text parts of an array). */
export const contentText = (message: WireMessage | undefined): string => {
  const content = message?.content
  if (typeof content === "string") return content
  if (Array.isArray(content)) {
    return content
      .map((part) => (typeof part === "string" ? part : String((part as { text?: unknown }).text ?? "")))
      .join("")
  }
  return ""
}

// ---------------------------------------------------------------------------------------------
// text output

/**
 * The lines of a run's stderr that are logbook's own words (`logbook: …`: notices, warnings, the
 * error sentence), without the transcript of the turn (tool lines, the usage line …) around them.
 */
export const notices = (stderr: string): ReadonlyArray<string> =>
  stderr.split("\n").filter((line) => line.startsWith("logbook: "))

// ---------------------------------------------------------------------------------------------
// JSON output

export type JsonLine = Record<string, unknown> & { readonly type: string }

/** Every stdout line parsed as JSON (throws on a line that is not JSON). */
export const jsonLines = (stdout: string): ReadonlyArray<JsonLine> =>
  stdout
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => {
      try {
        return JSON.parse(line) as JsonLine
      } catch {
        throw new Error(`a stdout line is not JSON: ${line}`)
      }
    })

// ---------------------------------------------------------------------------------------------
// processes and polling

/**
 * Whether `pid` is a live process: it exists and is not a zombie. (Where init does not reap
 * orphans, as in some containers, a killed background process stays a zombie: `kill(pid, 0)`
 * succeeds on it although nothing runs.)
 */
export const isLive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const state = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0]
    return state !== "Z" && state !== "X"
  } catch {
    return process.platform !== "linux"
  }
}

/** Kills a process group, ignoring a group that is gone. */
export const killGroup = (pgid: number): void => {
  try {
    process.kill(-pgid, "SIGKILL")
  } catch {
    // gone already
  }
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Polls `probe` every 20 ms until it returns something other than undefined; rejects with `what`
 * after `timeoutMs`. The bound only stops a broken test from hanging: nothing is asserted on time.
 */
export const until = async <A>(
  what: string,
  probe: () => A | undefined | Promise<A | undefined>,
  timeoutMs = 20_000
): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  while (true) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`waited ${timeoutMs} ms for ${what}`)
    await pause(20)
  }
}

/** The lines of a file once it has at least `count` complete lines. */
export const fileLines = (file: string, count: number): Promise<ReadonlyArray<string>> =>
  until(`${count} lines in ${file}`, () => {
    if (!fs.existsSync(file)) return undefined
    const text = fs.readFileSync(file, "utf8")
    const lines = text.split("\n").filter((line) => line.trim() !== "")
    return text.endsWith("\n") && lines.length >= count ? lines : undefined
  })
