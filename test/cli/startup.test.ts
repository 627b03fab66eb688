/**
 * Start-up: what each command of the built binary loads. `logbook --version`, `help` and the read
 * commands must not load the model SDKs (`ai`, `@ai-sdk/*` and zod, which only they use), the
 * model catalog or the interactive screen (ink, React), and the commands that open no database
 * must not load better-sqlite3.
 *
 * How it is told: dist/bundle.json (written by scripts/build.mjs from esbuild's metafile) names, for
 * each file of the bundle, the npm packages whose code it holds; `test/support/loadRecorder.mjs`
 * records every module a process loads. A command "loads the SDK" when a file holding SDK code is
 * among the modules it loaded, wherever the bundler put that code (in a chunk of its own, or in
 * bin.js should a static import ever pull it there). `logbook run` against the scripted server is
 * the positive case: it must load the SDK (and only the provider it uses), so the recorder and the
 * manifest are seen to work.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { afterEach, describe, expect, it } from "vitest"
import { makeJanitor, makeWorkspace, notices } from "../integration/support.js"
import { type RunOptions, root, runCli, sampleSession, scratchDb, scratchDir, seed } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"

const dist = path.join(root, "dist")
const recorder = path.join(root, "test", "support", "loadRecorder.mjs")

interface BundleFile {
  readonly bytes: number
  readonly imports: ReadonlyArray<string>
  readonly dynamicImports: ReadonlyArray<string>
  readonly externals: ReadonlyArray<string>
  readonly lazyExternals: ReadonlyArray<string>
  readonly packages: ReadonlyArray<string>
}

const bundle = JSON.parse(fs.readFileSync(path.join(dist, "bundle.json"), "utf8")) as {
  readonly files: Readonly<Record<string, BundleFile>>
}

/** The files of the bundle (paths in dist/) holding code of a package that `matches`. */
const holding = (matches: (pkg: string) => boolean): ReadonlySet<string> =>
  new Set(
    Object.entries(bundle.files)
      .filter(([, file]) => file.packages.some(matches))
      .map(([name]) => name)
  )

const isSdk = (pkg: string) => pkg === "ai" || pkg.startsWith("@ai-sdk/") || pkg === "zod"
const sdkFiles = holding(isSdk)
const catalogFiles = holding((pkg) => pkg === "@pydantic/genai-prices")
const screenFiles = holding((pkg) => pkg === "ink" || pkg === "react")

/**
 * What any start reads: bin.js (src/entry.ts, which turns the compile cache on), the program it
 * then imports (its one dynamic import, src/bin.ts's chunk) and every file they import statically,
 * transitively.
 */
const staticClosure = (): ReadonlySet<string> => {
  const seen = new Set<string>()
  const visit = (name: string) => {
    if (seen.has(name)) return
    seen.add(name)
    for (const next of bundle.files[name]?.imports ?? []) visit(next)
  }
  visit("bin.js")
  for (const program of bundle.files["bin.js"]?.dynamicImports ?? []) visit(program)
  return seen
}

interface Loaded {
  /** files of dist/ the process loaded */
  readonly files: ReadonlySet<string>
  /** npm packages it loaded from node_modules (outside the bundle) */
  readonly packages: ReadonlySet<string>
}

const packageOf = (url: string): string | undefined => {
  const matches = [...url.matchAll(/node_modules\/((?:@[^/]+\/)?[^/]+)/g)]
  return matches.at(-1)?.[1]
}

/** Runs `logbook <args>` with the load recorder; what it loaded, with its result. */
const runRecorded = async (args: ReadonlyArray<string>, options: RunOptions = {}) => {
  const record = path.join(scratchDir(), "loaded.txt")
  const result = await runCli(args, {
    ...options,
    env: { ...options.env, NODE_OPTIONS: `--import=${pathToFileURL(recorder).href}`, LOGBOOK_LOAD_RECORD: record }
  })
  const urls = fs.existsSync(record) ? fs.readFileSync(record, "utf8").split("\n").filter(Boolean) : []
  const distUrl = `${pathToFileURL(dist).href}/`
  const files = new Set(urls.filter((url) => url.startsWith(distUrl)).map((url) => url.slice(distUrl.length)))
  const packages = new Set(urls.flatMap((url) => packageOf(url) ?? []))
  const loaded: Loaded = { files, packages }
  return { result, loaded }
}

const intersect = (a: ReadonlySet<string>, b: ReadonlySet<string>) => [...a].filter((x) => b.has(x))

const janitor = makeJanitor()
afterEach(() => janitor.release())

describe("the bundle (dist/bundle.json)", () => {
  it("keeps the model SDKs, the catalog and the interactive screen in chunks that bin.js does not import statically", () => {
    expect(sdkFiles.size).toBeGreaterThan(0)
    expect(catalogFiles.size).toBeGreaterThan(0)
    expect(screenFiles.size).toBeGreaterThan(0)
    const closure = staticClosure()
    expect(closure.has("bin.js")).toBe(true)
    expect(intersect(closure, sdkFiles)).toEqual([])
    expect(intersect(closure, catalogFiles)).toEqual([])
    expect(intersect(closure, screenFiles)).toEqual([])
    for (const name of Object.keys(bundle.files)) expect(fs.existsSync(path.join(dist, name))).toBe(true)
  })

  it("leaves better-sqlite3 out of the bundle, to be loaded on first use", () => {
    for (const file of Object.values(bundle.files)) {
      expect(file.packages).not.toContain("better-sqlite3")
      expect(file.externals).not.toContain("better-sqlite3")
    }
    expect(Object.values(bundle.files).some((file) => file.lazyExternals.includes("better-sqlite3"))).toBe(true)
  })

  it("makes bin.js the entry alone: it imports nothing statically and the program (one chunk) after the compile cache is on", () => {
    const bin = bundle.files["bin.js"]
    expect(bin?.imports).toEqual([])
    expect(bin?.dynamicImports).toHaveLength(1)
    expect(bin?.dynamicImports[0]).toMatch(/^chunks\/bin-[A-Z0-9]+\.js$/)
    const text = fs.readFileSync(path.join(dist, "bin.js"), "utf8")
    expect(text.indexOf("enableCompileCache")).toBeGreaterThan(0)
    expect(text.indexOf("enableCompileCache")).toBeLessThan(text.indexOf("import("))
  })

  it("puts a shebang on bin.js only", () => {
    for (const name of Object.keys(bundle.files)) {
      const text = fs.readFileSync(path.join(dist, name), "utf8")
      expect(text.startsWith("#!/usr/bin/env node\n")).toBe(name === "bin.js")
    }
  })
})

describe("what a command loads (the built binary, with the load recorder)", () => {
  const expectLean = (loaded: Loaded, options: { readonly sqlite: boolean }) => {
    // the recorder saw the start (else every "not loaded" below would hold trivially)
    expect(loaded.files.has("bin.js")).toBe(true)
    expect(intersect(loaded.files, sdkFiles)).toEqual([])
    expect(intersect(loaded.files, catalogFiles)).toEqual([])
    expect(intersect(loaded.files, screenFiles)).toEqual([])
    expect([...loaded.packages].filter(isSdk)).toEqual([])
    expect(loaded.packages.has("better-sqlite3")).toBe(options.sqlite)
  }

  it.each([[["--version"]], [["--help"]], [["help"]], [["help", "run"]], [["sessions", "list"]], [["config"]]])(
    "%j loads neither the SDK, the catalog, the screen nor better-sqlite3",
    async (args) => {
      // a fresh HOME and cwd: no database at the default place, no config naming a model
      const { result, loaded } = await runRecorded(args, { cwd: scratchDir(), env: { HOME: scratchDir() } })
      expect(result.stderr).toBe("")
      expect(result.code).toBe(0)
      expectLean(loaded, { sqlite: false })
    }
  )

  it.each([
    [["sessions", "list"]],
    [["sessions", "show", "s1"]],
    [["events", "s1"]],
    [["export", "s1"]],
    [["export", "s1", "--format", "html"]]
  ])("%j on a database loads better-sqlite3, and neither the SDK, the catalog nor the screen", async (args) => {
    const db = scratchDb()
    await seed(db, [{ id: "s1", events: sampleSession() }])
    const { result, loaded } = await runRecorded([...args, "--db", db])
    expect(result.stderr).toBe("")
    expect(result.code).toBe(0)
    expect(result.stdout).toContain("Fix the failing test")
    expectLean(loaded, { sqlite: true })
  })

  it.each([[["stats"]], [["stats", "--by", "model"]], [["stats", "--format", "json"]]])(
    "%j on a database loads better-sqlite3, and neither the SDK, the catalog nor the screen",
    async (args) => {
      const db = scratchDb()
      await seed(db, [{ id: "s1", events: sampleSession() }])
      const { result, loaded } = await runRecorded([...args, "--db", db])
      expect(result.stderr).toBe("")
      expect(result.code).toBe(0)
      expect(result.stdout).toContain(db)
      expectLean(loaded, { sqlite: true })
    }
  )

  it("config of a model the catalog knows loads the catalog, not the SDK", async () => {
    const dir = scratchDir()
    fs.writeFileSync(path.join(dir, "logbook.json"), JSON.stringify({ model: "anthropic/claude-sonnet-4-5" }))
    const { result, loaded } = await runRecorded(["config", "--cwd", dir, "--format", "json"])
    expect(result.code).toBe(0)
    expect(JSON.parse(result.stdout).modelInfo.catalog.model).toBeTruthy()
    expect(intersect(loaded.files, catalogFiles).length).toBeGreaterThan(0)
    expect(intersect(loaded.files, sdkFiles)).toEqual([])
  })

  it("run loads the provider it uses (openai-compatible), not the others, not ai, nor the screen", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.text("Hello there.", { usage: { prompt_tokens: 10, completion_tokens: 3 } }))
    const { result, loaded } = await runRecorded([...ws.runArgs, "say hello"])
    // stdout is the answer; stderr the rest (the text as it streamed, the usage and session lines)
    expect(notices(result.stderr)).toEqual([])
    expect(result.code).toBe(0)
    expect(result.stdout).toBe("Hello there.\n")
    const loadedHolding = (pkg: string) =>
      intersect(
        loaded.files,
        holding((p) => p === pkg)
      )
    // the request goes to the provider's doStream: the `ai` package (streamText) is not even in the bundle
    expect(holding((p) => p === "ai").size).toBe(0)
    expect(loadedHolding("@ai-sdk/openai-compatible").length).toBeGreaterThan(0)
    expect(loadedHolding("@ai-sdk/anthropic")).toEqual([])
    expect(loadedHolding("@ai-sdk/openai")).toEqual([])
    // the screen is the interactive session's, not run's
    expect(intersect(loaded.files, screenFiles)).toEqual([])
    expect(loaded.packages.has("better-sqlite3")).toBe(true)
  })
})
