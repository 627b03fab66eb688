/**
 * What became of a file change a dead process announced (`file.intent`) and never recorded
 *: the crash sweep of the next run that opens the session (`Recovery.recover`, given
 * `checkIntent` by the kernel) compares the file on disk with the intent.
 *
 * - The temporary file the intent names is removed when it is there (a crash after it was written,
 *   before the rename; or one half written). Only a file named as `writeFileAtomic` names them
 *   (`….logbook-tmp`) in the directory of the intent's path is touched.
 * - The file's content hash (SHA-256, as blobs are named) decides: the intended content — `applied`
 *   (with the file's stamp, so the agent's next write or edit counts the change as its own); the
 *   content before, or no file for a create — `not-applied`; anything else (a file gone that an
 *   update expected) — `changed`; a file that cannot be read — `unreadable`.
 */
import * as fsp from "node:fs/promises"
import * as nodePath from "node:path"
import { Effect } from "effect"
import { hashContent } from "../store/blobHash.js"
import type { IntentFinding, OpenIntent } from "../store/Recovery.js"
import { TEMP_SUFFIX } from "./fileChanges.js"
import { errnoCode, tryFs } from "./fsErrors.js"

const absoluteIn = (cwd: string, path: string): string => (nodePath.isAbsolute(path) ? path : nodePath.join(cwd, path))

/** Whether `temp` is a temporary file `writeFileAtomic` would write for `path` (so it may be removed). */
const isTempOf = (path: string, temp: string): boolean =>
  nodePath.dirname(temp) === nodePath.dirname(path) &&
  nodePath.basename(temp).startsWith(`.${nodePath.basename(path)}.`) &&
  temp.endsWith(TEMP_SUFFIX)

/**
 * Checks an intent left open by a dead process against the disk (paths relative to `cwd`, the
 * session's workspace) and removes its temporary file. Never fails: what cannot be read is a finding.
 */
export const checkIntent = (cwd: string, intent: OpenIntent): Effect.Effect<IntentFinding> =>
  Effect.gen(function* () {
    const path = absoluteIn(cwd, intent.path)
    const temp = absoluteIn(cwd, intent.temp)
    const tempRemoved = isTempOf(path, temp)
      ? yield* tryFs(() => fsp.rm(temp)).pipe(
          Effect.as(true),
          Effect.orElseSucceed(() => false)
        )
      : false
    const read = yield* tryFs(async () => {
      const content = await fsp.readFile(path)
      const stat = await fsp.stat(path)
      return { content, stat }
    }).pipe(Effect.either)
    if (read._tag === "Left") {
      if (errnoCode(read.left) === "ENOENT") {
        return { outcome: intent.op === "create" ? "not-applied" : "changed", tempRemoved } satisfies IntentFinding
      }
      const error = read.left instanceof Error ? read.left.message : String(read.left)
      return { outcome: "unreadable", error, tempRemoved } satisfies IntentFinding
    }
    const hash = hashContent(read.right.content)
    if (hash === intent.afterHash) {
      const { stat } = read.right
      return {
        outcome: "applied",
        tempRemoved,
        read: { path, mtimeMs: stat.mtimeMs, size: stat.size, hash }
      } satisfies IntentFinding
    }
    if (intent.op === "update" && hash === intent.beforeHash) {
      return { outcome: "not-applied", tempRemoved } satisfies IntentFinding
    }
    return { outcome: "changed", hash, tempRemoved } satisfies IntentFinding
  })
