/**
 * `logbook rerun` through the built binary, on sessions recorded by real runs against the scripted
 * model server: the model's responses come from the log (the server is stopped before the re-run),
 * the tools run live in a scratch copy of the workspace as the session started.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { outsideDir, removeOutsideDirs } from "../support/bwrap.js"
import { runCli, spawnCli } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import {
  bashReply,
  fileLines,
  latestSession,
  makeJanitor,
  makeWorkspace,
  readLog,
  until,
  writableEnv
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())
afterAll(removeOutsideDirs)

const bash = bashReply

describe("logbook rerun", () => {
  it("reproduces a multi-step session with a command that changes files, with no model request; a changed tool result is a divergence", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    fs.writeFileSync(path.join(ws.dir, "seed.txt"), "seed\n")
    // something outside the workspace a command reads: changing it changes the tool's result (not
    // under /tmp: the commands' sandbox has a /tmp of its own)
    const outside = outsideDir("logbook-rerun-outside-")
    fs.writeFileSync(path.join(outside, "input.txt"), "first\n")
    server.enqueue(
      bash("call_1", `cat seed.txt > copy.txt && printf 'made\\n' > made.txt && rm seed.txt && echo done`),
      Reply.stream({
        text: "Reading it.",
        toolCalls: [{ id: "call_2", name: "bash", arguments: JSON.stringify({ command: `cat ${outside}/input.txt` }) }]
      }),
      Reply.stream({
        toolCalls: [
          { id: "call_3", name: "write", arguments: JSON.stringify({ path: "notes.txt", content: "a note\n" }) }
        ]
      }),
      Reply.text("All done: copy.txt, made.txt and notes.txt.")
    )
    const run = await runCli([...ws.runArgs, "copy the seed and read the input"])
    expect(run.code, run.stderr).toBe(0)
    const session = await latestSession(ws.db, ws.dir)
    const requests = server.requests.length
    expect(requests).toBe(4)
    await server.close()

    const scratch = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "logbook-rerun-ws-")), "ws")
    const same = await runCli(["rerun", session, "--db", ws.db, "--workspace", scratch, "--format", "json"])
    expect(same.code, same.stderr + same.stdout).toBe(0)
    const report = JSON.parse(same.stdout)
    const original = await readLog(ws.db, session)
    expect(report.outcome).toEqual({ _tag: "match" })
    expect(report).toMatchObject({
      served: 4,
      live: 0,
      compared: original.length,
      matched: original.length,
      source: "snapshot"
    })
    // the commands ran again, in the scratch copy: it ends as the original workspace did
    expect(fs.readFileSync(path.join(scratch, "copy.txt"), "utf8")).toBe("seed\n")
    expect(fs.readFileSync(path.join(scratch, "made.txt"), "utf8")).toBe("made\n")
    expect(fs.readFileSync(path.join(scratch, "notes.txt"), "utf8")).toBe("a note\n")
    expect(fs.existsSync(path.join(scratch, "seed.txt"))).toBe(false)
    // the re-run wrote nothing to the database (not saved) and sent nothing
    expect((await readLog(ws.db, session)).length).toBe(original.length)
    expect(server.requests.length).toBe(requests)

    const text = await runCli(["rerun", session, "--db", ws.db])
    expect(text.code, text.stderr).toBe(0)
    expect(text.stdout).toContain("4 model responses from the log, no request sent to a model")
    expect(text.stdout).toContain(`✓ the same: all ${original.length} events`)

    // the command's input changed: the re-run stops at its result and says what it was then and now
    fs.writeFileSync(path.join(outside, "input.txt"), "second\n")
    const differs = await runCli(["rerun", session, "--db", ws.db, "--format", "json"])
    expect(differs.code, differs.stdout).toBe(1)
    const d = JSON.parse(differs.stdout)
    expect(d.outcome._tag).toBe("divergence")
    const divergence = d.outcome.divergence
    expect(divergence.expected.type).toBe("tool.finished")
    expect(divergence.expected.payload.callId).toBe("call_2")
    expect(divergence.then).toMatchObject({ callId: "call_2", tool: "bash", ok: true })
    expect(divergence.then.output).toContain("first")
    expect(divergence.now.output).toContain("second")
    expect(d.matched).toBeLessThan(d.compared)
    const shown = await runCli(["rerun", session, "--db", ws.db])
    expect(shown.code).toBe(1)
    expect(shown.stdout).toContain("✗ diverged at seq")
    expect(shown.stdout).toMatch(/then: bash call_2 returned:\n {2}first/)
    expect(shown.stdout).toMatch(/now: bash call_2 returned:\n {2}second/)
  })
})

describe("logbook rerun --from-step (a fork)", () => {
  it("re-runs up to the request, then goes on live with another model and system prompt, as a new session that says where it forked", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, {
      config: {
        provider: {
          local: {
            type: "openai-compatible",
            baseURL: `${server.url}/v1`,
            models: { scripted: {}, other: {} }
          }
        }
      }
    })
    server.enqueue(
      bash("call_1", "printf 'one\\n' > one.txt && echo first"),
      bash("call_2", "echo second"),
      Reply.text("Done twice.")
    )
    expect((await runCli([...ws.runArgs, "do it twice"])).code).toBe(0)
    const session = await latestSession(ws.db, ws.dir)
    expect(server.requests.length).toBe(3)

    const prompt = path.join(ws.dir, "..", `prompt-${path.basename(ws.dir)}.txt`)
    fs.writeFileSync(prompt, "You are a terse agent.")
    server.enqueue(Reply.text("Forked: I would stop here."))
    const forked = await runCli([
      "rerun",
      session,
      "--db",
      ws.db,
      "--from-step",
      "2",
      "--model",
      "local/other",
      "--system-prompt",
      prompt,
      "--format",
      "json"
    ])
    expect(forked.code, forked.stderr + forked.stdout).toBe(0)
    const report = JSON.parse(forked.stdout)
    expect(report.outcome).toMatchObject({ _tag: "forked", fromRequest: 2 })
    expect(report).toMatchObject({ served: 1, live: 1 })
    // the live request: the other model, the given prompt, the history re-run up to it (the first command's result)
    expect(server.requests.length).toBe(4)
    const body = server.requests[3]!.body as {
      model: string
      messages: ReadonlyArray<{ role: string; content: unknown }>
    }
    expect(body.model).toBe("other")
    expect(body.messages[0]).toEqual({ role: "system", content: "You are a terse agent." })
    expect(JSON.stringify(body.messages)).toContain("first")
    expect(JSON.stringify(body.messages)).not.toContain("second")
    // a new session in the database, marked as a fork of the original at request 2
    const log = await readLog(ws.db, report.rerun)
    expect(log[0]).toMatchObject({
      type: "session.created",
      payload: { rerunOf: { sessionId: session, fromRequest: 2 }, model: "local/other" }
    })
    const text = log
      .filter((e) => e.type === "text.delta")
      .map((e) => (e.payload as { delta: string }).delta)
      .join("")
    expect(text).toBe("Forked: I would stop here.")
    expect(log.at(-1)).toMatchObject({ type: "session.status", payload: { status: { _tag: "idle" } } })
    // the fork worked in its own copy of the workspace: the original's is untouched
    expect(fs.existsSync(path.join(report.workspace, "one.txt"))).toBe(true)

    // past the session's requests: a usage error
    const past = await runCli(["rerun", session, "--db", ws.db, "--from-step", "9"])
    expect(past.code).toBe(2)
    expect(past.stderr).toContain("made 3 model requests: --from-step 9 is past them")
  })
})

describe("logbook rerun of a crashed and an interrupted session", () => {
  it("goes past a crash as the next process did (the crash sweep), and re-does an interrupt where the log has it", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const args = (...words: ReadonlyArray<string>) => [...ws.runArgs, ...words]
    const call = bashReply

    // killed (-9) while a command runs; the next run repairs the session and goes on
    // (the shells' pids go outside the workspace: a pid is another one in the re-run; the user's
    // config lets the sandboxed commands write there, a re-run's sandbox does not: quietly, so the
    // outputs are the same)
    const pids = fs.mkdtempSync(path.join(os.tmpdir(), "logbook-rerun-pids-"))
    const env = writableEnv(pids)
    const crashFile = path.join(pids, "crash.pid")
    janitor.killGroupIn(crashFile, ws.dir)
    server.enqueue(call("call_crash", `printf 'x\\n' > before.txt; { echo $$ > ${crashFile}; } 2>/dev/null; sleep 300`))
    const crashed = spawnCli(args("wait"), { env })
    janitor.defer(() => crashed.child.kill("SIGKILL"))
    await fileLines(crashFile, 1)
    const session = await latestSession(ws.db, ws.dir)
    await until("the command's group recorded", async () =>
      (await readLog(ws.db, session)).some((e) => e.type === "tool.process") ? true : undefined
    )
    crashed.child.kill("SIGKILL")
    await crashed.exited
    // interrupted (Ctrl-C) while a command runs, in the same session
    const pidFile = path.join(pids, "shell.pid")
    janitor.killGroupIn(pidFile, ws.dir)
    server.enqueue(
      Reply.text("It was cut short."),
      call("call_wait", `{ echo $$ > ${pidFile}; } 2>/dev/null; sleep 300`)
    )
    expect((await runCli(args("-s", session, "what happened?"), { env })).code).toBe(0)
    const interrupted = spawnCli(args("-s", session, "wait again"), { env })
    janitor.defer(() => interrupted.child.kill("SIGKILL"))
    await fileLines(pidFile, 1)
    await until("the second command's group recorded", async () =>
      (await readLog(ws.db, session)).filter((e) => e.type === "tool.process").length === 2 ? true : undefined
    )
    interrupted.child.kill("SIGINT")
    expect((await interrupted.exited).code).toBe(130)
    server.enqueue(Reply.text("Stopped, as you asked."))
    expect((await runCli(args("-s", session, "ok"), { env })).code).toBe(0)
    await server.close()
    const original = await readLog(ws.db, session)
    expect(original.filter((e) => e.type === "turn.interrupted").map((e) => e.payload)).toEqual([
      expect.objectContaining({ reason: "crash" }),
      expect.objectContaining({ reason: "user" })
    ])

    const rerun = await runCli(["rerun", session, "--db", ws.db, "--format", "json"], { env })
    expect(rerun.code, rerun.stdout + rerun.stderr).toBe(0)
    // the kernel that lost the session at the crash says nothing (a dead process would not)
    expect(rerun.stderr).toBe("")
    const report = JSON.parse(rerun.stdout)
    expect(report.outcome).toEqual({ _tag: "match" })
    expect(report).toMatchObject({ served: 4, live: 0, matched: original.length })
  })
})

describe("logbook rerun --save", () => {
  it("a session with reasoning and streamed text is the same again; saved, the re-run is a session diff calls the same", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    fs.writeFileSync(path.join(ws.dir, "a.txt"), "alpha\n")
    const usage = { prompt_tokens: 120, completion_tokens: 30, completion_tokens_details: { reasoning_tokens: 12 } }
    server.enqueue(
      Reply.stream({
        reasoning: ["The user wants ", "the file. ", "I will read it."],
        text: ["Reading ", "a.txt."],
        toolCalls: [{ id: "call_r", name: "read", arguments: ['{"pa', 'th":"a.txt"}'] }],
        usage
      }),
      Reply.stream({ reasoning: "It says alpha.", text: ["It ", "says ", "alpha", "."], usage })
    )
    expect((await runCli([...ws.runArgs, "what is in a.txt?"])).code).toBe(0)
    const session = await latestSession(ws.db, ws.dir)
    await server.close()
    const original = await readLog(ws.db, session)
    expect(original.filter((e) => e.type === "reasoning.delta").length).toBeGreaterThan(0)

    const saved = await runCli(["rerun", session, "--db", ws.db, "--save", "--format", "json"])
    expect(saved.code, saved.stdout + saved.stderr).toBe(0)
    const report = JSON.parse(saved.stdout)
    expect(report.outcome).toEqual({ _tag: "match" })
    // no command ran, so no snapshot: the directory as it is now (unchanged since) is where it started
    expect(report.source).toBe("directory")
    const again = await readLog(ws.db, report.rerun)
    expect(again[0]).toMatchObject({ type: "session.created", payload: { rerunOf: { sessionId: session } } })
    expect((again[0]!.payload as { rerunOf: object }).rerunOf).not.toHaveProperty("fromRequest")
    // the same reasoning, text, tokens, and the same read (of the scratch copy)
    const joined = (log: typeof original, type: string) =>
      log
        .filter((e) => e.type === type)
        .map((e) => (e.payload as { delta: string }).delta)
        .join("")
    expect(joined(again, "reasoning.delta")).toBe(joined(original, "reasoning.delta"))
    expect(joined(again, "text.delta")).toBe("Reading a.txt.It says alpha.")
    const tokens = (log: typeof original) =>
      log.filter((e) => e.type === "step.finished").map((e) => (e.payload as { usage: { input: number } }).usage.input)
    expect(tokens(again)).toEqual(tokens(original))
    const diff = await runCli(["diff", session, report.rerun, "--db", ws.db])
    expect(diff.code, diff.stderr).toBe(0)
    expect(diff.stdout).toContain("the same: every message, call, result and file change")
    // its workspace is kept with it
    expect(fs.readFileSync(path.join(report.workspace, "a.txt"), "utf8")).toBe("alpha\n")
    const text = await runCli(["rerun", session, "--db", ws.db])
    expect(text.stdout).toContain("the session took no snapshot of its workspace (it ran no command)")
    const sessions = await runCli(["sessions", "list", "--db", ws.db, "--all", "--format", "json"])
    expect(JSON.parse(sessions.stdout).map((s: { id: string }) => s.id)).toContain(report.rerun)
  })
})
