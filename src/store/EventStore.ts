/**
 * The append-only event log (DESIGN §2): events, the session index, snapshots, blobs and leases.
 *
 * Two layers implement it: `layerSqlite` (the default, a SQLite file) and `layerMemory`; one
 * conformance suite (`test/store/conformance.ts`) runs against both.
 */
import { Context, Effect, Layer, type Option, type Stream } from "effect"
import type { Envelope, EnvelopeHeader, EventDecodeError, NewEvent, RawEnvelope } from "../domain/Events.js"
import type { EventId, SessionId } from "../domain/Ids.js"
import type { DatabaseError, EventStoreError, LeaseHeld } from "./Errors.js"
import { EventBus } from "./EventBus.js"
import { type ChainMark, type ChainRow, makeService, type SeqCounts, type StoreOptions } from "./internal/core.js"
import { makeMemoryBackend } from "./Memory.js"
import { layerClient, makeSqliteBackend, type SqliteOptions } from "./Sqlite.js"

export { DatabaseError, EventStoreError, LeaseHeld } from "./Errors.js"
export type { ChainMark, ChainRow, SeqCounts } from "./internal/core.js"

/** Inclusive seq bounds. */
export interface SeqRange {
  readonly from?: number | undefined
  readonly to?: number | undefined
}

/** A query across sessions on indexed columns only: payloads are never parsed. */
export interface EventQuery {
  readonly types?: ReadonlyArray<string> | undefined
  readonly sessionId?: SessionId | undefined
  /** inclusive lower bound on `at` (UTC ms) */
  readonly since?: number | undefined
  /** exclusive upper bound on `at` (UTC ms) */
  readonly until?: number | undefined
  readonly limit?: number | undefined
}

export type SessionStatusName = "idle" | "busy" | "retry"

/** How a turn ended, as the index records it: the `reason` of `turn.finished` or `turn.interrupted`. */
export interface TurnEndSummary {
  readonly reason: string
  /** ended by `turn.interrupted` (user, shutdown, crash, error) rather than `turn.finished` */
  readonly interrupted: boolean
}

/**
 * One row of the session index, kept up to date inside every append transaction (a small fold
 * over a few event types, `summarize`), so listing sessions never folds their events.
 */
export interface SessionSummary {
  readonly id: SessionId
  readonly title: string | null
  readonly cwd: string | null
  readonly createdAt: number
  readonly updatedAt: number
  readonly lastSeq: number
  readonly status: SessionStatusName
  readonly deleted: boolean
  /** the model of the latest `assistant.started` that names one, else of `session.created` */
  readonly model: string | null
  /**
   * a `turn.started` has no `turn.finished` / `turn.interrupted` yet: the turn runs, or the process
   * that ran it died (the session's lease tells which)
   */
  readonly turnOpen: boolean
  /** how the last turn ended; null before any turn ended */
  readonly lastTurn: TurnEndSummary | null
  /** USD, summed over the usage of every `step.finished` and `compaction.done` (as the projection's totals) */
  readonly cost: number
  /** false when some of those tokens had no price: `cost` is then only a lower bound */
  readonly costKnown: boolean
}

export interface ListSessionsOptions {
  readonly includeDeleted?: boolean | undefined
  readonly cwd?: string | undefined
  readonly limit?: number | undefined
}

/** A projection of a session at `seq`, as JSON. `version` is the projection's format version. */
export interface Snapshot {
  readonly sessionId: SessionId
  readonly seq: number
  readonly version: number
  readonly at: number
  readonly state: unknown
}

/** A snapshot as loaded: `intact` when its JSON is byte for byte what was saved (SHA-256 checked). */
export interface LoadedSnapshot extends Snapshot {
  readonly intact: boolean
}

/** Snapshots kept per session and format version; older ones are deleted when a new one is saved. */
export const SNAPSHOTS_KEPT = 3

/** How an append is written. */
export interface AppendOptions {
  /**
   * Write only while this owner holds the session's lease (`acquireLease`): checked in the commit
   * itself, so a process that lost the session (it stalled past the lease's ttl and another took
   * over) cannot interleave its events with the new driver's. A fenced append fails with a refused
   * `EventStoreError` and writes nothing. Without it, no check (creating a session, tools).
   */
  readonly owner?: string | undefined
}

/** An event as stored, without its session and seq (see `EventStore.importSession`). */
export interface ImportedEvent {
  readonly id: EventId
  readonly type: string
  readonly at: number
  readonly parentId: EventId | null
  readonly v: number
  /** the payload as a JSON value, stored as its `JSON.stringify` */
  readonly payload: unknown
}

/** What `EventStore.importSession` writes: the events in seq order and the blobs (by content). */
export interface ImportedSession {
  readonly events: ReadonlyArray<ImportedEvent>
  readonly blobs: ReadonlyArray<Uint8Array>
}

export interface Lease {
  readonly sessionId: SessionId
  readonly owner: string
  readonly expiresAt: number
}

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
  }
>() {
  /** The in-memory log (with its own EventBus): tests and embedders without durable history. */
  static readonly layerMemory: Layer.Layer<EventStore | EventBus> = Layer.scoped(
    EventStore,
    Effect.flatMap(makeMemoryBackend, (backend) => makeService(backend))
  ).pipe(Layer.provideMerge(EventBus.layer))

  /** The default: a SQLite file (with its own EventBus). Fails with `DatabaseError` for a file it must not touch. */
  static readonly layerSqlite = (
    options: SqliteOptions & StoreOptions
  ): Layer.Layer<EventStore | EventBus, DatabaseError> =>
    Layer.scoped(
      EventStore,
      Effect.flatMap(makeSqliteBackend(options), (backend) => makeService(backend, options))
    ).pipe(Layer.provide(layerClient(options)), Layer.provideMerge(EventBus.layer))
}

export type EventStoreService = Context.Tag.Service<EventStore>
