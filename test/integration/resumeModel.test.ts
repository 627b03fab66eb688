/**
 * Resuming a session never changes its model behind the user's back, through the built binary:
 * two providers of the workspace's config, each served by its own scripted server, so which server
 * a request reached says which model was used. `run -s`, `run -c`, `compact` and the interactive
 * session (`-c`, `/sessions`) go on with the model the session last used; `-m` switches it and
 * the switch is an event (`model.switched`) shown by `run`, on the screen and by `sessions show`;
 * a session whose provider is gone is an error naming it, and nothing is sent or written.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runCli, scratchDir } from "../support/cli.js"
import { Reply, type ScriptedServer } from "../support/scriptedServer.js"
import { hasTmux, runInTmux } from "../support/tmux.js"
import { fastRetry, latestSession, makeJanitor, ofType, readLog, types } from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

/** A workspace whose config has two providers: `local` (the default, `local/scripted`) and `other`. */
const twoProviders = async () => {
  const local = await janitor.server()
  const other = await janitor.server()
  const dir = scratchDir()
  const db = path.join(dir, "logbook.db")
  const workspace = path.join(dir, "ws")
  fs.mkdirSync(workspace)
  const provider = (server: ScriptedServer, model: string) => ({
    type: "openai-compatible",
    baseURL: `${server.url}/v1`,
    models: { [model]: {} }
  })
  const writeConfig = (providers: Record<string, unknown>) =>
    fs.writeFileSync(
      path.join(workspace, "logbook.json"),
      JSON.stringify({ model: "local/scripted", retry: fastRetry, provider: providers }, null, 2)
    )
  const both = { local: provider(local, "scripted"), other: provider(other, "big") }
  writeConfig(both)
  return {
    local,
    other,
    db,
    dir: workspace,
    args: ["--db", db, "--cwd", workspace],
    run: (...rest: ReadonlyArray<string>) => runCli(["run", "--db", db, "--cwd", workspace, ...rest]),
    /** the config without provider `other` */
    removeOther: () => writeConfig({ local: both.local })
  }
}

describe("resuming a session keeps its model", () => {
  it("run -s and run -c go on with the model the session last used, not the config's default", async () => {
    const ws = await twoProviders()
    ws.other.enqueue(Reply.text("one"), Reply.text("two"), Reply.text("three"))
    const first = await ws.run("-m", "other/big", "first")
    expect(first.code).toBe(0)
    const id = await latestSession(ws.db, ws.dir)

    const byId = await ws.run("-s", id, "second")
    expect(byId.stderr).not.toContain("→")
    expect(byId.code).toBe(0)
    expect(byId.stdout).toBe("two\n")
    const latest = await ws.run("-c", "third")
    expect(latest.code).toBe(0)
    expect(latest.stdout).toBe("three\n")

    // every request went to the session's model; the default provider was never asked
    expect(ws.local.requests).toHaveLength(0)
    expect(ws.other.requests.map((request) => request.body.model)).toEqual(["big", "big", "big"])
    const log = await readLog(ws.db, id)
    expect(ofType(log, "model.switched")).toEqual([])
    expect(ofType(log, "assistant.started").map((e) => e.payload.model)).toEqual([
      "other/big",
      "other/big",
      "other/big"
    ])
  })

  it("-m on resume switches the model: model.switched before the turn, shown by run and sessions show; later resumes keep the new one", async () => {
    const ws = await twoProviders()
    ws.other.enqueue(Reply.text("from big"))
    ws.local.enqueue(Reply.text("from scripted"), Reply.text("still scripted"))
    expect((await ws.run("-m", "other/big", "first")).code).toBe(0)
    const id = await latestSession(ws.db, ws.dir)

    const switched = await ws.run("-s", id, "-m", "local/scripted", "second")
    expect(switched.code).toBe(0)
    expect(switched.stdout).toBe("from scripted\n")
    expect(switched.stderr).toContain("model other/big → local/scripted")
    // the whole history went to the model the user chose, and the switch is in the log before the turn
    expect(ws.local.requests).toHaveLength(1)
    expect(JSON.stringify(ws.local.requests[0]!.body.messages)).toContain("from big")
    const log = await readLog(ws.db, id)
    const switches = ofType(log, "model.switched")
    expect(switches.map((e) => e.payload)).toEqual([{ from: "other/big", to: "local/scripted" }])
    const tail = types(log).slice(types(log).indexOf("model.switched"))
    expect(tail.slice(0, 3)).toEqual(["model.switched", "user.message", "turn.started"])

    const shown = await runCli(["sessions", "show", id, "--db", ws.db])
    expect(shown.code).toBe(0)
    expect(shown.stdout).toMatch(/model +local\/scripted/)
    // in the conversation: after the first answer, before the message sent to the new model
    const at = shown.stdout.indexOf("switched from other/big to local/scripted")
    expect(at).toBeGreaterThan(shown.stdout.indexOf("from big"))
    expect(at).toBeLessThan(shown.stdout.indexOf("second"))
    const json = JSON.parse((await runCli(["sessions", "show", id, "--db", ws.db, "--format", "json"])).stdout)
    expect(json.model).toBe("local/scripted")
    expect(json.modelSwitches).toMatchObject([{ from: "other/big", to: "local/scripted", beforeMessage: 2 }])
    const events = await runCli(["events", id, "--db", ws.db, "--type", "model.switched"])
    expect(events.stdout).toContain("other/big → local/scripted")

    // the next resume without -m stays on the model switched to, and records no other switch
    const again = await ws.run("-c", "third")
    expect(again.code).toBe(0)
    expect(again.stdout).toBe("still scripted\n")
    expect(ws.other.requests).toHaveLength(1)
    expect(ofType(await readLog(ws.db, id), "model.switched")).toHaveLength(1)

    // a re-run of the session takes the switch in its stride, and sends nothing
    const rerun = await runCli(["rerun", id, "--db", ws.db, "--format", "json"])
    expect(rerun.code, rerun.stderr + rerun.stdout).toBe(0)
    expect(JSON.parse(rerun.stdout).outcome).toEqual({ _tag: "match" })
    expect(ws.local.requests).toHaveLength(2)
    expect(ws.other.requests).toHaveLength(1)
  })

  it("a session whose provider is no longer configured: exit 2 naming the model and the provider, nothing sent or written", async () => {
    const ws = await twoProviders()
    ws.other.enqueue(Reply.text("one"))
    expect((await ws.run("-m", "other/big", "first")).code).toBe(0)
    const id = await latestSession(ws.db, ws.dir)
    const before = (await readLog(ws.db, id)).length
    ws.removeOther()

    for (const resume of [["-s", id], ["-c"]]) {
      const result = await ws.run(...resume, "go on")
      expect(result.code).toBe(2)
      expect(result.stderr).toContain(
        'this session is on the model "other/big", whose provider "other" is not configured'
      )
      expect(result.stderr).toContain("--model")
      expect(result.stdout).toBe("")
    }
    const compacted = await runCli(["compact", id, "--db", ws.db, "--cwd", ws.dir])
    expect(compacted.code).toBe(2)
    expect(compacted.stderr).toContain('provider "other" is not configured')
    // nothing was sent anywhere, and the log did not change
    expect(ws.local.requests).toHaveLength(0)
    expect(ws.other.requests).toHaveLength(1)
    expect(await readLog(ws.db, id)).toHaveLength(before)

    // --model is the way on: the switch is recorded
    ws.local.enqueue(Reply.text("on scripted"))
    const switched = await ws.run("-s", id, "-m", "local/scripted", "go on")
    expect(switched.code).toBe(0)
    expect(ofType(await readLog(ws.db, id), "model.switched").map((e) => e.payload)).toEqual([
      { from: "other/big", to: "local/scripted" }
    ])
  })

  it("compact writes the summary with the model the session is on", async () => {
    const ws = await twoProviders()
    ws.other.enqueue(Reply.text("one"), Reply.text("a summary"))
    expect((await ws.run("-m", "other/big", "first")).code).toBe(0)
    const id = await latestSession(ws.db, ws.dir)
    const compacted = await runCli(["compact", id, "--db", ws.db, "--cwd", ws.dir])
    expect(compacted.code).toBe(0)
    expect(ws.local.requests).toHaveLength(0)
    expect(ws.other.requests).toHaveLength(2)
  })
})

describe.skipIf(!hasTmux)("the interactive session keeps a session's model", () => {
  it("-c and /sessions open a session on its own model (the status line says which); a removed provider is an error", async () => {
    const ws = await twoProviders()
    ws.other.enqueue(Reply.text("big answer"), Reply.text("big again"), Reply.text("big last"))
    ws.local.enqueue(Reply.text("scripted first"), Reply.text("scripted answer"), Reply.text("after the switch"))
    expect((await ws.run("first on scripted")).code).toBe(0)
    const onScripted = await latestSession(ws.db, ws.dir)
    expect((await ws.run("-m", "other/big", "first on big")).code).toBe(0)
    const onBig = await latestSession(ws.db, ws.dir)

    // -c: the latest session (on other/big), not the config's local/scripted
    const run = runInTmux(["-c", ...ws.args])
    janitor.defer(run.close)
    await run.waitFor(new RegExp(`idle │ other/big │ .*${onBig}`))
    run.keys("-l", "/sessions")
    await run.waitFor("│› /sessions")
    run.keys("Enter")
    await run.waitFor("Sessions in this directory")
    // the picker starts at the newest (this one); down to the session on local/scripted
    run.keys("Down")
    await run.waitFor(new RegExp(`❯ .*${onScripted.slice(0, 8)}`))
    run.keys("Enter")
    await run.waitFor(new RegExp(`idle │ local/scripted │ .*${onScripted}`))
    run.keys("-l", "more")
    await run.waitFor("│› more")
    run.keys("Enter")
    await run.waitFor("scripted answer")
    expect(ws.local.requests.map((request) => request.body.model)).toEqual(["scripted", "scripted"])
    expect(ws.other.requests).toHaveLength(1)
    // back to the session on other/big: its model again, and a message goes there
    run.keys("-l", "/sessions")
    await run.waitFor("│› /sessions")
    run.keys("Enter")
    await run.waitFor("Sessions in this directory")
    await run.waitFor(new RegExp(`❯ .*${onScripted.slice(0, 8)}`))
    run.keys("Down")
    await run.waitFor(new RegExp(`❯ .*${onBig.slice(0, 8)}`))
    run.keys("Enter")
    await run.waitFor(new RegExp(`idle │ other/big │ .*${onBig}`))
    run.keys("-l", "again")
    await run.waitFor("│› again")
    run.keys("Enter")
    await run.waitFor("big again")
    expect(ws.other.requests.map((request) => request.body.model)).toEqual(["big", "big"])
    expect(ofType(await readLog(ws.db, onBig), "model.switched")).toEqual([])
    expect(ofType(await readLog(ws.db, onScripted), "model.switched")).toEqual([])
    // /model switches it: the next message records the switch, and the screen shows it
    run.keys("-l", "/model local/scripted")
    await run.waitFor("│› /model local/scripted")
    run.keys("Enter")
    await run.waitFor(new RegExp(`idle │ local/scripted │ .*${onBig}`))
    run.keys("-l", "switch")
    await run.waitFor("│› switch")
    run.keys("Enter")
    await run.waitFor("after the switch")
    await run.waitFor(new RegExp(`idle │ local/scripted │ .*${onBig}`))
    expect(run.screen()).toContain("model other/big → local/scripted")
    expect(ofType(await readLog(ws.db, onBig), "model.switched").map((e) => e.payload)).toEqual([
      { from: "other/big", to: "local/scripted" }
    ])
    run.keys("C-d")
    expect(await run.exited()).toBe(0)

    // the provider of the latest session removed: an error before the screen, nothing sent
    expect((await ws.run("-m", "other/big", "last on big")).code).toBe(0)
    ws.removeOther()
    const refused = runInTmux(["-c", ...ws.args])
    janitor.defer(refused.close)
    expect(await refused.exited()).toBe(2)
    expect(refused.screen()).toContain('whose provider "other" is not configured')
    expect(ws.other.requests).toHaveLength(3)
    expect(ws.local.requests).toHaveLength(3)
  })
})
