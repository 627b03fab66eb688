/**
 * The interactive session through the built binary in a real terminal (tmux) against the scripted
 * model server: start, type, see the stream and the tool parts; steer, queue, interrupt, approve,
 * resume, resize, NO_COLOR.
 */
import { afterEach, describe, expect, it } from "vitest"
import { Reply } from "../support/scriptedServer.js"
import { hasTmux, runInTmux } from "../support/tmux.js"
import { makeJanitor, makeWorkspace } from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const chatArgs = (ws: { readonly db: string; readonly dir: string }) => ["--db", ws.db, "--cwd", ws.dir]

describe.skipIf(!hasTmux)("logbook on a terminal: the interactive session", () => {
  it("smoke", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.text("Hi **there**, I am `logbook`."))
    const run = runInTmux(chatArgs(ws))
    janitor.defer(run.close)
    await run.waitFor("idle")
    run.keys("-l", "hello")
    await run.waitFor("hello")
    run.keys("Enter")
    await run.waitFor("I am logbook")
    console.log(run.screen())
    run.keys("C-d")
    expect(await run.exited()).toBe(0)
  })
})
