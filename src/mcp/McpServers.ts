/**
 * The MCP servers of an agent as the user sees them (docs/mcp.md): each one's state (starting,
 * ready, failed, disabled, not approved), its tools and prompts, its last error; and, for the
 * interactive session and `logbook run`, its prompts filled in and its resources read, as the text
 * of a user message (`promptText`, `resourceText`: bounded, media as a line naming them).
 * `layerMcpTools` (McpTools.ts) provides it beside the servers' tools.
 */
import { Context, Effect, Layer } from "effect"
import { capText } from "../tools/boundedOutput.js"
import type { McpConnection, McpContent, McpPromptInfo, McpPromptResult, McpResourceResult } from "./McpClient.js"

export type McpServerState = "starting" | "ready" | "failed" | "disabled" | "not approved"

export interface McpServerStatus {
  readonly name: string
  readonly state: McpServerState
  /** its tools' names as the server gives them (without the `mcp__<server>__` prefix) */
  readonly tools: ReadonlyArray<string>
  readonly prompts: ReadonlyArray<McpPromptInfo>
  /** the last thing that went wrong: why it did not start, or its last failed request */
  readonly lastError?: string | undefined
}

export class McpServers extends Context.Tag("logbook/McpServers")<
  McpServers,
  {
    /** every configured server, in the config's order */
    readonly status: () => ReadonlyArray<McpServerStatus>
    /** the connection of a running server (waits while it starts); undefined when it is not running */
    readonly connection: (server: string) => Effect.Effect<McpConnection | undefined>
  }
>() {
  /** No server runs: those given are listed (disabled, not approved) and none has a connection. */
  static readonly layerNone = (servers: ReadonlyArray<McpServerStatus> = []): Layer.Layer<McpServers> =>
    Layer.succeed(McpServers, { status: () => servers, connection: () => Effect.succeed(undefined) })
}

/** The most of a prompt's or a resource's text a message takes. */
export const MAX_ATTACHED_BYTES = 64 * 1024
/** The most resources attached to one message at the interactive prompt. */
export const MAX_ATTACHMENTS = 4

/** One part of a prompt's message as text: a resource's text under a line naming it, media as a line. */
const partText = (part: McpContent): string => {
  switch (part.type) {
    case "text":
      return String((part as { text: string }).text)
    case "resource": {
      const resource = (part as { resource: { uri: string; text?: string; mimeType?: string } }).resource
      const head = `[resource ${resource.uri}${resource.mimeType === undefined ? "" : ` (${resource.mimeType})`}]`
      return resource.text === undefined ? `${head} (binary, not included)` : `${head}\n${resource.text}`
    }
    case "resource_link":
      return `[resource link ${String((part as { uri: string }).uri)}]`
    case "image":
    case "audio":
      return `[${part.type} ${String((part as { mimeType?: string }).mimeType ?? "")}, not included]`
    default:
      return `[${part.type}, not included]`
  }
}

const bounded = (text: string): string =>
  capText(text, Math.floor(MAX_ATTACHED_BYTES / 2), Math.floor(MAX_ATTACHED_BYTES / 2))

/**
 * A prompt's messages as one user message: the parts' text in order (an assistant's message is
 * marked as such), cut to `MAX_ATTACHED_BYTES` (head and tail).
 */
export const promptText = (result: McpPromptResult): string =>
  bounded(
    result.messages
      .map((m) => (m.role === "assistant" ? `[assistant]\n${partText(m.content)}` : partText(m.content)))
      .join("\n\n")
  )

/** A resource's contents as text to attach to a message: each under a line naming it, bounded. */
export const resourceText = (server: string, result: McpResourceResult): string =>
  bounded(
    result.contents
      .map((c) => {
        const head = `[resource ${server}:${c.uri}${c.mimeType === undefined ? "" : ` (${c.mimeType})`}]`
        return c.text === undefined
          ? `${head} (binary, ${Buffer.from(c.blob ?? "", "base64").byteLength} bytes, not included)`
          : `${head}\n${c.text}`
      })
      .join("\n\n")
  )

/** `/mcp__<server>__<prompt> …`: the server, the prompt and the rest; undefined for any other line. */
export const parsePromptCommand = (
  line: string
): { readonly server: string; readonly prompt: string; readonly args: string } | undefined => {
  const match = /^\/mcp__([A-Za-z0-9][A-Za-z0-9_-]*?)__(\S+)(?:\s+([\s\S]*))?$/.exec(line.trim())
  return match === null ? undefined : { server: match[1]!, prompt: match[2]!, args: (match[3] ?? "").trim() }
}

/** `/mcp-resource <server> <uri> [message…]`: the server, the resource and the message; undefined for any other line. */
export const parseResourceCommand = (
  line: string
): { readonly server: string; readonly uri: string; readonly message: string } | undefined => {
  const match = /^\/mcp-resource\s+(\S+)\s+(\S+)(?:\s+([\s\S]*))?$/.exec(line.trim())
  return match === null ? undefined : { server: match[1]!, uri: match[2]!, message: (match[3] ?? "").trim() }
}

/**
 * The arguments typed after a prompt's command, by the prompt's declared arguments: `name=value`
 * words by name, the other words in order (the last declared argument takes the rest of the line).
 * A string naming what is wrong otherwise (an unknown name, a required argument missing, too many).
 */
export const promptArguments = (prompt: McpPromptInfo, typed: string): Record<string, string> | string => {
  const declared = prompt.arguments
  const names = new Set(declared.map((a) => a.name))
  const values: Record<string, string> = {}
  const positional: Array<string> = []
  for (const word of typed === "" ? [] : typed.split(/\s+/)) {
    const named = /^([A-Za-z_][\w-]*)=([\s\S]*)$/.exec(word)
    if (named !== null && names.has(named[1]!)) values[named[1]!] = named[2]!
    else positional.push(word)
  }
  const free = declared.filter((a) => values[a.name] === undefined)
  if (positional.length > 0 && free.length === 0)
    return `the prompt ${prompt.name} takes ${declared.length === 0 ? "no arguments" : `only ${declared.map((a) => a.name).join(", ")}`}`
  free.forEach((arg, i) => {
    if (i >= positional.length) return
    values[arg.name] = i === free.length - 1 ? positional.slice(i).join(" ") : positional[i]!
  })
  const missing = declared.filter((a) => a.required && values[a.name] === undefined).map((a) => a.name)
  if (missing.length > 0) return `the prompt ${prompt.name} needs ${missing.join(", ")} (name=value, or in order)`
  return values
}

/** How a prompt's command is shown in /help: `/mcp__s__p <city> [state]`. */
export const promptUsage = (server: string, prompt: McpPromptInfo): string =>
  [
    `/mcp__${server}__${prompt.name}`,
    ...prompt.arguments.map((a) => (a.required ? `<${a.name}>` : `[${a.name}]`))
  ].join(" ")

/**
 * The user message of `/mcp__<server>__<prompt> args`: the prompt filled in by the server (it waits
 * while the server starts). Fails with a sentence for the user: no such server or prompt, the
 * arguments do not fit, the server failed.
 */
export const promptMessage = (
  servers: McpServers["Type"],
  command: { readonly server: string; readonly prompt: string; readonly args: string }
): Effect.Effect<string, string> =>
  Effect.gen(function* () {
    const connection = yield* servers.connection(command.server)
    const status = servers.status().find((s) => s.name === command.server)
    if (connection === undefined) {
      return yield* Effect.fail(
        status === undefined
          ? `no MCP server is named "${command.server}" (${
              servers
                .status()
                .map((s) => s.name)
                .join(", ") || "none is configured"
            })`
          : `MCP server "${command.server}" is ${status.state}${status.lastError === undefined ? "" : `: ${status.lastError}`}`
      )
    }
    const prompt = connection.prompts.find((p) => p.name === command.prompt)
    if (prompt === undefined) {
      const names = connection.prompts.map((p) => p.name)
      return yield* Effect.fail(
        `MCP server "${command.server}" has no prompt "${command.prompt}" (${names.length === 0 ? "it has no prompts" : `its prompts: ${names.join(", ")}`})`
      )
    }
    const args = promptArguments(prompt, command.args)
    if (typeof args === "string") return yield* Effect.fail(args)
    const result = yield* connection.getPrompt(prompt.name, args).pipe(Effect.mapError((error) => error.message))
    return promptText(result)
  })

/** The text of resource `uri` of `server`, to attach to a message; a sentence for the user when it cannot be read. */
export const attachResource = (
  servers: McpServers["Type"],
  server: string,
  uri: string
): Effect.Effect<string, string> =>
  Effect.gen(function* () {
    const connection = yield* servers.connection(server)
    if (connection === undefined) {
      const status = servers.status().find((s) => s.name === server)
      return yield* Effect.fail(
        status === undefined ? `no MCP server is named "${server}"` : `MCP server "${server}" is ${status.state}`
      )
    }
    const result = yield* connection.readResource(uri).pipe(Effect.mapError((error) => error.message))
    return resourceText(server, result)
  })
