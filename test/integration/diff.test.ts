/**
 * `logbook diff` through the built binary, on sessions produced by real runs against the scripted
 * model server: two runs of one task that did the same are the same (ids and times aside); runs
 * that differ show where they first diverge, the calls and the files that differ, and the figures.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runCli } from "../support/cli.js"
import { Reply, type ScriptedResponse } from "../support/scriptedServer.js"
import { latestSession, makeJanitor, makeWorkspace } from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const write = (content: string) =>
  Reply.stream({
    toolCalls: [{ id: "call_w", name: "write", arguments: JSON.stringify({ path: "f.txt", content }) }]
  })

describe("logbook diff", () => {
  it("the same task done the same way is the same; done otherwise, where it diverges and what differs", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const session = async (...replies: ReadonlyArray<ScriptedResponse>) => {
      // each run starts from the same workspace: without f.txt
      fs.rmSync(path.join(ws.dir, "f.txt"), { force: true })
      server.enqueue(...replies)
      const run = await runCli([...ws.runArgs, "make f"])
      expect(run.code, run.stderr).toBe(0)
      return latestSession(ws.db, ws.dir)
    }
    const first = await session(write("one\n"), Reply.text("Done."))
    const again = await session(write("one\n"), Reply.text("Done."))
    const other = await session(Reply.error(500), write("two\n"), Reply.text("Done, differently."))

    const same = await runCli(["diff", first, again, "--db", ws.db, "--format", "json"])
    expect(same.code, same.stderr).toBe(0)
    const sameDiff = JSON.parse(same.stdout)
    expect(sameDiff.divergence).toBeUndefined()
    expect(sameDiff.calls).toEqual({ onlyA: [], onlyB: [] })
    expect(sameDiff.files).toEqual([])
    const sameText = await runCli(["diff", first, again, "--db", ws.db])
    expect(sameText.stdout).toContain("the same: every message, call, result and file change")

    const differs = await runCli(["diff", first, other, "--db", ws.db, "--format", "json"])
    const d = JSON.parse(differs.stdout)
    // the user's message is the same; the call is where they part
    expect(d.divergence).toMatchObject({
      index: 1,
      a: { kind: "call", tool: "write", input: '{"content":"one\\n","path":"f.txt"}' },
      b: { kind: "call", tool: "write", input: '{"content":"two\\n","path":"f.txt"}' }
    })
    expect(d.calls).toEqual({
      onlyA: ['write {"content":"one\\n","path":"f.txt"}'],
      onlyB: ['write {"content":"two\\n","path":"f.txt"}']
    })
    expect(d.files).toHaveLength(1)
    expect(d.files[0].path).toBe("f.txt")
    expect(d.files[0].a).not.toBe(d.files[0].b)
    expect(d.figures.a).toMatchObject({ turns: 1, steps: 2, retries: 0, toolCalls: 1 })
    expect(d.figures.b).toMatchObject({ turns: 1, steps: 2, retries: 1, toolCalls: 1 })

    const text = await runCli(["diff", first, other, "--db", ws.db])
    expect(text.code).toBe(0)
    expect(text.stdout).toContain("first divergence at item 2 (seq ")
    expect(text.stdout).toContain('  a: call write {"content":"one\\n","path":"f.txt"}')
    expect(text.stdout).toContain("tool calls only in b (1):")
    expect(text.stdout).toContain("files that end different (1):\n  f.txt  a: ")
    expect(text.stdout).toMatch(/\nretries {7}0 {13}1 {13}\+1\n/)

    const missing = await runCli(["diff", first, "nosuch", "--db", ws.db])
    expect(missing.code).toBe(2)
  })
})
