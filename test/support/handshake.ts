/**
 * The test side of confine.ts's test seam (`HANDSHAKE_ENV`): a tool (in this process or a built
 * binary) that has checked a path waits before opening it until the test says go; the test does
 * what an attacker would do in that window (swap a directory for a symlink) first. Deterministic:
 * nothing depends on timing, only on the order of the handshakes.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { HANDSHAKE_ENV } from "../../src/tools/confine.js"
import { tempDir } from "./tmp.js"

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export interface Handshakes {
  /** the prefix the variable names */
  readonly prefix: string
  /** the environment that turns the seam on */
  readonly env: Record<string, string>
  /** every path a checked open was about to open, in order */
  readonly seen: Array<string>
  /**
   * Answers the handshakes until `settled()` (the tool ended): `onCheck` runs before each go, with
   * the path about to be opened and its number (1, 2 …). Rejects after `timeoutMs` (a broken test).
   */
  readonly serve: (
    settled: () => boolean,
    onCheck: (opening: string, n: number) => void,
    timeoutMs?: number
  ) => Promise<void>
}

export const makeHandshakes = (): Handshakes => {
  const prefix = path.join(tempDir("logbook-handshake-"), "seam")
  const seen: Array<string> = []
  const checked = `${prefix}.checked`
  const go = `${prefix}.go`
  const serve = async (settled: () => boolean, onCheck: (opening: string, n: number) => void, timeoutMs = 30_000) => {
    const deadline = Date.now() + timeoutMs
    while (true) {
      if (Date.now() > deadline) throw new Error("the handshakes did not end")
      if (fs.existsSync(checked)) {
        const opening = fs.readFileSync(checked, "utf8")
        seen.push(opening)
        onCheck(opening, seen.length)
        fs.writeFileSync(go, "")
        while (fs.existsSync(go)) {
          if (Date.now() > deadline) throw new Error("the tool did not take the go")
          await pause(2)
        }
        continue
      }
      if (settled()) return
      await pause(2)
    }
  }
  return { prefix, env: { [HANDSHAKE_ENV]: prefix }, seen, serve }
}

/** Replaces the directory `dir` with a symlink to `target` (the original kept beside it). */
export const swapForSymlink = (dir: string, target: string): void => {
  fs.renameSync(dir, `${dir}.orig`)
  fs.symlinkSync(target, dir)
}
