/**
 * `logbook export` / `logbook import` through the built binary, on sessions that real runs wrote
 * against the scripted model server (real HTTP, real commands, real SQLite files): an editing
 * session that was retried (file changes with both contents, a command's output blob, the prompt
 * blob), one interrupted by Ctrl-C while a command ran, and one compacted. Each is exported,
 * imported into another database and exported again: byte for byte the same file, and the imported
 * session reads the same. A damaged file or a session the database holds is refused, naming the
 * line, and nothing is written.
 */

import { spawnSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { examples } from "../../src/cli/examples.js"
import {
  fileLines,
  latestSession,
  makeJanitor,
  makeWorkspace,
  notices,
  ofType,
  readLog,
  userConfigEnv,
  type Workspace
} from "../integration/support.js"
import { baseEnv, binPath, runCli, scratchDir, spawnCli } from "../support/cli.js"
import { Reply, type ScriptedToolCall } from "../support/scriptedServer.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const call = (id: string, name: string, input: unknown): ScriptedToolCall => ({
  id,
  name,
  arguments: JSON.stringify(input)
})

const KEY_ENV = "LOGBOOK_TEST_KEY"

/** A workspace whose provider is keyed (the user's config names the key variable, `env` sets it). */
const keyedWorkspace = async () => {
  const server = await janitor.server()
  const ws = makeWorkspace(server)
  const key = `sk-test-${randomBytes(16).toString("hex")}`
  const env = {
    ...userConfigEnv({
      provider: { local: { type: "openai-compatible", baseURL: `${server.url}/v1`, apiKeyEnv: KEY_ENV } }
    }),
    [KEY_ENV]: key,
    ANTHROPIC_API_KEY: undefined,
    OPENAI_API_KEY: undefined
  }
  return { server, ws, key, env }
}

/** Exports `session` of `db` to a new file and returns its path (asserting the command went well). */
const exportTo = async (db: string, session: string, args: ReadonlyArray<string> = []): Promise<string> => {
  const file = path.join(scratchDir(), "session.jsonl")
  const result = await runCli(["export", session, "--db", db, "-o", file, ...args])
  expect(result.stderr).toBe("")
  expect(result.code).toBe(0)
  expect(result.stdout).toBe("")
  return file
}

/**
 * export → import (a new database) → export: the same bytes; the imported session reads the same
 * (`sessions show --format json`, `events --format json`).
 */
const roundTrip = async (ws: Workspace, id: string) => {
  const first = await exportTo(ws.db, id)
  const text = fs.readFileSync(first, "utf8")
  const other = path.join(scratchDir(), "other.db")
  const imported = await runCli(["import", first, "--db", other])
  expect(imported.stderr).toBe("")
  expect(imported.code).toBe(0)
  expect(imported.stdout).toContain(`Imported session ${id}`)
  const second = await exportTo(other, id)
  expect(fs.readFileSync(second, "utf8")).toBe(text)
  const show = async (db: string) => (await runCli(["sessions", "show", id, "--db", db, "--format", "json"])).stdout
  expect(await show(other)).toBe(await show(ws.db))
  const events = await runCli(["events", id, "--db", other, "--format", "json"])
  const lines = text.trimEnd().split("\n")
  const header = JSON.parse(lines[0]!) as { events: number; blobs: number }
  expect(events.stdout.trimEnd().split("\n")).toEqual(lines.slice(1, 1 + header.events))
  return { text, lines, header, other }
}

const parseLines = (lines: ReadonlyArray<string>) => lines.map((line) => JSON.parse(line) as Record<string, unknown>)

describe("logbook export / import of real sessions", () => {
  it("an editing session with a retry: blobs of the file changes, the command output and the prompt go along; the key does not", async () => {
    const { env, key, server, ws } = await keyedWorkspace()
    fs.writeFileSync(path.join(ws.dir, "sum.mjs"), "export const sum = (a, b) => a - b\n")
    server.enqueue(
      Reply.error(500, { message: "upstream hiccup" }),
      Reply.stream({ toolCalls: [call("call_read", "read", { path: "sum.mjs" })] }),
      Reply.stream({
        toolCalls: [call("call_edit", "edit", { path: "sum.mjs", oldString: "a - b", newString: "a + b" })]
      }),
      Reply.stream({
        toolCalls: [
          call("call_write", "write", { path: "NOTES.md", content: "# notes\nsum is fixed\n" }),
          call("call_bash", "bash", { command: "printf 'one\\ntwo\\n'" })
        ]
      }),
      Reply.text("Fixed **sum**.")
    )
    const run = await runCli([...ws.runArgs, "fix sum"], { env })
    expect(notices(run.stderr).filter((line) => !line.includes("retry"))).toEqual([])
    expect(run.code).toBe(0)
    const id = await latestSession(ws.db, ws.dir)
    const log = await readLog(ws.db, id)
    expect(ofType(log, "model.retry")).toHaveLength(1)

    const { header, lines, text } = await roundTrip(ws, id)
    expect(header).toEqual({
      format: "logbook-session",
      version: 1,
      sessionId: id,
      events: log.length,
      blobs: header.blobs
    })
    const blobs = parseLines(lines.slice(1 + header.events))
    const hashes = blobs.map((b) => b.blob)
    // before and after of the edit, the new file, the command's output, the prompt document, the
    // workspace manifest around the command and the blobs it names
    const changed = ofType(log, "file.changed").map((e) => e.payload)
    const record = ofType(log, "tool.finished").find((e) => e.payload.callId === "call_bash")!.payload.metadata as {
      outputBlob: string
    }
    const prompt = ofType(log, "prompt.recorded")[0]!.payload.blob
    const bytesOf = (hash: string) =>
      Buffer.from(blobs.find((b) => b.blob === hash)!.base64 as string, "base64").toString()
    // the workspace manifests around the command, and the files' blobs they name
    const manifests = ofType(log, "workspace.snapshot").flatMap((e) =>
      e.payload.manifest === undefined ? [] : [e.payload.manifest]
    )
    expect(manifests.length).toBeGreaterThan(0)
    const named = manifests.flatMap((m) =>
      (JSON.parse(bytesOf(m)) as { files: Array<{ blob?: string }> }).files.flatMap((f) =>
        f.blob === undefined ? [] : [f.blob]
      )
    )
    const expected = new Set([
      ...changed.flatMap((c) => [c.beforeHash, c.afterHash].filter((h): h is string => h !== undefined)),
      record.outputBlob,
      prompt,
      ...manifests,
      ...named
    ])
    expect(new Set(hashes)).toEqual(expected)
    expect(header.blobs).toBe(expected.size)
    expect(bytesOf(record.outputBlob)).toBe("one\ntwo\n")
    expect(changed.map((c) => [c.path, c.op])).toEqual([
      ["sum.mjs", "update"],
      ["NOTES.md", "create"]
    ])
    expect(bytesOf(changed[0]!.afterHash!)).toBe("export const sum = (a, b) => a + b\n")
    // the key was in the process's environment and config names its variable: it is nowhere in the export
    expect(text).not.toContain(key)
    const html = await runCli(["export", id, "--db", ws.db, "--format", "html"], { env })
    expect(html.code).toBe(0)
    expect(html.stdout).not.toContain(key)
    expect(html.stdout).toContain("+export const sum = (a, b) =&gt; a + b")
  })

  it("a session that ran a command: its workspace manifest and every blob the manifest names go along, so the imported session re-runs", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    fs.writeFileSync(path.join(ws.dir, "seed.txt"), "seed\n")
    fs.mkdirSync(path.join(ws.dir, "src"))
    fs.writeFileSync(path.join(ws.dir, "src", "a.txt"), "alpha\n")
    server.enqueue(
      Reply.stream({
        toolCalls: [call("call_1", "bash", { command: "cat seed.txt src/a.txt > copy.txt && echo done" })]
      }),
      Reply.text("Copied.")
    )
    const run = await runCli([...ws.runArgs, "copy the seed"])
    expect(run.code, run.stderr).toBe(0)
    const id = await latestSession(ws.db, ws.dir)
    const log = await readLog(ws.db, id)
    const baseline = ofType(log, "workspace.snapshot").find((e) => e.payload.phase === "baseline")!
    const manifest = baseline.payload.manifest!
    expect(manifest).toMatch(/^[0-9a-f]{64}$/)

    const { header, lines, other } = await roundTrip(ws, id)
    const blobs = parseLines(lines.slice(1 + header.events))
    const bytesOf = (hash: string) => Buffer.from(blobs.find((b) => b.blob === hash)!.base64 as string, "base64")
    // the manifest, and the blob of each file it names (which no event names itself)
    expect(blobs.map((b) => b.blob)).toContain(manifest)
    const files = (JSON.parse(bytesOf(manifest).toString()) as { files: Array<{ path: string; blob?: string }> }).files
    expect(files.map((f) => f.path)).toEqual(expect.arrayContaining(["seed.txt", "src/a.txt"]))
    for (const f of files) expect(blobs.map((b) => b.blob)).toContain(f.blob)
    expect(bytesOf(files.find((f) => f.path === "src/a.txt")!.blob!).toString()).toBe("alpha\n")
    // the imported database holds them
    for (const hash of [manifest, ...files.map((f) => f.blob!)]) {
      const shown = await runCli(["blob", hash, "--db", other])
      expect(shown.code, shown.stderr).toBe(0)
    }
    // the imported session's workspace is restored from its snapshot (a re-run may then refuse
    // live tools of an imported session: the restore is what this file is responsible for)
    const scratch = path.join(scratchDir(), "rerun")
    const rerun = await runCli(["rerun", id, "--db", other, "--workspace", scratch, "--format", "json"])
    expect(rerun.stderr + rerun.stdout).not.toMatch(/cannot restore the workspace/)
    expect(fs.readFileSync(path.join(scratch, "seed.txt"), "utf8")).toBe("seed\n")
    expect(fs.readFileSync(path.join(scratch, "src", "a.txt"), "utf8")).toBe("alpha\n")
    if (rerun.code === 0)
      expect(JSON.parse(rerun.stdout)).toMatchObject({ outcome: { _tag: "match" }, source: "snapshot" })
  })

  it("a session interrupted (Ctrl-C) while a command ran", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const shellFile = path.join(ws.dir, "shell.pid")
    janitor.killGroupIn(shellFile)
    server.enqueue(
      Reply.stream({
        text: "Waiting.",
        toolCalls: [call("call_long", "bash", { command: "echo $$ > shell.pid; sleep 300" })]
      })
    )
    const live = spawnCli([...ws.runArgs, "wait"])
    janitor.defer(() => live.child.kill("SIGKILL"))
    await fileLines(shellFile, 1)
    live.child.kill("SIGINT")
    expect((await live.exited).code).toBe(130)
    const id = await latestSession(ws.db, ws.dir)
    const log = await readLog(ws.db, id)
    expect(ofType(log, "turn.interrupted").map((e) => e.payload.reason)).toEqual(["user"])
    expect(ofType(log, "tool.failed")[0]!.payload).toMatchObject({ callId: "call_long", interrupted: true })
    await roundTrip(ws, id)
  })

  it("a compacted session, and one continued after it", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.text("first answer"))
    expect((await runCli([...ws.runArgs, "first"])).code).toBe(0)
    server.enqueue(Reply.text("SUMMARY of everything"))
    expect((await runCli(["compact", "--db", ws.db, "--cwd", ws.dir])).code).toBe(0)
    server.enqueue(Reply.text("second answer"))
    expect((await runCli([...ws.runArgs, "-c", "second"])).code).toBe(0)
    const id = await latestSession(ws.db, ws.dir)
    const log = await readLog(ws.db, id)
    expect(ofType(log, "compaction.done")).toHaveLength(1)
    const { lines } = await roundTrip(ws, id)
    expect(lines.some((line) => line.includes('"type":"compaction.done"'))).toBe(true)
  })
})

describe("logbook import refuses, naming what and where, and writes nothing", () => {
  /** A real session's export, and a fresh database path to import into. */
  const exported = async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.stream({ toolCalls: [call("call_p", "bash", { command: "echo hello" })] }), Reply.text("done"))
    expect((await runCli([...ws.runArgs, "say hello"])).code).toBe(0)
    const id = await latestSession(ws.db, ws.dir)
    const file = await exportTo(ws.db, id)
    return { ws, id, file, lines: fs.readFileSync(file, "utf8").trimEnd().split("\n") }
  }

  it("a session the database already holds, and damaged files", async () => {
    const { file, id, lines, ws } = await exported()
    // into the database it came from: the session exists
    const again = await runCli(["import", file, "--db", ws.db])
    expect(again.code).toBe(2)
    expect(again.stderr).toBe(
      `logbook: cannot import ${file} into ${ws.db}: session ${id} already exists in this database; nothing was imported\n`
    )
    const header = JSON.parse(lines[0]!) as { events: number; blobs: number }
    const blob = JSON.parse(lines[1 + header.events]!) as { blob: string; size: number; base64: string }
    const damaged: ReadonlyArray<readonly [string, ReadonlyArray<string>, RegExp]> = [
      ["a line that is not JSON", [lines[0]!, lines[1]!, "{oops", ...lines.slice(3)], /line 3: not JSON/],
      [
        "a gap in the seqs",
        [lines[0]!, lines[1]!, lines[3]!, lines[2]!, ...lines.slice(4)],
        /line 3: expected event seq 2, found seq 3/
      ],
      [
        "a blob whose bytes do not match its hash",
        [
          ...lines.slice(0, 1 + header.events),
          JSON.stringify({ ...blob, base64: Buffer.from("x".repeat(blob.size)).toString("base64") }),
          ...lines.slice(2 + header.events)
        ],
        new RegExp(`line ${2 + header.events}: the blob ${blob.blob} does not match its bytes`)
      ],
      ["not a session file", ['{"hello":1}'], /line 1: not the header of a logbook session file/]
    ]
    for (const [what, content, message] of damaged) {
      const bad = path.join(scratchDir(), "bad.jsonl")
      fs.writeFileSync(bad, `${content.join("\n")}\n`)
      const db = path.join(scratchDir(), "fresh.db")
      const result = await runCli(["import", bad, "--db", db])
      expect(result.code, what).toBe(2)
      expect(result.stderr, what).toMatch(message)
      expect(result.stderr, what).toMatch(/; nothing was imported\n$/)
      // the file is checked before the database is opened: not even an empty one was created
      expect(fs.existsSync(db), what).toBe(false)
    }
  })

  it("a line over the size limit is refused with a sentence", async () => {
    const bad = path.join(scratchDir(), "big.jsonl")
    // one line of 20 MiB: over the 16 MiB limit of an event line (the header line is limited the same)
    fs.writeFileSync(bad, `{"format":"logbook-session","pad":"${"x".repeat(20 * 1024 * 1024)}"}\n`)
    const db = path.join(scratchDir(), "fresh.db")
    const result = await runCli(["import", bad, "--db", db])
    expect(result.code).toBe(2)
    expect(result.stderr).toBe(
      `logbook: cannot import ${bad}: line 1: the line holds 20 MiB, more than the limit of 16 MiB; nothing was imported\n`
    )
  })
})

describe("logbook import of a deeply nested payload", () => {
  it("is refused naming its line, exit 2, and creates no database", async () => {
    const sid = "0195a0ba-0000-7000-8000-00000000dee1"
    const depth = 100_000
    const file = path.join(scratchDir(), "deep.jsonl")
    fs.writeFileSync(
      file,
      `${[
        JSON.stringify({ format: "logbook-session", version: 1, sessionId: sid, events: 2, blobs: 0 }),
        JSON.stringify({
          id: "e1",
          sessionId: sid,
          seq: 1,
          type: "session.created",
          at: 1,
          parentId: null,
          v: 1,
          payload: { title: "deep" }
        }),
        // a payload its schema takes (an extra field is ignored), nested 100,000 levels deep
        `{"id":"e2","sessionId":"${sid}","seq":2,"type":"user.message","at":2,"parentId":null,"v":1,"payload":{"messageId":"m1","text":"hi","mode":"prompt","extra":${"[".repeat(depth)}${"]".repeat(depth)}}}`
      ].join("\n")}\n`
    )
    const db = path.join(scratchDir(), "fresh.db")
    const result = await runCli(["import", file, "--db", db])
    expect(result.code, result.stderr).toBe(2)
    expect(result.stderr).toBe(
      `logbook: cannot import ${file}: line 3: its JSON nests arrays and objects more than 256 levels deep, more than a session file allows; nothing was imported\n`
    )
    // no database, and no -wal or -shm beside it
    expect(fs.readdirSync(path.dirname(db))).toEqual([])
  })
})

describe("the EXAMPLES of export and import", () => {
  it("work as written, and are in the help", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.text("hello"))
    expect((await runCli([...ws.runArgs, "hi"])).code).toBe(0)
    const bin = scratchDir()
    fs.writeFileSync(path.join(bin, "logbook"), `#!/bin/sh\nexec "${process.execPath}" "${binPath}" "$@"\n`, {
      mode: 0o755
    })
    const env = baseEnv({ PATH: `${bin}:${process.env.PATH}`, LOGBOOK_DB: ws.db })
    for (const name of ["export", "import"]) {
      const help = await runCli([name, "--help"])
      expect(help.stdout).toContain("EXAMPLES")
      for (const [command] of examples[name]!) {
        expect(help.stdout).toContain(command)
        const result = spawnSync("sh", ["-c", command], { cwd: ws.dir, env, encoding: "utf8" })
        expect(result.stderr, command).toBe("")
        expect(result.status, command).toBe(0)
      }
    }
    expect(fs.readFileSync(path.join(ws.dir, "s.html"), "utf8")).toMatch(/^<!doctype html>/)
    // both imports went in: the session file, and its gzipped copy through stdin
    for (const db of ["other.db", "copy.db"]) {
      const list = await runCli(["sessions", "list", "--db", path.join(ws.dir, db), "--format", "json"])
      expect(
        (JSON.parse(list.stdout) as ReadonlyArray<{ id: string }>).map((s) => s.id),
        db
      ).toEqual([await latestSession(ws.db, ws.dir)])
    }
  })
})
