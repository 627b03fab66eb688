/**
 * `logbook stats` through the built binary, on sessions real runs wrote against the scripted model
 * server into one database: a finished one, a retried one (HTTP 500), one with a failing and a
 * timed-out tool, one interrupted (SIGINT), one crashed (SIGKILL, then swept by --continue). The
 * figures are asserted exactly (except times, which depend on the machine: only their counts).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { StatsReport } from "../../src/store/Stats.js"
import { runCli, scratchDb, scratchDir, spawnCli } from "../support/cli.js"
import { downgradeToSchema2, schemaOf } from "../support/oldSchema.js"
import { Reply, type ScriptedServer } from "../support/scriptedServer.js"
import { fastRetry, fileLines, latestSession, makeJanitor, ofType, readLog, until } from "./support.js"

const janitor = makeJanitor()
afterAll(() => janitor.release())

const db = scratchDb()
const dirs: Record<string, string> = {}

/** A workspace of its own (its own `--cwd`), writing to the shared database. */
const workspace = (server: ScriptedServer, name: string): ReadonlyArray<string> => {
  const dir = scratchDir()
  dirs[name] = dir
  fs.writeFileSync(
    path.join(dir, "logbook.json"),
    JSON.stringify({
      model: "local/scripted",
      retry: fastRetry,
      provider: {
        local: {
          type: "openai-compatible",
          baseURL: `${server.url}/v1`,
          models: { scripted: { price: { input: 1, output: 2 } } }
        }
      }
    })
  )
  return ["run", "--db", db, "--cwd", dir]
}

const usage = (prompt_tokens: number, completion_tokens: number) => ({ prompt_tokens, completion_tokens })

const statsJson = async (...args: ReadonlyArray<string>): Promise<StatsReport> => {
  const result = await runCli(["stats", "--db", db, "--format", "json", ...args])
  expect(result.stderr).toBe("")
  expect(result.code).toBe(0)
  const parsed = JSON.parse(result.stdout) as { database: string; report: StatsReport }
  expect(parsed.database).toBe(db)
  return parsed.report
}

beforeAll(async () => {
  const server = await janitor.server()

  // finished
  server.enqueue(Reply.text("Done.", { usage: usage(100, 10) }))
  expect((await runCli([...workspace(server, "finished"), "say done"])).code).toBe(0)

  // retried: a 500, then the answer
  server.enqueue(Reply.error(500, { message: "upstream broke" }), Reply.text("Done now.", { usage: usage(200, 20) }))
  expect((await runCli([...workspace(server, "retried"), "try again"])).code).toBe(0)

  // a failing tool (no such file) and a timed-out one
  server.enqueue(
    Reply.stream({
      toolCalls: [
        { id: "call_missing", name: "read", arguments: JSON.stringify({ path: "missing.txt" }) },
        { id: "call_slow", name: "bash", arguments: JSON.stringify({ command: "sleep 60", timeoutMs: 1000 }) }
      ],
      usage: usage(300, 30)
    }),
    Reply.text("Both failed.", { usage: usage(400, 40) })
  )
  expect((await runCli([...workspace(server, "tools"), "read and wait"])).code).toBe(0)

  // interrupted by the user (SIGINT) while a command runs
  {
    const args = workspace(server, "interrupted")
    const shellFile = path.join(dirs.interrupted!, "shell.pid")
    janitor.killGroupIn(shellFile)
    server.enqueue(
      Reply.stream({
        toolCalls: [
          { id: "call_wait", name: "bash", arguments: JSON.stringify({ command: "echo $$ > shell.pid; sleep 300" }) }
        ],
        usage: usage(500, 50)
      })
    )
    const live = spawnCli([...args, "wait"])
    janitor.defer(() => live.child.kill("SIGKILL"))
    await fileLines(shellFile, 1)
    live.child.kill("SIGINT")
    expect((await live.exited).code).toBe(130)
  }

  // crashed (SIGKILL while a command runs), then swept by the next run, which finishes
  {
    const args = workspace(server, "crashed")
    const shellFile = path.join(dirs.crashed!, "shell.pid")
    janitor.killGroupIn(shellFile)
    server.enqueue(
      Reply.stream({
        toolCalls: [
          { id: "call_sleep", name: "bash", arguments: JSON.stringify({ command: "echo $$ > shell.pid; sleep 300" }) }
        ],
        usage: usage(600, 60)
      })
    )
    const live = spawnCli([...args, "wait"])
    janitor.defer(() => live.child.kill("SIGKILL"))
    await fileLines(shellFile, 1)
    const id = await latestSession(db, dirs.crashed!)
    await until("call_sleep's group recorded", async () =>
      ofType(await readLog(db, id), "tool.process").length > 0 ? true : undefined
    )
    live.child.kill("SIGKILL")
    expect((await live.exited).signal).toBe("SIGKILL")
    server.enqueue(Reply.text("It crashed.", { usage: usage(700, 70) }))
    expect((await runCli([...args, "--continue", "what happened?"])).code).toBe(0)
  }
}, 120_000)

describe("logbook stats", () => {
  it("counts what the runs did, exactly", async () => {
    const report = await statsJson()
    expect(report.by).toBeNull()
    const { cost, ttft, turnDuration, ...rest } = report.summary
    expect(rest).toEqual({
      sessions: 5,
      // one each, and the crashed session's second (the run that swept it)
      turns: 6,
      // 1 + 1 + 2 + 1 + 2: the attempt the 500 cut is not a step, but an aborted attempt
      steps: 7,
      abortedSteps: 1,
      retries: 1,
      // per model request: 7 steps and 1 cut attempt
      retryRate: 1 / 8,
      toolCalls: 4,
      toolErrors: 1,
      toolRefused: 0,
      toolExitNonZero: 0,
      toolTimeouts: 1,
      toolInterrupted: 2,
      interrupts: 2,
      crashes: 1,
      tokens: { input: 2800, output: 280, reasoning: 0, cacheRead: 0, cacheWrite: 0 },
      costKnown: true
    })
    // $1 per million input tokens, $2 per million output tokens
    expect(cost).toBeCloseTo((2800 * 1 + 280 * 2) / 1e6, 12)
    // every step but the one the 500 cut sent text or a tool call
    expect(ttft.count).toBe(7)
    expect(ttft.avgMs).toBeGreaterThanOrEqual(0)
    // every turn but the crashed one (its end is when the crash was found)
    expect(turnDuration.count).toBe(5)
    expect(turnDuration.maxMs!).toBeGreaterThanOrEqual(1000) // the timed-out command alone took a second

    expect(report.retryReasons).toHaveLength(1)
    expect(report.retryReasons[0]).toMatchObject({ status: 500, count: 1 })
    expect(report.interrupts).toEqual([
      { reason: "crash", count: 1 },
      { reason: "user", count: 1 }
    ])
    expect(
      report.tools.map(({ duration, ...t }) => {
        expect(duration.count).toBe(t.calls - t.open)
        return t
      })
    ).toEqual([
      { tool: "bash", calls: 3, ok: 0, errors: 0, refused: 0, exitNonZero: 0, timeouts: 1, interrupted: 2, open: 0 },
      { tool: "read", calls: 1, ok: 0, errors: 1, refused: 0, exitNonZero: 0, timeouts: 0, interrupted: 0, open: 0 }
    ])
    expect(report.errors.map((e) => [e.tool, e.count])).toEqual([
      ["bash", 1],
      ["read", 1]
    ])
    expect(report.errors[1]!.error).toMatch(/missing\.txt/)

    // the figures agree with the logs themselves
    let steps = 0
    let cut = 0
    let retries = 0
    for (const name of Object.keys(dirs)) {
      const log = await readLog(db, await latestSession(db, dirs[name]!))
      for (const step of ofType(log, "step.finished")) {
        if (step.payload.aborted === true) cut += 1
        else steps += 1
      }
      retries += ofType(log, "model.retry").length
    }
    expect([steps, cut, retries]).toEqual([7, 1, 1])
  })

  it("filters by workspace, time and model, and groups by model, day and prompt version", async () => {
    const interrupted = await statsJson("--cwd", dirs.interrupted!)
    expect(interrupted.filter.cwd).toBe(dirs.interrupted)
    expect(interrupted.summary).toMatchObject({ sessions: 1, turns: 1, interrupts: 1, crashes: 0, toolInterrupted: 1 })
    const future = await statsJson("--since", "2999-01-01")
    expect(future.summary).toMatchObject({ sessions: 0, turns: 0, steps: 0, toolCalls: 0, retryRate: null })
    const recent = await statsJson("--since", "1d")
    expect(recent.summary.steps).toBe(7)
    expect((await statsJson("--model", "other/model")).summary.steps).toBe(0)
    expect((await statsJson("-m", "local/scripted")).summary.steps).toBe(7)

    const byModel = await statsJson("--by", "model")
    expect(byModel.groups.map((g) => [g.key, g.figures.sessions, g.figures.steps, g.figures.toolCalls])).toEqual([
      ["local/scripted", 5, 7, 4]
    ])
    const byDay = await statsJson("--by", "day")
    expect(byDay.groups.reduce((n, g) => n + g.figures.turns, 0)).toBe(6)
    expect(byDay.groups.every((g) => /^\d{4}-\d{2}-\d{2}$/.test(g.key ?? ""))).toBe(true)
    const byPrompt = await statsJson("--by", "prompt")
    // every attempt recorded the version of the prompt it sent; the prompt names the workspace, so
    // each of the five has its own
    expect(byPrompt.groups.every((g) => g.key !== null && g.figures.sessions === 1)).toBe(true)
    expect(byPrompt.groups.map((g) => g.figures.steps).sort()).toEqual([1, 1, 1, 2, 2])
  })

  it("prints a summary and tables that fit 80 columns", async () => {
    const result = await runCli(["stats", "--db", db])
    expect(result.code).toBe(0)
    const lines = result.stdout.trimEnd().split("\n")
    expect(lines.every((line) => Array.from(line).length <= 80)).toBe(true)
    expect(lines).toContain("  sessions            5")
    expect(lines).toContain("  turns               6  2 interrupts, 1 crash recovered")
    expect(lines).toContain("  steps               7  1 attempt cut (retried or interrupted)")
    expect(lines).toContain("  retries             1  12.5% of model requests")
    expect(lines).toContain("  tool calls          4  1 failed, 1 timed out, 2 interrupted")
    expect(lines).toContain("  tokens in       2,800  cache read 0, write 0")
    expect(lines).toContain("TOOLS")
    expect(lines.find((line) => /^\s+3\s+0\s+0\s+0\s+0\s+1\s+2\s.*bash$/.test(line))).toBeDefined()
    expect(lines).toContain("INTERRUPTS")

    const byTool = await runCli(["stats", "--db", db, "--by", "tool"])
    expect(byTool.code).toBe(0)
    expect(byTool.stdout).toContain("TOOL ERRORS")
    expect(byTool.stdout).not.toContain("sessions ")
    const byModel = await runCli(["stats", "--db", db, "--by", "model"])
    const modelLines = byModel.stdout.trimEnd().split("\n")
    expect(modelLines.at(-2)).toMatch(/^TURNS\s+STEPS\s+RETRY\s+TOOLS\s+FAIL\s+INTR\s+TOKENS\s+COST\s+TTFT\s+MODEL$/)
    expect(modelLines.at(-1)).toMatch(/^\s+6\s+7\s+12\.5%\s+4\s+2\s+2\s+3,080\s+\$0\.0034\s+\S+\s+local\/scripted$/)
  })

  it("refuses a --since it cannot read, and a missing database, with exit 2", async () => {
    const bad = await runCli(["stats", "--db", db, "--since", "last tuesday"])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toMatch(/^logbook: --since: "last tuesday" is not a time/)
    const missing = await runCli(["stats", "--db", path.join(scratchDir(), "none.db")])
    expect(missing.code).toBe(2)
    expect(missing.stderr).toMatch(/no logbook database at/)
    const noDir = await runCli(["stats", "--db", db, "--cwd", path.join(scratchDir(), "nowhere")])
    expect(noDir.code).toBe(2)
  })

  it("gives the same figures for a database of the previous schema (backfilled on a private copy)", async () => {
    const before = await statsJson("--by", "day")
    const copy = path.join(scratchDir(), "old.db")
    fs.copyFileSync(db, copy)
    for (const suffix of ["-wal", "-shm"]) if (fs.existsSync(db + suffix)) fs.copyFileSync(db + suffix, copy + suffix)
    downgradeToSchema2(copy)
    expect(schemaOf(copy)).toBe(2)
    const result = await runCli(["stats", "--db", copy, "--by", "day", "--format", "json"])
    expect(result.code).toBe(0)
    expect((JSON.parse(result.stdout) as { report: StatsReport }).report).toEqual(before)
    // read-only: the file itself was not upgraded
    expect(schemaOf(copy)).toBe(2)
  })
})
