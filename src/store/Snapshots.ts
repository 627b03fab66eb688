/**
 * Snapshots and restore (DESIGN §2), and the `SessionJournal` the kernel appends through.
 *
 * A snapshot is the projection of a session at seq N, as JSON, tagged with `PROJECTION_VERSION`.
 * Restoring = the newest usable snapshot at or below the wanted seq + the fold of the events after
 * it. A snapshot that was changed after it was saved (its SHA-256), or does not match its row, is skipped with a warning and
 * the next older one is tried, down to the full fold: a snapshot is a cache, never a source of
 * truth, so a bad one costs time, not correctness.
 *
 * Only `EventStore` methods are used (read, loadSnapshot, saveSnapshot, append, appendLater,
 * flush, lastSeq), so this works the same on every store layer.
 */
import { Clock, Effect, Either, Option, Ref, Stream } from "effect"
import { type Envelope, type EventDecodeError, type NewEvent, PAYLOAD_VERSION } from "../domain/Events.js"
import { EventId, type SessionId } from "../domain/Ids.js"
import type { EventStoreError } from "./Errors.js"
import { EventStore } from "./EventStore.js"
import type { ProjectionError, SessionState } from "./Projection.js"
import * as Projection from "./Projection.js"

/** Take a snapshot whenever the seq crosses a multiple of this (and at each turn's end). */
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
 * a multiple of `every`, or contains the end of a turn (`turn.finished`, `turn.interrupted`).
 */
export const shouldSnapshot = (options: {
  readonly every?: number | undefined
  readonly prevSeq: number
  readonly envelopes: ReadonlyArray<{ readonly seq: number; readonly type: string }>
}): boolean => {
  const { envelopes, prevSeq } = options
  if (envelopes.length === 0) return false
  const every = Math.max(1, Math.floor(options.every ?? DEFAULT_SNAPSHOT_EVERY))
  const lastSeq = envelopes[envelopes.length - 1]!.seq
  if (Math.floor(lastSeq / every) > Math.floor(prevSeq / every)) return true
  return envelopes.some((e) => e.type === "turn.finished" || e.type === "turn.interrupted")
}

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
    // An intact one is the JSON of a state the fold produced, and the state Schema has no
    // transformations: its decode could only repeat the fold's checks.
    const decoded = snapshot.intact
      ? Either.right(snapshot.state as SessionState)
      : Either.left({ message: "its JSON is not what was saved (its SHA-256 does not match): it was changed" })
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

/**
 * The state of a session after event `atSeq` (default: the last): the newest usable snapshot at
 * or below it, plus the fold of the events after the snapshot.
 */
export const restore = Effect.fn("Snapshots.restore")(function* (sessionId: SessionId, options: RestoreOptions = {}) {
  const store = yield* EventStore
  const atSeq = options.atSeq
  if (atSeq !== undefined && atSeq <= 0) return Projection.empty(sessionId)
  const base = Option.getOrElse(yield* loadSnapshotState(sessionId, atSeq), () => Projection.empty(sessionId))
  if (atSeq !== undefined && base.lastSeq >= atSeq) return base
  return yield* foldStream(base, store.read(sessionId, { from: base.lastSeq + 1, to: atSeq }))
})

/** Saves the state as a snapshot at its `lastSeq` (nothing for a session without events). */
export const takeSnapshot = Effect.fn("Snapshots.takeSnapshot")(function* (state: SessionState) {
  if (state.lastSeq === 0) return
  const store = yield* EventStore
  // the state comes from the fold, so it always encodes; a failure here is a bug in the projection
  const json = yield* Effect.orDie(Projection.encodeState(state))
  const at = yield* Clock.currentTimeMillis
  yield* store.saveSnapshot({
    sessionId: state.sessionId,
    seq: state.lastSeq,
    version: Projection.PROJECTION_VERSION,
    at,
    state: json
  })
})

// ---------------------------------------------------------------------------------------------
// the journal

/**
 * The write side of one session: appends events through `EventStore`, keeps the projection up
 * to date, and takes snapshots per `shouldSnapshot`.
 *
 * Every batch is folded into the cached state BEFORE it is appended (with the seqs it will get),
 * so an event the projection would reject never reaches the log: `append` fails with
 * `ProjectionError` and writes nothing. Calls are serialised; the session's lease (see
 * `Recovery`) makes sure no other process appends to the same session. If the store assigned
 * other seqs than predicted anyway, the cached state is rebuilt from the store.
 */
export interface SessionJournal {
  readonly sessionId: SessionId
  /** The projection after everything handed to this journal (`appendLater` included). */
  readonly state: Effect.Effect<SessionState>
  /** Appends and waits for the commit; returns the committed envelopes. */
  readonly append: (events: ReadonlyArray<NewEvent>) => Effect.Effect<ReadonlyArray<Envelope>, RestoreError>
  /**
   * `append` of the events `decide` returns for the state as it is when this call's turn comes: no
   * other append of this journal runs between the read and the commit. For an event that depends on
   * the state another fiber changes (which steered messages a step delivers, while the user may
   * withdraw one).
   */
  readonly appendWith: (
    decide: (state: SessionState) => ReadonlyArray<NewEvent>
  ) => Effect.Effect<ReadonlyArray<Envelope>, RestoreError>
  /**
   * Hands events to the store's writer without waiting (text deltas). They are in `state` at
   * once; snapshots that fall due wait until the next `append` or `flush` has them committed.
   */
  readonly appendLater: (events: ReadonlyArray<NewEvent>) => Effect.Effect<void, EventStoreError | ProjectionError>
  /** Waits until everything handed over is committed, then takes a snapshot if one is due. */
  readonly flush: Effect.Effect<void, RestoreError>
  /** Takes a snapshot of the current (committed) state now. */
  readonly snapshot: Effect.Effect<void, RestoreError>
}

export interface JournalOptions {
  /** snapshot every this many events (default `DEFAULT_SNAPSHOT_EVERY`) */
  readonly every?: number | undefined
  /** the current state, when the caller already has it (e.g. from `Recovery.openSession`) */
  readonly initial?: SessionState | undefined
  /** the lease owner the journal writes for: every append is fenced by it (`AppendOptions.owner`) */
  readonly owner?: string | undefined
  /**
   * Applied to each event's payload before it is committed: `Secrets.redact`, so no API key reaches
   * the log (or the model, which reads the log). Default: none.
   */
  readonly redact?: (<A>(payload: A) => A) | undefined
  /** Runs when an append is fenced off (`EventStoreError.fenced`): the owner lost the lease. */
  readonly onFenced?: Effect.Effect<void> | undefined
}

const placeholderId = EventId.make("uncommitted")

/**
 * `redact(payload)`, or the payload as it is when reading it throws (a getter of a tool's metadata):
 * writing it as JSON then fails the same way, with the store's typed error instead of a defect here.
 */
const redactOrKeep = <A>(redact: <B>(payload: B) => B, payload: A): A => {
  try {
    return redact(payload)
  } catch {
    return payload
  }
}

export const makeJournal = Effect.fn("Snapshots.makeJournal")(function* (
  sessionId: SessionId,
  options: JournalOptions = {}
) {
  const store = yield* EventStore
  const every = options.every ?? DEFAULT_SNAPSHOT_EVERY
  const fence = { owner: options.owner }
  const initial = options.initial ?? (yield* restore(sessionId))
  const cached = yield* Ref.make(initial)
  /** a snapshot fell due for events handed over with `appendLater` */
  const snapshotDue = yield* Ref.make(false)
  const lock = yield* Effect.makeSemaphore(1)

  /** Stamps the events' time and folds them with the seqs they will get. */
  const prepare = (state: SessionState, events: ReadonlyArray<NewEvent>) =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const redact = options.redact
      const stamped = events.map((e): NewEvent => {
        const payload = redact === undefined ? e.payload : redactOrKeep(redact, e.payload)
        // the payload masked is still the same event type's payload
        return e.at === undefined || payload !== e.payload ? ({ ...e, payload, at: e.at ?? now } as NewEvent) : e
      })
      const predicted = stamped.map(
        (e, i) =>
          ({
            id: e.id ?? placeholderId,
            sessionId,
            seq: state.lastSeq + i + 1,
            at: e.at,
            parentId: e.parentId ?? null,
            v: PAYLOAD_VERSION,
            type: e.type,
            payload: e.payload
          }) as Envelope
      )
      const next = yield* Projection.applyAll(state, predicted)
      return { stamped, predicted, next }
    })

  const snapshotLogged = (state: SessionState) =>
    takeSnapshot(state).pipe(
      Effect.catchAll((error) =>
        // a snapshot is a cache: the events are committed, so a failed snapshot only costs time later
        Effect.logWarning(`could not save a snapshot of session ${sessionId} at seq ${state.lastSeq}`, error)
      ),
      Effect.provideService(EventStore, store)
    )

  /** The cached state is wrong (the store assigned other seqs): rebuild it from the store. */
  const resync = (atSeq: number) =>
    restore(sessionId, { atSeq }).pipe(
      Effect.provideService(EventStore, store),
      Effect.tap((state) => Ref.set(cached, state))
    )

  /**
   * After a failed commit the cache may hold events that never reached the log (handed over with
   * `appendLater`): rebuild it from what is committed. The original failure is what the caller sees.
   */
  const recoverCache = Effect.flatMap(store.lastSeq(sessionId), resync).pipe(
    Effect.catchAll((error) => Effect.logWarning(`could not rebuild the state of session ${sessionId}`, error))
  )

  // append and appendLater are uninterruptible: an interrupt after the store took the events but
  // before the cache was updated would leave the cache behind the log. No span per call: the kernel
  // appends a few times per model step, and a span cost about as much as the rest of the call
  // (measured: ~20 µs of ~45 µs on the memory store).
  const appendWith = (decide: (state: SessionState) => ReadonlyArray<NewEvent>) =>
    lock.withPermits(1)(
      Effect.uninterruptible(
        Effect.gen(function* () {
          const before = yield* Ref.get(cached)
          const events = decide(before)
          if (events.length === 0) return [] as ReadonlyArray<Envelope>
          const { stamped, predicted, next } = yield* prepare(before, events)
          const envelopes = yield* store
            .append(sessionId, stamped, fence)
            .pipe(
              Effect.tapError((error) =>
                error.fenced === true && options.onFenced !== undefined
                  ? Effect.zipRight(options.onFenced, recoverCache)
                  : recoverCache
              )
            )
          const matches =
            envelopes.length === predicted.length &&
            envelopes.every((e, i) => e.seq === predicted[i]!.seq && e.at === predicted[i]!.at)
          const state = matches ? next : yield* resync(envelopes[envelopes.length - 1]!.seq)
          if (matches) yield* Ref.set(cached, state)
          const due = yield* Ref.getAndSet(snapshotDue, false)
          if (due || shouldSnapshot({ every, prevSeq: before.lastSeq, envelopes })) yield* snapshotLogged(state)
          return envelopes
        })
      )
    )

  const append = (events: ReadonlyArray<NewEvent>) => appendWith(() => events)

  const appendLater = (events: ReadonlyArray<NewEvent>) =>
    lock.withPermits(1)(
      Effect.uninterruptible(
        Effect.gen(function* () {
          if (events.length === 0) return
          const before = yield* Ref.get(cached)
          const { stamped, predicted, next } = yield* prepare(before, events)
          yield* store.appendLater(sessionId, stamped, fence)
          yield* Ref.set(cached, next)
          if (shouldSnapshot({ every, prevSeq: before.lastSeq, envelopes: predicted }))
            yield* Ref.set(snapshotDue, true)
        })
      )
    )

  /** Waits for the commit of everything handed over and checks the cached state against the log. */
  const settle = Effect.gen(function* () {
    yield* store.flush.pipe(Effect.tapError(() => recoverCache))
    const state = yield* Ref.get(cached)
    const lastSeq = yield* store.lastSeq(sessionId)
    return lastSeq === state.lastSeq ? state : yield* resync(lastSeq)
  })

  const flush = lock.withPermits(1)(
    Effect.gen(function* () {
      const state = yield* settle
      if (yield* Ref.getAndSet(snapshotDue, false)) yield* snapshotLogged(state)
    })
  )

  const snapshot = lock.withPermits(1)(
    Effect.gen(function* () {
      const state = yield* settle
      yield* Ref.set(snapshotDue, false)
      yield* takeSnapshot(state).pipe(Effect.provideService(EventStore, store))
    })
  )

  const journal: SessionJournal = {
    sessionId,
    state: Ref.get(cached),
    append,
    appendWith,
    appendLater,
    flush,
    snapshot
  }
  return journal
})
