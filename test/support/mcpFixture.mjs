/**
 * A small MCP server for the tests of hard cases, over stdio (`node mcpFixture.mjs`) or Streamable
 * HTTP (`node mcpFixture.mjs http <port>`, one session). Its tools:
 *
 * - `write {path, text}`: writes a file (to see what the sandbox lets it write);
 * - `wait {}`: answers only when cancelled, and appends `{"cancelled": <request id>}` to
 *   `$FIXTURE_LOG` when the client's `notifications/cancelled` arrives;
 * - `crash {}`: the server dies during the call (exit code 3) the first time `$FIXTURE_LOG`'s
 *   directory has no `crashed` file, and answers "survived" after that;
 * - `big {bytes}`: a text of `bytes` bytes: `a`s then `z`s;
 * - `echo {message}`.
 *
 * With `FIXTURE_STAY=1` it does not end when its stdin closes (as a server that forked would not).
 */
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"

const log = process.env.FIXTURE_LOG
const note = (entry) => {
  if (log !== undefined) fs.appendFileSync(log, `${JSON.stringify(entry)}\n`)
}

const object = (properties) => ({ type: "object", properties })
const tools = [
  {
    name: "write",
    description: "Writes a file.",
    inputSchema: object({ path: { type: "string" }, text: { type: "string" } })
  },
  { name: "wait", description: "Answers only when cancelled.", inputSchema: object({}) },
  { name: "crash", description: "Dies during the call, once.", inputSchema: object({}) },
  { name: "big", description: "A large text.", inputSchema: object({ bytes: { type: "number" } }) },
  { name: "echo", description: "Echoes the message.", inputSchema: object({ message: { type: "string" } }) }
]

const text = (value, isError = false) => ({ content: [{ type: "text", text: value }], isError })

const makeServer = () => {
  const server = new Server({ name: "fixture", version: "1.0.0" }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools }))
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
    const args = request.params.arguments ?? {}
    switch (request.params.name) {
      case "write":
        try {
          fs.writeFileSync(String(args.path), String(args.text ?? ""))
          return text(`wrote ${args.path}`)
        } catch (error) {
          return text(`could not write ${args.path}: ${error.message}`, true)
        }
      case "wait":
        note({ waiting: extra.requestId })
        return new Promise((resolve) => {
          extra.signal.addEventListener("abort", () => {
            note({ cancelled: extra.requestId })
            resolve(text("cancelled"))
          })
        })
      case "crash": {
        const marker = path.join(path.dirname(log ?? "."), "crashed")
        if (fs.existsSync(marker)) return text("survived")
        fs.writeFileSync(marker, "")
        process.stderr.write("fixture: crashing on purpose\n")
        process.exit(3)
        return text("unreachable")
      }
      case "big": {
        const bytes = Number(args.bytes ?? 0)
        return text(`${"a".repeat(Math.floor(bytes / 2))}${"z".repeat(Math.ceil(bytes / 2))}`)
      }
      case "echo":
        return text(`Echo: ${args.message}`)
      default:
        return text(`no tool ${request.params.name}`, true)
    }
  })
  return server
}

if (process.env.FIXTURE_STAY === "1") setInterval(() => {}, 1 << 30)

if (process.argv[2] === "http") {
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => "fixture-session" })
  await makeServer().connect(transport)
  const listener = http.createServer((req, res) => {
    let body = ""
    req.on("data", (chunk) => {
      body += chunk
    })
    req.on("end", () => {
      transport.handleRequest(req, res, body === "" ? undefined : JSON.parse(body))
    })
  })
  listener.listen(Number(process.argv[3]), "127.0.0.1", () => process.stderr.write("fixture: listening\n"))
} else {
  await makeServer().connect(new StdioServerTransport())
}
