/**
 * The command line follows the conventions (issue 10 §2, first part), through the built binary:
 * an unknown option is an error that names it (it used to be sent to the model as part of the
 * message), `--` ends the options, `logbook help [command]` prints the command's help, and the
 * common short flags exist (`-m` model, `-c` continue, `-s` session).
 */
import { afterEach, describe, expect, it } from "vitest"
import { runCli } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import { contentText, latestSession, makeJanitor, makeWorkspace, messagesOf } from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

describe("options of logbook run", () => {
  it("an unknown option is a usage error that names it, and nothing is sent to the model", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    for (const args of [
      ["--modle", "x", "hi"],
      ["hi", "--verbose"],
      ["--max-step=3", "hi"],
      ["-v", "hi"]
    ]) {
      const result = await runCli([...ws.runArgs, ...args])
      const name = args.find((a) => a.startsWith("-"))!.split("=")[0]!
      expect(result.code, args.join(" ")).toBe(2)
      expect(result.stderr).toContain(`unknown option ${name} for logbook run`)
      expect(result.stderr).toContain("logbook run --")
    }
    expect(server.requests).toHaveLength(0)
  })

  it("-- ends the options: what follows is the message, dashes and all", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.text("ok"))
    const result = await runCli([...ws.runArgs, "--", "--model", "x", "-v", "means verbose"])
    expect(result.code).toBe(0)
    expect(contentText(messagesOf(server.requests[0]!)[0])).toBe("--model x -v means verbose")
  })

  it("-m names the model, -s the session, -c the latest session", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, { config: { model: "nosuch/model" } })
    server.enqueue(Reply.text("one"), Reply.text("two"), Reply.text("three"))
    expect((await runCli([...ws.runArgs, "-m", "local/scripted", "first"])).code).toBe(0)
    const sessionId = await latestSession(ws.db, ws.dir)
    expect((await runCli([...ws.runArgs, "-m", "local/scripted", "-s", sessionId.slice(0, 12), "second"])).code).toBe(0)
    expect((await runCli([...ws.runArgs, "-m", "local/scripted", "-c", "third"])).code).toBe(0)
    // the second and third requests went on with the first session
    expect(messagesOf(server.requests[2]!).map(contentText)).toEqual(["first", "one", "second", "two", "third"])
  })
})

describe("logbook help", () => {
  it("prints the help of a command, the same as --help", async () => {
    for (const command of [["run"], ["sessions", "show"], ["events"], ["compact"], ["config"]]) {
      const viaHelp = await runCli(["help", ...command])
      const viaFlag = await runCli([...command, "--help"])
      expect(viaHelp.code, command.join(" ")).toBe(0)
      expect(viaHelp.stdout).toBe(viaFlag.stdout)
      expect(viaHelp.stdout).toContain(`$ ${command.at(-1)}`)
    }
  })

  it("alone, it is logbook's help; an unknown command is a usage error that names it", async () => {
    const root = await runCli(["help"])
    expect(root.code).toBe(0)
    expect(root.stdout).toContain("COMMANDS")
    const unknown = await runCli(["help", "nosuch"])
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toContain('unknown command "nosuch"')
    expect(unknown.stderr).toContain(
      "the commands are chat, run, sessions, events, audit, replay, rerun, diff, blob, verify, stats, compact, export, import, config, mcp, plugins, hooks\n"
    )
  })
})

describe("latest", () => {
  it("names the most recently updated session wherever a session is asked for", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.text("one"), Reply.text("two"), Reply.text("three"))
    expect((await runCli([...ws.runArgs, "first"])).code).toBe(0)
    const first = await latestSession(ws.db, ws.dir)
    expect((await runCli([...ws.runArgs, "second, in a new session"])).code).toBe(0)
    const second = await latestSession(ws.db, ws.dir)
    expect(second).not.toBe(first)
    const shown = await runCli(["sessions", "show", "latest", "--db", ws.db, "--format", "json"])
    expect(shown.code).toBe(0)
    expect(JSON.parse(shown.stdout).sessionId).toBe(second)
    const events = await runCli(["events", "latest", "--db", ws.db, "--format", "json"])
    expect(events.stdout.split("\n")[0]).toContain(second)
    // run --session latest goes on with it
    expect((await runCli([...ws.runArgs, "--session", "latest", "third"])).code).toBe(0)
    expect(messagesOf(server.requests[2]!).map(contentText)).toEqual(["second, in a new session", "two", "third"])
  })

  it("with no session at all, latest is a usage error", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.text("one"))
    // a database with no session in it: a run that is refused before its session is created
    expect((await runCli([...ws.runArgs, "--session", "latest", "hi"])).code).toBe(2)
    expect(server.requests).toHaveLength(0)
  })
})
