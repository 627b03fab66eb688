/**
 * The interactive session (`logbook` with no command) through the built binary in a real terminal
 * (tmux) against the scripted model server: start, type a task, see the stream and the tool parts;
 * steer while a command runs (delivered with that step's tool results); queue for the next turn;
 * Esc during a long command (its processes gone, the part interrupted, the queue kept); approvals
 * as a selection; resume with -c; resize; NO_COLOR; a command printing control sequences.
 *
 * Every wait polls the screen or the disk for a state; nothing depends on how fast this machine is.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { hostPid } from "../support/pids.js"
import { Reply } from "../support/scriptedServer.js"
import { hasTmux, runInTmux, type TmuxRun } from "../support/tmux.js"
import {
  contentText,
  idle,
  latestSession,
  makeJanitor,
  makeWorkspace,
  messagesOf,
  ofType,
  readLog,
  toolResult
} from "./support.js"

/** an SGR sequence that sets a colour */
const COLOUR = new RegExp(`${String.fromCharCode(27)}\\[(?:[0-9;]*;)?(?:3[0-8]|4[0-8]|9[0-7]|10[0-7])(?:;[0-9;]*)?m`)

const janitor = makeJanitor()
afterEach(() => janitor.release())

const chatArgs = (ws: { readonly db: string; readonly dir: string }) => ["--db", ws.db, "--cwd", ws.dir]
const bash = (id: string, command: string) => ({ id, name: "bash", arguments: JSON.stringify({ command }) })
/** a command that runs until the test creates `go` in the workspace */
const untilGo = (before: string) => `echo ${before}; while [ ! -f go ]; do sleep 0.05; done; echo finished`

const start = async (args: ReadonlyArray<string>, options: Parameters<typeof runInTmux>[1] = {}) => {
  const run = runInTmux(args, options)
  janitor.defer(run.close)
  await run.waitFor(/idle │/)
  return run
}

/** Types a line into the prompt (waiting until the prompt shows it) and presses `key` (Enter: send). */
const type = async (run: TmuxRun, text: string, key = "Enter") => {
  run.keys("-l", text)
  await run.waitFor(`│› ${text}`)
  run.keys(key)
}

const poll = async (what: string, probe: () => boolean, timeoutMs = 20_000) => {
  const deadline = Date.now() + timeoutMs
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`waited ${timeoutMs} ms for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/**
 * The interactive session in tmux with a long command running: its shell's pid, and logbook's own
 * process (the one whose arguments name this test's database).
 */
const commandRunning = async () => {
  const server = await janitor.server()
  const ws = makeWorkspace(server)
  server.enqueue(Reply.stream({ toolCalls: [bash("call_1", "echo $$ > pid; sleep 600")] }))
  const run = await start(chatArgs(ws))
  await type(run, "go")
  const file = path.join(ws.dir, "pid")
  await poll("the command's pid", () => fs.existsSync(file) && fs.readFileSync(file, "utf8").endsWith("\n"))
  const command = hostPid(Number(fs.readFileSync(file, "utf8").trim()), ws.dir)
  const found = spawnSync("pgrep", ["-f", `bin.js --db ${ws.db}`], { encoding: "utf8" })
  const pids = found.stdout.trim().split("\n").filter(Boolean).map(Number)
  expect(pids).toHaveLength(1)
  return { ws, run, command, logbook: pids[0]! }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** The transcript: what is above the prompt's box. */
const transcript = (screen: string) => {
  const lines = screen.split("\n")
  const box = lines.map((line) => line.startsWith("╭")).lastIndexOf(true)
  return lines
    .slice(0, box < 0 ? lines.length : box)
    .map((line) => line.trimEnd())
    .join("\n")
    .trim()
}

describe.skipIf(!hasTmux)("logbook on a terminal: the interactive session", () => {
  it("a task typed at the prompt: the streamed answer as markdown, the tool part, the status line; Ctrl-D quits", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(
      Reply.stream({
        text: ["Let me ", "look."],
        toolCalls: [bash("call_1", "echo hello-from-bash")],
        usage: { prompt_tokens: 1000, completion_tokens: 20 }
      }),
      Reply.stream({
        toolCalls: [
          {
            id: "call_w",
            name: "write",
            arguments: JSON.stringify({ path: "notes.md", content: "line one\nline two\n" })
          }
        ]
      }),
      Reply.text("Done: **all good**, see `notes.md`.", { usage: { prompt_tokens: 1200, completion_tokens: 30 } })
    )
    const run = await start(chatArgs(ws))
    // the first frame: an empty prompt and the status line; the session is created by the first message
    expect(run.screen()).toContain("idle │ local/scripted │ 0 tokens │ $0 │ new session")
    await type(run, "look around")
    const screen = await run.waitFor("Done: all good, see notes.md.")
    expect(screen).toContain("› look around")
    expect(screen).toContain("Let me look.")
    expect(screen).toMatch(/✓ bash echo hello-from-bash +\d+(ms|\.\ds)/)
    expect(screen).toContain("│ hello-from-bash")
    // the write's diff, from the blobs of the log
    expect(screen).toMatch(/✓ write notes\.md/)
    expect(screen).toMatch(/created .*notes\.md\n *@@ -0,0 \+1,2 @@\n *\+line one\n *\+line two/)
    // markdown is rendered: no raw ** or backticks
    expect(screen).not.toContain("**all good**")
    // tokens and cost of both steps, the context the last step sent
    await run.waitFor("idle │ local/scripted │ 2,250 tokens │ $0.0023 │ ctx 1,200 │")

    run.keys("C-d")
    expect(await run.exited()).toBe(0)
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "user.message").map((e) => e.payload.text)).toEqual(["look around"])
    expect(ofType(log, "session.created").map((e) => e.payload.title)).toEqual(["look around"])
    expect(ofType(log, "tool.finished").map((e) => e.payload.callId)).toEqual(["call_1", "call_w"])
    expect(log.at(-1)).toMatchObject(idle)
  })

  it("Enter while a command runs steers: delivered with that step's tool results; the live tail shows the output", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.stream({ toolCalls: [bash("call_wait", untilGo("started-waiting"))] }), Reply.text("Steered."))
    const run = await start(chatArgs(ws))
    await type(run, "start the job")
    // the running part, with its elapsed time and the command's latest output
    await run.waitFor(/● bash echo started-waiting.*running \d/)
    await run.waitFor("│ started-waiting")
    await type(run, "also check the README")
    await run.waitFor("⧗ steer, at the next step: also check the README")
    fs.writeFileSync(path.join(ws.dir, "go"), "")
    const screen = await run.waitFor("Steered.")
    expect(screen).toContain("› also check the README (steer)")
    expect(screen).not.toContain("⧗ steer")

    // the second request holds the tool's result and then the steered message
    expect(server.requests).toHaveLength(2)
    const messages = messagesOf(server.requests[1]!)
    const result = messages.findIndex((m) => m.role === "tool" && m.tool_call_id === "call_wait")
    const steer = messages.findIndex((m) => m.role === "user" && contentText(m).includes("also check the README"))
    expect(result).toBeGreaterThan(0)
    expect(steer).toBeGreaterThan(result)
    expect(contentText(toolResult(server.requests[1]!, "call_wait"))).toContain("finished")
    run.keys("C-d")
    expect(await run.exited()).toBe(0)
  })

  it("Tab while the agent works queues: shown as queued, delivered as the next turn", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(
      Reply.stream({ toolCalls: [bash("call_wait", untilGo("working"))] }),
      Reply.text("First done."),
      Reply.text("Second done.")
    )
    const run = await start(chatArgs(ws))
    await type(run, "first task")
    await run.waitFor("│ working")
    await type(run, "then this", "Tab")
    await run.waitFor("⧗ queued: then this")
    await type(run, "and this", "M-Enter")
    await run.waitFor("⧗ queued: and this")
    fs.writeFileSync(path.join(ws.dir, "go"), "")
    await run.waitFor("Second done.")
    expect(server.requests).toHaveLength(3)
    const said = (i: number) =>
      messagesOf(server.requests[i]!)
        .filter((m) => m.role === "user")
        .map(contentText)
    expect(said(1)).toEqual(["first task"])
    expect(said(2)).toEqual(["first task", "then this", "and this"])
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "turn.started")).toHaveLength(2)
    run.keys("C-d")
    expect(await run.exited()).toBe(0)
  })

  it("Esc during a long command: its processes are gone, the part reads interrupted, the queued message stays queued", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.stream({ toolCalls: [bash("call_long", "echo $$ > pid; sleep 600 & echo $! > child; wait")] }))
    const run = await start(chatArgs(ws))
    await type(run, "run it")
    const pidFile = path.join(ws.dir, "pid")
    const childFile = path.join(ws.dir, "child")
    await poll(
      "the command's pids",
      () => fs.existsSync(childFile) && fs.readFileSync(childFile, "utf8").endsWith("\n")
    )
    const pids = [pidFile, childFile].map((file) => hostPid(Number(fs.readFileSync(file, "utf8").trim()), ws.dir))
    expect(pids.every(alive)).toBe(true)
    await type(run, "after the interrupt", "Tab")
    await run.waitFor("⧗ queued: after the interrupt")

    run.keys("Escape")
    const screen = await run.waitFor(/⊘ bash echo \$\$ > pid.*interrupted/)
    await run.waitFor(/idle │/)
    await poll("the command's processes to be gone", () => !pids.some(alive))
    expect(screen).toContain("⧗ queued: after the interrupt")
    expect(run.screen()).toContain("⧗ queued: after the interrupt")

    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "tool.failed").map((e) => [e.payload.callId, e.payload.interrupted, e.payload.reason])).toEqual([
      ["call_long", true, "user"]
    ])
    expect(ofType(log, "turn.interrupted").map((e) => e.payload.reason)).toEqual(["user"])
    const queued = ofType(log, "user.message").filter((e) => e.payload.mode === "queue")
    expect(queued.map((e) => e.payload.text)).toEqual(["after the interrupt"])
    // nothing delivered it
    expect(ofType(log, "turn.started").flatMap((e) => e.payload.messageIds)).not.toContain(queued[0]!.payload.messageId)
    expect(log.at(-1)).toMatchObject(idle)
    expect(server.requests).toHaveLength(1)
    run.keys("C-d")
    expect(await run.exited()).toBe(0)
  })

  it("Up takes back the newest message not delivered yet to edit it; after Esc, Enter on an empty prompt sends what waits", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.stream({ toolCalls: [bash("call_wait", untilGo("started"))] }), Reply.text("Did both."))
    const run = await start(chatArgs(ws))
    await type(run, "first")
    await run.waitFor("started")
    await type(run, "use zod")
    await run.waitFor("⧗ steer, at the next step: use zod")
    await type(run, "run the tests", "Tab")
    await run.waitFor("⧗ queued: run the tests")
    await run.waitFor("↑ on an empty prompt edits the last one")

    // Up: the queued message (the newest) comes back into the prompt and leaves the queue
    run.keys("Up")
    await run.waitFor("│› run the tests")
    await poll("the queued line to go", () => !run.visible().includes("⧗ queued"))
    expect(run.visible()).toContain("⧗ steer, at the next step: use zod")
    run.keys("-l", " and lint")
    await run.waitFor("│› run the tests and lint")
    run.keys("Tab")
    await run.waitFor("⧗ queued: run the tests and lint")

    run.keys("Escape")
    await run.waitFor(/⊘ bash echo started.*interrupted/)
    await run.waitFor(/idle │/)
    await run.waitFor("Enter sends them")
    expect(server.requests).toHaveLength(1)
    // an empty prompt's Enter: what the interrupt left waiting is sent, as one turn
    run.keys("Enter")
    await run.waitFor("Did both.")
    await run.waitFor(/idle │/)
    await poll("the waiting lines to go", () => !run.visible().includes("⧗"))
    expect(server.requests).toHaveLength(2)
    const sent = messagesOf(server.requests[1]!)
    expect(sent.slice(-2).map((m) => [m.role, contentText(m)])).toEqual([
      ["user", "use zod"],
      ["user", "run the tests and lint"]
    ])
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    const withdrawn = ofType(log, "user.withdrawn").map((e) => e.payload.messageId)
    const first = ofType(log, "user.message").find((e) => e.payload.text === "run the tests")!
    expect(withdrawn).toEqual([first.payload.messageId])
    expect(JSON.stringify(server.requests)).not.toMatch(/run the tests"/)
    expect(log.at(-1)).toMatchObject(idle)
    run.keys("C-d")
    expect(await run.exited()).toBe(0)
  })

  it("approvals are a selection: a typed word answers nothing; o+Enter runs once; t+Enter+reason rejects with it", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, { config: { permission: { bash: "ask" } } })
    server.enqueue(
      Reply.stream({ toolCalls: [bash("call_a", "touch a.txt")] }),
      Reply.stream({ toolCalls: [bash("call_b", "touch b.txt")] }),
      Reply.text("Understood.")
    )
    const run = await start(chatArgs(ws))
    await type(run, "make the files")
    await run.waitFor(/Allow bash\?[\s\S]*touch a\.txt[\s\S]*❯ once \(o\)/)
    // a word typed now (say, meant for the prompt) moves the selection at most
    run.keys("-l", "clear")
    await run.waitFor("❯ reject (r)")
    expect(fs.existsSync(path.join(ws.dir, "a.txt"))).toBe(false)
    expect(run.screen()).toContain("Allow bash?")
    run.keys("o")
    await run.waitFor("❯ once (o)")
    run.keys("Enter")
    await run.waitFor(/Allow bash\?[\s\S]*touch b\.txt/)
    expect(fs.existsSync(path.join(ws.dir, "a.txt"))).toBe(true)
    run.keys("t")
    await run.waitFor("❯ reject and tell the model why (t)")
    run.keys("Enter")
    await run.waitFor("Why (the model reads it")
    run.keys("-l", "use c.txt instead")
    await run.waitFor("use c.txt instead")
    run.keys("Enter")
    await run.waitFor("Understood.")
    expect(fs.existsSync(path.join(ws.dir, "b.txt"))).toBe(false)
    expect(contentText(toolResult(server.requests[2]!, "call_b"))).toContain("use c.txt instead")
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "permission.replied").map((e) => [e.payload.reply, e.payload.message])).toEqual([
      ["once", undefined],
      ["reject", "use c.txt instead"]
    ])
    run.keys("C-d")
    expect(await run.exited()).toBe(0)
  })

  it("-c resumes the latest session of the directory and shows its history as it was", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(
      Reply.stream({ text: ["Checking."], toolCalls: [bash("call_1", "echo from-the-first-run")] }),
      Reply.text("## Result\n\n- one\n- two")
    )
    const first = await start(chatArgs(ws))
    await type(first, "first run")
    await first.waitFor("• two")
    await first.waitFor(/idle │/)
    const before = transcript(first.visible())
    first.keys("C-d")
    expect(await first.exited()).toBe(0)

    const second = await start(["-c", ...chatArgs(ws)])
    await second.waitFor("• two")
    expect(transcript(second.visible())).toBe(before)
    const id = await latestSession(ws.db, ws.dir)
    expect(second.screen()).toContain(id)
    second.keys("C-d")
    expect(await second.exited()).toBe(0)
  })

  it("a resize redraws the screen at the new width; Ctrl-C twice while idle quits", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.text(`A long answer: ${"word ".repeat(60).trim()} END`))
    const run = await start(chatArgs(ws))
    await type(run, "say a lot")
    await run.waitFor("END")
    await run.waitFor(/idle │/)
    run.resize(80, 40)
    // the prompt's box drawn again, 80 wide
    await poll("the screen at 80 columns", () => /^╰─{78}╯$/m.test(run.visible()))
    const screen = run.visible()
    for (const line of screen.split("\n")) expect(Array.from(line).length).toBeLessThanOrEqual(80)
    expect(screen).toContain("END")
    expect(screen).toMatch(/idle │/)
    run.keys("C-c")
    await run.waitFor("Press Ctrl-C again to quit")
    run.keys("C-c")
    expect(await run.exited()).toBe(0)
  })

  it("NO_COLOR: no colour codes on the screen (and colours without it); control sequences from a command do nothing", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const hostile = "printf 'before\\033[2J\\033[H\\033]0;hacked\\007\\033[31mred\\033[0m after\\n'"
    server.enqueue(Reply.stream({ toolCalls: [bash("call_x", hostile)] }), Reply.text("Printed."))
    const plain = await start(chatArgs(ws), { env: { NO_COLOR: "1" } })
    await type(plain, "print")
    await plain.waitFor("Printed.")
    const shown = plain.visible({ escapes: true })
    // no foreground or background colour (SGR 30-38, 40-48, 90-97, 100-107; 39 and 49 are "default")
    expect(shown).not.toMatch(COLOUR)
    const text = plain.screen()
    expect(text).toContain("│ beforered after")
    expect(text).toContain("› print")
    expect(plain.title()).not.toBe("hacked")
    plain.keys("C-d")
    expect(await plain.exited()).toBe(0)

    const colored = await start(["-c", ...chatArgs(ws)])
    await colored.waitFor("Printed.")
    expect(colored.visible({ escapes: true })).toMatch(COLOUR)
    colored.keys("C-d")
    expect(await colored.exited()).toBe(0)
  })

  it("CI=true in the shell (a CI job's debug shell): the screen still draws, and the agent's commands still see CI", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.stream({ toolCalls: [bash("call_ci", 'echo "ci is $CI"')] }), Reply.text("Checked."))
    // Ink alone would draw nothing until exit with CI set (is-in-ci): start() would wait in vain
    const run = await start(chatArgs(ws), { env: { CI: "true", CONTINUOUS_INTEGRATION: "1" } })
    await type(run, "check")
    await run.waitFor("Checked.")
    expect(run.screen()).toContain("ci is true")
    expect(contentText(toolResult(server.requests[1]!, "call_ci"))).toContain("ci is true")
    run.keys("C-d")
    expect(await run.exited()).toBe(0)
  })

  it("Ctrl-C while a command runs interrupts it like Esc; Ctrl-D while the agent works quits without leaving anything running", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(
      Reply.stream({ toolCalls: [bash("call_1", "echo $$ > pid1; sleep 600")] }),
      Reply.stream({ toolCalls: [bash("call_2", "echo $$ > pid2; sleep 600")] })
    )
    const run = await start(chatArgs(ws))
    await type(run, "first")
    const pid = async (name: string) => {
      const file = path.join(ws.dir, name)
      await poll(name, () => fs.existsSync(file) && fs.readFileSync(file, "utf8").endsWith("\n"))
      return hostPid(Number(fs.readFileSync(file, "utf8").trim()), ws.dir)
    }
    const first = await pid("pid1")
    run.keys("C-c")
    await run.waitFor(/⊘ bash echo \$\$ > pid1.*interrupted/)
    await run.waitFor(/idle │/)
    await poll("the first command to be gone", () => !alive(first))
    // the interrupt did not arm quitting: the session goes on
    await type(run, "second")
    const second = await pid("pid2")
    run.keys("C-d")
    expect(await run.exited()).toBe(0)
    await poll("the second command to be gone", () => !alive(second))
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "tool.failed").map((e) => [e.payload.callId, e.payload.interrupted])).toEqual([
      ["call_1", true],
      ["call_2", true]
    ])
    expect(log.at(-1)).toMatchObject(idle)
  })

  it("/help, /events, /model, /compact, /new and /sessions", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, {
      config: {
        provider: {
          local: {
            type: "openai-compatible",
            baseURL: `${server.url}/v1`,
            models: { scripted: { price: { input: 1, output: 2 } }, other: {} }
          }
        }
      }
    })
    server.enqueue(
      Reply.stream({ toolCalls: [bash("call_a", "echo audited")] }),
      Reply.text("First answer."),
      Reply.text("A summary of the conversation."),
      Reply.text("Answer from the other model.")
    )
    const run = await start(chatArgs(ws))
    await type(run, "/help")
    await run.waitFor("Alt+Enter, Tab")
    expect(run.screen()).toContain("/compact")
    run.keys("Escape")
    await poll("the help to close", () => !run.visible().includes("Alt+Enter, Tab"))

    await type(run, "hello")
    await run.waitFor("First answer.")
    await run.waitFor(/idle │/)
    const firstId = await latestSession(ws.db, ws.dir)
    await type(run, "/events")
    await run.waitFor(`events of ${firstId}`)
    await run.waitFor(/user\.message +.*"hello"/)
    run.keys("Escape")
    await poll("the events to close", () => !run.visible().includes(`events of ${firstId}`))
    await type(run, "/audit")
    await run.waitFor(`audit of ${firstId}`)
    await run.waitFor(/\$ echo audited {2}\[exit 0 · /)
    expect(run.screen()).toContain("│ audited")
    run.keys("Escape")
    await poll("the audit to close", () => !run.visible().includes(`audit of ${firstId}`))

    await type(run, "/compact")
    await run.waitFor(/compacted \d+ messages into a summary/)
    expect(contentText(messagesOf(server.requests[2]!).at(-1))).toBeTruthy()

    await type(run, "/model local/other")
    await run.waitFor("idle │ local/other │")
    await type(run, "and now?")
    await run.waitFor("Answer from the other model.")
    expect(server.requests[3]!.body.model).toBe("other")

    await type(run, "/new")
    await run.waitFor("a new session")
    await poll("a new session", () => !run.visible().includes(firstId))
    await type(run, "/sessions")
    await run.waitFor("Sessions in this directory")
    // each row: when, outcome, cost (unknown: local/other has no price), title, short id
    await run.waitFor(new RegExp(`finished +unknown +hello +${firstId.slice(0, 8)}`))
    // the picker starts at the newest (this new one); down to the first session, Enter opens it
    run.keys("Down")
    await run.waitFor(new RegExp(`❯ .*${firstId.slice(0, 8)}`))
    run.keys("Enter")
    await run.waitFor(new RegExp(`idle │ local/other │ .*${firstId}`))
    expect(run.visible()).toContain("Answer from the other model.")
    run.keys("C-d")
    expect(await run.exited()).toBe(0)
  })

  it("SIGTERM while a command runs: the command is gone, the session released idle, the terminal restored", async () => {
    const { ws, run, command, logbook } = await commandRunning()
    process.kill(logbook, "SIGTERM")
    expect(await run.exited()).toBe(130)
    await poll("the command to be gone", () => !alive(command))
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "tool.failed").map((e) => [e.payload.interrupted, e.payload.reason])).toEqual([
      [true, "shutdown"]
    ])
    expect(ofType(log, "turn.interrupted").map((e) => e.payload.reason)).toEqual(["shutdown"])
    expect(log.at(-1)).toMatchObject(idle)
    // the terminal is back in line mode: what is typed now is echoed by it
    run.keys("-l", "typed-after-exit")
    await run.waitFor("typed-after-exit")
  })

  it("the terminal closed (SIGHUP) while a command runs: the command is gone, the session idle, reason hangup", async () => {
    const { ws, run, command, logbook } = await commandRunning()
    // the terminal goes away: tmux hangs up on the processes of its panes
    run.close()
    await poll("logbook to be gone", () => !alive(logbook))
    await poll("the command to be gone", () => !alive(command))
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "tool.failed").map((e) => [e.payload.interrupted, e.payload.reason])).toEqual([[true, "hangup"]])
    expect(ofType(log, "turn.interrupted").map((e) => e.payload.reason)).toEqual(["hangup"])
    expect(log.at(-1)).toMatchObject(idle)
  })
})
