/**
 * The shapes the EventStore service reads and writes (ranges, queries, the session index row,
 * snapshots, leases): one module that `EventStore.ts` (which re-exports them), the shared core
 * and the backends import, so the service's tag and its implementation do not import each other.
 */
import type { EventId, SessionId } from "../../domain/Ids.js"

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
  /** the model the session is on: of the latest `assistant.started` or `model.switched`, else of `session.created` */
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

/**
 * One piece of a session read as it arrives (`EventStore.importStream`): first its id, then its
 * events in seq order and the blobs they reference, in any order after the session.
 */
export type ImportItem =
  | { readonly _tag: "session"; readonly sessionId: SessionId }
  | { readonly _tag: "event"; readonly event: ImportedEvent }
  | { readonly _tag: "blob"; readonly content: Uint8Array }

export interface Lease {
  readonly sessionId: SessionId
  readonly owner: string
  readonly expiresAt: number
}
