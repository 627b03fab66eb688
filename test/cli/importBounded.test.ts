/**
 * `logbook import` through the built binary reads a session file in bounded memory: a 100 MB file
 * imports with a V8 heap capped at 64 MB (it would not fit if the session were held whole), and its
 * peak RSS stays under the file's size above a `--version` run's. A file damaged at its last line
 * still writes nothing, and leaves no database behind.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { baseEnv, binPath, runCli, scratchDir } from "../support/cli.js"

const sid = "0195a0ba-0000-7000-8000-0000000071e1"

/** A session file of `n` titles of `size` bytes each after its creation: each title replaces the last. */
const writeTitles = (file: string, n: number, size: number, tail = ""): void => {
  const fd = fs.openSync(file, "w")
  const line = (value: unknown) => fs.writeSync(fd, `${JSON.stringify(value)}\n`)
  line({ format: "logbook-session", version: 1, sessionId: sid, events: n + 1, blobs: 0 })
  const id = (i: number) => `0195a0ba-0000-7000-8000-${String(i).padStart(12, "0")}`
  line({
    id: id(0),
    sessionId: sid,
    seq: 1,
    type: "session.created",
    at: 1,
    parentId: null,
    v: 1,
    payload: { title: "t" }
  })
  const pad = "x".repeat(size)
  for (let i = 1; i <= n; i++) {
    line({
      id: id(i),
      sessionId: sid,
      seq: i + 1,
      type: "session.titled",
      at: 1 + i,
      parentId: null,
      v: 1,
      payload: { title: `${i} ${pad}` }
    })
  }
  if (tail !== "") fs.writeSync(fd, tail)
  fs.closeSync(fd)
}

const TIME = "/usr/bin/time"

/** Peak RSS (KB) of `node <binPath> <args>` with a capped heap, and its exit code. */
const peakRss = (
  args: ReadonlyArray<string>
): { readonly kb: number; readonly code: number | null; readonly stderr: string } => {
  const run = spawnSync(TIME, ["-f", "peak %M", process.execPath, "--max-old-space-size=64", binPath, ...args], {
    env: baseEnv(),
    encoding: "utf8"
  })
  const kb = Number(/peak (\d+)/.exec(run.stderr)?.[1])
  return { kb, code: run.status, stderr: run.stderr }
}

describe("logbook import in bounded memory", () => {
  it("imports a 100 MB session file with a 64 MB heap, its peak RSS under the file's size above a bare start", async () => {
    const dir = scratchDir()
    const file = path.join(dir, "big.jsonl")
    writeTitles(file, 10_000, 10_000)
    const size = fs.statSync(file).size
    expect(size).toBeGreaterThan(100_000_000)
    const db = path.join(dir, "imported.db")
    if (fs.existsSync(TIME)) {
      const base = peakRss(["--version"])
      const run = peakRss(["import", file, "--db", db])
      expect(run.code, run.stderr).toBe(0)
      expect((run.kb - base.kb) * 1024).toBeLessThan(size)
    } else {
      const run = await runCli(["import", file, "--db", db], {
        env: { NODE_OPTIONS: "--max-old-space-size=64" },
        timeoutMs: 120_000
      })
      expect(run.code, run.stderr).toBe(0)
    }
    const verify = await runCli(["verify", sid, "--db", db, "--format", "json"], { timeoutMs: 120_000 })
    expect(verify.code, verify.stderr).toBe(0)
    expect(JSON.parse(verify.stdout).sessions[0].events).toBe(10_001)
  }, 180_000)

  it("a file damaged at its last line writes nothing and leaves no database", async () => {
    const dir = scratchDir()
    const file = path.join(dir, "damaged.jsonl")
    writeTitles(file, 2_000, 100, '{"blob":"00","size":0,"base64":""}\n')
    const db = path.join(scratchDir(), "fresh.db")
    const run = await runCli(["import", file, "--db", db])
    expect(run.code).toBe(2)
    expect(run.stderr).toMatch(/^logbook: cannot import .*: line 2003: .*; nothing was imported\n$/)
    expect(fs.readdirSync(path.dirname(db))).toEqual([])
  })
})
