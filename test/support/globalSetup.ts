/**
 * Vitest global setup: builds dist/bin.js once before any test file runs, so CLI tests exercise
 * the bundle a user installs; then stops at once when that binary refuses this Node (an unsupported
 * one: every CLI test would fail).
 */
import { execFile } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")

export default async function setup(): Promise<void> {
  try {
    await promisify(execFile)(process.execPath, [path.join(root, "scripts", "build.mjs"), "--quiet"], {
      cwd: root,
      timeout: 120_000
    })
  } catch (error) {
    const e = error as { stderr?: string; stdout?: string; message: string }
    throw new Error(`the build failed before the tests: ${e.stderr || e.stdout || e.message}`)
  }
  try {
    await promisify(execFile)(process.execPath, [path.join(root, "dist", "bin.js"), "--version"], { timeout: 60_000 })
  } catch (error) {
    const e = error as { stderr?: string; message: string }
    throw new Error(`${e.stderr || e.message}(.ci/run fetches a supported Node: docs/platform.md)`)
  }
}
