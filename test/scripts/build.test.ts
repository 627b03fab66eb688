/**
 * scripts/build.mjs: the CLI as bin.js and chunks, put into dist/ so that a process starting during
 * a build never sees a half-written set of files, and chunks of earlier builds kept for the
 * processes that may still load them.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { describe, expect, it } from "vitest"
import { root, scratchDir } from "../support/cli.js"

interface BuildModule {
  readonly build: (options?: {
    readonly clean?: boolean
    readonly root?: string
  }) => Promise<{ readonly outputs: ReadonlyArray<string> }>
  readonly retireChunks: (
    dist: string,
    current: ReadonlySet<string>,
    options?: { readonly clean?: boolean; readonly now?: number }
  ) => Promise<Record<string, number>>
  readonly retiredChunkGraceMs: number
}

const loadBuild = async (): Promise<BuildModule> =>
  (await import(pathToFileURL(path.join(root, "scripts", "build.mjs")).href)) as BuildModule

const HOUR = 60 * 60 * 1000

describe("retireChunks", () => {
  it("keeps a retired chunk for the grace period after it was first seen retired, then deletes it", async () => {
    const { retireChunks, retiredChunkGraceMs } = await loadBuild()
    const dist = scratchDir()
    const chunks = path.join(dist, "chunks")
    fs.mkdirSync(chunks)
    const now = Date.now()
    const long = now - retiredChunkGraceMs - HOUR
    const write = (name: string, mtime: number) => {
      const file = path.join(chunks, name)
      fs.writeFileSync(file, "export {}\n")
      fs.utimesSync(file, mtime / 1000, mtime / 1000)
    }
    write("current-A.js", now) // in the new build
    write("current-A.js.map", now)
    write("stale-B.js", long) // not in the new build, not seen retired before: retired now, kept
    write("old-C.js", long) // retired long ago, written long ago: deleted
    write("rewritten-D.js", now) // retired long ago, but just written by a build running at the same time: kept
    write("young-E.js", long) // retired an hour ago: kept
    fs.writeFileSync(
      path.join(dist, "bundle.json"),
      JSON.stringify({
        files: {},
        retired: {
          "chunks/current-A.js": long,
          "chunks/old-C.js": long,
          "chunks/rewritten-D.js": long,
          "chunks/young-E.js": now - HOUR
        }
      })
    )
    const current = new Set(["bin.js", "chunks/current-A.js", "chunks/current-A.js.map"])

    const retired = await retireChunks(dist, current, { now })
    expect(fs.readdirSync(chunks).sort()).toEqual([
      "current-A.js",
      "current-A.js.map",
      "rewritten-D.js",
      "stale-B.js",
      "young-E.js"
    ])
    expect(retired).toEqual({
      "chunks/stale-B.js": now,
      "chunks/rewritten-D.js": long,
      "chunks/young-E.js": now - HOUR
    })

    // --clean: every retired chunk goes at once, the current ones stay
    expect(await retireChunks(dist, current, { now, clean: true })).toEqual({})
    expect(fs.readdirSync(chunks).sort()).toEqual(["current-A.js", "current-A.js.map"])
  })
})

describe("build", () => {
  it("renames the chunks into dist/ before bin.js, and a rebuild keeps an earlier build's chunk", async () => {
    const { build } = await loadBuild()
    // a package of its own: this one's sources and dependencies, its own dist/
    const pkg = scratchDir()
    for (const name of ["src", "node_modules", "tsconfig.json"]) {
      fs.symlinkSync(path.join(root, name), path.join(pkg, name))
    }
    fs.copyFileSync(path.join(root, "package.json"), path.join(pkg, "package.json"))
    const dist = path.join(pkg, "dist")

    const { outputs } = await build({ root: pkg })
    const names = outputs.map((file) => path.relative(dist, file))
    const bin = names.indexOf("bin.js")
    const chunks = names.flatMap((name, i) => (name.startsWith("chunks/") ? [i] : []))
    expect(bin).toBeGreaterThan(0)
    expect(chunks.length).toBeGreaterThan(0)
    expect(Math.max(...chunks)).toBeLessThan(bin)
    // after bin.js only the description of the build, which no process reads
    expect(names.slice(bin + 1)).toEqual(["bundle.json"])
    const manifest = JSON.parse(fs.readFileSync(path.join(dist, "bundle.json"), "utf8")) as {
      readonly files: Readonly<Record<string, unknown>>
    }
    for (const name of Object.keys(manifest.files)) expect(names).toContain(name)

    const version = spawnSync(process.execPath, [path.join(dist, "bin.js"), "--version"], { encoding: "utf8" })
    expect(version.status).toBe(0)
    expect(version.stdout.trim()).toBe(JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")).version)

    // a chunk only an earlier build had: still there after the next build, and recorded as retired
    fs.writeFileSync(path.join(dist, "chunks", "earlier-ZZZZZZZZ.js"), "export {}\n")
    const before = Date.now()
    await build({ root: pkg })
    expect(fs.existsSync(path.join(dist, "chunks", "earlier-ZZZZZZZZ.js"))).toBe(true)
    const after = JSON.parse(fs.readFileSync(path.join(dist, "bundle.json"), "utf8")) as {
      readonly retired: Readonly<Record<string, number>>
    }
    expect(Object.keys(after.retired)).toEqual(["chunks/earlier-ZZZZZZZZ.js"])
    expect(after.retired["chunks/earlier-ZZZZZZZZ.js"]).toBeGreaterThanOrEqual(before)
  }, 180_000)
})
