/**
 * What the read commands say about a deleted session: `session.deleted` hides it from `sessions
 * list` and it cannot be continued, but its events stay in the log, so `sessions show` and
 * `events` read it as before and say when it was deleted.
 */
import { Chunk, Effect, Option, Stream } from "effect"
import type { SessionId } from "../domain/Ids.js"
import { formatLocalTime } from "../present/text.js"
import { EventStore } from "../store/EventStore.js"

/** When the session was deleted (the first `session.deleted`; an indexed query, no payload read). */
export const deletedAt = Effect.fn("cli.deletedAt")(function* (sessionId: SessionId) {
  const store = yield* EventStore
  const first = yield* Stream.runCollect(store.query({ sessionId, types: ["session.deleted"], limit: 1 }))
  return Option.map(Chunk.head(first), (e) => e.at)
})

/** `deleted at <local time> (logbook sessions delete); its events are kept` */
export const deletedText = (at: Option.Option<number>): string =>
  `deleted${Option.match(at, { onNone: () => "", onSome: (ms) => ` at ${formatLocalTime(ms)}` })} (logbook sessions delete): hidden from sessions list, its events are kept`
