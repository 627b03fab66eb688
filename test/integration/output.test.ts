/**
 * Where `logbook run`'s output goes (issue 10 §2), through the built binary in a real terminal
 * (tmux): stdout is the answer and stderr everything else, and a running command's line is alive.
 * The tests poll the screen for states and never wait on the clock.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { Reply } from "../support/scriptedServer.js"
import { hasTmux, runInTmux } from "../support/tmux.js"
import { latestSession, makeJanitor, makeWorkspace, ofType, readLog } from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const bash = (id: string, command: string) => ({ id, name: "bash", arguments: JSON.stringify({ command }) })

/** The rows of the visible screen, captured again (every 20 ms, up to 20 s) until one of them is `wanted`. */
const visibleWith = async (
  run: ReturnType<typeof runInTmux>,
  wanted: (row: string) => boolean
): Promise<Array<string>> => {
  for (let tries = 0; tries < 1_000; tries++) {
    const rows = run.visible().split("\n")
    if (rows.some(wanted)) return rows
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  throw new Error(`no such row on the screen:\n${run.visible()}`)
}

describe.skipIf(!hasTmux)("logbook run on a terminal: where the output goes", () => {
  it("stdout to a file: the file holds exactly the answer; the terminal (stderr) shows the rest", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(
      Reply.stream({ text: "Let me check.", toolCalls: [bash("call_echo", "echo checked")] }),
      Reply.text("The answer is 42.", { chunks: 3 })
    )
    const out = path.join(ws.dir, "..", `${path.basename(ws.dir)}-answer.md`)
    const run = runInTmux([...ws.runArgs, "what is the answer?"], { stdoutFile: out })
    janitor.defer(run.close)
    expect(await run.exited()).toBe(0)

    expect(fs.readFileSync(out, "utf8")).toBe("The answer is 42.\n")
    const screen = run.screen()
    const order = [
      screen.indexOf("Let me check.\n"),
      screen.search(/✓ bash echo checked {2}\d/),
      screen.indexOf("The answer is 42.\n"),
      screen.search(/tokens in \d+ · out \d+ · cost /)
    ]
    expect(order.every((at) => at >= 0)).toBe(true)
    expect(order).toEqual(order.slice().sort((a, b) => a - b))
  })

  it("a running command's line shows its elapsed time and last output line, in place, cleaned; then the final line", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    // output with a window title (OSC), a colour, a tab and a backspace; then it waits for the test's file
    const command =
      "echo starting; printf '\\033]0;pwned\\007progress \\033[31mred\\033[0m\\tok\\bK\\n'; " +
      "while [ ! -e go ]; do sleep 0.1; done; echo finished"
    server.enqueue(Reply.stream({ text: "Building.", toolCalls: [bash("call_slow", command)] }), Reply.text("Built."))
    const run = runInTmux([...ws.runArgs, "build it"])
    janitor.defer(run.close)

    // the live row: `⋯ bash <command>  <elapsed>  <last output line>`, the escapes and controls removed
    const row = /^⋯ bash echo starting;.* {2}(\d+)s {2}progress red okK$/m
    const first = await run.waitFor(row)
    const shown = Number(first.match(row)![1])
    // the elapsed time goes on, redrawn on the same row (one row on the screen, not one per second)
    const later = await run.waitFor(
      new RegExp(`^⋯ bash echo starting;.* {2}(?!${shown}s)\\d+s {2}progress red okK$`, "m"),
      30_000
    )
    expect(later.match(/^⋯ bash echo starting;/gm)).toHaveLength(1)
    expect(later.indexOf("Building.")).toBeLessThan(later.indexOf("⋯ bash echo starting;"))
    // the command's title sequence did not reach the terminal
    expect(run.title()).not.toBe("pwned")

    fs.writeFileSync(path.join(ws.dir, "go"), "")
    expect(await run.exited()).toBe(0)
    const screen = run.screen()
    // the row became the final line: no running row is left on the screen
    expect(screen).toMatch(/^✓ bash echo starting;.* {2}\d+(\.\d)?s$/m)
    expect(screen).not.toMatch(/^⋯ bash/m)
    expect(screen).toContain("Built.")
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    // the row showed what tool.progress carried
    expect(ofType(log, "tool.progress").some((e) => e.payload.output.includes("progress"))).toBe(true)
  })

  it("on a narrow terminal the live row is cut to its width and never wraps", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const command = `echo ${"a-long-output-line-".repeat(6)}; while [ ! -e go ]; do sleep 0.1; done`
    server.enqueue(Reply.stream({ toolCalls: [bash("call_wide", command)] }), Reply.text("Done."))
    const run = runInTmux([...ws.runArgs, "go"], { columns: 60, rows: 20 })
    janitor.defer(run.close)
    await run.waitFor(/⋯ bash echo a-long-output-line-/)
    // the visible screen at a moment the live row is drawn (a capture can fall between the erase
    // and the redraw of the row, which is updated while the command runs)
    const rows = await visibleWith(run, (row) => row.startsWith("⋯ bash"))
    const live = rows.filter((row) => row.startsWith("⋯ bash"))
    // one row, cut to 59 columns with an ellipsis, and no wrapped piece of it below
    expect(live).toHaveLength(1)
    expect(Array.from(live[0]!).length).toBeLessThanOrEqual(59)
    expect(live[0]!.endsWith("…")).toBe(true)
    expect(rows[rows.indexOf(live[0]!) + 1] ?? "").not.toMatch(/output-line/)
    fs.writeFileSync(path.join(ws.dir, "go"), "")
    expect(await run.exited()).toBe(0)
    expect(run.visible()).not.toMatch(/^⋯ bash/m)
  })
})
