/**
 * `logbook run` on a terminal: stdout is a pseudo-terminal made by util-linux `script`, so the
 * output takes its terminal form (colours, the live retry countdown). Skipped where `script` is
 * not the util-linux one.
 */
import { spawn, spawnSync } from "node:child_process"
import { afterEach, describe, expect, it } from "vitest"
import { baseEnv, binPath, shellQuote } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import { makeJanitor, makeWorkspace } from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const hasScript =
  process.platform === "linux" &&
  spawnSync("script", ["--version"], { encoding: "utf8" }).stdout?.includes("util-linux")

/** Runs `logbook <args>` with a terminal as stdout; resolves with everything it wrote. */
const runOnTerminal = (
  args: ReadonlyArray<string>
): Promise<{ readonly code: number | null; readonly output: string }> =>
  new Promise((resolve, reject) => {
    const env = baseEnv()
    const command = [process.execPath, binPath, ...args].map(shellQuote).join(" ")
    const child = spawn("script", ["-qfec", command, "/dev/null"], { env, stdio: ["ignore", "pipe", "pipe"] })
    janitor.defer(() => child.kill("SIGKILL"))
    let output = ""
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      output += chunk
    })
    child.on("error", reject)
    child.on("close", (code) => resolve({ code, output }))
  })

// biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI escapes
const plain = (text: string) => text.replace(/\u001b\[[0-9;]*[A-Za-z]/g, "")

describe.skipIf(!hasScript)("logbook run on a terminal", () => {
  it("shows the retry countdown while it waits, then clears it", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.error(429, { headers: { "retry-after": "2" } }), Reply.text("After the wait."))
    const result = await runOnTerminal([...ws.runArgs, "hello"])
    expect(result.code).toBe(0)
    const out = plain(result.output)
    // the countdown of the 2 s wait: its first tick says 2s, unless a busy machine drew it late
    expect(out).toMatch(/retry 2\/8 in (2s|1s|\d+ms): 429 rate limited/)
    expect(out).toContain("After the wait.")
    // the countdown line is cleared before the answer is written over it
    const countdown = result.output.indexOf("retry 2/8")
    const answer = result.output.indexOf("After the wait.")
    expect(countdown).toBeLessThan(answer)
    expect(result.output.slice(countdown, answer)).toContain("\r\u001b[2K")
  })
})
