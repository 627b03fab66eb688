/**
 * Start-up: how long the commands a user runs most take from spawn to exit, over a bare
 * `node -e 0`, all spawned round-robin in one run (the order rotates each round), so the ratios are
 * what the CLI adds to a node start on this machine. Medians and p90s.
 *
 * With a baseline (`npm run bench -- startup --baseline main`), the same commands of a second
 * build, made from that git ref in a temporary directory (`git archive` + this checkout's
 * node_modules + that ref's own scripts/build.mjs), run in the same rounds: before and after a
 * change, side by side.
 *
 * Time to the first frame (`timeToFirstFrame`): a command in a tmux terminal of its own, from the
 * spawn until a marker is on the screen (polling `capture-pane`): the interactive screen, and
 * `logbook --version` as a stand-in, over node printing a line. See `firstFrameCases`.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"
import { EventStore } from "../src/store/EventStore.js"
import { median, now, percentile } from "./util.js"

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), "..")
export const BIN = path.join(root, "dist", "bin.js")

/** One command to time: node's arguments (the binary's path first for logbook). */
export interface StartupCase {
  readonly name: string
  readonly args: ReadonlyArray<string>
  /** what its stdout must contain (a wrong result fails the run) */
  readonly expect: string
}

export interface Timing {
  readonly medianMs: number
  readonly p90Ms: number
}

export interface StartupRow {
  readonly name: string
  readonly after: Timing & { readonly ratio: number }
  /** with a baseline: the same command of the baseline build */
  readonly before?: (Timing & { readonly ratio: number }) | undefined
}

export interface FirstFrameRow {
  readonly name: string
  readonly timing: Timing
  /** over the first case (node printing a line, in the same kind of terminal) */
  readonly ratio: number
  /** side by side with another case of the same run (`FirstFrameCase.over`): its name, this median over its */
  readonly over?: { readonly name: string; readonly ratio: number; readonly goal: number } | undefined
  /** with a baseline: the same case of the baseline build (not for the first case) */
  readonly before?: (Timing & { readonly ratio: number }) | undefined
}

export interface StartupResult {
  readonly runs: number
  readonly node: Timing
  readonly rows: ReadonlyArray<StartupRow>
  /** the baseline's git ref and commit, when there is one */
  readonly baseline?: { readonly ref: string; readonly commit: string; readonly bundleBytes: number } | undefined
  /** bin.js and the chunks a start reads (bin.js's static imports), bytes */
  readonly startBytes: number
  readonly firstFrame: ReadonlyArray<FirstFrameRow> | string
  readonly firstFrameRuns: number
}

/** The environment of the children: a HOME of their own, nothing of logbook's or of this process's loader. */
const childEnv = (home: string): NodeJS.ProcessEnv => {
  const env = { ...process.env }
  delete env.NODE_OPTIONS
  for (const name of Object.keys(env)) if (name.startsWith("LOGBOOK_")) delete env[name]
  for (const name of ["XDG_DATA_HOME", "XDG_CONFIG_HOME", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"]) delete env[name]
  env.HOME = home
  return env
}

/** Wall time of one spawn until the child has exited (ms); throws if it fails or prints something else. */
const timeSpawn = (c: StartupCase, cwd: string, env: NodeJS.ProcessEnv): number => {
  const start = now()
  const result = spawnSync(process.execPath, c.args, { cwd, env, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })
  const ms = now() - start
  if (result.error !== undefined) throw result.error
  if (result.status !== 0) throw new Error(`${c.name} exited with ${result.status}: ${result.stderr.trim()}`)
  if (!result.stdout.includes(c.expect)) {
    throw new Error(`${c.name} printed ${JSON.stringify(result.stdout.slice(0, 200))}, expected "${c.expect}"`)
  }
  return ms
}

const timing = (xs: ReadonlyArray<number>): Timing => ({ medianMs: median(xs), p90Ms: percentile(xs, 90) })

/** The commands, for the binary `bin`. */
export const startupCases = (bin: string, files: { readonly emptyDb: string }, version: string) => [
  { name: "logbook --version", args: [bin, "--version"], expect: version },
  { name: "logbook help", args: [bin, "help"], expect: "USAGE" },
  { name: "logbook sessions list (no database)", args: [bin, "sessions", "list"], expect: "No sessions yet" },
  {
    name: "logbook sessions list (empty database)",
    args: [bin, "sessions", "list", "--db", files.emptyDb],
    expect: "No sessions"
  },
  { name: "logbook config", args: [bin, "config", "--format", "text"], expect: "provider.openai" }
]

/** A fresh logbook database with no sessions (the store's migrations run). */
const makeEmptyDb = (file: string): Promise<void> =>
  Effect.runPromise(Effect.void.pipe(Effect.provide(EventStore.layerSqlite({ filename: file }))))

/** bin.js plus the files it imports statically, from dist/bundle.json (bin.js alone when there is none). */
export const startBytes = (dist: string): number => {
  const manifestFile = path.join(dist, "bundle.json")
  if (!fs.existsSync(manifestFile)) return fs.statSync(path.join(dist, "bin.js")).size
  const files = (
    JSON.parse(fs.readFileSync(manifestFile, "utf8")) as {
      files: Record<string, { bytes: number; imports: ReadonlyArray<string> }>
    }
  ).files
  const seen = new Set<string>()
  const visit = (name: string) => {
    if (seen.has(name) || files[name] === undefined) return
    seen.add(name)
    for (const next of files[name].imports) visit(next)
  }
  visit("bin.js")
  return [...seen].reduce((sum, name) => sum + files[name]!.bytes, 0)
}

/**
 * Builds the CLI of git ref `ref` in `dir`: its files (`git archive`), this checkout's
 * node_modules, its own build script. Returns its bin.js and the commit.
 */
export const buildBaseline = (ref: string, dir: string): { readonly bin: string; readonly commit: string } => {
  const git = (...args: ReadonlyArray<string>) => {
    const result = spawnSync("git", ["-C", root, ...args], { encoding: "utf8", maxBuffer: 1 << 30 })
    if (result.status !== 0) throw new Error(`git ${args.join(" ")} failed: ${result.stderr.trim()}`)
    return result.stdout
  }
  const commit = git("rev-parse", "--verify", `${ref}^{commit}`).trim()
  fs.mkdirSync(dir, { recursive: true })
  const archive = spawnSync("git", ["-C", root, "archive", "--format=tar", commit], { maxBuffer: 1 << 30 })
  if (archive.status !== 0) throw new Error(`git archive ${commit} failed: ${archive.stderr.toString().trim()}`)
  const untar = spawnSync("tar", ["-x", "-C", dir], { input: archive.stdout })
  if (untar.status !== 0) throw new Error(`tar failed: ${untar.stderr.toString().trim()}`)
  fs.symlinkSync(path.join(root, "node_modules"), path.join(dir, "node_modules"))
  const built = spawnSync(process.execPath, [path.join(dir, "scripts", "build.mjs"), "--quiet"], {
    cwd: dir,
    encoding: "utf8",
    env: childEnv(dir)
  })
  if (built.status !== 0) throw new Error(`the build of ${ref} failed: ${built.stderr.trim()}`)
  return { bin: path.join(dir, "dist", "bin.js"), commit }
}

// ---------------------------------------------------------------------------------------------
// time to the first frame (tmux)

let tmuxCounter = 0

export const hasTmux = (): boolean => spawnSync("tmux", ["-V"], { encoding: "utf8" }).status === 0

const shellQuote = (arg: string): string => `'${arg.replace(/'/g, `'\\''`)}'`

/**
 * The time from starting `command` in a new terminal (a tmux server of its own, 100×30) until
 * `marker` is on its screen, in ms: what a user waits for the first frame. The screen is read with
 * `capture-pane -p` every `pollMs` (so the figure is late by up to that, plus one capture); the
 * terminal stays open after the command exits (so a command that prints and exits can be timed too)
 * and is closed at the end (its server killed, its socket file removed). Throws after `timeoutMs` with the screen as it was.
 */
export const timeToFirstFrame = async (
  command: ReadonlyArray<string>,
  marker: string,
  options: {
    readonly cwd?: string | undefined
    readonly env?: NodeJS.ProcessEnv | undefined
    readonly pollMs?: number | undefined
    readonly timeoutMs?: number | undefined
  } = {}
): Promise<number> => {
  const socket = `logbook-bench-${process.pid}-${++tmuxCounter}`
  const env = options.env ?? process.env
  const tmux = (...args: ReadonlyArray<string>) =>
    spawnSync("tmux", ["-L", socket, "-f", "/dev/null", ...args], { encoding: "utf8", env, cwd: options.cwd })
  const line = `${command.map(shellQuote).join(" ")}; sleep 100000`
  const pollMs = options.pollMs ?? 5
  const deadline = now() + (options.timeoutMs ?? 20_000)
  try {
    const start = now()
    const started = tmux("new-session", "-d", "-x", "100", "-y", "30", line)
    if (started.status !== 0) throw new Error(`tmux new-session failed: ${started.stderr.trim()}`)
    while (true) {
      const screen = tmux("capture-pane", "-p").stdout ?? ""
      if (screen.includes(marker)) return now() - start
      if (now() > deadline) throw new Error(`"${marker}" did not appear on the screen; it shows:\n${screen}`)
      await new Promise((resolve) => setTimeout(resolve, pollMs))
    }
  } finally {
    // the server leaves its socket file behind: remove it too
    const socketPath = tmux("display-message", "-p", "#{socket_path}").stdout?.trim()
    tmux("kill-server")
    if (socketPath !== undefined && socketPath !== "") fs.rmSync(socketPath, { force: true })
  }
}

export interface FirstFrameCase {
  readonly name: string
  readonly command: ReadonlyArray<string>
  readonly marker: string
  /** variables over the run's environment */
  readonly env?: Readonly<Record<string, string>> | undefined
  /** the case this one is compared with, side by side, and the most their ratio may be */
  readonly over?: { readonly name: string; readonly goal: number } | undefined
}

/** How many MCP servers the case with servers configures. */
export const MCP_SERVERS = 5

/** What the interactive screen's status line shows once its first frame is complete. */
export const INTERACTIVE_READY = "idle │"

/**
 * The first-frame cases. The first is the baseline the others are divided by: node printing a
 * line, in the same kind of terminal. `logbook --version` is a stand-in (a known, fixed amount of
 * start-up work: what any command pays before it does anything).
 *
 * >>> THE INTERACTIVE SCREEN: `logbook` with no command, in a workspace whose config names an
 * openai-compatible model (nothing is sent to it before a message is typed) and with a database of
 * its own (`--db`, created by the first run, a warm-up), until the status line reads
 * `INTERACTIVE_READY`. It starts the agent first (config, the provider's SDK package, the catalog
 * when the provider has one, the database), then renders. To time another screen (a resumed
 * session, `-c`; a larger terminal), add a case here with a marker that only its first complete
 * frame shows (a word of the status line, not the prompt's first character); the runner prints
 * each case's median, p90 and ratio, nothing else needs to change.
 *
 * With `mcp` (a user config dir naming `MCP_SERVERS` stdio servers, `makeMcpConfig`), the same
 * screen with those servers configured, side by side with none: the servers start in the
 * background and must not hold up the first frame (goal: at most 10% slower).
 */
export const firstFrameCases = (
  bin: string,
  version: string,
  workspace: { readonly dir: string; readonly db: string },
  mcp?: { readonly configHome: string; readonly workspace: { readonly dir: string; readonly db: string } }
): ReadonlyArray<FirstFrameCase> => [
  {
    name: "node printing a line",
    command: [process.execPath, "-e", "console.log('ready')"],
    marker: "ready"
  },
  { name: "logbook --version (stand-in)", command: [process.execPath, bin, "--version"], marker: version },
  {
    name: "logbook (interactive screen, new session)",
    command: [process.execPath, bin, "--db", workspace.db, "--cwd", workspace.dir],
    marker: INTERACTIVE_READY
  },
  ...(mcp === undefined
    ? []
    : [
        {
          name: `logbook (interactive screen, new session, ${MCP_SERVERS} MCP servers)`,
          command: [process.execPath, bin, "--db", mcp.workspace.db, "--cwd", mcp.workspace.dir],
          marker: INTERACTIVE_READY,
          env: { XDG_CONFIG_HOME: mcp.configHome },
          over: { name: "logbook (interactive screen, new session)", goal: 1.1 }
        }
      ])
]

/**
 * A user config dir (`XDG_CONFIG_HOME`) naming `MCP_SERVERS` stdio servers: the reference server
 * (`@modelcontextprotocol/server-everything`) run by this node.
 */
const makeMcpConfig = (dir: string): string => {
  const script = path.join(root, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
  const servers = Object.fromEntries(
    Array.from({ length: MCP_SERVERS }, (_, i) => [`s${i + 1}`, { command: process.execPath, args: [script, "stdio"] }])
  )
  fs.mkdirSync(path.join(dir, "logbook"), { recursive: true })
  fs.writeFileSync(path.join(dir, "logbook", "config.json"), JSON.stringify({ mcpServers: servers }, null, 2))
  return dir
}

/** A workspace for the interactive screen: a config naming a model on a port where nothing listens. */
const makeWorkspace = (dir: string): { readonly dir: string; readonly db: string } => {
  fs.mkdirSync(dir, { recursive: true })
  const config = {
    model: "local/bench",
    provider: { local: { type: "openai-compatible", baseURL: "http://127.0.0.1:9/v1" } }
  }
  fs.writeFileSync(path.join(dir, "logbook.json"), JSON.stringify(config, null, 2))
  return { dir, db: path.join(dir, "logbook.db") }
}

// ---------------------------------------------------------------------------------------------

/** Rotates `list` by `by` places. */
const rotate = <A>(list: ReadonlyArray<A>, by: number): ReadonlyArray<A> => {
  const k = by % list.length
  return [...list.slice(k), ...list.slice(0, k)]
}

export const benchStartup = async (options: {
  /** a directory for the temporary HOME, workspace, database and baseline build */
  readonly dir: string
  readonly runs?: number
  readonly warmup?: number
  readonly firstFrameRuns?: number
  /** a git ref to build and measure beside this build */
  readonly baseline?: string | undefined
  readonly log?: (line: string) => void
}): Promise<StartupResult> => {
  const runs = options.runs ?? 20
  const warmup = options.warmup ?? 2
  const firstFrameRuns = options.firstFrameRuns ?? 10
  const log = options.log ?? (() => {})
  if (!fs.existsSync(BIN)) throw new Error(`${BIN} is missing: run \`npm run build\` first`)
  const version = (JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")) as { version: string }).version

  const home = path.join(options.dir, "home")
  const cwd = path.join(options.dir, "work")
  fs.mkdirSync(home, { recursive: true })
  fs.mkdirSync(cwd, { recursive: true })
  const emptyDb = path.join(options.dir, "empty.db")
  await makeEmptyDb(emptyDb)
  const env = childEnv(home)

  let baseline: { ref: string; commit: string; bin: string } | undefined
  if (options.baseline !== undefined) {
    log(`  building the baseline ${options.baseline} …`)
    const built = buildBaseline(options.baseline, path.join(options.dir, "baseline"))
    baseline = { ref: options.baseline, ...built }
  }

  const node: StartupCase = { name: "node -e 0", args: ["-e", "0"], expect: "" }
  const after = startupCases(BIN, { emptyDb }, version)
  const before = baseline === undefined ? [] : startupCases(baseline.bin, { emptyDb }, version)
  const all = [node, ...after, ...before]
  const times = all.map((): Array<number> => [])
  for (let i = 0; i < warmup + runs; i++) {
    for (const index of rotate(
      all.map((_, j) => j),
      i
    )) {
      const ms = timeSpawn(all[index]!, cwd, env)
      if (i >= warmup) times[index]!.push(ms)
    }
  }
  const nodeTiming = timing(times[0]!)
  const withRatio = (xs: ReadonlyArray<number>) => {
    const t = timing(xs)
    return { ...t, ratio: t.medianMs / nodeTiming.medianMs }
  }
  const rows: Array<StartupRow> = after.map((c, i) => ({
    name: c.name,
    after: withRatio(times[1 + i]!),
    before: baseline === undefined ? undefined : withRatio(times[1 + after.length + i]!)
  }))

  let firstFrame: ReadonlyArray<FirstFrameRow> | string
  if (!hasTmux()) {
    firstFrame = "tmux is not installed"
  } else {
    log(`  first frame: ${firstFrameRuns} runs of each in tmux …`)
    const cases = firstFrameCases(BIN, version, makeWorkspace(path.join(options.dir, "workspace")), {
      configHome: makeMcpConfig(path.join(options.dir, "mcp-config")),
      workspace: makeWorkspace(path.join(options.dir, "workspace-mcp"))
    })
    // the baseline's cases, each with a workspace (and database) of its own: its schema may be older
    const baselineCases =
      baseline === undefined
        ? []
        : firstFrameCases(baseline.bin, version, makeWorkspace(path.join(options.dir, "workspace-baseline"))).slice(1)
    const every = [...cases, ...baselineCases]
    const frames = every.map((): Array<number> => [])
    for (let i = 0; i < firstFrameRuns + 1; i++) {
      for (const index of rotate(
        every.map((_, j) => j),
        i
      )) {
        const c = every[index]!
        const ms = await timeToFirstFrame(c.command, c.marker, { cwd, env: { ...env, ...c.env } })
        if (i >= 1) frames[index]!.push(ms)
      }
    }
    const base = timing(frames[0]!)
    const withRatio = (xs: ReadonlyArray<number>) => {
      const t = timing(xs)
      return { ...t, ratio: t.medianMs / base.medianMs }
    }
    firstFrame = cases.map((c, i) => {
      const { ratio, ...t } = withRatio(frames[i]!)
      const before =
        i === 0 || baseline === undefined || i > baselineCases.length
          ? undefined
          : withRatio(frames[cases.length + i - 1]!)
      const against = c.over === undefined ? -1 : cases.findIndex((other) => other.name === c.over!.name)
      const over =
        against < 0
          ? undefined
          : { name: c.over!.name, ratio: t.medianMs / median(frames[against]!), goal: c.over!.goal }
      return { name: c.name, timing: t, ratio, before, over }
    })
  }

  return {
    runs,
    node: nodeTiming,
    rows,
    baseline:
      baseline === undefined
        ? undefined
        : {
            ref: baseline.ref,
            commit: baseline.commit,
            bundleBytes: startBytes(path.dirname(baseline.bin))
          },
    startBytes: startBytes(path.dirname(BIN)),
    firstFrame,
    firstFrameRuns
  }
}
