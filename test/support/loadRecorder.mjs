/**
 * Records every module a Node process loads, for the start-up tests: run a command as
 * `node --import <this file> dist/bin.js …` (or with `NODE_OPTIONS=--import=<this file>`) with
 * `LOGBOOK_LOAD_RECORD=<file>`; the URL of each module is appended to that file, one a line:
 * - when Node's ES module loader loads it (every file of the bundle, a package imported from it,
 *   `node:` built-ins), by a `load` hook: in this thread with `module.registerHooks` where Node has
 *   it (22.15 and later; `module.register` is deprecated from Node 26 and warns), else the one of
 *   `loadRecorderHooks.mjs`, registered on the loader's own thread;
 * - at exit, every file in the CommonJS loader's cache (a package loaded with `require`, as the
 *   bundle loads better-sqlite3 on first use, and the files it `require`s in turn).
 * A process killed by a signal records only the first kind.
 */
import { appendFileSync } from "node:fs"
import * as nodeModule from "node:module"
import { pathToFileURL } from "node:url"

const file = process.env.LOGBOOK_LOAD_RECORD
if (file !== undefined && file !== "") {
  if (typeof nodeModule.registerHooks === "function") {
    nodeModule.registerHooks({
      load: (url, context, nextLoad) => {
        appendFileSync(file, `${url}\n`)
        return nextLoad(url, context)
      }
    })
  } else {
    nodeModule.register("./loadRecorderHooks.mjs", import.meta.url, { data: { file } })
  }
  const { cache } = nodeModule.createRequire(import.meta.url)
  process.on("exit", () => {
    const urls = Object.keys(cache).map((path) => pathToFileURL(path).href)
    if (urls.length > 0) appendFileSync(file, `${urls.join("\n")}\n`)
  })
}
