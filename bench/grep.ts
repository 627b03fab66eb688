/**
 * grep: the JavaScript search against the ripgrep one (`runGrep` with each backend forced),
 * alternated in one run on generated trees: a large one (20,000 files, about 100 MB), a small one
 * (5 files), and a sweep of sizes in between that shows where ripgrep starts to pay off
 * (`RIPGREP_MIN_FILES`). Fails on a wrong result: both searches must give the same output and
 * metadata, and the ripgrep one must really have used ripgrep.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect, Option } from "effect"
import { type GrepInput, type GrepRun, RIPGREP_MIN_FILES, runGrep } from "../src/tools/grep.js"
import { locateRipgrep } from "../src/tools/ripgrep.js"
import { testContext } from "../test/support/toolContext.js"
import { median, now } from "./util.js"

export interface GrepTree {
  readonly dir: string
  /** files searched (the ignored ones left out) */
  readonly files: number
  readonly bytes: number
}

const WORDS = [
  "const",
  "let",
  "function",
  "return",
  "import",
  "export",
  "value",
  "result",
  "error",
  "config",
  "session",
  "state",
  "event",
  "handler",
  "request",
  "response",
  "string",
  "number",
  "await",
  "async",
  "if",
  "else",
  "for",
  "while",
  "new",
  "this",
  "map",
  "filter",
  "reduce",
  "length"
]

/**
 * A tree of `files` source-like files of about `fileBytes` each, 50 to a directory, 1,000 to a
 * package; every 997th file holds `needle_marker` once; every 1,000th is binary (a NUL near the
 * start). Ignored, and never searched: `dist/` (by the root `.gitignore`) and `node_modules/`.
 */
export const makeGrepTree = (dir: string, files: number, fileBytes = 5_200): GrepTree => {
  fs.rmSync(dir, { recursive: true, force: true })
  fs.mkdirSync(dir, { recursive: true })
  let seed = 1
  const random = () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648
    return seed / 2_147_483_648
  }
  const line = () => {
    let text = "  ".repeat(Math.floor(random() * 4))
    const words = 3 + Math.floor(random() * 9)
    for (let w = 0; w < words; w++) text += WORDS[Math.floor(random() * WORDS.length)] + (random() < 0.2 ? "(" : " ")
    return text
  }
  fs.writeFileSync(path.join(dir, ".gitignore"), "dist/\n*.log\n")
  for (const ignored of ["dist/bundle.js", "node_modules/pkg/index.js"]) {
    fs.mkdirSync(path.dirname(path.join(dir, ignored)), { recursive: true })
    fs.writeFileSync(path.join(dir, ignored), "needle_marker value\n".repeat(1000))
  }
  let bytes = 0
  for (let i = 0; i < files; i++) {
    const sub = path.join(dir, `pkg${Math.floor(i / 1000)}`, `mod${Math.floor(i / 50) % 20}`)
    if (i % 50 === 0) fs.mkdirSync(sub, { recursive: true })
    let text = i % 1000 === 999 ? "binary\0" : ""
    while (text.length < fileBytes) text += `${line()}\n`
    if (i % 997 === 0) text += "  // TODO needle_marker here\n"
    fs.writeFileSync(path.join(sub, `file${i}.ts`), text)
    bytes += Buffer.byteLength(text)
  }
  return { dir, files, bytes }
}

export interface GrepPattern {
  readonly label: string
  readonly input: Omit<GrepInput, "path">
}

export const PATTERNS: ReadonlyArray<GrepPattern> = [
  { label: "rare literal", input: { pattern: "needle_marker" } },
  { label: "rare, ignoreCase", input: { pattern: "NEEDLE_MARKER", ignoreCase: true } },
  { label: "regex, common", input: { pattern: "\\b(?:async|await)\\s+\\w+\\(" } },
  { label: "broad (most lines)", input: { pattern: "value" } }
]

export interface GrepTiming {
  readonly jsMs: number
  readonly rgMs: number
  /** ripgrep over JavaScript */
  readonly ratio: number
  readonly matches: number
  readonly files: number
}

export interface GrepCase extends GrepTiming {
  readonly tree: string
  readonly pattern: string
}

export interface GrepSweepPoint {
  readonly files: number
  readonly rare: GrepTiming
  readonly broad: GrepTiming
}

export type GrepResult =
  | {
      readonly _tag: "Measured"
      readonly rg: string
      readonly big: GrepTree
      readonly rounds: number
      readonly cases: ReadonlyArray<GrepCase>
      readonly sweepRounds: number
      readonly sweep: ReadonlyArray<GrepSweepPoint>
      /** the smallest size of the sweep from which ripgrep was faster for both patterns */
      readonly crossover: number | undefined
    }
  | { readonly _tag: "Skipped"; readonly reason: string }

const runOnce = async (tree: GrepTree, input: GrepPattern["input"], backend: "javascript" | "ripgrep") => {
  const start = now()
  const run: GrepRun = await Effect.runPromise(runGrep(input, testContext(tree.dir), backend))
  const ms = now() - start
  if (run.backend !== backend) {
    throw new Error(`grep /${input.pattern}/ asked for ${backend} ran ${run.backend}: ${run.reason ?? ""}`)
  }
  return { ms, run }
}

/** `rounds` measured pairs after one unmeasured pair, which one goes first alternating; medians. */
export const timeBoth = async (tree: GrepTree, input: GrepPattern["input"], rounds: number): Promise<GrepTiming> => {
  const js: Array<number> = []
  const rg: Array<number> = []
  let last: GrepRun | undefined
  for (let round = 0; round <= rounds; round++) {
    const order = round % 2 === 0 ? (["javascript", "ripgrep"] as const) : (["ripgrep", "javascript"] as const)
    const runs: Partial<Record<"javascript" | "ripgrep", GrepRun>> = {}
    for (const backend of order) {
      const { ms, run } = await runOnce(tree, input, backend)
      runs[backend] = run
      if (round > 0) (backend === "javascript" ? js : rg).push(ms)
    }
    const a = runs.javascript!
    const b = runs.ripgrep!
    if (a.output !== b.output || JSON.stringify(a.metadata) !== JSON.stringify(b.metadata)) {
      throw new Error(
        `grep /${input.pattern}/ in ${tree.dir}: ripgrep and JavaScript disagree\n` +
          `JavaScript ${JSON.stringify(a.metadata)}:\n${a.output.slice(0, 2000)}\n` +
          `ripgrep ${JSON.stringify(b.metadata)}:\n${b.output.slice(0, 2000)}`
      )
    }
    last = a
  }
  const jsMs = median(js)
  const rgMs = median(rg)
  return { jsMs, rgMs, ratio: rgMs / jsMs, matches: last!.metadata.matches, files: last!.metadata.files }
}

export const benchGrep = async (
  dir: string,
  options: { readonly quick: boolean; readonly log: (line: string) => void }
): Promise<GrepResult> => {
  const rg = await Effect.runPromise(locateRipgrep)
  if (Option.isNone(rg)) {
    return { _tag: "Skipped", reason: "no ripgrep: install it (e.g. apt-get install ripgrep) or set LOGBOOK_RIPGREP" }
  }
  const bigFiles = options.quick ? 2_000 : 20_000
  const rounds = options.quick ? 2 : 3
  const sweepRounds = options.quick ? 5 : 11
  const sizes = options.quick ? [5, 20, 50, 200] : [5, 10, 20, 30, 50, 100, 200, 500, 1_000]

  options.log(`  generating ${bigFiles.toLocaleString("en-US")} files …`)
  const big = makeGrepTree(path.join(dir, "big"), bigFiles)
  const small = makeGrepTree(path.join(dir, "small"), 5)
  const cases: Array<GrepCase> = []
  for (const [name, tree, n] of [
    ["big", big, rounds],
    ["small", small, sweepRounds * 2]
  ] as const) {
    for (const p of PATTERNS) {
      const t = await timeBoth(tree, p.input, n)
      options.log(
        `  ${name} tree, ${p.label}: JavaScript ${t.jsMs.toFixed(1)} ms, ripgrep ${t.rgMs.toFixed(1)} ms (${t.matches} lines)`
      )
      cases.push({ tree: name, pattern: p.label, ...t })
    }
  }

  const sweep: Array<GrepSweepPoint> = []
  for (const files of sizes) {
    const tree = makeGrepTree(path.join(dir, `sweep-${files}`), files)
    const rare = await timeBoth(tree, PATTERNS[0]!.input, sweepRounds)
    const broad = await timeBoth(tree, PATTERNS[3]!.input, sweepRounds)
    options.log(
      `  ${files} files: rare ${rare.jsMs.toFixed(1)} / ${rare.rgMs.toFixed(1)} ms, broad ${broad.jsMs.toFixed(1)} / ${broad.rgMs.toFixed(1)} ms (JavaScript / ripgrep)`
    )
    sweep.push({ files, rare, broad })
    fs.rmSync(tree.dir, { recursive: true, force: true })
  }
  // the first size from which ripgrep stays faster for both patterns
  let crossover: number | undefined
  for (let i = sweep.length - 1; i >= 0; i--) {
    const p = sweep[i]!
    if (p.rare.ratio < 1 && p.broad.ratio < 1) crossover = p.files
    else break
  }
  const version = spawnSync(rg.value, ["--version"], { encoding: "utf8" }).stdout.split("\n")[0]?.trim() ?? ""
  return { _tag: "Measured", rg: `${rg.value}, ${version}`, big, rounds, cases, sweepRounds, sweep, crossover }
}

export { RIPGREP_MIN_FILES }
