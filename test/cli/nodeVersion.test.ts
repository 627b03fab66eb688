/**
 * The Node.js versions the built binary runs on: older than 22.12 it refuses with a message naming
 * the version and exits 1 before it opens anything (better-sqlite3 13's addon crashes Node 20).
 * The older Node is presented to dist/bin.js by a preload that sets `process.versions.node`; where
 * the machine's own `node` on PATH is older, the real one is run too.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { unsupportedNode } from "../../src/nodeVersion.js"
import { binPath, runCli, scratchDb } from "../support/cli.js"

const asNode = (version: string) => ({
  NODE_OPTIONS: `--import=data:text/javascript,${encodeURIComponent(
    `Object.defineProperty(process.versions, "node", { value: ${JSON.stringify(version)} })`
  )}`
})

describe("unsupportedNode", () => {
  it("accepts 22.12 and later, 24, 26 and newer majors; refuses what is older", () => {
    for (const ok of ["22.12.0", "22.23.3", "24.0.0", "24.21.0", "26.10.0", "27.0.0"]) {
      expect(unsupportedNode(ok)).toBeUndefined()
    }
    for (const old of ["20.20.2", "21.7.3", "22.11.0", "18.0.0"]) {
      expect(unsupportedNode(old)).toContain(`this is Node.js ${old}`)
    }
  })
})

describe("the built binary on an unsupported Node", () => {
  it.each(["20.20.2", "22.11.0"])("Node %s: a clear refusal, exit 1, no database created", async (version) => {
    const db = scratchDb()
    const result = await runCli(["sessions", "list", "--db", db], { env: asNode(version) })
    expect(result.stderr).toBe(
      `logbook: Node.js 22.12 or later is required (22, 24 and 26 are supported); this is Node.js ${version}\n`
    )
    expect(result.stdout).toBe("")
    expect(result.code).toBe(1)
    expect(fs.existsSync(db)).toBe(false)
    expect(fs.readdirSync(path.dirname(db))).toEqual([])
  })

  it("runs on the Node that runs the tests (a supported one)", async () => {
    const result = await runCli(["--version"])
    expect(result.stderr).toBe("")
    expect(result.code).toBe(0)
  })

  const systemNode = (() => {
    try {
      return execFileSync("node", ["-p", "process.versions.node"], { encoding: "utf8" }).trim()
    } catch {
      return undefined
    }
  })()
  it.skipIf(systemNode === undefined || unsupportedNode(systemNode) === undefined)(
    `the machine's own node (${systemNode}) refuses it too`,
    () => {
      let failure: { status?: number; stderr?: string } = {}
      try {
        execFileSync("node", [binPath, "--version"], { encoding: "utf8", stdio: "pipe" })
      } catch (error) {
        failure = error as typeof failure
      }
      expect(failure.status).toBe(1)
      expect(failure.stderr).toContain(`this is Node.js ${systemNode}`)
    }
  )
})
