/**
 * Snapshots and restore (DESIGN §2); the `SessionJournal` the kernel appends through is in
 * SessionJournal.ts.
 *
 * A snapshot is the projection of a session at seq N, as JSON, tagged with `PROJECTION_VERSION`.
 * Restoring = the newest usable snapshot at or below the wanted seq + the fold of the events after
 * it. A snapshot that was changed after it was saved (its SHA-256), or does not match its row, is skipped with a warning and
 * the next older one is tried, down to the full fold: a snapshot is a cache, never a source of
 * truth, so a bad one costs time, not correctness.
 *
 * Only `EventStore` methods are used (read, loadSnapshot, saveSnapshot, lastSeq), so this works the
 * same on every store layer.
 */
import { Clock, Effect, Either, Option, Stream } from "effect"
import type { Envelope, EventDecodeError } from "../domain/Events.js"
import type { SessionId } from "../domain/Ids.js"
import type { EventStoreError } from "./Errors.js"
import { EventStore } from "./EventStore.js"
import type { ProjectionError, SessionState } from "./Projection.js"
import * as Projection from "./Projection.js"

/**
 * Take a snapshot whenever the seq crosses a multiple of this (and at a turn's end, when there is
 * none yet or at least a fifth of this many events came since the newest: `shouldSnapshot`).
 */
export const DEFAULT_SNAPSHOT_EVERY = 500

export interface RestoreOptions {
  /** restore the state after this event (default: the last one) */
  readonly atSeq?: number | undefined
}

export type RestoreError = EventStoreError | EventDecodeError | ProjectionError

// ---------------------------------------------------------------------------------------------
// policy

/**
 * The snapshot policy: true when a just-appended batch (the seq was `prevSeq` before it) crosses
 * a multiple of `every`, or contains the end of a turn (`turn.finished`, `turn.interrupted`) and the
 * session has no snapshot yet (`snapshotSeq` 0) or at least `every / 5` events came since its newest.
 *
 * Why not at every turn's end (docs/projection.md, "When snapshots are taken"): a snapshot writes
 * the whole state (JSON, hashing, SQLite and as much again of WAL), while folding an event after
 * it is cheap; a one-step answer in a long session would pay for a whole snapshot to save the next
 * restore the fold of ten events. The tail a
 * restore folds stays bounded by `every` either way.
 */
export const shouldSnapshot = (options: {
  readonly every?: number | undefined
  readonly prevSeq: number
  readonly envelopes: ReadonlyArray<{ readonly seq: number; readonly type: string }>
  /** the seq of the session's newest snapshot (default 0: none) */
  readonly snapshotSeq?: number | undefined
}): boolean => {
  const { envelopes, prevSeq } = options
  if (envelopes.length === 0) return false
  const every = Math.max(1, Math.floor(options.every ?? DEFAULT_SNAPSHOT_EVERY))
  const lastSeq = envelopes[envelopes.length - 1]!.seq
  if (Math.floor(lastSeq / every) > Math.floor(prevSeq / every)) return true
  const since = options.snapshotSeq ?? 0
  if (since > 0 && lastSeq - since < turnEndMinimum(every)) return false
  return envelopes.some((e) => e.type === "turn.finished" || e.type === "turn.interrupted")
}

/** The events since the last snapshot a turn's end needs to take one: a fifth of `every` (at least 1). */
export const turnEndMinimum = (every: number): number => Math.max(1, Math.floor(every / 5))

// ---------------------------------------------------------------------------------------------
// folding and restoring

/** Folds a stream of envelopes into `initial`, chunk by chunk (linear: see `Projection.folder`). */
export const foldStream = <E, R>(
  initial: SessionState,
  envelopes: Stream.Stream<Envelope, E, R>
): Effect.Effect<SessionState, E | ProjectionError, R> =>
  Effect.suspend(() => {
    const f = Projection.folder(initial)
    return Stream.runForEachChunk(envelopes, (chunk) => f.pushAll(chunk)).pipe(Effect.flatMap(() => f.state()))
  })

/** The full fold of a session's events up to `atSeq` (default: all), ignoring snapshots. */
export const foldAll = Effect.fn("Snapshots.foldAll")(function* (sessionId: SessionId, atSeq?: number) {
  const store = yield* EventStore
  if (atSeq !== undefined && atSeq <= 0) return Projection.empty(sessionId)
  return yield* foldStream(Projection.empty(sessionId), store.read(sessionId, { to: atSeq }))
})

/**
 * The newest snapshot state at or below `atOrBelow` with the current `PROJECTION_VERSION` that
 * decodes and matches its row (session and seq); older ones are tried when one does not.
 */
export const loadSnapshotState = Effect.fn("Snapshots.loadSnapshotState")(function* (
  sessionId: SessionId,
  atOrBelow?: number
) {
  const store = yield* EventStore
  let bound = atOrBelow
  while (bound === undefined || bound >= 1) {
    const found = yield* store
      .loadSnapshot(sessionId, { version: Projection.PROJECTION_VERSION, atOrBelow: bound })
      .pipe(
        // e.g. a row that is not JSON: its seq is unknown, so no older snapshot can be tried
        Effect.catchTag("EventStoreError", (error) =>
          Effect.as(
            Effect.logWarning(`cannot load a snapshot of session ${sessionId}; folding its events instead`, error),
            Option.none()
          )
        )
      )
    if (Option.isNone(found)) return Option.none<SessionState>()
    const snapshot = found.value
    // A snapshot whose JSON is not byte for byte what was saved (SHA-256 checked) was changed
    // behind logbook's back: it is not used, whatever it says (docs/event-log.md "The hash chain").
    // An intact one is the JSON of a state the fold produced (`toJsonState`): its decode could only
    // repeat the fold's checks, so only the per-call records become maps again (`fromJsonState`).
    const state = snapshot.intact ? Projection.fromJsonState(snapshot.state) : undefined
    const decoded =
      state !== undefined
        ? Either.right(state)
        : Either.left({
            message: snapshot.intact
              ? "it is not a state of this version (no per-call records)"
              : "its JSON is not what was saved (its SHA-256 does not match): it was changed"
          })
    if (Either.isRight(decoded) && decoded.right.sessionId === sessionId && decoded.right.lastSeq === snapshot.seq) {
      return Option.some(decoded.right)
    }
    yield* Effect.logWarning(
      `ignoring the snapshot of session ${sessionId} at seq ${snapshot.seq} (folding the events instead)`
    ).pipe(
      Effect.annotateLogs(
        "reason",
        Either.isLeft(decoded) ? decoded.left.message : "its state does not match the snapshot's session or seq"
      )
    )
    bound = snapshot.seq - 1
  }
  return Option.none<SessionState>()
})

/** A restored state, and the seq of the snapshot it was restored from (0: none, every event folded). */
export interface Restored {
  readonly state: SessionState
  readonly snapshotSeq: number
}

/**
 * The state of a session after event `atSeq` (default: the last): the newest usable snapshot at
 * or below it, plus the fold of the events after the snapshot; with the snapshot's seq.
 */
export const restoreWithBase = Effect.fn("Snapshots.restore")(function* (
  sessionId: SessionId,
  options: RestoreOptions = {}
) {
  const store = yield* EventStore
  const atSeq = options.atSeq
  if (atSeq !== undefined && atSeq <= 0)
    return { state: Projection.empty(sessionId), snapshotSeq: 0 } satisfies Restored
  const base = Option.getOrElse(yield* loadSnapshotState(sessionId, atSeq), () => Projection.empty(sessionId))
  if (atSeq !== undefined && base.lastSeq >= atSeq) return { state: base, snapshotSeq: base.lastSeq } satisfies Restored
  const state = yield* foldStream(base, store.read(sessionId, { from: base.lastSeq + 1, to: atSeq }))
  return { state, snapshotSeq: base.lastSeq } satisfies Restored
})

/**
 * The state of a session after event `atSeq` (default: the last): the newest usable snapshot at
 * or below it, plus the fold of the events after the snapshot.
 */
export const restore = (sessionId: SessionId, options: RestoreOptions = {}) =>
  Effect.map(restoreWithBase(sessionId, options), (restored) => restored.state)

/** Saves the state as a snapshot at its `lastSeq` (nothing for a session without events). */
export const takeSnapshot = Effect.fn("Snapshots.takeSnapshot")(function* (state: SessionState) {
  if (state.lastSeq === 0) return
  const store = yield* EventStore
  // The state is saved as JSON-ready data made without the Schema (`toJsonState`: the per-call maps
  // become records, the rest is the state as the fold made it), not through `encodeState`: the
  // encode only repeated the fold's checks — tens of milliseconds for a long session, at every
  // turn's end and every `DEFAULT_SNAPSHOT_EVERY` events (test/store/projection.test.ts checks
  // on random sessions that both give the same JSON value). `logbook verify` still encodes (and so
  // validates) the states it folds.
  const at = yield* Clock.currentTimeMillis
  yield* store.saveSnapshot({
    sessionId: state.sessionId,
    seq: state.lastSeq,
    version: Projection.PROJECTION_VERSION,
    at,
    state: Projection.toJsonState(state)
  })
})
