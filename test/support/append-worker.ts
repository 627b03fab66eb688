/**
 * A separate OS process that appends to a session in a shared database file.
 * argv: <db> <sessionId> <label> <count>. Prints "ready", waits for "go" on stdin, appends
 * `count` events (alternating awaited appends, small batches and buffered appends), prints "done".
 */
import * as readline from "node:readline"
import { Effect } from "effect"
import * as Events from "../../src/domain/Events.js"
import { CallId, SessionId } from "../../src/domain/Ids.js"
import { EventStore } from "../../src/store/EventStore.js"

const [file, session, label, countText] = process.argv.slice(2)
const count = Number(countText)
const sessionId = SessionId.make(session!)
const event = (i: number) => Events.make("tool.progress", { callId: CallId.make(label!), output: `${label}:${i}` })

const waitForGo = Effect.async<void>((resume) => {
  const rl = readline.createInterface({ input: process.stdin })
  rl.on("line", (line) => {
    if (line.trim() === "go") {
      rl.close()
      resume(Effect.void)
    }
  })
})

const program = Effect.gen(function* () {
  const store = yield* EventStore
  process.stdout.write("ready\n")
  yield* waitForGo
  let i = 0
  while (i < count) {
    const kind = i % 3
    if (kind === 0) {
      yield* store.append(sessionId, [event(i)])
      i += 1
    } else if (kind === 1) {
      const batch = [event(i), event(i + 1), event(i + 2)].slice(0, count - i)
      yield* store.append(sessionId, batch)
      i += batch.length
    } else {
      yield* store.appendLater(sessionId, [event(i)])
      i += 1
    }
  }
  yield* store.flush
})

Effect.runPromise(program.pipe(Effect.provide(EventStore.layerSqlite({ filename: file! })))).then(
  // the store is closed (everything flushed) when runPromise resolves
  () => process.stdout.write("done\n", () => process.exit(0)),
  (e) => {
    process.stderr.write(`${String(e)}\n`)
    process.exit(1)
  }
)
