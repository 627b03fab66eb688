/**
 * The reference MCP server (`@modelcontextprotocol/server-everything`, a devDependency) for tests:
 * its script, a stdio spec for it (optionally with its stdin copied to a file, to see what it was
 * sent), and the server started in Streamable HTTP mode on a free loopback port.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { defaultMcpBounds, type McpStdioServer } from "../../src/mcp/McpSettings.js"
import { root } from "./cli.js"

export const everythingScript = path.join(
  root,
  "node_modules",
  "@modelcontextprotocol",
  "server-everything",
  "dist",
  "index.js"
)

/** server-everything over stdio, run by this Node; with `stdinLog`, everything it is sent is also written there. */
export const everythingStdio = (
  options: { readonly stdinLog?: string; readonly env?: Record<string, string> } & Partial<McpStdioServer> = {}
): McpStdioServer => {
  const { stdinLog, env, ...rest } = options
  const run = `exec '${process.execPath}' '${everythingScript}' stdio`
  return {
    ...defaultMcpBounds,
    type: "stdio",
    command: stdinLog === undefined ? process.execPath : "sh",
    args: stdinLog === undefined ? [everythingScript, "stdio"] : ["-c", `tee -a '${stdinLog}' | ${run}`],
    env: env ?? {},
    ...rest
  }
}

export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

/** server-everything in Streamable HTTP mode, listening when this resolves; `stop` kills it. */
export const startEverythingHttp = async (): Promise<{
  readonly url: string
  readonly child: ChildProcess
  readonly stop: () => void
}> => {
  const port = await freePort()
  const child = spawn(process.execPath, [everythingScript, "streamableHttp"], {
    env: { PATH: process.env.PATH ?? "", PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true
  })
  const stop = () => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL")
    } catch {}
  }
  await new Promise<void>((resolve, reject) => {
    let seen = ""
    child.stderr?.on("data", (chunk: Buffer) => {
      seen += chunk.toString()
      if (seen.includes("listening on port")) resolve()
    })
    child.once("exit", (code) => reject(new Error(`server-everything exited (${code}): ${seen}`)))
  })
  return { url: `http://127.0.0.1:${port}/mcp`, child, stop }
}

/** Waits (polling a file, an observable condition) until `file` contains `text`. */
export const waitForFileText = async (file: string, text: string): Promise<void> => {
  for (;;) {
    if (fs.existsSync(file) && fs.readFileSync(file, "utf8").includes(text)) return
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** Our own fixture server (test/support/fixtureMcpServer.mjs): its tools are listed there. */
export const fixtureScript = path.join(root, "test", "support", "fixtureMcpServer.mjs")

/**
 * The fixture server's config entry; `started` gets a line each time it starts (the server then
 * runs outside the sandbox, whose private /tmp would hide the file), `many` adds that many tools.
 */
export const fixtureServer = (options: { readonly started?: string; readonly many?: number } = {}) => ({
  command: process.execPath,
  args: [
    fixtureScript,
    ...(options.started === undefined ? [] : ["--started", options.started]),
    ...(options.many === undefined ? [] : ["--many", String(options.many)])
  ],
  ...(options.started === undefined ? {} : { sandbox: false })
})

/**
 * A server entry whose command only writes a line to `marker` and exits: a test sees it was started
 * (outside the sandbox, whose private /tmp would hide the marker; a user's config may say so).
 */
export const markerServer = (marker: string) => ({
  command: "sh",
  args: ["-c", `echo started >> '${marker}'; exit 1`],
  sandbox: false
})
