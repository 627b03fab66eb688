/**
 * The append-only event log (DESIGN §2): events, the session index, snapshots, blobs and leases.
 *
 * Two layers implement it: `layerSqlite` (the default, a SQLite file) and `layerMemory`; one
 * conformance suite (`test/store/conformance.ts`) runs against both.
 */
import { Context, Effect, Layer, type Option, type Stream } from "effect"
import type { Envelope, EnvelopeHeader, EventDecodeError, NewEvent, RawEnvelope } from "../domain/Events.js"
import type { SessionId } from "../domain/Ids.js"
import type { DatabaseError, EventStoreError, LeaseHeld } from "./Errors.js"
import { EventBus } from "./EventBus.js"
import type {
  AppendOptions,
  EventQuery,
  ImportedSession,
  ImportItem,
  Lease,
  ListSessionsOptions,
  LoadedSnapshot,
  SeqRange,
  SessionSummary,
  Snapshot
} from "./internal/records.js"
import {
  type ChainMark,
  type ChainRow,
  makeService,
  type SeqCounts,
  type StoreOptions
} from "./internal/storeService.js"
import { makeMemoryBackend } from "./Memory.js"
import { layerClient, makeSqliteBackend, type SqliteOptions } from "./Sqlite.js"

export { DatabaseError, EventStoreError, LeaseHeld } from "./Errors.js"
export type {
  AppendOptions,
  EventQuery,
  ImportedEvent,
  ImportedSession,
  ImportItem,
  Lease,
  ListSessionsOptions,
  LoadedSnapshot,
  SeqRange,
  SessionStatusName,
  SessionSummary,
  Snapshot,
  TurnEndSummary
} from "./internal/records.js"
export { SNAPSHOTS_KEPT } from "./internal/records.js"
export type { ChainMark, ChainRow, SeqCounts } from "./internal/storeService.js"

export class EventStore extends Context.Tag("logbook/EventStore")<
  EventStore,
  {
    /**
     * Appends events to a session in one transaction, assigning gapless `seq`s, and returns the
     * committed envelopes (published on `EventBus` after the commit). Goes through the writer
     * fiber, so concurrent callers share group commits.
     */
    readonly append: (
      sessionId: SessionId,
      events: ReadonlyArray<NewEvent>,
      options?: AppendOptions
    ) => Effect.Effect<ReadonlyArray<Envelope>, EventStoreError>
    /**
     * Hands events to the writer fiber without waiting for the commit (text deltas). Order with
     * later `append`s of the same process is kept. A failed group commit is reported by the
     * next `append` or `flush`.
     */
    readonly appendLater: (
      sessionId: SessionId,
      events: ReadonlyArray<NewEvent>,
      options?: AppendOptions
    ) => Effect.Effect<void, EventStoreError>
    /** Waits until everything handed over so far is committed. */
    readonly flush: Effect.Effect<void, EventStoreError>
    /** The events of a session in seq order, decoded. */
    readonly read: (
      sessionId: SessionId,
      range?: SeqRange
    ) => Stream.Stream<Envelope, EventStoreError | EventDecodeError>
    /** The events of a session in seq order, payloads as JSON values. */
    readonly readRaw: (sessionId: SessionId, range?: SeqRange) => Stream.Stream<RawEnvelope, EventStoreError>
    /**
     * Stored events from `from` (default 1), then live ones as they are committed — by this
     * process or by another one writing the same database — with no gap and no duplicate.
     */
    readonly follow: (
      sessionId: SessionId,
      from?: number
    ) => Stream.Stream<Envelope, EventStoreError | EventDecodeError>
    /** `follow` with payloads as stored (JSON values, undecoded): for tools that show any event. */
    readonly followRaw: (sessionId: SessionId, from?: number) => Stream.Stream<RawEnvelope, EventStoreError>
    /**
     * The rows of a session as stored, with their hash chain columns (`prevHash`, `hash`; null for
     * a row written around logbook): what `Verify` checks. Payloads are JSON text, undecoded.
     */
    readonly readChain: (sessionId: SessionId, range?: SeqRange) => Stream.Stream<ChainRow, EventStoreError>
    /**
     * Runs `effect` so that all its reads of this store see one state of it, however many
     * statements they take: a commit of this process or another lands before all of them or after
     * all of them (SQLite: one read transaction). `effect` must only read: a write inside it fails
     * or waits for itself. Writes of this process wait until it ends.
     */
    readonly consistent: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | EventStoreError, R>
    /**
     * How many rows the session has and their seq bounds (from the primary key, no payload read),
     * and its chain mark: rows chained at the upgrade to the chain or at an import (none: every row
     * was chained as it was appended).
     */
    readonly chainInfo: (
      sessionId: SessionId
    ) => Effect.Effect<{ readonly counts: SeqCounts; readonly mark: Option.Option<ChainMark> }, EventStoreError>
    /** The runs of seqs missing between the session's first and last row (an index scan, no payload read). */
    readonly seqGaps: (
      sessionId: SessionId
    ) => Effect.Effect<ReadonlyArray<{ readonly from: number; readonly to: number }>, EventStoreError>
    /** The seqs of the stored snapshots of a session with that format version, ascending. */
    readonly snapshotSeqs: (
      sessionId: SessionId,
      version: number
    ) => Effect.Effect<ReadonlyArray<number>, EventStoreError>
    /** Envelope headers across sessions by type and time, ordered by `at` then session and seq. */
    readonly query: (query: EventQuery) => Stream.Stream<EnvelopeHeader, EventStoreError>
    /** The last committed seq of a session (0 when it has none). */
    readonly lastSeq: (sessionId: SessionId) => Effect.Effect<number, EventStoreError>
    /** The session index, most recently updated first. */
    readonly sessions: (options?: ListSessionsOptions) => Effect.Effect<ReadonlyArray<SessionSummary>, EventStoreError>
    readonly session: (sessionId: SessionId) => Effect.Effect<Option.Option<SessionSummary>, EventStoreError>
    /**
     * Every session id of the index, deleted ones too, in no particular order: what a short id
     * must be unique among (one indexed column, no payload).
     */
    readonly sessionIds: Effect.Effect<ReadonlyArray<SessionId>, EventStoreError>
    /** Saves a snapshot, keeping the newest `SNAPSHOTS_KEPT` of the session (and version). */
    readonly saveSnapshot: (snapshot: Snapshot) => Effect.Effect<void, EventStoreError>
    /** The newest snapshot at or below `atOrBelow` (default: any) with the given format version. */
    readonly loadSnapshot: (
      sessionId: SessionId,
      options: { readonly version: number; readonly atOrBelow?: number | undefined }
    ) => Effect.Effect<Option.Option<LoadedSnapshot>, EventStoreError>
    /** Stores content by its SHA-256 (hex) and returns the hash. Idempotent. */
    readonly putBlob: (content: Uint8Array | string) => Effect.Effect<string, EventStoreError>
    readonly getBlob: (hash: string) => Effect.Effect<Option.Option<Uint8Array>, EventStoreError>
    /**
     * Writes a whole session this database does not hold yet, exactly as given — its events (ids,
     * times, causes, versions and payloads as they were stored elsewhere; seqs 1, 2, 3 … in order)
     * and the blobs they reference — in ONE transaction, and returns its index row. A session id
     * that already exists, an event that does not decode, or an event id the database already
     * holds is refused (`refused`) and nothing is written. Nothing is published on the bus.
     * `logbook import` (`SessionFile.importSession`) checks a file and then calls this.
     */
    readonly importSession: (
      sessionId: SessionId,
      session: ImportedSession
    ) => Effect.Effect<SessionSummary, EventStoreError>
    /**
     * `importSession` of a session as it arrives, in bounded memory (`logbook import`): `items` gives
     * the session's id, then its events in seq order and its blobs; they are written as they come,
     * in ONE transaction that a failure of `items` (a damaged file found late) or a refusal rolls
     * back, so nothing is written unless all of it is. Nothing is published on the bus.
     */
    readonly importStream: <E>(
      items: Stream.Stream<ImportItem, E>
    ) => Effect.Effect<SessionSummary, E | EventStoreError>
    /**
     * Takes or renews the per-session lease; fails with `LeaseHeld` while another owner's lease is
     * live. With `renewOnly`, only renews: fails with `LeaseHeld` unless `owner` holds the lease
     * (expired or not) — a lease taken over, or released meanwhile, is never taken back.
     */
    readonly acquireLease: (
      sessionId: SessionId,
      owner: string,
      ttlMs: number,
      options?: { readonly renewOnly?: boolean | undefined }
    ) => Effect.Effect<Lease, LeaseHeld | EventStoreError>
    readonly releaseLease: (sessionId: SessionId, owner: string) => Effect.Effect<void, EventStoreError>
    readonly lease: (sessionId: SessionId) => Effect.Effect<Option.Option<Lease>, EventStoreError>
    /**
     * Every lease the store holds: of live drivers, and those a process left when it died (SIGKILL
     * releases nothing) — what the start-up repair looks at (`SessionOpen.repairDeadOwners`).
     */
    readonly leases: Effect.Effect<ReadonlyArray<Lease>, EventStoreError>
  }
>() {
  /** The in-memory log (with its own EventBus): tests and embedders without durable history. */
  static readonly layerMemory: Layer.Layer<EventStore | EventBus> = Layer.scoped(
    EventStore,
    Effect.flatMap(makeMemoryBackend, (backend) => Effect.map(makeService(backend), withSpans))
  ).pipe(Layer.provideMerge(EventBus.layer))

  /** The default: a SQLite file (with its own EventBus). Fails with `DatabaseError` for a file it must not touch. */
  static readonly layerSqlite = (
    options: SqliteOptions & StoreOptions
  ): Layer.Layer<EventStore | EventBus, DatabaseError> =>
    Layer.scoped(
      EventStore,
      Effect.flatMap(makeSqliteBackend(options), (backend) => Effect.map(makeService(backend, options), withSpans))
    ).pipe(Layer.provide(layerClient(options)), Layer.provideMerge(EventBus.layer))
}

export type EventStoreService = Context.Tag.Service<EventStore>

/**
 * A span per call (`EventStore.lastSeq` …) on the methods off the write path. `append`,
 * `appendLater`, `flush` and `putBlob` have none: they run several times per model step, and a span
 * per journal append adds to the cost of every step (docs/benchmarks.md); the streams (`read`, `follow` …)
 * have none either (their SQL statements have `sql.execute` spans of their own).
 */
const withSpans = (service: EventStoreService): EventStoreService => ({
  ...service,
  chainInfo: Effect.fn("EventStore.chainInfo")(service.chainInfo),
  seqGaps: Effect.fn("EventStore.seqGaps")(service.seqGaps),
  snapshotSeqs: Effect.fn("EventStore.snapshotSeqs")(service.snapshotSeqs),
  lastSeq: Effect.fn("EventStore.lastSeq")(service.lastSeq),
  sessions: Effect.fn("EventStore.sessions")(service.sessions),
  session: Effect.fn("EventStore.session")(service.session),
  sessionIds: Effect.withSpan(service.sessionIds, "EventStore.sessionIds"),
  saveSnapshot: Effect.fn("EventStore.saveSnapshot")(service.saveSnapshot),
  loadSnapshot: Effect.fn("EventStore.loadSnapshot")(service.loadSnapshot),
  getBlob: Effect.fn("EventStore.getBlob")(service.getBlob),
  importSession: Effect.fn("EventStore.importSession")(service.importSession),
  acquireLease: Effect.fn("EventStore.acquireLease")(service.acquireLease),
  releaseLease: Effect.fn("EventStore.releaseLease")(service.releaseLease),
  lease: Effect.fn("EventStore.lease")(service.lease),
  leases: Effect.withSpan(service.leases, "EventStore.leases")
})
