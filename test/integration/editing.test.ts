/**
 * A scripted editing task end to end (issue 4's done-criterion, in its first form): the model reads
 * a file, finds the bug with grep, edits it, runs the project's tests with bash, and answers. The
 * built binary, real HTTP, a real workspace; the log records the file change with both contents.
 */

import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runCli, shellQuote } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import {
  blobText,
  contentText,
  idle,
  latestSession,
  makeJanitor,
  makeWorkspace,
  notices,
  ofType,
  readLog,
  toolResult,
  unanswered
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const BUGGY = "export const sum = (a, b) => a - b\n"
const FIXED = "export const sum = (a, b) => a + b\n"
const TEST = [
  'import { sum } from "./sum.mjs"',
  "if (sum(2, 3) !== 5) {",
  '  console.log("FAIL: sum(2, 3) is", sum(2, 3))',
  "  process.exit(1)",
  "}",
  'console.log("ok")',
  ""
].join("\n")

describe("logbook run: an editing task", () => {
  it("grep, read, edit, run the tests, answer: the file is fixed and the change is recorded with both contents", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    fs.writeFileSync(path.join(ws.dir, "sum.mjs"), BUGGY)
    fs.writeFileSync(path.join(ws.dir, "test.mjs"), TEST)
    const call = (id: string, name: string, input: unknown) => ({ id, name, arguments: JSON.stringify(input) })
    server.enqueue(
      Reply.stream({ toolCalls: [call("call_grep", "grep", { pattern: "a - b" })] }),
      Reply.stream({ toolCalls: [call("call_read", "read", { path: "sum.mjs" })] }),
      Reply.stream({
        toolCalls: [call("call_edit", "edit", { path: "sum.mjs", oldString: "a - b", newString: "a + b" })]
      }),
      Reply.stream({ toolCalls: [call("call_test", "bash", { command: "node test.mjs" })] }),
      Reply.text("Fixed: sum subtracted instead of adding; the test passes.")
    )

    const result = await runCli([...ws.runArgs, "the test fails, fix it"])
    expect(notices(result.stderr)).toEqual([])
    expect(result.code).toBe(0)
    expect(fs.readFileSync(path.join(ws.dir, "sum.mjs"), "utf8")).toBe(FIXED)
    expect(result.stdout).toBe("Fixed: sum subtracted instead of adding; the test passes.\n")
    expect(result.stderr).toMatch(/✓ edit sum\.mjs/)
    expect(result.stderr).toMatch(/✓ bash node test\.mjs/)

    // what the model was sent: every call answered; grep found the line, the test passed
    const last = server.requests.at(-1)!
    expect(unanswered(last)).toEqual([])
    expect(contentText(toolResult(last, "call_grep"))).toMatch(/sum\.mjs:1:.*a - b/)
    expect(contentText(toolResult(last, "call_test"))).toMatch(/ok[\s\S]*Exit code: 0/)

    // the log: the change with its before and after contents, then the session idle
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    const changes = ofType(log, "file.changed")
    expect(changes.map((e) => [e.payload.path, e.payload.op, e.payload.callId])).toEqual([
      ["sum.mjs", "update", "call_edit"]
    ])
    expect(await blobText(ws.db, changes[0]!.payload.beforeHash!)).toBe(BUGGY)
    expect(await blobText(ws.db, changes[0]!.payload.afterHash!)).toBe(FIXED)
    expect(log.at(-1)).toMatchObject(idle)
  })

  it("an edit of a file the agent never read is refused with a readable error, and nothing changes", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    fs.writeFileSync(path.join(ws.dir, "sum.mjs"), BUGGY)
    server.enqueue(
      Reply.stream({
        toolCalls: [
          {
            id: "call_edit",
            name: "edit",
            arguments: JSON.stringify({ path: "sum.mjs", oldString: "a - b", newString: "a + b" })
          }
        ]
      }),
      Reply.text("I need to read it first.")
    )
    const result = await runCli([...ws.runArgs, "fix sum"])
    expect(result.code).toBe(0)
    expect(fs.readFileSync(path.join(ws.dir, "sum.mjs"), "utf8")).toBe(BUGGY)
    const error = contentText(toolResult(server.requests.at(-1)!, "call_edit"))
    expect(error).toMatch(/read/i)
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "file.changed")).toEqual([])
  })

  it("--continue: a file read in an earlier run is edited without reading it again; changed on disk since, refused", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const file = path.join(ws.dir, "sum.mjs")
    fs.writeFileSync(file, BUGGY)
    const call = (id: string, name: string, input: unknown) => ({ id, name, arguments: JSON.stringify(input) })
    const edit = (id: string, from: string, to: string) =>
      Reply.stream({ toolCalls: [call(id, "edit", { path: "sum.mjs", oldString: from, newString: to })] })

    // first run: the model reads the file and stops
    server.enqueue(Reply.stream({ toolCalls: [call("call_read", "read", { path: "sum.mjs" })] }), Reply.text("Read."))
    expect((await runCli([...ws.runArgs, "look at sum.mjs"])).code).toBe(0)

    // a new process: the read is in the log (tool.finished reads), so the edit goes through
    server.enqueue(edit("call_edit", "a - b", "a + b"), Reply.text("Fixed."))
    const second = await runCli([...ws.runArgs, "--continue", "fix it"])
    expect(second.code).toBe(0)
    expect(fs.readFileSync(file, "utf8")).toBe(FIXED)
    expect(contentText(toolResult(server.requests.at(-1)!, "call_edit"))).not.toMatch(/read it/i)

    // the agent's own edit is what it saw last: it can edit again in a third run…
    server.enqueue(edit("call_again", "(a, b)", "(x, y) => x + y, _ = (a, b)"), Reply.text("Again."))
    expect((await runCli([...ws.runArgs, "--continue", "rename"])).code).toBe(0)
    const edited = fs.readFileSync(file, "utf8")
    expect(edited).toContain("(x, y) => x + y")

    // …but not after someone else changed the file between runs
    fs.writeFileSync(file, `${edited}// changed by the user\n`)
    server.enqueue(edit("call_stale", "x + y", "y + x"), Reply.text("It changed."))
    expect((await runCli([...ws.runArgs, "--continue", "swap"])).code).toBe(0)
    expect(fs.readFileSync(file, "utf8")).toBe(`${edited}// changed by the user\n`)
    expect(contentText(toolResult(server.requests.at(-1)!, "call_stale"))).toMatch(/changed/i)
  })
})

const realRg = spawnSync("sh", ["-c", "command -v rg"], { encoding: "utf8" }).stdout.trim()

describe.skipIf(realRg === "")("logbook run: grep through ripgrep", () => {
  it("a search of 100+ files goes to rg (a logging wrapper stands in for it) and the model gets the matches", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    for (let i = 0; i < 120; i++) {
      fs.mkdirSync(path.join(ws.dir, "src", `m${i % 6}`), { recursive: true })
      fs.writeFileSync(
        path.join(ws.dir, "src", `m${i % 6}`, `f${i}.ts`),
        i === 77 ? "const needle = 77\n" : `const x = ${i}\n`
      )
    }
    const log = path.join(ws.dir, "..", `${path.basename(ws.dir)}-rg.log`)
    const wrapper = path.join(ws.dir, "..", `${path.basename(ws.dir)}-rg.sh`)
    fs.writeFileSync(wrapper, `#!/bin/sh\necho "$1" >> ${shellQuote(log)}\nexec ${shellQuote(realRg)} "$@"\n`, {
      mode: 0o755
    })
    server.enqueue(
      Reply.stream({
        toolCalls: [{ id: "call_grep", name: "grep", arguments: JSON.stringify({ pattern: "needle" }) }]
      }),
      Reply.text("Found it.")
    )
    const result = await runCli([...ws.runArgs, "where is the needle"], { env: { LOGBOOK_RIPGREP: wrapper } })
    expect(result.code).toBe(0)
    expect(contentText(toolResult(server.requests[1]!, "call_grep"))).toBe("src/m5/f77.ts:1: const needle = 77")
    // rg answered --version (found) and then searched
    const calls = fs.readFileSync(log, "utf8").trim().split("\n")
    expect(calls[0]).toBe("--version")
    expect(calls.slice(1).length).toBeGreaterThan(0)
  })
})
