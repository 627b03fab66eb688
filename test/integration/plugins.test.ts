/**
 * Plugins through the built binary and the scripted model server (docs/plugins.md): a before hook
 * that rewrites a command (the rewritten command ran, `audit` shows the change), one that refuses
 * (the model reads the reason), one that throws and one that hangs (the session goes on, both
 * recorded as `hook.ran`), a plugin tool the model calls, a plugin that is not a plugin (a clear
 * error naming its file, the session starts without it), and a project's plugin that loads only
 * once approved — and asks again when it changes.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runCli } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import {
  bashReply,
  contentText,
  makeJanitor,
  makeWorkspace,
  notices,
  toolCall,
  toolResult,
  userConfigEnv
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

/** The user's config (`config`) with these plugin files in their plugins directory. */
const userPlugins = (files: Record<string, string>, config: Record<string, unknown> = {}) => {
  const env = userConfigEnv(config)
  const dir = path.join(env.XDG_CONFIG_HOME, "logbook", "plugins")
  fs.mkdirSync(dir, { recursive: true })
  for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), text)
  return { env, dir }
}

const hookRuns = (db: string, env: Record<string, string>) => hookRunsOf(db, env, "hook.ran")

/** The payloads of the latest session's events of one type. */
const hookRunsOf = async (db: string, env: Record<string, string>, type: string) => {
  const events = await runCli(["events", "latest", "--db", db, "--type", type, "--format", "json"], { env })
  expect(events.code, events.stderr).toBe(0)
  return events.stdout
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as { readonly payload: Record<string, unknown> })
    .map((e) => e.payload)
}

const rewrite = `
export default {
  name: "rewrite",
  "tool.execute.before": async (call) => {
    if (call.tool === "bash" && call.input.command === "echo one") return { input: { ...call.input, command: "echo two" } }
  }
}
`

describe("plugin hooks", () => {
  it("a before hook that rewrites a command: the rewritten command ran, and audit shows the change", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const { env } = userPlugins({ "rewrite.mjs": rewrite })
    server.enqueue(bashReply("call_1", "echo one"), Reply.text("Done."))
    const run = await runCli([...ws.runArgs, "say one"], { env })
    expect(run.code, run.stderr).toBe(0)
    expect(contentText(toolResult(server.requests[1]!, "call_1"))).toContain("two")
    expect(contentText(toolResult(server.requests[1]!, "call_1"))).not.toContain("one")

    const audit = await runCli(["audit", "latest", "--db", ws.db], { env })
    expect(audit.code, audit.stderr).toBe(0)
    expect(audit.stdout).toContain(
      'plugin:rewrite changed the input of bash: {"command":"echo one"} → {"command":"echo two"}'
    )
    const json = JSON.parse((await runCli(["audit", "latest", "--db", ws.db, "--format", "json"], { env })).stdout)
    expect(JSON.stringify(json)).toContain('"kind":"hook"')
    expect(await hookRuns(ws.db, env)).toEqual([
      expect.objectContaining({
        source: "plugin:rewrite",
        hook: "tool.execute.before",
        callId: "call_1",
        tool: "bash",
        outcome: "changed",
        changed: true,
        input: { command: "echo one" }
      })
    ])
    // sessions show: a notice at the call
    const shown = await runCli(["sessions", "show", "latest", "--db", ws.db], { env })
    expect(shown.stdout).toContain("plugin:rewrite changed the input of bash")
  })

  it("a before hook that refuses: the call does not run and the model reads the reason", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const marker = path.join(ws.dir, "ran")
    const { env } = userPlugins({
      "guard.mjs": `export default () => ({
        name: "guard",
        "tool.execute.before": (call) => call.tool === "bash" ? { block: "commands are off today" } : undefined
      })`
    })
    server.enqueue(bashReply("call_1", `touch ${marker}`), Reply.text("Understood."))
    const run = await runCli([...ws.runArgs, "touch it"], { env })
    expect(run.code, run.stderr).toBe(0)
    expect(contentText(toolResult(server.requests[1]!, "call_1"))).toContain(
      "The call was blocked: commands are off today"
    )
    expect(fs.existsSync(marker)).toBe(false)
    expect(await hookRuns(ws.db, env)).toEqual([
      expect.objectContaining({ source: "plugin:guard", outcome: "blocked", reason: "commands are off today" })
    ])
  })

  it("a hook that throws and one that hangs: the session goes on, both recorded as hook.ran (failed, timeout)", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const { env } = userPlugins(
      {
        "a-throws.mjs": `export default { name: "thrower", "tool.execute.before": (call) => { if (call.callId === "call_1") throw new Error("guard bug") } }`,
        "b-hangs.mjs": `export default { name: "hanger", "tool.execute.after": (call) => call.callId === "call_2" ? new Promise(() => {}) : undefined }`
      },
      { hooks: { timeoutMs: 300 } }
    )
    server.enqueue(bashReply("call_1", "echo first"), bashReply("call_2", "echo second"), Reply.text("Both done."))
    const run = await runCli([...ws.runArgs, "two commands"], { env })
    expect(run.code, run.stderr).toBe(0)
    // fail closed: the first never ran, the model is told which hook failed
    expect(contentText(toolResult(server.requests[1]!, "call_1"))).toBe(
      "The call was not run: the tool.execute.before hook plugin:thrower failed: guard bug"
    )
    // the after hook that hung is skipped: the output as the command gave it
    expect(contentText(toolResult(server.requests[2]!, "call_2"))).toContain("second")
    expect(server.requests).toHaveLength(3)
    const runs = await hookRuns(ws.db, env)
    expect(runs).toEqual([
      expect.objectContaining({ source: "plugin:thrower", callId: "call_1", outcome: "failed", error: "guard bug" }),
      expect.objectContaining({
        source: "plugin:hanger",
        hook: "tool.execute.after",
        callId: "call_2",
        outcome: "timeout",
        error: "it did not return within 300 ms"
      })
    ])
  })

  it("a plugin tool the model calls: its result is in the next request", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const { env } = userPlugins(
      {
        "weather.mjs": `export default {
          name: "weather",
          tools: [{
            name: "forecast",
            description: "Tomorrow's weather in a city.",
            inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
            execute: async (input, ctx) => \`sunny in \${input.city} (cwd \${ctx.cwd === ${JSON.stringify(ws.dir)} ? "ok" : ctx.cwd})\`
          }]
        }`
      },
      { permission: { forecast: "allow" } }
    )
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_w", "forecast", { city: "Lisbon" })] }),
      Reply.text("It will be sunny.")
    )
    const run = await runCli([...ws.runArgs, "weather?"], { env })
    expect(run.code, run.stderr).toBe(0)
    const offered = (server.requests[0]!.body.tools as ReadonlyArray<{ function: Record<string, unknown> }>).find(
      (tool) => tool.function.name === "forecast"
    )
    expect(offered?.function).toMatchObject({
      description: "Tomorrow's weather in a city.",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
    })
    expect(contentText(toolResult(server.requests[1]!, "call_w"))).toBe("sunny in Lisbon (cwd ok)")
  })

  it("a plugin tool's input is checked against its inputSchema: the model reads what is wrong, nothing runs", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const ran = path.join(ws.dir, "ran.txt")
    const { env, dir } = userPlugins(
      {
        "count.mjs": `import * as fs from "node:fs"
        export default {
          name: "count",
          tools: [{
            name: "count",
            description: "Counts to n.",
            inputSchema: { type: "object", properties: { n: { type: "integer", minimum: 1 } }, required: ["n"] },
            execute: async (input) => { fs.appendFileSync(${JSON.stringify(ran)}, "ran\\n"); return String(input.n) }
          }]
        }`,
        "broken.mjs": `export default {
          name: "broken",
          tools: [{ name: "broken", description: "b", inputSchema: { type: "object", properties: { a: { type: "nonsense" } } }, execute: () => "b" }]
        }`
      },
      { permission: { count: "allow" } }
    )
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_bad", "count", { n: "three" })] }),
      Reply.stream({ toolCalls: [toolCall("call_good", "count", { n: 3 })] }),
      Reply.text("Counted.")
    )
    const run = await runCli([...ws.runArgs, "count"], { env })
    expect(run.code, run.stderr).toBe(0)
    const told = contentText(toolResult(server.requests[1]!, "call_bad"))
    expect(told).toContain("does not match the tool's input schema")
    expect(told).toContain("input/n must be integer")
    expect(contentText(toolResult(server.requests[2]!, "call_good"))).toBe("3")
    expect(fs.readFileSync(ran, "utf8")).toBe("ran\n")
    // a schema that is not one: the plugin is left out, named, and the session went on
    const said = notices(run.stderr).find((line) => line.includes(path.join(dir, "broken.mjs")))
    expect(said).toContain('the inputSchema of its tool "broken" is not a JSON Schema')
    const names = (server.requests[0]!.body.tools as ReadonlyArray<{ function: { name: string } }>).map(
      (tool) => tool.function.name
    )
    expect(names).toContain("count")
    expect(names).not.toContain("broken")
  })

  it("a plugin tool asks by default: without a terminal the call is refused", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const { env } = userPlugins({
      "t.mjs": `export default { tools: [{ name: "ping", description: "pings", execute: () => "pong" }] }`
    })
    server.enqueue(Reply.stream({ toolCalls: [toolCall("call_p", "ping", {})] }), Reply.text("ok"))
    const run = await runCli([...ws.runArgs, "ping"], { env })
    expect(run.code, run.stderr).toBe(0)
    expect(contentText(toolResult(server.requests[1]!, "call_p"))).not.toBe("pong")
    const asked = await hookRunsOf(ws.db, env, "permission.asked")
    expect(asked).toEqual([expect.objectContaining({ tool: "ping" })])
  })

  it("a .ts plugin loads where Node strips types (this Node does)", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const { env } = userPlugins({
      "typed.ts": `interface Call { readonly tool: string; readonly input: { command: string } }
        const rewrite = (call: Call): { input: { command: string } } | undefined =>
          call.tool === "bash" ? { input: { command: call.input.command.replace("one", "two") } } : undefined
        export default { name: "typed", "tool.execute.before": rewrite }`
    })
    expect((process.features as { typescript?: unknown }).typescript).toBeTruthy()
    server.enqueue(bashReply("call_1", "echo one"), Reply.text("Done."))
    const run = await runCli([...ws.runArgs, "go"], { env })
    expect(run.code, run.stderr).toBe(0)
    expect(contentText(toolResult(server.requests[1]!, "call_1"))).toContain("two")
  })

  it("a file that is not a plugin: a clear error naming it, and the session starts without it", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const { env, dir } = userPlugins({
      "bad.mjs": `export default { name: "bad", "tool.execute.befor": () => undefined }`,
      "rewrite.mjs": rewrite
    })
    server.enqueue(bashReply("call_1", "echo one"), Reply.text("Done."))
    const run = await runCli([...ws.runArgs, "go"], { env })
    expect(run.code, run.stderr).toBe(0)
    const said = notices(run.stderr).find((line) => line.includes(path.join(dir, "bad.mjs")))
    expect(said).toBeDefined()
    expect(said).toContain('"tool.execute.befor"')
    expect(said).toContain("the session starts without it")
    // the good one still works
    expect(contentText(toolResult(server.requests[1]!, "call_1"))).toContain("two")
  })
})

describe("event hooks", () => {
  it("session.start, every committed event, turn.end and session.end; a throwing one goes to the diagnostic log", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const seen = path.join(ws.dir, "..", "seen.txt")
    const { env } = userPlugins({
      "watch.mjs": `import * as fs from "node:fs"
        const note = (line) => fs.appendFileSync(${JSON.stringify(seen)}, line + "\\n")
        export default {
          name: "watch",
          "session.start": (e) => note("start " + e.sessionId),
          event: (env) => { note("event " + env.type); if (env.type === "user.message") env.payload.text = "changed" },
          "turn.end": (e) => note("turn.end " + e.reason),
          "session.end": (e) => note("end " + e.sessionId)
        }`,
      "zbroken.mjs": `export default { name: "broken", "turn.end": () => { throw new Error("listener bug") } }`
    })
    server.enqueue(Reply.text("Hello."))
    const run = await runCli([...ws.runArgs, "hi"], { env })
    expect(run.code, run.stderr).toBe(0)
    const lines = fs.readFileSync(seen, "utf8").trim().split("\n")
    const id = lines[0]!.slice("start ".length)
    expect(lines[0]).toMatch(/^start [0-9a-f-]{36}$/)
    expect(lines).toContain("event session.created")
    expect(lines).toContain("event turn.finished")
    expect(lines.indexOf("turn.end stop")).toBeGreaterThan(lines.indexOf("event turn.finished"))
    expect(lines.at(-1)).toBe(`end ${id}`)
    expect(notices(run.stderr)).toContain("logbook: warn: plugin broken: its turn.end hook failed: listener bug")
    // read-only: what a handler changes is its own copy, the log is as it was
    const events = await runCli(["events", "latest", "--db", ws.db, "--type", "user.message", "--format", "json"], {
      env
    })
    expect(JSON.parse(events.stdout.split("\n")[0]!).payload.text).toBe("hi")
  })
})

describe("rerun of a session whose hooks changed and refused calls", () => {
  it("reproduces it without the plugins: what each hook did is served from the log", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const { env } = userPlugins({
      "hooks.mjs": `export default {
        name: "hooks",
        "tool.execute.before": (call) => {
          if (call.tool !== "bash") return
          if (call.input.command.includes("forbidden")) return { block: "not that one" }
          return { input: { command: call.input.command.replace("one", "two") } }
        },
        "tool.execute.after": (call, output) => call.callId === "call_3" ? output.output + "(seen)" : undefined
      }`
    })
    server.enqueue(
      bashReply("call_1", "echo one > out.txt"),
      bashReply("call_2", "echo forbidden > no.txt"),
      bashReply("call_3", "echo three"),
      Reply.text("Done.")
    )
    const run = await runCli([...ws.runArgs, "write it"], { env })
    expect(run.code, run.stderr).toBe(0)
    expect(fs.readFileSync(path.join(ws.dir, "out.txt"), "utf8")).toBe("two\n")
    expect(contentText(toolResult(server.requests[3]!, "call_3"))).toContain("(seen)")
    expect((await hookRuns(ws.db, env)).map((r) => r.outcome)).toEqual(["changed", "blocked", "changed"])

    // without the plugin (another user's config): the same log, the rewritten command ran again
    const scratch = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "logbook-rerun-ws-")), "ws")
    const rerun = await runCli(["rerun", "latest", "--db", ws.db, "--workspace", scratch, "--format", "json"], {
      env: userConfigEnv({})
    })
    expect(rerun.code, rerun.stderr + rerun.stdout).toBe(0)
    expect(JSON.parse(rerun.stdout).outcome).toEqual({ _tag: "match" })
    expect(fs.readFileSync(path.join(scratch, "out.txt"), "utf8")).toBe("two\n")
    expect(fs.existsSync(path.join(scratch, "no.txt"))).toBe(false)
  })
})

describe("a project's plugins", () => {
  it("load only once the user approved that exact file; a changed file asks again", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const env = userConfigEnv({})
    const dir = path.join(ws.dir, ".logbook", "plugins")
    fs.mkdirSync(dir, { recursive: true })
    const file = path.join(dir, "rewrite.mjs")
    fs.writeFileSync(file, rewrite)
    const key = path.join(".logbook", "plugins", "rewrite.mjs")

    // not approved: listed so, not loaded, with a notice saying how to approve it
    const listed = await runCli(["plugins", "list", "--cwd", ws.dir, "--format", "json"], { env })
    expect(listed.code, listed.stderr).toBe(0)
    expect(JSON.parse(listed.stdout)).toEqual([
      expect.objectContaining({ plugin: key, status: "not approved", scope: "project" })
    ])
    server.enqueue(bashReply("call_1", "echo one"), Reply.text("Done."))
    const before = await runCli([...ws.runArgs, "say one"], { env })
    expect(before.code, before.stderr).toBe(0)
    expect(notices(before.stderr)).toContain(
      `logbook: plugin ${key} of directory ${dir} is not approved, so it was not loaded: read it, then approve ` +
        `it with \`logbook plugins approve ${key}\``
    )
    expect(contentText(toolResult(server.requests[1]!, "call_1"))).toContain("one")

    // approved: it loads and rewrites
    const approved = await runCli(["plugins", "approve", key, "--cwd", ws.dir], { env })
    expect(approved.code, approved.stderr).toBe(0)
    expect(approved.stdout).toContain(`Approved plugin ${key}`)
    const config = await runCli(["config", "--cwd", ws.dir, "--format", "text"], { env })
    expect(config.stdout).toMatch(new RegExp(`${key.replace(/\./g, "\\.")}\\s+approved`))
    server.enqueue(bashReply("call_2", "echo one"), Reply.text("Done."))
    const after = await runCli([...ws.runArgs, "say one"], { env })
    expect(after.code, after.stderr).toBe(0)
    expect(contentText(toolResult(server.requests[3]!, "call_2"))).toContain("two")

    // the repository changes the file: not approved any more
    fs.appendFileSync(file, "\n// changed\n")
    server.enqueue(bashReply("call_3", "echo one"), Reply.text("Done."))
    const changed = await runCli([...ws.runArgs, "say one"], { env })
    expect(changed.code, changed.stderr).toBe(0)
    expect(
      notices(changed.stderr).some((line) => line.includes(`plugin ${key}`) && line.includes("not approved"))
    ).toBe(true)
    expect(contentText(toolResult(server.requests[5]!, "call_3"))).toContain("one")
  })
})
