/**
 * Restore: `Snapshots.restore` (newest snapshot + the events after it) over `Snapshots.foldAll`
 * (the full fold from event 1), both reading the same SQLite file through `EventStore`, measured
 * side by side in one run; and how both grow with the number of events.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { isDeepStrictEqual } from "node:util"
import { Effect, Either, Option } from "effect"
import type { Event, NewEvent } from "../src/domain/Events.js"
import * as Events from "../src/domain/Events.js"
import { CallId, MessageId, SessionId, TurnId } from "../src/domain/Ids.js"
import { EventStore } from "../src/store/EventStore.js"
import * as Projection from "../src/store/Projection.js"
import * as Snapshots from "../src/store/Snapshots.js"
import { choicesFromSeed, simulate, toEnvelopes } from "../test/support/arbitraries.js"
import { fileSize, gc, median, now } from "./util.js"

/**
 * - `realistic`: the property tests' session simulator with text deltas weighted up (~85% of the
 *   events are text deltas; turns with steps, tool calls, retries, steers, interrupts, crashes).
 *   Its state keeps every message, so it grows with the session.
 * - `progress`: one long-running tool call stream: a few calls whose `tool.progress` events each
 *   replace the call's latest output. The state stays small however many events there are.
 */
export type SessionKind = "realistic" | "progress"

/** Text deltas are 200/(200+…) of the moves offered while streaming: ~85% of all events. */
const DELTA_WEIGHT = 200

/** `count` valid events of a session of the given kind; deterministic. */
export const sessionEvents = (kind: SessionKind, count: number, seed = 42): Array<Event> => {
  if (kind === "realistic") {
    // every choice emits at least one event, and any prefix of a simulated session is valid
    const events = simulate(choicesFromSeed(seed, count), { deltaWeight: DELTA_WEIGHT })
    if (events.length < count) throw new Error(`the simulator made ${events.length} events, not ${count}`)
    return events.slice(0, count)
  }
  const messageId = MessageId.make("a-1")
  const userId = MessageId.make("u-1")
  const calls = ["call-1", "call-2", "call-3"].map((c) => CallId.make(c))
  const out: Array<Event> = [
    Events.make("session.created", { title: "a long build", cwd: "/work/project", model: "test/model" }),
    Events.make("user.message", { messageId: userId, text: "run the whole test suite", mode: "prompt" }),
    Events.make("turn.started", { turnId: TurnId.make("turn-1"), messageIds: [userId] }),
    Events.make("session.status", { status: { _tag: "busy" } }),
    Events.make("assistant.started", { messageId, model: "test/model" }),
    Events.make("step.started", { messageId, step: 0 }),
    ...calls.map((callId, i) =>
      Events.make("tool.invoked", { messageId, callId, tool: "bash", input: { command: `npm test -- shard ${i}` } })
    ),
    Events.make("chat.state", { state: "awaiting_tool" })
  ]
  for (let i = 0; out.length < count; i++) {
    out.push(
      Events.make("tool.progress", {
        callId: calls[i % calls.length]!,
        output: ` ✓ test/store/case-${i % 997}.test.ts (${(i * 7) % 41} tests) ${(i * 13) % 900}ms\n`
      })
    )
  }
  return out.slice(0, count)
}

export interface BuiltSession {
  readonly file: string
  readonly sessionId: SessionId
  readonly kind: SessionKind
  readonly count: number
  /** seq of the newest snapshot: `restore` folds the `count - snapshotSeq` events after it */
  readonly snapshotSeq: number
  /** how many snapshots were saved */
  readonly snapshots: number
  /** JSON bytes of the newest snapshot's state */
  readonly stateBytes: number
  /** JSON bytes of all snapshots / of all event payloads */
  readonly snapshotBytes: number
  readonly payloadBytes: number
  readonly buildMs: number
}

export interface BuildOptions {
  /** the snapshot policy's `every` (default `Snapshots.DEFAULT_SNAPSHOT_EVERY`) */
  readonly every?: number
  /**
   * `policy`: a snapshot at every multiple of `every` (what `makeJournal` does; its turn-end
   * snapshots are left out, they only shorten the tail); `newest`: only the newest of those
   * (restore reads nothing else: the lookup is one indexed `ORDER BY seq DESC LIMIT 1`).
   */
  readonly snapshots: "policy" | "newest"
}

/** Events per `appendLater` call while building. */
const BATCH = 1000

/**
 * Appends a session to a SQLite file through `EventStore` (appendLater in batches, flushed) and
 * saves snapshots of the folded state with `Snapshots.takeSnapshot`. The newest snapshot is
 * `every` events behind the end (the most the every-K rule leaves), so restore has a full tail.
 * Fails if the events do not fold (`ProjectionError`).
 */
export const buildSession = (file: string, kind: SessionKind, count: number, options: BuildOptions) =>
  Effect.gen(function* () {
    const store = yield* EventStore
    const every = options.every ?? Snapshots.DEFAULT_SNAPSHOT_EVERY
    const sessionId = SessionId.make(`bench-${kind}-${count}`)
    const events = sessionEvents(kind, count)
    const lastSnapshot = Math.floor((count - 1) / every) * every
    const wanted = (seq: number) =>
      seq % every === 0 && seq <= lastSnapshot && (options.snapshots === "policy" || seq === lastSnapshot)
    const start = now()
    const folder = Projection.folder(Projection.empty(sessionId))
    let snapshots = 0
    let snapshotBytes = 0
    let stateBytes = 0
    let payloadBytes = 0
    let unflushed = 0
    for (let from = 0; from < count; ) {
      // cut batches at snapshot points, so the state can be read exactly there
      const nextSnapshot = Math.ceil((from + 1) / every) * every
      const to = Math.min(count, from + BATCH, nextSnapshot)
      const slice = events.slice(from, to)
      const envelopes = toEnvelopes(sessionId, slice, { fromSeq: from + 1 })
      const batch: Array<NewEvent> = envelopes.map((e) => ({ type: e.type, payload: e.payload, at: e.at }) as NewEvent)
      for (const e of slice) payloadBytes += JSON.stringify(e.payload).length
      yield* store.appendLater(sessionId, batch)
      unflushed += batch.length
      const folded = folder.pushAll(envelopes)
      if (Either.isLeft(folded)) return yield* Effect.die(folded.left)
      from = to
      if (wanted(to)) {
        // as the journal does: the events are committed before their snapshot
        yield* store.flush
        unflushed = 0
        const state = Either.getOrThrow(folder.state())
        yield* Snapshots.takeSnapshot(state)
        const bytes = JSON.stringify(state).length
        snapshots++
        snapshotBytes += bytes
        stateBytes = bytes
      } else if (unflushed >= 50_000) {
        yield* store.flush
        unflushed = 0
      }
    }
    yield* store.flush
    const lastSeq = yield* store.lastSeq(sessionId)
    if (lastSeq !== count) return yield* Effect.die(new Error(`expected ${count} events, the store has ${lastSeq}`))
    const built: BuiltSession = {
      file,
      sessionId,
      kind,
      count,
      snapshotSeq: lastSnapshot,
      snapshots,
      stateBytes,
      snapshotBytes,
      payloadBytes,
      buildMs: now() - start
    }
    return built
  }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file })))

/** The first path where two JSON-like values differ (for a loud failure message). */
const firstDifference = (a: unknown, b: unknown, at = "state"): string | undefined => {
  if (isDeepStrictEqual(a, b)) return undefined
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) {
    return `${at}: ${JSON.stringify(a)?.slice(0, 200)} !== ${JSON.stringify(b)?.slice(0, 200)}`
  }
  const keys = new Set([...Object.keys(a), ...Object.keys(b)])
  for (const key of keys) {
    const d = firstDifference((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key], `${at}.${key}`)
    if (d !== undefined) return d
  }
  return `${at}: same keys and values, different prototypes or key sets`
}

/** Fails loudly when the restored state is not the full fold's. */
const assertSameState = (restored: Projection.SessionState, full: Projection.SessionState, session: BuiltSession) => {
  const difference = firstDifference(restored, full)
  if (difference !== undefined) {
    throw new Error(
      `restore and the full fold differ for ${session.kind} session of ${session.count} events: ${difference}`
    )
  }
  if (full.lastSeq !== session.count) {
    throw new Error(`the full fold stopped at seq ${full.lastSeq}, not ${session.count}`)
  }
}

const timed = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<readonly [number, A], E, R> =>
  Effect.suspend(() => {
    gc()
    const start = now()
    return Effect.map(effect, (a) => [now() - start, a] as const)
  })

export interface RestoreMeasurement {
  readonly session: BuiltSession
  readonly rounds: number
  /** medians, ms */
  readonly restoreMs: number
  readonly fullMs: number
  /** restore split into its parts (medians, ms): snapshot row + JSON.parse, Schema decode, tail fold */
  readonly loadMs: number
  readonly decodeMs: number
  readonly tailMs: number
}

/**
 * Runs `restore` and `foldAll` alternately (`rounds` each, after `warmup` unmeasured rounds),
 * checks that every pair gives deep-equal states, and returns the medians.
 */
export const measureRestore = (session: BuiltSession, rounds: number, warmup = 1) =>
  Effect.gen(function* () {
    const store = yield* EventStore
    const { sessionId } = session
    const restoreTimes: Array<number> = []
    const fullTimes: Array<number> = []
    const load: Array<number> = []
    const decode: Array<number> = []
    const tail: Array<number> = []
    for (let r = 0; r < warmup + rounds; r++) {
      const restoreFirst = r % 2 === 0
      let restored: Projection.SessionState | undefined
      let full: Projection.SessionState | undefined
      for (const which of restoreFirst ? ["restore", "full"] : ["full", "restore"]) {
        if (which === "restore") {
          const [ms, state] = yield* timed(Snapshots.restore(sessionId))
          restored = state
          if (r >= warmup) restoreTimes.push(ms)
        } else {
          const [ms, state] = yield* timed(Snapshots.foldAll(sessionId))
          full = state
          if (r >= warmup) fullTimes.push(ms)
        }
      }
      assertSameState(restored!, full!, session)
      restored = undefined
      full = undefined
      // the same restore, step by step, to see where its time goes
      const [loadMs, found] = yield* timed(store.loadSnapshot(sessionId, { version: Projection.PROJECTION_VERSION }))
      const snapshot = Option.getOrThrow(found)
      const [decodeMs, decoded] = yield* timed(Effect.sync(() => Projection.decodeState(snapshot.state)))
      const base = Either.getOrThrow(decoded)
      const [tailMs] = yield* timed(Snapshots.foldStream(base, store.read(sessionId, { from: base.lastSeq + 1 })))
      if (r >= warmup) {
        load.push(loadMs)
        decode.push(decodeMs)
        tail.push(tailMs)
      }
    }
    const result: RestoreMeasurement = {
      session,
      rounds,
      restoreMs: median(restoreTimes),
      fullMs: median(fullTimes),
      loadMs: median(load),
      decodeMs: median(decode),
      tailMs: median(tail)
    }
    return result
  }).pipe(Effect.provide(EventStore.layerSqlite({ filename: session.file })))

export interface RestoreResult {
  /** the headline: a realistic 100k-event session with snapshots by the policy */
  readonly headline: RestoreMeasurement
  /** restore and full fold at each size, for each kind of session */
  readonly growth: ReadonlyArray<RestoreMeasurement>
}

export interface RestoreBenchOptions {
  readonly headlineCount?: number
  readonly sizes?: ReadonlyArray<number>
  readonly kinds?: ReadonlyArray<SessionKind>
  /**
   * Measured rounds for a session of `count` events (default: 11 up to 20k events, 7 up to 100k,
   * 3 above, where a full fold takes seconds and the warm-up round is skipped).
   */
  readonly rounds?: (count: number) => number
  /** progress lines */
  readonly log?: (line: string) => void
}

const removeDb = (file: string) => {
  for (const f of [file, `${file}-wal`, `${file}-shm`]) fs.rmSync(f, { force: true })
}

/** Builds each session, measures it, and removes its file before building the next one. */
export const benchRestore = async (dir: string, options: RestoreBenchOptions = {}): Promise<RestoreResult> => {
  const headlineCount = options.headlineCount ?? 100_000
  const sizes = options.sizes ?? [10_000, 100_000, 1_000_000]
  const kinds = options.kinds ?? ["realistic", "progress"]
  const rounds = options.rounds ?? ((count: number) => (count <= 20_000 ? 11 : count <= 100_000 ? 7 : 3))
  const log = options.log ?? (() => {})
  let n = 0
  const run = async (kind: SessionKind, count: number, snapshots: BuildOptions["snapshots"]) => {
    const file = path.join(dir, `restore-${n++}.db`)
    try {
      const session = await Effect.runPromise(buildSession(file, kind, count, { snapshots }))
      log(
        `  built ${kind} session of ${count} events in ${(session.buildMs / 1000).toFixed(1)} s ` +
          `(${session.snapshots} snapshot(s), database ${(fileSize(file) / 1e6).toFixed(0)} MB)`
      )
      const measured = await Effect.runPromise(measureRestore(session, rounds(count), count > 100_000 ? 0 : 1))
      log(`  ${kind} ${count}: restore ${measured.restoreMs.toFixed(1)} ms, full fold ${measured.fullMs.toFixed(1)} ms`)
      return measured
    } finally {
      removeDb(file)
    }
  }
  const headline = await run("realistic", headlineCount, "policy")
  const growth: Array<RestoreMeasurement> = []
  for (const kind of kinds) {
    for (const count of sizes) {
      if (kind === "realistic" && count === headlineCount) {
        growth.push(headline)
        continue
      }
      // a growing state saved every 500 events is quadratic in bytes (1M events: ~20 GB), so the
      // big realistic sessions keep only the newest snapshot; restore reads nothing else
      growth.push(await run(kind, count, kind === "realistic" && count > headlineCount ? "newest" : "policy"))
    }
  }
  return { headline, growth }
}
