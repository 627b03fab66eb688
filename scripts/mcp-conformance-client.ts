/**
 * logbook's MCP client (`McpClient`, src/mcp/McpClient.ts) as the client under test of the MCP
 * conformance suite (`@modelcontextprotocol/conformance`, docs/mcp.md "Conformance"): the suite starts
 * a test server on localhost for a scenario and runs this with the server's URL as the last
 * argument and the scenario's name in MCP_CONFORMANCE_SCENARIO. It does what a session does: start
 * the server over Streamable HTTP (initialize, list the tools), call each tool once with arguments
 * made from its input schema, and stop.
 */
import { Effect } from "effect"
import { McpClient } from "../src/mcp/McpClient.js"
import { defaultMcpBounds } from "../src/mcp/McpSettings.js"

const url = process.argv.at(-1) ?? ""

/** An argument of each declared property, by its JSON Schema type. */
const argumentsFor = (schema: Record<string, unknown>): Record<string, unknown> => {
  const properties = (schema.properties ?? {}) as Record<string, { readonly type?: string }>
  const example = (type: string | undefined): unknown =>
    type === "number" || type === "integer" ? 2 : type === "boolean" ? true : type === "array" ? [] : "x"
  return Object.fromEntries(Object.entries(properties).map(([name, property]) => [name, example(property.type)]))
}

const program = Effect.gen(function* () {
  const mcp = yield* McpClient
  const connection = yield* mcp.connect(
    "conformance",
    { type: "http", url, headers: {}, ...defaultMcpBounds, timeoutMs: 20_000, startTimeoutMs: 20_000 },
    { cwd: process.cwd() }
  )
  for (const tool of connection.tools) {
    const result = yield* connection.callTool(tool.name, argumentsFor(tool.inputSchema))
    console.log(`${tool.name}: ${JSON.stringify(result.content).slice(0, 200)}`)
  }
}).pipe(Effect.scoped, Effect.provide(McpClient.layer({ env: process.env })))

Effect.runPromise(program).then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(String(error))
    process.exit(1)
  }
)
