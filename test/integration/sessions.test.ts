/**
 * `sessions list` and `sessions delete` against sessions that real `logbook run` processes drive:
 * a turn in progress is `running` and cannot be deleted; once its process is killed it is
 * `crashed` and can be; a deleted session is refused by `run --session`. The built binary, real
 * HTTP to the scripted model, real processes; the test waits on the log, never on the clock.
 */
import { afterEach, describe, expect, it } from "vitest"
import { runCli, spawnCli } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import { latestSession, makeJanitor, makeWorkspace, readLog, until } from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const listed = async (db: string, id: string): Promise<Record<string, unknown> | undefined> => {
  const result = await runCli(["sessions", "list", "--all", "--format", "json", "--db", db])
  return (JSON.parse(result.stdout) as Array<Record<string, unknown>>).find((s) => s.id === id)
}

describe("sessions of live processes", () => {
  it("running while its process streams, not deletable; crashed once it is killed, then deleted; run --session refuses it", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    let release!: () => void
    const gate = new Promise<void>((resolve) => {
      release = resolve
    })
    janitor.defer(() => release())
    // the model streams a first piece, then waits: the turn stays open while the process lives
    server.enqueue(Reply.waitAfter(1, gate, Reply.text("Working on it, slowly.", { chunks: 3 })))
    const live = spawnCli([...ws.runArgs, "take your time"])
    janitor.defer(() => live.child.kill("SIGKILL"))
    await until("the first text delta", async () => {
      const sessions = await runCli(["sessions", "list", "--format", "json", "--db", ws.db])
      if (sessions.code !== 0) return undefined
      const [first] = JSON.parse(sessions.stdout) as Array<{ id: string }>
      if (first === undefined) return undefined
      const log = await readLog(ws.db, first.id)
      return log.some((e) => e.type === "text.delta") ? true : undefined
    })
    const id = await latestSession(ws.db, ws.dir)
    expect(await listed(ws.db, id)).toMatchObject({ outcome: "running", model: "local/scripted" })
    const table = await runCli(["sessions", "list", "--db", ws.db])
    expect(table.stdout).toMatch(new RegExp(`^${id.slice(0, 8)}\\S*\\s+running\\s`, "m"))

    const refused = await runCli(["sessions", "delete", id, "--db", ws.db])
    expect(refused.code).toBe(1)
    expect(refused.stderr).toMatch(
      new RegExp(
        `^logbook: session ${id} is being driven by another logbook process \\(.*:${live.child.pid}:.*\\); it was not deleted`
      )
    )
    const before = (await readLog(ws.db, id)).length
    expect((await readLog(ws.db, id)).some((e) => e.type === "session.deleted")).toBe(false)

    // SIGKILL: no finalizer runs, the turn stays open in the log and the lease stays behind
    live.child.kill("SIGKILL")
    await live.exited
    expect(await listed(ws.db, id)).toMatchObject({ outcome: "crashed", status: "busy" })

    const deleted = await runCli(["sessions", "delete", id.slice(0, 8), "--db", ws.db])
    expect(deleted.code).toBe(0)
    expect(deleted.stdout).toMatch(/^Deleted session \S+ "take your time": it is hidden/)
    const log = await readLog(ws.db, id)
    expect(log.length).toBe(before + 1)
    expect(log.at(-1)?.type).toBe("session.deleted")
    expect(await listed(ws.db, id)).toMatchObject({ deleted: true })

    // run --session refuses it with a sentence, sends nothing to the model and writes nothing
    const requests = server.requests.length
    const run = await runCli([...ws.runArgs, "--session", id.slice(0, 8), "go on"])
    expect(run.code).toBe(2)
    expect(run.stderr).toBe(
      `logbook: session ${id} was deleted (logbook sessions delete), so it cannot be continued; ` +
        "its events are kept (logbook sessions show reads them): start a new session instead\n"
    )
    expect(server.requests.length).toBe(requests)
    expect((await readLog(ws.db, id)).length).toBe(before + 1)
    // nor does --continue pick it (the latest session of the directory that is not deleted: none)
    const cont = await runCli([...ws.runArgs, "--continue", "go on"])
    expect(cont.code).toBe(2)
    expect(cont.stderr).toContain("no session in")
  })
})
