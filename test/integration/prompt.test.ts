/**
 * The project's instructions and the prompt version end to end: the built binary, a repository
 * with AGENTS.md files at two levels and the user's own, the scripted OpenAI-compatible server
 * (what it received is what was sent), and the SQLite log.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { promptVersionOf } from "../../src/session/PromptVersion.js"
import { runCli } from "../support/cli.js"
import { type RecordedRequest, Reply } from "../support/scriptedServer.js"
import {
  blobText,
  latestSession,
  makeJanitor,
  makeWorkspace,
  notices,
  ofType,
  readLog,
  userConfigEnv
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

/** The system message of a request (the first message, role system). */
const systemOf = (request: RecordedRequest): string => {
  const first = request.body.messages[0] as { role: string; content: unknown }
  expect(first.role).toBe("system")
  expect(typeof first.content).toBe("string")
  return first.content as string
}

interface WireTool {
  readonly type: string
  readonly function: { readonly name: string; readonly description: string; readonly parameters: unknown }
}

/** The prompt version recomputed from what the server received: its system message and tools. */
const versionOf = (request: RecordedRequest): string =>
  promptVersionOf({
    system: systemOf(request),
    tools: (request.body.tools as ReadonlyArray<WireTool>).map((tool) => ({
      name: tool.function.name,
      description: tool.function.description,
      inputSchema: tool.function.parameters as Record<string, unknown>
    }))
  }).version

/**
 * A repository (`.git`) whose root holds the workspace's config and an AGENTS.md, with the
 * workspace `pkg/` below it holding its own AGENTS.md; the user's AGENTS.md beside their config.
 */
const repository = async () => {
  const server = await janitor.server()
  const ws = makeWorkspace(server)
  const repo = ws.dir
  fs.mkdirSync(path.join(repo, ".git"))
  fs.writeFileSync(path.join(repo, "AGENTS.md"), "ROOT RULE: run npm test before you answer.\n")
  const pkg = path.join(repo, "pkg")
  fs.mkdirSync(pkg)
  fs.copyFileSync(path.join(repo, "logbook.json"), path.join(pkg, "logbook.json"))
  fs.writeFileSync(path.join(pkg, "AGENTS.md"), "PKG RULE: this package uses tabs.\n")
  fs.writeFileSync(path.join(pkg, "a.txt"), "hello\n")
  const env = userConfigEnv({})
  const userFile = path.join(env.XDG_CONFIG_HOME, "logbook", "AGENTS.md")
  fs.writeFileSync(userFile, "USER RULE: answer in English.\n")
  return { server, repo, pkg, userFile, env, db: ws.db, runArgs: ["run", "--db", ws.db, "--cwd", pkg] }
}

describe("logbook run: the project's instructions in the system prompt", () => {
  it("sends the user's, the root's and the workspace's AGENTS.md in that order; every step records the version sent", async () => {
    const r = await repository()
    r.server.enqueue(
      Reply.stream({ toolCalls: [{ id: "call_read", name: "read", arguments: '{"path": "a.txt"}' }] }),
      Reply.text("a.txt says hello.")
    )
    const result = await runCli([...r.runArgs, "what is in a.txt?"], { env: r.env })
    expect(notices(result.stderr)).toEqual([])
    expect(result.code).toBe(0)

    // what the server received: the system message first, the three files under their paths, in order
    expect(r.server.requests).toHaveLength(2)
    const system = systemOf(r.server.requests[0]!)
    const user = system.indexOf(`## ${r.userFile} (the user's own instructions, for every project)\n\nUSER RULE`)
    const root = system.indexOf(`## ${path.join(r.repo, "AGENTS.md")}\n\nROOT RULE: run npm test before you answer.`)
    const pkg = system.indexOf(`## ${path.join(r.pkg, "AGENTS.md")}\n\nPKG RULE: this package uses tabs.`)
    expect(system.startsWith("You are logbook")).toBe(true)
    expect(system).toContain(`You work in the directory ${r.pkg};`)
    expect([user, root, pkg].every((i) => i > 0)).toBe(true)
    expect(user).toBeLessThan(root)
    expect(root).toBeLessThan(pkg)
    // the same prompt for both steps of the turn
    expect(systemOf(r.server.requests[1]!)).toBe(system)

    // the log: every step.finished (the tool call step and the text step) carries the version of
    // what the server received, and that prompt is recorded once, with the exact system prompt
    const id = await latestSession(r.db, r.pkg)
    const log = await readLog(r.db, id)
    const steps = ofType(log, "step.finished")
    expect(steps.map((e) => e.payload.finishReason)).toEqual(["tool-calls", "stop"])
    expect(steps.map((e) => e.payload.promptVersion)).toEqual(r.server.requests.map(versionOf))
    expect(steps[0]!.payload.promptVersion).toMatch(/^[0-9a-f]{16}$/)
    const recorded = ofType(log, "prompt.recorded")
    expect(recorded).toHaveLength(1)
    expect(recorded[0]!.payload.promptVersion).toBe(steps[0]!.payload.promptVersion)
    expect(recorded[0]!.payload.blob.startsWith(recorded[0]!.payload.promptVersion)).toBe(true)
    const document = JSON.parse(await blobText(r.db, recorded[0]!.payload.blob))
    expect(document.system).toBe(system)
    expect(document.tools.map((t: { name: string }) => t.name)).toEqual(
      (r.server.requests[0]!.body.tools as ReadonlyArray<WireTool>).map((t) => t.function.name)
    )

    // `logbook config --system-prompt` prints exactly that prompt, for the same directory and user
    const printed = await runCli(["config", "--cwd", r.pkg, "--system-prompt"], { env: r.env })
    expect(printed.stderr).toBe("")
    expect(printed.code).toBe(0)
    expect(printed.stdout).toBe(`${system}\n`)
    // and `logbook config` lists the files it loaded
    const listed = await runCli(["config", "--cwd", r.pkg], { env: r.env })
    expect(JSON.parse(listed.stdout).instructions.files.map((f: { path: string }) => f.path)).toEqual([
      r.userFile,
      path.join(r.repo, "AGENTS.md"),
      path.join(r.pkg, "AGENTS.md")
    ])
  })

  it("a run with the same prompt records nothing new; after AGENTS.md changes the next step has a new version", async () => {
    const r = await repository()
    r.server.enqueue(Reply.text("one"), Reply.text("two"), Reply.text("three"))
    expect((await runCli([...r.runArgs, "first"], { env: r.env })).code).toBe(0)
    expect((await runCli([...r.runArgs, "--continue", "second"], { env: r.env })).code).toBe(0)
    fs.writeFileSync(path.join(r.pkg, "AGENTS.md"), "PKG RULE: this package uses spaces now.\n")
    const third = await runCli([...r.runArgs, "--continue", "third"], { env: r.env })
    expect(notices(third.stderr)).toEqual([])
    expect(third.code).toBe(0)

    expect(r.server.requests).toHaveLength(3)
    expect(systemOf(r.server.requests[2]!)).toContain("PKG RULE: this package uses spaces now.")
    const sent = r.server.requests.map(versionOf)
    expect(sent[1]).toBe(sent[0])
    expect(sent[2]).not.toBe(sent[0])
    const log = await readLog(r.db, await latestSession(r.db, r.pkg))
    expect(ofType(log, "step.finished").map((e) => e.payload.promptVersion)).toEqual(sent)
    // once per version and session, though three processes ran it
    expect(ofType(log, "prompt.recorded").map((e) => e.payload.promptVersion)).toEqual([sent[0], sent[2]])
  })

  it("an AGENTS.md that cannot be read is a warning on stderr; the run goes on with the others", async () => {
    const r = await repository()
    const broken = path.join(r.pkg, "AGENTS.md")
    fs.rmSync(broken)
    fs.symlinkSync(broken, broken)
    r.server.enqueue(Reply.text("done"))
    const result = await runCli([...r.runArgs, "hi"], { env: r.env })
    expect(result.code).toBe(0)
    expect(result.stderr).toMatch(/^logbook: warn: cannot read the instructions file .*pkg\/AGENTS\.md \(ELOOP/)
    const system = systemOf(r.server.requests[0]!)
    expect(system).toContain("ROOT RULE: run npm test before you answer.")
    expect(system).not.toContain(`## ${broken}`)
  })
})
