/**
 * Finds the session a user means: a full id, a prefix that matches exactly one session, or
 * `latest` (the most recently updated one).
 */
import { Effect, Option } from "effect"
import { SessionId } from "../domain/Ids.js"
import { EventStore } from "../store/EventStore.js"
import { CliError } from "./errors.js"

/** The session with this id, unique id prefix, or `latest`; `CliError` (exit 2) when none or several match. */
export const resolveSession = Effect.fn("cli.resolveSession")(function* (idOrPrefix: string) {
  const store = yield* EventStore
  const text = idOrPrefix.trim()
  if (text === "") return yield* CliError.usage("the session id is empty; see `logbook sessions list`")
  const exact = yield* store.session(SessionId.make(text))
  if (Option.isSome(exact)) return exact.value
  if (text === "latest") {
    // the most recently updated session (deleted ones aside)
    const latest = yield* store.sessions({ limit: 1 })
    if (latest.length === 1) return latest[0]!
    return yield* CliError.usage("there is no session yet, so no latest one")
  }
  // the ids only (one indexed column), deleted sessions too: a short id `sessions list` printed is unique among them
  const ids = yield* store.sessionIds
  const matches = ids.filter((id) => id.toLowerCase().startsWith(text.toLowerCase())).sort()
  if (matches.length === 1) {
    const found = yield* store.session(matches[0]!)
    if (Option.isSome(found)) return found.value
  }
  if (matches.length <= 1) {
    return yield* CliError.usage(`no session matches "${text}"; see \`logbook sessions list\` for the ids`)
  }
  const shown = matches.slice(0, 5).join(", ")
  return yield* CliError.usage(
    `"${text}" matches ${matches.length} sessions (${shown}${matches.length > 5 ? ", …" : ""}); give more of the id`
  )
})
