/**
 * The commands that read a whole session — `import`, `verify`, `audit`, `export`, `sessions show` —
 * run through the built binary on a long session with a V8 heap capped well below what holding the
 * session (its events, or its folded content) would need: each finishes and says what it should.
 *
 * The session is grown from a real one (`logbook run` against the scripted model server: model
 * steps, a `read`, a `bash` with its workspace snapshots and output blob), its turn copied until the
 * session has `LOGBOOK_SCALE_EVENTS` events (default 200,000; `npm run test:scale` runs a million).
 */
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { latestSession, makeJanitor, makeWorkspace } from "../integration/support.js"
import { readTemplate, writeBigSession } from "../support/bigSession.js"
import { baseEnv, binPath, runCli, scratchDir } from "../support/cli.js"
import { Reply, splitInto } from "../support/scriptedServer.js"

const EVENTS = Number(process.env.LOGBOOK_SCALE_EVENTS ?? 200_000)
/** The heap a command gets, in MB: far less than the session's events (about 330 bytes each as JSON). */
const HEAP_MB = 64
/**
 * The heap of `import` and `sessions show`, which keep a skeleton of each settled message (a few
 * hundred bytes): still far less than the session's folded content.
 */
const SKELETON_HEAP_MB = EVENTS > 200_000 ? 128 : HEAP_MB
const TIMEOUT = Math.max(300_000, EVENTS * 2)

const janitor = makeJanitor()
afterAll(() => janitor.release())

interface Capped {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/**
 * `node --max-old-space-size=<heapMb> dist/bin.js …args` (not awaited synchronously: the test worker
 * stays responsive), its stdout written to `stdoutFile` when given.
 */
const capped = (args: ReadonlyArray<string>, heapMb: number, stdoutFile?: string): Promise<Capped> =>
  new Promise((resolve, reject) => {
    const fd = stdoutFile === undefined ? undefined : fs.openSync(stdoutFile, "w")
    const child = spawn(process.execPath, [`--max-old-space-size=${heapMb}`, binPath, ...args], {
      env: baseEnv(),
      stdio: ["ignore", fd ?? "pipe", "pipe"]
    })
    const out: Array<Buffer> = []
    const err: Array<Buffer> = []
    child.stdout?.on("data", (chunk: Buffer) => out.push(chunk))
    child.stderr?.on("data", (chunk: Buffer) => err.push(chunk))
    child.on("error", reject)
    child.on("close", (code) => {
      if (fd !== undefined) fs.closeSync(fd)
      resolve({ code, stdout: Buffer.concat(out).toString("utf8"), stderr: Buffer.concat(err).toString("utf8") })
    })
  })

let dir: string
let file: string
let db: string
let sessionId: string
/** how many times the template's turn was written (the last copy may be cut short) */
let copies: number
let turnEvents: number

beforeAll(async () => {
  const server = await janitor.server()
  const ws = makeWorkspace(server)
  fs.writeFileSync(path.join(ws.dir, "a.txt"), "hello\n".repeat(50))
  server.enqueue(
    Reply.stream({
      text: splitInto("Let me look at the file first, then list the directory.", 8),
      toolCalls: [{ id: "call_read", name: "read", arguments: JSON.stringify({ path: "a.txt" }) }]
    }),
    Reply.stream({
      toolCalls: [{ id: "call_ls", name: "bash", arguments: JSON.stringify({ command: "ls; echo done" }) }]
    }),
    Reply.stream({ text: splitInto("All good: the file says hello fifty times and the listing shows it.", 8) })
  )
  const run = await runCli([...ws.runArgs, "--yes", "look at a.txt"])
  expect(run.code, run.stderr).toBe(0)
  const id = await latestSession(ws.db, ws.dir)
  dir = scratchDir()
  const template = path.join(dir, "template.jsonl")
  const exported = await runCli(["export", id, "--db", ws.db, "-o", template])
  expect(exported.code, exported.stderr).toBe(0)
  const turn = readTemplate(template)
  turnEvents = turn.turn.length
  file = path.join(dir, "big.jsonl")
  const written = writeBigSession(turn, file, EVENTS)
  // the file is far more than the heap the commands get
  expect(written.bytes).toBeGreaterThan(EVENTS * 250)
  copies = written.copies
  sessionId = turn.sessionId
  db = path.join(dir, "big.db")
}, TIMEOUT)

describe(`a session of ${EVENTS.toLocaleString("en-US")} events, each command with a capped heap`, () => {
  it(
    `import reads it into a new database (${SKELETON_HEAP_MB} MB)`,
    async () => {
      const run = await capped(["import", file, "--db", db], SKELETON_HEAP_MB)
      expect(run.stderr).toBe("")
      expect(run.code).toBe(0)
      expect(run.stdout).toContain(`${EVENTS.toLocaleString("en-US")} events`)
    },
    TIMEOUT
  )

  it(
    `verify checks every row (${HEAP_MB} MB)`,
    async () => {
      const run = await capped(["verify", sessionId, "--db", db, "--format", "json"], HEAP_MB)
      expect(run.stderr).toBe("")
      expect(run.code).toBe(0)
      const result = JSON.parse(run.stdout) as { ok: boolean; sessions: Array<{ events: number; problems: [] }> }
      expect(result.ok).toBe(true)
      expect(result.sessions[0]!.events).toBe(EVENTS)
    },
    TIMEOUT
  )

  it(
    `audit lists every command (${HEAP_MB} MB)`,
    async () => {
      const run = await capped(["audit", sessionId, "--db", db, "--format", "json"], HEAP_MB)
      expect(run.stderr).toBe("")
      expect(run.code).toBe(0)
      const audits = JSON.parse(run.stdout) as { sessions: Array<{ entries: Array<{ kind: string; seq: number }> }> }
      const commands = audits.sessions[0]!.entries.filter((entry) => entry.kind === "command")
      // every copy of the turn whose bash call was written (the last copy may be cut before it)
      expect(commands.length).toBeGreaterThanOrEqual(copies - 1)
      expect(commands.length).toBeLessThanOrEqual(copies)
      expect(commands.at(-1)!.seq).toBeGreaterThan(EVENTS - turnEvents)
    },
    TIMEOUT
  )

  it(
    `export writes the file it was imported from, byte for byte (${HEAP_MB} MB)`,
    async () => {
      const out = path.join(dir, "exported.jsonl")
      const run = await capped(["export", sessionId, "--db", db, "-o", out], HEAP_MB)
      expect(run.stderr).toBe("")
      expect(run.code).toBe(0)
      expect(fs.statSync(out).size).toBe(fs.statSync(file).size)
      expect(spawnSync("cmp", [out, file]).status).toBe(0)
    },
    TIMEOUT
  )

  it(
    `sessions show prints the whole conversation (${SKELETON_HEAP_MB} MB)`,
    async () => {
      const out = path.join(dir, "show.txt")
      const run = await capped(["sessions", "show", sessionId, "--db", db], SKELETON_HEAP_MB, out)
      expect(run.stderr).toBe("")
      expect(run.code).toBe(0)
      const text = fs.readFileSync(out, "utf8")
      expect(text).toContain(`events   ${EVENTS}`)
      // a user message per copy of the turn, the last copy's included
      expect(text.split("\nuser  ").length - 1).toBe(copies)
      expect(text.split("▸ bash").length - 1).toBeGreaterThanOrEqual(copies - 1)
    },
    TIMEOUT
  )
})
