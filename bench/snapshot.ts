/**
 * snapshot: the cost per command of the workspace snapshots (docs/workspace.md) on a generated
 * 10,000-file workspace (`makeGrepTree`, each file made unique), side by side with the alternative OpenCode and Gemini CLI
 * use, a shadow git repository (`git add -A && git write-tree`, plus `git diff --name-status` to
 * learn what changed). Alternated in each round, on the same tree and the same changes:
 * - baseline: the first command of a session (ours: every file read, hashed, stored as a blob in a
 *   real SQLite log, the manifest document stored; git: `init` + `add -A` + `write-tree`);
 * - unchanged: a command that changed nothing (ours: a stat walk; git: `add -A` + `write-tree`);
 * - 10 changed: a command that changed 10 files (ours: the walk, 10 files read and stored, the
 *   diff; git: `add -A` + `write-tree` + `diff --name-status`).
 * Fails on a wrong result: both must find exactly the 10 changed files.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect, type Layer, ManagedRuntime } from "effect"
import { EventStore } from "../src/store/EventStore.js"
import {
  defaultSnapshotLimits,
  diffManifests,
  type Manifest,
  manifestDocument,
  scanWorkspace
} from "../src/tools/WorkspaceSnapshot.js"
import { makeGrepTree } from "./grep.js"
import { fileSize, median, now } from "./util.js"

/** the default bounds, but no time bound: on a loaded machine the baseline can pass it, and the next scan then reads the rest */
const LIMITS = { ...defaultSnapshotLimits, maxScanMs: 600_000 }

export interface SnapshotTiming {
  readonly oursMs: number
  readonly gitMs: number
}

export type SnapshotResult =
  | {
      readonly _tag: "Measured"
      readonly files: number
      readonly bytes: number
      readonly rounds: number
      readonly baseline: SnapshotTiming
      readonly unchanged: SnapshotTiming
      readonly changed: SnapshotTiming
      /** bytes the log grew by for the baseline (blobs + manifest) and the shadow repository's size */
      readonly oursBaselineBytes: number
      readonly gitBaselineBytes: number
    }
  | { readonly _tag: "Skipped"; readonly reason: string }

const dirSize = (dir: string): number => {
  let total = 0
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) total += fs.statSync(path.join(entry.parentPath, entry.name)).size
  }
  return total
}

const git = (gitDir: string, workTree: string, args: ReadonlyArray<string>): string => {
  const result = spawnSync("git", [`--git-dir=${gitDir}`, `--work-tree=${workTree}`, ...args], {
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024
  })
  if (result.status !== 0) throw new Error(`git ${args.join(" ")}: ${result.stderr}`)
  return result.stdout
}

export const benchSnapshot = async (
  dir: string,
  options: { readonly quick: boolean; readonly log: (line: string) => void }
): Promise<SnapshotResult> => {
  if (spawnSync("git", ["--version"]).status !== 0) return { _tag: "Skipped", reason: "git is not installed" }
  const files = options.quick ? 2_000 : 10_000
  const rounds = options.quick ? 3 : 7
  const tree = makeGrepTree(path.join(dir, "ws"), files, 2_000)
  // the generated lines repeat from file to file: a line of its own makes every file unique, as in a real tree
  for (let i = 0; i < files; i++) {
    const file = path.join(tree.dir, `pkg${Math.floor(i / 1000)}`, `mod${Math.floor(i / 50) % 20}`, `file${i}.ts`)
    fs.appendFileSync(file, `// file ${i}\n`)
  }
  const db = path.join(dir, "log.db")
  const openLog = () => ManagedRuntime.make(EventStore.layerSqlite({ filename: db }) as Layer.Layer<EventStore>)
  const baseline: Array<SnapshotTiming> = []
  const unchanged: Array<SnapshotTiming> = []
  const changed: Array<SnapshotTiming> = []
  let oursBaselineBytes = 0
  let gitBaselineBytes = 0
  let manifest: Manifest | undefined
  let tick = 0
  for (let round = 0; round < rounds; round++) {
    // the first command of a session: a fresh log and a fresh shadow repository each round
    fs.rmSync(db, { force: true })
    for (const suffix of ["-wal", "-shm"]) fs.rmSync(`${db}${suffix}`, { force: true })
    const fresh = openLog()
    const freshStore = await fresh.runPromise(EventStore)
    const sizeBefore = fs.statSync(db).size
    let t = now()
    const first = await fresh.runPromise(
      scanWorkspace({
        root: tree.dir,
        limits: LIMITS,
        store: (content) => Effect.orDie(freshStore.putBlob(content))
      }).pipe(
        Effect.tap((result) => Effect.orDie(freshStore.putBlob(JSON.stringify(manifestDocument(result.manifest)))))
      )
    )
    const oursBaseline = now() - t
    await fresh.dispose()
    // closed: the WAL is checkpointed into the database file
    oursBaselineBytes = fileSize(db) - sizeBefore
    manifest = first.manifest

    const gitDir = path.join(dir, `shadow-${round}`)
    t = now()
    spawnSync("git", ["init", "--quiet", "--bare", gitDir])
    git(gitDir, tree.dir, ["add", "-A"])
    let gitTree = git(gitDir, tree.dir, ["write-tree"]).trim()
    const gitBaseline = now() - t
    gitBaselineBytes = dirSize(gitDir)
    baseline.push({ oursMs: oursBaseline, gitMs: gitBaseline })

    // the later commands of the session: the same log, the manifest kept in memory
    const reopened = openLog()
    const reopenedStore = await reopened.runPromise(EventStore)
    const rescan = (previous: Manifest) =>
      reopened.runPromise(
        scanWorkspace({
          root: tree.dir,
          limits: LIMITS,
          previous,
          store: (content) => Effect.orDie(reopenedStore.putBlob(content))
        })
      )
    // the baseline's files are "racy" for a few ms: let that pass, as a command takes longer anyway
    await new Promise((resolve) => setTimeout(resolve, 20))

    t = now()
    const same = await rescan(manifest)
    const oursSame = now() - t
    if (diffManifests(manifest, same.manifest).length !== 0) throw new Error("snapshot: a change where there was none")
    if (same.filesRead !== 0) throw new Error(`snapshot: ${same.filesRead} unchanged files read again`)
    manifest = same.manifest
    t = now()
    git(gitDir, tree.dir, ["add", "-A"])
    const sameTree = git(gitDir, tree.dir, ["write-tree"]).trim()
    const gitSame = now() - t
    if (sameTree !== gitTree) throw new Error("shadow git: a change where there was none")
    unchanged.push({ oursMs: oursSame, gitMs: gitSame })

    // a command changes 10 files
    tick++
    const touched: Array<string> = []
    for (let i = 0; i < 10; i++) {
      const n = (i * 997 + round * 13) % files
      const file = path.join(`pkg${Math.floor(n / 1000)}`, `mod${Math.floor(n / 50) % 20}`, `file${n}.ts`)
      fs.appendFileSync(path.join(tree.dir, file), `// change ${tick}\n`)
      touched.push(file.split(path.sep).join("/"))
    }
    await new Promise((resolve) => setTimeout(resolve, 20))
    t = now()
    const after = await rescan(manifest)
    const diff = diffManifests(manifest, after.manifest)
    const oursChanged = now() - t
    manifest = after.manifest
    t = now()
    git(gitDir, tree.dir, ["add", "-A"])
    const newTree = git(gitDir, tree.dir, ["write-tree"]).trim()
    const names = git(gitDir, tree.dir, ["diff", "--name-status", gitTree, newTree])
    const gitChanged = now() - t
    gitTree = newTree
    const expected = [...touched].sort().join("\n")
    if (diff.map((c) => c.path).join("\n") !== expected) throw new Error("snapshot: not the 10 changed files")
    const gitNames = names
      .trim()
      .split("\n")
      .map((l) => l.split("\t")[1])
      .sort()
      .join("\n")
    if (gitNames !== expected) throw new Error("shadow git: not the 10 changed files")
    changed.push({ oursMs: oursChanged, gitMs: gitChanged })
    await reopened.dispose()
    fs.rmSync(gitDir, { recursive: true, force: true })
    options.log(
      `  round ${round + 1}: baseline ${oursBaseline.toFixed(0)} / ${gitBaseline.toFixed(0)} ms, ` +
        `unchanged ${oursSame.toFixed(1)} / ${gitSame.toFixed(1)} ms, 10 changed ${oursChanged.toFixed(1)} / ${gitChanged.toFixed(1)} ms (ours / git)`
    )
  }
  const med = (xs: ReadonlyArray<SnapshotTiming>): SnapshotTiming => ({
    oursMs: median(xs.map((x) => x.oursMs)),
    gitMs: median(xs.map((x) => x.gitMs))
  })
  return {
    _tag: "Measured",
    files: tree.files,
    bytes: tree.bytes,
    rounds,
    baseline: med(baseline),
    unchanged: med(unchanged),
    changed: med(changed),
    oursBaselineBytes,
    gitBaselineBytes
  }
}
