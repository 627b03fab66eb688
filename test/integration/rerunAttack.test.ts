/**
 * `logbook rerun` attacked through the built binary: bad input, secrets, paths (the original
 * workspace is never read or written by the re-run), large and timed-out outputs, file tools, a
 * model error that gave up, a turn cut at `--max-steps`, a re-run of a saved re-run, an imported
 * session, commands that wrote outside the workspace (a re-run's commands always run in the sandbox,
 * or are refused where none can run). The server is closed before every re-run: whatever the model
 * answers comes from the log.
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { hasBwrap, outsideDir, pathWithoutBwrap, removeOutsideDirs } from "../support/bwrap.js"
import { type RunResult, runCli, scratchDir } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import { latestSession, makeJanitor, makeWorkspace, ofType, readLog, userConfigEnv } from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())
afterAll(removeOutsideDirs)

const call = (id: string, name: string, args: Record<string, unknown>) => ({
  id,
  name,
  arguments: JSON.stringify(args)
})
const tool = (id: string, name: string, args: Record<string, unknown>) =>
  Reply.stream({ toolCalls: [call(id, name, args)] })
const bash = (id: string, command: string, extra: Record<string, unknown> = {}) =>
  tool(id, "bash", { command, ...extra })

interface RerunJson {
  readonly outcome: { readonly _tag: string } & Record<string, unknown>
  readonly rerun: string
  readonly workspace: string
  readonly matched: number
  readonly compared: number
  readonly served: number
  readonly live: number
  readonly source: string
  readonly refused: ReadonlyArray<Record<string, unknown>>
  readonly commands: Record<string, unknown>
}

const rerunJson = async (db: string, session: string, extra: ReadonlyArray<string> = [], env = {}) => {
  const result = await runCli(["rerun", session, "--db", db, "--format", "json", ...extra], { env })
  let report: RerunJson | undefined
  try {
    report = JSON.parse(result.stdout) as RerunJson
  } catch {
    throw new Error(`rerun printed no report (exit ${result.code}):\n${result.stdout}\n${result.stderr}`)
  }
  return { result, report }
}

const shown = (result: RunResult) => `${result.stdout}\n${result.stderr}`

/** Every file of a directory (relative path -> sha256 of its content, and its mode). */
const treeOf = (dir: string): Record<string, string> => {
  const out: Record<string, string> = {}
  const walk = (at: string) => {
    for (const entry of fs.readdirSync(at, { withFileTypes: true })) {
      const full = path.join(at, entry.name)
      const rel = path.relative(dir, full)
      if (entry.isDirectory()) {
        out[`${rel}/`] = "dir"
        walk(full)
      } else {
        const stat = fs.statSync(full)
        out[rel] = `${createHash("sha256").update(fs.readFileSync(full)).digest("hex")} ${stat.mode} ${stat.mtimeMs}`
      }
    }
  }
  walk(dir)
  return out
}

describe("logbook rerun: bad input", () => {
  it("refuses, with a usage error, what it cannot re-run", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.text("Hello."))
    expect((await runCli([...ws.runArgs, "hi"])).code).toBe(0)
    const session = await latestSession(ws.db, ws.dir)
    await server.close()
    const rerun = (...args: ReadonlyArray<string>) => runCli(["rerun", ...args])

    const unknown = await rerun("nosuchsession", "--db", ws.db)
    expect(unknown.code, shown(unknown)).toBe(2)
    const noDb = await rerun(session, "--db", path.join(scratchDir(), "none.db"))
    expect(noDb.code, shown(noDb)).toBe(2)
    expect(noDb.stderr).toContain("no database at")
    for (const step of ["0", "-1"]) {
      const bad = await rerun(session, "--db", ws.db, "--from-step", step)
      expect(bad.code, shown(bad)).toBe(2)
    }
    const notNumber = await rerun(session, "--db", ws.db, "--from-step", "two")
    expect(notNumber.code, shown(notNumber)).toBe(2)
    const noPrompt = await rerun(session, "--db", ws.db, "--system-prompt", path.join(scratchDir(), "none.txt"))
    expect(noPrompt.code, shown(noPrompt)).toBe(2)
    expect(noPrompt.stderr).toContain("cannot read --system-prompt")
    const full = scratchDir()
    fs.writeFileSync(path.join(full, "x.txt"), "x")
    const nonEmpty = await rerun(session, "--db", ws.db, "--workspace", full)
    expect(nonEmpty.code, shown(nonEmpty)).toBe(2)
    const file = path.join(scratchDir(), "a-file")
    fs.writeFileSync(file, "x")
    const isFile = await rerun(session, "--db", ws.db, "--workspace", file)
    expect(isFile.code, shown(isFile)).toBe(2)
    expect(fs.readFileSync(file, "utf8")).toBe("x")
    // a session with no tool call matches without a workspace
    const ok = await rerunJson(ws.db, session)
    expect(ok.report.outcome, shown(ok.result)).toEqual({ _tag: "match" })
  })
})

describe("logbook rerun: paths", () => {
  it("pwd, a file holding the workspace path, absolute paths, edit and todo match; the original is untouched", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    fs.writeFileSync(path.join(ws.dir, "a.txt"), `root is ${ws.dir}\nalpha\n`)
    server.enqueue(
      bash("c1", "pwd && cat a.txt && ls"),
      tool("c2", "read", { path: path.join(ws.dir, "a.txt") }),
      tool("c3", "edit", { path: path.join(ws.dir, "a.txt"), oldString: "alpha", newString: "beta" }),
      tool("c4", "edit", { path: "a.txt", oldString: "beta", newString: `gamma in ${ws.dir}` }),
      tool("c5", "write", { path: path.join(ws.dir, "b.txt"), content: "made here\n" }),
      tool("c6", "todo", { todos: [{ content: "check", status: "in_progress" }] }),
      bash("c7", `cat ${ws.dir}/b.txt; echo "$PWD"`),
      Reply.text(`Done in ${ws.dir}.`)
    )
    const run = await runCli([...ws.runArgs, "work"])
    expect(run.code, shown(run)).toBe(0)
    const session = await latestSession(ws.db, ws.dir)
    await server.close()
    const log = await readLog(ws.db, session)
    expect(log.filter((e) => e.type === "tool.failed")).toEqual([])
    const before = treeOf(ws.dir)
    const { result, report } = await rerunJson(ws.db, session, ["--save"])
    expect(report.outcome, shown(result)).toEqual({ _tag: "match" })
    expect(treeOf(ws.dir)).toEqual(before)
    expect(fs.readFileSync(path.join(report.workspace, "a.txt"), "utf8")).toBe(
      `root is ${ws.dir}\ngamma in ${report.workspace}\n`
    )
  })
})

describe("logbook rerun: secrets and outputs", () => {
  it("a command printing the API key matches, and the report never shows the key", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const key = `sk-test-${Date.now().toString(16)}abcdef0123`
    const env = {
      ...userConfigEnv({
        provider: {
          local: { type: "openai-compatible", baseURL: `${server.url}/v1`, apiKeyEnv: "LOGBOOK_TEST_KEY" }
        },
        tools: { bash: { passEnv: ["LOGBOOK_TEST_KEY"] } }
      }),
      LOGBOOK_TEST_KEY: key,
      ANTHROPIC_API_KEY: undefined,
      OPENAI_API_KEY: undefined
    }
    fs.writeFileSync(path.join(ws.dir, "key.txt"), `key=${key}\n`)
    server.enqueue(bash("c1", `printf 'k=[%s]\\n' "$LOGBOOK_TEST_KEY"; cat key.txt`), Reply.text("Looked."))
    expect((await runCli([...ws.runArgs, "look"], { env })).code).toBe(0)
    const session = await latestSession(ws.db, ws.dir)
    await server.close()
    const log = await readLog(ws.db, session)
    expect(JSON.stringify(log)).not.toContain(key)
    expect(JSON.stringify(log)).toContain("k=[[logbook redacted $LOGBOOK_TEST_KEY]]")
    const { result, report } = await rerunJson(ws.db, session, [], env)
    expect(report.outcome, shown(result)).toEqual({ _tag: "match" })
    expect(shown(result)).not.toContain(key)
    const text = await runCli(["rerun", session, "--db", ws.db], { env })
    expect(text.code, shown(text)).toBe(0)
    expect(shown(text)).not.toContain(key)
  })

  it("a large output, a timed-out command and a failing one match", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(
      bash("c1", 'for i in $(seq 1 4000); do echo "line $i of the output"; done'),
      bash("c2", "echo start; sleep 30", { timeoutMs: 500 }),
      bash("c3", "echo oops >&2; exit 3"),
      Reply.text("Done.")
    )
    expect((await runCli([...ws.runArgs, "go"])).code).toBe(0)
    const session = await latestSession(ws.db, ws.dir)
    await server.close()
    const log = await readLog(ws.db, session)
    const finished = log.filter((e) => e.type === "tool.finished" || e.type === "tool.failed")
    expect(JSON.stringify(finished[0]!.payload)).toContain('"truncated":true')
    const { result, report } = await rerunJson(ws.db, session)
    expect(report.outcome, shown(result)).toEqual({ _tag: "match" })
  })
})

describe("logbook rerun in its default scratch directory", () => {
  it("is as long as the original's path: a cut output and a write's sizes that name it match", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(
      // a long output of the path: where it is cut for the model depends on the path's length
      bash("c1", 'for i in $(seq 1 3000); do echo "$PWD/file-$i"; done'),
      Reply.stream({
        toolCalls: [
          { id: "c2", name: "write", arguments: JSON.stringify({ path: "where.txt", content: `I am in ${ws.dir}\n` }) }
        ]
      }),
      Reply.text("Done.")
    )
    expect((await runCli([...ws.runArgs, "go"])).code).toBe(0)
    const session = await latestSession(ws.db, ws.dir)
    await server.close()
    const result = await runCli(["rerun", session, "--db", ws.db, "--format", "json"])
    const report = JSON.parse(result.stdout)
    expect(report.outcome, shown(result)).toEqual({ _tag: "match" })
    expect(Buffer.byteLength(report.workspace)).toBe(Buffer.byteLength(fs.realpathSync(ws.dir)))
    // the scratch directory went with the re-run
    expect(fs.existsSync(report.workspace)).toBe(false)
  })
})

describe("logbook rerun: model errors and limits", () => {
  it("a model error that gave up (400), then another turn, matches", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.error(400))
    const first = await runCli([...ws.runArgs, "first"])
    expect(first.code).not.toBe(0)
    const session = await latestSession(ws.db, ws.dir)
    server.enqueue(bash("c1", "echo again"), Reply.text("Fine now."))
    expect((await runCli([...ws.runArgs, "-s", session, "again"])).code).toBe(0)
    await server.close()
    const log = await readLog(ws.db, session)
    expect(log.some((e) => e.type === "model.error")).toBe(true)
    const { result, report } = await rerunJson(ws.db, session)
    expect(report.outcome, shown(result)).toEqual({ _tag: "match" })
  })

  it("a turn cut at --max-steps, then another turn, matches", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(bash("c1", "echo one"), bash("c2", "echo two"))
    const cut = await runCli([...ws.runArgs, "--max-steps", "2", "loop"])
    expect(cut.code, shown(cut)).not.toBe(0)
    const session = await latestSession(ws.db, ws.dir)
    server.enqueue(Reply.text("Stopped."))
    expect((await runCli([...ws.runArgs, "-s", session, "why?"])).code).toBe(0)
    await server.close()
    const log = await readLog(ws.db, session)
    expect(log.some((e) => e.type === "turn.finished" && e.payload.reason === "max-steps")).toBe(true)
    const { result, report } = await rerunJson(ws.db, session)
    expect(report.outcome, shown(result)).toEqual({ _tag: "match" })
  })
})

/** Every file under `dir` with its content (for "nothing outside changed"). */
const contentsOf = (dir: string): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const name of fs.readdirSync(dir, { recursive: true, encoding: "utf8" })) {
    const full = path.join(dir, name)
    if (fs.lstatSync(full).isFile()) out[name] = fs.readFileSync(full, "utf8")
  }
  return out
}

describe("logbook rerun never does what nobody approved", () => {
  it("an imported session whose approved outside write was edited to name ~/.bashrc writes nothing outside", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    // the sender's session: a write outside its workspace, approved (--yes), and one inside
    const theirs = scratchDir()
    const home = scratchDir()
    expect(theirs.length).toBe(home.length)
    server.enqueue(
      tool("c1", "write", { path: path.join(theirs, ".bashrc"), content: "echo pwned\n" }),
      tool("c2", "write", { path: "notes.txt", content: "inside\n" }),
      Reply.text("Done.")
    )
    const run = await runCli([...ws.runArgs, "--yes", "write them"])
    expect(run.code, shown(run)).toBe(0)
    const session = await latestSession(ws.db, ws.dir)
    await server.close()
    const log = await readLog(ws.db, session)
    expect(log.filter((e) => e.type === "permission.replied").map((e) => e.payload)).toEqual([
      expect.objectContaining({ reply: "once" })
    ])
    const file = path.join(scratchDir(), "session.jsonl")
    const exported = await runCli(["export", session, "--db", ws.db, "-o", file])
    expect(exported.code, shown(exported)).toBe(0)
    // edited: the approved write now names the receiver's ~/.bashrc (a path as long, so no size changes)
    fs.writeFileSync(file, fs.readFileSync(file, "utf8").split(theirs).join(home))
    fs.rmSync(path.join(theirs, ".bashrc"))
    const db = path.join(scratchDir(), "mine.db")
    const imported = await runCli(["import", file, "--db", db])
    expect(imported.code, shown(imported)).toBe(0)

    for (const extra of [[], ["--allow-live-tools"]]) {
      const { result, report } = await rerunJson(db, session, extra, { HOME: home })
      expect(result.code, shown(result)).toBe(1)
      expect(report.outcome._tag, shown(result)).toBe("refused")
      expect(JSON.stringify(report.refused)).toContain(".bashrc")
      expect(contentsOf(home)).toEqual({})
      expect(fs.existsSync(path.join(theirs, ".bashrc"))).toBe(false)
    }
    const text = await runCli(["rerun", session, "--db", db], { env: { HOME: home } })
    expect(text.code, shown(text)).toBe(1)
    expect(text.stdout).not.toContain("✓")
    expect(text.stdout).toContain("refused")
    expect(contentsOf(home)).toEqual({})
  })

  it("an imported session's tools run only with --allow-live-tools; without it the report lists what was refused", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(
      tool("c1", "read", { path: "logbook.json" }),
      tool("c2", "write", { path: "notes.txt", content: "inside\n" }),
      tool("c3", "read", { path: "notes.txt" }),
      Reply.text("Done.")
    )
    expect((await runCli([...ws.runArgs, "write it"])).code).toBe(0)
    const session = await latestSession(ws.db, ws.dir)
    await server.close()
    const file = path.join(scratchDir(), "session.jsonl")
    expect((await runCli(["export", session, "--db", ws.db, "-o", file])).code).toBe(0)
    const db = path.join(scratchDir(), "mine.db")
    expect((await runCli(["import", file, "--db", db])).code).toBe(0)

    const refused = await rerunJson(db, session)
    expect(refused.result.code, shown(refused.result)).toBe(1)
    expect(refused.report.outcome._tag).toBe("refused")
    // the read ran (it changes nothing, inside the scratch directory); the write was the first refused
    expect(refused.report.refused).toEqual([expect.objectContaining({ tool: "write", subject: "notes.txt" })])
    expect(refused.report.matched).toBeGreaterThan(0)
    const text = await runCli(["rerun", session, "--db", db])
    expect(text.code, shown(text)).toBe(1)
    expect(text.stdout).toContain("--allow-live-tools")
    expect(text.stdout).not.toContain("✓ the same")

    const allowed = await rerunJson(db, session, ["--allow-live-tools", "--save"])
    expect(allowed.report.outcome, shown(allowed.result)).toEqual({ _tag: "match" })
    expect(allowed.result.code).toBe(0)
    expect(fs.readFileSync(path.join(allowed.report.workspace, "notes.txt"), "utf8")).toBe("inside\n")
    // a saved re-run of an imported session replays what someone else approved: imported too
    const again = await rerunJson(db, allowed.report.rerun)
    expect(again.result.code, shown(again.result)).toBe(1)
    expect(again.report).toMatchObject({ imported: true, outcome: { _tag: "refused" } })
    // the user's own session needs no flag
    const own = await rerunJson(ws.db, session)
    expect(own.report.outcome, shown(own.result)).toEqual({ _tag: "match" })
    expect(own.report).toMatchObject({ imported: false, refused: [] })
  })

  it("a re-run of your own session does not re-do a write outside the workspace approved in the original", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const outside = scratchDir()
    const target = path.join(outside, "out.txt")
    server.enqueue(tool("c1", "write", { path: target, content: "written\n" }), Reply.text("Done."))
    const run = await runCli([...ws.runArgs, "--yes", "write outside"])
    expect(run.code, shown(run)).toBe(0)
    expect(fs.readFileSync(target, "utf8")).toBe("written\n")
    const session = await latestSession(ws.db, ws.dir)
    await server.close()
    fs.rmSync(target)
    const { result, report } = await rerunJson(ws.db, session, ["--yes"])
    expect(result.code, shown(result)).toBe(1)
    expect(report.outcome._tag).toBe("refused")
    expect(report.refused).toEqual([expect.objectContaining({ tool: "write", subject: target, outside: true })])
    expect(fs.existsSync(target)).toBe(false)
    const text = await runCli(["rerun", session, "--db", ws.db])
    expect(text.code, shown(text)).toBe(1)
    expect(text.stdout).toContain(`refused: write ${target}`)
    expect(fs.existsSync(target)).toBe(false)
  })

  it("the starting workspace is not restored through a symlink in the session's directory", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    fs.mkdirSync(path.join(ws.dir, "sub"))
    fs.writeFileSync(path.join(ws.dir, "sub", "y.txt"), "before\n")
    server.enqueue(
      tool("c1", "write", { path: "sub/x.txt", content: "new\n" }),
      tool("c2", "read", { path: "sub/y.txt" }),
      tool("c3", "edit", { path: "sub/y.txt", oldString: "before", newString: "after" }),
      Reply.text("Done.")
    )
    expect((await runCli([...ws.runArgs, "change sub"])).code).toBe(0)
    const session = await latestSession(ws.db, ws.dir)
    await server.close()
    const log = await readLog(ws.db, session)
    expect(log.filter((e) => e.type === "file.changed").map((e) => e.payload)).toEqual([
      expect.objectContaining({ path: "sub/x.txt", op: "create" }),
      expect.objectContaining({ path: "sub/y.txt", op: "update" })
    ])
    // since then, sub became an absolute link to a directory outside, holding files of the same names
    const outside = scratchDir()
    fs.writeFileSync(path.join(outside, "x.txt"), "precious x\n")
    fs.writeFileSync(path.join(outside, "y.txt"), "precious y\n")
    fs.rmSync(path.join(ws.dir, "sub"), { recursive: true })
    fs.symlinkSync(outside, path.join(ws.dir, "sub"))
    const { result, report } = await rerunJson(ws.db, session)
    // the undone create did not delete outside, the undone edit did not write outside
    expect(contentsOf(outside), shown(result)).toEqual({ "x.txt": "precious x\n", "y.txt": "precious y\n" })
    expect(result.code, shown(result)).toBe(1)
    expect(JSON.stringify(report)).toContain("sub/y.txt")
  })

  it("--from-step whose live part fails (connection refused) exits 1 with the reason", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, { retry: { initialDelayMs: 1, maxDelayMs: 2, maxAttempts: 2 } })
    server.enqueue(bash("c1", "echo one"), Reply.text("Done."))
    expect((await runCli([...ws.runArgs, "go"])).code).toBe(0)
    const session = await latestSession(ws.db, ws.dir)
    // the live model is the session's: its server is gone, the port closed
    await server.close()
    const { result, report } = await rerunJson(ws.db, session, ["--from-step", "2"])
    expect(result.code, shown(result)).toBe(1)
    expect(report.outcome).toMatchObject({ _tag: "forked", fromRequest: 2 })
    expect(String(report.outcome.failed)).toMatch(/connect|refused/i)
    const text = await runCli(["rerun", session, "--db", ws.db, "--from-step", "2"])
    expect(text.code, shown(text)).toBe(1)
    expect(text.stdout).not.toContain("✓")
    expect(shown(text)).toMatch(/live part failed/)
  })
})

describe.skipIf(!hasBwrap)("logbook rerun's commands run in the sandbox, whatever the config says", () => {
  it.each([
    ["off", { sandbox: "off" }],
    ["auto", {}]
  ])(
    'tools.bash.sandbox "%s" with writablePaths naming a directory outside: an approved command\'s write there is not done again',
    async (_mode, bashConfig) => {
      const server = await janitor.server()
      const ws = makeWorkspace(server)
      // outside the temporary directory: the sandbox's /tmp is private, a path there would be missing in it
      const outside = outsideDir("logbook-rerun-outside-")
      const target = path.join(outside, "out.txt")
      const env = userConfigEnv({ tools: { bash: { ...bashConfig, writablePaths: [outside] } } })
      server.enqueue(bash("c1", `echo written > ${target}; echo done`), Reply.text("Done."))
      const run = await runCli([...ws.runArgs, "--yes", "write outside"], { env })
      expect(run.code, shown(run)).toBe(0)
      expect(fs.readFileSync(target, "utf8")).toBe("written\n")
      const session = await latestSession(ws.db, ws.dir)
      await server.close()
      fs.rmSync(target)

      const { result, report } = await rerunJson(ws.db, session, ["--yes"], env)
      expect(fs.existsSync(target), shown(result)).toBe(false)
      // it still compares: the command's write was refused by the sandbox, so its output differs
      expect(result.code, shown(result)).toBe(1)
      expect(report.outcome._tag, shown(result)).toBe("divergence")
      expect(JSON.stringify(report.outcome)).toContain("Read-only file system")
      expect(report.commands).toEqual({ _tag: "sandboxed", network: true, calls: 1 })
      expect(report.refused).toEqual([])
      const text = await runCli(["rerun", session, "--db", ws.db, "--yes"], { env })
      expect(text.code, shown(text)).toBe(1)
      expect(text.stdout).toContain(
        "commands ran in the sandbox: only the re-run's directory and a private /tmp writable, network on"
      )
      expect(text.stdout).not.toContain("✓")
      expect(fs.existsSync(target)).toBe(false)
    }
  )

  it('a session run with tools.bash.sandbox "off" whose commands stay in the workspace re-runs sandboxed and matches', async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const env = userConfigEnv({ tools: { bash: { sandbox: "off" } } })
    server.enqueue(
      bash("c1", "pwd && echo one > one.txt && cat one.txt"),
      bash("c2", "echo two >> one.txt; wc -l < one.txt"),
      Reply.text("Done.")
    )
    expect((await runCli([...ws.runArgs, "work"], { env })).code).toBe(0)
    const session = await latestSession(ws.db, ws.dir)
    await server.close()
    const original = await readLog(ws.db, session)
    expect(ofType(original, "tool.finished").map((e) => (e.payload.metadata as { sandbox?: unknown }).sandbox)).toEqual(
      [
        { sandboxed: false, reason: 'tools.bash.sandbox is "off"' },
        { sandboxed: false, reason: 'tools.bash.sandbox is "off"' }
      ]
    )
    const { result, report } = await rerunJson(ws.db, session, ["--save"], env)
    expect(report.outcome, shown(result)).toEqual({ _tag: "match" })
    expect(report.commands).toEqual({ _tag: "sandboxed", network: true, calls: 2 })
    const rerun = await readLog(ws.db, report.rerun)
    expect(ofType(rerun, "tool.finished").map((e) => (e.payload.metadata as { sandbox?: unknown }).sandbox)).toEqual([
      { sandboxed: true, network: true },
      { sandboxed: true, network: true }
    ])
  })
})

describe("logbook rerun where no sandbox can run", () => {
  it("refuses every command (no sandbox here), exit 1; --unconfined-commands runs them", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    // the session ran here too ("auto": unconfined, so bash's description says nothing of a sandbox)
    const env = { PATH: pathWithoutBwrap() }
    server.enqueue(bash("c1", "echo made > made.txt; cat made.txt"), Reply.text("Done."))
    expect((await runCli([...ws.runArgs, "make it"], { env })).code).toBe(0)
    const session = await latestSession(ws.db, ws.dir)
    await server.close()
    const reason = "bubblewrap (bwrap) is not installed (not found on PATH)"

    const refused = await rerunJson(ws.db, session, ["--save"], env)
    expect(refused.result.code, shown(refused.result)).toBe(1)
    expect(refused.report.outcome._tag, shown(refused.result)).toBe("refused")
    expect(refused.report.refused).toEqual([
      {
        callId: expect.any(String),
        tool: "bash",
        subject: "echo made > made.txt; cat made.txt",
        outside: false,
        why: `no sandbox here (${reason}): a re-run runs commands only in the sandbox, and --unconfined-commands runs them without one`
      }
    ])
    expect(refused.report.commands).toEqual({ _tag: "refused", reason, calls: 1 })
    // refused as the re-run's other refusals are: never invoked, nothing made
    const log = await readLog(ws.db, refused.report.rerun)
    expect(ofType(log, "tool.invoked")).toEqual([])
    expect(ofType(log, "tool.failed").map((e) => e.payload.error)).toEqual([
      expect.stringMatching(/^Refused: no sandbox here \(bubblewrap/)
    ])
    expect(fs.existsSync(path.join(refused.report.workspace, "made.txt"))).toBe(false)
    // the notice of a run ("commands run without a sandbox") would not be true of a re-run
    expect(refused.result.stderr).not.toContain("without a sandbox")
    const text = await runCli(["rerun", session, "--db", ws.db], { env })
    expect(text.code, shown(text)).toBe(1)
    expect(text.stdout).not.toContain("✓")
    expect(text.stdout).toContain(`commands refused: no sandbox here (${reason}); --unconfined-commands runs them`)
    expect(text.stdout).toContain("refused: bash echo made > made.txt; cat made.txt: no sandbox here")

    const unconfined = await rerunJson(ws.db, session, ["--unconfined-commands", "--save"], env)
    expect(unconfined.report.outcome, shown(unconfined.result)).toEqual({ _tag: "match" })
    expect(unconfined.result.code).toBe(0)
    expect(unconfined.report.refused).toEqual([])
    expect(unconfined.report.commands).toEqual({ _tag: "unconfined", reason, calls: 1 })
    expect(fs.readFileSync(path.join(unconfined.report.workspace, "made.txt"), "utf8")).toBe("made\n")
    const ran = await readLog(ws.db, unconfined.report.rerun)
    expect(ofType(ran, "tool.finished").map((e) => (e.payload.metadata as { sandbox?: unknown }).sandbox)).toEqual([
      { sandboxed: false, reason }
    ])
    const ranText = await runCli(["rerun", session, "--db", ws.db, "--unconfined-commands"], { env })
    expect(ranText.code, shown(ranText)).toBe(0)
    expect(ranText.stdout).toContain(`commands ran without a sandbox (--unconfined-commands; ${reason})`)
  })
})
