/**
 * The hard cases of MCP servers through the built binary, with a fixture server
 * (test/support/mcpFixture.mjs) over stdio and Streamable HTTP: a logbook killed with SIGKILL
 * leaves no server behind (the sandbox's `--die-with-parent`; the next start's sweep for an
 * unsandboxed one), a server that crashes mid-call (the call fails clearly, the server is started
 * again once, the next call works), a server that hangs at start (nothing held up, the call that
 * needs it says why, the start timeout reported), a result of several MB (head and tail for the
 * model, whole in the log), and Esc during a call in the interactive screen (the server got the
 * cancel, no process left).
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { hasBwrap, outsideDir, pathWithoutBwrap, removeOutsideDirs } from "../support/bwrap.js"
import { runCli, spawnCli } from "../support/cli.js"
import { everythingScript, freePort } from "../support/mcpServers.js"
import { Reply } from "../support/scriptedServer.js"
import { hasTmux, runInTmux } from "../support/tmux.js"
import {
  blobText,
  contentText,
  isLive,
  latestSession,
  makeJanitor,
  makeWorkspace,
  ofType,
  readLog,
  toolCall,
  toolResult,
  until,
  userConfigEnv
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())
afterAll(removeOutsideDirs)

const fixtureScript = path.join(import.meta.dirname, "..", "support", "mcpFixture.mjs")

let marks = 0
/**
 * The fixture over stdio, its processes marked (`FIXTURE_MARK`) so a test can find them, logging in
 * `log`: its entry, and the variable logbook's environment needs (`vars`; a long path written in
 * config would be taken for a key, so the entry names it).
 */
const fixture = (log: string, extra: Record<string, unknown> = {}) => {
  const mark = `m${process.pid}x${++marks}`
  return {
    mark,
    vars: { FIXTURE_LOG: log },
    entry: {
      command: process.execPath,
      args: [fixtureScript],
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${NAME} reference, as config files write it
      env: { FIXTURE_LOG: "${FIXTURE_LOG}", FIXTURE_MARK: mark } as Record<string, string>,
      ...extra
    }
  }
}

/** The live processes whose environment holds `FIXTURE_MARK=<mark>` (not zombies). */
const marked = (mark: string): ReadonlyArray<number> =>
  fs.readdirSync("/proc").flatMap((name) => {
    if (!/^\d+$/.test(name)) return []
    try {
      const environ = fs.readFileSync(`/proc/${name}/environ`, "utf8").split("\0")
      return environ.includes(`FIXTURE_MARK=${mark}`) && isLive(Number(name)) ? [Number(name)] : []
    } catch {
      return []
    }
  })

const killMarked = (mark: string) => () => {
  for (const pid of marked(mark)) {
    try {
      process.kill(pid, "SIGKILL")
    } catch {}
  }
}

const logHas = (log: string, text: string) =>
  until(`${text} in ${log}`, () =>
    fs.existsSync(log) && fs.readFileSync(log, "utf8").includes(text) ? true : undefined
  )

/** The fixture over Streamable HTTP on a free port; stopped at cleanup. */
const fixtureHttp = async (log: string): Promise<{ readonly url: string; readonly child: ChildProcess }> => {
  const port = await freePort()
  const child = spawn(process.execPath, [fixtureScript, "http", String(port)], {
    env: { PATH: process.env.PATH ?? "", FIXTURE_LOG: log },
    stdio: ["ignore", "ignore", "pipe"],
    detached: true
  })
  janitor.defer(() => {
    try {
      process.kill(-child.pid!, "SIGKILL")
    } catch {}
  })
  await new Promise<void>((resolve, reject) => {
    let seen = ""
    child.stderr?.on("data", (chunk: Buffer) => {
      seen += chunk.toString()
      if (seen.includes("fixture: listening")) resolve()
    })
    child.once("exit", (code) => reject(new Error(`the fixture exited (${code}): ${seen}`)))
  })
  return { url: `http://127.0.0.1:${port}/mcp`, child }
}

describe.skipIf(!hasBwrap)("a stdio MCP server in the sandbox of bash", () => {
  it('cannot write outside the workspace; "sandbox": false lets your own server, never a project\'s', async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const outside = outsideDir()
    const write = (id: string, tool: string, file: string) =>
      Reply.stream({ toolCalls: [toolCall(id, tool, { path: path.join(outside, file), text: "x" })] })
    server.enqueue(
      write("call_confined", "mcp__confined__write", "confined.txt"),
      write("call_mine", "mcp__mine__write", "mine.txt"),
      write("call_theirs", "mcp__theirs__write", "theirs.txt"),
      Reply.text("Done.")
    )
    const { mark, entry, vars } = fixture(path.join(ws.dir, "fixture.log"))
    janitor.defer(killMarked(mark))
    fs.writeFileSync(
      path.join(ws.dir, ".mcp.json"),
      JSON.stringify({ mcpServers: { theirs: { ...entry, sandbox: false } } })
    )
    const env = {
      ...userConfigEnv({
        mcpServers: { confined: entry, mine: { ...entry, sandbox: false } },
        permission: { "mcp__*": "allow" }
      }),
      ...vars
    }
    const approved = await runCli(["mcp", "approve", "theirs", "--cwd", ws.dir], { env })
    expect(approved.code, approved.stderr).toBe(0)
    const result = await runCli([...ws.runArgs, "write outside"], { env })
    expect(result.code, result.stderr).toBe(0)
    expect(contentText(toolResult(server.requests[1]!, "call_confined"))).toMatch(/read-only file system/i)
    expect(contentText(toolResult(server.requests[2]!, "call_mine"))).toBe(`wrote ${path.join(outside, "mine.txt")}`)
    expect(contentText(toolResult(server.requests[3]!, "call_theirs"))).toMatch(/read-only file system/i)
    expect(fs.readdirSync(outside)).toEqual(["mine.txt"])
    expect(result.stderr).toContain(
      `ignoring "sandbox": false of MCP server "theirs" of ${path.join(ws.dir, ".mcp.json")}: only your own ` +
        "config may run a server outside the sandbox"
    )
  })
})

describe("what a stdio MCP server sees of logbook's environment", () => {
  it("get-env of server-everything shows no provider key", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_env", "mcp__everything__get-env", {})] }),
      Reply.text("Done.")
    )
    const key = "sk-test-openai-should-not-leak-0123456789"
    const env = {
      ...userConfigEnv({
        mcpServers: { everything: { command: process.execPath, args: [everythingScript, "stdio"] } },
        permission: { "mcp__everything__*": "allow" }
      }),
      OPENAI_API_KEY: key,
      ANTHROPIC_API_KEY: "sk-ant-test-should-not-leak-0123456789"
    }
    const result = await runCli([...ws.runArgs, "show the env"], { env })
    expect(result.code, result.stderr).toBe(0)
    const seen = JSON.parse(contentText(toolResult(server.requests[1]!, "call_env"))) as Record<string, string>
    expect(seen.PATH).toBeDefined()
    expect(Object.keys(seen).filter((name) => name.endsWith("_API_KEY"))).toEqual([])
    expect(JSON.stringify(seen)).not.toContain("should-not-leak")
  })
})

describe("a stdio MCP server where no sandbox can run", () => {
  it("runs unconfined, and the user is told so in one line", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const { mark, entry, vars } = fixture(path.join(ws.dir, "fixture.log"))
    janitor.defer(killMarked(mark))
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_echo", "mcp__fixture__echo", { message: "unconfined" })] }),
      Reply.text("Done.")
    )
    const env = {
      ...userConfigEnv({ mcpServers: { fixture: entry }, permission: { "mcp__fixture__*": "allow" } }),
      ...vars,
      PATH: pathWithoutBwrap()
    }
    const result = await runCli([...ws.runArgs, "echo"], { env })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stderr).toContain(
      "logbook: MCP servers fixture run without a sandbox: bubblewrap (bwrap) is not installed (not found on PATH)"
    )
    expect(contentText(toolResult(server.requests[1]!, "call_echo"))).toBe("Echo: unconfined")
  })
})

describe.skipIf(!hasBwrap)("logbook mcp test", () => {
  it("starts the server in the sandbox, as a session does", async () => {
    const outside = outsideDir()
    const env = userConfigEnv({
      mcpServers: {
        probe: {
          command: "sh",
          args: ["-c", `touch '${path.join(outside, "touched")}'; exec '${process.execPath}' '${fixtureScript}'`]
        }
      }
    })
    const cwd = fs.mkdtempSync(path.join(fs.realpathSync("/var/tmp"), "logbook-mcptest-"))
    janitor.defer(() => fs.rmSync(cwd, { recursive: true, force: true }))
    const tested = await runCli(["mcp", "test", "probe", "--cwd", cwd], { env })
    expect(tested.code, tested.stderr).toBe(0)
    expect(tested.stdout).toContain("mcp__probe__write")
    expect(fs.existsSync(path.join(outside, "touched"))).toBe(false)
  })
})

describe("a logbook killed with SIGKILL during an MCP call", () => {
  it.skipIf(!hasBwrap)("leaves no sandboxed server running: it dies with logbook", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const log = path.join(ws.dir, "fixture.log")
    const { mark, entry, vars } = fixture(log)
    const staying = { ...entry, env: { ...entry.env, FIXTURE_STAY: "1" } }
    janitor.defer(killMarked(mark))
    server.enqueue(Reply.stream({ toolCalls: [toolCall("call_wait", "mcp__fixture__wait", {})] }))
    const env = {
      ...userConfigEnv({ mcpServers: { fixture: staying }, permission: { "mcp__fixture__*": "allow" } }),
      ...vars
    }
    const live = spawnCli([...ws.runArgs, "wait"], { env })
    await logHas(log, '"waiting"')
    expect(marked(mark).length).toBeGreaterThan(0)
    live.child.kill("SIGKILL")
    await live.exited
    await until("the server's processes to be gone", () => (marked(mark).length === 0 ? true : undefined))
  })

  it('an unsandboxed server ("sandbox": false) that outlives it is stopped by the next start, which says so', async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const log = path.join(ws.dir, "fixture.log")
    const { mark, entry, vars } = fixture(log, { sandbox: false })
    const staying = { ...entry, env: { ...entry.env, FIXTURE_STAY: "1" } }
    janitor.defer(killMarked(mark))
    server.enqueue(Reply.stream({ toolCalls: [toolCall("call_wait", "mcp__fixture__wait", {})] }))
    const env = {
      ...userConfigEnv({ mcpServers: { fixture: staying }, permission: { "mcp__fixture__*": "allow" } }),
      ...vars
    }
    const live = spawnCli([...ws.runArgs, "wait"], { env })
    await logHas(log, '"waiting"')
    live.child.kill("SIGKILL")
    await live.exited
    const killed = await latestSession(ws.db, ws.dir)
    // it runs on after logbook: nothing of logbook's is left to stop it
    const left = marked(mark)
    expect(left.length).toBeGreaterThan(0)

    // the next start (here with no server configured at all) stops it before anything else
    server.enqueue(Reply.text("Hello."))
    const next = await runCli([...ws.runArgs, "hello"], { env: userConfigEnv({}) })
    expect(next.code, next.stderr).toBe(0)
    expect(next.stderr).toContain("stopping MCP servers a logbook process left running when it died")
    expect(marked(mark)).toEqual([])
    // and the session the killed run left is repaired when it is opened: the call ended as a crash
    server.enqueue(Reply.text("Again."))
    const reopened = await runCli(["run", "--db", ws.db, "--cwd", ws.dir, "--session", killed, "again"], {
      env: userConfigEnv({})
    })
    expect(reopened.code, reopened.stderr).toBe(0)
    const failed = ofType(await readLog(ws.db, killed), "tool.failed")
    expect(failed.map((e) => [e.payload.callId, e.payload.interrupted])).toEqual([["call_wait", true]])
  })
})

describe("an MCP server that crashes mid-call", () => {
  it("fails that call with a clear error, is started again once, and the next call works", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const log = path.join(ws.dir, "fixture.log")
    const { mark, entry, vars } = fixture(log)
    janitor.defer(killMarked(mark))
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_crash", "mcp__fixture__crash", {})] }),
      Reply.stream({ toolCalls: [toolCall("call_echo", "mcp__fixture__echo", { message: "after" })] }),
      Reply.text("Done.")
    )
    const env = {
      ...userConfigEnv({ mcpServers: { fixture: entry }, permission: { "mcp__fixture__*": "allow" } }),
      ...vars
    }
    const result = await runCli([...ws.runArgs, "crash it"], { env })
    expect(result.code, result.stderr).toBe(0)
    const told = contentText(toolResult(server.requests[1]!, "call_crash"))
    expect(told).toMatch(
      /^MCP server "fixture" stopped during the call \(it exited with code 3; its last output: fixture: crashing on purpose\); it will be started again for the next call$/
    )
    expect(contentText(toolResult(server.requests[2]!, "call_echo"))).toBe("Echo: after")
    const id = await latestSession(ws.db, ws.dir)
    const failed = ofType(await readLog(ws.db, id), "tool.failed")
    expect(failed.map((e) => e.payload.callId)).toEqual(["call_crash"])
    expect(marked(mark)).toEqual([])
  })
})

describe("a Streamable HTTP MCP server that dies mid-call", () => {
  it("fails that call with a clear error; the session goes on", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const dir = fs.mkdtempSync(path.join(fs.realpathSync("/var/tmp"), "logbook-crash-"))
    janitor.defer(() => fs.rmSync(dir, { recursive: true, force: true }))
    const remote = await fixtureHttp(path.join(dir, "fixture.log"))
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_crash", "mcp__remote__crash", {})] }),
      Reply.text("It died.")
    )
    const env = userConfigEnv({
      mcpServers: { remote: { type: "http", url: remote.url } },
      permission: { "mcp__remote__*": "allow" }
    })
    const result = await runCli([...ws.runArgs, "crash it"], { env })
    expect(result.code, result.stderr).toBe(0)
    expect(contentText(toolResult(server.requests[1]!, "call_crash"))).toMatch(
      /^MCP server "remote" could not be reached during the call \(fetch failed: .+\); the call failed$/
    )
    const id = await latestSession(ws.db, ws.dir)
    expect(ofType(await readLog(ws.db, id), "tool.failed").map((e) => e.payload.callId)).toEqual(["call_crash"])
  })
})

describe("an MCP server that hangs at start", () => {
  const expectNotHeldUp = async (name: string, entry: Record<string, unknown>) => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_x", `mcp__${name}__echo`, { message: "x" })] }),
      Reply.text("Done.")
    )
    const env = userConfigEnv({
      mcpServers: { [name]: { ...entry, startTimeoutMs: 1500 } },
      permission: { [`mcp__${name}__*`]: "allow" }
    })
    const result = await runCli([...ws.runArgs, "use it"], { env })
    expect(result.code, result.stderr).toBe(0)
    // the first request went out without its tools (the server had not started)
    const [first, second] = server.requests
    expect((first!.body.tools ?? []).map((tool: { function: { name: string } }) => tool.function.name)).not.toContain(
      `mcp__${name}__echo`
    )
    // the call of its tool waited for the start, and says why it cannot run
    expect(contentText(toolResult(second!, "call_x"))).toBe(
      `The tool "mcp__${name}__echo" is not available: MCP server "${name}" did not start within 1500 ms`
    )
    expect(result.stderr).toContain(`MCP server "${name}" did not start within 1500 ms; its tools are not offered`)
  }

  it("over stdio: the first request is not held up; the call says why; the start timeout is reported; its process is stopped", async () => {
    const mark = `hang-${process.pid}-${Date.now()}`
    janitor.defer(killMarked(mark))
    await expectNotHeldUp("hang", { command: "sh", args: ["-c", "exec sleep 600"], env: { FIXTURE_MARK: mark } })
    expect(marked(mark)).toEqual([])
  })

  it("over Streamable HTTP: a server that never answers is not waited for past its start timeout", async () => {
    const stalled: Array<http.ServerResponse> = []
    const listener = http.createServer((_req, res) => {
      stalled.push(res)
    })
    await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve))
    janitor.defer(
      () =>
        new Promise<void>((resolve) => {
          for (const res of stalled) res.destroy()
          listener.close(() => resolve())
        })
    )
    const port = (listener.address() as { port: number }).port
    await expectNotHeldUp("stuck", { type: "http", url: `http://127.0.0.1:${port}/mcp` })
  })
})

describe("an MCP result of several MB", () => {
  const expectCapped = async (entry: Record<string, unknown>, vars: Record<string, string> = {}) => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const bytes = 4 * 1024 * 1024
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_big", "mcp__fixture__big", { bytes })] }),
      Reply.text("Done.")
    )
    const env = {
      ...userConfigEnv({
        mcpServers: { fixture: { ...entry, maxOutputBytes: 3000 } },
        permission: { "mcp__fixture__*": "allow" }
      }),
      ...vars
    }
    const result = await runCli([...ws.runArgs, "a lot"], { env })
    expect(result.code, result.stderr).toBe(0)
    const seen = contentText(toolResult(server.requests[1]!, "call_big"))
    expect(Buffer.byteLength(seen)).toBeLessThan(4000)
    expect(seen).toMatch(/^a+\n\n… \[\d+ bytes .* left out; showing the first .* and the last .*\] …\n\nz+$/)
    const id = await latestSession(ws.db, ws.dir)
    const finished = ofType(await readLog(ws.db, id), "tool.finished")[0]!
    const metadata = finished.payload.metadata as { resultBlob: string; cut: boolean }
    expect(metadata.cut).toBe(true)
    const whole = JSON.parse(await blobText(ws.db, metadata.resultBlob)) as { content: ReadonlyArray<{ text: string }> }
    expect(whole.content[0]!.text).toBe(`${"a".repeat(bytes / 2)}${"z".repeat(bytes / 2)}`)
  }

  it("over stdio: head and tail for the model, whole in the log", async () => {
    const dir = fs.mkdtempSync(path.join(fs.realpathSync("/var/tmp"), "logbook-big-"))
    janitor.defer(() => fs.rmSync(dir, { recursive: true, force: true }))
    const { entry, vars } = fixture(path.join(dir, "fixture.log"))
    await expectCapped(entry, vars)
  })

  it("over Streamable HTTP: head and tail for the model, whole in the log", async () => {
    const dir = fs.mkdtempSync(path.join(fs.realpathSync("/var/tmp"), "logbook-big-"))
    janitor.defer(() => fs.rmSync(dir, { recursive: true, force: true }))
    const remote = await fixtureHttp(path.join(dir, "fixture.log"))
    await expectCapped({ type: "http", url: remote.url })
  })
})

describe.skipIf(!hasTmux)("Esc during an MCP call in the interactive screen", () => {
  const expectCancelled = async (
    entry: Record<string, unknown>,
    log: string,
    ws: { db: string; dir: string },
    vars: Record<string, string> = {}
  ) => {
    const run = runInTmux(["--db", ws.db, "--cwd", ws.dir], {
      env: { ...userConfigEnv({ mcpServers: { fixture: entry }, permission: { "mcp__fixture__*": "allow" } }), ...vars }
    })
    janitor.defer(run.close)
    await run.waitFor(/idle │/)
    run.keys("-l", "wait")
    await run.waitFor("│› wait")
    run.keys("Enter")
    await logHas(log, '"waiting"')
    run.keys("Escape")
    await run.waitFor(/mcp__fixture__wait.*interrupted/)
    // the server was sent the cancel of that very request
    await logHas(log, '"cancelled"')
    const lines = fs
      .readFileSync(log, "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { waiting?: number; cancelled?: number })
    expect(lines.find((l) => l.cancelled !== undefined)?.cancelled).toBe(
      lines.find((l) => l.waiting !== undefined)?.waiting
    )
    run.keys("C-d")
    expect(await run.exited()).toBe(0)
    const id = await latestSession(ws.db, ws.dir)
    const failed = ofType(await readLog(ws.db, id), "tool.failed")
    expect(failed.map((e) => [e.payload.callId, e.payload.interrupted])).toEqual([["call_wait", true]])
  }

  it("over stdio: the server got the cancel; no server process is left", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const log = path.join(ws.dir, "fixture.log")
    const { mark, entry, vars } = fixture(log)
    janitor.defer(killMarked(mark))
    server.enqueue(Reply.stream({ toolCalls: [toolCall("call_wait", "mcp__fixture__wait", {})] }))
    await expectCancelled(entry, log, ws, vars)
    expect(marked(mark)).toEqual([])
  })

  it("over Streamable HTTP: the server got the cancel", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const log = path.join(ws.dir, "fixture.log")
    const remote = await fixtureHttp(log)
    server.enqueue(Reply.stream({ toolCalls: [toolCall("call_wait", "mcp__fixture__wait", {})] }))
    await expectCancelled({ type: "http", url: remote.url }, log, ws)
    expect(isLive(remote.child.pid!)).toBe(true)
  })
})
