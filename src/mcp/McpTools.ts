/**
 * MCP servers' tools in the one tool registry (DESIGN §13): each server is started in the
 * background when the agent's layer is built, and its tools join as `mcp__<server>__<tool>`
 * (`LateTools`) once it is ready, so a slow server holds up neither the first frame nor the first
 * request. A call goes through the same permission rules, hooks, write-ahead `tool.invoked`,
 * timeout and log as a built-in's; the model reads the result's text, head and tail within the
 * server's `maxOutputBytes`, and the whole result (images included) is kept as blobs.
 * docs/mcp.md describes it.
 */
import { Deferred, Effect, Layer, Schema, Scope } from "effect"
import { capText } from "../tools/boundedOutput.js"
import { type AnyTool, defineTool, LateTools, type ToolContext, ToolFailure } from "../tools/Tools.js"
import { McpClient, type McpConnection, type McpContent, type McpToolInfo } from "./McpClient.js"
import type { McpServerSpec } from "./McpSettings.js"

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
}

/**
 * `LateTools` from MCP servers: each is started in the background when the layer is built and
 * stopped when it closes; its tools are offered once it is ready. A server that cannot start is
 * told to the user (`notify`) and offers nothing; the others go on.
 */
export const layerMcpTools = (options: McpToolsOptions): Layer.Layer<LateTools, never, McpClient> =>
  Layer.scoped(
    LateTools,
    Effect.gen(function* () {
      const client = yield* McpClient
      const scope = yield* Effect.scope
      let tools: ReadonlyArray<AnyTool> = []
      const started = new Map<string, Deferred.Deferred<void>>()
      /** why a server did not start, by name: what a call of one of its tools is told */
      const failed = new Map<string, string>()
      for (const { name, spec } of options.servers) {
        const done = yield* Deferred.make<void>()
        started.set(name, done)
        yield* client.connect(name, spec, { cwd: options.cwd }).pipe(
          Scope.extend(scope),
          Effect.tap((connection) =>
            Effect.sync(() => {
              const taken = new Set(tools.map((tool) => tool.name))
              const added = connection.tools
                .map((info) => mcpTool(name, spec, connection, info))
                .filter((tool) => !taken.has(tool.name) && taken.add(tool.name))
              tools = [...tools, ...added]
            })
          ),
          Effect.catchAll((error) =>
            Effect.zipRight(
              Effect.sync(() => failed.set(name, error.message)),
              options.notify(`${error.message}; its tools are not offered`)
            )
          ),
          Effect.ensuring(Deferred.succeed(done, undefined)),
          Effect.forkIn(scope)
        )
      }
      const serverOf = (tool: string): string => tool.slice(MCP_TOOL_PREFIX.length).split("__")[0] ?? ""
      return {
        current: () => tools,
        awaitTool: (tool) => {
          if (!isMcpTool(tool)) return Effect.void
          const done = started.get(serverOf(tool))
          return done === undefined ? Effect.void : Deferred.await(done)
        },
        unavailable: (tool) => (isMcpTool(tool) ? failed.get(serverOf(tool)) : undefined)
      }
    })
  )

/**
 * A tool of a recorded MCP call, for a re-run: it has the recorded name so the call is decoded as
 * it was, and it never calls a server (a re-run refuses MCP calls before they run; docs/rerun.md).
 */
export const mcpStandIn = (name: string): AnyTool =>
  defineTool({
    name,
    description: "A tool of an MCP server, which a re-run does not call.",
    input: McpArguments,
    inputSchema: { type: "object" },
    execute: () => Effect.fail(new ToolFailure({ message: "A re-run does not call MCP servers." }))
  })
