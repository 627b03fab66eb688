/**
 * `logbook audit` and `logbook blob` through the built binary, on sessions produced by real runs
 * against the scripted model server: file changes as diffs from their blobs, commands with their
 * whole output (not the part the model got), a permission question and its answer, a retry, a
 * timeout, an interrupt and a crash recovery — one session, and several across a directory.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runCli, spawnCli } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import {
  contentText,
  fileLines,
  latestSession,
  makeJanitor,
  makeWorkspace,
  toolCall,
  toolResult,
  until
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const call = toolCall

interface JsonAudit {
  readonly sessions: ReadonlyArray<{
    readonly id: string
    readonly cwd: string
    readonly entries: ReadonlyArray<Record<string, unknown> & { readonly kind: string }>
  }>
}

const auditJson = async (args: ReadonlyArray<string>): Promise<JsonAudit> => {
  const result = await runCli(["audit", ...args, "--format", "json"])
  expect(result.code, result.stderr).toBe(0)
  return JSON.parse(result.stdout) as JsonAudit
}

describe("logbook audit", () => {
  it("one session: each file change as a diff, each command with its whole output; filters; formats; blob", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    fs.writeFileSync(path.join(ws.dir, "a.txt"), "one\ntwo\nthree\n")
    const long = "seq 1 20000; echo done; exit 3"
    server.enqueue(
      Reply.stream({ toolCalls: [call("call_read", "read", { path: "a.txt" })] }),
      // one call per step: the calls of one step run side by side, in no set order
      Reply.stream({ toolCalls: [call("call_write", "write", { path: "b.txt", content: "hello\n" })] }),
      Reply.stream({ toolCalls: [call("call_edit", "edit", { path: "a.txt", oldString: "two", newString: "TWO" })] }),
      Reply.stream({ toolCalls: [call("call_seq", "bash", { command: long })] }),
      Reply.text("Done.")
    )
    const run = await runCli([...ws.runArgs, "change things"])
    expect(run.code, run.stderr).toBe(0)
    const id = await latestSession(ws.db, ws.dir)

    const all = await auditJson(["latest", "--db", ws.db])
    expect(all.sessions.map((s) => [s.id, s.cwd])).toEqual([[id, ws.dir]])
    const entries = all.sessions[0]!.entries
    expect(entries.map((e) => [e.kind, e.path ?? e.command])).toEqual([
      ["file", "b.txt"],
      ["file", "a.txt"],
      ["command", long]
    ])
    const [created, changed, command] = entries as unknown as [
      Record<string, unknown>,
      Record<string, unknown>,
      Record<string, unknown>
    ]
    expect(created).toMatchObject({ op: "create", tool: "write", callId: "call_write" })
    expect(created.diff).toBe("--- /dev/null\n+++ b/b.txt\n@@ -0,0 +1,1 @@\n+hello")
    expect(changed).toMatchObject({ op: "update", tool: "edit", callId: "call_edit" })
    expect(changed.diff).toBe("--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three")
    expect(command).toMatchObject({ callId: "call_seq", cwd: ws.dir, exitCode: 3 })
    expect(typeof command.durationMs).toBe("number")
    // the whole output, although the model got only its head and tail
    const whole = `${Array.from({ length: 20000 }, (_, i) => i + 1).join("\n")}\ndone\n`
    expect(command.output).toBe(whole)
    expect(command.bytes).toBe(whole.length)
    const sent = contentText(toolResult(server.requests[4]!, "call_seq"))
    expect(sent.length).toBeLessThan(whole.length / 2)

    // filters
    const files = await auditJson(["latest", "--db", ws.db, "--files"])
    expect(files.sessions[0]!.entries.map((e) => e.path)).toEqual(["b.txt", "a.txt"])
    const commands = await auditJson(["latest", "--db", ws.db, "--commands"])
    expect(commands.sessions[0]!.entries.map((e) => e.kind)).toEqual(["command"])
    const onlyA = await auditJson([id.slice(0, 12), "--db", ws.db, "--path", "a.*"])
    expect(onlyA.sessions[0]!.entries.map((e) => e.path)).toEqual(["a.txt"])

    // text: for people
    const text = await runCli(["audit", "latest", "--db", ws.db])
    expect(text.code).toBe(0)
    expect(text.stdout).toContain(`session ${id}`)
    expect(text.stdout).toMatch(/ ~ created b\.txt \(write\)\n {4}--- \/dev\/null\n {4}\+\+\+ b\/b\.txt\n/)
    expect(text.stdout).toMatch(/ ~ changed a\.txt \(edit\)\n(?: {4}.*\n)* {4}-two\n {4}\+TWO\n/)
    expect(text.stdout).toMatch(
      new RegExp(
        ` \\$ seq 1 20000; echo done; exit 3 {2}\\[exit 3 · [^\\]]+ · ${whole.length.toLocaleString("en-US")} bytes of output\\]\n`
      )
    )
    expect(text.stdout).toContain(`    in ${ws.dir}\n`)
    expect(text.stdout).toContain("    │ 19999\n    │ 20000\n    │ done")
    // markdown: fenced diffs and outputs
    const markdown = await runCli(["audit", "latest", "--db", ws.db, "--format", "markdown"])
    expect(markdown.stdout).toContain("```diff\n  --- a/a.txt\n")
    expect(markdown.stdout).toContain("```text\n  1\n  2\n")

    // a blob by its hash: the bytes exactly
    const blob = await runCli(["blob", String(created.afterHash), "--db", ws.db])
    expect(blob.code).toBe(0)
    expect(blob.stdout).toBe("hello\n")
    const bad = await runCli(["blob", "xyz", "--db", ws.db])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain('"xyz" is not a blob hash')
    const unknown = await runCli(["blob", "0".repeat(64), "--db", ws.db])
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toContain(`no blob ${"0".repeat(64)} in this database`)
  })

  it("across a directory's sessions: a retry, a question and its answer, a timeout, an interrupt, a crash recovered", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, { config: { permission: { bash: { "*": "allow", "touch *": "ask" } } } })
    const args = (...words: ReadonlyArray<string>) => [...ws.runArgs, ...words]

    // a retried request, then a command the rules ask about (no terminal: rejected)
    server.enqueue(
      Reply.error(500),
      Reply.stream({ toolCalls: [call("call_touch", "bash", { command: "touch made" })] }),
      Reply.text("Not allowed.")
    )
    expect((await runCli(args("make a file"))).code).toBe(0)

    // a command that times out
    server.enqueue(
      Reply.stream({ toolCalls: [call("call_slow", "bash", { command: "sleep 30", timeoutMs: 300 })] }),
      Reply.text("Too slow.")
    )
    expect((await runCli(args("wait a bit"))).code).toBe(0)

    // interrupted (Ctrl-C) while a command runs
    const pidFile = path.join(ws.dir, "shell.pid")
    janitor.killGroupIn(pidFile)
    server.enqueue(
      Reply.stream({ toolCalls: [call("call_wait", "bash", { command: "echo $$ > shell.pid; sleep 300" })] })
    )
    const interrupted = spawnCli(args("wait long"))
    janitor.defer(() => interrupted.child.kill("SIGKILL"))
    await fileLines(pidFile, 1)
    interrupted.child.kill("SIGINT")
    expect((await interrupted.exited).code).toBe(130)

    // killed (-9) while a command runs; the next run repairs the session
    const crashFile = path.join(ws.dir, "crash.pid")
    janitor.killGroupIn(crashFile)
    server.enqueue(
      Reply.stream({ toolCalls: [call("call_crash", "bash", { command: "echo $$ > crash.pid; sleep 300" })] })
    )
    const crashed = spawnCli(args("wait again"))
    janitor.defer(() => crashed.child.kill("SIGKILL"))
    await fileLines(crashFile, 1)
    const crashedId = await latestSession(ws.db, ws.dir)
    await until("the command's group recorded", async () => {
      const audit = await auditJson([crashedId, "--db", ws.db, "--commands"])
      return audit.sessions[0]!.entries.length === 1 ? true : undefined
    })
    crashed.child.kill("SIGKILL")
    await crashed.exited
    server.enqueue(Reply.text("It was cut short."))
    expect((await runCli(args("-s", crashedId, "what happened?"))).code).toBe(0)

    const audit = await auditJson(["--cwd", ws.dir, "--db", ws.db])
    expect(audit.sessions).toHaveLength(4)
    const [retried, timedOut, stopped, repaired] = audit.sessions.map((s) => s.entries)
    // a call that never ran is no command: the question, who rejected it, and what the model tried
    expect(retried!.map((e) => e.kind)).toEqual(["retry", "permission", "refused"])
    expect(retried![0]).toMatchObject({ attempt: 2, status: 500 })
    expect(retried![1]).toMatchObject({
      tool: "bash",
      pattern: "touch made",
      reply: "reject",
      callId: "call_touch",
      by: "the non-interactive policy (logbook run denies what needs approval unless --yes)"
    })
    expect(retried![2]).toMatchObject({ tool: "bash", callId: "call_touch", input: { command: "touch made" } })
    expect(fs.existsSync(path.join(ws.dir, "made"))).toBe(false)
    expect(timedOut!.map((e) => e.kind)).toEqual(["command", "timeout"])
    expect(timedOut![0]).toMatchObject({ command: "sleep 30", status: "timed out" })
    expect(timedOut![1]).toMatchObject({ callId: "call_slow", tool: "bash", timeoutMs: 300 })
    // the file the interrupted command wrote is recorded (the snapshot after it, once its group is gone)
    expect(stopped!.map((e) => [e.kind, e.status ?? e.reason ?? e.path])).toEqual([
      ["command", "interrupted"],
      ["file", "shell.pid"],
      ["interrupt", "user"]
    ])
    expect(stopped![1]).toMatchObject({ op: "create", callId: "call_wait", tool: "bash" })
    // a process killed with -9 takes no snapshot after its command: what it wrote (crash.pid) is not
    // in the log (issue 12's crash windows)
    expect(repaired!.map((e) => [e.kind, e.status ?? e.reason ?? e.path])).toEqual([
      ["command", "interrupted"],
      ["interrupt", "crash"]
    ])
    // --commands: what the agent ran, and the commands it tried and was refused (not the question)
    const commands = await auditJson(["--cwd", ws.dir, "--db", ws.db, "--commands"])
    expect(commands.sessions.map((s) => s.entries.map((e) => [e.kind, e.callId]))).toEqual([
      [["refused", "call_touch"]],
      [["command", "call_slow"]],
      [["command", "call_wait"]],
      [["command", "call_crash"]]
    ])
    const text = await runCli(["audit", "--cwd", ws.dir, "--db", ws.db])
    expect(text.stdout).toContain("↻ retry: attempt 2 in ")
    expect(text.stdout).toContain('? bash asked for "touch made": rejected by the non-interactive policy')
    expect(text.stdout).toContain('⊗ bash {"command":"touch made"}: not run — Denied: bash `touch made` needs approval')
    expect(text.stdout).toContain("⏱ bash call call_slow timed out after 300ms")
    expect(text.stdout).toContain("⊘ interrupted (user)")
    expect(text.stdout).toContain("⊘ crash recovered")

    // --since: nothing in the future; a time that is not one is a usage error
    const future = await runCli(["audit", "--since", "2099-01-01", "--db", ws.db])
    expect(future.code).toBe(0)
    expect(future.stdout).toBe("")
    expect(future.stderr).toContain("nothing to audit since 2099-01-01 00:00:00")
    const bogus = await runCli(["audit", "--since", "yesterday", "--db", ws.db])
    expect(bogus.code).toBe(2)
    expect(bogus.stderr).toContain('--since: "yesterday" is not a time')
    const neither = await runCli(["audit", "--db", ws.db])
    expect(neither.code).toBe(2)
    expect(neither.stderr).toContain("name a session")
  })
})
