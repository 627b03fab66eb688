#!/usr/bin/env node
/**
 * Bundles the CLI (src/entry.ts -> dist/bin.js, src/bin.ts and the rest -> dist/chunks/) and, when it exists, the library
 * surface (src/index.ts -> dist/index.js) with esbuild.
 *
 * - ESM, platform node, target node20, minified, linked source maps.
 * - The CLI bundles everything (effect, @effect/*, the model SDKs) for a fast cold start, except
 *   native modules: `better-sqlite3` loads a `.node` addon and must stay a runtime import. In the
 *   CLI it is loaded when the first database is opened, not at start (`lazyNativePlugin`), so
 *   `--version`, `help` and `config` do not read its JavaScript.
 * - dist/bin.js is src/entry.ts alone: it turns Node's compile cache on, then imports the program
 *   (src/bin.ts, a chunk), whose modules are then compiled with the cache (Node ≥ 22.1).
 * - Code splitting: what src/bin.ts imports statically is its chunk (plus any chunk it shares with
 *   a lazy part); each dynamic `import()` (the model SDKs in src/model/AiSdk.ts, the model catalog in
 *   src/model/Catalog.ts, the interactive screen) is a chunk in dist/chunks/ that is only read when
 *   that code runs, so `logbook --version` and the read commands never parse the SDKs.
 *   Chunks are named by a hash of their content (`chunks/<name>-<hash>.js`): a name never stands for
 *   two contents.
 * - dist/bin.js starts with src/entry.ts's shebang (esbuild keeps an entry's hashbang first, so only
 *   bin.js has one). Every file of the CLI gets the `require` banner (bundled CommonJS code calls
 *   `require` for Node built-ins, and a module-scoped `require` must be in each file whose code may
 *   call it; in the others it costs one `createRequire` call).
 * - dist/bundle.json describes the CLI's files, from esbuild's metafile: for each JavaScript file its
 *   size, its static and dynamic imports, the external packages it imports (`externals`) or loads on
 *   first use (`lazyExternals`) and the npm packages whose code it holds (`packages`). The start-up
 *   tests use it to tell which files hold the SDK (test/cli/startup.test.ts).
 * - The library bundle keeps every package external: a program that embeds logbook brings its own
 *   `effect`, and two copies of effect in one process break its runtime. It is one file.
 * - The version is injected from package.json as `__LOGBOOK_VERSION__`.
 * - `--types` also writes the library's type declarations, dist/types/ (`tsc -p tsconfig.types.json`:
 *   one `.d.ts` per module reachable from src/index.ts, the tree of src/), which package.json's
 *   `types` and the `types` condition of `exports` name. They import only `effect`, the `@effect/*`
 *   peers, `ai` and `node:*` (test/package/packed.test.ts type-checks a consumer against them). It
 *   takes about 15 s, so `npm run build` skips it; `prepare` and `prepack` pass it. dist/types/ is
 *   replaced whole, so a removed module leaves no stale declaration.
 *
 * Replacing a running build. Everything is built into a private directory first (a sibling of dist/,
 * so the relative source paths in the maps stay right), then renamed into dist/ file by file: the
 * chunks first, dist/bin.js last. A process that starts meanwhile reads either the old bin.js, whose
 * chunks are all still there, or the new one, whose chunks have all arrived; no file is ever half
 * written (a rename replaces it whole). A process already running may load a chunk of its own build
 * later (the SDK at the first model request), so a chunk the new build no longer has is not deleted
 * at once: bundle.json records when it was retired, and a build deletes it once it has been retired
 * (and unwritten) for `retiredChunkGraceMs`. `--clean` deletes retired chunks at once (`npm pack`
 * runs it, so a package ships no stale chunk).
 *
 * Usage: `node scripts/build.mjs [--quiet] [--clean] [--types]` (also run by `npm run build` and `npm install`'s
 * `prepare`). `--quiet` prints only warnings and errors. Importable:
 * `import { build } from "./scripts/build.mjs"` resolves with the written files.
 */

import { execFile } from "node:child_process"
import { existsSync } from "node:fs"
import { chmod, mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises"
import { dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import * as esbuild from "esbuild"

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), "..")

/** Packages that must be loaded from node_modules at runtime (native addons). */
export const nativeExternals = ["better-sqlite3"]

/**
 * Ink imports React's devtools (used only with DEV=true), which logbook does not install: the
 * import resolves to an empty module.
 */
const stubDevtools = {
  name: "stub-react-devtools",
  setup(build) {
    build.onResolve({ filter: /^react-devtools-core$/ }, () => ({ path: "react-devtools-core", namespace: "stub" }))
    build.onLoad({ filter: /.*/, namespace: "stub" }, () => ({
      contents: "export default { initialize() {}, connectToDevTools() {} }",
      loader: "js"
    }))
  }
}

/**
 * In the CLI, each native external is a stand-in module whose default export loads the real package
 * (with `require`) the first time it is constructed, called or read: `new Database(file)` of
 * better-sqlite3 (in src/store/Sqlite.ts and @effect/sql-sqlite-node) then works as before, but a
 * command that opens no database never loads it. Only a default export is provided: a named import
 * of such a package fails the build rather than behaving differently.
 * @type {import("esbuild").Plugin}
 */
const lazyNativePlugin = {
  name: "logbook-lazy-native",
  setup(build) {
    // npm names: nothing in them but `.` means more in a regular expression, and it only widens the match
    const filter = new RegExp(`^(${nativeExternals.join("|")})$`)
    build.onResolve({ filter }, (args) => ({ path: args.path, namespace: "lazy-native" }))
    build.onLoad({ filter: /.*/, namespace: "lazy-native" }, (args) => ({
      loader: "js",
      contents: [
        'import { createRequire } from "node:module";',
        "let loaded;",
        `const real = () => (loaded ??= createRequire(import.meta.url)(${JSON.stringify(args.path)}));`,
        "const lazy = new Proxy(function lazyNative() {}, {",
        "  construct: (_, args, newTarget) => Reflect.construct(real(), args, newTarget === lazy ? real() : newTarget),",
        "  apply: (_, self, args) => Reflect.apply(real(), self, args),",
        "  get: (_, key) => Reflect.get(real(), key),",
        "  has: (_, key) => Reflect.has(real(), key)",
        "});",
        "export default lazy;"
      ].join("\n")
    }))
  }
}

/** Where the CLI's chunks go, inside dist/. */
export const chunksDir = "chunks"

/** A chunk no build has written for this long after it was retired is deleted (one day). */
export const retiredChunkGraceMs = 24 * 60 * 60 * 1000

// CommonJS dependencies bundled into an ESM file call `require` for Node built-ins.
const requireBanner = [
  'import { createRequire as __logbookCreateRequire } from "node:module";',
  "const require = __logbookCreateRequire(import.meta.url);"
].join("\n")

/**
 * Builds dist/bin.js with its chunks (and dist/index.js when src/index.ts exists).
 * @param {{ readonly clean?: boolean, readonly root?: string }} [options] `clean`: delete every
 *   retired chunk now; `root`: the package to build (default: this one; its src/, dist/, package.json)
 * @returns {Promise<{ readonly outputs: ReadonlyArray<string> }>} the files written, in the order
 *   they were renamed into dist/
 */
export const build = async (options = {}) => {
  const root = options.root ?? repoRoot
  const pkg = JSON.parse(await readFile(join(root, "package.json"), "utf8"))
  const dist = join(root, "dist")
  const outdir = join(root, `.dist-build-${process.pid}-${Date.now()}`)
  await mkdir(outdir, { recursive: true })
  await mkdir(join(dist, chunksDir), { recursive: true })
  try {
    return await buildInto({ root, outdir, dist, pkg, clean: options.clean === true, types: options.types === true })
  } finally {
    await rm(outdir, { recursive: true, force: true })
  }
}

/** The npm package (`effect`, `@ai-sdk/openai`) of a path under node_modules, or undefined. */
const packageOf = (input) => {
  const matches = [...input.matchAll(/node_modules\/((?:@[^/]+\/)?[^/]+)/g)]
  return matches.length === 0 ? undefined : matches[matches.length - 1][1]
}

/**
 * The description of the CLI's files (dist/bundle.json's `files`), keyed by the path in dist/.
 * @param {import("esbuild").Metafile} metafile
 * @param {string} root
 * @param {string} outdir
 */
const describeFiles = (metafile, root, outdir) => {
  const inDist = (path) => relative(outdir, join(root, path))
  /** @type {Record<string, unknown>} */
  const files = {}
  for (const [path, output] of Object.entries(metafile.outputs)) {
    if (!path.endsWith(".js")) continue
    const packages = new Set()
    for (const input of Object.keys(output.inputs)) {
      const name = packageOf(input)
      if (name !== undefined) packages.add(name)
    }
    const lazyExternals = Object.keys(output.inputs)
      .filter((input) => input.startsWith("lazy-native:"))
      .map((input) => input.slice("lazy-native:".length))
    const internal = (kind) =>
      output.imports.filter((i) => i.kind === kind && i.external !== true).map((i) => inDist(i.path))
    files[inDist(path)] = {
      bytes: output.bytes,
      imports: internal("import-statement"),
      dynamicImports: internal("dynamic-import"),
      externals: [
        ...new Set(output.imports.filter((i) => i.external === true && !i.path.startsWith("node:")).map((i) => i.path))
      ],
      lazyExternals,
      packages: [...packages].sort()
    }
  }
  return files
}

/** Every file under `dir`, as paths relative to it. */
const listFiles = async (dir) =>
  existsSync(dir)
    ? (await readdir(dir, { recursive: true, withFileTypes: true }))
        .filter((entry) => entry.isFile())
        .map((entry) => relative(dir, join(entry.parentPath ?? entry.path, entry.name)))
    : []

/**
 * Retires the chunks of earlier builds that the new one (`current`, paths in dist/) does not have:
 * each is recorded with the time it was first seen retired (kept from the `retired` record of
 * dist/bundle.json), and deleted once it has been retired and unwritten for `retiredChunkGraceMs`
 * (at once with `clean`). A chunk that a build running at the same time has just written is seen
 * retired by this one, but its fresh file time keeps it.
 * @param {string} dist
 * @param {ReadonlySet<string>} current
 * @param {{ readonly clean?: boolean, readonly now?: number }} [options]
 * @returns {Promise<Record<string, number>>} the new `retired` record (path -> epoch ms)
 */
export const retireChunks = async (dist, current, options = {}) => {
  const now = options.now ?? Date.now()
  const manifestFile = join(dist, "bundle.json")
  const previous = existsSync(manifestFile) ? JSON.parse(await readFile(manifestFile, "utf8")) : {}
  const wasRetired = previous.retired ?? {}
  /** @type {Record<string, number>} */
  const retired = {}
  for (const file of await listFiles(join(dist, chunksDir))) {
    const path = `${chunksDir}/${file}`
    if (current.has(path)) continue
    const since = typeof wasRetired[path] === "number" ? wasRetired[path] : now
    const { mtimeMs } = await stat(join(dist, path))
    if (options.clean === true || (now - since > retiredChunkGraceMs && now - mtimeMs > retiredChunkGraceMs)) {
      await rm(join(dist, path), { force: true })
    } else {
      retired[path] = since
    }
  }
  return retired
}

/**
 * The library's declarations (tsconfig.types.json) into `tmp`, then moved to `target` (replaced whole).
 * @param {string} root
 * @param {string} tmp
 * @param {string} target
 */
const buildTypes = async (root, tmp, target) => {
  const tsc = join(root, "node_modules", "typescript", "bin", "tsc")
  try {
    await promisify(execFile)(process.execPath, [tsc, "-p", join(root, "tsconfig.types.json"), "--outDir", tmp], {
      cwd: root
    })
  } catch (error) {
    throw new Error(`the type declarations failed to build:\n${error.stdout || error.stderr || error.message}`)
  }
  await rm(target, { recursive: true, force: true })
  await rename(tmp, target)
}

/**
 * @param {{ readonly root: string, readonly outdir: string, readonly dist: string,
 *   readonly pkg: { readonly version: string }, readonly clean: boolean, readonly types: boolean }} options
 */
const buildInto = async ({ root, outdir, dist, pkg, clean, types }) => {
  /** @type {import("esbuild").BuildOptions} */
  const common = {
    absWorkingDir: root,
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20",
    sourcemap: "linked",
    legalComments: "none",
    logLevel: "warning",
    define: { __LOGBOOK_VERSION__: JSON.stringify(pkg.version) }
  }

  const bin = await esbuild.build({
    ...common,
    entryPoints: { bin: join(root, "src/entry.ts") },
    outdir,
    splitting: true,
    entryNames: "[name]",
    chunkNames: `${chunksDir}/[name]-[hash]`,
    plugins: [lazyNativePlugin, stubDevtools],
    // React's production build: its development build renders the screen 3-4× slower (bench/render.ts)
    define: { ...common.define, "process.env.NODE_ENV": JSON.stringify("production") },
    // the shebang is src/entry.ts's own first line, which esbuild puts before the banner
    banner: { js: requireBanner },
    minify: true,
    keepNames: false,
    metafile: true
  })
  await chmod(join(outdir, "bin.js"), 0o755)

  const indexSource = join(root, "src/index.ts")
  if (existsSync(indexSource)) {
    await esbuild.build({
      ...common,
      entryPoints: [indexSource],
      outfile: join(outdir, "index.js"),
      packages: "external"
    })
  }

  if (types) await buildTypes(root, join(outdir, "types"), join(dist, "types"))

  // chunks first, bin.js last: whoever reads a bin.js finds all of its chunks
  const built = await listFiles(outdir)
  const rank = (file) => (file.startsWith(`${chunksDir}/`) ? 0 : file === "bin.js" ? 2 : 1)
  const order = [...built].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b))
  const outputs = []
  for (const file of order) {
    await rename(join(outdir, file), join(dist, file))
    outputs.push(join(dist, file))
  }

  // chunks of earlier builds: retired now, deleted after the grace period (or at once with --clean)
  const retired = await retireChunks(dist, new Set(built), { clean })
  const manifestFile = join(dist, "bundle.json")
  const manifest = { files: describeFiles(bin.metafile, root, outdir), retired }
  const manifestTemp = join(outdir, "bundle.json")
  await writeFile(manifestTemp, `${JSON.stringify(manifest, null, 2)}\n`)
  await rename(manifestTemp, manifestFile)
  outputs.push(manifestFile)
  return { outputs }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const quiet = process.argv.includes("--quiet")
  const clean = process.argv.includes("--clean")
  const types = process.argv.includes("--types")
  const started = performance.now()
  build({ clean, types })
    .then(async ({ outputs }) => {
      if (quiet) return
      let chunks = 0
      let chunkBytes = 0
      for (const file of outputs) {
        const { size } = await stat(file)
        const name = relative(repoRoot, file)
        if (name.startsWith(`dist/${chunksDir}/`)) {
          if (name.endsWith(".js")) chunks++
          if (name.endsWith(".js")) chunkBytes += size
          continue
        }
        console.log(`  ${name.padEnd(26)} ${(size / 1024).toFixed(1).padStart(8)} KB`)
      }
      console.log(
        `  ${`dist/${chunksDir}/ (${chunks} chunks)`.padEnd(26)} ${(chunkBytes / 1024).toFixed(1).padStart(8)} KB`
      )
      console.log(`built in ${Math.round(performance.now() - started)} ms`)
    })
    .catch((error) => {
      console.error(error instanceof Error ? error.message : String(error))
      process.exitCode = 1
    })
}
