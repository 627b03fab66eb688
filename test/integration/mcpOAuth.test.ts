/**
 * An MCP server that requires OAuth, through the built binary: without stored tokens a session does
 * not start it and says to log in; `logbook mcp login` prints the authorization URL (the test visits
 * it as the browser would) and keeps the tokens in `<data home>/logbook/mcp-auth.json` (0600); then
 * `mcp test` and a run need no login, an expired access token is refreshed by itself, no token
 * reaches the output or the event log, and `logbook mcp logout` forgets them.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runCli, scratchDir, spawnCli } from "../support/cli.js"
import { type OAuthMcpServer, startOAuthMcpServer } from "../support/oauthMcpServer.js"
import { Reply } from "../support/scriptedServer.js"
import {
  contentText,
  latestSession,
  makeJanitor,
  makeWorkspace,
  readLog,
  toolCall,
  toolResult,
  userConfigEnv
} from "./support.js"

const janitor = makeJanitor()
let oauthServer: OAuthMcpServer | undefined
afterEach(async () => {
  await oauthServer?.close()
  oauthServer = undefined
  await janitor.release()
})

const needsLogin = 'MCP server "secure" needs you to log in: run `logbook mcp login secure`'

/** Every file of the database (with its WAL), as text. */
const databaseText = (db: string): string =>
  fs
    .readdirSync(path.dirname(db))
    .filter((name) => name.startsWith(path.basename(db)))
    .map((name) => fs.readFileSync(path.join(path.dirname(db), name)).toString("latin1"))
    .join("\n")

describe("an MCP server that requires OAuth", () => {
  it("logbook mcp login keeps its tokens (0600); mcp test and a run then call it; refresh by itself; logout forgets", async () => {
    const oauth = await startOAuthMcpServer()
    oauthServer = oauth
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const env = {
      ...userConfigEnv({
        mcpServers: { secure: { type: "http", url: oauth.url } },
        permission: { "mcp__secure__*": "allow" }
      }),
      XDG_DATA_HOME: scratchDir()
    }
    const authFile = path.join(env.XDG_DATA_HOME, "logbook", "mcp-auth.json")
    const outputs: Array<string> = []

    // without a login: the session does not start the server, and says what to do
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_early", "mcp__secure__echo", { message: "x" })] }),
      Reply.text("No tools.")
    )
    const before = await runCli([...ws.runArgs, "use the tool"], { env })
    outputs.push(before.stdout, before.stderr)
    expect(before.code, before.stderr).toBe(0)
    expect(contentText(toolResult(server.requests[1]!, "call_early"))).toBe(
      `The tool "mcp__secure__echo" is not available: ${needsLogin}`
    )
    expect(before.stderr).toContain(needsLogin)
    const untested = await runCli(["mcp", "test", "secure"], { env })
    expect(untested.code).not.toBe(0)
    expect(untested.stderr).toContain(needsLogin)

    // the login: the test is the browser
    const login = spawnCli(["mcp", "login", "secure"], { env })
    const lines = await login.waitForLines(5)
    const shown = lines.find((line) => line.trim().startsWith("http://127.0.0.1"))
    expect(shown, lines.join("\n")).toBeDefined()
    const authorizationUrl = new URL(shown!.trim())
    expect(authorizationUrl.searchParams.get("code_challenge_method")).toBe("S256")
    const redirect = await fetch(authorizationUrl, { redirect: "manual" })
    expect(redirect.status).toBe(302)
    const callback = await fetch(redirect.headers.get("location")!)
    expect(callback.status).toBe(200)
    const ended = await login.exited
    outputs.push(login.lines().join("\n"), login.stderr())
    expect(ended.code, login.stderr()).toBe(0)
    expect(login.lines().join("\n")).toContain('✓ Logged in to MCP server "secure" (1 tools)')
    expect(fs.statSync(authFile).mode & 0o777).toBe(0o600)
    expect(oauth.registrations()).toBe(1)

    // no login needed any more: mcp test, and a run that calls the tool
    const tested = await runCli(["mcp", "test", "secure"], { env })
    outputs.push(tested.stdout, tested.stderr)
    expect(tested.code, tested.stderr).toBe(0)
    expect(tested.stdout).toContain("mcp__secure__echo")
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_echo", "mcp__secure__echo", { message: "hi" })] }),
      Reply.text("Done.")
    )
    const run = await runCli([...ws.runArgs, "use the tool"], { env })
    outputs.push(run.stdout, run.stderr)
    expect(run.code, run.stderr).toBe(0)
    expect(contentText(toolResult(server.requests.at(-1)!, "call_echo"))).toBe("echo: hi")

    // an access token the server no longer takes: refreshed with the stored refresh token, no login
    oauth.expireAccessTokens()
    const refreshed = await runCli(["mcp", "test", "secure"], { env })
    outputs.push(refreshed.stdout, refreshed.stderr)
    expect(refreshed.code, refreshed.stderr).toBe(0)
    expect(oauth.refreshes()).toBe(1)
    expect(fs.statSync(authFile).mode & 0o777).toBe(0o600)

    // a login with tokens that work asks for no authorization
    const again = await runCli(["mcp", "login", "secure"], { env })
    outputs.push(again.stdout, again.stderr)
    expect(again.code, again.stderr).toBe(0)
    expect(again.stdout).toContain('MCP server "secure" started without a new authorization (1 tools)')
    expect(oauth.registrations()).toBe(1)

    // no token in what logbook printed, nor in the log
    const id = await latestSession(ws.db, ws.dir)
    const log = JSON.stringify(await readLog(ws.db, id))
    const stored = databaseText(ws.db)
    expect(oauth.issued.length).toBeGreaterThanOrEqual(4)
    for (const token of oauth.issued) {
      for (const output of outputs) expect(output).not.toContain(token)
      expect(log).not.toContain(token)
      expect(stored).not.toContain(token)
    }
    expect(fs.readFileSync(authFile, "utf8")).toContain(oauth.issued.at(-2)!)

    // logout: forgotten; the server needs a login again
    const logout = await runCli(["mcp", "logout", "secure"], { env })
    expect(logout.code, logout.stderr).toBe(0)
    expect(logout.stdout).toContain('Logged out of MCP server "secure"')
    expect(fs.readFileSync(authFile, "utf8")).not.toContain(oauth.issued.at(-2)!)
    const after = await runCli(["mcp", "test", "secure"], { env })
    expect(after.code).not.toBe(0)
    expect(after.stderr).toContain(needsLogin)
  })

  it("Ctrl-C cancels a login that waits for the browser: it ends, the loopback server is gone, no token is kept", async () => {
    const oauth = await startOAuthMcpServer()
    oauthServer = oauth
    const env = {
      ...userConfigEnv({ mcpServers: { secure: { type: "http", url: oauth.url } } }),
      XDG_DATA_HOME: scratchDir()
    }
    const login = spawnCli(["mcp", "login", "secure"], { env })
    const lines = await login.waitForLines(5)
    const shown = lines.find((line) => line.trim().startsWith("http://127.0.0.1"))
    const redirectUri = new URL(shown!.trim()).searchParams.get("redirect_uri")!
    login.child.kill("SIGINT")
    const ended = await login.exited
    expect(ended.code === 0 && ended.signal === null).toBe(false)
    await expect(fetch(redirectUri)).rejects.toThrow()
    const file = path.join(env.XDG_DATA_HOME, "logbook", "mcp-auth.json")
    const kept = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : ""
    expect(kept).not.toContain("access_token")
  })
})
