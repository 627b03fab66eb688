/**
 * Deterministic crash points for tests of crash recovery through the built binary.
 *
 * When the environment variable `LB_TEST_CRASH_AT` names a point, the process kills itself with
 * SIGKILL when it reaches that point — no finalizer runs, as after `kill -9`. Unset (always, outside
 * these tests), a point does nothing. The name is not `LOGBOOK_*`: those are logbook's own settings,
 * hidden from commands.
 *
 * The points, in the order a `write` or an `edit` passes them:
 * - `file.intent`: its `file.intent` is committed, nothing is written yet;
 * - `file.temp`: the temporary file is written and flushed, not yet renamed over the file;
 * - `file.renamed`: the file is replaced, its `file.changed` not yet committed.
 */
import { Effect } from "effect"

/** The variable naming the point at which the process kills itself. */
export const CRASH_POINT_ENV = "LB_TEST_CRASH_AT"

export type CrashPoint = "file.intent" | "file.temp" | "file.renamed"

/** Kills the process (SIGKILL) when `CRASH_POINT_ENV` names `point`; nothing otherwise. */
export const crashPoint = (point: CrashPoint): Effect.Effect<void> =>
  Effect.sync(() => {
    if (process.env[CRASH_POINT_ENV] === point) process.kill(process.pid, "SIGKILL")
  })
