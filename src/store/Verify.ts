/**
 * Checking a session's log against its hash chain (docs/event-log.md "The hash chain"), and its
 * snapshots against its events: what `logbook verify` runs, and (without the snapshots) what the
 * read commands run before they show a session.
 *
 * A session verifies when its seqs run 1, 2, 3 … without a gap up to the last seq the session
 * index holds, every row's stored hash is the SHA-256 of its canonical bytes (its content and its
 * `prev_hash`), every row's `prev_hash` is the hash of the row before it (seq 1: the genesis value),
 * and — with `snapshots` — every stored snapshot equals the fold of the events up to its seq. Each
 * problem names the seq where it is.
 *
 * Only `EventStore` methods are used, so this works on every store layer.
 */
import { Effect, Either, Option, Schema, Stream } from "effect"
import { decodeEnvelope } from "../domain/Events.js"
import type { SessionId } from "../domain/Ids.js"
import type { EventStoreError } from "./Errors.js"
import { type ChainMark, type ChainRow, EventStore, type EventStoreService } from "./EventStore.js"
import { eventHash, genesisHash } from "./internal/chain.js"
import { rowToRaw } from "./internal/storeService.js"
import * as Projection from "./Projection.js"

/** One thing wrong with a session's log, and where. */
export const Problem = Schema.Union(
  /** seqs `from` … `to` are not in the log (`atEnd`: after its last row, which the index says it had) */
  Schema.TaggedStruct("missing", { from: Schema.Int, to: Schema.Int, atEnd: Schema.Boolean }),
  /** the row's stored hash is not the hash of its content: the row was changed after it was written */
  Schema.TaggedStruct("content", { seq: Schema.Int }),
  /** the row has no hash: it was written around logbook */
  Schema.TaggedStruct("unchained", { seq: Schema.Int }),
  /** the row's `prev_hash` is not the hash of the row before it (`after` 0: not the genesis value) */
  Schema.TaggedStruct("chain", { after: Schema.Int, seq: Schema.Int }),
  /** rows past the last seq the session index holds: written around logbook */
  Schema.TaggedStruct("extra", { from: Schema.Int, to: Schema.Int }),
  /** a stored snapshot that does not agree with the events up to its seq */
  Schema.TaggedStruct("snapshot", { seq: Schema.Int, reason: Schema.String })
)
export type Problem = typeof Problem.Type

/** The outcome of checking one session. */
export interface SessionVerification {
  readonly sessionId: SessionId
  /** rows in the log */
  readonly events: number
  /** the last seq the session index holds */
  readonly lastSeq: number
  /** rows chained at the upgrade to the chain or at an import, not as they were appended */
  readonly mark: Option.Option<ChainMark>
  /** the hash of the last row (null: no rows, or the last has none): what to keep elsewhere to anchor the session */
  readonly head: string | null
  /** snapshots compared with the events (0 unless asked) */
  readonly snapshots: number
  readonly problems: ReadonlyArray<Problem>
}

export interface VerifyOptions {
  /** also compare every stored snapshot with the fold of the events up to its seq (reads and folds everything) */
  readonly snapshots?: boolean | undefined
}

/** The seq a problem is at (the first one it names), for ordering and for "before the snapshot". */
export const problemSeq = (p: Problem): number => {
  switch (p._tag) {
    case "missing":
    case "extra":
      return p.from
    case "chain":
    case "content":
    case "unchained":
    case "snapshot":
      return p.seq
  }
}

/** A problem as a phrase: `seq 3 missing`, `content changed at seq 7`, `chain broken between 5 and 6`. */
export const problemText = (p: Problem): string => {
  switch (p._tag) {
    case "missing": {
      const seqs = p.from === p.to ? `seq ${p.from} missing` : `seqs ${p.from}–${p.to} missing`
      return p.atEnd ? `${seqs} (the log ends before the last seq the session index holds)` : seqs
    }
    case "content":
      return `content changed at seq ${p.seq} (its hash does not match it)`
    case "unchained":
      return `seq ${p.seq} has no hash (written around logbook)`
    case "chain":
      return p.after === 0
        ? "chain broken at seq 1 (it does not start from the session's genesis value)"
        : `chain broken between ${p.after} and ${p.seq}`
    case "extra":
      return `${p.from === p.to ? `seq ${p.from}` : `seqs ${p.from}–${p.to}`} past the last seq the session index holds (written around logbook)`
    case "snapshot":
      return `snapshot at seq ${p.seq} disagrees with events (${p.reason})`
  }
}

/** Compares two JSON values, object keys in any order. */
const jsonEqual = (a: unknown, b: unknown): boolean => {
  if (a === b) return true
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false
  if (Array.isArray(a) !== Array.isArray(b)) return false
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => jsonEqual(x, b[i]))
  const ka = Object.keys(a as object)
  const kb = Object.keys(b as object)
  if (ka.length !== kb.length) return false
  const rb = b as Record<string, unknown>
  return ka.every((k) => Object.hasOwn(rb, k) && jsonEqual((a as Record<string, unknown>)[k], rb[k]))
}

/** The first key path where two JSON values differ (`title`, `messages[2].text`), for the report. */
const firstDifference = (a: unknown, b: unknown, at = ""): string => {
  if (typeof a === "object" && typeof b === "object" && a !== null && b !== null) {
    if (Array.isArray(a) && Array.isArray(b)) {
      if (a.length !== b.length) return `${at || "state"} has ${b.length} items, the events give ${a.length}`
      for (let i = 0; i < a.length; i++) {
        if (!jsonEqual(a[i], b[i])) return firstDifference(a[i], b[i], `${at}[${i}]`)
      }
    } else if (!Array.isArray(a) && !Array.isArray(b)) {
      const ra = a as Record<string, unknown>
      const rb = b as Record<string, unknown>
      for (const k of new Set([...Object.keys(ra), ...Object.keys(rb)])) {
        if (!jsonEqual(ra[k], rb[k])) return firstDifference(ra[k], rb[k], at === "" ? k : `${at}.${k}`)
      }
    }
  }
  return `${at || "state"} differs`
}

/**
 * What is wrong with one row: its stored hash is not the hash of its content (or it has none), or
 * its `prev_hash` is not the hash of `previous` (seq 1: the genesis value). A `previous` that is not
 * the row just before it (a gap, or none read) is not compared: the gap is the problem.
 */
export const rowProblems = (
  sessionId: SessionId,
  row: ChainRow,
  previous: ChainRow | undefined
): ReadonlyArray<Problem> => {
  const problems: Array<Problem> = []
  if (row.hash === null) {
    problems.push({ _tag: "unchained", seq: row.seq })
  } else if (row.prevHash === null || eventHash(row.prevHash, row) !== row.hash) {
    problems.push({ _tag: "content", seq: row.seq })
  }
  const expectedPrev =
    row.seq === 1
      ? genesisHash(sessionId)
      : previous !== undefined && previous.seq === row.seq - 1
        ? previous.hash
        : undefined
  // after a row without a hash, that row is the problem
  if (expectedPrev !== undefined && expectedPrev !== null && row.prevHash !== expectedPrev) {
    problems.push({ _tag: "chain", after: row.seq - 1, seq: row.seq })
  }
  return problems
}

/**
 * Checks one session. Reads every row (with its payload) once; with `snapshots`, also decodes and
 * folds them, comparing the fold with each stored snapshot when it reaches the snapshot's seq.
 */
export const verifySession = Effect.fn("Verify.verifySession")(function* (
  sessionId: SessionId,
  options: VerifyOptions = {}
) {
  const store = yield* EventStore
  // the index, the rows and the snapshots as of one moment: a writer's commit meanwhile is no problem
  return yield* store.consistent(verifyConsistent(store, sessionId, options))
})

const verifyConsistent = (store: EventStoreService, sessionId: SessionId, options: VerifyOptions) =>
  Effect.gen(function* () {
    const { counts, mark } = yield* store.chainInfo(sessionId)
    const indexed = Option.match(yield* store.session(sessionId), { onNone: () => 0, onSome: (s) => s.lastSeq })
    const problems: Array<Problem> = []
    const snapshotSeqs = options.snapshots
      ? yield* store.snapshotSeqs(sessionId, Projection.PROJECTION_VERSION)
      : ([] as ReadonlyArray<number>)
    let nextSnapshot = 0
    let snapshotsChecked = 0
    // the fold, for the snapshots: stops at the first event it cannot take (reported on the snapshots after it)
    const folder = Projection.folder(Projection.empty(sessionId))
    let foldBroken: string | undefined

    const checkSnapshotsUpTo = (seq: number): Effect.Effect<void, EventStoreError> =>
      Effect.gen(function* () {
        while (nextSnapshot < snapshotSeqs.length && snapshotSeqs[nextSnapshot]! <= seq) {
          const at = snapshotSeqs[nextSnapshot++]!
          snapshotsChecked++
          const loaded = yield* store
            .loadSnapshot(sessionId, { version: Projection.PROJECTION_VERSION, atOrBelow: at })
            .pipe(Effect.either)
          if (Either.isLeft(loaded)) {
            problems.push({ _tag: "snapshot", seq: at, reason: loaded.left.message })
            continue
          }
          if (Option.isNone(loaded.right) || loaded.right.value.seq !== at) continue
          const snapshot = loaded.right.value
          const reasons: Array<string> = []
          if (!snapshot.intact) reasons.push("its JSON was changed after it was saved")
          if (foldBroken !== undefined) {
            reasons.push(`the events up to it do not fold: ${foldBroken}`)
          } else {
            const encoded = Either.flatMap(folder.state(), (s) => Projection.encodeState(s))
            if (Either.isLeft(encoded)) {
              reasons.push(`the events up to it do not fold: ${encoded.left.message}`)
            } else {
              // as JSON, as the snapshot was saved (no undefined fields)
              const folded: unknown = JSON.parse(JSON.stringify(encoded.right))
              if (!jsonEqual(folded, snapshot.state)) {
                reasons.push(`${firstDifference(folded, snapshot.state)} from the fold of events 1–${at}`)
              }
            }
          }
          if (reasons.length > 0) problems.push({ _tag: "snapshot", seq: at, reason: reasons.join("; ") })
        }
      })

    let expected = 1
    let previous: ChainRow | undefined
    let extraFrom: number | undefined
    let extraTo = 0
    yield* Stream.runForEachChunk(store.readChain(sessionId), (chunk) =>
      Effect.gen(function* () {
        for (const row of chunk) {
          if (row.seq > expected) problems.push({ _tag: "missing", from: expected, to: row.seq - 1, atEnd: false })
          if (row.seq > indexed) {
            extraFrom ??= row.seq
            extraTo = row.seq
          }
          for (const p of rowProblems(sessionId, row, previous)) problems.push(p)
          previous = row
          expected = row.seq + 1
          if (snapshotSeqs.length === 0) continue
          // a snapshot at a seq the log does not have (a gap): compared with the fold before the gap
          if (nextSnapshot < snapshotSeqs.length && snapshotSeqs[nextSnapshot]! < row.seq) {
            yield* checkSnapshotsUpTo(row.seq - 1)
          }
          if (foldBroken === undefined) {
            const envelope = decodeEnvelope(rowToRaw(sessionId, row))
            if (Either.isLeft(envelope)) {
              foldBroken = `event ${row.seq}: ${envelope.left.message}`
            } else {
              const pushed = folder.push(envelope.right)
              if (Either.isLeft(pushed)) {
                foldBroken = `event ${pushed.left.seq} (${pushed.left.type}): ${pushed.left.message}`
              }
            }
          }
          if (nextSnapshot < snapshotSeqs.length && snapshotSeqs[nextSnapshot]! <= row.seq) {
            yield* checkSnapshotsUpTo(row.seq)
          }
        }
      })
    )
    if (extraFrom !== undefined) problems.push({ _tag: "extra", from: extraFrom, to: extraTo })
    if (indexed >= expected) problems.push({ _tag: "missing", from: expected, to: indexed, atEnd: true })
    // snapshots past the last row: nothing folds up to them
    if (nextSnapshot < snapshotSeqs.length) {
      foldBroken ??= `the log ends at seq ${expected - 1}`
      yield* checkSnapshotsUpTo(Number.MAX_SAFE_INTEGER)
    }
    problems.sort((a, b) => problemSeq(a) - problemSeq(b))
    const verification: SessionVerification = {
      sessionId,
      events: counts.count,
      lastSeq: indexed,
      mark,
      head: previous?.hash ?? null,
      snapshots: snapshotsChecked,
      problems
    }
    return verification
  })

/**
 * The check the read commands run before they show a session, cheap whatever its length: the seqs
 * (their count and bounds from the primary key, against the index's last seq; the gaps located only
 * when they disagree) and the chain at the tip (the last two rows' hashes and their link). A row
 * changed in the middle of the log is found by `verifySession` (`logbook verify`), and by `logbook
 * events`, which checks every row it reads.
 */
export const checkOnRead = Effect.fn("Verify.checkOnRead")(function* (sessionId: SessionId) {
  const store = yield* EventStore
  return yield* store.consistent(checkConsistent(store, sessionId))
})

const checkConsistent = (store: EventStoreService, sessionId: SessionId) =>
  Effect.gen(function* () {
    const { counts } = yield* store.chainInfo(sessionId)
    const indexed = Option.match(yield* store.session(sessionId), { onNone: () => 0, onSome: (s) => s.lastSeq })
    const problems: Array<Problem> = []
    if (counts.count === 0) {
      if (indexed > 0) problems.push({ _tag: "missing", from: 1, to: indexed, atEnd: true })
      return problems as ReadonlyArray<Problem>
    }
    if (counts.first > 1) problems.push({ _tag: "missing", from: 1, to: counts.first - 1, atEnd: false })
    if (counts.count !== counts.last - counts.first + 1) {
      for (const gap of yield* store.seqGaps(sessionId)) problems.push({ _tag: "missing", ...gap, atEnd: false })
    }
    if (indexed > counts.last) problems.push({ _tag: "missing", from: counts.last + 1, to: indexed, atEnd: true })
    if (counts.last > indexed) {
      problems.push({ _tag: "extra", from: Math.max(indexed + 1, counts.first), to: counts.last })
    }
    const tip = yield* Stream.runCollect(store.readChain(sessionId, { from: Math.max(1, counts.last - 1) }))
    let previous: ChainRow | undefined
    for (const row of tip) {
      for (const p of rowProblems(sessionId, row, previous)) problems.push(p)
      previous = row
    }
    problems.sort((a, b) => problemSeq(a) - problemSeq(b))
    return problems as ReadonlyArray<Problem>
  })
