/**
 * Vitest global setup: refuses a Node.js logbook does not support (the CLI would refuse every run),
 * then builds dist/bin.js once before any test file runs, so CLI tests exercise the bundle a user
 * installs.
 */
import { execFile } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { unsupportedNode } from "../../src/nodeVersion.js"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")

export default async function setup(): Promise<void> {
  const unsupported = unsupportedNode(process.versions.node)
  if (unsupported !== undefined) throw new Error(`${unsupported} (.ci/run fetches a supported one: docs/platform.md)`)
  try {
    await promisify(execFile)(process.execPath, [path.join(root, "scripts", "build.mjs"), "--quiet"], {
      cwd: root,
      timeout: 120_000
    })
  } catch (error) {
    const e = error as { stderr?: string; stdout?: string; message: string }
    throw new Error(`the build failed before the tests: ${e.stderr || e.stdout || e.message}`)
  }
}
