/**
 * MCP servers a project declares (its `.mcp.json`, its `logbook.json`) and `logbook mcp`, through
 * the built binary: a project's server does not start until the user approved its exact
 * definition (`logbook mcp approve`), then does, and a changed definition is not approved; `mcp
 * add | list | test | remove` edit and read the user's config.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runCli, scratchDir } from "../support/cli.js"
import { everythingScript } from "../support/mcpServers.js"
import { Reply } from "../support/scriptedServer.js"
import { hasTmux, runInTmux } from "../support/tmux.js"
import { contentText, makeJanitor, makeWorkspace, notices, toolCall, toolResult, userConfigEnv } from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const toolNames = (body: { readonly tools?: ReadonlyArray<{ readonly function: { readonly name: string } }> }) =>
  (body.tools ?? []).map((tool) => tool.function.name)

describe("a project's MCP servers", () => {
  it("start only once the user approved that exact definition; a changed one is not approved", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const stdinLog = path.join(scratchDir(), "stdin.jsonl")
    const definition = (extra: string) => ({
      command: "sh",
      args: ["-c", `tee -a '${stdinLog}' | exec '${process.execPath}' '${everythingScript}' stdio ${extra}`]
    })
    const mcpJson = path.join(ws.dir, ".mcp.json")
    fs.writeFileSync(mcpJson, JSON.stringify({ mcpServers: { proj: definition("") } }))
    const env = userConfigEnv({
      permission: { "mcp__proj__*": "allow" },
      // the sandboxed server writes its stdin log there
      tools: { bash: { writablePaths: [path.dirname(stdinLog)] } }
    })

    // not approved: listed so, not started, its tools not offered
    const listed = await runCli(["mcp", "list", "--cwd", ws.dir, "--format", "json"], { env })
    expect(listed.code, listed.stderr).toBe(0)
    expect(JSON.parse(listed.stdout)).toEqual([
      expect.objectContaining({ name: "proj", status: "not approved", scope: "project", source: `file ${mcpJson}` })
    ])
    server.enqueue(Reply.text("Nothing to do."))
    const before = await runCli([...ws.runArgs, "hello"], { env })
    expect(before.code, before.stderr).toBe(0)
    expect(notices(before.stderr)).toContain(
      `logbook: MCP server "proj" of file ${mcpJson} is not approved, so it was not started: see its definition ` +
        "with `logbook mcp list` and approve it with `logbook mcp approve proj`"
    )
    expect(toolNames(server.requests[0]!.body).filter((name) => name.startsWith("mcp__"))).toEqual([])
    expect(fs.existsSync(stdinLog)).toBe(false)

    // approved: it starts and its tool is called
    const approved = await runCli(["mcp", "approve", "proj", "--cwd", ws.dir], { env })
    expect(approved.code, approved.stderr).toBe(0)
    expect(approved.stdout).toContain(`Approved MCP server "proj" of file ${mcpJson}`)
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_echo", "mcp__proj__echo", { message: "approved" })] }),
      Reply.text("Done.")
    )
    const after = await runCli([...ws.runArgs, "echo"], { env })
    expect(after.code, after.stderr).toBe(0)
    expect(contentText(toolResult(server.requests[2]!, "call_echo"))).toBe("Echo: approved")
    expect(fs.readFileSync(stdinLog, "utf8")).toContain('"name":"echo"')

    // the repository changes the definition: not approved any more
    fs.rmSync(stdinLog)
    fs.writeFileSync(mcpJson, JSON.stringify({ mcpServers: { proj: definition("--changed") } }))
    server.enqueue(Reply.text("Nothing."))
    const changed = await runCli([...ws.runArgs, "hello again"], { env })
    expect(changed.code, changed.stderr).toBe(0)
    expect(
      notices(changed.stderr).some((line) => line.includes('MCP server "proj"') && line.includes("not approved"))
    ).toBe(true)
    expect(fs.existsSync(stdinLog)).toBe(false)
  })

  it("a project's logbook.json server is a project server too; a user's server of the same name wins", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, {
      config: { mcpServers: { theirs: { command: "sh" }, mine: { command: "evil" } } }
    })
    const env = userConfigEnv({ mcpServers: { mine: { command: "true" } } })
    const listed = await runCli(["mcp", "list", "--cwd", ws.dir, "--format", "json"], { env })
    expect(listed.code, listed.stderr).toBe(0)
    const servers = JSON.parse(listed.stdout) as ReadonlyArray<{ name: string; status: string; definition: unknown }>
    expect(servers.map((s) => [s.name, s.status])).toEqual([
      ["mine", "enabled"],
      ["theirs", "not approved"]
    ])
    expect(servers[0]!.definition).toEqual({ command: "true" })
    expect(listed.stderr).toContain(
      `ignoring MCP server "mine" of ${path.join(ws.dir, "logbook.json")}: a server of that name is configured already`
    )
  })
})

describe.skipIf(!hasTmux)("logbook run on a terminal: a project's server not approved", () => {
  it("is asked about with its definition; y and Enter approve it (remembered) and start it; n leaves it stopped", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const stdinLog = path.join(scratchDir(), "stdin.jsonl")
    const proj = {
      command: "sh",
      args: ["-c", `tee -a '${stdinLog}' | exec '${process.execPath}' '${everythingScript}' stdio`]
    }
    fs.writeFileSync(path.join(ws.dir, ".mcp.json"), JSON.stringify({ mcpServers: { proj } }))
    // the sandboxed server writes its stdin log there
    const env = userConfigEnv({
      permission: { "mcp__proj__*": "allow" },
      tools: { bash: { writablePaths: [path.dirname(stdinLog)] } }
    })

    // n: not started, the session goes on
    server.enqueue(Reply.text("Nothing."))
    const no = runInTmux([...ws.runArgs, "hello"], { env })
    janitor.defer(no.close)
    await no.waitFor(/MCP server "proj" of file .*\.mcp\.json is not approved\. It would run:[\s\S]*Enter › $/m)
    expect(no.screen()).toContain('"command": "sh"')
    no.keys("n")
    // a key alone does not answer
    await no.waitFor(/Enter › n$/m)
    expect(fs.existsSync(stdinLog)).toBe(false)
    no.keys("Enter")
    expect(await no.exited()).toBe(0)
    expect(no.screen()).toContain("not started")
    expect(fs.existsSync(stdinLog)).toBe(false)

    // y: approved, started, its tool called; the next run does not ask
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_echo", "mcp__proj__echo", { message: "on a terminal" })] }),
      Reply.text("Done.")
    )
    const yes = runInTmux([...ws.runArgs, "echo"], { env })
    janitor.defer(yes.close)
    await yes.waitFor(/is not approved\. It would run:[\s\S]*Enter › $/m)
    yes.keys("y", "Enter")
    expect(await yes.exited()).toBe(0)
    expect(contentText(toolResult(server.requests[2]!, "call_echo"))).toBe("Echo: on a terminal")
    const listed = await runCli(["mcp", "list", "--cwd", ws.dir, "--format", "json"], { env })
    expect(JSON.parse(listed.stdout)).toEqual([expect.objectContaining({ name: "proj", status: "approved" })])
  })
})

describe("logbook mcp add | list | test | remove", () => {
  it("adds a server to the user's config, tests it, removes it; refuses what it cannot do", async () => {
    const dir = scratchDir()
    const env = userConfigEnv({})
    const file = path.join(env.XDG_CONFIG_HOME, "logbook", "config.json")
    const add = await runCli(["mcp", "add", "everything", "--", process.execPath, everythingScript, "stdio"], { env })
    expect(add.code, add.stderr).toBe(0)
    expect(JSON.parse(fs.readFileSync(file, "utf8")).mcpServers).toEqual({
      everything: { command: process.execPath, args: [everythingScript, "stdio"] }
    })
    const list = await runCli(["mcp", "list", "--cwd", dir], { env })
    expect(list.stdout).toMatch(/^everything +stdio +enabled +/m)
    const test = await runCli(["mcp", "test", "everything", "--cwd", dir], { env })
    expect(test.code, test.stderr).toBe(0)
    expect(test.stdout).toMatch(/^✓ everything: started in \d+ ms, \d+ tools; stopped$/m)
    expect(test.stdout).toMatch(/^ {2}mcp__everything__echo {2}Echoes back the input string$/m)

    const twice = await runCli(["mcp", "add", "everything", "--", "x"], { env })
    expect(twice.code).toBe(2)
    expect(twice.stderr).toContain(`MCP server "everything" is in ${file} already`)
    const both = await runCli(["mcp", "add", "x", "--url", "https://e.com/mcp", "--", "cmd"], { env })
    expect(both.code).toBe(2)
    const bad = await runCli(["mcp", "add", "remote", "--url", "ftp://e.com"], { env })
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain("at mcpServers.remote.url: expected a URL starting with http:// or https://")

    const remove = await runCli(["mcp", "remove", "everything"], { env })
    expect(remove.code, remove.stderr).toBe(0)
    expect(JSON.parse(fs.readFileSync(file, "utf8")).mcpServers).toEqual({})
    const missing = await runCli(["mcp", "test", "everything", "--cwd", dir], { env })
    expect(missing.code).toBe(2)
    expect(missing.stderr).toContain('no MCP server "everything" is configured')

    fs.writeFileSync(file, '{\n  // mine\n  "maxSteps": 5\n}\n')
    const commented = await runCli(["mcp", "add", "x", "--", "cmd"], { env })
    expect(commented.code).toBe(2)
    expect(commented.stderr).toContain("has comments or trailing commas")
  })

  it("a server's NAME references cannot name logbook's API key variables", async () => {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${NAME} reference, as config files write it
    const env = userConfigEnv({ mcpServers: { leak: { command: "true", env: { K: "${OPENAI_API_KEY}" } } } })
    const result = await runCli(["mcp", "test", "leak", "--cwd", scratchDir()], {
      env: { ...env, OPENAI_API_KEY: "sk-test-openai-must-not-leak-0123456789" }
    })
    expect(result.code).toBe(1)
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${NAME} reference, as config files write it
    expect(result.stderr).toContain('MCP server "leak" names ${OPENAI_API_KEY}, which is not set')
  })

  it("test says why a server does not start", async () => {
    const env = userConfigEnv({ mcpServers: { nope: { command: "logbook-no-such-server" } } })
    const result = await runCli(["mcp", "test", "nope", "--cwd", scratchDir()], { env })
    expect(result.code).toBe(1)
    expect(result.stderr).toContain(
      'MCP server "nope" did not start: its command "logbook-no-such-server" was not found'
    )
  })
})
