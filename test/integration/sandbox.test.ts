/**
 * The sandbox of the agent's commands (issue 12 §5), through the built binary: with
 * `tools.bash.sandbox` "on" a command writes in the workspace but not outside it, cannot read a
 * key planted in `~/.ssh` nor see the session's database (outside or inside the workspace) or the
 * user's config, and without network cannot reach a server on the host's 127.0.0.1; with "off" the
 * same command does all of it (so each check can fail). Without bubblewrap, "on" refuses to run
 * commands with a clear error, and "auto" runs them with a notice. Skipped without bubblewrap
 * (test/support/bwrap.ts), except the checks that need none.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { groupAlive } from "../../src/tools/processGroup.js"
import {
  hasBwrap,
  hasBwrapForNobody,
  NOBODY,
  outsideDir,
  pathWithoutBwrap,
  removeOutsideDirs
} from "../support/bwrap.js"
import { runCli, spawnCli } from "../support/cli.js"
import { Reply, type ScriptedServer } from "../support/scriptedServer.js"
import {
  bashReply,
  idle,
  isLive,
  killGroup,
  latestSession,
  makeJanitor,
  makeWorkspace,
  notices,
  ofType,
  readLog,
  until
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())
afterAll(removeOutsideDirs)

const KEY = "FAKE-PRIVATE-KEY-0123456789"

/**
 * A home outside /tmp (the sandbox's /tmp is private, so a path there would be missing for a reason
 * of its own) with a key in `~/.ssh`, the user's config file under it, a database beside it.
 */
const machine = (bash: Record<string, unknown>) => {
  const root = outsideDir("logbook-sandbox-it-")
  const home = path.join(root, "home")
  fs.mkdirSync(path.join(home, ".ssh"), { recursive: true })
  fs.writeFileSync(path.join(home, ".ssh", "id_rsa"), `${KEY}\n`)
  const configDir = path.join(root, "config")
  fs.mkdirSync(path.join(configDir, "logbook"), { recursive: true })
  const configFile = path.join(configDir, "logbook", "config.json")
  fs.writeFileSync(configFile, JSON.stringify({ tools: { bash } }))
  const db = path.join(root, "data", "logbook.db")
  fs.mkdirSync(path.dirname(db))
  return { root, home, configFile, db, env: { HOME: home, XDG_CONFIG_HOME: configDir } }
}

/** One command that tries each thing and says which it could do. */
const probes = (server: ScriptedServer, files: { readonly db: string; readonly configFile: string }) => {
  const port = new URL(server.url).port
  return [
    "echo inside > inside.txt && cat inside.txt",
    '(echo x > "$HOME/outside.txt") 2>/dev/null && echo home-written || echo home-refused',
    `grep -q ${KEY} "$HOME/.ssh/id_rsa" 2>/dev/null && echo key-read || echo key-hidden`,
    `test -s '${files.db}' && echo db-visible || echo db-hidden`,
    `test -s '${files.db}-wal' && echo wal-visible || echo wal-hidden`,
    `test -s '${files.configFile}' && echo config-visible || echo config-hidden`,
    `(exec 3<>/dev/tcp/127.0.0.1/${port}) 2>/dev/null && echo net-connected || echo net-refused`
  ].join("\n")
}

const runProbes = async (bash: Record<string, unknown>, dbInWorkspace = false) => {
  const server = await janitor.server()
  const ws = makeWorkspace(server)
  const m = machine(bash)
  const db = dbInWorkspace ? path.join(ws.dir, "logbook.db") : m.db
  server.enqueue(bashReply("c1", probes(server, { db, configFile: m.configFile })), Reply.text("done"))
  const run = await runCli(["run", "--db", db, "--cwd", ws.dir, "try everything"], { env: m.env })
  expect(run.code, run.stderr).toBe(0)
  const log = await readLog(db, await latestSession(db, ws.dir))
  const finished = ofType(log, "tool.finished")[0]!.payload
  return {
    run,
    lines: finished.output.split("\n"),
    metadata: finished.metadata as { readonly sandbox?: unknown },
    wroteHome: fs.existsSync(path.join(m.home, "outside.txt")),
    tools: server.requests[0]!.body.tools as ReadonlyArray<{ function: { name: string; description: string } }>
  }
}

const bashDescription = (tools: ReadonlyArray<{ function: { name: string; description: string } }>) =>
  tools.find((tool) => tool.function.name === "bash")!.function.description

describe.skipIf(!hasBwrap)("the sandbox, through logbook run", () => {
  it('"on" without network: the workspace only; no key, no database, no config, no connection', async () => {
    const result = await runProbes({ sandbox: "on", network: false })
    expect(result.lines).toEqual(
      expect.arrayContaining([
        "inside",
        "home-refused",
        "key-hidden",
        "db-hidden",
        "wal-hidden",
        "config-hidden",
        "net-refused"
      ])
    )
    expect(result.wroteHome).toBe(false)
    expect(result.metadata.sandbox).toEqual({ sandboxed: true, network: false })
    expect(bashDescription(result.tools)).toContain("Commands run in a sandbox")
    expect(bashDescription(result.tools)).toContain("There is no network")
    expect(notices(result.run.stderr)).toEqual([])
  })

  it('"on" with network: the connection to the host\'s server is made', async () => {
    const result = await runProbes({ sandbox: "on", network: true })
    expect(result.lines).toEqual(expect.arrayContaining(["inside", "home-refused", "key-hidden", "net-connected"]))
    expect(result.metadata.sandbox).toEqual({ sandboxed: true, network: true })
  })

  it("the default (auto) sandboxes too", async () => {
    const result = await runProbes({})
    expect(result.lines).toEqual(expect.arrayContaining(["home-refused", "key-hidden", "db-hidden", "net-connected"]))
    expect(result.metadata.sandbox).toEqual({ sandboxed: true, network: true })
  })

  it("a database inside the workspace is hidden too", async () => {
    const result = await runProbes({ sandbox: "on" }, true)
    expect(result.lines).toEqual(expect.arrayContaining(["inside", "db-hidden", "wal-hidden"]))
  })

  it('"off": the same command writes the home, reads the key, sees the database and connects', async () => {
    const result = await runProbes({ sandbox: "off", network: false })
    expect(result.lines).toEqual(
      expect.arrayContaining([
        "inside",
        "home-written",
        "key-read",
        "db-visible",
        "wal-visible",
        "config-visible",
        "net-connected"
      ])
    )
    expect(result.wroteHome).toBe(true)
    expect(result.metadata.sandbox).toEqual({ sandboxed: false, reason: 'tools.bash.sandbox is "off"' })
    expect(bashDescription(result.tools)).not.toContain("sandbox")
  })

  it("a project's logbook.json cannot turn the sandbox off", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, { config: { tools: { bash: { sandbox: "off", network: true } } } })
    const m = machine({ network: false })
    server.enqueue(bashReply("c1", probes(server, { db: m.db, configFile: m.configFile })), Reply.text("done"))
    const run = await runCli(["run", "--db", m.db, "--cwd", ws.dir, "try"], { env: m.env })
    expect(run.code, run.stderr).toBe(0)
    expect(notices(run.stderr)).toEqual([
      `logbook: ignoring tools.bash.sandbox "off"; tools.bash.network true of ${path.join(ws.dir, "logbook.json")}: ` +
        "a project's logbook.json may make the sandbox stricter, not looser"
    ])
    const log = await readLog(m.db, await latestSession(m.db, ws.dir))
    const output = ofType(log, "tool.finished")[0]!.payload.output
    expect(output).toContain("key-hidden")
    expect(output).toContain("net-refused")
  })
})

// ---------------------------------------------------------------------------------------------
// the host through /proc

/** A value the user's config carries (a hidden path that does not exist), to see whether a command read it. */
const CONFIG_MARK = "/nonexistent/logbook-config-mark"

/**
 * What an attacker's command tries, as root or not: through every process's `root` and `cwd` read
 * the key, the database and the user config; find logbook's own process by walking /proc (its
 * command line names dist/bin.js and this machine's database), signal it, and through its `root`
 * and `cwd` (the machine's root directory) write outside the workspace and rewrite the config to
 * turn the sandbox off (writes go through logbook's process only: run against a sandbox that does
 * not hold, the test must not write into every process's directory); unmount what hides `~/.ssh`
 * and remount the root writable. Each success prints a line.
 */
const attack = (root: string, db: string) =>
  [
    "for d in /proc/[0-9]*; do",
    `  for base in "$d/root${root}" "$d/cwd"; do`,
    '    cat "$base/home/.ssh/id_rsa" 2>/dev/null',
    '    head -c 15 "$base/data/logbook.db" 2>/dev/null && echo',
    '    grep -o logbook-config-mark "$base/config/logbook/config.json" 2>/dev/null',
    "  done",
    "done",
    // (the name is put together, so that the sandbox's own command line, which holds this text, does not match)
    "bin=bin",
    "for d in /proc/[0-9]*; do",
    '  case "$(tr "\\000" " " < "$d/cmdline" 2>/dev/null)" in',
    `    *"dist/$bin.js run --db ${db} "*) ;;`,
    "    *) continue;;",
    "  esac",
    '  pid=$(basename "$d")',
    '  echo "logbook-found $pid"',
    '  kill -0 "$pid" 2>/dev/null && echo signal-reached',
    `  for base in "$d/root${root}" "$d/cwd"; do`,
    '    (echo pwned > "$base/outside.txt") 2>/dev/null',
    `    (printf '{"tools":{"bash":{"sandbox":"off"}}}' > "$base/config/logbook/config.json") 2>/dev/null && echo config-rewritten`,
    "  done",
    "done",
    `umount "${root}/home/.ssh" 2>/dev/null && cat "${root}/home/.ssh/id_rsa"`,
    `(mount -o remount,bind,rw / && echo pwned > "${root}/outside.txt") 2>/dev/null && echo remounted`,
    "echo attack-done"
  ].join("\n")

/**
 * Runs the attack through `logbook run` in the sandbox ("on", network off), as `uid` (root: as
 * the tests run), in a machine of its own under /var/tmp whose directories that user owns.
 */
const runAttack = async (uid?: number) => {
  const server = await janitor.server()
  const m = machine({ sandbox: "on", network: false, hiddenPaths: [CONFIG_MARK] })
  const ws = path.join(m.root, "ws")
  fs.mkdirSync(ws)
  fs.copyFileSync(path.join(makeWorkspace(server).dir, "logbook.json"), path.join(ws, "logbook.json"))
  const tmp = path.join(m.root, "tmp")
  fs.mkdirSync(tmp)
  if (uid !== undefined) {
    for (const entry of fs.readdirSync(m.root, { recursive: true, encoding: "utf8" }))
      fs.chownSync(path.join(m.root, entry), uid, uid)
    fs.chownSync(m.root, uid, uid)
  }
  const config = fs.readFileSync(m.configFile)
  server.enqueue(bashReply("c1", attack(m.root, m.db)), Reply.text("done"))
  const run = await runCli(["run", "--db", m.db, "--cwd", ws, "get out"], {
    env: { ...m.env, TMPDIR: tmp },
    cwd: m.root,
    ...(uid === undefined ? {} : { uid, gid: uid })
  })
  expect(run.code, run.stderr).toBe(0)
  const log = await readLog(m.db, await latestSession(m.db, ws))
  const finished = ofType(log, "tool.finished")[0]!.payload
  expect(finished.metadata).toMatchObject({ sandbox: { sandboxed: true, network: false } })
  // the attack ran to its end, and what it was after is there on the host
  expect(finished.output).toContain("attack-done")
  expect(fs.readFileSync(path.join(m.home, ".ssh", "id_rsa"), "utf8")).toBe(`${KEY}\n`)
  expect(fs.readFileSync(m.db).subarray(0, 15).toString()).toBe("SQLite format 3")
  return { m, run, log, output: finished.output, config }
}

const expectNothingReached = (result: Awaited<ReturnType<typeof runAttack>>) => {
  const { m, run, log, output, config } = result
  // it did not even see logbook: the sandbox's /proc holds the sandbox's processes only
  expect(output).not.toContain("logbook-found")
  expect(output).not.toContain("signal-reached")
  for (const leak of [KEY, "SQLite format 3", "logbook-config-mark"]) {
    expect(output).not.toContain(leak)
    expect(run.stdout + run.stderr).not.toContain(leak)
  }
  expect(JSON.stringify(log.map((e) => e.payload))).not.toContain(KEY)
  expect(output).not.toMatch(/config-rewritten|remounted/)
  // nothing outside the workspace changed
  expect(fs.existsSync(path.join(m.root, "outside.txt"))).toBe(false)
  expect(fs.readFileSync(m.configFile)).toEqual(config)
}

describe.skipIf(!hasBwrap)("the sandbox keeps the host out of reach through /proc", () => {
  it(`as the user running the tests (${process.getuid?.() === 0 ? "root" : "not root"}): no key, database or config read, nothing written, no signal`, async () => {
    expectNothingReached(await runAttack())
  })

  it.runIf(hasBwrapForNobody)("as an ordinary user (nobody): the same", async () => {
    expectNothingReached(await runAttack(NOBODY))
  })
})

// ---------------------------------------------------------------------------------------------
// after kill -9

/** The live processes whose parent is `pid` and whose name is `name`. */
const childrenNamed = (pid: number, name: string): Array<number> =>
  fs
    .readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .filter((entry) => {
      try {
        const stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8")
        const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
        return Number(fields[1]) === pid && stat.includes(`(${name})`) && isLive(Number(entry))
      } catch {
        return false
      }
    })
    .map(Number)

/**
 * A `logbook run` (sandbox "on") whose command sleeps, in a machine whose TMPDIR is its own (to see
 * the sandbox directories); resolves once the command's group is recorded, with the group and
 * bwrap's pid.
 */
const sleepingRun = async (m: ReturnType<typeof machine>, tmp: string, server: ScriptedServer) => {
  const ws = makeWorkspace(server)
  server.enqueue(bashReply("c1", "sleep 300"))
  const live = spawnCli(["run", "--db", m.db, "--cwd", ws.dir, "sleep"], { env: { ...m.env, TMPDIR: tmp } })
  janitor.defer(() => live.child.kill("SIGKILL"))
  const session = await until("the session", () => latestSession(m.db, ws.dir).catch(() => undefined))
  const pgid = await until(
    "the command's group recorded",
    async () => ofType(await readLog(m.db, session), "tool.process")[0]?.payload.pgid
  )
  janitor.defer(() => killGroup(pgid))
  const [bwrap] = await until("bwrap running", () => {
    const found = childrenNamed(live.child.pid!, "bwrap")
    return found.length === 1 ? found : undefined
  })
  return { ws, live, session, pgid, bwrap: bwrap! }
}

const sandboxDirsIn = (tmp: string) => fs.readdirSync(tmp).filter((name) => name.startsWith("logbook-sandbox-"))

describe.skipIf(!hasBwrap)("commands a killed logbook left running", () => {
  it("the next logbook start, on another session, stops them (bwrap too), records it in their session and removes the sandbox directory", async () => {
    const server = await janitor.server()
    const m = machine({ sandbox: "on" })
    const tmp = path.join(m.root, "tmp")
    fs.mkdirSync(tmp)
    const first = await sleepingRun(m, tmp, server)
    expect(sandboxDirsIn(tmp)).toHaveLength(1)

    first.live.child.kill("SIGKILL")
    expect((await first.live.exited).signal).toBe("SIGKILL")
    // no finalizer ran: the command, bwrap and the sandbox directory outlive logbook
    expect(groupAlive(first.pgid)).toBe(true)
    expect(isLive(first.bwrap)).toBe(true)
    expect(sandboxDirsIn(tmp)).toHaveLength(1)

    // another session: a new workspace, the same database
    server.enqueue(Reply.text("hello"))
    const other = makeWorkspace(server)
    const next = await runCli(["run", "--db", m.db, "--cwd", other.dir, "hi"], { env: { ...m.env, TMPDIR: tmp } })
    expect(next.code, next.stderr).toBe(0)
    expect(notices(next.stderr)).toContain(
      `logbook: stopping commands a logbook process left running in session ${first.session} when it died…`
    )
    await until("the command and bwrap gone", () =>
      !groupAlive(first.pgid) && !isLive(first.bwrap) ? true : undefined
    )
    // the dead process's directory is removed, and the new run removed its own at exit
    expect(sandboxDirsIn(tmp)).toEqual([])

    // the first session's log records it: the call ended by the crash sweep, its command stopped
    const log = await readLog(m.db, first.session)
    expect(ofType(log, "tool.failed").map((e) => e.payload)).toEqual([
      expect.objectContaining({ callId: "c1", interrupted: true, reason: "crash" })
    ])
    expect(ofType(log, "tool.failed")[0]!.payload.error).toContain("Its command was still running and was stopped.")
    expect(ofType(log, "turn.interrupted").map((e) => e.payload.reason)).toEqual(["crash"])
    expect(log.at(-1)).toMatchObject(idle)
  })

  it("a live logbook's command is never stopped by another one's start", async () => {
    const server = await janitor.server()
    const m = machine({ sandbox: "on" })
    const tmp = path.join(m.root, "tmp")
    fs.mkdirSync(tmp)
    const first = await sleepingRun(m, tmp, server)

    server.enqueue(Reply.text("hello"))
    const other = makeWorkspace(server)
    const next = await runCli(["run", "--db", m.db, "--cwd", other.dir, "hi"], { env: { ...m.env, TMPDIR: tmp } })
    expect(next.code, next.stderr).toBe(0)
    expect(notices(next.stderr).filter((line) => line.includes("stopping commands"))).toEqual([])
    // the first run still runs its command, in its own sandbox directory
    expect(groupAlive(first.pgid)).toBe(true)
    expect(isLive(first.bwrap)).toBe(true)
    expect(sandboxDirsIn(tmp)).toHaveLength(1)
    expect(ofType(await readLog(m.db, first.session), "tool.failed")).toEqual([])

    first.live.child.kill("SIGINT")
    expect((await first.live.exited).code).toBe(130)
    expect(groupAlive(first.pgid)).toBe(false)
  })
})

describe("without bubblewrap", () => {
  it('"on" refuses to run commands, with a notice and an error that say why and what to do', async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const m = machine({ sandbox: "on" })
    server.enqueue(bashReply("c1", "echo ran > ran.txt"), Reply.text("could not"))
    const run = await runCli(["run", "--db", m.db, "--cwd", ws.dir, "try"], {
      env: { ...m.env, PATH: pathWithoutBwrap() }
    })
    expect(run.code, run.stderr).toBe(0)
    expect(notices(run.stderr)).toContain(
      'logbook: no command will run: tools.bash.sandbox is "on" and there is no sandbox here (bubblewrap (bwrap) is not installed (not found on PATH))'
    )
    const log = await readLog(m.db, await latestSession(m.db, ws.dir))
    const failed = ofType(log, "tool.failed")[0]!.payload
    expect(failed.error).toContain('Commands are not run: tools.bash.sandbox is "on" and there is no sandbox here')
    expect(failed.error).toContain('Install bubblewrap, or set tools.bash.sandbox to "auto" or "off"')
    expect(fs.existsSync(path.join(ws.dir, "ran.txt"))).toBe(false)
  })

  it('"auto" runs them unconfined, says so once, and records it', async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const m = machine({})
    server.enqueue(bashReply("c1", "echo one"), bashReply("c2", "echo two"), Reply.text("ran"))
    const run = await runCli(["run", "--db", m.db, "--cwd", ws.dir, "try"], {
      env: { ...m.env, PATH: pathWithoutBwrap() }
    })
    expect(run.code, run.stderr).toBe(0)
    expect(notices(run.stderr).filter((line) => line.includes("without a sandbox"))).toEqual([
      "logbook: commands run without a sandbox: bubblewrap (bwrap) is not installed (not found on PATH); they " +
        'can read and change everything you can (install bubblewrap to confine them, or set tools.bash.sandbox to "on" ' +
        "to refuse to run them unconfined)"
    ])
    const log = await readLog(m.db, await latestSession(m.db, ws.dir))
    const records = ofType(log, "tool.finished").map((e) => (e.payload.metadata as { sandbox?: unknown }).sandbox)
    expect(records).toEqual([
      { sandboxed: false, reason: "bubblewrap (bwrap) is not installed (not found on PATH)" },
      { sandboxed: false, reason: "bubblewrap (bwrap) is not installed (not found on PATH)" }
    ])
  })
})
