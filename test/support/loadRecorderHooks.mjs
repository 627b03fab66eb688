/**
 * The module loader hooks of `loadRecorder.mjs`: `load` appends the URL of each module Node loads
 * to the file given at `register` (synchronously, so nothing is lost when the process exits early).
 */
import { appendFileSync } from "node:fs"

/** @type {string | undefined} */
let file

/** @param {{ readonly file: string }} data */
export const initialize = (data) => {
  file = data.file
}

/**
 * @param {string} url
 * @param {unknown} context
 * @param {(url: string, context: unknown) => Promise<unknown>} nextLoad
 */
export const load = async (url, context, nextLoad) => {
  if (file !== undefined) appendFileSync(file, `${url}\n`)
  return nextLoad(url, context)
}
