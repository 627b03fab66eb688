#!/usr/bin/env node
/**
 * The `logbook` executable's first file (dist/bin.js): refuses a Node.js older than the supported
 * ones (22.12; docs/platform.md), turns on Node's compile cache, then loads the program (src/bin.ts).
 * It imports nothing of ours statically, so it stays one small file.
 * With the cache, the code Node compiles for the bundle is kept on disk and read back at the next
 * start instead of compiled again (docs/benchmarks.md, "Start-up"). It must be on before the
 * program's modules are compiled, so the program is imported here after it, not statically. Node's
 * own variables apply: `NODE_DISABLE_COMPILE_CACHE=1` turns it off, `NODE_COMPILE_CACHE=<dir>` moves
 * it (default: a directory in the system's temporary directory). A cache Node cannot use (a
 * directory that is not writable) only means a slower start.
 */
import * as nodeModule from "node:module"

const [major = 0, minor = 0] = process.versions.node.split(".").map((part) => Number.parseInt(part, 10))
if (major < 22 || (major === 22 && minor < 12)) {
  process.stderr.write(
    `logbook: Node.js 22.12 or later is required (22, 24 and 26 are supported); this is Node.js ${process.versions.node}\n`
  )
  process.exit(1)
}

const enableCompileCache = (nodeModule as { readonly enableCompileCache?: () => unknown }).enableCompileCache
if (typeof enableCompileCache === "function") {
  try {
    enableCompileCache()
  } catch {
    // not fatal: the program starts without the cache
  }
}

await import("./bin.js")
