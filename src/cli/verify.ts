/**
 * `logbook verify [<session>]`: checks the log against its hash chain — the seqs (1, 2, 3 … up to
 * the last the session index holds), every row's hash against its content, every row's link to the
 * row before it — and every stored snapshot against the fold of the events up to its seq
 * (`Verify.verifySession`). No session: every session of the database, deleted ones too.
 *
 * Exit codes: 0 everything verifies, 1 something is broken (each problem named: session, seq,
 * what), 2 an unusable database or an unknown session (as every command).
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import { Console, Effect, Option } from "effect"
import { formatLocalTime } from "../present/text.js"
import type { ChainMark } from "../store/EventStore.js"
import { EventStore } from "../store/EventStore.js"
import { problemText, type SessionVerification, verifySession } from "../store/Verify.js"
import { dbOption, existingStore } from "./db.js"
import { CliError } from "./errors.js"
import { formatOption } from "./options.js"
import { type Style, stdoutStyle } from "./render.js"
import { resolveSession } from "./resolveSession.js"
import { shortIds } from "./shortId.js"

const sessionArgOptional = Args.text({ name: "session" }).pipe(
  Args.withDescription("The session id, a unique prefix of it, or `latest`; leave it out to check every session."),
  Args.optional
)

const verifyFormat = formatOption(
  ["text", "json"],
  "text: a line per session and one per problem; json: one object {ok, sessions: [{id, ok, events, lastSeq, snapshots, chainedSince, mark, head, problems}]}."
)

const seqs = (from: number, to: number): string => (from === to ? `seq ${from}` : `seqs ${from}–${to}`)

/** Since when the chain guards a session: its first seq not chained by a migration or an import. */
const chainedSince = (v: SessionVerification): number =>
  Option.match(v.mark, { onNone: () => 1, onSome: (m) => m.throughSeq + 1 })

export const markText = (mark: ChainMark): string =>
  mark.reason === "migrated"
    ? `${seqs(1, mark.throughSeq)} were chained when the database was upgraded to the chain (${formatLocalTime(mark.at)}), not as they were written: a change made to them before then cannot be seen`
    : `${seqs(1, mark.throughSeq)} were chained when the session was imported (${formatLocalTime(mark.at)}): the session file carries no hashes, so a change made to the file cannot be seen`

const sessionLines = (v: SessionVerification, shortId: string, title: string | null, style: Style): string => {
  const name = `${shortId}${title === null ? "" : `  "${title}"`}`
  const ok = v.problems.length === 0
  const snapshots = v.snapshots === 1 ? "1 snapshot" : `${v.snapshots} snapshots`
  const head = ok
    ? `${style.green("✓")} ${name}  ${v.events} events: seqs, chain and ${snapshots} verify`
    : `${style.red("✗")} ${name}  ${v.events} events: ${v.problems.length} problem${v.problems.length === 1 ? "" : "s"}`
  const lines = [head]
  for (const p of v.problems) lines.push(`    ${style.red(problemText(p))}`)
  if (Option.isSome(v.mark) && v.mark.value.throughSeq > 0) lines.push(`    ${style.dim(markText(v.mark.value))}`)
  return lines.join("\n")
}

export const verify = Command.make(
  "verify",
  { session: sessionArgOptional, db: dbOption, format: verifyFormat },
  Effect.fn("cli.verify")(
    function* ({ format, session }) {
      const store = yield* EventStore
      const summaries = Option.isSome(session)
        ? [yield* resolveSession(session.value)]
        : [...(yield* store.sessions({ includeDeleted: true }))].sort((a, b) => a.createdAt - b.createdAt)
      const short = shortIds(yield* store.sessionIds)
      const results: Array<{ readonly verification: SessionVerification; readonly title: string | null }> = []
      for (const summary of summaries) {
        results.push({ verification: yield* verifySession(summary.id, { snapshots: true }), title: summary.title })
      }
      const broken = results.filter((r) => r.verification.problems.length > 0)
      if (format === "json") {
        yield* Console.log(
          JSON.stringify({
            ok: broken.length === 0,
            sessions: results.map(({ verification: v }) => ({
              id: v.sessionId,
              ok: v.problems.length === 0,
              events: v.events,
              lastSeq: v.lastSeq,
              snapshots: v.snapshots,
              chainedSince: chainedSince(v),
              mark: Option.getOrNull(v.mark),
              head: v.head,
              problems: v.problems.map((p) => ({ ...p, message: problemText(p) }))
            }))
          })
        )
      } else {
        const style = yield* stdoutStyle
        const lines = results.map((r) =>
          sessionLines(r.verification, short.get(r.verification.sessionId) ?? r.verification.sessionId, r.title, style)
        )
        if (results.length === 0) lines.push("No sessions in this database: nothing to verify.")
        else if (results.length > 1) {
          lines.push(
            broken.length === 0
              ? `${results.length} sessions verify.`
              : `${broken.length} of ${results.length} sessions are broken.`
          )
        }
        yield* Console.log(lines.join("\n"))
      }
      if (broken.length > 0) {
        const first = broken[0]!.verification
        return yield* CliError.failed(
          broken.length === 1
            ? `the log of session ${first.sessionId} is broken: ${first.problems.map(problemText).join("; ")}`
            : `${broken.length} sessions are broken (the first: ${first.sessionId}, ${problemText(first.problems[0]!)})`
        )
      }
    },
    (effect, { db }) => Effect.provide(effect, existingStore(db))
  )
).pipe(
  Command.withDescription(
    "Check a session's log (or every session's): seqs without a gap, each event's hash against its " +
      "content, the chain from each event to the one before it, and each snapshot against the " +
      "events. Exit 1 when something is broken, naming the session, the seq and what."
  )
)
