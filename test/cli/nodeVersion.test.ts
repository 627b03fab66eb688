/**
 * The Node.js versions the built binary runs on: older than 22.12 it refuses with a message naming
 * the version and exits 1 before it opens anything (better-sqlite3 13's addon crashes Node 20; see
 * docs/platform.md).
 * The older Node is presented to dist/bin.js by a preload that sets `process.versions.node`; where
 * the machine's own `node` on PATH is older, the real one is run too.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { binPath, runCli, scratchDb } from "../support/cli.js"

const asNode = (version: string) => ({
  NODE_OPTIONS: `--import=data:text/javascript,${encodeURIComponent(
    `Object.defineProperty(process.versions, "node", { value: ${JSON.stringify(version)} })`
  )}`
})

const refusal = (version: string) =>
  `logbook: Node.js 22.12 or later is required (22, 24 and 26 are supported); this is Node.js ${version}\n`

describe("the built binary's Node check", () => {
  it.each(["22.12.0", "24.0.0", "26.10.0", "27.0.0"])("Node %s: runs", async (version) => {
    const result = await runCli(["--version"], { env: asNode(version) })
    expect(result.stderr).toBe("")
    expect(result.code).toBe(0)
  })
})

describe("the built binary on an unsupported Node", () => {
  it.each(["20.20.2", "21.7.3", "22.11.0"])(
    "Node %s: a clear refusal, exit 1, no database created",
    async (version) => {
      const db = scratchDb()
      const result = await runCli(["sessions", "list", "--db", db], { env: asNode(version) })
      expect(result.stderr).toBe(refusal(version))
      expect(result.stdout).toBe("")
      expect(result.code).toBe(1)
      expect(fs.existsSync(db)).toBe(false)
      expect(fs.readdirSync(path.dirname(db))).toEqual([])
    }
  )

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
  const [major = 0, minor = 0] = (systemNode ?? "").split(".").map(Number)
  it.skipIf(systemNode === undefined || major > 22 || (major === 22 && minor >= 12))(
    `the machine's own node (${systemNode}) is refused too`,
    () => {
      let failure: { status?: number; stderr?: string } = {}
      try {
        execFileSync("node", [binPath, "--version"], { encoding: "utf8", stdio: "pipe" })
      } catch (error) {
        failure = error as typeof failure
      }
      expect(failure.status).toBe(1)
      expect(failure.stderr).toBe(refusal(systemNode!))
    }
  )
})
