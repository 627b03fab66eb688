/**
 * What the read commands (and `run` / `logbook` resuming a session) say about a session whose log
 * is damaged: one warning on stderr, so their output (JSON included) stays what it was. The check
 * is `Verify.checkOnRead`: the seqs and the chain at the tip, a few milliseconds whatever the
 * session's length; `logbook verify` checks every row and the snapshots.
 */
import { Console, Effect } from "effect"
import type { SessionId } from "../domain/Ids.js"
import { checkOnRead, type Problem, problemText } from "../store/Verify.js"

/** The sentence for a damaged log: what is broken, and what to run. */
export const damagedText = (sessionId: SessionId, problems: ReadonlyArray<Problem>): string => {
  const shown = problems.slice(0, 5).map(problemText)
  const more = problems.length > 5 ? `; and ${problems.length - 5} more` : ""
  return `the log of session ${sessionId} is damaged: ${shown.join("; ")}${more}; run logbook verify ${sessionId} for the whole check`
}

/** Checks the session (`checkOnRead`) and warns on stderr when its log is damaged; returns the problems. */
export const warnIfDamaged = Effect.fn("cli.warnIfDamaged")(function* (sessionId: SessionId) {
  const problems = yield* checkOnRead(sessionId)
  if (problems.length > 0) yield* Console.error(`logbook: warning: ${damagedText(sessionId, problems)}`)
  return problems
})
