/**
 * The config's `mcpServers` entries as `McpClient` starts them: the transport told from the keys
 * (`command` is stdio, `"type": "http"` needs `url`), keys of the other transport refused, and the
 * bounds' defaults filled in. docs/mcp.md describes the keys.
 */
import { defaultMcpBounds, type McpServerSpec } from "../mcp/McpSettings.js"
import type { McpServerInput } from "./ConfigSchema.js"

/** A problem of one entry: the key at fault (below `mcpServers.<name>`) and what is wrong. */
export interface McpEntryProblem {
  readonly key: ReadonlyArray<string>
  readonly reason: string
}

const stdioKeys = ["command", "args", "env", "cwd", "sandbox"] as const
const httpKeys = ["url", "headers", "bearerTokenEnv"] as const

/** The server an entry describes, or the first problem with it. */
export const mcpServerSpec = (entry: McpServerInput): McpServerSpec | McpEntryProblem => {
  const type = entry.type ?? (entry.url !== undefined && entry.command === undefined ? "http" : "stdio")
  const bounds = {
    timeoutMs: entry.timeoutMs ?? defaultMcpBounds.timeoutMs,
    startTimeoutMs: entry.startTimeoutMs ?? defaultMcpBounds.startTimeoutMs,
    maxOutputBytes: entry.maxOutputBytes ?? defaultMcpBounds.maxOutputBytes,
    maxResultBytes: entry.maxResultBytes ?? defaultMcpBounds.maxResultBytes,
    maxTools: entry.maxTools ?? defaultMcpBounds.maxTools
  }
  if (type === "stdio") {
    const other = httpKeys.find((key) => entry[key] !== undefined)
    if (other !== undefined) {
      return { key: [other], reason: 'is only for a server of "type": "http"; a stdio server is started by "command"' }
    }
    if (entry.command === undefined) {
      return {
        key: ["command"],
        reason:
          'is required: the program that is the server (e.g. "npx"), or give "type": "http" and "url" for a ' +
          "server reached over HTTP"
      }
    }
    return {
      type,
      command: entry.command,
      args: entry.args ?? [],
      env: entry.env ?? {},
      ...(entry.cwd === undefined ? {} : { cwd: entry.cwd }),
      ...(entry.sandbox === undefined ? {} : { sandbox: entry.sandbox }),
      ...bounds
    }
  }
  const other = stdioKeys.find((key) => entry[key] !== undefined)
  if (other !== undefined) {
    return { key: [other], reason: 'is only for a stdio server; a server of "type": "http" is reached at "url"' }
  }
  if (entry.url === undefined) {
    return {
      key: ["url"],
      reason: 'is required for a server of "type": "http": its endpoint, e.g. "https://example.com/mcp"'
    }
  }
  return {
    type,
    url: entry.url,
    headers: entry.headers ?? {},
    ...(entry.bearerTokenEnv === undefined ? {} : { bearerTokenEnv: entry.bearerTokenEnv }),
    ...bounds
  }
}

export const isMcpEntryProblem = (value: McpServerSpec | McpEntryProblem): value is McpEntryProblem => "reason" in value

/** The servers of a resolved config that are enabled, by name (the config was checked when it loaded). */
export const enabledMcpServers = (
  servers: Readonly<Record<string, McpServerInput>>
): ReadonlyArray<{ readonly name: string; readonly spec: McpServerSpec }> =>
  Object.entries(servers).flatMap(([name, entry]) => {
    if (entry.enabled === false) return []
    const spec = mcpServerSpec(entry)
    return isMcpEntryProblem(spec) ? [] : [{ name, spec }]
  })
