/**
 * `McpClient`: logbook's own interface to MCP servers, over `@modelcontextprotocol/sdk` (only this
 * module and its `internal/` ones import it, so the SDK can be swapped). `connect` starts a server (stdio, in its own
 * process group, with a minimal environment, in the sandbox of `bash` where it can run; or
 * Streamable HTTP, with OAuth where the server requires it: `internal/oauth.ts`) and lists its tools; a
 * connection calls a tool (interrupting the call sends the protocol's cancel) and is closed with
 * its scope. Everything is bounded: the start, each call, a message's size, the number of tools.
 * A server that dies during a call fails that call, and the next call starts it again, once.
 */
import * as fs from "node:fs"
import * as NodePath from "node:path"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import { Context, Duration, Effect, Layer, Schema, Scope } from "effect"
import { isExecutableFile, onPath } from "../tools/executables.js"
import { stopGroup } from "../tools/processGroup.js"
import { bwrapArgs, decide, makePlan, type SandboxOptions, sandboxDirs } from "../tools/Sandbox.js"
import { version } from "../version.js"
import { cappedFetch } from "./internal/cappedFetch.js"
import { type Environment, expand, expandAll, serverEnvironment } from "./internal/environment.js"
import { AuthStore, LogbookOAuthProvider } from "./internal/oauth.js"
import { type ServerRecords, serverRecords } from "./internal/serverRecords.js"
import type { StdioProcessTransport } from "./internal/stdioTransport.js"
import type { Authorization, McpServerSpec } from "./McpSettings.js"

export { sweepOrphanServers } from "./internal/serverRecords.js"
export type { Authorization } from "./McpSettings.js"

/** Where the groups of running stdio servers are noted: `<data home>/logbook/mcp-servers` (the sandbox hides it). */
export const serverRecordsDir = (env: {
  readonly XDG_DATA_HOME?: string | undefined
  readonly HOME: string
}): string => {
  const xdg = env.XDG_DATA_HOME
  const dataHome = xdg !== undefined && NodePath.isAbsolute(xdg) ? xdg : NodePath.join(env.HOME, ".local", "share")
  return NodePath.join(dataHome, "logbook", "mcp-servers")
}

/** Where the OAuth tokens and client registrations of HTTP servers are kept: `<data home>/logbook/mcp-auth.json`. */
export const authFile = (env: { readonly XDG_DATA_HOME?: string | undefined; readonly HOME: string }): string =>
  NodePath.join(NodePath.dirname(serverRecordsDir(env)), "mcp-auth.json")

/** Forgets what is stored of an HTTP server's authorization; whether anything was. */
export const forgetAuthorization = (
  file: string,
  spec: McpServerSpec & { readonly type: "http" },
  env: Environment
): Effect.Effect<boolean, Error> => {
  const url = expand(spec.url, env).value
  const store = new AuthStore(file)
  return Effect.tryPromise({
    try: async () => {
      const had = Object.keys(await store.get(url)).length > 0
      if (had) await store.update(url, () => ({}))
      return had
    },
    catch: (cause) => (cause instanceof Error ? cause : new Error(String(cause)))
  })
}

/** The message of a server that needs the user's authorization and has none stored. */
export const needsLoginMessage = (name: string): string =>
  `MCP server "${name}" needs you to log in: run \`logbook mcp login ${name}\``

/** Why an MCP server or one of its calls failed; `message` is a sentence for the user and the model. */
export class McpError extends Schema.TaggedError<McpError>()("McpError", {
  server: Schema.String,
  reason: Schema.Literal("Start", "StartTimeout", "Exited", "Timeout", "TooLarge", "Protocol", "NeedsLogin"),
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

/** A tool as the server describes it. */
export interface McpToolInfo {
  readonly name: string
  readonly description: string
  /** its input's JSON Schema, as the server gives it */
  readonly inputSchema: Record<string, unknown>
}

/** One part of a result: text, an image or audio (base64), a resource or a link to one. */
export type McpContent =
  | { readonly type: "text"; readonly text: string }
  | { readonly type: "image" | "audio"; readonly data: string; readonly mimeType: string }
  | {
      readonly type: "resource"
      readonly resource: {
        readonly uri: string
        readonly text?: string
        readonly blob?: string
        readonly mimeType?: string
      }
    }
  | { readonly type: "resource_link"; readonly uri: string; readonly name?: string }
  | { readonly type: string; readonly [key: string]: unknown }

/** What a call returned. `isError`: the tool itself reports a failure (the model reads it). */
export interface McpCallResult {
  readonly content: ReadonlyArray<McpContent>
  readonly structuredContent?: unknown
  readonly isError: boolean
}

/** A prompt as the server describes it (`prompts/list`): a template the user fills in. */
export interface McpPromptInfo {
  readonly name: string
  readonly description: string
  readonly arguments: ReadonlyArray<{
    readonly name: string
    readonly description: string
    readonly required: boolean
  }>
}

/** A prompt filled in (`prompts/get`): its messages, each one part. */
export interface McpPromptResult {
  readonly messages: ReadonlyArray<{ readonly role: string; readonly content: McpContent }>
}

/** A resource read (`resources/read`): its contents, text or base64 blobs. */
export interface McpResourceResult {
  readonly contents: ReadonlyArray<{
    readonly uri: string
    readonly mimeType?: string | undefined
    readonly text?: string | undefined
    readonly blob?: string | undefined
  }>
}

/** The most prompts of a server taken (`prompts/list`). */
export const MAX_PROMPTS = 100

export interface McpCallOptions {
  /** the call's timeout (ms); default the server's `timeoutMs` */
  readonly timeoutMs?: number | undefined
}

/** A started server. */
export interface McpConnection {
  readonly name: string
  /** its tools, at most the server's `maxTools` */
  readonly tools: ReadonlyArray<McpToolInfo>
  /** how many more tools the server has than were taken */
  readonly toolsLeftOut: number
  /** the process group of a stdio server (its first process's pid) while it runs */
  readonly processGroup: Effect.Effect<number | undefined>
  readonly callTool: (
    tool: string,
    args: Record<string, unknown>,
    options?: McpCallOptions
  ) => Effect.Effect<McpCallResult, McpError>
  /** its prompts (none when it has no `prompts` capability), at most `MAX_PROMPTS` */
  readonly prompts: ReadonlyArray<McpPromptInfo>
  /** why its prompts could not be listed (it then offers none, and its tools still) */
  readonly promptsError?: string | undefined
  /** fills in a prompt (`prompts/get`), within the server's `timeoutMs` and `maxResultBytes` */
  readonly getPrompt: (prompt: string, args: Record<string, string>) => Effect.Effect<McpPromptResult, McpError>
  /** reads a resource (`resources/read`), within the server's `timeoutMs` and `maxResultBytes` */
  readonly readResource: (uri: string) => Effect.Effect<McpResourceResult, McpError>
}

export interface McpConnectOptions {
  /** the workspace: a stdio server's working directory (its `cwd` is resolved against it) */
  readonly cwd: string
  /**
   * how an HTTP server's OAuth authorization URL is visited (`logbook mcp login`); without it a
   * server that needs authorization and has no stored tokens fails with `NeedsLogin`
   */
  readonly authorization?: Authorization | undefined
}

export class McpClient extends Context.Tag("logbook/McpClient")<
  McpClient,
  {
    /** Starts `name` and lists its tools; the server is stopped when the scope closes. */
    readonly connect: (
      name: string,
      spec: McpServerSpec,
      options: McpConnectOptions
    ) => Effect.Effect<McpConnection, McpError, Scope.Scope>
  }
>() {
  /** Over the SDK (`McpClientOptions`). */
  static readonly layer = (options: McpClientOptions): Layer.Layer<McpClient> => {
    const context: ClientContext = {
      env: options.env,
      sandbox: options.sandbox,
      records: options.recordsDir === undefined ? undefined : serverRecords(options.recordsDir),
      auth: options.authFile === undefined ? undefined : new AuthStore(options.authFile)
    }
    return Layer.succeed(McpClient, { connect: (name, spec, connect) => connectServer(name, spec, connect, context) })
  }
}

export interface McpClientOptions {
  /** logbook's environment: the base variables, `${NAME}` and bearer tokens come from it */
  readonly env: Environment
  /**
   * the sandbox of `bash` (its settings and probe): stdio servers run in it where it can run,
   * unless their entry says `"sandbox": false`; without it they run unconfined
   */
  readonly sandbox?: SandboxOptions | undefined
  /** where the groups of running stdio servers are noted, for the sweep after a crash (`sweepOrphanServers`) */
  readonly recordsDir?: string | undefined
  /** the OAuth store of HTTP servers (`authFile`); without it no OAuth is done */
  readonly authFile?: string | undefined
}

interface ClientContext {
  readonly env: Environment
  readonly sandbox: SandboxOptions | undefined
  readonly records: ServerRecords | undefined
  readonly auth: AuthStore | undefined
}

// ---------------------------------------------------------------------------------------------

/** The SDK, loaded when the first server starts: a command that starts none never loads it (nor zod). */
const loadSdk = () =>
  Promise.all([
    import("@modelcontextprotocol/sdk/client/index.js"),
    import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
    import("./internal/stdioTransport.js")
  ]).then(([client, http, stdio]) => ({
    Client: client.Client,
    StreamableHTTPClientTransport: http.StreamableHTTPClientTransport,
    StdioProcessTransport: stdio.StdioProcessTransport
  }))

type Sdk = Awaited<ReturnType<typeof loadSdk>>

/** One run of a server: its SDK client and how to stop it. */
interface Incarnation {
  readonly client: Client
  readonly transport: Transport
  /** the process group of a stdio server, once started */
  readonly pid: () => number | undefined
  /** set when the transport closed (the process exited, the HTTP session ended) */
  closed: boolean
  readonly stop: Effect.Effect<void>
  /** what is known of why it ended, for an error message */
  readonly ending: () => string
  readonly tooLarge: () => boolean
  /** the OAuth provider of an HTTP server */
  readonly oauth: LogbookOAuthProvider | undefined
  /** exchanges the code the authorization brought back for tokens */
  readonly finishAuth: (code: string) => Promise<void>
}

const fail = (server: string, reason: McpError["reason"], message: string, cause?: unknown) =>
  new McpError({ server, reason, message, ...(cause === undefined ? {} : { cause }) })

/** An error's message, with the message of its cause when it has one (`fetch failed: other side closed`). */
const causeText = (cause: unknown): string => {
  if (!(cause instanceof Error)) return String(cause)
  const inner = cause.cause instanceof Error ? cause.cause.message : undefined
  return inner === undefined || inner === "" || cause.message.includes(inner)
    ? cause.message
    : `${cause.message}: ${inner}`
}

/** The bwrap spawn of a stdio server, undefined to run it unconfined, or why it may not run. */
const serverSandbox = (
  name: string,
  spec: McpServerSpec & { readonly type: "stdio" },
  workspace: string,
  cwd: string,
  context: ClientContext,
  /** what the server's command line and PATH name: its program and files */
  named: ReadonlyArray<string>
): { readonly bwrap: string; readonly args: ReadonlyArray<string> } | undefined | McpError => {
  const settings = context.sandbox
  if (settings === undefined || spec.sandbox === false) return undefined
  const decision = decide(settings, settings.status)
  if (decision._tag === "Unconfined") return undefined
  if (decision._tag === "Refused") {
    return fail(
      name,
      "Start",
      `MCP server "${name}" was not started: tools.bash.sandbox is "on" and there is no sandbox here`
    )
  }
  const readOnly = hostTmpEntries(named)
  const plan = makePlan({ workspace, cwd, settings, env: context.env, dirs: sandboxDirs(), readOnly })
  return { bwrap: decision.bwrap, args: bwrapArgs(plan) }
}

/**
 * The entries of the host's `/tmp` that hold a server's program or files (a path there in its
 * command, its arguments — also inside a shell command line — its cwd or its PATH): the sandbox's
 * `/tmp` is private, so each is bound read-only, a whole entry (`/tmp/<name>`) so that what the
 * file loads beside it is there too.
 */
const hostTmpEntries = (named: ReadonlyArray<string>): ReadonlyArray<string> => {
  const entries = new Set<string>()
  const paths = named.flatMap((text) => [text, ...(text.match(/\/tmp\/[^\s'"`;|&<>()]+/g) ?? [])])
  for (const path of paths) {
    if (!NodePath.isAbsolute(path)) continue
    let real: string
    try {
      real = fs.realpathSync(path)
    } catch {
      continue
    }
    const [first, name] = real.split("/").slice(1)
    if (first === "tmp" && name !== undefined && name !== "") entries.add(`/tmp/${name}`)
  }
  return [...entries]
}

const makeTransport = (
  sdk: Sdk,
  name: string,
  spec: McpServerSpec,
  options: McpConnectOptions,
  context: ClientContext,
  onTooLarge: () => void
): Effect.Effect<
  {
    readonly transport: Transport
    readonly stdio?: StdioProcessTransport
    readonly oauth?: LogbookOAuthProvider
    readonly finishAuth?: (code: string) => Promise<void>
  },
  McpError
> => {
  const env = context.env
  if (spec.type === "stdio") {
    const own = expandAll(spec.env, env)
    const args = spec.args.map((arg) => expand(arg, env))
    const missing = [...own.missing, ...args.flatMap((arg) => arg.missing)]
    if (missing.length > 0) {
      return Effect.fail(
        fail(name, "Start", `MCP server "${name}" names ${missing.map((m) => `\${${m}}`).join(", ")}, which is not set`)
      )
    }
    const cwd = spec.cwd === undefined ? options.cwd : NodePath.resolve(options.cwd, spec.cwd)
    const serverEnv = serverEnvironment(own.values, env)
    const named = [spec.command, ...args.map((arg) => arg.value), cwd, ...(serverEnv.PATH ?? "").split(":")]
    const sandbox = serverSandbox(name, spec, options.cwd, cwd, context, named)
    if (sandbox instanceof McpError) return Effect.fail(sandbox)
    // bwrap reports a command it cannot find only as its own failure: looked up first, as it will
    const found = spec.command.includes("/")
      ? isExecutableFile(NodePath.resolve(cwd, spec.command))
      : onPath(spec.command, serverEnv.PATH) !== undefined
    if (sandbox !== undefined && !found) {
      return Effect.fail(
        fail(name, "Start", `MCP server "${name}" did not start: its command "${spec.command}" was not found`)
      )
    }
    const stdio = new sdk.StdioProcessTransport({
      command: spec.command,
      args: args.map((arg) => arg.value),
      env: serverEnv,
      cwd,
      // the message's JSON around the result
      maxMessageBytes: spec.maxResultBytes + 64 * 1024,
      sandbox,
      records: context.records
    })
    return Effect.succeed({ transport: stdio, stdio })
  }
  const headers = expandAll(spec.headers, env)
  const missing = [...headers.missing]
  if (spec.bearerTokenEnv !== undefined) {
    const token = env[spec.bearerTokenEnv]
    if (token === undefined || token === "") missing.push(spec.bearerTokenEnv)
    else headers.values.Authorization = `Bearer ${token}`
  }
  if (missing.length > 0) {
    return Effect.fail(fail(name, "Start", `MCP server "${name}" needs ${missing.join(", ")}, which is not set`))
  }
  const url = expand(spec.url, env).value
  const store = context.auth
  // a server given a bearer token or an Authorization header is not sent OAuth tokens
  const oauthable =
    store !== undefined &&
    spec.bearerTokenEnv === undefined &&
    !Object.keys(headers.values).some((key) => key.toLowerCase() === "authorization")
  return Effect.gen(function* () {
    const oauth = oauthable
      ? yield* Effect.tryPromise({
          try: () => LogbookOAuthProvider.make(store, url, options.authorization),
          catch: (cause) =>
            fail(name, "Start", `MCP server "${name}" did not start: its stored authorization: ${causeText(cause)}`)
        })
      : undefined
    const transport = new sdk.StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: headers.values },
      fetch: cappedFetch(spec.maxResultBytes + 64 * 1024, onTooLarge),
      ...(oauth === undefined ? {} : { authProvider: oauth })
    })
    return {
      transport,
      ...(oauth === undefined ? {} : { oauth }),
      finishAuth: (code: string) => transport.finishAuth(code)
    }
  })
}

/** Starts one run of the server: the process (or HTTP session) and the protocol's initialization. */
const startIncarnation = (
  sdk: Sdk,
  name: string,
  spec: McpServerSpec,
  options: McpConnectOptions,
  context: ClientContext,
  authorized = false
): Effect.Effect<Incarnation, McpError> =>
  Effect.gen(function* () {
    let tooLarge = false
    const made = yield* makeTransport(sdk, name, spec, options, context, () => {
      tooLarge = true
    })
    const client = new sdk.Client({ name: "logbook", version }, { capabilities: {} })
    const stdio = made.stdio
    const stop = Effect.gen(function* () {
      yield* Effect.promise(() => client.close().catch(() => undefined))
      if (stdio?.pid !== undefined) {
        yield* stopGroup(stdio.pid)
        stdio.release()
      }
    })
    const incarnation: Incarnation = {
      client,
      transport: made.transport,
      pid: () => stdio?.pid,
      closed: false,
      stop,
      ending: () => {
        if (stdio === undefined) return "its HTTP connection closed"
        const end = stdio.ended
        const how =
          end === undefined
            ? "it stopped"
            : end.signal !== null
              ? `it was killed by ${end.signal}`
              : `it exited with code ${end.code}`
        const tail = stdio.stderrTail
        return tail === "" ? how : `${how}; its last output: ${tail.slice(-500)}`
      },
      tooLarge: () => tooLarge || (stdio?.tooLarge ?? false),
      oauth: made.oauth,
      finishAuth: made.finishAuth ?? (() => Promise.reject(new Error("not an OAuth server")))
    }
    client.onclose = () => {
      incarnation.closed = true
    }
    const oauth = made.oauth
    const code = yield* Effect.tryPromise({
      try: (signal) =>
        client.connect(made.transport, { signal, timeout: spec.startTimeoutMs }).then(
          () => undefined,
          (cause: unknown) => {
            // the authorization brought a code back: exchanged, then started again with the tokens
            const code = oauth?.pendingCode
            if (code === undefined || authorized) throw cause
            oauth!.pendingCode = undefined
            return code
          }
        ),
      catch: (cause) => {
        if (oauth?.needsLogin === true) return fail(name, "NeedsLogin", needsLoginMessage(name))
        const code = (cause as { code?: string }).code
        const what =
          code === "ENOENT" && spec.type === "stdio"
            ? `its command "${spec.command}" was not found`
            : incarnation.closed && stdio !== undefined
              ? incarnation.ending()
              : causeText(cause)
        return fail(name, "Start", `MCP server "${name}" did not start: ${what}`, cause)
      }
    }).pipe(Effect.onError(() => stop))
    if (code !== undefined) {
      yield* Effect.tryPromise({
        try: () => incarnation.finishAuth(code),
        catch: (cause) =>
          fail(name, "Start", `MCP server "${name}" did not start: its authorization failed: ${causeText(cause)}`)
      }).pipe(Effect.ensuring(stop))
      return yield* startIncarnation(sdk, name, spec, options, context, true)
    }
    return incarnation
  })

/**
 * Runs a request of an HTTP server; when it needed a new authorization (the server asked for more
 * scope) and its visit brought a code back, the code is exchanged and the request made again, once.
 */
const reauthorizing = <A>(incarnation: Incarnation, run: () => Promise<A>): Promise<A> =>
  run().catch(async (cause: unknown) => {
    const oauth = incarnation.oauth
    const code = oauth?.pendingCode
    if (oauth === undefined || code === undefined) throw cause
    oauth.pendingCode = undefined
    await incarnation.finishAuth(code)
    return run()
  })

/** A failed request's error: the server needs a login, or `otherwise`. */
const requestError = (name: string, incarnation: Incarnation, cause: unknown, otherwise: string): McpError =>
  incarnation.oauth?.needsLogin === true
    ? fail(name, "NeedsLogin", needsLoginMessage(name), cause)
    : fail(name, "Protocol", `${otherwise}: ${causeText(cause)}`, cause)

const listTools = (
  name: string,
  spec: McpServerSpec,
  incarnation: Incarnation
): Effect.Effect<{ readonly tools: ReadonlyArray<McpToolInfo>; readonly leftOut: number }, McpError> =>
  Effect.gen(function* () {
    const tools: Array<McpToolInfo> = []
    let leftOut = 0
    let cursor: string | undefined
    // pages until the bound (a server that pages forever stops there too)
    for (let page = 0; page < 100; page++) {
      const result = yield* Effect.tryPromise({
        try: (signal) =>
          reauthorizing(incarnation, () =>
            incarnation.client.listTools(cursor === undefined ? {} : { cursor }, {
              signal,
              timeout: spec.startTimeoutMs
            })
          ),
        catch: (cause) => requestError(name, incarnation, cause, `MCP server "${name}" did not list its tools`)
      })
      for (const tool of result.tools) {
        if (tools.length < spec.maxTools) {
          tools.push({
            name: tool.name,
            description: tool.description ?? "",
            inputSchema: tool.inputSchema as Record<string, unknown>
          })
        } else leftOut++
      }
      cursor = result.nextCursor
      if (cursor === undefined || tools.length >= spec.maxTools) break
    }
    return { tools, leftOut }
  })

const listPrompts = (
  name: string,
  spec: McpServerSpec,
  incarnation: Incarnation
): Effect.Effect<ReadonlyArray<McpPromptInfo>, McpError> =>
  Effect.gen(function* () {
    const client = incarnation.client
    if (client.getServerCapabilities()?.prompts === undefined) return []
    const prompts: Array<McpPromptInfo> = []
    let cursor: string | undefined
    for (let page = 0; page < 100 && prompts.length < MAX_PROMPTS; page++) {
      const result = yield* Effect.tryPromise({
        try: (signal) =>
          reauthorizing(incarnation, () =>
            client.listPrompts(cursor === undefined ? {} : { cursor }, { signal, timeout: spec.startTimeoutMs })
          ),
        catch: (cause) => requestError(name, incarnation, cause, `MCP server "${name}" did not list its prompts`)
      })
      for (const prompt of result.prompts.slice(0, MAX_PROMPTS - prompts.length)) {
        prompts.push({
          name: prompt.name,
          description: prompt.description ?? "",
          arguments: (prompt.arguments ?? []).map((arg) => ({
            name: arg.name,
            description: arg.description ?? "",
            required: arg.required === true
          }))
        })
      }
      cursor = result.nextCursor
      if (cursor === undefined) break
    }
    return prompts
  })

/** The size of a result's content, as the model and the log would hold it. */
const resultBytes = (content: ReadonlyArray<McpContent>): number =>
  content.reduce((sum, part) => sum + Buffer.byteLength(JSON.stringify(part)), 0)

const connectServer = (
  name: string,
  spec: McpServerSpec,
  options: McpConnectOptions,
  context: ClientContext
): Effect.Effect<McpConnection, McpError, Scope.Scope> =>
  Effect.gen(function* () {
    const sdk = yield* Effect.promise(loadSdk)
    const start = startIncarnation(sdk, name, spec, options, context).pipe(
      Effect.timeoutFail({
        duration: Duration.millis(spec.startTimeoutMs),
        onTimeout: () =>
          fail(name, "StartTimeout", `MCP server "${name}" did not start within ${spec.startTimeoutMs} ms`)
      })
    )
    // the start may be interrupted (Ctrl-C during a login's wait for the browser); a started one is stopped with the scope
    let current = yield* Effect.uninterruptibleMask((restore) =>
      restore(start).pipe(Effect.tap((incarnation) => Effect.addFinalizer(() => incarnation.stop)))
    )
    const listed = yield* listTools(name, spec, current).pipe(
      Effect.timeoutFail({
        duration: Duration.millis(spec.startTimeoutMs),
        onTimeout: () =>
          fail(name, "StartTimeout", `MCP server "${name}" did not list its tools within ${spec.startTimeoutMs} ms`)
      })
    )
    // a server whose prompts cannot be listed still offers its tools
    const prompts = yield* listPrompts(name, spec, current).pipe(
      Effect.timeoutFail({
        duration: Duration.millis(spec.startTimeoutMs),
        onTimeout: () =>
          fail(name, "StartTimeout", `MCP server "${name}" did not list its prompts within ${spec.startTimeoutMs} ms`)
      }),
      Effect.either
    )
    let restarts = 0
    const lock = yield* Effect.makeSemaphore(1)
    const scope = yield* Effect.scope

    /** The running incarnation; a dead one is started again, once in the connection's life. */
    const running = lock.withPermits(1)(
      Effect.gen(function* () {
        if (!current.closed) return current
        if (restarts >= 1) {
          return yield* Effect.fail(
            fail(
              name,
              "Exited",
              `MCP server "${name}" stopped (${current.ending()}) and was already restarted once; it is not started again`
            )
          )
        }
        restarts++
        yield* current.stop
        current = yield* Effect.acquireRelease(start, (incarnation) => incarnation.stop).pipe(Scope.extend(scope))
        return current
      })
    )

    const callTool = (
      tool: string,
      args: Record<string, unknown>,
      callOptions?: McpCallOptions
    ): Effect.Effect<McpCallResult, McpError> =>
      Effect.gen(function* () {
        const timeoutMs = callOptions?.timeoutMs ?? spec.timeoutMs
        const incarnation = yield* running
        const result = yield* Effect.tryPromise({
          // the SDK's own timeout is a backstop: the Effect's fires first, and its interruption aborts
          // the signal, which sends the server notifications/cancelled
          try: (signal) =>
            reauthorizing(incarnation, () =>
              incarnation.client.callTool({ name: tool, arguments: args }, undefined, {
                signal,
                timeout: timeoutMs + 60_000
              })
            ),
          catch: (cause) => {
            if (incarnation.oauth?.needsLogin === true) return fail(name, "NeedsLogin", needsLoginMessage(name), cause)
            if (incarnation.tooLarge()) {
              return fail(
                name,
                "TooLarge",
                `MCP server "${name}" sent a result larger than ${spec.maxResultBytes} bytes (its maxResultBytes); the call failed`,
                cause
              )
            }
            if (incarnation.closed) {
              return fail(
                name,
                "Exited",
                `MCP server "${name}" stopped during the call (${incarnation.ending()}); it will be started again for the next call`,
                cause
              )
            }
            if (spec.type === "http" && cause instanceof TypeError) {
              return fail(
                name,
                "Exited",
                `MCP server "${name}" could not be reached during the call (${causeText(cause)}); the call failed`,
                cause
              )
            }
            return fail(name, "Protocol", `MCP server "${name}" failed the call: ${causeText(cause)}`, cause)
          }
        }).pipe(
          Effect.timeoutFail({
            duration: Duration.millis(timeoutMs),
            onTimeout: () =>
              fail(
                name,
                "Timeout",
                `MCP server "${name}" did not answer within ${timeoutMs} ms; the call was cancelled`
              )
          })
        )
        const content = (result.content ?? []) as ReadonlyArray<McpContent>
        if (resultBytes(content) > spec.maxResultBytes) {
          return yield* Effect.fail(
            fail(
              name,
              "TooLarge",
              `MCP server "${name}" sent a result larger than ${spec.maxResultBytes} bytes (its maxResultBytes); the call failed`
            )
          )
        }
        return {
          content,
          ...(result.structuredContent === undefined ? {} : { structuredContent: result.structuredContent }),
          isError: result.isError === true
        }
      }).pipe(Effect.withSpan("McpClient.callTool", { attributes: { server: name, tool } }))

    /** A request other than a tool call, bounded like one: its time and the size of what comes back. */
    const request = <A>(
      what: string,
      run: (client: Client, signal: AbortSignal) => Promise<A>,
      size: (result: A) => number
    ): Effect.Effect<A, McpError> =>
      Effect.gen(function* () {
        const incarnation = yield* running
        const result = yield* Effect.tryPromise({
          try: (signal) => reauthorizing(incarnation, () => run(incarnation.client, signal)),
          catch: (cause) =>
            incarnation.oauth?.needsLogin === true
              ? fail(name, "NeedsLogin", needsLoginMessage(name), cause)
              : incarnation.tooLarge()
                ? fail(
                    name,
                    "TooLarge",
                    `MCP server "${name}" sent ${what} larger than ${spec.maxResultBytes} bytes`,
                    cause
                  )
                : fail(name, "Protocol", `MCP server "${name}" failed ${what}: ${causeText(cause)}`, cause)
        }).pipe(
          Effect.timeoutFail({
            duration: Duration.millis(spec.timeoutMs),
            onTimeout: () =>
              fail(name, "Timeout", `MCP server "${name}" did not send ${what} within ${spec.timeoutMs} ms`)
          })
        )
        if (size(result) > spec.maxResultBytes) {
          return yield* fail(
            name,
            "TooLarge",
            `MCP server "${name}" sent ${what} larger than ${spec.maxResultBytes} bytes`
          )
        }
        return result
      })

    const getPrompt = (prompt: string, args: Record<string, string>) =>
      request(
        `the prompt "${prompt}"`,
        (client, signal) =>
          client.getPrompt({ name: prompt, arguments: args }, { signal, timeout: spec.timeoutMs + 60_000 }),
        (result) => Buffer.byteLength(JSON.stringify(result.messages))
      ).pipe(
        Effect.map(
          (result): McpPromptResult => ({
            messages: result.messages.map((m) => ({ role: m.role, content: m.content as McpContent }))
          })
        )
      )

    const readResource = (uri: string) =>
      request(
        `the resource ${uri}`,
        (client, signal) => client.readResource({ uri }, { signal, timeout: spec.timeoutMs + 60_000 }),
        (result) => Buffer.byteLength(JSON.stringify(result.contents))
      ).pipe(
        Effect.map(
          (result): McpResourceResult => ({
            contents: result.contents.map((c) => ({
              uri: c.uri,
              mimeType: c.mimeType,
              text: "text" in c && typeof c.text === "string" ? c.text : undefined,
              blob: "blob" in c && typeof c.blob === "string" ? c.blob : undefined
            }))
          })
        )
      )

    return {
      name,
      prompts: prompts._tag === "Right" ? prompts.right : [],
      promptsError: prompts._tag === "Left" ? prompts.left.message : undefined,
      getPrompt,
      readResource,
      tools: listed.tools,
      toolsLeftOut: listed.leftOut,
      processGroup: Effect.sync(() => (current.closed ? undefined : current.pid())),
      callTool
    } satisfies McpConnection
  })
