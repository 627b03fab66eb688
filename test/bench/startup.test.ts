/**
 * The first-frame measurement of bench/startup.ts: it times a command in a tmux terminal until
 * its text is on the screen (the built binary's --version as the stand-in), and gives up with the
 * screen when the text never comes. The figures themselves are the benchmark's, not asserted here.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { hasTmux, timeToFirstFrame } from "../../bench/startup.js"
import { baseEnv, binPath, root, scratchDir } from "../support/cli.js"

const version = (JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")) as { version: string }).version

describe.skipIf(!hasTmux())("timeToFirstFrame", () => {
  it("times logbook --version until its version is on the screen", async () => {
    const ms = await timeToFirstFrame([process.execPath, binPath, "--version"], version, {
      cwd: scratchDir(),
      env: baseEnv()
    })
    expect(ms).toBeGreaterThan(0)
    expect(ms).toBeLessThan(20_000)
  })

  it("fails with the screen when the marker never shows", async () => {
    await expect(
      timeToFirstFrame([process.execPath, "-e", "console.log('something else')"], "no such text", {
        env: baseEnv(),
        timeoutMs: 1500
      })
    ).rejects.toThrow(/"no such text" did not appear on the screen; it shows:\n[\s\S]*something else/)
  })
})
