/**
 * A separate OS process that appends to a session of a shared database file until told to stop.
 * argv: <db> <sessionId>. Appends batches of one to three events in a loop; prints "ready" once the
 * first is committed, stops when its stdin ends, then prints "done <count>".
 */
import { Effect } from "effect"
import * as Events from "../../src/domain/Events.js"
import { CallId, SessionId } from "../../src/domain/Ids.js"
import { EventStore } from "../../src/store/EventStore.js"

const [file, session] = process.argv.slice(2)
const sessionId = SessionId.make(session!)
let stop = false
process.stdin.on("end", () => {
  stop = true
})
process.stdin.resume()

const program = Effect.gen(function* () {
  const store = yield* EventStore
  let i = 0
  while (!stop) {
    const size = (i % 3) + 1
    yield* store.append(
      sessionId,
      Array.from({ length: size }, (_, k) =>
        Events.make("tool.progress", { callId: CallId.make("loop"), output: `loop:${i + k}` })
      )
    )
    if (i === 0) process.stdout.write("ready\n")
    i += size
    // lets the stdin "end" event through between commits
    yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
  }
  process.stdout.write(`done ${i}\n`)
})

Effect.runPromise(program.pipe(Effect.provide(EventStore.layerSqlite({ filename: file! })))).then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`${String(error)}\n`)
    process.exit(1)
  }
)
