/**
 * MCP prompts and resources through the built binary, with the real reference server
 * (`@modelcontextprotocol/server-everything`, stdio) and the scripted model server: a prompt is
 * `/mcp__<server>__<prompt> args` in `logbook run` (its arguments by position or by name; the
 * message the model gets is the prompt the server filled in, an embedded resource as text); a
 * prompt that does not exist or lacks an argument is refused before anything is sent;
 * `/mcp-resource` attaches a resource to the message. At the interactive prompt (tmux), `/mcp`
 * shows each server's state, tools and prompts, and `/help` lists the prompts.
 */
import * as fs from "node:fs"
import { afterEach, describe, expect, it } from "vitest"
import { runCli } from "../support/cli.js"
import { everythingScript } from "../support/mcpServers.js"
import { type RecordedRequest, Reply } from "../support/scriptedServer.js"
import { hasTmux, runInTmux } from "../support/tmux.js"
import {
  contentText,
  latestSession,
  makeJanitor,
  makeWorkspace,
  messagesOf,
  ofType,
  readLog,
  userConfigEnv
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const everything = { command: process.execPath, args: [everythingScript, "stdio"] }

const lastUserText = (request: RecordedRequest): string =>
  contentText(
    messagesOf(request)
      .filter((m) => m.role === "user")
      .at(-1)
  )

/** Waits until `probe` holds (the screen changed), polling; never a fixed sleep. */
const poll = async (what: string, probe: () => boolean, timeoutMs = 20_000) => {
  const deadline = Date.now() + timeoutMs
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`waited ${timeoutMs} ms for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

const setUp = async (servers: Record<string, unknown> = { everything }) => {
  const server = await janitor.server()
  const ws = makeWorkspace(server)
  return { server, ws, env: userConfigEnv({ mcpServers: servers }) }
}

describe("MCP prompts and resources in logbook run", () => {
  it("/mcp__everything__args-prompt sends the prompt the server filled in: arguments in order or by name", async () => {
    const { env, server, ws } = await setUp()
    server.enqueue(Reply.text("Sunny."), Reply.text("Rainy."))
    const byPosition = await runCli([...ws.runArgs, "/mcp__everything__args-prompt", "Paris"], { env })
    expect(byPosition.code, byPosition.stderr).toBe(0)
    expect(lastUserText(server.requests[0]!)).toBe("What's weather in Paris?")
    const byName = await runCli([...ws.runArgs, "/mcp__everything__args-prompt state=Texas city=Paris"], { env })
    expect(byName.code, byName.stderr).toBe(0)
    expect(lastUserText(server.requests[1]!)).toBe("What's weather in Paris, Texas?")
    // the log records the message the model got; the title is what was typed
    const id = await latestSession(ws.db, ws.dir)
    const log = await readLog(ws.db, id)
    expect(ofType(log, "user.message")[0]?.payload.text).toBe("What's weather in Paris, Texas?")
    expect(ofType(log, "session.created")[0]?.payload.title).toBe(
      "/mcp__everything__args-prompt state=Texas city=Paris"
    )
  })

  it("a prompt's embedded resource is text in the message; /mcp-resource attaches a resource", async () => {
    const { env, server, ws } = await setUp()
    server.enqueue(Reply.text("Read it."), Reply.text("Read that too."))
    const embedded = await runCli([...ws.runArgs, "/mcp__everything__resource-prompt Text 3"], { env })
    expect(embedded.code, embedded.stderr).toBe(0)
    const text = lastUserText(server.requests[0]!)
    expect(text).toMatch(/^This prompt includes the Text resource with id: 3\. Please analyze the following resource:/)
    expect(text).toMatch(
      /\[resource demo:\/\/resource\/dynamic\/text\/3 \(text\/plain\)\]\nResource 3: This is a plaintext resource/
    )
    const attached = await runCli(
      [...ws.runArgs, "/mcp-resource everything demo://resource/dynamic/text/7 summarise this"],
      { env }
    )
    expect(attached.code, attached.stderr).toBe(0)
    expect(lastUserText(server.requests[1]!)).toMatch(
      /^summarise this\n\n\[resource everything:demo:\/\/resource\/dynamic\/text\/7 \(text\/plain\)\]\nResource 7: This is a plaintext resource/
    )
  })

  it("a prompt that does not exist, or lacks a required argument, is refused before anything is sent", async () => {
    const { env, server, ws } = await setUp()
    const unknown = await runCli([...ws.runArgs, "/mcp__everything__nope"], { env })
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toMatch(/MCP server "everything" has no prompt "nope" \(its prompts: .*args-prompt/)
    const missing = await runCli([...ws.runArgs, "/mcp__everything__args-prompt"], { env })
    expect(missing.code).toBe(2)
    expect(missing.stderr).toMatch(/the prompt args-prompt needs city/)
    const noServer = await runCli([...ws.runArgs, "/mcp__elsewhere__p"], { env })
    expect(noServer.code).toBe(2)
    expect(noServer.stderr).toMatch(/no MCP server is named "elsewhere" \(everything\)/)
    expect(server.requests).toHaveLength(0)
    // no session was created
    if (fs.existsSync(ws.db)) await expect(latestSession(ws.db, ws.dir)).rejects.toThrow(/no session/)
  })
})

describe.skipIf(!hasTmux)("MCP at the interactive prompt", () => {
  it("a prompt is sent; a resource attached goes with the next message; /mcp shows each server's state, tools and prompts, a failed one's error; /help lists the prompts", async () => {
    const { env, server, ws } = await setUp({
      everything,
      off: { command: "true", enabled: false },
      broken: { command: "/nonexistent/logbook-test-mcp-server" }
    })
    server.enqueue(Reply.text("It is sunny in Lyon."), Reply.text("It is resource 5."))
    const run = runInTmux(["--db", ws.db, "--cwd", ws.dir], { env })
    janitor.defer(run.close)
    await run.waitFor(/idle │/)
    run.keys("-l", "/mcp__everything__args-prompt Lyon")
    await run.waitFor("│› /mcp__everything__args-prompt Lyon")
    run.keys("Enter")
    await run.waitFor("It is sunny in Lyon.")
    expect(lastUserText(server.requests[0]!)).toBe("What's weather in Lyon?")
    // a resource attached goes with the next message
    run.keys("-l", "/mcp-resource everything demo://resource/dynamic/text/5")
    await run.waitFor("│› /mcp-resource everything demo://resource/dynamic/text/5")
    run.keys("Enter")
    await run.waitFor("is attached to your next message")
    run.keys("-l", "what is it")
    await run.waitFor("│› what is it")
    run.keys("Enter")
    await run.waitFor("It is resource 5.")
    expect(lastUserText(server.requests[1]!)).toMatch(
      /^what is it\n\n\[resource everything:demo:\/\/resource\/dynamic\/text\/5 \(text\/plain\)\]\nResource 5: /
    )
    run.keys("-l", "/mcp")
    await run.waitFor("│› /mcp")
    run.keys("Enter")
    await run.waitFor("MCP servers")
    const screen = run.screen()
    expect(screen).toMatch(/everything {2}ready · \d+ tools · \d+ prompts/)
    expect(screen).toMatch(/tools: .*echo/)
    expect(screen).toMatch(/prompts: .*\/mcp__everything__args-prompt/)
    expect(screen).toMatch(/off {2}disabled/)
    expect(screen).toMatch(/broken {2}failed/)
    expect(screen).toMatch(/last error: MCP server "broken" did not start: its command .* was not found/)
    run.keys("Escape")
    await poll("the overlay to close", () => !run.visible().includes("MCP servers"))
    run.keys("-l", "/help")
    await run.waitFor("│› /help")
    run.keys("Enter")
    await run.waitFor("Your commands")
    expect(run.screen()).toMatch(/\/mcp__everything__args-prompt <city> \[state\]/)
  })
})
