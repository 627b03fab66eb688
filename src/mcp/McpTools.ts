/**
 * MCP servers' tools in the one tool registry (DESIGN §13): each server is started in the
 * background when the agent's layer is built, and its tools join as `mcp__<server>__<tool>`
 * (`LateTools`) once it is ready, so a slow server holds up neither the first frame nor the first
 * request. A call goes through the same permission rules, hooks, write-ahead `tool.invoked`,
 * timeout and log as a built-in's; the model reads the result's text, head and tail within the
 * server's `maxOutputBytes`, and the whole result (images included) is kept as blobs. Past a
 * share of the context window they are offered through a search (ToolSearch.ts); a re-run offers
 * stand-ins that answer from the log (`mcpStandIn`). docs/mcp.md describes it.
 */
import { Context, Deferred, Effect, Layer, Schema, Scope } from "effect"
import { capText } from "../tools/boundedOutput.js"
import { type AnyTool, defineTool, LateTools, type ToolContext, ToolFailure } from "../tools/Tools.js"
import { McpClient, type McpConnection, type McpContent, type McpToolInfo } from "./McpClient.js"
import { type McpServerStatus, McpServers } from "./McpServers.js"
import type { McpServerSpec } from "./McpSettings.js"
import { estimateTokens, MAX_LOADED, TOOL_SEARCH_NAME, toolSearchTool } from "./ToolSearch.js"

/** The prefix of every MCP tool's name. */
export const MCP_TOOL_PREFIX = "mcp__"

/** Providers accept tool names of letters, digits, `_` and `-`, at most 64 long. */
const MAX_TOOL_NAME = 64

/** `mcp__<server>__<tool>`, with characters a provider refuses replaced by `_` and cut to 64. */
export const mcpToolName = (server: string, tool: string): string =>
  `${MCP_TOOL_PREFIX}${server}__${tool.replace(/[^A-Za-z0-9_-]/g, "_")}`.slice(0, MAX_TOOL_NAME)

/** Whether a tool name is an MCP server's. */
export const isMcpTool = (name: string): boolean => name.startsWith(MCP_TOOL_PREFIX)

/** The most of a server's tool description the model is given. */
const MAX_DESCRIPTION_BYTES = 8 * 1024

/** The arguments of an MCP call: any JSON object (the server checks them against its schema). */
const McpArguments = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/** The input schema as given, as an object schema (a provider refuses any other). */
const objectSchema = (schema: Record<string, unknown>): Record<string, unknown> =>
  schema.type === "object" ? schema : { properties: {}, ...schema, type: "object" }

/** What one call recorded besides the text the model reads. */
export interface McpCallMetadata {
  readonly server: string
  readonly tool: string
  /** the hash of the whole result (JSON, secrets masked) */
  readonly resultBlob: string
  readonly resultBytes: number
  /** the hashes of its images and audio, decoded */
  readonly media: ReadonlyArray<{ readonly mimeType: string; readonly blob: string; readonly bytes: number }>
  readonly cut: boolean
}

/** The text of a result for the model; media and resources as one line each. */
const resultText = (
  content: ReadonlyArray<McpContent>,
  media: ReadonlyArray<{ readonly mimeType: string; readonly blob: string; readonly bytes: number }>
): string => {
  let nextMedia = 0
  const lines = content.map((part) => {
    switch (part.type) {
      case "text":
        return String((part as { text: string }).text)
      case "image":
      case "audio": {
        const item = media[nextMedia++]
        return item === undefined ? `[${part.type}]` : `[${part.type} ${item.mimeType}, ${item.bytes} bytes]`
      }
      case "resource": {
        const resource = (part as { resource: { uri: string; text?: string } }).resource
        return resource.text === undefined
          ? `[resource ${resource.uri}]`
          : `[resource ${resource.uri}]\n${resource.text}`
      }
      case "resource_link":
        return `[resource link ${String((part as { uri: string }).uri)}]`
      default:
        return `[${part.type}]`
    }
  })
  return lines.join("\n")
}

const storeMedia = (content: ReadonlyArray<McpContent>, context: ToolContext) =>
  Effect.forEach(
    content.filter((part) => part.type === "image" || part.type === "audio"),
    (part) => {
      const { data, mimeType } = part as { data: string; mimeType: string }
      const bytes = context.secrets.redactBytes(Buffer.from(data, "base64"))
      return Effect.map(context.storeBlob(bytes), (blob) => ({ mimeType, blob, bytes: bytes.byteLength }))
    }
  )

/** One tool of a started server, as the registry holds it. */
export const mcpTool = (server: string, spec: McpServerSpec, connection: McpConnection, info: McpToolInfo): AnyTool =>
  defineTool({
    name: mcpToolName(server, info.name),
    description: capText(info.description, MAX_DESCRIPTION_BYTES / 2, MAX_DESCRIPTION_BYTES / 2),
    input: McpArguments,
    inputSchema: objectSchema(info.inputSchema),
    timeoutMs: () => spec.timeoutMs,
    execute: (input, context) =>
      Effect.gen(function* () {
        // the registry's timeout stops the call first (recorded as timed out); the client's is a backstop
        const result = yield* connection
          .callTool(info.name, input, { timeoutMs: context.timeoutMs + 5_000 })
          .pipe(Effect.mapError((error) => new ToolFailure({ message: error.message })))
        const whole = context.secrets.redactText(JSON.stringify(result))
        const resultBlob = yield* context.storeBlob(whole)
        const media = yield* storeMedia(result.content, context)
        const text = context.secrets.redactText(resultText(result.content, media))
        const output = capText(text, Math.floor(spec.maxOutputBytes / 3), Math.floor((spec.maxOutputBytes * 2) / 3))
        const metadata: McpCallMetadata = {
          server,
          tool: info.name,
          resultBlob,
          resultBytes: Buffer.byteLength(whole),
          media,
          cut: output !== text
        }
        if (result.isError) return yield* Effect.fail(new ToolFailure({ message: output, metadata }))
        return { output, metadata }
      })
  })

export interface McpToolsOptions {
  readonly servers: ReadonlyArray<{ readonly name: string; readonly spec: McpServerSpec }>
  /** the workspace: stdio servers run there */
  readonly cwd: string
  /** what the user should hear (a server that failed to start) */
  readonly notify: (message: string) => Effect.Effect<void>
  /** the configured servers that are not started (disabled, not approved), for `McpServers.status` */
  readonly notStarted?: ReadonlyArray<McpServerStatus> | undefined
  /**
   * The most tokens the MCP tools' definitions may take (a share of the context window): past it
   * they are offered through `mcp__tool_search` (ToolSearch.ts). None: always offered.
   */
  readonly toolSearchTokens?: number | undefined
}

/**
 * `LateTools` from MCP servers: each is started in the background when the layer is built and
 * stopped when it closes; its tools are offered once it is ready. A server that cannot start is
 * told to the user (`notify`) and offers nothing; the others go on. When their definitions would
 * take more than `toolSearchTokens`, the search tool is offered instead, with the tools it found.
 * Beside them, `McpServers`: each server's state, and its connection for its prompts and resources.
 */
export const layerMcpTools = (options: McpToolsOptions): Layer.Layer<LateTools | McpServers, never, McpClient> =>
  Layer.scopedContext(
    Effect.gen(function* () {
      const client = yield* McpClient
      const scope = yield* Effect.scope
      let tools: ReadonlyArray<AnyTool> = []
      let searching = false
      // the tools searches found, newest last, at most MAX_LOADED
      let loaded: ReadonlyArray<string> = []
      const search = toolSearchTool({
        all: () => tools,
        found: (names) => {
          loaded = [...loaded.filter((name) => !names.includes(name)), ...names].slice(-MAX_LOADED)
        }
      })
      const started = new Map<string, Deferred.Deferred<void>>()
      const statuses = new Map<string, McpServerStatus>()
      const connections = new Map<string, McpConnection>()
      const update = (name: string, change: Partial<McpServerStatus>) =>
        Effect.sync(() => {
          const now = statuses.get(name)
          if (now !== undefined) statuses.set(name, { ...now, ...change })
        })
      for (const { name, spec } of options.servers) {
        const done = yield* Deferred.make<void>()
        started.set(name, done)
        statuses.set(name, { name, state: "starting", tools: [], prompts: [] })
        yield* client.connect(name, spec, { cwd: options.cwd }).pipe(
          Scope.extend(scope),
          Effect.tap((connection) =>
            Effect.sync(() => {
              // a failed request is the server's last error (`/mcp` shows it)
              const watched: McpConnection = {
                ...connection,
                callTool: (tool, args, callOptions) =>
                  connection
                    .callTool(tool, args, callOptions)
                    .pipe(Effect.tapError((error) => update(name, { lastError: error.message })))
              }
              connections.set(name, watched)
              const taken = new Set(tools.map((tool) => tool.name))
              const added = connection.tools
                .map((info) => mcpTool(name, spec, watched, info))
                .filter((tool) => !taken.has(tool.name) && taken.add(tool.name))
              tools = [...tools, ...added]
              searching = options.toolSearchTokens !== undefined && estimateTokens(tools) > options.toolSearchTokens
            })
          ),
          Effect.tap((connection) =>
            update(name, {
              state: "ready",
              tools: connection.tools.map((t) => t.name),
              prompts: connection.prompts,
              lastError: connection.promptsError
            })
          ),
          Effect.catchAll((error) =>
            Effect.zipRight(
              update(name, { state: "failed", lastError: error.message }),
              options.notify(`${error.message}; its tools are not offered`)
            )
          ),
          Effect.ensuring(Deferred.succeed(done, undefined)),
          Effect.forkIn(scope)
        )
      }
      const serverOf = (tool: string): string => tool.slice(MCP_TOOL_PREFIX.length).split("__")[0] ?? ""
      const late: LateTools["Type"] = {
        current: () =>
          searching ? [search, ...loaded.flatMap((name) => tools.filter((tool) => tool.name === name))] : tools,
        // a tool not offered now (not found yet) is still the server's when the model names it
        find: (name) => (name === TOOL_SEARCH_NAME && searching ? search : tools.find((tool) => tool.name === name)),
        awaitTool: (tool) => {
          // a search waits for the servers still starting: their tools are what it searches
          if (tool === TOOL_SEARCH_NAME) return Effect.forEach(started.values(), Deferred.await, { discard: true })
          if (!isMcpTool(tool)) return Effect.void
          const done = started.get(serverOf(tool))
          return done === undefined ? Effect.void : Deferred.await(done)
        },
        // why a server did not start: what a call of one of its tools is told
        unavailable: (tool) => {
          const status = isMcpTool(tool) ? statuses.get(serverOf(tool)) : undefined
          return status?.state === "failed" ? status.lastError : undefined
        }
      }
      const servers: McpServers["Type"] = {
        status: () => [...statuses.values(), ...(options.notStarted ?? [])],
        connection: (server) => {
          const done = started.get(server)
          return done === undefined
            ? Effect.succeed(undefined)
            : Deferred.await(done).pipe(Effect.map(() => connections.get(server)))
        }
      }
      return Context.make(LateTools, late).pipe(Context.add(McpServers, servers))
    })
  )

/** How a recorded MCP call ended, as a re-run serves it (docs/rerun.md). */
export type RecordedMcpCall =
  | { readonly _tag: "finished"; readonly output: string; readonly metadata: unknown }
  | { readonly _tag: "failed"; readonly error: string; readonly metadata: unknown }
  /** timed out, interrupted, or never ended: the call runs until the re-run's timeout or interrupt stops it */
  | { readonly _tag: "stopped" }

/**
 * An MCP tool for a re-run: offered with its recorded definition, and a call answered from the
 * log (`serve`, by call id: the text the model read and the metadata, or the recorded failure).
 * It never starts or calls a server.
 */
export const mcpStandIn = (options: {
  readonly name: string
  readonly description: string
  readonly inputSchema: Readonly<Record<string, unknown>>
  /** the timeout of a call with this input: the recorded one, so a timed-out call times out again */
  readonly timeoutMs: (input: unknown) => number
  readonly serve: (callId: string) => RecordedMcpCall | undefined
}): AnyTool =>
  defineTool({
    name: options.name,
    description: options.description,
    input: McpArguments,
    inputSchema: options.inputSchema,
    timeoutMs: options.timeoutMs,
    execute: (_input, context) => {
      const recorded = options.serve(context.callId)
      if (recorded === undefined)
        return Effect.fail(
          new ToolFailure({ message: "A re-run does not call MCP servers: the original did not run this call." })
        )
      switch (recorded._tag) {
        case "finished":
          return Effect.succeed({ output: recorded.output, metadata: recorded.metadata })
        case "failed":
          return Effect.fail(new ToolFailure({ message: recorded.error, metadata: recorded.metadata }))
        case "stopped":
          return Effect.never
      }
    }
  })
