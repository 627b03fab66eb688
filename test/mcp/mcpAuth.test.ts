/**
 * The OAuth store of HTTP MCP servers (`<data home>/logbook/mcp-auth.json`): written whole and
 * atomically with mode 0600, one change at a time; a file that is not ours fails the start of a
 * server with a sentence naming it, and is left as it was. A session that would need a login neither
 * registers a client nor keeps one.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { AuthStore } from "../../src/mcp/internal/oauth.js"
import { McpClient, McpError } from "../../src/mcp/McpClient.js"
import { defaultMcpBounds } from "../../src/mcp/McpSettings.js"
import { startOAuthMcpServer } from "../support/oauthMcpServer.js"
import { tempDir } from "../support/tmp.js"

const connect = (url: string, authFile: string) =>
  Effect.gen(function* () {
    const client = yield* McpClient
    return yield* client.connect("secure", { type: "http", url, headers: {}, ...defaultMcpBounds }, { cwd: tempDir() })
  }).pipe(Effect.scoped, Effect.provide(McpClient.layer({ env: {}, authFile })))

describe("the MCP auth store", () => {
  it("writes mode 0600 over a looser file, keeps every one of concurrent changes, leaves no temporary file", async () => {
    const dir = tempDir()
    const file = path.join(dir, "mcp-auth.json")
    fs.writeFileSync(file, JSON.stringify({ version: 1, servers: {} }), { mode: 0o644 })
    const store = new AuthStore(file)
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        store.update(`http://127.0.0.1/${i}`, (e) => ({ ...e, codeVerifier: `v${i}` }))
      )
    )
    expect(fs.statSync(file).mode & 0o777).toBe(0o600)
    const servers = JSON.parse(fs.readFileSync(file, "utf8")).servers as Record<string, { codeVerifier: string }>
    expect(Object.keys(servers)).toHaveLength(20)
    expect(servers["http://127.0.0.1/7"]?.codeVerifier).toBe("v7")
    expect(fs.readdirSync(dir)).toEqual(["mcp-auth.json"])
  })

  it.effect("a file that is not JSON fails the start with a sentence naming it, and is left as it was", () =>
    Effect.gen(function* () {
      const oauth = yield* Effect.promise(startOAuthMcpServer)
      yield* Effect.addFinalizer(() => Effect.promise(oauth.close))
      const file = path.join(tempDir(), "mcp-auth.json")
      fs.writeFileSync(file, "{ not json", { mode: 0o600 })
      const exit = yield* Effect.exit(connect(oauth.url, file))
      expect(Exit.isFailure(exit)).toBe(true)
      const error = Exit.isFailure(exit) ? exit.cause : undefined
      const failure = error?._tag === "Fail" ? error.error : undefined
      expect(failure).toBeInstanceOf(McpError)
      expect((failure as McpError).message).toBe(
        `MCP server "secure" did not start: its stored authorization: ${file} is not valid JSON; fix or remove it (then log in again)`
      )
      expect(fs.readFileSync(file, "utf8")).toBe("{ not json")
    }).pipe(Effect.scoped)
  )

  it.effect("a session without tokens fails with NeedsLogin, registers no client and keeps none", () =>
    Effect.gen(function* () {
      const oauth = yield* Effect.promise(startOAuthMcpServer)
      yield* Effect.addFinalizer(() => Effect.promise(oauth.close))
      const file = path.join(tempDir(), "mcp-auth.json")
      const exit = yield* Effect.exit(connect(oauth.url, file))
      const error = Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined
      expect(error?.reason).toBe("NeedsLogin")
      expect(error?.message).toBe('MCP server "secure" needs you to log in: run `logbook mcp login secure`')
      expect(oauth.registrations()).toBe(0)
      // at most what discovery found: no client, no verifier, no tokens
      const kept = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, "utf8")).servers[oauth.url] : {}
      expect(Object.keys(kept ?? {}).filter((key) => key !== "discovery")).toEqual([])
    }).pipe(Effect.scoped)
  )
})
