/**
 * Steps through the built binary (issue 13 §2): what one agent step costs beyond its tool, at the
 * start of a session and at step 1,000; what resuming a long session costs against a fresh run;
 * and the peak memory of a 1,000-step session — logbook (`node dist/bin.js run`) and, side by side
 * on the same scripted server and the same script, pi (`@mariozechner/pi-coding-agent`, its
 * `pi -p`), when it is installed (`PI_BENCH_DIR`, default `~/.cache/logbook-bench/pi-<version>`;
 * `npm run bench -- steps` installs it there on first use when the registry can be reached).
 *
 * The script: every step but the last calls `read` on a 12-byte file of its own (`{"path":"notes/7.txt"}`,
 * which both agents' `read` tools take; the same call three times in a row would need approval in
 * logbook) after a few words of text; the last answers and stops. The
 * scripted OpenAI-compatible server (test/support/scriptedServer.ts, real HTTP and SSE on
 * 127.0.0.1) notes when each request arrives: a step's **cycle** is the time between two requests
 * — the client reading the streamed answer, writing its events, running the tool, building and
 * sending the next request. logbook's **overhead** is the cycle minus the tool's own time (from its
 * log: `tool.invoked` to `tool.finished`, whole milliseconds); for pi the tool's time is not known
 * and its cycle is reported (reading a 12-byte file is well under a millisecond in both).
 *
 * - `40 steps`: a fresh session of 40 steps, `rounds` times per agent, alternated; the median cycle
 *   of each run's steps 2–39 (the first request follows the start-up, the last one ends the run).
 * - `1,000 steps`: one session of 1,000 steps per agent; the median cycle of steps 2–41 (the start)
 *   and of steps 960–999 (the end): a step must cost the same at step 1,000 as at step 1.
 * - `resume`: with that session's database (≈ 11 events per step), a one-step answer in it
 *   (`run --session <id>`) against a one-step answer in a fresh database, alternated, spawn to exit.
 * - `peak RSS`: `process.resourceUsage().maxRSS` of the agent's process at exit, read by a module
 *   preloaded with `NODE_OPTIONS=--import` (the same for both), over the 1,000-step session.
 * - with a baseline (`npm run bench -- steps --baseline <git ref>`), logbook built from that ref runs
 *   as a third agent in the same rounds, so a change's before and after are measured side by side
 *   (on a shared machine a step's cost moves by a few ms from one run to the next).
 *
 *   node --import tsx bench/steps.ts [--quick]     this benchmark alone (npm run build first)
 */
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import Database from "better-sqlite3"
import { Reply, type ScriptedServer, startScriptedServer } from "../test/support/scriptedServer.js"
import { median, percentile } from "./util.js"

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), "..")
const logbookBin = path.join(root, "dist", "bin.js")

/** The pi release compared with (issue 13 names it). */
export const PI_VERSION = "0.73.1"
const PI_PACKAGE = "@mariozechner/pi-coding-agent"

export const piDir = (): string =>
  process.env.PI_BENCH_DIR ??
  path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache"), "logbook-bench", `pi-${PI_VERSION}`)

const piCli = (dir: string): string => path.join(dir, "node_modules", ...PI_PACKAGE.split("/"), "dist", "cli.js")

/** pi's CLI, installed into `piDir()` when it is not there yet; `undefined` (with the reason) when it cannot be. */
export const ensurePi = (log: (line: string) => void): { readonly cli?: string; readonly reason?: string } => {
  const dir = piDir()
  const cli = piCli(dir)
  if (fs.existsSync(cli)) return { cli }
  log(`  installing ${PI_PACKAGE}@${PI_VERSION} into ${dir} …`)
  fs.mkdirSync(dir, { recursive: true })
  const result = spawnSync(
    "npm",
    ["install", "--no-audit", "--no-fund", "--prefix", dir, `${PI_PACKAGE}@${PI_VERSION}`],
    { encoding: "utf8", timeout: 600_000 }
  )
  if (result.status === 0 && fs.existsSync(cli)) return { cli }
  return { reason: `could not install ${PI_PACKAGE}@${PI_VERSION}: ${(result.stderr ?? "").trim().slice(-300)}` }
}

/** `before`: logbook built from another git ref (`npm run bench -- steps --baseline <ref>`), side by side */
export type Agent = "logbook" | "before" | "pi"

const NOTE = "hello world\n"

/**
 * The tool a step calls: `read` of a 12-byte note (the benchmark's main figures), `write` of a new
 * small file, or `bash` running `echo` (logbook only: the cost of those tools' steps).
 */
export type StepTool = "read" | "write" | "bash"

/** The arguments of step `n`'s call of `tool`, in two pieces (streamed as two deltas). */
const callArguments = (tool: StepTool, n: number): ReadonlyArray<string> => {
  switch (tool) {
    case "read":
      return ['{"path":', `"notes/${n}.txt"}`]
    case "write":
      return [`{"path":"out/${n}.txt",`, `"content":"hello ${n}\\n"}`]
    case "bash":
      return [`{"command":"echo ${n}",`, '"description":"say the step"}']
  }
}

/** `steps` scripted answers: all but the last call `tool` (default `read`), the last one stops. */
const script = (steps: number, tool: StepTool = "read") =>
  Array.from({ length: steps }, (_, i) =>
    i < steps - 1
      ? Reply.stream({
          text: [`Step ${i + 1}: `, "reading the note."],
          // a file (or a command) of its own each step: the same call three times in a row needs
          // approval (a loop)
          toolCalls: [{ id: `call_${i + 1}`, name: tool, arguments: callArguments(tool, i + 1) }],
          usage: { prompt_tokens: 1_000 + i * 40, completion_tokens: 20 }
        })
      : Reply.stream({
          text: ["Done: ", "the note says hello."],
          usage: { prompt_tokens: 1_000, completion_tokens: 8 }
        })
  )

/**
 * Preloaded into the agent (`NODE_OPTIONS=--import`): writes its peak RSS (KiB) to `BENCH_RSS_FILE`
 * at exit; with `BENCH_COMMITS_FILE` (logbook), also how many SQLite transactions it committed —
 * the `COMMIT` statements better-sqlite3 ran, counted on the package the binary loads (the same
 * file, resolved from this repository, so the same module).
 */
const rssModule = (dir: string): string => {
  const file = path.join(dir, "rss.mjs")
  fs.writeFileSync(
    file,
    [
      'import { writeFileSync } from "node:fs"',
      'import { createRequire } from "node:module"',
      "const out = process.env.BENCH_RSS_FILE",
      "if (out) process.on('exit', () => { try { writeFileSync(out, String(process.resourceUsage().maxRSS)) } catch {} })",
      "const commitsOut = process.env.BENCH_COMMITS_FILE",
      "if (commitsOut) {",
      "  let commits = 0",
      `  const Database = createRequire(${JSON.stringify(path.join(root, "package.json"))})("better-sqlite3")`,
      "  const prepare = Database.prototype.prepare",
      "  Database.prototype.prepare = function (source, ...rest) {",
      "    const statement = prepare.call(this, source, ...rest)",
      // the store's writer prefixes its statements with a comment (`/* logbook writer */`)
      "    if (/^\\s*(\\/\\*[^*]*\\*\\/\\s*)?COMMIT\\b/i.test(source)) {",
      "      const run = statement.run",
      "      statement.run = function (...args) { const result = run.apply(this, args); commits++; return result }",
      "    }",
      "    return statement",
      "  }",
      "  process.on('exit', () => { try { writeFileSync(commitsOut, String(commits)) } catch {} })",
      "}",
      ""
    ].join("\n")
  )
  return file
}

interface Setup {
  readonly dir: string
  readonly server: ScriptedServer
  readonly rss: string
  readonly pi?: string | undefined
  /** the baseline build's `dist/bin.js` */
  readonly before?: string | undefined
}

interface Run {
  /** spawn to exit (ms) */
  readonly wallMs: number
  /** request arrival times (performance.now(), ms) */
  readonly arrivals: ReadonlyArray<number>
  /** peak RSS (bytes) */
  readonly rssBytes: number
  /** logbook: the SQLite transactions it committed */
  readonly commits?: number | undefined
}

/** A workspace with `steps` notes and each agent's config pointed at the scripted server. */
const makeWorkspace = (setup: Setup, name: string, steps: number) => {
  const ws = fs.mkdtempSync(path.join(setup.dir, `${name}-`))
  fs.mkdirSync(path.join(ws, "notes"))
  for (let i = 1; i <= steps; i++) fs.writeFileSync(path.join(ws, "notes", `${i}.txt`), NOTE)
  const home = path.join(ws, ".home")
  fs.mkdirSync(path.join(home, "config", "logbook"), { recursive: true })
  fs.mkdirSync(path.join(home, "pi"), { recursive: true })
  fs.writeFileSync(
    path.join(ws, "logbook.json"),
    JSON.stringify({
      model: "local/scripted",
      maxSteps: 5_000,
      provider: { local: { type: "openai-compatible", baseURL: `${setup.server.url}/v1` } }
    })
  )
  fs.writeFileSync(
    path.join(home, "pi", "models.json"),
    JSON.stringify({
      providers: {
        local: {
          baseUrl: `${setup.server.url}/v1`,
          api: "openai-completions",
          apiKey: "none",
          compat: { supportsDeveloperRole: false, supportsReasoningEffort: false },
          models: [{ id: "scripted", contextWindow: 1_000_000, maxTokens: 1_000 }]
        }
      }
    })
  )
  return { ws, home, db: path.join(ws, ".home", "logbook.db") }
}

type Workspace = ReturnType<typeof makeWorkspace>

/** One run of `agent` in `ws` with `prompt`, against what is queued on the server; checks it answered. */
const runAgent = async (
  setup: Setup,
  agent: Agent,
  ws: Workspace,
  prompt: string,
  options: { readonly session?: string | undefined } = {}
): Promise<Run> => {
  const rssFile = path.join(ws.home, `rss-${Date.now()}-${Math.random()}`)
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "",
    HOME: ws.home,
    XDG_CONFIG_HOME: path.join(ws.home, "config"),
    NODE_OPTIONS: `--import=${pathToFileURL(setup.rss).href}`,
    BENCH_RSS_FILE: rssFile,
    ...(agent !== "pi" ? { BENCH_COMMITS_FILE: `${rssFile}.commits` } : {}),
    NO_COLOR: "1"
  }
  const args =
    agent !== "pi"
      ? [
          agent === "before" ? setup.before! : logbookBin,
          "run",
          "--db",
          ws.db,
          "--cwd",
          ws.ws,
          ...(options.session !== undefined ? ["--session", options.session] : []),
          prompt
        ]
      : [
          setup.pi!,
          "-p",
          "--provider",
          "local",
          "--model",
          "scripted",
          "--tools",
          "read",
          "--no-extensions",
          "--session-dir",
          path.join(ws.home, "pi-sessions"),
          ...(options.session !== undefined ? ["--continue"] : []),
          prompt
        ]
  if (agent === "pi") Object.assign(env, { PI_CODING_AGENT_DIR: path.join(ws.home, "pi"), PI_OFFLINE: "1" })
  const before = setup.server.requests.length
  const start = performance.now()
  const child = spawn(process.execPath, args, { cwd: ws.ws, env, stdio: ["ignore", "pipe", "pipe"] })
  let stdout = ""
  let stderr = ""
  // logbook marks a call that failed or was refused with ✗ on stderr (its status lines go there when
  // stdout is not a terminal)
  let failedCall = false
  // decoded as a stream: a character split between two chunks stays whole
  child.stdout.setEncoding("utf8")
  child.stderr.setEncoding("utf8")
  child.stdout.on("data", (text: string) => {
    stdout += text
  })
  child.stderr.on("data", (text: string) => {
    if (text.includes("✗")) failedCall = true
    stderr = (stderr + text).slice(-4_000)
  })
  const code = await new Promise<number | null>((resolve) => child.once("exit", (c) => resolve(c)))
  const wallMs = performance.now() - start
  // every call must have worked
  if (code !== 0 || !stdout.includes("the note says hello") || (agent !== "pi" && failedCall)) {
    throw new Error(`${agent} exited ${code} without the scripted answer:\n${stdout.slice(-1_000)}\n${stderr}`)
  }
  if (setup.server.pending() !== 0) throw new Error(`${agent} left ${setup.server.pending()} scripted answers unread`)
  const arrivals = setup.server.requests.slice(before).map((r) => r.receivedAt)
  return {
    wallMs,
    arrivals,
    rssBytes: Number(fs.readFileSync(rssFile, "utf8")) * 1024,
    ...(agent !== "pi" ? { commits: Number(fs.readFileSync(`${rssFile}.commits`, "utf8")) } : {})
  }
}

/** The cycles between requests `from`..`to` (0-based request indexes, cycle i = arrival[i+1] − arrival[i]). */
const cycles = (arrivals: ReadonlyArray<number>, from: number, to: number): Array<number> => {
  const out: Array<number> = []
  for (let i = from; i < to && i + 1 < arrivals.length; i++) out.push(arrivals[i + 1]! - arrivals[i]!)
  return out
}

/** logbook's tool time per step, from its log (tool.invoked → tool.finished of each call, in order). */
const logbookToolTimes = (db: string): { readonly times: ReadonlyArray<number>; readonly events: number } => {
  const conn = new Database(db, { readonly: true })
  try {
    const rows = conn
      .prepare(
        "SELECT type, at, payload FROM events WHERE type IN ('tool.invoked', 'tool.finished') ORDER BY session_id, seq"
      )
      .all() as ReadonlyArray<{ type: string; at: number; payload: string }>
    const started = new Map<string, number>()
    const times: Array<number> = []
    for (const row of rows) {
      const callId = (JSON.parse(row.payload) as { callId: string }).callId
      if (row.type === "tool.invoked") started.set(callId, row.at)
      else times.push(row.at - (started.get(callId) ?? row.at))
    }
    const events = (conn.prepare("SELECT count(*) AS n FROM events").get() as { n: number }).n
    return { times, events }
  } finally {
    conn.close()
  }
}

const latestSessionId = (db: string): string => {
  const conn = new Database(db, { readonly: true })
  try {
    return (conn.prepare("SELECT id FROM sessions ORDER BY updated_at DESC LIMIT 1").get() as { id: string }).id
  } finally {
    conn.close()
  }
}

export interface Window {
  readonly medianMs: number
  readonly p90Ms: number
}

const windowOf = (xs: ReadonlyArray<number>): Window => ({ medianMs: median(xs), p90Ms: percentile(xs, 90) })

export interface AgentSteps {
  readonly agent: Agent
  /** 40-step sessions: the median cycle of each run, then their median */
  readonly short: Window
  /** logbook (and its baseline) only: the same minus the tool's time */
  readonly shortOverhead?: Window | undefined
  /** the 1,000-step session: steps 2–41 and 960–999 */
  readonly longStart: Window
  readonly longEnd: Window
  readonly longStartOverhead?: Window | undefined
  readonly longEndOverhead?: Window | undefined
  readonly longWallMs: number
  readonly longEvents?: number | undefined
  /** logbook only: the SQLite transactions of the 1,000-step run (≈ 3 a step: docs/event-log.md) */
  readonly longCommits?: number | undefined
  readonly peakRssBytes: number
  /** resume (one step in the long session) and a fresh one-step run, spawn to exit, medians */
  readonly resumeMs: number
  readonly freshMs: number
  /** logbook (and its baseline) only: the cycle of steps calling `write` and `bash`, short sessions */
  readonly byTool?: { readonly write: Window; readonly bash: Window } | undefined
}

export type StepsResult =
  | {
      readonly _tag: "Done"
      readonly shortSteps: number
      readonly longSteps: number
      readonly rounds: number
      readonly agents: ReadonlyArray<AgentSteps>
      readonly piSkipped?: string | undefined
      /** the git ref and commit of the `before` agent, when there is one */
      readonly baseline?: { readonly ref: string; readonly commit: string } | undefined
    }
  | { readonly _tag: "Skipped"; readonly reason: string }

export const benchSteps = async (
  dir: string,
  options: {
    readonly shortSteps?: number
    readonly longSteps?: number
    readonly rounds?: number
    /** steps of the `write` and `bash` sessions (default: `shortSteps`) */
    readonly toolSteps?: number
    readonly withPi?: boolean
    /** logbook built from another git ref (`buildBaseline`): run side by side as the `before` agent */
    readonly baseline?: { readonly ref: string; readonly commit: string; readonly bin: string } | undefined
    readonly log?: (line: string) => void
  } = {}
): Promise<StepsResult> => {
  const log = options.log ?? (() => {})
  if (!fs.existsSync(logbookBin)) return { _tag: "Skipped", reason: "dist/bin.js is missing: npm run build first" }
  const shortSteps = options.shortSteps ?? 40
  const longSteps = options.longSteps ?? 1_000
  const rounds = options.rounds ?? 5
  const pi = options.withPi === false ? { reason: "not asked for" } : ensurePi(log)
  if (pi.reason !== undefined) log(`  pi: ${pi.reason}`)
  const server = await startScriptedServer({ recordBodies: false })
  const setup: Setup = { dir, server, rss: rssModule(dir), pi: pi.cli, before: options.baseline?.bin }
  const agents: ReadonlyArray<Agent> = [
    "logbook",
    ...(options.baseline !== undefined ? (["before"] as const) : []),
    ...(pi.cli !== undefined ? (["pi"] as const) : [])
  ]
  const edge = Math.min(40, Math.floor(longSteps / 3))
  try {
    // warm-up: one short run each (file caches, the bundle compiled once)
    for (const agent of agents) {
      server.enqueue(...script(3))
      await runAgent(setup, agent, makeWorkspace(setup, `warm-${agent}`, 3), "go")
    }
    const short = new Map<Agent, Array<number>>(agents.map((a) => [a, []]))
    const shortOverhead = new Map<Agent, Array<number>>(agents.map((a) => [a, []]))
    for (let r = 0; r < rounds; r++) {
      for (let i = 0; i < agents.length; i++) {
        const agent = agents[(i + r) % agents.length]!
        const ws = makeWorkspace(setup, `short-${agent}-${r}`, shortSteps)
        server.enqueue(...script(shortSteps))
        const run = await runAgent(setup, agent, ws, "go")
        const c = cycles(run.arrivals, 1, shortSteps - 1)
        short.get(agent)!.push(median(c))
        if (agent !== "pi") {
          const tools = logbookToolTimes(ws.db).times
          shortOverhead.get(agent)!.push(median(c.map((x, k) => x - (tools[k + 1] ?? 0))))
        }
        log(`  ${shortSteps} steps, round ${r + 1}, ${agent}: median cycle ${median(c).toFixed(2)} ms`)
      }
    }
    // the steps of the other tools, logbook's builds only (pi's bash is not sandboxed: not the same work)
    const toolSteps = options.toolSteps ?? shortSteps
    const kinds = ["write", "bash"] as const
    const logbooks = agents.filter((a) => a !== "pi")
    const byTool = new Map<string, Array<number>>()
    for (let r = 0; r < rounds; r++) {
      for (const tool of kinds) {
        for (let i = 0; i < logbooks.length; i++) {
          const agent = logbooks[(i + r) % logbooks.length]!
          const ws = makeWorkspace(setup, `${tool}-${agent}-${r}`, 0)
          server.enqueue(...script(toolSteps, tool))
          const run = await runAgent(setup, agent, ws, "go")
          const c = median(cycles(run.arrivals, 1, toolSteps - 1))
          byTool.set(`${agent}/${tool}`, [...(byTool.get(`${agent}/${tool}`) ?? []), c])
          log(`  ${toolSteps} ${tool} steps, round ${r + 1}, ${agent}: median cycle ${c.toFixed(2)} ms`)
        }
      }
    }
    const results: Array<AgentSteps> = []
    for (const agent of agents) {
      const ws = makeWorkspace(setup, `long-${agent}`, longSteps)
      server.enqueue(...script(longSteps))
      const long = await runAgent(setup, agent, ws, "go")
      const start = cycles(long.arrivals, 1, 1 + edge)
      const end = cycles(long.arrivals, longSteps - 1 - edge, longSteps - 1)
      let extra: Partial<AgentSteps> = {}
      if (agent !== "pi") {
        const { times, events } = logbookToolTimes(ws.db)
        extra = {
          longStartOverhead: windowOf(start.map((x, k) => x - (times[k + 1] ?? 0))),
          longEndOverhead: windowOf(end.map((x, k) => x - (times[longSteps - 1 - edge + k] ?? 0))),
          longEvents: events,
          longCommits: long.commits,
          shortOverhead: windowOf(shortOverhead.get(agent)!)
        }
      }
      log(
        `  ${longSteps} steps, ${agent}: ${(long.wallMs / 1000).toFixed(1)} s; cycle at the start ` +
          `${median(start).toFixed(2)} ms, at the end ${median(end).toFixed(2)} ms; peak RSS ` +
          `${(long.rssBytes / 2 ** 20).toFixed(0)} MiB`
      )
      // resume: one step in the long session against one in a fresh workspace, alternated
      const session = agent !== "pi" ? latestSessionId(ws.db) : "continue"
      const resume: Array<number> = []
      const fresh: Array<number> = []
      for (let r = 0; r < rounds; r++) {
        for (const side of r % 2 === 0 ? (["resume", "fresh"] as const) : (["fresh", "resume"] as const)) {
          server.enqueue(...script(1))
          if (side === "resume") resume.push((await runAgent(setup, agent, ws, "again", { session })).wallMs)
          else fresh.push((await runAgent(setup, agent, makeWorkspace(setup, `fresh-${agent}-${r}`, 1), "go")).wallMs)
        }
      }
      log(`  resume ${agent}: ${median(resume).toFixed(0)} ms, fresh ${median(fresh).toFixed(0)} ms`)
      results.push({
        agent,
        short: windowOf(short.get(agent)!),
        longStart: windowOf(start),
        longEnd: windowOf(end),
        longWallMs: long.wallMs,
        peakRssBytes: long.rssBytes,
        resumeMs: median(resume),
        freshMs: median(fresh),
        ...extra,
        ...(agent !== "pi"
          ? {
              byTool: {
                write: windowOf(byTool.get(`${agent}/write`)!),
                bash: windowOf(byTool.get(`${agent}/bash`)!)
              }
            }
          : {})
      })
    }
    return {
      _tag: "Done",
      shortSteps,
      longSteps,
      rounds,
      agents: results,
      ...(pi.reason !== undefined ? { piSkipped: pi.reason } : {}),
      ...(options.baseline !== undefined
        ? { baseline: { ref: options.baseline.ref, commit: options.baseline.commit } }
        : {})
    }
  } finally {
    await server.close()
  }
}

// `node --import tsx bench/steps.ts [--quick] [--no-pi]`: this benchmark alone
if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === path.resolve(import.meta.filename ?? "")) {
  const quick = process.argv.includes("--quick")
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "logbook-bench-steps-"))
  try {
    const r = await benchSteps(dir, {
      ...(quick ? { shortSteps: 10, longSteps: 60, rounds: 2 } : {}),
      withPi: !process.argv.includes("--no-pi"),
      log: console.log
    })
    console.log(JSON.stringify(r, null, 2))
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
