/**
 * Issue 11 §1: every file a command changes is recorded (docs/workspace.md). The built binary, a
 * scripted model that calls `bash`, a real workspace and the real SQLite log: each command is
 * surrounded by workspace snapshots, and what it created, changed or deleted becomes
 * `file.changed {observed: true}` with its contents before and after as blobs — also when the
 * command timed out or was interrupted.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { EventStore } from "../../src/store/EventStore.js"
import { restoreManifest } from "../../src/tools/WorkspaceSnapshot.js"
import { runCli, scratchDir, spawnCli } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import { blobText, fileLines, latestSession, makeJanitor, makeWorkspace, notices, ofType, readLog } from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const bash = (id: string, command: string, extra: Record<string, unknown> = {}) => ({
  id,
  name: "bash",
  arguments: JSON.stringify({ command, ...extra })
})

const write = (dir: string, file: string, content: string | Buffer) => {
  fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true })
  fs.writeFileSync(path.join(dir, file), content)
}

describe("logbook run: the files a command changes are recorded", () => {
  it("sed -i, a created file, a deleted file; ignored files and a large file as the bounds say", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    write(ws.dir, ".gitignore", "build/\n")
    write(ws.dir, "src/a.txt", "one\ntwo\n")
    write(ws.dir, "old.txt", "to be deleted\n")
    write(ws.dir, "build/out.txt", "ignored before\n")
    const large = Buffer.alloc(5 * 1024 * 1024, "x")
    write(ws.dir, "big.bin", large)
    server.enqueue(
      Reply.stream({
        toolCalls: [
          bash(
            "call_change",
            "sed -i 's/two/TWO/' src/a.txt && echo fresh > src/new.txt && rm old.txt && echo again > build/out.txt && echo y >> big.bin"
          )
        ]
      }),
      Reply.stream({ toolCalls: [bash("call_nothing", "cat src/a.txt && touch src/a.txt")] }),
      Reply.text("Done.")
    )

    const result = await runCli([...ws.runArgs, "change some files"])
    expect(notices(result.stderr)).toEqual([])
    expect(result.code).toBe(0)

    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    const changes = ofType(log, "file.changed").map((e) => e.payload)
    // nothing from build/ (ignored); nothing from the second command (cat and touch change no content)
    expect(changes.map((c) => [c.path, c.op, c.callId, c.observed])).toEqual([
      ["big.bin", "update", "call_change", true],
      ["old.txt", "delete", "call_change", true],
      ["src/a.txt", "update", "call_change", true],
      ["src/new.txt", "create", "call_change", true]
    ])
    const [big, old, a, created] = changes
    expect(await blobText(ws.db, a!.beforeHash!)).toBe("one\ntwo\n")
    expect(await blobText(ws.db, a!.afterHash!)).toBe("one\nTWO\n")
    expect(a).toMatchObject({ beforeSize: 8, afterSize: 8 })
    expect(await blobText(ws.db, old!.beforeHash!)).toBe("to be deleted\n")
    expect(old!.afterHash).toBeUndefined()
    expect(created!.beforeHash).toBeUndefined()
    expect(await blobText(ws.db, created!.afterHash!)).toBe("fresh\n")
    // over the per-file bound: hashed and sized, its content not stored, and the event says so
    expect(big).toMatchObject({
      beforeSize: large.length,
      afterSize: large.length + 2,
      beforeOmitted: "too-large",
      afterOmitted: "too-large"
    })
    expect(big!.beforeHash).toMatch(/^[0-9a-f]{64}$/)
    expect(big!.afterHash).not.toBe(big!.beforeHash)

    // the snapshots: the baseline (with its manifest) before the first command, one after each
    const snapshots = ofType(log, "workspace.snapshot").map((e) => e.payload)
    expect(snapshots.map((s) => [s.phase, s.callId, s.changed])).toEqual([
      ["baseline", "call_change", undefined],
      ["after", "call_change", 4],
      ["after", "call_nothing", 0]
    ])
    expect(snapshots[0]!.limits).toEqual([{ limit: "fileBytes", files: 1 }])
    expect(snapshots[0]!.files).toBe(5) // .gitignore, logbook.json, src/a.txt, old.txt, big.bin

    // the baseline restores the workspace as it was before the first command (the large file aside)
    const restored = scratchDir()
    const restoredResult = await Effect.runPromise(
      Effect.flatMap(EventStore, (store) => restoreManifest(store, snapshots[0]!.manifest!, restored)).pipe(
        Effect.provide(EventStore.layerSqlite({ filename: ws.db }))
      )
    )
    expect(restoredResult.restored).toBe(4)
    expect(restoredResult.missing.map((m) => m.path)).toEqual(["big.bin"])
    expect(fs.readFileSync(path.join(restored, "src/a.txt"), "utf8")).toBe("one\ntwo\n")
    expect(fs.readFileSync(path.join(restored, "old.txt"), "utf8")).toBe("to be deleted\n")
    expect(fs.existsSync(path.join(restored, "build"))).toBe(false)
  })

  it("a command that timed out: what it changed before it was stopped is recorded", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    write(ws.dir, "notes.txt", "before\n")
    server.enqueue(
      Reply.stream({
        toolCalls: [
          bash("call_slow", "echo after > notes.txt && echo half > partial.txt && sleep 30", { timeoutMs: 1500 })
        ]
      }),
      Reply.text("It timed out.")
    )
    const result = await runCli([...ws.runArgs, "run the slow thing"])
    expect(result.code).toBe(0)
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    const failed = ofType(log, "tool.failed")
    expect(failed.map((e) => e.payload.timedOut)).toEqual([true])
    const changes = ofType(log, "file.changed")
    expect(changes.map((e) => [e.payload.path, e.payload.op, e.payload.callId])).toEqual([
      ["notes.txt", "update", "call_slow"],
      ["partial.txt", "create", "call_slow"]
    ])
    expect(await blobText(ws.db, changes[0]!.payload.beforeHash!)).toBe("before\n")
    expect(await blobText(ws.db, changes[0]!.payload.afterHash!)).toBe("after\n")
    // recorded before the call's end
    expect(changes.every((e) => e.seq < failed[0]!.seq)).toBe(true)
  })

  it("a command interrupted (Ctrl-C): what it changed before it was stopped is recorded", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    write(ws.dir, "state.txt", "idle\n")
    const shellFile = path.join(ws.dir, "shell.pid")
    janitor.killGroupIn(shellFile)
    server.enqueue(
      Reply.stream({
        toolCalls: [bash("call_long", "echo busy > state.txt && echo $$ > shell.pid && sleep 300")]
      })
    )
    const live = spawnCli([...ws.runArgs, "start it"])
    janitor.defer(() => live.child.kill("SIGKILL"))
    await fileLines(shellFile, 1)
    live.child.kill("SIGINT")
    const exit = await live.exited
    expect(exit.code).toBe(130)

    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    const failed = ofType(log, "tool.failed")
    expect(failed.map((e) => e.payload.interrupted)).toEqual([true])
    const changes = ofType(log, "file.changed")
    expect(changes.map((e) => [e.payload.path, e.payload.op, e.payload.callId])).toEqual([
      ["shell.pid", "create", "call_long"],
      ["state.txt", "update", "call_long"]
    ])
    expect(await blobText(ws.db, changes[1]!.payload.beforeHash!)).toBe("idle\n")
    expect(await blobText(ws.db, changes[1]!.payload.afterHash!)).toBe("busy\n")
    expect(changes.every((e) => e.seq < failed[0]!.seq)).toBe(true)
  })

  it("a file tool's change is recorded once, by the tool; the command after it sees only its own", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(
      Reply.stream({ toolCalls: [bash("call_first", "true")] }),
      Reply.stream({
        toolCalls: [{ id: "call_write", name: "write", arguments: JSON.stringify({ path: "w.txt", content: "w\n" }) }]
      }),
      Reply.stream({ toolCalls: [bash("call_second", "cat w.txt > copy.txt")] }),
      Reply.text("Done.")
    )
    const result = await runCli([...ws.runArgs, "write and copy"])
    expect(result.code).toBe(0)
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "file.changed").map((e) => [e.payload.path, e.payload.callId, e.payload.observed])).toEqual([
      ["w.txt", "call_write", undefined],
      ["copy.txt", "call_second", true]
    ])
  })
})
