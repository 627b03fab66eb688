/**
 * The `SessionJournal`: the write side of one session, the one way the kernel appends. It keeps
 * the projection of the session up to date with every batch (an event the projection rejects never
 * reaches the log), masks payloads (`redact`), fences appends by the lease owner, and takes the
 * snapshots `Snapshots.shouldSnapshot` calls for.
 *
 * Only `EventStore` methods are used (append, appendLater, flush, saveSnapshot, read), so this works
 * the same on every store layer.
 */
import { Effect, Either } from "effect"
import { type Envelope, type NewEvent, PAYLOAD_VERSION } from "../domain/Events.js"
import { EventId, type SessionId } from "../domain/Ids.js"
import type { EventStoreError } from "./Errors.js"
import { EventStore } from "./EventStore.js"
import type { ProjectionError, SessionState } from "./Projection.js"
import * as Projection from "./Projection.js"
import {
  DEFAULT_SNAPSHOT_EVERY,
  type RestoreError,
  restore,
  restoreWithBase,
  shouldSnapshot,
  takeSnapshot
} from "./Snapshots.js"

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
  /**
   * With `initial`: the seq of the snapshot it was restored from (`Recovery.recover`'s
   * `snapshotSeq`; default 0, none), which decides whether a turn's end takes one (`shouldSnapshot`)
   */
  readonly snapshotSeq?: number | undefined
  /** the lease owner the journal writes for: every append is fenced by it (`AppendOptions.owner`) */
  readonly owner?: string | undefined
  /**
   * Applied to each event's payload before it is committed: `Secrets.redact`, so no API key reaches
   * the log (or the model, which reads the log). Default: none.
   */
  readonly redact?: (<A>(payload: A) => A) | undefined
  /** Runs when an append is fenced off (`EventStoreError` `fenced`): the owner lost the lease. */
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

/**
 * What a journal's calls share. The state after everything handed over and whether a snapshot fell
 * due are plain fields, not `Ref`s: they are read and written only by this journal's calls, each
 * under `lock` (and `state` reads one reference), and a `Ref` per read and write would be a large
 * part of an `appendLater`, which the kernel runs several times per step.
 */
interface Journal {
  readonly sessionId: SessionId
  readonly options: JournalOptions
  readonly store: EventStore["Type"]
  readonly every: number
  readonly fence: { readonly owner: string | undefined }
  readonly lock: Effect.Semaphore
  /** the projection after everything handed over */
  cached: SessionState
  /** a snapshot fell due for events handed over with `appendLater` */
  snapshotDue: boolean
  /** the seq of the session's newest snapshot this journal knows of (restored from, or taken) */
  snapshotSeq: number
}

/** Stamps the events' time (`now`), masks their payloads, and folds them with the seqs they will get. */
const prepare = (j: Journal, state: SessionState, events: ReadonlyArray<NewEvent>, now: number) => {
  const redact = j.options.redact
  const stamped = events.map((e): NewEvent => {
    const payload = redact === undefined ? e.payload : redactOrKeep(redact, e.payload)
    // the payload masked is still the same event type's payload
    return e.at === undefined || payload !== e.payload ? ({ ...e, payload, at: e.at ?? now } as NewEvent) : e
  })
  const predicted = stamped.map(
    (e, i) =>
      ({
        id: e.id ?? placeholderId,
        sessionId: j.sessionId,
        seq: state.lastSeq + i + 1,
        at: e.at,
        parentId: e.parentId ?? null,
        v: PAYLOAD_VERSION,
        type: e.type,
        payload: e.payload
      }) as Envelope
  )
  return Either.map(Projection.applyAll(state, predicted), (next) => ({ stamped, predicted, next }))
}

/** Takes a snapshot of `state` and remembers its seq. */
const snapshotOf = (j: Journal, state: SessionState) =>
  takeSnapshot(state).pipe(
    Effect.tap(() =>
      Effect.sync(() => {
        j.snapshotSeq = state.lastSeq
      })
    ),
    Effect.provideService(EventStore, j.store)
  )

const snapshotLogged = (j: Journal, state: SessionState) =>
  snapshotOf(j, state).pipe(
    Effect.catchAll((error) =>
      // a snapshot is a cache: the events are committed, so a failed snapshot only costs time later
      Effect.logWarning(`could not save a snapshot of session ${j.sessionId} at seq ${state.lastSeq}`, error)
    )
  )

/** The cached state is wrong (the store assigned other seqs): rebuild it from the store. */
const resync = (j: Journal, atSeq: number) =>
  restore(j.sessionId, { atSeq }).pipe(
    Effect.provideService(EventStore, j.store),
    Effect.tap((state) =>
      Effect.sync(() => {
        j.cached = state
      })
    )
  )

/**
 * After a failed commit the cache may hold events that never reached the log (handed over with
 * `appendLater`): rebuild it from what is committed. The original failure is what the caller sees.
 */
const recoverCache = (j: Journal) =>
  Effect.flatMap(j.store.lastSeq(j.sessionId), (lastSeq) => resync(j, lastSeq)).pipe(
    Effect.catchAll((error) => Effect.logWarning(`could not rebuild the state of session ${j.sessionId}`, error))
  )

// append and appendLater are uninterruptible: an interrupt after the store took the events but
// before the cache was updated would leave the cache behind the log. No span per call: the kernel
// appends a few times per model step, and a span costs about as much as the rest of the call.
const appendWith = (j: Journal, decide: (state: SessionState) => ReadonlyArray<NewEvent>) =>
  j.lock.withPermits(1)(
    Effect.uninterruptible(
      Effect.gen(function* () {
        const { options } = j
        const before = j.cached
        const events = decide(before)
        if (events.length === 0) return [] as ReadonlyArray<Envelope>
        const now = yield* Effect.clockWith((clock) => Effect.succeed(clock.unsafeCurrentTimeMillis()))
        const { stamped, predicted, next } = yield* prepare(j, before, events, now)
        const envelopes = yield* j.store
          .append(j.sessionId, stamped, j.fence)
          .pipe(
            Effect.tapError((error) =>
              error.reason === "fenced" && options.onFenced !== undefined
                ? Effect.zipRight(options.onFenced, recoverCache(j))
                : recoverCache(j)
            )
          )
        const matches =
          envelopes.length === predicted.length &&
          envelopes.every((e, i) => e.seq === predicted[i]!.seq && e.at === predicted[i]!.at)
        const state = matches ? next : yield* resync(j, envelopes[envelopes.length - 1]!.seq)
        if (matches) j.cached = state
        const due = j.snapshotDue
        j.snapshotDue = false
        if (due || shouldSnapshot({ every: j.every, prevSeq: before.lastSeq, envelopes, snapshotSeq: j.snapshotSeq }))
          yield* snapshotLogged(j, state)
        return envelopes
      })
    )
  )

// one step of Effect between taking the lock and the store's call: the fold is a plain function
const appendLater = (
  j: Journal,
  events: ReadonlyArray<NewEvent>
): Effect.Effect<void, EventStoreError | ProjectionError> =>
  events.length === 0
    ? Effect.void
    : j.lock.withPermits(1)(
        Effect.uninterruptible(
          Effect.clockWith((clock): Effect.Effect<void, EventStoreError | ProjectionError> => {
            const before = j.cached
            const prepared = prepare(j, before, events, clock.unsafeCurrentTimeMillis())
            if (Either.isLeft(prepared)) return Effect.fail(prepared.left)
            const { stamped, predicted, next } = prepared.right
            return Effect.map(j.store.appendLater(j.sessionId, stamped, j.fence), () => {
              j.cached = next
              if (
                shouldSnapshot({
                  every: j.every,
                  prevSeq: before.lastSeq,
                  envelopes: predicted,
                  snapshotSeq: j.snapshotSeq
                })
              )
                j.snapshotDue = true
            })
          })
        )
      )

/** Waits for the commit of everything handed over and checks the cached state against the log. */
const settle = (j: Journal) =>
  Effect.gen(function* () {
    yield* j.store.flush.pipe(Effect.tapError(() => recoverCache(j)))
    const state = j.cached
    const lastSeq = yield* j.store.lastSeq(j.sessionId)
    return lastSeq === state.lastSeq ? state : yield* resync(j, lastSeq)
  })

const flush = (j: Journal) =>
  j.lock.withPermits(1)(
    Effect.gen(function* () {
      const state = yield* settle(j)
      const due = j.snapshotDue
      j.snapshotDue = false
      if (due) yield* snapshotLogged(j, state)
    })
  )

const snapshot = (j: Journal) =>
  j.lock.withPermits(1)(
    Effect.gen(function* () {
      const state = yield* settle(j)
      j.snapshotDue = false
      yield* snapshotOf(j, state)
    })
  )

export const makeJournal = Effect.fn("SessionJournal.make")(function* (
  sessionId: SessionId,
  options: JournalOptions = {}
) {
  const restored =
    options.initial !== undefined
      ? { state: options.initial, snapshotSeq: options.snapshotSeq ?? 0 }
      : yield* restoreWithBase(sessionId)
  const j: Journal = {
    sessionId,
    options,
    store: yield* EventStore,
    every: options.every ?? DEFAULT_SNAPSHOT_EVERY,
    fence: { owner: options.owner },
    lock: yield* Effect.makeSemaphore(1),
    cached: restored.state,
    snapshotDue: false,
    snapshotSeq: restored.snapshotSeq
  }
  const journal: SessionJournal = {
    sessionId,
    state: Effect.sync(() => j.cached),
    append: (events) => appendWith(j, () => events),
    appendWith: (decide) => appendWith(j, decide),
    appendLater: (events) => appendLater(j, events),
    flush: flush(j),
    snapshot: snapshot(j)
  }
  return journal
})
