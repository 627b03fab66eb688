/**
 * MCP servers' tools through the built binary: `logbook run` against the scripted model server with
 * the real reference server (`@modelcontextprotocol/server-everything`) over stdio, declared in the
 * user's config. The model is offered `mcp__everything__*` tools and gets their results; a
 * permission rule denies one; `logbook audit` shows the call; no server process is left.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runCli, scratchDir } from "../support/cli.js"
import { everythingScript, startEverythingHttp } from "../support/mcpServers.js"
import { Reply } from "../support/scriptedServer.js"
import {
  blobText,
  contentText,
  latestSession,
  makeJanitor,
  makeWorkspace,
  ofType,
  readLog,
  toolCall,
  toolResult,
  userConfigEnv
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const everything = { command: process.execPath, args: [everythingScript, "stdio"] }

const toolNames = (body: { readonly tools?: ReadonlyArray<{ readonly function: { readonly name: string } }> }) =>
  (body.tools ?? []).map((tool) => tool.function.name)

describe("logbook run with an MCP server", () => {
  it("calls mcp__everything__echo: the prefixed tool is offered, its result goes back; a rule denies get-env; audit shows it", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_echo", "mcp__everything__echo", { message: "hi from the model" })] }),
      Reply.stream({ toolCalls: [toolCall("call_env", "mcp__everything__get-env", {})] }),
      Reply.text("Done.")
    )
    const env = {
      ...userConfigEnv({
        mcpServers: { everything },
        permission: { "mcp__everything__*": "allow", "mcp__everything__get-env": "deny" }
      }),
      OPENAI_API_KEY: "sk-test-openai-should-not-leak-0123456789"
    }
    const result = await runCli([...ws.runArgs, "use the tools"], { env })
    expect(result.code, result.stderr).toBe(0)
    expect(server.requests).toHaveLength(3)
    const [, second, third] = server.requests
    // offered under the prefixed name, with the server's own input schema
    const offered = (second!.body.tools as ReadonlyArray<{ function: { name: string; parameters: unknown } }>).find(
      (tool) => tool.function.name === "mcp__everything__echo"
    )
    expect(offered?.function.parameters).toMatchObject({ type: "object", properties: { message: { type: "string" } } })
    expect(toolNames(third!.body)).toContain("mcp__everything__get-env")
    expect(contentText(toolResult(second!, "call_echo"))).toBe("Echo: hi from the model")
    const denied = contentText(toolResult(third!, "call_env"))
    expect(denied).toContain("mcp__everything__get-env")
    expect(denied).toMatch(/denied/)
    expect(denied).not.toContain("sk-test-openai")

    const id = await latestSession(ws.db, ws.dir)
    const log = await readLog(ws.db, id)
    const invoked = ofType(log, "tool.invoked")
    expect(invoked.map((e) => e.payload.tool)).toEqual(["mcp__everything__echo"])
    const finished = ofType(log, "tool.finished")
    expect(finished[0]!.payload.metadata).toMatchObject({ server: "everything", tool: "echo", cut: false })

    const audit = await runCli(["audit", id, "--db", ws.db])
    expect(audit.code, audit.stderr).toBe(0)
    expect(audit.stdout).toMatch(
      /⚙ mcp__everything__echo \{"message":"hi from the model"\} {2}\[finished · \d+ bytes of result\]/
    )
    expect(audit.stdout).toContain("mcp__everything__get-env")
  })
})

describe("logbook run: an MCP tool that reports an error", () => {
  it("fails the call with the tool's text; tool.failed keeps the whole result as a blob", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_bad", "mcp__everything__echo", { wrong: 1 })] }),
      Reply.text("It failed.")
    )
    const env = userConfigEnv({ mcpServers: { everything }, permission: { "mcp__everything__*": "allow" } })
    const result = await runCli([...ws.runArgs, "echo wrong"], { env })
    expect(result.code, result.stderr).toBe(0)
    const told = contentText(toolResult(server.requests[1]!, "call_bad"))
    expect(told).toMatch(/message/)
    const id = await latestSession(ws.db, ws.dir)
    const failed = ofType(await readLog(ws.db, id), "tool.failed")
    expect(failed).toHaveLength(1)
    const metadata = failed[0]!.payload.metadata as { server: string; resultBlob: string }
    expect(metadata.server).toBe("everything")
    const whole = JSON.parse(await blobText(ws.db, metadata.resultBlob)) as { isError: boolean }
    expect(whole.isError).toBe(true)
  })
})

describe("logbook run: an MCP call past its timeout", () => {
  it("fails as timed out, and the server is sent the cancel", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const stdinLog = path.join(scratchDir(), "stdin.jsonl")
    const teed = {
      command: "sh",
      args: ["-c", `tee -a '${stdinLog}' | exec '${process.execPath}' '${everythingScript}' stdio`],
      timeoutMs: 500
    }
    server.enqueue(
      Reply.stream({
        toolCalls: [
          toolCall("call_long", "mcp__everything__trigger-long-running-operation", { duration: 60, steps: 60 })
        ]
      }),
      Reply.text("It took too long.")
    )
    const env = userConfigEnv({
      mcpServers: { everything: teed },
      permission: { "mcp__everything__*": "allow" },
      // the sandboxed server writes its stdin log there
      tools: { bash: { writablePaths: [path.dirname(stdinLog)] } }
    })
    const result = await runCli([...ws.runArgs, "wait"], { env })
    expect(result.code, result.stderr).toBe(0)
    const id = await latestSession(ws.db, ws.dir)
    const failed = ofType(await readLog(ws.db, id), "tool.failed")
    expect(failed).toHaveLength(1)
    expect(failed[0]!.payload).toMatchObject({ callId: "call_long", timedOut: true })
    const sent = fs.readFileSync(stdinLog, "utf8")
    const request = sent.split("\n").find((line) => line.includes('"tools/call"'))!
    const cancel = sent.split("\n").find((line) => line.includes('"notifications/cancelled"'))
    expect(cancel).toBeDefined()
    expect(JSON.parse(cancel!).params.requestId).toBe(JSON.parse(request).id)
  })
})

describe("logbook run with an MCP server slow to start", () => {
  it("does not hold up the first request; a call of its tool waits for it; its tools join when ready", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    // the server starts only once the gate file exists: the model's first step opens it
    const gate = path.join(ws.dir, "gate")
    const slow = {
      command: "sh",
      args: [
        "-c",
        `while [ ! -e '${gate}' ]; do sleep 0.05; done; exec '${process.execPath}' '${everythingScript}' stdio`
      ]
    }
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_gate", "bash", { command: "touch gate" })] }),
      Reply.stream({ toolCalls: [toolCall("call_echo", "mcp__slow__echo", { message: "ready" })] }),
      Reply.text("Done.")
    )
    const env = userConfigEnv({ mcpServers: { slow }, permission: { "mcp__slow__*": "allow" } })
    const result = await runCli([...ws.runArgs, "open the gate"], { env })
    expect(result.code, result.stderr).toBe(0)
    const [first, , third] = server.requests
    expect(toolNames(first!.body).filter((name) => name.startsWith("mcp__"))).toEqual([])
    expect(contentText(toolResult(third!, "call_echo"))).toBe("Echo: ready")
    expect(toolNames(third!.body)).toContain("mcp__slow__echo")
  })
})

describe("logbook run with an MCP server over Streamable HTTP", () => {
  it("calls mcp__remote__get-sum on server-everything in streamableHttp mode", async () => {
    const server = await janitor.server()
    const http = await startEverythingHttp()
    janitor.defer(http.stop)
    const ws = makeWorkspace(server)
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_sum", "mcp__remote__get-sum", { a: 2, b: 40 })] }),
      Reply.text("Done.")
    )
    const env = userConfigEnv({
      mcpServers: { remote: { type: "http", url: http.url } },
      permission: { "mcp__remote__*": "allow" }
    })
    const result = await runCli([...ws.runArgs, "add"], { env })
    expect(result.code, result.stderr).toBe(0)
    expect(toolNames(server.requests[1]!.body)).toContain("mcp__remote__get-sum")
    expect(contentText(toolResult(server.requests[1]!, "call_sum"))).toBe("The sum of 2 and 40 is 42.")
  })
})

describe("logbook run: a large MCP result", () => {
  it("is cut to head and tail for the model and kept whole in the log", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const message = `${"a".repeat(300_000)}${"z".repeat(300_000)}`
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_big", "mcp__everything__echo", { message })] }),
      Reply.text("Done.")
    )
    const env = userConfigEnv({
      mcpServers: { everything: { ...everything, maxOutputBytes: 3000 } },
      permission: { "mcp__everything__*": "allow" }
    })
    const result = await runCli([...ws.runArgs, "echo a lot"], { env })
    expect(result.code, result.stderr).toBe(0)
    const seen = contentText(toolResult(server.requests[1]!, "call_big"))
    expect(Buffer.byteLength(seen)).toBeLessThan(4000)
    expect(seen).toMatch(/^Echo: a+\n\n… \[\d+ bytes .* left out; showing the first .* and the last .*\] …\n\nz+$/)
    const id = await latestSession(ws.db, ws.dir)
    const finished = ofType(await readLog(ws.db, id), "tool.finished")[0]!
    const metadata = finished.payload.metadata as { resultBlob: string; resultBytes: number; cut: boolean }
    expect(metadata.cut).toBe(true)
    const whole = JSON.parse(await blobText(ws.db, metadata.resultBlob)) as { content: ReadonlyArray<{ text: string }> }
    expect(whole.content[0]!.text).toBe(`Echo: ${message}`)
  })
})

describe("logbook rerun of a session with MCP calls", () => {
  it("reproduces a session whose MCP server was configured but not called, without starting it", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.stream({ toolCalls: [toolCall("call_ls", "list", {})] }), Reply.text("Done."))
    const stdinLog = path.join(scratchDir(), "stdin.jsonl")
    const teed = {
      command: "sh",
      args: ["-c", `tee -a '${stdinLog}' | exec '${process.execPath}' '${everythingScript}' stdio`]
    }
    const env = userConfigEnv({ mcpServers: { everything: teed } })
    const run = await runCli([...ws.runArgs, "look around"], { env })
    expect(run.code, run.stderr).toBe(0)
    const id = await latestSession(ws.db, ws.dir)
    fs.rmSync(stdinLog, { force: true })
    const rerun = await runCli(["rerun", id, "--db", ws.db, "--format", "json"], { env })
    expect(rerun.code, rerun.stdout + rerun.stderr).toBe(0)
    expect(JSON.parse(rerun.stdout).outcome).toEqual({ _tag: "match" })
    expect(fs.existsSync(stdinLog)).toBe(false)
  })

  it("refuses the MCP call and never calls (or starts) the server", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const stdinLog = path.join(scratchDir(), "stdin.jsonl")
    const teed = {
      command: "sh",
      args: ["-c", `tee -a '${stdinLog}' | exec '${process.execPath}' '${everythingScript}' stdio`]
    }
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_echo", "mcp__everything__echo", { message: "once" })] }),
      Reply.text("Done.")
    )
    const env = userConfigEnv({
      mcpServers: { everything: teed },
      permission: { "mcp__everything__*": "allow" },
      // the sandboxed server writes its stdin log there
      tools: { bash: { writablePaths: [path.dirname(stdinLog)] } }
    })
    const run = await runCli([...ws.runArgs, "echo once"], { env })
    expect(run.code, run.stderr).toBe(0)
    const calls = () => fs.readFileSync(stdinLog, "utf8").split('"method":"tools/call"').length - 1
    expect(calls()).toBe(1)
    const id = await latestSession(ws.db, ws.dir)
    fs.rmSync(stdinLog)

    const rerun = await runCli(["rerun", id, "--db", ws.db, "--format", "json"], { env })
    expect(rerun.code).toBe(1)
    const report = JSON.parse(rerun.stdout) as {
      outcome: { _tag: string }
      refused: ReadonlyArray<{ tool: string; why: string }>
    }
    expect(report.outcome._tag).toBe("refused")
    expect(report.refused).toEqual([
      expect.objectContaining({
        tool: "mcp__everything__echo",
        why: "mcp__everything__echo is a tool of an MCP server, and a re-run never calls an MCP server"
      })
    ])
    // the server was not even started
    expect(fs.existsSync(stdinLog)).toBe(false)
  })
})
