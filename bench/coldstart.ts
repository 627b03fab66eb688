/**
 * Cold start: `node dist/bin.js --version` over `node -e 0`, spawned alternately in one run, so the
 * ratio is what the CLI adds to a bare node start on this machine.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { startBytes } from "./startup.js"
import { median, now } from "./util.js"

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), "..")
export const BIN = path.join(root, "dist", "bin.js")

/** The environment of the children: no loader flags inherited from this process (tsx). */
const childEnv = (): NodeJS.ProcessEnv => {
  const env = { ...process.env }
  delete env.NODE_OPTIONS
  return env
}

/** Wall time of one spawn until the child has exited (ms); throws if it fails. */
const timeSpawn = (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv): { ms: number; stdout: string } => {
  const start = now()
  const result = spawnSync(process.execPath, args, { env, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })
  const ms = now() - start
  if (result.error !== undefined) throw result.error
  if (result.status !== 0) {
    throw new Error(`node ${args.join(" ")} exited with ${result.status}: ${result.stderr.trim()}`)
  }
  return { ms, stdout: result.stdout }
}

export interface ColdStartResult {
  readonly runs: number
  /** medians, ms */
  readonly binMs: number
  readonly nodeMs: number
  /** bin over bare node */
  readonly ratio: number
  readonly version: string
  /** what a start reads: bin.js and the chunks it imports statically */
  readonly bundleBytes: number
}

/** Spawns both commands alternately `runs` times each, after `warmup` unmeasured pairs. */
export const benchColdStart = (runs = 20, warmup = 2): ColdStartResult => {
  if (!fs.existsSync(BIN)) throw new Error(`${BIN} is missing: run \`npm run build\` first`)
  const expected = (JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")) as { version: string }).version
  const env = childEnv()
  const bin: Array<number> = []
  const node: Array<number> = []
  let version = ""
  for (let i = 0; i < warmup + runs; i++) {
    // alternate which goes first, so neither always follows the other
    const order = i % 2 === 0 ? (["bin", "node"] as const) : (["node", "bin"] as const)
    for (const which of order) {
      if (which === "bin") {
        const { ms, stdout } = timeSpawn([BIN, "--version"], env)
        version = stdout.trim()
        if (version !== expected) throw new Error(`logbook --version printed "${version}", expected "${expected}"`)
        if (i >= warmup) bin.push(ms)
      } else {
        const { ms } = timeSpawn(["-e", "0"], env)
        if (i >= warmup) node.push(ms)
      }
    }
  }
  const binMs = median(bin)
  const nodeMs = median(node)
  return { runs, binMs, nodeMs, ratio: binMs / nodeMs, version, bundleBytes: startBytes(path.dirname(BIN)) }
}
