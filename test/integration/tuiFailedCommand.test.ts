/**
 * The interactive screen (the built binary in tmux, against the scripted model server) shows a
 * command that exits non-zero as a failed call: a red ✗ with its exit code, never a green ✓, and
 * under it the last lines the command printed — not the closing `Exit code:` line.
 */
import { afterEach, describe, expect, it } from "vitest"
import { Reply } from "../support/scriptedServer.js"
import { hasTmux, runInTmux } from "../support/tmux.js"
import { makeJanitor, makeWorkspace } from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const ESC = String.fromCharCode(27)

describe.skipIf(!hasTmux)("the interactive screen", () => {
  it("shows a command that exits non-zero as failed, with its exit code and its last lines", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const command = "for i in 1 2 3 4 5; do echo line$i; done; echo oops >&2; exit 2"
    server.enqueue(
      Reply.stream({ toolCalls: [{ id: "call_1", name: "bash", arguments: JSON.stringify({ command }) }] }),
      Reply.text("It failed.")
    )
    const run = runInTmux(["--db", ws.db, "--cwd", ws.dir])
    janitor.defer(run.close)
    await run.waitFor(/idle │/)
    run.keys("-l", "go")
    await run.waitFor("│› go")
    run.keys("Enter")
    const screen = await run.waitFor("It failed.")
    expect(screen).toMatch(/✗ bash for i in 1 2 3 4 5.* {2}exit 2 · \d+(ms|\.\ds)/)
    expect(screen).not.toMatch(/✓ bash/)
    // the end of what it printed, its stderr last; the exit code is in the header, not in the tail
    expect(screen).toMatch(/│ … 3 lines above\n *│ line4\n *│ line5\n *│ oops\n/)
    expect(screen).not.toContain("Exit code: 2")
    // in red: the colour of failures
    expect(run.visible({ escapes: true })).toMatch(new RegExp(`${ESC}\\[(31|91)m✗`))
    run.keys("C-d")
    expect(await run.exited()).toBe(0)
  })
})
