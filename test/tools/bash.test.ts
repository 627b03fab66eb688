import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import {
  type BashInput,
  type BashMetadata,
  makeBash,
  OUTPUT_HEAD_BYTES,
  OUTPUT_TAIL_BYTES
} from "../../src/tools/bash.js"
import { groupAlive } from "../../src/tools/processGroup.js"
import { defaultSandboxSettings } from "../../src/tools/Sandbox.js"
import type { ToolContext } from "../../src/tools/Tools.js"
import { tempDir } from "../support/tmp.js"
import { testContext } from "../support/toolContext.js"

/**
 * The tool unconfined: the contract of processes and groups as the host sees them (`$$`, `$!` are
 * host pids). In the sandbox they are pids of its own namespace: test/tools/sandbox.test.ts.
 */
const bash = makeBash({
  timeoutMs: 10_000,
  maxTimeoutMs: 60_000,
  sandbox: { ...defaultSandboxSettings, mode: "off" }
})

const context = (cwd: string, progress: Array<string> = []): ToolContext => testContext(cwd, { progress })

const run = (command: string, options: { cwd?: string; progress?: Array<string> } = {}) =>
  bash
    .execute({ command }, context(options.cwd ?? tempDir("logbook-bash-"), options.progress))
    .pipe(Effect.map((out) => ({ ...out, metadata: out.metadata as BashMetadata })))

/**
 * Whether `pid` is a live process. A killed process whose parent is gone may stay a zombie when
 * the container's init does not reap orphans: that counts as gone.
 */
const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ESRCH") return false
    throw error
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z"
  } catch {
    return true
  }
}

const readPids = (file: string): Array<number> =>
  fs.existsSync(file)
    ? fs
        .readFileSync(file, "utf8")
        .split("\n")
        .filter((l) => l.trim() !== "")
        .map(Number)
    : []

/** Polls `check` until it returns a value, failing the test after `ms`. */
const waitFor = <A>(what: string, check: () => A | undefined, ms = 10_000) =>
  Effect.gen(function* () {
    for (let waited = 0; waited <= ms; waited += 20) {
      const value = check()
      if (value !== undefined) return value
      yield* Effect.sleep("20 millis")
    }
    return yield* Effect.dieMessage(`timed out waiting for ${what}`)
  })

/** Waits until `file` lists `count` pids, all of them alive. */
const started = (file: string, count: number) =>
  waitFor(`${count} processes to start`, () => {
    const pids = readPids(file)
    return pids.length >= count && pids.every(alive) ? pids : undefined
  })

describe("bash", () => {
  it.live("returns the output and the exit code", () =>
    Effect.gen(function* () {
      const result = yield* run("echo hello")
      expect(result.output).toBe("hello\n\nExit code: 0")
      expect(result.metadata).toMatchObject({ exitCode: 0, bytes: 6, truncated: false })
      expect(result.metadata.signal).toBeUndefined()
      expect(result.metadata.durationMs).toBeGreaterThanOrEqual(0)
    })
  )

  it.live("returns a non-zero exit code as output, not as a failure", () =>
    Effect.gen(function* () {
      const result = yield* run("echo oops; exit 3")
      expect(result.output).toBe("oops\n\nExit code: 3")
      expect(result.metadata.exitCode).toBe(3)

      const silent = yield* run("false")
      expect(silent.output).toBe("(no output)\n\nExit code: 1")
    })
  )

  it.live("reports a shell killed by a signal", () =>
    Effect.gen(function* () {
      const result = yield* run("kill -KILL $$")
      expect(result.output).toBe("(no output)\n\nExit code: 137 (killed by SIGKILL)")
      expect(result.metadata).toMatchObject({ exitCode: 137, signal: "SIGKILL" })
    })
  )

  it.live("merges stderr into stdout in the order it was written", () =>
    Effect.gen(function* () {
      const result = yield* run("echo one; echo two >&2; echo three; ls /definitely-not-here-logbook; echo four")
      const shown = result.output.split("\n")
      expect(shown.slice(0, 3)).toEqual(["one", "two", "three"])
      expect(shown[3]).toContain("/definitely-not-here-logbook")
      expect(shown[4]).toBe("four")
      expect(result.metadata.exitCode).toBe(0)
    })
  )

  it.live("reports a syntax error of the command", () =>
    Effect.gen(function* () {
      const result = yield* run("if then")
      expect(result.output).toContain("syntax error")
      expect(result.metadata.exitCode).toBe(2)
    })
  )

  it.live("runs in the context's cwd with TERM=dumb, stdin closed and the rest of the environment", () =>
    Effect.gen(function* () {
      const dir = tempDir("logbook-bash-cwd-")
      process.env.APP_BASH_TEST = "kept"
      const result = yield* run('pwd; echo "$TERM $APP_BASH_TEST"; cat; echo end', { cwd: dir }).pipe(
        Effect.ensuring(Effect.sync(() => delete process.env.APP_BASH_TEST))
      )
      expect(result.output).toBe(`${fs.realpathSync(dir)}\ndumb kept\nend\n\nExit code: 0`)
    })
  )

  it.live("records the command and its whole output as a blob, even when the model reads only head and tail", () =>
    Effect.gen(function* () {
      const ctx = testContext(tempDir("logbook-bash-"))
      const result = yield* bash.execute({ command: "seq 1 100000" }, ctx)
      const metadata = result.metadata as BashMetadata
      expect(metadata.command).toBe("seq 1 100000")
      expect(metadata.truncated).toBe(true)
      const whole = ctx.blobs.get(metadata.outputBlob!)!
      expect(whole).toBe(`${Array.from({ length: 100_000 }, (_, i) => i + 1).join("\n")}\n`)
      expect(result.output.length).toBeLessThan(whole.length)
    })
  )

  it.live("keeps the head and the tail of a long output, with a marker for what was left out", () =>
    Effect.gen(function* () {
      const result = yield* run("seq 1 30000")
      const full = `${Array.from({ length: 30000 }, (_, i) => i + 1).join("\n")}\n`
      const total = Buffer.byteLength(full)
      expect(result.metadata).toMatchObject({ exitCode: 0, bytes: total, truncated: true })
      const omitted = total - OUTPUT_HEAD_BYTES - OUTPUT_TAIL_BYTES
      const marker = `\n\n… [${omitted} bytes (`
      expect(result.output.startsWith(full.slice(0, OUTPUT_HEAD_BYTES))).toBe(true)
      expect(result.output).toContain(marker)
      expect(result.output.endsWith(`${full.slice(-OUTPUT_TAIL_BYTES, -1)}\n\nExit code: 0`)).toBe(true)
      expect(Buffer.byteLength(result.output)).toBeLessThan(OUTPUT_HEAD_BYTES + OUTPUT_TAIL_BYTES + 300)
    })
  )

  it.live("reports the output so far as progress", () =>
    Effect.gen(function* () {
      const progress: Array<string> = []
      const dir = tempDir("logbook-bash-progress-")
      const flag = path.join(dir, "go")
      // the second line is written only after the first was reported
      const fiber = yield* Effect.fork(
        run(`echo first; while [ ! -e ${flag} ]; do sleep 0.02; done; echo second`, { cwd: dir, progress })
      )
      yield* waitFor("the first progress report", () => (progress.length > 0 ? true : undefined))
      expect(progress[0]).toBe("first\n")
      fs.writeFileSync(flag, "")
      const result = yield* Fiber.join(fiber)
      expect(progress.at(-1)).toBe("first\nsecond\n")
      expect(result.output).toBe("first\nsecond\n\nExit code: 0")
    })
  )

  it.live("caps progress reports to the tail of the output", () =>
    Effect.gen(function* () {
      const progress: Array<string> = []
      yield* run("seq 1 30000", { progress })
      const last = progress.at(-1)!
      expect(Buffer.byteLength(last)).toBeLessThanOrEqual(4096)
      expect(last.endsWith("29999\n30000\n")).toBe(true)
    })
  )

  it.live("interruption kills the whole process group", () =>
    Effect.gen(function* () {
      const dir = tempDir("logbook-bash-kill-")
      const pids = path.join(dir, "pids")
      const command = [
        "echo $$ >> pids",
        "sleep 30 & echo $! >> pids",
        "(sleep 30 & echo $! >> pids; wait) &",
        "sleep 30 & echo $! >> pids",
        "wait"
      ].join("\n")
      const fiber = yield* Effect.fork(run(command, { cwd: dir }))
      const recorded = yield* started(pids, 4)
      expect(recorded).toHaveLength(4)
      const exit = yield* Fiber.interrupt(fiber)
      expect(Exit.isInterrupted(exit)).toBe(true)
      // the release waits until the group is gone: nothing is left when interrupt returns
      expect(recorded.filter(alive)).toEqual([])
    })
  )

  it.live("an interrupted command leaves its record: command, exit code, duration, the output so far as a blob", () =>
    Effect.gen(function* () {
      const dir = tempDir("logbook-bash-record-")
      const ctx = testContext(dir)
      const command = "echo before; echo $$ > pids; sleep 30; echo never"
      const fiber = yield* Effect.fork(bash.execute({ command }, ctx))
      yield* started(path.join(dir, "pids"), 1)
      yield* waitFor("the first line of output", () =>
        ctx.progressed.some((p) => p.includes("before")) ? true : undefined
      )
      expect(ctx.stoppedRecords).toEqual([])
      yield* Fiber.interrupt(fiber)
      // recorded by the finalizer, once the group is gone: so before interrupt returns
      expect(ctx.stoppedRecords).toHaveLength(1)
      const record = ctx.stoppedRecords[0] as BashMetadata
      expect(record).toMatchObject({ command, exitCode: 143, signal: "SIGTERM", bytes: 7, truncated: false })
      expect(record.durationMs).toBeGreaterThanOrEqual(0)
      expect(ctx.blobs.get(record.outputBlob!)).toBe("before\n")
    })
  )

  it.live("records the command's process group (the shell leads it) before waiting for it", () =>
    Effect.gen(function* () {
      const ctx = testContext(tempDir("logbook-bash-group-"))
      const result = yield* bash.execute({ command: 'echo $$; echo "$LOGBOOK_PROCESS_TOKEN"' }, ctx)
      const [shell, token] = result.output.split("\n")
      expect(ctx.processes).toHaveLength(1)
      // the group is the shell's, and the token recorded is the one its processes carry
      expect(ctx.processes[0]!.pgid).toBe(Number(shell))
      expect(ctx.processes[0]!.token).toBe(token)
      expect(token).toMatch(/^[0-9a-f-]{36}$/)
    })
  )

  it.live("an interrupt while the group is being recorded waits for the record, then stops the group", () =>
    Effect.gen(function* () {
      const dir = tempDir("logbook-bash-record-race-")
      const base = testContext(dir)
      const entered = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      // the record's write is slow (a busy store): the interrupt comes while it is under way
      const ctx: typeof base = {
        ...base,
        recordProcess: (group) =>
          Deferred.succeed(entered, undefined).pipe(
            Effect.zipRight(Deferred.await(gate)),
            Effect.zipRight(base.recordProcess(group))
          )
      }
      const fiber = yield* Effect.fork(bash.execute({ command: "echo $$ > pids; sleep 30" }, ctx))
      yield* Deferred.await(entered)
      // the interrupt is sent (not awaited) before the gate opens: the fiber holds it first
      yield* Fiber.interruptAsFork(fiber, yield* Effect.fiberId)
      yield* Deferred.succeed(gate, undefined)
      const exit = yield* Fiber.await(fiber)
      expect(Exit.isInterrupted(exit)).toBe(true)
      // recorded although the interrupt came first: a later run could stop it after a kill -9
      expect(ctx.processes).toHaveLength(1)
      expect(ctx.stoppedRecords).toHaveLength(1)
      expect(groupAlive(ctx.processes[0]!.pgid)).toBe(false)
    })
  )

  it.live("a command whose group cannot be recorded is stopped, and the call fails", () =>
    Effect.gen(function* () {
      const dir = tempDir("logbook-bash-record-fails-")
      const base = testContext(dir)
      const ctx: typeof base = {
        ...base,
        recordProcess: (group) =>
          Effect.sync(() => fs.writeFileSync(path.join(dir, "group"), String(group.pgid))).pipe(
            Effect.zipRight(Effect.dieMessage("the store is gone"))
          )
      }
      const exit = yield* Effect.exit(bash.execute({ command: "sleep 30" }, ctx))
      expect(Exit.isFailure(exit) && !Exit.isInterrupted(exit)).toBe(true)
      expect(groupAlive(Number(fs.readFileSync(path.join(dir, "group"), "utf8")))).toBe(false)
    })
  )

  it.live("a command that ends records nothing as stopped (its record is the result's metadata)", () =>
    Effect.gen(function* () {
      const ctx = testContext(tempDir("logbook-bash-record-"))
      const result = yield* bash.execute({ command: "echo fine" }, ctx)
      expect(ctx.stoppedRecords).toEqual([])
      expect(result.metadata).toMatchObject({ command: "echo fine", exitCode: 0 })
      expect(ctx.blobs.get((result.metadata as BashMetadata).outputBlob!)).toBe("fine\n")
    })
  )

  it.live("kills with SIGKILL what ignores SIGTERM", () =>
    Effect.gen(function* () {
      const dir = tempDir("logbook-bash-term-")
      const pids = path.join(dir, "pids")
      const ctx = testContext(dir)
      const fiber = yield* Effect.fork(
        bash.execute({ command: "trap '' TERM; echo $$ >> pids; sleep 30 & echo $! >> pids; wait" }, ctx)
      )
      const recorded = yield* started(pids, 2)
      yield* Fiber.interrupt(fiber)
      // the shell ignored SIGTERM: SIGKILL (after the grace period) ended it
      expect(ctx.stoppedRecords).toEqual([expect.objectContaining({ signal: "SIGKILL", exitCode: 137 })])
      expect(recorded.filter(alive)).toEqual([])
    })
  )

  it.live("stops background processes left when the command ends", () =>
    Effect.gen(function* () {
      const dir = tempDir("logbook-bash-bg-")
      // one holds the output pipe open, one does not
      const result = yield* run("sleep 30 & echo $! > held; sleep 30 > /dev/null 2>&1 & echo $! > free; echo done", {
        cwd: dir
      })
      const recorded = [...readPids(path.join(dir, "held")), ...readPids(path.join(dir, "free"))]
      expect(recorded).toHaveLength(2)
      // the output names what was stopped by command line (the same in every run); the metadata by pid too
      expect(result.output).toBe(
        "done\n\n(background processes still running when the command ended were stopped: 2 × sleep 30)\nExit code: 0"
      )
      expect(result.metadata).toMatchObject({ exitCode: 0, stoppedBackground: true })
      expect(result.metadata.stoppedProcesses?.map((p) => p.pid).sort()).toEqual([...recorded].sort())
      expect(result.metadata.stillRunning).toBeUndefined()
      expect(recorded.filter(alive)).toEqual([])

      const quiet = yield* run("(sleep 30 > /dev/null 2>&1 &); echo started")
      expect(quiet.output).toContain("were stopped")
    })
  )

  describe.skipIf(process.platform !== "linux")("processes that leave the group (issue 12 §4)", () => {
    /** The live processes whose environment carries `token` (a scan of /proc, like logbook's). */
    const carriers = (token: string): Array<number> =>
      fs
        .readdirSync("/proc")
        .filter((name) => /^\d+$/.test(name))
        .filter((pid) => {
          try {
            return (
              alive(Number(pid)) &&
              fs.readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(`LOGBOOK_PROCESS_TOKEN=${token}`)
            )
          } catch {
            return false
          }
        })
        .map(Number)

    /** Shell: waits until the process whose pid `file` holds runs `sleep` (it wrote its pid before its exec). */
    const untilExecd = (file: string) =>
      `while [ ! -s ${file} ] || [ "$(head -c 5 /proc/$(head -n 1 ${file})/cmdline)" != sleep ]; do sleep 0.01; done`

    const daemons = {
      setsid: "setsid sh -c 'echo $$ >> pids; exec sleep 1000' > /dev/null 2>&1 < /dev/null &",
      "setsid holding the output": "setsid sh -c 'echo $$ >> pids; exec sleep 1000' &",
      "double fork": "( (sh -c 'echo $$ >> pids; exec sleep 1000' &) & )"
    }

    for (const [kind, start] of Object.entries(daemons)) {
      it.live(`a ${kind} daemon is stopped when the command ends, and the output names it`, () =>
        Effect.gen(function* () {
          const dir = tempDir("logbook-bash-daemon-")
          const ctx = testContext(dir)
          // wait until the daemon has written its pid, so it exists when the shell ends
          const result = yield* bash.execute({ command: `${start}\n${untilExecd("pids")}; echo started` }, ctx)
          const [daemon] = readPids(path.join(dir, "pids"))
          expect(daemon).toBeGreaterThan(1)
          const token = ctx.processes[0]!.token!
          expect(carriers(token)).toEqual([])
          expect(alive(daemon!)).toBe(false)
          expect(result.output).toContain("were stopped: sleep 1000)")
          expect((result.metadata as BashMetadata).stoppedProcesses).toEqual(
            expect.arrayContaining([{ pid: daemon, command: "sleep 1000" }])
          )
        })
      )
    }

    it.live("an interrupted command's setsid daemon is stopped too, and its record names it", () =>
      Effect.gen(function* () {
        const dir = tempDir("logbook-bash-daemon-")
        const ctx = testContext(dir)
        const fiber = yield* Effect.fork(
          bash.execute({ command: `${daemons.setsid}\nsleep 1000 & echo $! >> pids; wait` }, ctx)
        )
        const pids = yield* started(path.join(dir, "pids"), 2)
        yield* Fiber.interrupt(fiber)
        expect(pids.filter(alive)).toEqual([])
        expect(carriers(ctx.processes[0]!.token!)).toEqual([])
        const record = ctx.stoppedRecords[0] as BashMetadata
        expect(record.stoppedProcesses?.map((p) => p.pid)).toEqual(expect.arrayContaining(pids))
        expect(record.stillRunning).toBeUndefined()
      })
    )
  })

  it.live("fails when the command cannot be started, and falls back to sh without bash", () =>
    Effect.gen(function* () {
      const missing = path.join(tempDir(), "gone")
      const error = yield* Effect.flip(bash.execute({ command: "true" }, context(missing)))
      expect(error.message).toContain(`Working directory not found: ${missing}`)

      const shOnly = tempDir("logbook-bash-path-")
      const sh = ["/bin/sh", "/usr/bin/sh"].find((p) => fs.existsSync(p))!
      fs.symlinkSync(sh, path.join(shOnly, "sh"))
      const originalPath = process.env.PATH
      const withPath =
        (value: string) =>
        <A, E>(effect: Effect.Effect<A, E>) =>
          Effect.acquireUseRelease(
            Effect.sync(() => {
              process.env.PATH = value
            }),
            () => effect,
            () =>
              Effect.sync(() => {
                process.env.PATH = originalPath
              })
          )
      const fallback = yield* run("echo $0").pipe(withPath(shOnly))
      expect(fallback.output).toBe("sh\n\nExit code: 0")

      const none = yield* Effect.flip(bash.execute({ command: "true" }, context(shOnly))).pipe(
        withPath(tempDir("logbook-bash-empty-path-"))
      )
      expect(none.message).toMatch(/^Could not start the command: .*ENOENT/)
    })
  )

  it("takes the call's timeout, bounded by the maximum", () => {
    const tool = makeBash({ timeoutMs: 1000, maxTimeoutMs: 5000 })
    const timeout = (input: BashInput) => tool.timeoutMs!(input)
    expect(timeout({ command: "x" })).toBe(1000)
    expect(timeout({ command: "x", timeoutMs: 3000 })).toBe(3000)
    expect(timeout({ command: "x", timeoutMs: 9000 })).toBe(5000)
  })
})
