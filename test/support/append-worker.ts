/**
 * A separate OS process that appends to a session in a shared database file.
 * argv: <db> <sessionId> <label> <count> [pauseAt]. Prints "ready", waits for "go" on stdin, appends
 * `count` events (alternating awaited appends, small batches and buffered appends), prints "done".
 * With `pauseAt`: once that many are written (flushed), prints "paused" and waits for "go" again.
 */
import * as readline from "node:readline"
import { Effect } from "effect"
import * as Events from "../../src/domain/Events.js"
import { CallId, SessionId } from "../../src/domain/Ids.js"
import { EventStore } from "../../src/store/EventStore.js"

const [file, session, label, countText] = process.argv.slice(2)
const count = Number(countText)
const pauseAt = process.argv[6] === undefined ? undefined : Number(process.argv[6])
const sessionId = SessionId.make(session!)
const event = (i: number) => Events.make("tool.progress", { callId: CallId.make(label!), output: `${label}:${i}` })

// every "go" read from stdin, waited for one at a time
const gos: Array<() => void> = []
let unclaimed = 0
readline.createInterface({ input: process.stdin }).on("line", (line) => {
  if (line.trim() !== "go") return
  const waiting = gos.shift()
  if (waiting !== undefined) waiting()
  else unclaimed++
})
const waitForGo = Effect.async<void>((resume) => {
  if (unclaimed > 0) {
    unclaimed--
    resume(Effect.void)
  } else gos.push(() => resume(Effect.void))
})

const program = Effect.gen(function* () {
  const store = yield* EventStore
  process.stdout.write("ready\n")
  yield* waitForGo
  let i = 0
  let step = 0
  let paused = pauseAt === undefined
  while (i < count) {
    if (!paused && i === pauseAt) {
      paused = true
      yield* store.flush
      process.stdout.write("paused\n")
      yield* waitForGo
    }
    // a batch never runs past the pause, so exactly `pauseAt` events come before it
    const boundary = paused ? count : pauseAt!
    const kind = step++ % 3
    if (kind === 0) {
      yield* store.append(sessionId, [event(i)])
      i += 1
    } else if (kind === 1) {
      const batch = [event(i), event(i + 1), event(i + 2)].slice(0, boundary - i)
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
