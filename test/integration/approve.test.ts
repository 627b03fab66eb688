/**
 * The interactive Approver through the built binary in a real terminal (tmux): `logbook run` asks
 * before a call the permission rules `ask` about, and the user picks an answer — once, always,
 * reject, reject with a message — and confirms it with Enter, or interrupts with Ctrl-C. A key alone
 * never answers (issue 10 §2: it used to; typing `clear` answered "always"). Every answer is in the
 * log; nothing runs without one.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runCli } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import { hasTmux, runInTmux } from "../support/tmux.js"
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

const janitor = makeJanitor()
afterEach(() => janitor.release())

const bash = (id: string, command: string) => ({ id, name: "bash", arguments: JSON.stringify({ command }) })

describe.skipIf(!hasTmux)("logbook run on a terminal: the approval prompt", () => {
  it("once, always (not asked again), an ignored key, reject, each confirmed with Enter: logged, only approved commands run", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, { config: { permission: { bash: "ask" } } })
    server.enqueue(
      Reply.stream({ text: ["I will make the files."], toolCalls: [bash("call_once", "touch once.txt")] }),
      Reply.stream({ toolCalls: [bash("call_always", "touch always.txt")] }),
      // the same command again: answered "always" before, so not asked
      Reply.stream({ toolCalls: [bash("call_again", "touch always.txt")] }),
      Reply.stream({ toolCalls: [bash("call_reject", "touch rejected.txt")] }),
      Reply.text("All done.")
    )
    const run = runInTmux([...ws.runArgs, "make the files"])
    janitor.defer(run.close)

    const first = await run.waitFor(/\? bash touch once\.txt[\s\S]*› $/m)
    // the prompt comes after what the model wrote before the call, and says why it asks
    expect(first.indexOf("I will make the files.")).toBeLessThan(first.indexOf("? bash touch once.txt"))
    expect(first).toContain('bash `touch once.txt` needs approval by the rule "bash"')
    expect(first).toContain(
      "o once · a always (this exact call, this session) · r reject · t reject and tell the model why " +
        "— choose, then Enter ›"
    )
    // nothing runs before the answer
    expect(fs.existsSync(path.join(ws.dir, "once.txt"))).toBe(false)
    run.keys("o", "Enter")
    await run.waitFor(/\? bash touch always\.txt[\s\S]*› $/m)
    expect(fs.existsSync(path.join(ws.dir, "once.txt"))).toBe(true)
    run.keys("a", "Enter")
    await run.waitFor(/\? bash touch rejected\.txt[\s\S]*› $/m)
    // a key that is no answer is ignored, also when the next key comes in the same read; `r` only chooses
    run.keys("x", "r")
    await run.waitFor(/\[r reject\] · t reject and tell the model why — choose, then Enter › $/m)
    run.keys("Enter")
    expect(await run.exited()).toBe(0)

    const screen = run.screen()
    expect(screen).toContain("allowed once")
    expect(screen).toContain("allowed for the rest of this session")
    expect(screen).toMatch(/› rejected/)
    expect(screen).toMatch(/✗ bash touch rejected\.txt +rejected \(the model is told\)/)
    expect(screen).toContain("All done.")
    // the always-approved command was asked once, not twice
    expect(screen.match(/\? bash touch always\.txt/g)).toHaveLength(1)

    expect(fs.existsSync(path.join(ws.dir, "always.txt"))).toBe(true)
    expect(fs.existsSync(path.join(ws.dir, "rejected.txt"))).toBe(false)
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    const asked = ofType(log, "permission.asked")
    expect(asked.map((e) => e.payload.callId)).toEqual(["call_once", "call_always", "call_reject"])
    const replied = ofType(log, "permission.replied")
    expect(replied.map((e) => [e.payload.permissionId, e.payload.reply])).toEqual(
      asked.map((e, i) => [e.payload.permissionId, ["once", "always", "reject"][i]])
    )
    expect(ofType(log, "tool.finished").map((e) => e.payload.callId)).toEqual([
      "call_once",
      "call_always",
      "call_again"
    ])
    const denial = contentText(toolResult(server.requests[4]!, "call_reject"))
    expect(denial).toContain("Denied: bash `touch rejected.txt` needs approval")
    expect(denial).toContain("the user rejected it")
    expect(log.at(-1)).toMatchObject(idle)
  })

  it("t: rejected with a message typed at the prompt; the model reads it, the log keeps it", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, { config: { permission: { bash: "ask" } } })
    server.enqueue(
      Reply.stream({ toolCalls: [bash("call_reset", "git reset --hard")] }),
      Reply.text("Stashing instead.")
    )
    const run = runInTmux([...ws.runArgs, "clean up"])
    janitor.defer(run.close)
    await run.waitFor(/\? bash git reset --hard[\s\S]*› $/m)
    run.keys("t")
    await run.waitFor(/\[t reject and tell the model why\] — choose, then Enter › $/m)
    run.keys("Enter")
    await run.waitFor(/tell the model why \(Enter sends it\)\n {2}› $/m)
    // typed (a Backspace included), then Enter
    run.keys("-l", "use git stashx")
    await run.waitFor(/› use git stashx$/m)
    run.keys("BSpace", "Enter")
    expect(await run.exited()).toBe(0)

    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "permission.replied").map((e) => e.payload)).toEqual([
      expect.objectContaining({ reply: "reject", message: "use git stash" })
    ])
    expect(ofType(log, "tool.invoked")).toEqual([])
    const denial = contentText(toolResult(server.requests[1]!, "call_reset"))
    expect(denial).toContain("the user rejected it, saying: use git stash\n")
    expect(run.screen()).toContain("Stashing instead.")
    expect(log.at(-1)).toMatchObject(idle)
  })

  it("a word typed into the wrong window (`clear`) leaves the call unanswered; `a` then Enter answers always", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, { config: { permission: { bash: "ask" } } })
    server.enqueue(Reply.stream({ toolCalls: [bash("call_build", "touch built.txt")] }), Reply.text("Built."))
    const run = runInTmux([...ws.runArgs, "build it"])
    janitor.defer(run.close)
    await run.waitFor(/\? bash touch built\.txt[\s\S]*› $/m)
    const id = await latestSession(ws.db, ws.dir)

    // its `a` and its `r` only move the highlight: the last one read, `r`, is chosen, and nothing answered
    run.keys("-l", "clear")
    await run.waitFor(/\[r reject\] · t reject and tell the model why — choose, then Enter › $/m)
    const waiting = await readLog(ws.db, id)
    expect(ofType(waiting, "permission.asked").map((e) => e.payload.callId)).toEqual(["call_build"])
    expect(ofType(waiting, "permission.replied")).toEqual([])
    expect(ofType(waiting, "tool.invoked")).toEqual([])
    expect(fs.existsSync(path.join(ws.dir, "built.txt"))).toBe(false)
    expect(run.screen()).not.toMatch(/allowed|rejected/)

    run.keys("a")
    await run.waitFor(/\[a always \(this exact call, this session\)\] · r reject/)
    run.keys("Enter")
    expect(await run.exited()).toBe(0)
    expect(run.screen()).toContain("› allowed for the rest of this session")
    expect(fs.existsSync(path.join(ws.dir, "built.txt"))).toBe(true)
    const log = await readLog(ws.db, id)
    expect(ofType(log, "permission.replied").map((e) => e.payload.reply)).toEqual(["always"])
    expect(log.at(-1)).toMatchObject(idle)
  })

  it("on a terminal narrower than the choices' line: it wraps, and each redraw replaces both rows", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, { config: { permission: { bash: "ask" } } })
    server.enqueue(Reply.stream({ toolCalls: [bash("call_narrow", "touch narrow.txt")] }), Reply.text("Made."))
    const run = runInTmux([...ws.runArgs, "make it"], { columns: 80, rows: 30 })
    janitor.defer(run.close)
    await run.waitFor(/— choose, then Enter › $/m)
    run.keys("a")
    await run.waitFor(/\[a always/)
    run.keys("Right")
    await run.waitFor(/\[r reject\]/)
    // one choices' line on the screen (two rows), no piece of an earlier one left
    const screen = run.visible()
    expect(screen.match(/choose, then Enter/g)).toHaveLength(1)
    expect(screen.match(/o once · /g)).toHaveLength(1)
    expect(screen).not.toContain("[a always")
    run.keys("Enter")
    expect(await run.exited()).toBe(0)
    expect(fs.existsSync(path.join(ws.dir, "narrow.txt"))).toBe(false)
    expect(run.screen()).toContain("› rejected")
  })

  it("Ctrl-C at the prompt: the run is interrupted (exit 130), the ask closed unanswered, nothing ran", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, { config: { permission: { bash: { "rm *": "ask" } } } })
    fs.writeFileSync(path.join(ws.dir, "keep.txt"), "keep")
    server.enqueue(Reply.stream({ toolCalls: [bash("call_rm", "rm keep.txt")] }))
    const run = runInTmux([...ws.runArgs, "clean up"])
    janitor.defer(run.close)

    await run.waitFor(/\? bash rm keep\.txt[\s\S]*› $/m)
    run.keys("C-c")
    expect(await run.exited()).toBe(130)
    const screen = run.screen()
    expect(screen).toContain("(not answered: interrupted)")
    expect(screen).toMatch(/^continue this session: logbook run -s \S+ --db \S+ "…"$/m)

    expect(fs.readFileSync(path.join(ws.dir, "keep.txt"), "utf8")).toBe("keep")
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "permission.replied").map((e) => [e.payload.reply, e.payload.interrupted])).toEqual([
      ["reject", true]
    ])
    expect(ofType(log, "tool.invoked")).toEqual([])
    expect(ofType(log, "tool.failed").map((e) => [e.payload.callId, e.payload.interrupted, e.payload.reason])).toEqual([
      ["call_rm", true, "user"]
    ])
    expect(log.at(-1)).toMatchObject(idle)
  })

  it("killed (-9) while a question waits: the next run ends the call with the input the model sent, and sends it back", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, { config: { permission: { bash: { "rm *": "ask" } } } })
    fs.writeFileSync(path.join(ws.dir, "keep.txt"), "keep")
    server.enqueue(Reply.stream({ toolCalls: [bash("call_wait", "rm keep.txt")] }))
    const run = runInTmux([...ws.runArgs, "clean up"])
    janitor.defer(run.close)
    await run.waitFor(/\? bash rm keep\.txt[\s\S]*› $/m)
    // the question is committed before it is shown: kill -9, no cleanup
    const session = await latestSession(ws.db, ws.dir)
    expect(ofType(await readLog(ws.db, session), "permission.asked").map((e) => e.payload.input)).toEqual([
      { command: "rm keep.txt" }
    ])
    // the node process, not the shell around it: by its executable (Node 24 names its main thread
    // `MainThread`, so /proc/<pid>/comm is not "node" there)
    const node = fs.realpathSync(process.execPath)
    const nodes = spawnSync("pgrep", ["-f", ws.db], { encoding: "utf8" })
      .stdout.split("\n")
      .filter((pid) => pid !== "" && fs.readlinkSync(`/proc/${pid}/exe`) === node)
    expect(nodes).toHaveLength(1)
    process.kill(Number(nodes[0]), "SIGKILL")
    expect(await run.exited()).toBe(137)

    server.enqueue(Reply.text("Kept it."))
    const next = await runCli([...ws.runArgs, "-s", session, "go on"])
    expect(next.code, next.stderr + next.stdout).toBe(0)
    expect(fs.readFileSync(path.join(ws.dir, "keep.txt"), "utf8")).toBe("keep")
    const failed = ofType(await readLog(ws.db, session), "tool.failed")
    expect(failed.map((e) => [e.payload.callId, e.payload.reason, e.payload.input])).toEqual([
      ["call_wait", "crash", { command: "rm keep.txt" }]
    ])
    // the model sees the call it wrote, not `{}`
    const assistant = messagesOf(server.requests[1]!).find((m) => m.role === "assistant") as unknown as {
      readonly tool_calls: ReadonlyArray<{ readonly id: string; readonly function: { readonly arguments: string } }>
    }
    expect(assistant.tool_calls.map((c) => [c.id, JSON.parse(c.function.arguments)])).toEqual([
      ["call_wait", { command: "rm keep.txt" }]
    ])
  })

  it("--format json with stdout elsewhere: the prompt on the terminal (stderr), stdout only JSON lines", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, { config: { permission: { bash: "ask" } } })
    server.enqueue(Reply.stream({ toolCalls: [bash("call_json", "touch json.txt")] }), Reply.text("Made it."))
    const out = path.join(ws.dir, "..", `${path.basename(ws.dir)}.jsonl`)
    const run = runInTmux([...ws.runArgs, "--format", "json", "make it"], { stdoutFile: out })
    janitor.defer(run.close)

    await run.waitFor(/\? bash touch json\.txt[\s\S]*› $/m)
    run.keys("o", "Enter")
    expect(await run.exited()).toBe(0)
    expect(run.screen()).toContain("allowed once")
    expect(fs.existsSync(path.join(ws.dir, "json.txt"))).toBe(true)
    const lines = fs
      .readFileSync(out, "utf8")
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line) as { type: string; payload?: { reply?: string } })
    expect(lines.at(-1)).toMatchObject({ type: "done", exitCode: 0 })
    expect(lines.filter((l) => l.type === "permission.replied").map((l) => l.payload?.reply)).toEqual(["once"])
    expect(lines.some((l) => l.type === "tool.finished")).toBe(true)
  })
})
