/**
 * `logbook sessions delete <session>`: appends `session.deleted` (DESIGN §2: deleting appends an
 * event and hides the session; no row is dropped). The session is then left out of `sessions
 * list` (`--all` lists it, marked deleted), `run --session` refuses it, and `sessions show` /
 * `events` still read it and say it is deleted.
 *
 * The session's lease is taken for the write, as a driver takes it: a session another live
 * process drives is refused (exit 1), one whose driver is gone is taken over, and no process can
 * start driving it between the check and the event (the append is fenced by the lease). Deleting a
 * deleted session changes nothing and says so (exit 0).
 */
import * as Command from "@effect/cli/Command"
import { Console, Effect, Option } from "effect"
import { make } from "../domain/Events.js"
import { type SessionId, uuidV7 } from "../domain/Ids.js"
import { ownerId, ownerIsDead } from "../session/Sessions.js"
import { EventStore, type SessionSummary } from "../store/EventStore.js"
import { dbOption, writableStore } from "./db.js"
import { deletedAt, deletedText } from "./deleted.js"
import { CliError } from "./errors.js"
import { sessionArg } from "./options.js"
import { resolveSession } from "./resolveSession.js"
import { shortIds } from "./shortId.js"

/** Long enough for one write; released at once after it. */
const LEASE_TTL_MS = 30_000

const titled = (s: SessionSummary): string => (s.title === null || s.title === "" ? "(untitled)" : `"${s.title}"`)

/** Takes the session's lease for `owner`: taken over from a dead process, refused while a live one holds it. */
const takeLease = (sessionId: SessionId, owner: string) =>
  Effect.gen(function* () {
    const store = yield* EventStore
    const take = store.acquireLease(sessionId, owner, LEASE_TTL_MS)
    return yield* take.pipe(
      Effect.catchTag("LeaseHeld", (held) =>
        // a process of this machine that is gone (killed) left it: take it over without waiting
        ownerIsDead(held.owner) ? Effect.zipRight(store.releaseLease(sessionId, held.owner), take) : Effect.fail(held)
      ),
      Effect.catchTag("LeaseHeld", (held) =>
        CliError.failed(
          `session ${sessionId} is being driven by another logbook process (${held.owner}); ` +
            "it was not deleted: wait for that process to finish, or stop it, and delete the session then"
        )
      )
    )
  })

export const sessionsDelete = Command.make(
  "delete",
  { session: sessionArg, db: dbOption },
  Effect.fn("cli.sessions.delete")(
    function* ({ session }) {
      const store = yield* EventStore
      const found = yield* resolveSession(session)
      const short = shortIds(yield* store.sessionIds).get(found.id) ?? found.id
      const already = (s: SessionSummary) =>
        Effect.flatMap(deletedAt(s.id), (at) =>
          Console.log(
            `Session ${short} ${titled(s)} was already ${deletedText(at)}; nothing changed. ` +
              `logbook sessions show ${short} still reads it.`
          )
        )
      if (found.deleted) return yield* already(found)
      const owner = ownerId(yield* uuidV7)
      yield* Effect.acquireRelease(takeLease(found.id, owner), () =>
        store
          .releaseLease(found.id, owner)
          .pipe(Effect.catchAll((error) => Effect.logWarning(`could not release the lease of ${found.id}`, error)))
      )
      // read again under the lease: another delete may have come first
      const current = Option.getOrElse(yield* store.session(found.id), () => found)
      if (current.deleted) return yield* already(current)
      const [event] = yield* store.append(found.id, [make("session.deleted", {})], { owner })
      yield* Console.log(
        `Deleted session ${short} ${titled(current)}: it is hidden from logbook sessions list (--all lists it) ` +
          `and cannot be continued. Nothing was removed: its events stay in the log (the deletion is event ${event!.seq}), ` +
          `and logbook sessions show ${short} and logbook events ${short} still read it.`
      )
    },
    // the lease is released (the scope) before the store closes
    (effect, { db }) => Effect.provide(Effect.scoped(effect), writableStore(db))
  )
).pipe(
  Command.withDescription(
    "Delete a session: it is hidden from sessions list and cannot be continued, but its events stay in the log."
  )
)
