/**
 * Records every module a Node process loads, for the start-up tests: run a command as
 * `node --import <this file> dist/bin.js …` (or with `NODE_OPTIONS=--import=<this file>`) with
 * `LOGBOOK_LOAD_RECORD=<file>`; the URL of each module is appended to that file, one a line:
 * - when Node's ES module loader loads it (every file of the bundle, a package imported from it,
 *   `node:` built-ins), by the `load` hook of `loadRecorderHooks.mjs` (registered here; it runs on
 *   the loader's own thread);
 * - at exit, every file in the CommonJS loader's cache (a package loaded with `require`, as the
 *   bundle loads better-sqlite3 on first use, and the files it `require`s in turn).
 * A process killed by a signal records only the first kind.
 */
import { appendFileSync } from "node:fs"
import { createRequire, register } from "node:module"
import { pathToFileURL } from "node:url"

const file = process.env.LOGBOOK_LOAD_RECORD
if (file !== undefined && file !== "") {
  register("./loadRecorderHooks.mjs", import.meta.url, { data: { file } })
  const { cache } = createRequire(import.meta.url)
  process.on("exit", () => {
    const urls = Object.keys(cache).map((path) => pathToFileURL(path).href)
    if (urls.length > 0) appendFileSync(file, `${urls.join("\n")}\n`)
  })
}
