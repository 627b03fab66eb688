/**
 * Every figure `stats`, `sessions show` and `run` print, checked against the events (docs/stats.md).
 * Real runs of the built binary against the scripted model server make sessions with every way a
 * call ends — ok, a tool error, input that is not JSON, an unknown tool, a rejected permission, a
 * timeout, a command that exits non-zero, an interrupt (SIGTERM) — and with retries (one that
 * recovers, one that gives up). The test folds each session's events itself (`fold`, written here,
 * not the store's fold) and compares what each command prints with it.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { Envelope } from "../../src/domain/Events.js"
import type { StatsReport } from "../../src/store/Stats.js"
import { type RunResult, runCli, spawnCli } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import { fileLines, latestSession, makeJanitor, makeWorkspace, readLog, toolCall, type Workspace } from "./support.js"

const janitor = makeJanitor()
afterAll(() => janitor.release())

type Outcome = "ok" | "error" | "refused" | "exit" | "timeout" | "interrupted"

/** What the events say of one session, folded here from the log alone. */
interface Folded {
  /** per assistant message, in order: steps that went through, attempts cut, and the interrupt reason */
  readonly messages: Array<{ steps: number; cut: number; interrupted: string | undefined }>
  readonly calls: Map<string, { tool: string; outcome: Outcome | "open"; exitCode?: number }>
  retries: number
  turns: number
  readonly interrupts: Map<string, number>
  readonly tokens: { input: number; output: number }
}

const fold = (log: ReadonlyArray<Envelope>): Folded => {
  const f: Folded = {
    messages: [],
    calls: new Map(),
    retries: 0,
    turns: 0,
    interrupts: new Map(),
    tokens: { input: 0, output: 0 }
  }
  const invoked = new Set<string>()
  let current: Folded["messages"][number] | undefined
  let turnMessages: Array<Folded["messages"][number]> = []
  for (const e of log) {
    switch (e.type) {
      case "turn.started":
        f.turns += 1
        turnMessages = []
        break
      case "assistant.started":
        current = { steps: 0, cut: 0, interrupted: undefined }
        f.messages.push(current)
        turnMessages.push(current)
        break
      case "step.finished":
        if (e.payload.aborted === true) current!.cut += 1
        else current!.steps += 1
        f.tokens.input += e.payload.usage.input
        f.tokens.output += e.payload.usage.output
        break
      case "model.retry":
        f.retries += 1
        break
      case "turn.interrupted":
        f.interrupts.set(e.payload.reason, (f.interrupts.get(e.payload.reason) ?? 0) + 1)
        for (const m of turnMessages) m.interrupted = e.payload.reason
        break
      case "tool.pending":
        f.calls.set(e.payload.callId, { tool: e.payload.tool, outcome: "open" })
        break
      case "tool.invoked":
        invoked.add(e.payload.callId)
        if (!f.calls.has(e.payload.callId)) f.calls.set(e.payload.callId, { tool: e.payload.tool, outcome: "open" })
        break
      case "tool.finished": {
        const call = f.calls.get(e.payload.callId)!
        const code = (e.payload.metadata as { exitCode?: number } | undefined)?.exitCode
        if (code !== undefined && code !== 0) {
          call.outcome = "exit"
          call.exitCode = code
        } else call.outcome = "ok"
        break
      }
      case "tool.failed": {
        const call = f.calls.get(e.payload.callId)!
        call.outcome =
          e.payload.interrupted === true
            ? "interrupted"
            : e.payload.timedOut === true
              ? "timeout"
              : invoked.has(e.payload.callId)
                ? "error"
                : "refused"
        break
      }
    }
  }
  return f
}

const count = (f: Folded, ...outcomes: ReadonlyArray<Outcome>) =>
  Array.from(f.calls.values()).filter((c) => (outcomes as ReadonlyArray<string>).includes(c.outcome)).length

/** `3 steps`, `0 steps (2 attempts cut)` as run and sessions show print them; `steps` and `cut` back. */
const STEPS = /(\d+) steps?(?: \((\d+) attempts? cut\))?/
const stepsOf = (text: string) => {
  const m = STEPS.exec(text)
  return m === null ? undefined : { steps: Number(m[1]), cut: Number(m[2] ?? 0) }
}

interface Scenario {
  readonly ws: Workspace
  readonly runs: Array<RunResult>
  log: ReadonlyArray<Envelope>
  folded: Folded
}
const scenarios: Record<string, Scenario> = {}

beforeAll(async () => {
  const server = await janitor.server()
  const make = (name: string, options: Parameters<typeof makeWorkspace>[1] = {}) => {
    const scenario: Scenario = { ws: makeWorkspace(server, options), runs: [], log: [], folded: fold([]) }
    scenarios[name] = scenario
    return scenario
  }

  // one step with a call of every kind that ends by itself, then the answer
  {
    const s = make("calls")
    fs.writeFileSync(path.join(s.ws.dir, "here.txt"), "here\n")
    server.enqueue(
      Reply.stream({
        toolCalls: [
          toolCall("c_ok", "read", { path: "here.txt" }),
          toolCall("c_error", "read", { path: "missing.txt" }),
          { id: "c_json", name: "bash", arguments: "{not json" },
          toolCall("c_unknown", "no_such_tool", { a: 1 }),
          toolCall("c_rejected", "write", { path: "/etc/logbook-figures.txt", content: "x" }),
          toolCall("c_exit", "bash", { command: "echo first; echo second; echo broken >&2; exit 3" }),
          toolCall("c_timeout", "bash", { command: "sleep 60", timeoutMs: 1000 })
        ],
        usage: { prompt_tokens: 100, completion_tokens: 10 }
      }),
      Reply.text("Some failed.", { usage: { prompt_tokens: 200, completion_tokens: 20 } })
    )
    s.runs.push(await runCli([...s.ws.runArgs, "call everything"]))
  }

  // a retry that recovers, then a turn whose retries give up
  {
    const s = make("retries", { retry: { initialDelayMs: 1, maxDelayMs: 5, maxAttempts: 3 } })
    server.enqueue(Reply.error(500), Reply.text("Done.", { usage: { prompt_tokens: 50, completion_tokens: 5 } }))
    s.runs.push(await runCli([...s.ws.runArgs, "try"]))
    server.enqueue(Reply.error(500), Reply.error(500), Reply.error(500))
    s.runs.push(await runCli([...s.ws.runArgs, "--continue", "try again"]))
  }

  // stopped by SIGTERM while a command runs: the interrupt is the shutdown's, not the user's
  {
    const s = make("shutdown")
    const pidFile = path.join(s.ws.dir, "shell.pid")
    janitor.killGroupIn(pidFile)
    server.enqueue(
      Reply.stream({
        toolCalls: [toolCall("c_wait", "bash", { command: "echo $$ > shell.pid; sleep 300" })],
        usage: { prompt_tokens: 30, completion_tokens: 3 }
      })
    )
    const live = spawnCli([...s.ws.runArgs, "wait"])
    janitor.defer(() => live.child.kill("SIGKILL"))
    await fileLines(pidFile, 1)
    live.child.kill("SIGTERM")
    const exited = await live.exited
    s.runs.push({ code: exited.code, signal: exited.signal, stdout: live.lines().join("\n"), stderr: live.stderr() })
  }

  for (const s of Object.values(scenarios)) {
    s.log = await readLog(s.ws.db, await latestSession(s.ws.db, s.ws.dir))
    s.folded = fold(s.log)
  }
}, 180_000)

describe("every figure shown agrees with the events", () => {
  it("the sessions exercise every call outcome, retries and an interrupt", () => {
    const all = Object.values(scenarios).flatMap((s) => Array.from(s.folded.calls.values(), (c) => c.outcome))
    expect(new Set(all)).toEqual(new Set(["ok", "error", "refused", "exit", "timeout", "interrupted"]))
    expect(scenarios.calls!.folded.calls.get("c_rejected")!.outcome).toBe("refused")
    expect(scenarios.calls!.folded.calls.get("c_exit")).toMatchObject({ outcome: "exit", exitCode: 3 })
    expect(scenarios.retries!.folded.retries).toBe(3)
    expect(scenarios.shutdown!.folded.interrupts).toEqual(new Map([["shutdown", 1]]))
  })

  it("stats", async () => {
    for (const [name, s] of Object.entries(scenarios)) {
      const result = await runCli(["stats", "--db", s.ws.db, "--format", "json"])
      expect(result.code, name).toBe(0)
      const { summary, tools } = (JSON.parse(result.stdout) as { report: StatsReport }).report
      const f = s.folded
      const steps = f.messages.reduce((n, m) => n + m.steps, 0)
      const cut = f.messages.reduce((n, m) => n + m.cut, 0)
      expect(summary, name).toMatchObject({
        turns: f.turns,
        steps,
        abortedSteps: cut,
        retries: f.retries,
        toolCalls: f.calls.size,
        toolErrors: count(f, "error", "refused", "exit"),
        toolRefused: count(f, "refused"),
        toolExitNonZero: count(f, "exit"),
        toolTimeouts: count(f, "timeout"),
        toolInterrupted: count(f, "interrupted"),
        interrupts: Array.from(f.interrupts.values()).reduce((n, c) => n + c, 0),
        tokens: { input: f.tokens.input, output: f.tokens.output }
      })
      for (const t of tools) {
        const mine = Array.from(f.calls.values()).filter((c) => c.tool === t.tool)
        const of = (...o: ReadonlyArray<Outcome>) =>
          mine.filter((c) => (o as ReadonlyArray<string>).includes(c.outcome)).length
        expect(t, `${name} ${t.tool}`).toMatchObject({
          calls: mine.length,
          ok: of("ok"),
          errors: of("error", "refused", "exit"),
          refused: of("refused"),
          exitNonZero: of("exit"),
          timeouts: of("timeout"),
          interrupted: of("interrupted")
        })
      }
      // the text says the same
      const text = await runCli(["stats", "--db", s.ws.db])
      const failed = count(f, "error", "refused", "exit")
      expect(text.stdout, name).toMatch(
        new RegExp(
          `tool calls\\s+${f.calls.size}\\s+${failed} failed.*, ${count(f, "timeout")} timed out, ${count(f, "interrupted")} interrupted`
        )
      )
      expect(text.stdout, name).toMatch(new RegExp(`steps\\s+${steps}\\s+${cut} attempts? cut`))
    }
  })

  it("sessions show", async () => {
    for (const [name, s] of Object.entries(scenarios)) {
      const id = await latestSession(s.ws.db, s.ws.dir)
      const shown = await runCli(["sessions", "show", id, "--db", s.ws.db])
      expect(shown.code, name).toBe(0)
      const headers = shown.stdout.split("\n").filter((line) => line.startsWith("assistant  "))
      expect(headers.length, name).toBe(s.folded.messages.length)
      headers.forEach((header, i) => {
        const m = s.folded.messages[i]!
        // one step and nothing cut is not said
        expect(stepsOf(header) ?? { steps: 1, cut: 0 }, `${name}: ${header}`).toEqual({ steps: m.steps, cut: m.cut })
        if (m.interrupted === undefined) expect(header, name).not.toMatch(/interrupted/)
        else expect(header, name).toContain(`· interrupted (${m.interrupted}) ·`)
        // the finish reason is not a person
        expect(header, name).not.toMatch(/ · (user|shutdown|crash) · /)
      })
      for (const [callId, call] of s.folded.calls) {
        const line = shown.stdout.split("\n").find((l) => l.includes("▸") && l.endsWith(callId))
        expect(line, `${name} ${callId}`).toBeDefined()
        const expected = {
          ok: /▸ \S+ completed /,
          exit: new RegExp(`▸ \\S+ failed \\(exit ${call.exitCode}\\) `),
          error: /▸ \S+ error /,
          refused: /▸ \S+ error {2}/,
          timeout: /▸ \S+ error \(timed out\)/,
          interrupted: /▸ \S+ error \(interrupted: shutdown\)/,
          open: /never/
        }[call.outcome]
        expect(line, `${name} ${callId}`).toMatch(expected)
      }
    }
  })

  it("run's call lines and summary", () => {
    for (const [name, s] of Object.entries(scenarios)) {
      const lines = s.runs.flatMap((r) => r.stderr.split("\n"))
      const f = s.folded
      // a line per ended call: ✓ only for the calls that went well
      const ended = lines.filter((l) => /^[✓✗] /.test(l))
      expect(ended.filter((l) => l.startsWith("✓ ")).length, name).toBe(count(f, "ok"))
      expect(ended.filter((l) => l.startsWith("✗ ")).length, name).toBe(f.calls.size - count(f, "ok"))
      for (const call of f.calls.values()) {
        if (call.outcome === "exit")
          expect(
            ended.some((l) => l.startsWith("✗ bash") && l.endsWith(`exit ${call.exitCode}`)),
            name
          ).toBe(true)
      }
      // the summary line of each run (interrupted or not): the steps and cut attempts of its turn
      const summaries = lines.filter((l) => l.startsWith("tokens in "))
      const turns = f.messages
      expect(summaries.length, name).toBe(turns.length)
      summaries.forEach((summary, i) => {
        expect(stepsOf(summary), `${name}: ${summary}`).toEqual({ steps: turns[i]!.steps, cut: turns[i]!.cut })
      })
    }
  })

  it("a failed command's output keeps its last lines, without the closing exit code", () => {
    const stderr = scenarios.calls!.runs[0]!.stderr.split("\n")
    const at = stderr.findIndex((l) => l.startsWith("✗ bash echo first"))
    expect(stderr[at]).toMatch(/exit 3$/)
    expect(stderr.slice(at + 1, at + 4)).toEqual(["  │ first", "  │ second", "  │ broken"])
  })
})
