/**
 * What one MCP server is, as `McpClient` starts it: a command over stdio or a Streamable HTTP
 * URL, with its bounds. The config's `mcpServers` entries decode to this (config/ConfigSchema.ts);
 * docs/mcp.md describes the keys.
 */

/** The bounds every server gets unless its entry says otherwise. */
export const defaultMcpBounds = {
  /** a call's timeout (ms) */
  timeoutMs: 120_000,
  /** how long starting the server (connect, initialize, list its tools) may take (ms) */
  startTimeoutMs: 30_000,
  /** the most of a result's text the model reads: head and tail (bytes) */
  maxOutputBytes: 32 * 1024,
  /** the largest message the server may send (a result included); past it the call fails (bytes) */
  maxResultBytes: 16 * 1024 * 1024,
  /** the most tools taken from one server */
  maxTools: 128
} as const

export interface McpBounds {
  readonly timeoutMs: number
  readonly startTimeoutMs: number
  readonly maxOutputBytes: number
  readonly maxResultBytes: number
  readonly maxTools: number
}

/** A server started as a child process, spoken to over its stdin and stdout. */
export interface McpStdioServer extends McpBounds {
  readonly type: "stdio"
  readonly command: string
  readonly args: ReadonlyArray<string>
  /** its environment besides the minimal base (values may use `${NAME}` from logbook's environment) */
  readonly env: Readonly<Record<string, string>>
  /** its working directory: absolute, or relative to the workspace (default: the workspace) */
  readonly cwd?: string | undefined
  /** `false`: never in the sandbox of `bash` (only the user's own config may say so); default in it where it can run */
  readonly sandbox?: boolean | undefined
}

/** A server reached over Streamable HTTP. */
export interface McpHttpServer extends McpBounds {
  readonly type: "http"
  readonly url: string
  /** headers of every request (values may use `${NAME}` from logbook's environment) */
  readonly headers: Readonly<Record<string, string>>
  /** the variable holding a token sent as `Authorization: Bearer <token>` */
  readonly bearerTokenEnv?: string | undefined
}

export type McpServerSpec = McpStdioServer | McpHttpServer

/** A server name: also the middle of its tools' names (`mcp__<server>__<tool>`). */
export const serverNamePattern = /^(?!.*__)[A-Za-z0-9][A-Za-z0-9_-]{0,31}$/

/** How the authorization URL is visited: the user's browser (`logbook mcp login`) or a fetch (tests). */
export interface Authorization {
  /** where the authorization server sends the browser back */
  readonly redirectUrl: string
  /** visits the URL and resolves to the code the redirect carried */
  readonly visit: (url: URL) => Promise<string>
  /** a client registered beforehand (no dynamic registration) */
  readonly client?: { readonly client_id: string; readonly client_secret?: string | undefined } | undefined
}
