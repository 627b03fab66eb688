/**
 * A first word one typo from a command (`logbook sesions list`) never becomes a message to the
 * model: on a terminal logbook asks whether the command was meant, elsewhere it exits 2 saying so.
 * Through the built binary, in a real terminal (tmux) against the scripted model server.
 */
import { afterEach, describe, expect, it } from "vitest"
import { nearMissCommand } from "../../src/cli/main.js"
import { runCli } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import { hasTmux, runInTmux } from "../support/tmux.js"
import { makeJanitor, makeWorkspace } from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const commands = new Set(["chat", "run", "sessions", "events", "stats", "audit", "replay", "rerun", "diff", "help"])
const argv = (...words: ReadonlyArray<string>) => ["node", "logbook", ...words]

describe("a near-miss of a command", () => {
  it.each([
    ["sesions", "sessions"],
    ["sessons", "sessions"],
    ["sessoins", "sessions"],
    ["Sessions", "sessions"],
    ["stast", "stats"],
    ["rnu", "run"],
    ["rn", "run"],
    ["replya", "replay"],
    ["evnets", "events"]
  ])("%s is taken for %s", (typed, meant) => {
    expect(nearMissCommand(argv(typed, "list"), commands)).toEqual({ index: 2, typed, meant })
  })

  it.each([
    ["fix the tests"],
    ["what"],
    ["fun"],
    ["state"],
    ["sessions"],
    ["--help"],
    ["explain"],
    ["compare"],
    ["sesions list"]
  ])("%s is not", (word) => {
    expect(nearMissCommand(argv(word), commands)).toBeUndefined()
  })

  it("is the message's first word, after the session's flags; never after -- or an explicit chat", () => {
    expect(nearMissCommand(argv("--cwd", "/tmp", "-m", "a/b", "-c", "sesions"), commands)?.index).toBe(7)
    expect(nearMissCommand(argv("--yes", "--model=a/b", "stast"), commands)?.meant).toBe("stats")
    expect(nearMissCommand(argv("--", "sesions", "list"), commands)).toBeUndefined()
    expect(nearMissCommand(argv("chat", "sesions"), commands)).toBeUndefined()
    expect(nearMissCommand(argv("-m", "sesions", "fix it"), commands)).toBeUndefined()
  })

  it("is found after a leading --db", () => {
    expect(nearMissCommand(argv("--db", "x.db", "sesions"), commands)).toEqual({
      index: 4,
      typed: "sesions",
      meant: "sessions"
    })
    expect(nearMissCommand(argv("--db=x.db", "sesions"), commands)?.meant).toBe("sessions")
  })

  it("without a terminal: exit 2, did you mean, how to send it as a message", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const result = await runCli(["--db", ws.db, "--cwd", ws.dir, "sesions", "list"])
    expect(result.code).toBe(2)
    expect(result.stderr).toContain('logbook: "sesions" is not a logbook command: did you mean `sessions`?')
    expect(result.stderr).toContain('logbook run "sesions list"')
    expect(server.requests).toHaveLength(0)
  })
})

describe.skipIf(!hasTmux)("a near-miss of a command on a terminal", () => {
  const withSession = async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.text("hello there"))
    const first = await runCli([...ws.runArgs, "say hello"])
    expect(first.code).toBe(0)
    expect(server.requests).toHaveLength(1)
    return { server, ws }
  }

  it("asks; no: exit 2, nothing sent to the model, no session started", async () => {
    const { server, ws } = await withSession()
    const run = runInTmux(["--db", ws.db, "--cwd", ws.dir, "sesions", "list"])
    janitor.defer(run.close)
    await run.waitFor("Did you mean `logbook sessions`?")
    run.keys("n")
    expect(await run.exited()).toBe(2)
    expect(run.screen()).toContain("logbook -- sesions list")
    expect(server.requests).toHaveLength(1)
    const list = await runCli(["sessions", "list", "--db", ws.db, "--format", "json"])
    expect(JSON.parse(list.stdout)).toHaveLength(1)
  })

  it("asks; yes: runs the command it meant", async () => {
    const { server, ws } = await withSession()
    const run = runInTmux(["--db", ws.db, "sesions", "list"])
    janitor.defer(run.close)
    await run.waitFor("Did you mean `logbook sessions`?")
    run.keys("y")
    expect(await run.exited()).toBe(0)
    expect(run.screen()).toContain("say hello")
    expect(server.requests).toHaveLength(1)
  })
})
