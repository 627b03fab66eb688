/**
 * A stdio MCP server in the sandbox of `bash` (bubblewrap): it writes the workspace and not outside
 * it, sees no provider key, and `"sandbox": false` runs it unconfined. Its group is recorded while
 * it runs, and the sweep stops what a process now gone left (`sweepOrphanServers`).
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { McpClient, type McpConnection, sweepOrphanServers } from "../../src/mcp/McpClient.js"
import type { McpStdioServer } from "../../src/mcp/McpSettings.js"
import { PROCESS_TOKEN_ENV } from "../../src/tools/processGroup.js"
import { defaultSandboxSettings, probeSandbox } from "../../src/tools/Sandbox.js"
import { hasBwrap, outsideDir, removeOutsideDirs } from "../support/bwrap.js"
import { everythingStdio } from "../support/mcpServers.js"
import { tempDir } from "../support/tmp.js"

afterAll(removeOutsideDirs)

const fixture = path.join(import.meta.dirname, "..", "support", "mcpFixture.mjs")
const KEYS = { OPENAI_API_KEY: "sk-test-openai-0123456789abcdef" }
const env = { PATH: process.env.PATH, HOME: process.env.HOME, LANG: "C.UTF-8", ...KEYS }

const fixtureSpec = (extra: Partial<McpStdioServer> = {}): McpStdioServer => ({
  ...everythingStdio(),
  command: process.execPath,
  args: [fixture],
  ...extra
})

const text = (result: { readonly content: ReadonlyArray<{ readonly type: string }> }): string =>
  result.content.map((part) => ("text" in part ? String(part.text) : "")).join("")

/** `spec` started in `workspace` by a client given the sandbox as the agent's layer gives it (settings and probe). */
const sandboxed = (workspace: string, spec: McpStdioServer) =>
  Effect.gen(function* () {
    const status = yield* probeSandbox({ network: true })
    expect(status._tag).toBe("Available")
    const layer = McpClient.layer({ env, sandbox: { ...defaultSandboxSettings, status } })
    return yield* Effect.flatMap(McpClient, (mcp) => mcp.connect("fixture", spec, { cwd: workspace })).pipe(
      Effect.provide(layer)
    )
  })

const write = (server: McpConnection, file: string) => server.callTool("write", { path: file, text: "x" })

describe.skipIf(!hasBwrap)("a stdio MCP server in the sandbox", () => {
  it.live("writes the workspace, not outside it; sees no provider key", () =>
    Effect.gen(function* () {
      const workspace = tempDir("logbook-mcp-ws-")
      const outside = outsideDir()
      const server = yield* sandboxed(workspace, fixtureSpec())
      const inside = yield* write(server, path.join(workspace, "inside.txt"))
      expect(inside.isError).toBe(false)
      expect(fs.readFileSync(path.join(workspace, "inside.txt"), "utf8")).toBe("x")
      const refused = yield* write(server, path.join(outside, "escaped.txt"))
      expect(refused.isError).toBe(true)
      expect(text(refused)).toMatch(/read-only file system/i)
      expect(fs.existsSync(path.join(outside, "escaped.txt"))).toBe(false)

      const everything = yield* sandboxed(workspace, everythingStdio())
      const seen = JSON.parse(text(yield* everything.callTool("get-env", {}))) as Record<string, string>
      expect(seen.OPENAI_API_KEY).toBeUndefined()
      expect(JSON.stringify(seen)).not.toContain(KEYS.OPENAI_API_KEY)
      expect(seen.PATH).toBe(process.env.PATH)
    }).pipe(Effect.scoped)
  )

  it.live('"sandbox": false runs it unconfined', () =>
    Effect.gen(function* () {
      const workspace = tempDir("logbook-mcp-ws-")
      const outside = outsideDir()
      const server = yield* sandboxed(workspace, fixtureSpec({ sandbox: false }))
      const wrote = yield* write(server, path.join(outside, "allowed.txt"))
      expect(wrote.isError).toBe(false)
      expect(fs.existsSync(path.join(outside, "allowed.txt"))).toBe(true)
    }).pipe(Effect.scoped)
  )
})

describe("the records of running stdio servers", () => {
  it.live("are kept while a server runs and removed when it stops", () =>
    Effect.gen(function* () {
      const records = tempDir("logbook-mcp-records-")
      const workspace = tempDir("logbook-mcp-ws-")
      const layer = McpClient.layer({ env, recordsDir: records })
      const group = yield* Effect.gen(function* () {
        const mcp = yield* McpClient
        const server = yield* mcp.connect("fixture", fixtureSpec(), { cwd: workspace })
        const group = (yield* server.processGroup)!
        const files = fs.readdirSync(records)
        expect(files).toEqual([expect.stringMatching(new RegExp(`^${process.pid}-\\d+-${group}\\.json$`))])
        expect(JSON.parse(fs.readFileSync(path.join(records, files[0]!), "utf8"))).toMatchObject({ pgid: group })
        return group
      }).pipe(Effect.scoped, Effect.provide(layer))
      expect(group).toBeGreaterThan(1)
      expect(fs.readdirSync(records)).toEqual([])
    })
  )

  it.live("the sweep stops the group a process now gone recorded, proven by its token, and removes the record", () =>
    Effect.gen(function* () {
      const records = tempDir("logbook-mcp-records-")
      const token = `test-${process.pid}-${Date.now()}`
      // a "server" that outlived its logbook: its own group, carrying the token
      const orphan = spawn("sleep", ["600"], { detached: true, stdio: "ignore", env: { [PROCESS_TOKEN_ENV]: token } })
      const pgid = orphan.pid!
      // no process 999999999 runs: its records are a dead process's
      fs.writeFileSync(path.join(records, `999999999-1-${pgid}.json`), JSON.stringify({ pgid, token }))
      // a record whose group no longer carries the token is removed without a signal
      fs.writeFileSync(path.join(records, `999999999-1-999999.json`), JSON.stringify({ pgid: 999999, token: "gone" }))
      const exited = new Promise<NodeJS.Signals | null>((resolve) =>
        orphan.once("exit", (_, signal) => resolve(signal))
      )
      let told = 0
      const stopped = yield* sweepOrphanServers(
        records,
        Effect.sync(() => told++)
      )
      expect(stopped).toBe(1)
      expect(told).toBe(1)
      expect(yield* Effect.promise(() => exited)).toBe("SIGTERM")
      expect(fs.readdirSync(records)).toEqual([])
    })
  )
})
