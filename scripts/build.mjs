#!/usr/bin/env node
/**
 * Bundles the CLI (src/bin.ts -> dist/bin.js) and, when it exists, the library surface
 * (src/index.ts -> dist/index.js) with esbuild.
 *
 * - One ESM file per entry, platform node, target node20.
 * - Everything is bundled (effect, @effect/*) for a fast cold start, except native modules:
 *   `better-sqlite3` loads a `.node` addon and must stay a runtime import.
 * - The library bundle keeps every package external: a program that embeds logbook brings its own
 *   `effect`, and two copies of effect in one process break its runtime.
 * - The version is injected from package.json as `__LOGBOOK_VERSION__`.
 *
 * Usage: `node scripts/build.mjs [--quiet]` (also run by `npm run build` and `npm install`'s `prepare`).
 * `--quiet` prints only warnings and errors. Importable: `import { build } from "./scripts/build.mjs"`
 * resolves with the written files.
 */

import { existsSync } from "node:fs"
import { chmod, mkdir, readdir, readFile, rename, rm, stat } from "node:fs/promises"
import { dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"
import * as esbuild from "esbuild"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")

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

// CommonJS dependencies bundled into an ESM file call `require` for Node built-ins.
const requireBanner = [
  'import { createRequire as __logbookCreateRequire } from "node:module";',
  "const require = __logbookCreateRequire(import.meta.url);"
].join("\n")

/**
 * Builds dist/bin.js (and dist/index.js when src/index.ts exists).
 * @returns {Promise<{ readonly outputs: ReadonlyArray<string> }>}
 */
export const build = async () => {
  const pkg = JSON.parse(await readFile(join(root, "package.json"), "utf8"))
  const dist = join(root, "dist")
  // Build into a private directory, then rename each file into dist/: a process running
  // dist/bin.js meanwhile (a test, another build) never sees a missing or half-written file.
  // (a sibling of dist/, so the relative source paths in the source maps stay right)
  const outdir = join(root, `.dist-build-${process.pid}-${Date.now()}`)
  await mkdir(outdir, { recursive: true })
  await mkdir(dist, { recursive: true })
  try {
    return await buildInto(outdir, dist, pkg)
  } finally {
    await rm(outdir, { recursive: true, force: true })
  }
}

/**
 * @param {string} outdir
 * @param {string} dist
 * @param {{ readonly version: string }} pkg
 */
const buildInto = async (outdir, dist, pkg) => {
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

  const binFile = join(outdir, "bin.js")
  await esbuild.build({
    ...common,
    entryPoints: [join(root, "src/bin.ts")],
    outfile: binFile,
    external: nativeExternals,
    plugins: [stubDevtools],
    // the shebang first, then `require` for bundled CommonJS code
    banner: { js: `#!/usr/bin/env node\n${requireBanner}` },
    minify: true,
    keepNames: false
  })
  await chmod(binFile, 0o755)

  const indexSource = join(root, "src/index.ts")
  if (existsSync(indexSource)) {
    const indexFile = join(outdir, "index.js")
    await esbuild.build({
      ...common,
      entryPoints: [indexSource],
      outfile: indexFile,
      packages: "external"
    })
  }
  const outputs = []
  for (const name of await readdir(outdir)) {
    await rename(join(outdir, name), join(dist, name))
    outputs.push(join(dist, name))
  }
  return { outputs }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const quiet = process.argv.includes("--quiet")
  const started = performance.now()
  build()
    .then(async ({ outputs }) => {
      if (quiet) return
      for (const file of outputs) {
        const { size } = await stat(file)
        console.log(`  ${relative(root, file).padEnd(20)} ${(size / 1024).toFixed(1).padStart(8)} KB`)
      }
      console.log(`built in ${Math.round(performance.now() - started)} ms`)
    })
    .catch((error) => {
      console.error(error instanceof Error ? error.message : String(error))
      process.exitCode = 1
    })
}
