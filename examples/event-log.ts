import { Effect } from "effect"
import { EventStore, Events, SessionId, Snapshots } from "logbook"

const program = Effect.gen(function* () {
  const store = yield* EventStore
  const id = SessionId.make("my-session")
  // a session's first event is session.created; a second run appends to the same session
  const isNew = (yield* store.lastSeq(id)) === 0
  const event = isNew
    ? Events.make("session.created", { title: "hello" })
    : Events.make("session.titled", { title: "hello again" })
  yield* store.append(id, [event])
  return yield* Snapshots.restore(id) // the session's state, folded from its events
})

Effect.runPromise(program.pipe(Effect.provide(EventStore.layerSqlite({ filename: "logbook.db" })))).then((state) =>
  console.log(`${state.sessionId}: ${state.lastSeq} events, titled "${state.title}"`)
)
