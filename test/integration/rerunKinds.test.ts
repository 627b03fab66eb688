/**
 * `logbook rerun` through the built binary on each kind of session a real run produces against the
 * scripted model server: a retried request, a manual compaction, a session continued by a second
 * process that runs a command, an interrupt, a crash repaired by the next run, a steered and a
 * queued message, a call the permission rules rejected. The server is
 * closed before every re-run, so a request to a model would fail: whatever the re-run's model
 * answers comes from the log.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { NodeContext } from "@effect/platform-node"
import { Effect, Option } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { setupAgent } from "../../src/cli/agentSetup.js"
import type { SessionId } from "../../src/domain/Ids.js"
import { Sessions } from "../../src/session/Sessions.js"
import type { SessionState } from "../../src/store/Projection.js"
import { Approver } from "../../src/tools/Approver.js"
import { type RunResult, runCli, scratchDir, spawnCli } from "../support/cli.js"
import { Reply, type ScriptedServer } from "../support/scriptedServer.js"
import {
  bashReply,
  fileLines,
  latestSession,
  makeJanitor,
  makeWorkspace,
  ofType,
  readLog,
  until,
  writableEnv
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const bash = bashReply

interface RerunJson {
  readonly outcome: { readonly _tag: string } & Record<string, unknown>
  readonly matched: number
  readonly compared: number
  readonly served: number
  readonly live: number
}

/** `logbook rerun <session> --format json` in a new scratch directory (returned), and its report. */
const rerunJson = async (db: string, session: string, env?: Record<string, string>) => {
  const workspace = path.join(scratchDir(), "ws")
  const result = await runCli(["rerun", session, "--db", db, "--workspace", workspace, "--format", "json"], {
    env: env ?? {}
  })
  let report: RerunJson | undefined
  try {
    report = JSON.parse(result.stdout) as RerunJson
  } catch {
    throw new Error(`rerun printed no report (exit ${result.code}):\n${result.stdout}\n${result.stderr}`)
  }
  return { result, report, workspace }
}

/**
 * The re-run of `session` matched the whole original (`original`, `served` model responses from the
 * log, none live); returns the scratch workspace it ran in.
 */
const expectMatch = async (
  db: string,
  session: string,
  original: ReadonlyArray<unknown>,
  served: number,
  env?: Record<string, string>
) => {
  const { result, report, workspace } = await rerunJson(db, session, env)
  expect(report.outcome, shown(result)).toEqual({ _tag: "match" })
  expect(result.code).toBe(0)
  expect(report).toMatchObject({ served, live: 0, compared: original.length, matched: original.length })
  return workspace
}

/** The outcome in full when it is not the one expected: the assertion's message. */
const shown = (result: RunResult) => `${result.stdout}\n${result.stderr}`

/** How many model requests the original made, as the plan counts them (failed ones included). */
const requestsOf = (server: ScriptedServer) => server.requests.length

describe("logbook rerun on each kind of session", () => {
  it("retried: the failed request is served from the log too, and the retry is taken without a wait", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(
      Reply.error(500),
      bash("call_1", "printf 'made\\n' > made.txt && echo ok"),
      Reply.text("Made made.txt.")
    )
    const run = await runCli([...ws.runArgs, "make a file"])
    expect(run.code, run.stderr).toBe(0)
    const session = await latestSession(ws.db, ws.dir)
    const original = await readLog(ws.db, session)
    expect(ofType(original, "model.retry")).toHaveLength(1)
    const requests = requestsOf(server)
    expect(requests).toBe(3)
    await server.close()

    const workspace = await expectMatch(ws.db, session, original, requests)
    expect(fs.readFileSync(path.join(workspace, "made.txt"), "utf8")).toBe("made\n")
  })

  it("compacted: a manual compaction between two runs is done again at its place", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(bash("call_1", "printf 'one\\n' > one.txt && echo ok"), Reply.text("first answer"))
    expect((await runCli([...ws.runArgs, "first"])).code).toBe(0)
    const session = await latestSession(ws.db, ws.dir)

    server.enqueue(Reply.text("SUMMARY of everything"))
    const compacted = await runCli(["compact", session, "--db", ws.db, "--cwd", ws.dir])
    expect(compacted.code, compacted.stderr).toBe(0)
    expect(compacted.stdout).toMatch(/compacted 2 messages into a summary/)

    server.enqueue(Reply.text("second answer"))
    const second = await runCli([...ws.runArgs, "-s", session, "second"])
    expect(second.code, second.stderr).toBe(0)
    const original = await readLog(ws.db, session)
    expect(ofType(original, "compaction.done").map((e) => e.payload.trigger)).toEqual(["manual"])
    const requests = requestsOf(server)
    expect(requests).toBe(4)
    await server.close()

    const workspace = await expectMatch(ws.db, session, original, requests)
    expect(fs.readFileSync(path.join(workspace, "one.txt"), "utf8")).toBe("one\n")
  })

  it("continued: a second run (a new process) that runs a command, after one that ran one", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(bash("call_1", "printf 'one\\n' > one.txt && echo ok"), Reply.text("first answer"))
    expect((await runCli([...ws.runArgs, "first"])).code).toBe(0)
    const session = await latestSession(ws.db, ws.dir)
    server.enqueue(bash("call_2", "cat one.txt > two.txt && echo ok"), Reply.text("second answer"))
    const second = await runCli([...ws.runArgs, "-s", session, "second"])
    expect(second.code, second.stderr).toBe(0)
    const original = await readLog(ws.db, session)
    // each process that runs a command takes a baseline snapshot first
    expect(
      ofType(original, "workspace.snapshot")
        .filter((e) => e.payload.phase === "baseline")
        .map((e) => e.payload.callId)
    ).toEqual(["call_1", "call_2"])
    const requests = requestsOf(server)
    expect(requests).toBe(4)
    await server.close()

    const workspace = await expectMatch(ws.db, session, original, requests)
    expect(fs.readFileSync(path.join(workspace, "two.txt"), "utf8")).toBe("one\n")
  })

  it("interrupted: the driver interrupts the running command where the log was interrupted; the next run goes on", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    // the command's group id goes outside the workspace: a file it wrote in it would differ (its pid)
    // from the one the re-run's command writes, and could be written or not before the interrupt
    // (the user's config lets the sandboxed commands write there; a re-run's sandbox does not: quietly)
    const pidFile = path.join(scratchDir(), "shell.pid")
    const env = writableEnv(path.dirname(pidFile))
    janitor.killGroupIn(pidFile, ws.dir)
    server.enqueue(bash("call_wait", `{ echo $$ > ${pidFile}; } 2>/dev/null; exec sleep 300`))
    const interrupted = spawnCli([...ws.runArgs, "wait long"], { env })
    janitor.defer(() => interrupted.child.kill("SIGKILL"))
    await fileLines(pidFile, 1)
    const session = await latestSession(ws.db, ws.dir)
    await until("the command's group recorded", async () =>
      ofType(await readLog(ws.db, session), "tool.process").length === 1 ? true : undefined
    )
    interrupted.child.kill("SIGINT")
    expect((await interrupted.exited).code).toBe(130)

    server.enqueue(Reply.text("Stopped, as you asked."))
    const next = await runCli([...ws.runArgs, "-s", session, "why did it stop?"], { env })
    expect(next.code, next.stderr).toBe(0)
    const original = await readLog(ws.db, session)
    expect(ofType(original, "turn.interrupted").map((e) => e.payload.reason)).toEqual(["user"])
    const requests = requestsOf(server)
    expect(requests).toBe(2)
    await server.close()

    await expectMatch(ws.db, session, original, requests, env)
  })

  it("crashed: the re-run goes past the crash as the next run did (the crash sweep), then on", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    // the pid goes outside the workspace, where the user's config lets the sandboxed commands write
    // (a re-run's sandbox does not: quietly)
    const pidFile = path.join(scratchDir(), "crash.pid")
    const env = writableEnv(path.dirname(pidFile))
    janitor.killGroupIn(pidFile, ws.dir)
    server.enqueue(bash("call_crash", `{ echo $$ > ${pidFile}; } 2>/dev/null; exec sleep 300`))
    const crashed = spawnCli([...ws.runArgs, "wait again"], { env })
    janitor.defer(() => crashed.child.kill("SIGKILL"))
    await fileLines(pidFile, 1)
    const session = await latestSession(ws.db, ws.dir)
    await until("the command's group recorded", async () =>
      ofType(await readLog(ws.db, session), "tool.process").length === 1 ? true : undefined
    )
    crashed.child.kill("SIGKILL")
    await crashed.exited
    server.enqueue(Reply.text("It was cut short."))
    const next = await runCli([...ws.runArgs, "-s", session, "what happened?"], { env })
    expect(next.code, next.stderr).toBe(0)
    const original = await readLog(ws.db, session)
    const crash = ofType(original, "turn.interrupted")
    expect(crash.map((e) => e.payload.reason)).toEqual(["crash"])
    await server.close()

    await expectMatch(ws.db, session, original, 2, env)
    // the crash sweep, written by the re-run's second kernel: the command it found running was stopped
    const stopped = ofType(original, "tool.failed").find((e) => e.payload.callId === "call_crash")
    expect(stopped?.payload.error).toContain("Its command was still running and was stopped.")
  })

  it("a call the permission rules rejected: its input is in the log, so the re-run asks and is rejected again", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, { config: { permission: { bash: { "*": "allow", "touch *": "ask" } } } })
    server.enqueue(bash("call_touch", "touch made"), Reply.text("Not allowed."))
    // no terminal to ask: the question is answered with a rejection
    const run = await runCli([...ws.runArgs, "make a file"])
    expect(run.code, run.stderr).toBe(0)
    const session = await latestSession(ws.db, ws.dir)
    const original = await readLog(ws.db, session)
    expect(ofType(original, "permission.replied").map((e) => e.payload.reply)).toEqual(["reject"])
    expect(ofType(original, "tool.invoked")).toHaveLength(0)
    // the refused call's input, as the model sent it
    expect(ofType(original, "tool.failed")[0]!.payload.input).toEqual({ command: "touch made" })
    const requests = requestsOf(server)
    await server.close()

    const workspace = await expectMatch(ws.db, session, original, requests)
    expect(fs.existsSync(path.join(workspace, "made"))).toBe(false)
  })

  // Steering and queueing need a live session to send into while it works: `logbook run` sends one
  // message, so the session is recorded in process, by the agent `logbook run` builds for the
  // workspace (`setupAgent`: its config, tools and prompt, the model over real HTTP, the SQLite
  // file), then re-run through the binary.
  const inProcess = <A>(
    ws: { readonly dir: string; readonly db: string },
    body: (sessions: Sessions["Type"]) => Effect.Effect<A, unknown>
  ): Promise<A> => {
    // the user's own config stays out, as in a CLI run (`baseEnv`)
    const saved = process.env.XDG_CONFIG_HOME
    process.env.XDG_CONFIG_HOME = scratchDir()
    janitor.defer(() => {
      if (saved === undefined) delete process.env.XDG_CONFIG_HOME
      else process.env.XDG_CONFIG_HOME = saved
    })
    return Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const { layer } = yield* setupAgent({
            cwd: ws.dir,
            flags: {},
            db: Option.some(ws.db),
            approver: Approver.autoDeny
          })
          return yield* Effect.flatMap(Sessions, body).pipe(Effect.provide(layer))
        })
      ).pipe(Effect.provide(NodeContext.layer)) as Effect.Effect<A>
    )
  }

  /** Polls the session's state every 20 ms until `ready` holds (bounded: a broken test fails, it does not hang). */
  const stateUntil = (
    sessions: Sessions["Type"],
    id: SessionId,
    what: string,
    ready: (state: SessionState) => boolean
  ) =>
    Effect.promise(() =>
      until(what, () => Effect.runPromise(Effect.map(sessions.state(id), (state) => (ready(state) ? true : undefined))))
    )

  const assistantText = (state: SessionState): string =>
    state.messages
      .flatMap((m) => (m.role === "assistant" ? m.parts : []))
      .map((p) => (p.type === "text" ? p.text : ""))
      .join("")

  it("steered: a message steered into a streaming answer is sent again between the same deltas", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    let open!: () => void
    const hold = new Promise<void>((resolve) => {
      open = resolve
    })
    janitor.defer(() => open())
    server.enqueue(
      // role + "Partial ", "answer ", then the stream waits (for good: the steer stops it)
      Reply.waitAfter(2, hold, Reply.stream({ text: ["Partial ", "answer ", "that is never sent"] })),
      Reply.text("Steered answer.")
    )
    const session = await inProcess(ws, (sessions) =>
      Effect.gen(function* () {
        const id = yield* sessions.create({ cwd: ws.dir, title: "steer" })
        yield* sessions.send(id, "answer this")
        yield* stateUntil(sessions, id, "the partial answer", (state) => assistantText(state) === "Partial answer ")
        yield* sessions.send(id, "actually, answer this instead", { mode: "steer" })
        yield* sessions.wait(id)
        return id as string
      })
    )
    open()
    const original = await readLog(ws.db, session)
    expect(ofType(original, "user.message").map((e) => e.payload.mode)).toEqual(["prompt", "steer"])
    expect(ofType(original, "step.finished").map((e) => e.payload.finishReason)).toEqual(["steered", "stop"])
    const requests = requestsOf(server)
    expect(requests).toBe(2)
    await server.close()

    await expectMatch(ws.db, session, original, requests)
  })

  it("queued: a message queued while the turn works starts the next turn, as it did", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    let open!: () => void
    const hold = new Promise<void>((resolve) => {
      open = resolve
    })
    janitor.defer(() => open())
    server.enqueue(
      // the first step streams a tool call, then holds before its finish until the message is queued
      Reply.waitAfter(1, hold, bash("call_echo", "printf 'one\\n' > one.txt && echo one")),
      Reply.text("First turn done."),
      Reply.text("Queued message handled.")
    )
    const session = await inProcess(ws, (sessions) =>
      Effect.gen(function* () {
        const id = yield* sessions.create({ cwd: ws.dir, title: "queue" })
        yield* sessions.send(id, "make one.txt")
        yield* Effect.promise(() => server.request(0))
        yield* sessions.send(id, "and then list the files", { mode: "queue" })
        open()
        // the first turn, then the queued message's
        yield* sessions.wait(id)
        const state = yield* sessions.state(id)
        expect(state.queued).toEqual([])
        expect(state.status._tag).toBe("idle")
        return id as string
      })
    )
    const original = await readLog(ws.db, session)
    expect(ofType(original, "user.message").map((e) => e.payload.mode)).toEqual(["prompt", "queue"])
    expect(ofType(original, "turn.started")).toHaveLength(2)
    const requests = requestsOf(server)
    expect(requests).toBe(3)
    await server.close()

    const workspace = await expectMatch(ws.db, session, original, requests)
    expect(fs.readFileSync(path.join(workspace, "one.txt"), "utf8")).toBe("one\n")
  })
})
