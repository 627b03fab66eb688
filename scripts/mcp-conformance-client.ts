/**
 * logbook's MCP client (`McpClient`, src/mcp/McpClient.ts) as the client under test of the MCP
 * conformance suite (`@modelcontextprotocol/conformance`, docs/mcp.md "Conformance"): the suite starts
 * a test server on localhost for a scenario and runs this with the server's URL as the last
 * argument and the scenario's name in MCP_CONFORMANCE_SCENARIO. It does what a session does: start
 * the server over Streamable HTTP (initialize, list the tools), call each tool once with arguments
 * made from its input schema, and stop. Where the server needs OAuth, the authorization URL is visited
 * with a GET whose redirect carries the code (the suite's authorization server answers at once), in
 * place of the user's browser; tokens are kept in a temporary auth file.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as NodePath from "node:path"
import { Effect } from "effect"
import { type Authorization, McpClient } from "../src/mcp/McpClient.js"
import { defaultMcpBounds } from "../src/mcp/McpSettings.js"

const url = process.argv.at(-1) ?? ""

/** An argument of each declared property, by its JSON Schema type. */
const argumentsFor = (schema: Record<string, unknown>): Record<string, unknown> => {
  const properties = (schema.properties ?? {}) as Record<string, { readonly type?: string }>
  const example = (type: string | undefined): unknown =>
    type === "number" || type === "integer" ? 2 : type === "boolean" ? true : type === "array" ? [] : "x"
  return Object.fromEntries(Object.entries(properties).map(([name, property]) => [name, example(property.type)]))
}

/** A client registered beforehand, when the scenario gives one (MCP_CONFORMANCE_CONTEXT). */
const preregistered = (): Authorization["client"] => {
  const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? "{}") as Record<string, unknown>
  return typeof context.client_id === "string" && context.private_key_pem === undefined
    ? {
        client_id: context.client_id,
        client_secret: typeof context.client_secret === "string" ? context.client_secret : undefined
      }
    : undefined
}

const authorization: Authorization = {
  redirectUrl: "http://127.0.0.1:1/callback",
  client: preregistered(),
  visit: async (url) => {
    const response = await fetch(url, { redirect: "manual" })
    await response.body?.cancel()
    const location = response.headers.get("location")
    const code = location === null ? null : new URL(location).searchParams.get("code")
    if (code === null) throw new Error(`the authorization URL answered ${response.status} without a code`)
    return code
  }
}

const authFile = NodePath.join(mkdtempSync(NodePath.join(tmpdir(), "logbook-conformance-")), "mcp-auth.json")

const program = Effect.gen(function* () {
  const mcp = yield* McpClient
  const connection = yield* mcp.connect(
    "conformance",
    { type: "http", url, headers: {}, ...defaultMcpBounds, timeoutMs: 20_000, startTimeoutMs: 20_000 },
    { cwd: process.cwd(), authorization }
  )
  for (const tool of connection.tools) {
    const result = yield* connection.callTool(tool.name, argumentsFor(tool.inputSchema))
    console.log(`${tool.name}: ${JSON.stringify(result.content).slice(0, 200)}`)
  }
}).pipe(Effect.scoped, Effect.provide(McpClient.layer({ env: process.env, authFile })))

Effect.runPromise(program).then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(String(error))
    process.exit(1)
  }
)
