#!/usr/bin/env node
/**
 * The `logbook` executable's first file (dist/bin.js): turns on Node's compile cache, then loads the
 * program (src/bin.ts). With the cache (Node ≥ 22.1), the code Node compiles for the bundle is kept
 * on disk and read back at the next start instead of compiled again: `logbook --version` 188–206 →
 * 147 ms on Node 22 and 24 (docs/benchmarks.md, "Start-up"). It must be on before the program's modules
 * are compiled, so the program is imported here after it, not statically. Node 20 has no compile
 * cache for ES modules: nothing is turned on there. Node's own variables apply:
 * `NODE_DISABLE_COMPILE_CACHE=1` turns it off, `NODE_COMPILE_CACHE=<dir>` moves it (default: a
 * directory in the system's temporary directory). A cache Node cannot use (a directory that is not
 * writable) only means a slower start.
 */
import * as nodeModule from "node:module"

const enableCompileCache = (nodeModule as { readonly enableCompileCache?: () => unknown }).enableCompileCache
if (typeof enableCompileCache === "function") {
  try {
    enableCompileCache()
  } catch {
    // not fatal: the program starts without the cache
  }
}

await import("./bin.js")
