/**
 * The package a stranger installs: `npm pack` (which runs `prepack`: the bundles and the type
 * declarations), the tarball installed into a scratch project under the OS temp dir with its peers
 * at our versions and the README's `overrides` (one better-sqlite3), the README's library examples
 * (examples/*.ts, which the README shows verbatim) type-checked with the README's tsconfig
 * (`skipLibCheck: false`) by the TypeScript `npm install typescript` gives (7) and by ours, and run
 * with node; and a global install of the same tarball whose `logbook` runs and opens a database.
 *
 * The installs take the packages from the npm cache when it has them (`--prefer-offline`; the
 * registry otherwise) and run no install scripts: none is needed (better-sqlite3 ships its addon
 * prebuilt). Slow (an `npm pack` and two installs): about a minute or more.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { promisify } from "node:util"
import * as esbuild from "esbuild"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { root, sampleSession, seed } from "../support/cli.js"
import { Reply, type ScriptedServer, startScriptedServer } from "../support/scriptedServer.js"
import { tempDir } from "../support/tmp.js"

const pkg = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")) as {
  readonly version: string
  readonly dependencies: Record<string, string>
  readonly peerDependencies: Record<string, string>
  readonly devDependencies: Record<string, string>
}
const examples = ["agent.ts", "event-log.ts"]
/** The TypeScript `npm install typescript` gives (its `latest`), besides our own devDependency. */
const TYPESCRIPT_LATEST = "7.0.2"
const readme = fs.readFileSync(path.join(root, "README.md"), "utf8")
/** The README's tsconfig for a program that uses the library: the json block after its marker. */
const readmeTsconfig = (): { compilerOptions: Record<string, unknown> } => {
  const match = /<!-- library tsconfig -->\s*```json\n([\s\S]*?)```/.exec(readme)
  if (!match) throw new Error("README.md has no library tsconfig block")
  return JSON.parse(match[1]!)
}

/** The environment of the npm child processes: without the npm_* variables of a parent `npm test`. */
const npmEnv = (): NodeJS.ProcessEnv =>
  Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.toLowerCase().startsWith("npm_")))

const run = async (
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env?: NodeJS.ProcessEnv }
): Promise<{ readonly stdout: string; readonly stderr: string; readonly code: number }> => {
  try {
    const { stdout, stderr } = await promisify(execFile)(command, [...args], {
      cwd: options.cwd,
      env: options.env ?? npmEnv(),
      maxBuffer: 64 * 1024 * 1024,
      timeout: 600_000
    })
    return { stdout, stderr, code: 0 }
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; code?: number | string }
    return { stdout: e.stdout ?? "", stderr: e.stderr ?? "", code: typeof e.code === "number" ? e.code : 1 }
  }
}

const mustRun = async (...args: Parameters<typeof run>) => {
  const result = await run(...args)
  if (result.code !== 0) {
    throw new Error(`${args[0]} ${args[1].join(" ")} failed (${result.code}):\n${result.stderr}\n${result.stdout}`)
  }
  return result
}

/** The README's `overrides` for a project that uses the library: the json block after its marker. */
const readmeOverrides = (): Record<string, string> => {
  const match = /<!-- library overrides -->\s*```json\n([\s\S]*?)```/.exec(readme)
  if (!match) throw new Error("README.md has no library overrides block")
  return (JSON.parse(match[1]!) as { overrides: Record<string, string> }).overrides
}

const installFlags = ["--prefer-offline", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]

let work = ""
let tarball = ""
let project = ""
let files: ReadonlyArray<string> = []

beforeAll(async () => {
  work = tempDir("logbook-pack-")
  const packed = await mustRun("npm", ["pack", "--json", "--pack-destination", work], { cwd: root })
  const [info] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf("["))) as ReadonlyArray<{
    readonly filename: string
    readonly files: ReadonlyArray<{ readonly path: string }>
  }>
  tarball = path.join(work, info!.filename)
  files = info!.files.map((file) => file.path)

  project = path.join(work, "consumer")
  fs.mkdirSync(project)
  fs.writeFileSync(
    path.join(project, "package.json"),
    JSON.stringify({ name: "consumer", private: true, type: "module", overrides: readmeOverrides() })
  )
  const peers = Object.keys(pkg.peerDependencies).map((name) => `${name}@${pkg.devDependencies[name]}`)
  await mustRun(
    "npm",
    [
      "install",
      tarball,
      ...peers,
      `@types/node@${pkg.devDependencies["@types/node"]}`,
      `typescript@${TYPESCRIPT_LATEST}`,
      ...installFlags
    ],
    { cwd: project }
  )
  for (const example of examples) fs.copyFileSync(path.join(root, "examples", example), path.join(project, example))
}, 900_000)

describe("the packed package", () => {
  it("ships the bundles and the type declarations, and package.json points at them", () => {
    expect(files).toEqual(expect.arrayContaining(["dist/bin.js", "dist/index.js", "dist/types/index.d.ts"]))
    expect(files.filter((file) => file.startsWith("src/") || file.startsWith("test/"))).toEqual([])
    const installed = JSON.parse(fs.readFileSync(path.join(project, "node_modules", "logbook", "package.json"), "utf8"))
    expect(installed.exports["."]).toEqual({ types: "./dist/types/index.d.ts", default: "./dist/index.js" })
  })

  it("installs with its peers at our versions: npm ls is clean", async () => {
    const ls = await run("npm", ["ls", "--all", "--json"], { cwd: project })
    expect(ls.stderr).toBe("")
    expect(ls.code).toBe(0)
    const tree = JSON.parse(ls.stdout).dependencies
    expect(tree.effect.version).toBe(pkg.devDependencies.effect)
    // one effect: logbook uses the project's own (a second copy breaks its runtime)
    expect(fs.existsSync(path.join(project, "node_modules", "logbook", "node_modules", "effect"))).toBe(false)
    // one better-sqlite3, ours, also under @effect/sql-sqlite-node (which asks for ^12): the README's overrides
    const sqlite = tree["@effect/sql-sqlite-node"].dependencies["better-sqlite3"]
    expect(sqlite.version).toBe(pkg.dependencies["better-sqlite3"])
    expect(tree.logbook.dependencies["better-sqlite3"].version).toBe(pkg.dependencies["better-sqlite3"])
    for (const nested of ["logbook", "@effect/sql-sqlite-node"]) {
      expect(fs.existsSync(path.join(project, "node_modules", nested, "node_modules", "better-sqlite3"))).toBe(false)
    }
  })

  const typescripts = [
    { name: `typescript ${TYPESCRIPT_LATEST} (npm's latest)`, tsc: path.join(project, "node_modules", ".bin", "tsc") },
    {
      name: `typescript ${pkg.devDependencies.typescript} (ours)`,
      tsc: path.join(root, "node_modules", "typescript", "bin", "tsc")
    }
  ]
  it.each(typescripts)(
    "the README's examples type-check with the README's tsconfig, libraries checked too: $name",
    async ({ tsc }) => {
      fs.writeFileSync(path.join(project, "tsconfig.json"), JSON.stringify({ ...readmeTsconfig(), include: examples }))
      const version = await mustRun(tsc, ["--version"], { cwd: project })
      expect(version.stdout).toMatch(/^Version \d/)
      const result = await run(tsc, ["-p", "."], { cwd: project })
      // every declaration the examples reach is checked, ours and our dependencies' alike: a user
      // needs no skipLibCheck
      expect(result.stdout + result.stderr).toBe("")
      expect(result.code).toBe(0)
    },
    300_000
  )

  it("the README's tsconfig checks libraries (a broken declaration would be an error)", () => {
    expect(readmeTsconfig().compilerOptions.skipLibCheck).toBe(false)
  })

  const compile = async (example: string) => {
    const out = path.join(project, example.replace(/\.ts$/, ".mjs"))
    await esbuild.build({
      entryPoints: [path.join(project, example)],
      outfile: out,
      format: "esm",
      platform: "node",
      logLevel: "error"
    })
    return out
  }

  it("the event-log example runs, and runs again against the same database", async () => {
    const script = await compile("event-log.ts")
    const first = await run(process.execPath, [script], { cwd: project, env: process.env })
    expect(first.stderr).toBe("")
    expect(first.stdout).toBe('my-session: 1 events, titled "hello"\n')
    const second = await run(process.execPath, [script], { cwd: project, env: process.env })
    expect(second.stderr).toBe("")
    expect(second.stdout).toBe('my-session: 2 events, titled "hello again"\n')
  })

  describe("the agent example", () => {
    let server: ScriptedServer
    beforeAll(async () => {
      server = await startScriptedServer()
    })
    afterAll(() => server.close())

    it("runs a turn against an OpenAI-compatible server (OPENAI_BASE_URL)", async () => {
      server.enqueue(
        Reply.stream({ text: ["No TODOs ", "found."], usage: { prompt_tokens: 10, completion_tokens: 3 } })
      )
      const script = await compile("agent.ts")
      const cwd = path.join(project, "agent-run")
      fs.mkdirSync(cwd)
      const result = await run(process.execPath, [script], {
        cwd,
        env: { ...process.env, OPENAI_BASE_URL: `${server.url}/v1`, OPENAI_API_KEY: "sk-test-key" }
      })
      expect(result.stderr).toBe("")
      expect(result.stdout).toBe("stop after 1 step(s)\n")
      expect(server.requests).toHaveLength(1)
      expect(JSON.stringify(server.requests[0]!.body)).toContain("list the TODOs in src/")
      expect(fs.existsSync(path.join(cwd, "logbook.db"))).toBe(true)
    })
  })

  it("installs globally: the installed bin runs and reads a database", async () => {
    const prefix = path.join(work, "global")
    await mustRun("npm", ["install", "-g", tarball, "--prefix", prefix, ...installFlags], { cwd: work })
    const version = await run(path.join(prefix, "bin", "logbook"), ["--version"], { cwd: work, env: process.env })
    expect(version.stderr).toBe("")
    expect(version.stdout.trim()).toBe(pkg.version)
    // its SQLite driver works as installed, without a build step
    const db = path.join(work, "global.db")
    await seed(db, [{ id: "installed-session", events: sampleSession("Installed") }])
    const list = await run(path.join(prefix, "bin", "logbook"), ["sessions", "list", "--db", db], {
      cwd: work,
      env: process.env
    })
    expect(list.stderr).toBe("")
    expect(list.code).toBe(0)
    expect(list.stdout).toContain("Installed")
  }, 300_000)
})

describe("the README", () => {
  it("pins better-sqlite3 in its overrides to the version logbook depends on", () => {
    expect(readmeOverrides()).toEqual({ "better-sqlite3": pkg.dependencies["better-sqlite3"] })
  })

  it("shows the examples as they are in examples/", () => {
    const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1])
    const library = blocks.filter((block) => block!.includes('from "logbook"'))
    expect(library).toEqual(examples.map((example) => fs.readFileSync(path.join(root, "examples", example), "utf8")))
  })
})
