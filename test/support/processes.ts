import { type ChildProcess, spawn } from "node:child_process"
import * as path from "node:path"
import * as readline from "node:readline"

const root = path.resolve(import.meta.dirname, "..", "..")

/** Spawns a TypeScript file of the test suite as its own Node process (through tsx). */
export const spawnTs = (file: string, args: ReadonlyArray<string>): ChildProcess =>
  spawn(process.execPath, ["--import", "tsx", path.join(root, file), ...args], {
    cwd: root,
    stdio: ["pipe", "pipe", "pipe"]
  })

/** Resolves with the first stdout line equal to `expected`; rejects if the process exits first. */
export const waitForLine = (child: ChildProcess, expected: string, timeoutMs = 60_000): Promise<void> =>
  new Promise((resolve, reject) => {
    let stderr = ""
    child.stderr?.on("data", (d) => {
      stderr += String(d)
    })
    const rl = readline.createInterface({ input: child.stdout! })
    const timer = setTimeout(
      () => reject(new Error(`timed out waiting for "${expected}"; stderr: ${stderr}`)),
      timeoutMs
    )
    rl.on("line", (line) => {
      if (line === expected) {
        clearTimeout(timer)
        resolve()
      }
    })
    child.once("close", (code) => {
      clearTimeout(timer)
      reject(new Error(`process exited (${code}) before "${expected}"; stderr: ${stderr}`))
    })
  })

/** Resolves with the exit code. */
export const exitCode = (child: ChildProcess): Promise<number | null> =>
  new Promise((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode)
    else child.once("exit", (code) => resolve(code))
  })
