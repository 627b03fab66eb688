/**
 * The sandbox of `bash` (src/tools/Sandbox.ts): the bwrap arguments and the plan (pure, always
 * run), and commands run in it (skipped without bubblewrap, see test/support/bwrap.ts): what they
 * may write and see, and that stopping them still stops everything they started.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import { type BashMetadata, makeBash } from "../../src/tools/bash.js"
import { groupAlive } from "../../src/tools/processGroup.js"
import {
  bwrapArgs,
  databaseFiles,
  decide,
  defaultHiddenPaths,
  makePlan,
  type SandboxOptions,
  type SandboxPlan,
  sandboxHint
} from "../../src/tools/Sandbox.js"
import { hasBwrap, outsideDir, removeOutsideDirs } from "../support/bwrap.js"
import { hostPids } from "../support/pids.js"
import { tempDir } from "../support/tmp.js"
import { testContext } from "../support/toolContext.js"

afterAll(removeOutsideDirs)

const plan: SandboxPlan = {
  workspace: "/w",
  cwd: "/w",
  tmp: "/host/tmp",
  emptyFile: "/host/empty",
  writable: ["/home/u/.cache"],
  hide: [
    { path: "/home/u/.ssh", directory: true },
    { path: "/w/logbook.db", directory: false }
  ],
  network: false
}

describe("bwrapArgs", () => {
  it("a PID namespace, no capabilities; mounts the root read-only, then /dev, /proc, the private /tmp, the writable paths, and hides last", () => {
    expect(bwrapArgs(plan)).toEqual([
      "--new-session",
      "--unshare-pid",
      "--cap-drop",
      "ALL",
      "--unshare-net",
      "--ro-bind",
      "/",
      "/",
      "--dev",
      "/dev",
      "--proc",
      "/proc",
      "--bind",
      "/host/tmp",
      "/tmp",
      "--bind",
      "/w",
      "/w",
      "--bind-try",
      "/home/u/.cache",
      "/home/u/.cache",
      "--perms",
      "0755",
      "--tmpfs",
      "/home/u/.ssh",
      "--remount-ro",
      "/home/u/.ssh",
      "--ro-bind",
      "/host/empty",
      "/w/logbook.db",
      "--chdir",
      "/w"
    ])
  })

  it("shares the network when it is on", () => {
    const args = bwrapArgs({ ...plan, network: true })
    expect(args).not.toContain("--unshare-net")
    expect(args).toContain("--new-session")
  })
})

describe("the sandbox plan", () => {
  const dirs = { tmp: "/host/tmp", emptyFile: "/host/empty" }

  it("hides what exists: credentials, a database inside the workspace too; not what holds the workspace", () => {
    const root = fs.realpathSync(tempDir("logbook-plan-"))
    const home = path.join(root, "home")
    fs.mkdirSync(path.join(home, ".ssh"), { recursive: true })
    fs.writeFileSync(path.join(home, ".netrc"), "machine x password y\n")
    // the workspace is inside a directory that is hidden: the workspace wins
    const holder = path.join(root, "hidden-holder")
    const ws = path.join(holder, "ws")
    fs.mkdirSync(ws, { recursive: true })
    const db = path.join(ws, "logbook.db")
    fs.writeFileSync(db, "")
    fs.writeFileSync(`${db}-wal`, "")
    const result = makePlan({
      workspace: ws,
      cwd: ws,
      settings: {
        mode: "auto",
        network: true,
        writable: [path.join(home, ".cache"), home],
        hidden: [...databaseFiles(db), holder]
      },
      env: { HOME: home },
      dirs
    })
    expect(result.hide).toEqual(
      expect.arrayContaining([
        { path: path.join(home, ".ssh"), directory: true },
        { path: path.join(home, ".netrc"), directory: false },
        { path: db, directory: false },
        { path: `${db}-wal`, directory: false }
      ])
    )
    const hidden = result.hide.map((h) => h.path)
    // missing files (no -shm, no ~/.aws) are not mounted; the holder of the workspace is not hidden
    expect(hidden).not.toContain(`${db}-shm`)
    expect(hidden).not.toContain(path.join(home, ".aws"))
    expect(hidden).not.toContain(holder)
    // a missing writable path is left out
    expect(result.writable).toEqual([home])
  })

  it("lists the usual credentials and logbook's own directories by default", () => {
    const paths = defaultHiddenPaths({
      HOME: "/home/u",
      XDG_CONFIG_HOME: "/cfg",
      XDG_DATA_HOME: "/data",
      SSH_AUTH_SOCK: "/run/agent.sock",
      KUBECONFIG: "/k/a:/k/b"
    })
    for (const expected of [
      "/home/u/.ssh",
      "/home/u/.aws",
      "/home/u/.config/gcloud",
      "/home/u/.azure",
      "/home/u/.kube",
      "/home/u/.docker/config.json",
      "/home/u/.netrc",
      "/home/u/.npmrc",
      "/home/u/.pypirc",
      "/home/u/.gnupg",
      "/home/u/.git-credentials",
      "/home/u/.config/gh",
      "/cfg/logbook",
      "/data/logbook",
      "/home/u/.config/logbook",
      "/home/u/.local/share/logbook",
      "/run/agent.sock",
      "/k/a",
      "/k/b"
    ])
      expect(paths).toContain(expected)
  })
})

describe("the decision", () => {
  const settings = { mode: "auto", network: true, writable: [], hidden: [] } as const
  const missing = { _tag: "Unavailable", reason: "bubblewrap (bwrap) is not installed (not found on PATH)" } as const

  it("auto: sandboxed where it works, else unconfined with the reason; on: refused; off: unconfined", () => {
    expect(decide(settings, { _tag: "Available", bwrap: "/usr/bin/bwrap" })).toEqual({
      _tag: "Sandboxed",
      bwrap: "/usr/bin/bwrap"
    })
    expect(decide(settings, missing)).toEqual({ _tag: "Unconfined", reason: missing.reason })
    expect(decide({ ...settings, mode: "off" }, { _tag: "Available", bwrap: "/usr/bin/bwrap" })._tag).toBe("Unconfined")
    const refused = decide({ ...settings, mode: "on" }, missing)
    expect(refused).toEqual({
      _tag: "Refused",
      message:
        'Commands are not run: tools.bash.sandbox is "on" and there is no sandbox here (bubblewrap (bwrap) is not ' +
        'installed (not found on PATH)). Install bubblewrap, or set tools.bash.sandbox to "auto" or "off" in your config.'
    })
  })

  it('"on" without a sandbox fails the call with that message, and runs nothing', () =>
    Effect.gen(function* () {
      const dir = tempDir("logbook-sandbox-refused-")
      const tool = makeBash({
        timeoutMs: 5000,
        maxTimeoutMs: 5000,
        sandbox: { ...settings, mode: "on", status: missing }
      })
      const error = yield* Effect.flip(tool.execute({ command: "touch ran" }, testContext(dir)))
      expect(error.message).toMatch(/^Commands are not run: tools.bash.sandbox is "on"/)
      expect(error.metadata).toEqual({ command: "touch ran", sandbox: { sandboxed: false, reason: error.message } })
      expect(fs.existsSync(path.join(dir, "ran"))).toBe(false)
    }).pipe(Effect.runPromise))

  it("hints at the sandbox when a failed command's output looks like it hit it", () => {
    expect(sandboxHint(settings, 1, "touch: cannot touch '/etc/x': Read-only file system")).toContain(
      "This command ran in logbook's sandbox"
    )
    expect(sandboxHint({ ...settings, network: false }, 7, "curl: (6) Could not resolve host: example.com")).toContain(
      "there is no network"
    )
    expect(sandboxHint(settings, 0, "Read-only file system")).toBeUndefined()
    expect(sandboxHint(settings, 1, "FAIL test/a.test.ts")).toBeUndefined()
  })
})

// ---------------------------------------------------------------------------------------------
// commands in the sandbox

const on: SandboxOptions = { mode: "on", network: false, writable: [], hidden: [] }
const bash = makeBash({ timeoutMs: 20_000, maxTimeoutMs: 60_000, sandbox: on })

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z"
  } catch {
    return false
  }
}

const pidsIn = (file: string): Array<number> =>
  fs.existsSync(file)
    ? fs
        .readFileSync(file, "utf8")
        .split("\n")
        .filter((line) => line.trim() !== "")
        .map(Number)
    : []

/** The host pids of the `count` processes the command wrote to `file` (pids of its namespace), once all run. */
const waitForPids = (file: string, count: number, ctx: { readonly processes: ReadonlyArray<{ pgid: number }> }) =>
  Effect.gen(function* () {
    for (let waited = 0; waited < 10_000; waited += 20) {
      const group = ctx.processes[0]?.pgid
      const pids = group === undefined ? [] : hostPids(group, pidsIn(file))
      if (pids.length >= count && pids.every(alive)) return pids
      yield* Effect.sleep("20 millis")
    }
    return yield* Effect.dieMessage(`timed out waiting for ${count} processes`)
  })

describe.skipIf(!hasBwrap)("commands in the sandbox", () => {
  it.live("write in the workspace and /tmp, not elsewhere; say so in their record", () =>
    Effect.gen(function* () {
      const ws = tempDir("logbook-sandbox-ws-")
      const outside = outsideDir("logbook-sandbox-outside-")
      const ctx = testContext(ws)
      const result = yield* bash.execute(
        {
          command: [
            "echo in > in.txt && cat in.txt",
            "echo t > /tmp/t.txt && cat /tmp/t.txt",
            `echo out > ${outside}/out.txt || echo refused`,
            "exit 1"
          ].join("\n")
        },
        ctx
      )
      const metadata = result.metadata as BashMetadata
      expect(result.output).toContain("in\nt\n")
      expect(result.output).toContain("refused")
      expect(fs.readFileSync(path.join(ws, "in.txt"), "utf8")).toBe("in\n")
      // the sandbox's /tmp is private: not the host's
      expect(fs.existsSync(path.join(outside, "out.txt"))).toBe(false)
      expect(metadata.sandbox).toEqual({ sandboxed: true, network: false })
      // the model reads a hint after the exit code
      expect(result.output).toMatch(/Exit code: 1\n\(This command ran in logbook's sandbox/)
      // /tmp is kept between calls of this process
      const next = yield* bash.execute({ command: "cat /tmp/t.txt" }, testContext(ws))
      expect(next.output).toBe("t\n\nExit code: 0")
    }).pipe(Effect.scoped)
  )

  it.live("the command runs in the recorded group, led by the sandbox's init, and carries the token", () =>
    Effect.gen(function* () {
      const ctx = testContext(tempDir("logbook-sandbox-group-"))
      const result = yield* bash.execute(
        { command: 'echo $$; ps -o pgid= -p $$; echo "$LOGBOOK_PROCESS_TOKEN"; ls /proc | grep -c "^[0-9]"' },
        ctx
      )
      const [shell, pgid, token, processes] = result.output.split("\n").map((line) => line.trim())
      // inside its PID namespace: bwrap's init is 1 and leads the group, the shell is 2, and /proc
      // shows the sandbox's processes only (init, the shell, ls, grep)
      expect([shell, pgid]).toEqual(["2", "1"])
      expect(Number(processes)).toBeLessThanOrEqual(4)
      // outside: the group recorded is the init's host pid
      expect(ctx.processes).toEqual([{ pgid: expect.any(Number), token }])
      expect(ctx.processes[0]!.pgid).toBeGreaterThan(1)
      expect(token).toMatch(/^[0-9a-f-]{36}$/)
    })
  )

  it.live("a shell killed by a signal is reported as killed by it", () =>
    Effect.gen(function* () {
      const result = yield* bash.execute({ command: "kill -KILL $$" }, testContext(tempDir("logbook-sandbox-kill-")))
      expect(result.metadata).toMatchObject({ exitCode: 137, signal: "SIGKILL" })
    })
  )

  it.live("an interrupt stops every process of the command, and its record says SIGTERM", () =>
    Effect.gen(function* () {
      const dir = tempDir("logbook-sandbox-interrupt-")
      const ctx = testContext(dir)
      const command = ["echo $$ >> pids", "sleep 30 & echo $! >> pids", "(sleep 30 & echo $! >> pids; wait) &", "wait"]
      const fiber = yield* Effect.fork(bash.execute({ command: command.join("\n") }, ctx))
      const pids = yield* waitForPids(path.join(dir, "pids"), 3, ctx)
      const exit = yield* Fiber.interrupt(fiber)
      expect(Exit.isInterrupted(exit)).toBe(true)
      expect(pids.filter(alive)).toEqual([])
      expect(groupAlive(ctx.processes[0]!.pgid)).toBe(false)
      expect(ctx.stoppedRecords).toEqual([
        expect.objectContaining({ exitCode: 143, signal: "SIGTERM", sandbox: { sandboxed: true, network: false } })
      ])
    })
  )

  it.live("what ignores SIGTERM is killed with SIGKILL", () =>
    Effect.gen(function* () {
      const dir = tempDir("logbook-sandbox-term-")
      const ctx = testContext(dir)
      const fiber = yield* Effect.fork(
        bash.execute({ command: "trap '' TERM; echo $$ >> pids; sleep 30 & echo $! >> pids; wait" }, ctx)
      )
      const pids = yield* waitForPids(path.join(dir, "pids"), 2, ctx)
      yield* Fiber.interrupt(fiber)
      expect(ctx.stoppedRecords).toEqual([expect.objectContaining({ signal: "SIGKILL", exitCode: 137 })])
      expect(pids.filter(alive)).toEqual([])
    })
  )

  it.live("background processes left when the command ends are stopped, and the output says so", () =>
    Effect.gen(function* () {
      const dir = tempDir("logbook-sandbox-bg-")
      const result = yield* bash.execute(
        { command: "sleep 30 & echo $! > held; sleep 30 > /dev/null 2>&1 & echo $! > free; echo done" },
        testContext(dir)
      )
      expect(result.output).toBe(
        "done\n\n(background processes still running when the command ended were stopped: 2 × sleep 30)\nExit code: 0"
      )
      expect([...pidsIn(path.join(dir, "held")), ...pidsIn(path.join(dir, "free"))]).toHaveLength(2)
      // the command wrote pids of its namespace; the record has the host's
      const stopped = ((result.metadata as BashMetadata).stoppedProcesses ?? []).map((p) => p.pid)
      expect(stopped).toHaveLength(2)
      expect(stopped.filter(alive)).toEqual([])
    })
  )

  it.live("the tool's description tells the model what the sandbox allows", () =>
    Effect.sync(() => {
      expect(bash.description).toContain("Commands run in a sandbox")
      expect(bash.description).toContain("There is no network")
      const unconfined = makeBash({ timeoutMs: 1, maxTimeoutMs: 1, sandbox: { ...on, mode: "off" } })
      expect(unconfined.description).not.toContain("sandbox")
    })
  )
})
