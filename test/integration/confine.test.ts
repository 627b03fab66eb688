/**
 * Confinement without races, through the built binary (issue 12 §4):
 *
 * - a directory swapped for a symlink to outside the workspace between the check of a path and
 *   its open: `read` refuses it (deterministically, at the chosen point, through the test seam
 *   `CONFINE_TEST_HANDSHAKE`; and adversarially, with a shell swapping the directory in a loop
 *   while the model reads 96 times: the outside file's content is never returned);
 * - background processes that leave the command's process group (`setsid`, a double fork) are
 *   stopped when the call ends — normally, on timeout, on interrupt — found by the token in their
 *   environment: afterwards no process carries the call's token, and the output names what was
 *   stopped.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runCli, spawnCli } from "../support/cli.js"
import { makeHandshakes, swapForSymlink } from "../support/handshake.js"
import { hostPid } from "../support/pids.js"
import { Reply } from "../support/scriptedServer.js"
import { workspaceWith } from "../support/toolContext.js"
import {
  contentText,
  fileLines,
  isLive,
  latestSession,
  makeJanitor,
  makeWorkspace,
  ofType,
  readLog,
  toolCall,
  toolResult,
  until
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const onLinux = process.platform === "linux"
const SECRET = "root:x:0:0:the secret outside"

/** A workspace (`sub/notes.txt` inside) and a directory outside with a `sub/notes.txt` holding the secret. */
const confinedWorkspace = async () => {
  const server = await janitor.server()
  // 96 reads in one step: above the default cap of calls a step runs
  const ws = makeWorkspace(server, { config: { step: { maxToolCalls: 96 } } })
  fs.mkdirSync(path.join(ws.dir, "sub"))
  fs.writeFileSync(path.join(ws.dir, "sub", "notes.txt"), "inside\n")
  const outside = workspaceWith({ "sub/notes.txt": `${SECRET}\n` }, "logbook-confine-out-")
  return { server, ws, sub: path.join(ws.dir, "sub"), outsideSub: path.join(outside, "sub") }
}

describe.skipIf(!onLinux)("logbook run: a directory swapped between the check and the open", () => {
  it("read refuses a path whose parent was swapped for a symlink outside after the check", async () => {
    const { server, ws, sub, outsideSub } = await confinedWorkspace()
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_read", "read", { path: "sub/notes.txt" })] }),
      Reply.text("done")
    )
    const seam = makeHandshakes()
    const live = spawnCli([...ws.runArgs, "read the notes"], { env: seam.env })
    janitor.defer(() => live.child.kill("SIGKILL"))
    let settled = false
    const exited = live.exited.finally(() => {
      settled = true
    })
    await seam.serve(
      () => settled,
      (opening, n) => {
        if (n === 1) {
          expect(opening).toBe(path.join(sub, "notes.txt"))
          swapForSymlink(sub, outsideSub)
        }
      }
    )
    expect((await exited).code, live.stderr()).toBe(0)
    expect(seam.seen).toEqual([path.join(sub, "notes.txt")])
    const result = contentText(toolResult(server.requests[1]!, "call_read"))
    expect(result).toContain(`sub/notes.txt is outside the workspace ${ws.dir} (it leads to ${outsideSub}/notes.txt)`)
    expect(result).not.toContain(SECRET)
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(JSON.stringify(log)).not.toContain(SECRET)
  })

  it("96 reads while a shell swaps the directory in a loop: the content outside is never returned", async () => {
    const { server, ws, outsideSub } = await confinedWorkspace()
    // each call differs (its limit), so the loop guard (the same call three times) does not ask
    const reads = Array.from({ length: 96 }, (_, i) =>
      toolCall(`call_${i}`, "read", { path: "sub/notes.txt", limit: i + 1 })
    )
    server.enqueue(Reply.stream({ toolCalls: reads }), Reply.text("done"))
    // the adversary: swaps sub/ for a symlink to the directory outside and back, as fast as it can
    const swapper = spawn(
      "sh",
      [
        "-c",
        `cd "${ws.dir}" && while :; do mv sub sub.real && ln -s "${outsideSub}" sub; rm sub && mv sub.real sub; done`
      ],
      { stdio: "ignore" }
    )
    janitor.defer(() => swapper.kill("SIGKILL"))
    const run = await runCli([...ws.runArgs, "read the notes many times"], { timeoutMs: 120_000 })
    swapper.kill("SIGKILL")
    expect(run.code, run.stderr).toBe(0)
    const request = server.requests[1]!
    const results = reads.map((call) => contentText(toolResult(request, call.id)))
    expect(results).toHaveLength(96)
    // each read saw the file inside, or was refused (outside when checked or when opened, denied by
    // the permission check that saw it outside, missing mid-swap): never the secret
    for (const result of results) expect(result).not.toContain(SECRET)
    const refused = /outside the workspace|not found|changed while|^Denied: |^Cannot use the path /
    expect(results.filter((r) => !(r.includes("inside") || refused.test(r)))).toEqual([])
  })
})

/** The live processes whose environment carries `token` (a scan of /proc). */
const carriers = (token: string): Array<number> =>
  fs
    .readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        const state = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
        if (/^[ZX]/.test(state.slice(state.lastIndexOf(")") + 2))) return false
        return fs.readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(`LOGBOOK_PROCESS_TOKEN=${token}`)
      } catch {
        return false
      }
    })
    .map(Number)

/**
 * The command of the daemon tests: a `setsid` daemon and a double fork, each writing its pid to a
 * file, then (once both run) `rest`.
 */
const daemonsThen = (rest: string) =>
  [
    "setsid sh -c 'echo $$ > setsid.pid; exec sleep 1000' > /dev/null 2>&1 < /dev/null &",
    "( (sh -c 'echo $$ > fork.pid; exec sleep 1000' &) & )",
    // until both have written their pid and then exec'd sleep (the output names them by command line)
    ...["setsid.pid", "fork.pid"].map(
      (file) =>
        `while [ ! -s ${file} ] || [ "$(head -c 5 /proc/$(cat ${file})/cmdline)" != sleep ]; do sleep 0.01; done`
    ),
    rest
  ].join("\n")

/** The daemons' pids as they wrote them: in the sandbox, pids of its own PID namespace. */
const daemonPids = (dir: string): Array<number> =>
  ["setsid.pid", "fork.pid"].map((f) => Number(fs.readFileSync(path.join(dir, f), "utf8").trim()))

/**
 * What a record says it stopped: the host pids of the `sleep 1000` daemons (the daemons wrote
 * their pids as the sandbox numbers them; the record names the host's).
 */
const stoppedSleeps = (metadata: unknown): Array<number> =>
  ((metadata as { stoppedProcesses?: Array<{ pid: number; command: string }> }).stoppedProcesses ?? [])
    .filter((p) => p.command === "sleep 1000")
    .map((p) => p.pid)

/** Kills at cleanup whatever the daemons of `dir` left (the test asserts they are gone; this only tidies up). */
const tidy = (dir: string) =>
  janitor.defer(() => {
    for (const file of ["setsid.pid", "fork.pid"]) {
      const pid = Number(fs.existsSync(path.join(dir, file)) ? fs.readFileSync(path.join(dir, file), "utf8") : "")
      if (pid > 1) {
        try {
          process.kill(hostPid(pid, dir), "SIGKILL")
        } catch {
          // gone
        }
      }
    }
  })

const tokenOf = async (db: string, session: string): Promise<string> => {
  const [recorded] = ofType(await readLog(db, session), "tool.process")
  return recorded!.payload.token!
}

describe.skipIf(!onLinux)("logbook run: background processes that leave the command's group", () => {
  it("a call that ends: the setsid daemon and the double fork are stopped, and the output names them", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    tidy(ws.dir)
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_bg", "bash", { command: daemonsThen("echo started") })] }),
      Reply.text("done")
    )
    const run = await runCli([...ws.runArgs, "start daemons"])
    expect(run.code, run.stderr).toBe(0)
    const session = await latestSession(ws.db, ws.dir)
    expect(carriers(await tokenOf(ws.db, session))).toEqual([])
    expect(daemonPids(ws.dir)).toHaveLength(2)
    const output = contentText(toolResult(server.requests[1]!, "call_bg"))
    expect(output).toBe(
      "started\n\n(background processes still running when the command ended were stopped: 2 × sleep 1000)\nExit code: 0"
    )
    expect(output).not.toContain("could not be stopped")
    const [finished] = ofType(await readLog(ws.db, session), "tool.finished")
    expect(finished!.payload.metadata).toMatchObject({ stoppedBackground: true })
    const stopped = stoppedSleeps(finished!.payload.metadata)
    expect(stopped).toHaveLength(2)
    expect(stopped.filter(isLive)).toEqual([])
  })

  it("a call that times out: the daemons are stopped with it", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    tidy(ws.dir)
    server.enqueue(
      Reply.stream({
        toolCalls: [toolCall("call_slow", "bash", { command: daemonsThen("sleep 1000"), timeoutMs: 5000 })]
      }),
      Reply.text("done")
    )
    const run = await runCli([...ws.runArgs, "start daemons"])
    expect(run.code, run.stderr).toBe(0)
    const session = await latestSession(ws.db, ws.dir)
    expect(carriers(await tokenOf(ws.db, session))).toEqual([])
    const [failed] = ofType(await readLog(ws.db, session), "tool.failed")
    expect(failed!.payload).toMatchObject({ timedOut: true })
    expect(failed!.payload.error).not.toContain("could not be stopped")
    // the daemons were started well before the timeout: named in the record (so the stop was exercised)
    expect(daemonPids(ws.dir)).toHaveLength(2)
    // the two daemons and the command's own sleep
    const stopped = stoppedSleeps(failed!.payload.metadata)
    expect(stopped).toHaveLength(3)
    expect(stopped.filter(isLive)).toEqual([])
  })

  /** a run whose command started two daemons (setsid, double fork) and still runs: its group recorded */
  const runningDaemons = async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    tidy(ws.dir)
    server.enqueue(Reply.stream({ toolCalls: [toolCall("call_long", "bash", { command: daemonsThen("sleep 1000") })] }))
    const live = spawnCli([...ws.runArgs, "start daemons"])
    janitor.defer(() => live.child.kill("SIGKILL"))
    await fileLines(path.join(ws.dir, "setsid.pid"), 1)
    await fileLines(path.join(ws.dir, "fork.pid"), 1)
    // the host's pids of the daemons, while they run
    const daemons = daemonPids(ws.dir).map((pid) => hostPid(pid, ws.dir))
    const session = await latestSession(ws.db, ws.dir)
    await until("the group recorded", async () =>
      ofType(await readLog(ws.db, session), "tool.process").length === 1 ? true : undefined
    )
    const token = await tokenOf(ws.db, session)
    return { server, ws, live, session, token, daemons }
  }

  it("a call interrupted (Ctrl-C): the daemons are stopped before logbook exits", async () => {
    const { ws, live, session, token, daemons } = await runningDaemons()
    expect(carriers(token).length).toBeGreaterThanOrEqual(2)
    live.child.kill("SIGINT")
    expect((await live.exited).code).toBe(130)
    expect(carriers(token)).toEqual([])
    const [failed] = ofType(await readLog(ws.db, session), "tool.failed")
    expect(failed!.payload).toMatchObject({ interrupted: true })
    expect(stoppedSleeps(failed!.payload.metadata)).toEqual(expect.arrayContaining(daemons))
  })

  it("logbook killed (-9) during the call: the next run of the session stops the daemons too", async () => {
    const { server, ws, live, session, token } = await runningDaemons()
    live.child.kill("SIGKILL")
    await live.exited
    // no finalizer ran: the daemons (and the group) outlive logbook
    expect(carriers(token).length).toBeGreaterThanOrEqual(2)
    server.enqueue(Reply.text("ok"))
    const next = await runCli([...ws.runArgs, "-s", session, "go on"])
    expect(next.code, next.stderr).toBe(0)
    expect(carriers(token)).toEqual([])
    const [failed] = ofType(await readLog(ws.db, session), "tool.failed")
    expect(failed!.payload.error).toContain("Its command was still running and was stopped.")
  })
})
