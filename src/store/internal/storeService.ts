/**
 * What every EventStore layer shares: preparing events for a commit, the session index fold,
 * content hashing, the group-commit writer fiber, paging and `follow`. A layer supplies a
 * `Backend` (how rows are stored) and gets the whole `EventStore` service from `makeService`.
 */
import {
  Chunk,
  Clock,
  Deferred,
  Duration,
  Effect,
  Either,
  Exit,
  FiberId,
  Option,
  Queue,
  type Scope,
  Stream,
  Take
} from "effect"
import {
  decodeEnvelope,
  type Envelope,
  type EnvelopeHeader,
  type EventDecodeError,
  encodePayload,
  type NewEvent,
  PAYLOAD_VERSION,
  type RawEnvelope
} from "../../domain/Events.js"
import { type EventId, type SessionId, uuidV7At } from "../../domain/Ids.js"
import { fromPull, mapPullEither, mapUntilLeft, type OpenPull, type Pull } from "../../stream/internal/pull.js"
import { hashContent } from "../blobHash.js"
import { EventStoreError, type LeaseHeld } from "../Errors.js"
import { EventBus } from "../EventBus.js"
import type { EventStoreService } from "../EventStore.js"
import {
  type AppendOptions,
  type EventQuery,
  type ImportedEvent,
  type ImportItem,
  type Lease,
  type ListSessionsOptions,
  type SessionSummary,
  SNAPSHOTS_KEPT,
  type Snapshot
} from "./records.js"

/** An event ready to be written: everything but its seq. */
export interface PreparedEvent {
  readonly id: EventId
  readonly type: string
  readonly at: number
  readonly parentId: EventId | null
  readonly v: number
  /** the encoded payload as JSON text, as stored */
  readonly json: string
}

export interface CommitRequest {
  readonly sessionId: SessionId
  readonly events: ReadonlyArray<PreparedEvent>
  /**
   * The lease owner the request is written for: the backend commits it only while that owner holds
   * the session's lease (a fence), else it refuses it with `fencedMessage`. None: no check.
   */
  readonly owner?: string | undefined
}

/** The `owner` of the `LeaseHeld` a renewal fails with when nobody holds the lease any more. */
export const RELEASED_LEASE = "nobody (the lease was released)"

/**
 * The refusal of a request written for an owner that no longer holds the session's lease (another
 * process took the session over): `fenced`, a refusal, so only that session's requests fail.
 */
export const fencedError = (sessionId: SessionId, owner: string, holder: string | undefined): EventStoreError =>
  new EventStoreError({
    method: "append",
    message:
      `append: session ${sessionId} is no longer driven by this process (${owner}): ` +
      (holder === undefined ? "its lease was released" : `its lease is held by ${holder}`),
    reason: "fenced"
  })

/** Rows as a backend returns them: the stored columns. */
export interface StoredRow extends EnvelopeHeader {
  readonly json: string
}

/** A row with its place in the session's hash chain (`internal/chain.ts`); null: not chained. */
export interface ChainRow extends StoredRow {
  readonly prevHash: string | null
  readonly hash: string | null
}

/** How many rows a session has and their seq bounds (an aggregate over the primary key: no payload read). */
export interface SeqCounts {
  readonly count: number
  readonly first: number
  readonly last: number
}

/**
 * Rows that were not chained as they were appended: chained when the database was upgraded to
 * the chain (`migrated`, migration 4), or written by `importSession` from a file (`imported`: a
 * session file carries no hashes, so the chain starts at the import).
 */
export interface ChainMark {
  readonly reason: "migrated" | "imported"
  /** the last seq chained then */
  readonly throughSeq: number
  /** when (UTC ms) */
  readonly at: number
}

/** How a layer stores rows. Every method is one short transaction or query. */
export interface Backend {
  /**
   * Commits all requests in ONE transaction, assigning gapless per-session seqs in request
   * order and updating the session index; returns the seq of each request's first event (the
   * others follow it without a gap).
   */
  readonly commit: (requests: ReadonlyArray<CommitRequest>) => Effect.Effect<ReadonlyArray<number>, EventStoreError>
  readonly readPage: (
    sessionId: SessionId,
    from: number,
    to: number,
    limit: number
  ) => Effect.Effect<ReadonlyArray<StoredRow>, EventStoreError>
  /** Headers after the keyset cursor (at, sessionId, seq), ordered by them. */
  readonly queryPage: (
    query: EventQuery,
    after: QueryCursor | undefined,
    limit: number
  ) => Effect.Effect<ReadonlyArray<EnvelopeHeader>, EventStoreError>
  readonly lastSeq: (sessionId: SessionId) => Effect.Effect<number, EventStoreError>
  /**
   * Runs `effect`, whose reads of this backend all see one state of the store: no commit lands
   * between them. `effect` must not write.
   */
  readonly consistent: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | EventStoreError, R>
  /** Rows from `from` up to `to` (at most `limit`) with their chain columns, in seq order. */
  readonly readChainPage: (
    sessionId: SessionId,
    from: number,
    to: number,
    limit: number
  ) => Effect.Effect<ReadonlyArray<ChainRow>, EventStoreError>
  /** The session's row count and seq bounds, and its chain mark (none: chained since its first event). */
  readonly chainInfo: (
    sessionId: SessionId
  ) => Effect.Effect<{ readonly counts: SeqCounts; readonly mark: Option.Option<ChainMark> }, EventStoreError>
  /** The runs of seqs missing between the session's first and last row, ascending (an index scan, no payload). */
  readonly seqGaps: (
    sessionId: SessionId
  ) => Effect.Effect<ReadonlyArray<{ readonly from: number; readonly to: number }>, EventStoreError>
  /** The seqs of the snapshots of a session with that format version, ascending. */
  readonly snapshotSeqs: (
    sessionId: SessionId,
    version: number
  ) => Effect.Effect<ReadonlyArray<number>, EventStoreError>
  readonly sessions: (options: ListSessionsOptions) => Effect.Effect<ReadonlyArray<SessionSummary>, EventStoreError>
  readonly session: (sessionId: SessionId) => Effect.Effect<Option.Option<SessionSummary>, EventStoreError>
  readonly sessionIds: Effect.Effect<ReadonlyArray<SessionId>, EventStoreError>
  /** Saves the snapshot (its state as `json`, with its SHA-256) and keeps the newest `keep`. */
  readonly saveSnapshot: (
    snapshot: Omit<Snapshot, "state">,
    stored: StoredSnapshot,
    keep: number
  ) => Effect.Effect<void, EventStoreError>
  readonly loadSnapshot: (
    sessionId: SessionId,
    version: number,
    atOrBelow: number
  ) => Effect.Effect<Option.Option<Omit<Snapshot, "state"> & StoredSnapshot>, EventStoreError>
  readonly putBlob: (hash: string, content: Uint8Array) => Effect.Effect<void, EventStoreError>
  readonly getBlob: (hash: string) => Effect.Effect<Option.Option<Uint8Array>, EventStoreError>
  /**
   * Writes a whole session that this database does not hold yet — its blobs and its events (seqs
   * from 1) — in ONE transaction, updating the session index; refuses (`refused`, nothing written)
   * a session id that already has events or an index row.
   */
  readonly importSession: (
    sessionId: SessionId,
    events: ReadonlyArray<PreparedEvent>,
    blobs: ReadonlyArray<{ readonly hash: string; readonly content: Uint8Array }>,
    /** when: recorded as the session's chain mark (`imported`) */
    now: number
  ) => Effect.Effect<void, EventStoreError>
  /**
   * `importSession` of a session as it arrives: the session first, then its events (in chunks, seqs
   * from 1) and blobs, all in ONE transaction that a failure of `items` rolls back; returns the
   * session's id.
   */
  readonly importStream: <E>(
    items: Stream.Stream<BackendImportItem, E>,
    now: number
  ) => Effect.Effect<SessionId, E | EventStoreError>
  readonly acquireLease: (
    sessionId: SessionId,
    owner: string,
    now: number,
    ttlMs: number,
    renewOnly: boolean
  ) => Effect.Effect<Lease, LeaseHeld | EventStoreError>
  readonly releaseLease: (sessionId: SessionId, owner: string) => Effect.Effect<void, EventStoreError>
  readonly lease: (sessionId: SessionId) => Effect.Effect<Option.Option<Lease>, EventStoreError>
  readonly leases: Effect.Effect<ReadonlyArray<Lease>, EventStoreError>
}

/** What `Backend.importStream` writes, in order: the session, then chunks of its events and its blobs. */
export type BackendImportItem =
  | { readonly _tag: "session"; readonly sessionId: SessionId }
  | { readonly _tag: "events"; readonly events: ReadonlyArray<PreparedEvent> }
  | { readonly _tag: "blob"; readonly hash: string; readonly content: Uint8Array }

/** A snapshot's state as stored: JSON text and the SHA-256 it had when saved (null: not recorded). */
export interface StoredSnapshot {
  readonly json: string
  readonly hash: string | null
}

export interface QueryCursor {
  readonly at: number
  readonly sessionId: string
  readonly seq: number
}

export interface StoreOptions {
  /** how often `follow` looks for events written by other processes (ms) */
  readonly followPollMs?: number | undefined
  /** the most requests one group commit takes */
  readonly maxBatch?: number | undefined
}

const PAGE = 1000
/** live envelopes one `follow` keeps while its reader is busy; beyond that it reads from the store */
const FOLLOW_BUFFER = 1024

/** `follow`'s poll, in its buffer of live envelopes: read the store (another process may have written) */
const POLL: unique symbol = Symbol("follow.poll")
type Poll = typeof POLL

/**
 * How many times the background writer lets the other fibers run before it drains what was
 * handed over: the kernel hands over events it needs durable only by its next awaited append (an
 * `action.state` before the call's `tool.invoked`, a `tool.finished` before the next
 * `step.started`), and that append, a few scheduler rounds later, commits them in its own
 * transaction. Draining at once would make a commit of each (`bench/steps.ts` counts a step's
 * commits). No timer: a stream's deltas are still committed microseconds after they came, and
 * nothing waits for it.
 */
const WRITER_YIELDS = 9

export const storeError = (
  method: string,
  cause: unknown,
  message?: string,
  refused?: boolean | undefined
): EventStoreError =>
  new EventStoreError({
    method,
    message: message ?? (cause instanceof Error ? cause.message : String(cause)),
    reason: refused === true ? "refused" : "failed",
    cause
  })

/** The refusal of an import whose session id the database already holds. */
export const sessionExistsError = (sessionId: SessionId): EventStoreError =>
  new EventStoreError({
    method: "importSession",
    message: `session ${sessionId} already exists in this database`,
    reason: "refused"
  })

/** The refusal of an import one of whose event ids the database holds already (ids are unique across it). */
export const eventExistsError = (id: string, seq: number, otherSession: string): EventStoreError =>
  new EventStoreError({
    method: "importSession",
    message: `event ${seq} has the id ${id}, which this database already holds (in session ${otherSession})`,
    reason: "refused"
  })

const REPEATED = /^event (\d+) has the id (.*), which an earlier event of the session has$/

/** The refusal of an import that gives one event id twice (at `seq`, and at an earlier seq). */
export const repeatedEventError = (id: string, seq: number): EventStoreError =>
  new EventStoreError({
    method: "importSession",
    message: `event ${seq} has the id ${id}, which an earlier event of the session has`,
    reason: "refused"
  })

/** The seq and the id a `repeatedEventError` names; undefined for any other error. */
export const repeatedEvent = (error: EventStoreError): { readonly seq: number; readonly id: string } | undefined => {
  const match = error.method === "importSession" && error.reason === "refused" ? REPEATED.exec(error.message) : null
  return match === null ? undefined : { seq: Number(match[1]), id: match[2]! }
}

/** An imported event as the backend writes it, checked: it decodes, and its time is whole milliseconds. */
const prepareImported = (
  sessionId: SessionId,
  e: ImportedEvent,
  seq: number
): Either.Either<PreparedEvent, EventStoreError> => {
  const refuse = (reason: string) =>
    Either.left(storeError("importSession", undefined, `importSession: event ${seq} (${e.type}): ${reason}`, true))
  const decoded = decodeEnvelope({ ...e, sessionId, seq })
  if (Either.isLeft(decoded)) return refuse(decoded.left.message)
  if (!Number.isSafeInteger(e.at)) return refuse(`time ${e.at} is not an integer of milliseconds`)
  return Either.right({
    id: e.id,
    type: e.type,
    at: e.at,
    parentId: e.parentId,
    v: e.v,
    json: JSON.stringify(e.payload)
  })
}

export { hashContent }

export const toBytes = (content: Uint8Array | string): Uint8Array =>
  typeof content === "string" ? new TextEncoder().encode(content) : content

const rejected = (event: { readonly type: string }, reason: string) =>
  new EventStoreError({ method: "append", message: `cannot append ${event.type}: ${reason}` })

/**
 * Validates, encodes and stamps events (id, time, version) before they are handed to the writer.
 * Everything a database would refuse is refused here, for the one caller that sent it: a payload
 * that does not match its Schema or does not survive JSON, a time that is not an integer of
 * milliseconds, an id used twice in the request. `now`: the time of events that carry none.
 * A plain function (the append path runs it once per call): an `EventStoreError` is returned, not thrown.
 */
export const prepareEventsAt = (
  events: ReadonlyArray<NewEvent>,
  now: number
): ReadonlyArray<PreparedEvent> | EventStoreError => {
  const out: Array<PreparedEvent> = new Array(events.length)
  // one event (the usual call): nothing to check an id against
  const ids = events.length > 1 ? new Set<string>() : undefined
  for (let i = 0; i < events.length; i++) {
    const event = events[i]!
    const encoded = encodePayload(event)
    if (Either.isLeft(encoded)) return rejected(event, encoded.left.message)
    const at = event.at ?? now
    if (!Number.isSafeInteger(at)) return rejected(event, `time ${at} is not an integer of milliseconds`)
    const id = event.id ?? (uuidV7At(at) as EventId)
    if (ids !== undefined) {
      if (ids.has(id)) return rejected(event, `event id ${id} is used twice`)
      ids.add(id)
    }
    let json: string
    try {
      json = JSON.stringify(encoded.right)
    } catch (e) {
      return rejected(event, `the payload cannot be written as JSON (${(e as Error).message})`)
    }
    out[i] = {
      id,
      type: event.type,
      at,
      parentId: event.parentId ?? null,
      v: PAYLOAD_VERSION,
      json
    }
  }
  return out
}

/** `prepareEventsAt` at the `Clock`'s time, as an effect. */
export const prepareEvents = (
  events: ReadonlyArray<NewEvent>
): Effect.Effect<ReadonlyArray<PreparedEvent>, EventStoreError> =>
  Effect.clockWith((clock) => {
    const prepared = prepareEventsAt(events, clock.unsafeCurrentTimeMillis())
    return prepared instanceof EventStoreError ? Effect.fail(prepared) : Effect.succeed(prepared)
  })

type MutableSummary = { -readonly [K in keyof SessionSummary]: SessionSummary[K] }

/** The index row of a session before any of its events (`at`: the time of its first). */
export const emptySummary = (sessionId: SessionId, at: number): SessionSummary => ({
  id: sessionId,
  title: null,
  cwd: null,
  createdAt: at,
  updatedAt: at,
  lastSeq: 0,
  status: "idle",
  deleted: false,
  model: null,
  turnOpen: false,
  lastTurn: null,
  cost: 0,
  costKnown: true
})

/** The event types the index reads the payload of; every other event only moves `updatedAt` and `lastSeq`. */
export const SUMMARY_TYPES: ReadonlyArray<string> = [
  "session.created",
  "session.titled",
  "session.deleted",
  "session.status",
  "assistant.started",
  "model.switched",
  "step.finished",
  "compaction.done",
  "turn.started",
  "turn.finished",
  "turn.interrupted"
]

interface UsagePayload {
  readonly cost?: number
  readonly costKnown?: boolean
}

const addCost = (s: MutableSummary, usage: UsagePayload | undefined): void => {
  if (usage === undefined) return
  // summed in log order, as the projection sums its totals, so both give the same figure
  s.cost = s.cost + (usage.cost ?? 0)
  if (usage.costKnown === false) s.costKnown = false
}

/** Folds one stored event (its type and payload JSON) into a session's index row, in place. */
export const summarizeEvent = (s: MutableSummary, type: string, json: string): void => {
  switch (type) {
    case "session.created": {
      const p = JSON.parse(json) as { title?: string; cwd?: string; model?: string }
      if (p.title !== undefined) s.title = p.title
      if (p.cwd !== undefined) s.cwd = p.cwd
      if (p.model !== undefined) s.model = p.model
      break
    }
    case "session.titled":
      s.title = (JSON.parse(json) as { title: string }).title
      break
    case "session.deleted":
      s.deleted = true
      break
    case "session.status":
      s.status = (JSON.parse(json) as { status: { _tag: SessionSummary["status"] } }).status._tag
      break
    case "assistant.started": {
      const model = (JSON.parse(json) as { model?: string }).model
      if (model !== undefined) s.model = model
      break
    }
    case "model.switched":
      s.model = (JSON.parse(json) as { to: string }).to
      break
    case "step.finished":
      addCost(s, (JSON.parse(json) as { usage?: UsagePayload }).usage)
      break
    case "compaction.done":
      addCost(s, (JSON.parse(json) as { usage?: UsagePayload }).usage)
      break
    case "turn.started":
      s.turnOpen = true
      break
    case "turn.finished":
      s.turnOpen = false
      s.lastTurn = { reason: (JSON.parse(json) as { reason: string }).reason, interrupted: false }
      break
    case "turn.interrupted":
      s.turnOpen = false
      s.lastTurn = { reason: (JSON.parse(json) as { reason: string }).reason, interrupted: true }
      break
  }
}

/** The session index after a request's events (the first has seq `firstSeq`): a small fold over event types. */
export const summarize = (
  previous: SessionSummary | undefined,
  sessionId: SessionId,
  firstSeq: number,
  events: ReadonlyArray<PreparedEvent>
): SessionSummary => {
  const s: MutableSummary = { ...(previous ?? emptySummary(sessionId, events[0]?.at ?? 0)) }
  for (const e of events) {
    summarizeEvent(s, e.type, e.json)
    if (e.at > s.updatedAt) s.updatedAt = e.at
  }
  s.lastSeq = firstSeq + events.length - 1
  return s
}

export const rowToRaw = (sessionId: SessionId, row: StoredRow): RawEnvelope => ({
  id: row.id,
  sessionId,
  seq: row.seq,
  type: row.type,
  at: row.at,
  parentId: row.parentId,
  v: row.v,
  payload: JSON.parse(row.json)
})

/** The committed envelopes of a request, with the payloads as stored (fresh objects, never the caller's). */
const toEnvelopes = (request: CommitRequest, first: number): Array<Envelope> => {
  const envelopes: Array<Envelope> = new Array(request.events.length)
  for (let j = 0; j < request.events.length; j++) {
    const e = request.events[j]!
    envelopes[j] = {
      id: e.id,
      sessionId: request.sessionId,
      seq: first + j,
      type: e.type,
      at: e.at,
      parentId: e.parentId,
      v: e.v,
      payload: JSON.parse(e.json)
    } as Envelope
  }
  return envelopes
}

interface Pending {
  readonly request: CommitRequest
  /** the caller waiting for the commit; none for `appendLater` */
  readonly done: Deferred.Deferred<ReadonlyArray<Envelope>, EventStoreError> | undefined
}

/**
 * Decodes a stream of stored envelopes a chunk at a time: one stage per chunk, where
 * `Stream.mapEffect` takes a channel step and a chunk of its own per envelope. An envelope that
 * does not decode fails the stream after the ones before it, as `mapEffect` did.
 */
const decodeChunks = <E, R>(raw: Stream.Stream<RawEnvelope, E, R>): Stream.Stream<Envelope, E | EventDecodeError, R> =>
  raw.pipe(
    Stream.mapChunks((chunk): Chunk.Chunk<Take.Take<Envelope, EventDecodeError>> => {
      // nothing in, nothing out (an empty page): no empty chunk downstream
      if (Chunk.isEmpty(chunk)) return Chunk.empty()
      const { values, refused } = mapUntilLeft(chunk, decodeEnvelope)
      if (Option.isNone(refused)) return Chunk.of(Take.chunk(values))
      const failed = Take.fail(refused.value)
      return Chunk.isEmpty(values) ? Chunk.of(failed) : Chunk.make(Take.chunk(values), failed)
    }),
    Stream.flattenTake
  )

/**
 * What the service's parts share: the backend, the bus, and the group commit's state (the
 * requests waiting in call order, the lock a drain holds, the background writer's wake-up).
 */
interface Shared {
  readonly backend: Backend
  readonly bus: EventBus["Type"]
  readonly pending: Array<Pending>
  readonly lock: Effect.Semaphore
  readonly wake: Queue.Queue<void>
  /**
   * Per session, a failed commit of events handed over with `appendLater`: they are lost, and
   * the next `append` to that session (or any `flush`) reports it. Never silent.
   */
  readonly lostLater: Map<SessionId, EventStoreError>
  /** sessions whose fenced-off `appendLater` requests were logged already */
  readonly fencedLogged: Set<SessionId>
  readonly maxBatch: number
  readonly pollMs: number
  /**
   * Whether the background writer has been woken and has not started its drain yet: a request
   * queued meanwhile is in that drain, so only the first `appendLater` after a drain started
   * wakes it again (one queue offer per drain, not per call).
   */
  woken: boolean
}

/** Tells a request's caller that its commit failed; a request handed over with `appendLater` is remembered as lost. */
const settleFailure = (s: Shared, p: Pending, error: EventStoreError): Effect.Effect<void> => {
  if (p.done !== undefined) return Effect.asVoid(Deferred.fail(p.done, error))
  // fenced off: not written on purpose (another process drives the session now); reporting it to
  // the session's next append would fail that one — which may be this process's next driving
  if (error.reason === "fenced") {
    // once per session: a driver that lost its lease may hand over many events before it stops
    if (s.fencedLogged.has(p.request.sessionId)) return Effect.void
    s.fencedLogged.add(p.request.sessionId)
    return Effect.logWarning(`${error.message} (events handed over later are not written either)`)
  }
  if (!s.lostLater.has(p.request.sessionId)) s.lostLater.set(p.request.sessionId, error)
  return Effect.void
}

/** One backend commit of the batch's requests, its failure (or defect) as a value. */
const commitOnce = (s: Shared, batch: ReadonlyArray<Pending>) =>
  s.backend.commit(batch.map((p) => p.request)).pipe(
    Effect.catchAllDefect((defect) => Effect.fail(storeError("append", defect))),
    Effect.either
  )

/**
 * Commits one batch and settles its callers; never fails (failures go to the callers). When the
 * database refused the batch's data (a constraint), its requests are committed one by one, so
 * only the request at fault fails — together with the requests of the same session after it,
 * which must not be written past a hole in that session's log. When the database itself failed
 * (busy, disk full), the whole batch fails at once: retrying each request would only wait again.
 */
const commitBatch = (s: Shared, batch: ReadonlyArray<Pending>): Effect.Effect<void> =>
  Effect.flatMap(commitOnce(s, batch), (result): Effect.Effect<void> => {
    if (Either.isRight(result)) return settled(s, batch, result.right)
    if (batch.length === 1 || !result.left.isRefusal) {
      const error = result.left
      return Effect.forEach(batch, (p) => settleFailure(s, p, error), { discard: true })
    }
    return commitEach(s, batch)
  })

/** A refused batch's requests committed one by one: a session's requests after a failed one fail with it. */
const commitEach = (s: Shared, batch: ReadonlyArray<Pending>): Effect.Effect<void> => {
  const failed = new Map<SessionId, EventStoreError>()
  return Effect.forEach(
    batch,
    (p) => {
      const earlier = failed.get(p.request.sessionId)
      if (earlier !== undefined) return settleFailure(s, p, earlier)
      return Effect.flatMap(commitOnce(s, [p]), (one) => {
        if (Either.isRight(one)) return settled(s, [p], one.right)
        failed.set(p.request.sessionId, one.left)
        return settleFailure(s, p, one.left)
      })
    },
    { discard: true }
  )
}

/**
 * Publishes a committed batch and wakes its callers. Envelopes are built only when someone
 * takes them: a waiting caller, or a bus subscriber (events handed over with `appendLater` in a
 * process nobody watches cost no more than their row).
 */
const settled = (s: Shared, batch: ReadonlyArray<Pending>, firstSeqs: ReadonlyArray<number>): Effect.Effect<void> =>
  Effect.flatMap(s.bus.subscribers, (subscribers) => {
    const published: Array<Envelope> = []
    const waiting: Array<readonly [NonNullable<Pending["done"]>, Array<Envelope>]> = []
    for (let i = 0; i < batch.length; i++) {
      const { request, done } = batch[i]!
      if (done === undefined && subscribers === 0) continue
      const envelopes = toEnvelopes(request, firstSeqs[i]!)
      if (subscribers > 0) for (const e of envelopes) published.push(e)
      if (done !== undefined) waiting.push([done, envelopes])
    }
    // the callers woken in one step, not an `Effect.all` of `Deferred.succeed`s
    return Effect.zipRight(
      s.bus.publish(published),
      Effect.sync(() => {
        for (const [done, envelopes] of waiting) Deferred.unsafeDone(done, Exit.succeed(envelopes))
      })
    )
  })

/**
 * Commits what is pending when the lock is taken (all of it when `all`), in batches. Taking a
 * batch, committing, publishing and waking its callers is one uninterruptible step: an
 * interrupt can never leave events taken but not written, or written but not announced.
 */
const drain = (s: Shared, all: boolean): Effect.Effect<void> =>
  s.lock.withPermits(1)(
    Effect.uninterruptible(
      Effect.suspend(() => {
        let remaining = s.pending.length
        const loop = (): Effect.Effect<void> => {
          if (s.pending.length === 0 || (!all && remaining <= 0)) return Effect.void
          const batch = s.pending.splice(0, s.maxBatch)
          remaining -= batch.length
          return Effect.flatMap(commitBatch(s, batch), loop)
        }
        return loop()
      })
    )
  )

/** Wakes the background writer, unless it is woken already and has not started its drain (built once, run per call). */
const wakeWriter = (s: Shared): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (s.woken) return Effect.void
    s.woken = true
    return Effect.asVoid(Queue.offer(s.wake, undefined))
  })

/**
 * The background writer: commits what `appendLater` handed over (nothing to do when an `append`
 * committed it meanwhile), after letting the other fibers run `WRITER_YIELDS` times; forever.
 */
const backgroundWriter = (s: Shared): Effect.Effect<never> =>
  Queue.take(s.wake).pipe(
    Effect.zipRight(Effect.repeatN(Effect.yieldNow(), WRITER_YIELDS - 1)),
    Effect.zipRight(
      Effect.suspend(() => {
        s.woken = false
        return s.pending.length === 0 ? Effect.void : drain(s, true)
      })
    ),
    Effect.forever
  )

/** The failure of events of the session handed over earlier with `appendLater`, once. */
const takeLost = (s: Shared, sessionId: SessionId): EventStoreError | undefined => {
  const error = s.lostLater.get(sessionId)
  if (error !== undefined) s.lostLater.delete(sessionId)
  return error
}

/** Fails with the lost `appendLater` events of these sessions (one error, or one naming them all), once. */
const reportLost = (s: Shared, sessionIds: ReadonlyArray<SessionId>): Effect.Effect<void, EventStoreError> => {
  const errors: Array<EventStoreError> = []
  for (const id of sessionIds) {
    const error = takeLost(s, id)
    if (error !== undefined) errors.push(error)
  }
  if (errors.length === 0) return Effect.void
  if (errors.length === 1) return Effect.fail(errors[0]!)
  return Effect.fail(
    new EventStoreError({
      method: "flush",
      message: `events of ${errors.length} sessions could not be written: ${errors.map((e) => e.message).join("; ")}`,
      cause: errors
    })
  )
}

/** Commits everything pending, then reports the `appendLater` events lost so far. */
const flushAll = (s: Shared): Effect.Effect<void, EventStoreError> =>
  Effect.zipRight(
    drain(s, true),
    Effect.suspend(() => reportLost(s, Array.from(s.lostLater.keys())))
  )

/**
 * `append`: queues the request and drains what is pending up to it, then waits for its commit.
 * `signal` wakes the background writer.
 */
const append =
  (s: Shared, signal: Effect.Effect<void>): EventStoreService["append"] =>
  (sessionId, events, options: AppendOptions = {}) =>
    Effect.clockWith((clock): Effect.Effect<ReadonlyArray<Envelope>, EventStoreError> => {
      const lost = takeLost(s, sessionId)
      if (lost !== undefined) return Effect.fail(lost)
      if (events.length === 0) return Effect.succeed([])
      const prepared = prepareEventsAt(events, clock.unsafeCurrentTimeMillis())
      if (prepared instanceof EventStoreError) return Effect.fail(prepared)
      const done = Deferred.unsafeMake<ReadonlyArray<Envelope>, EventStoreError>(FiberId.none)
      s.pending.push({ request: { sessionId, events: prepared, owner: options.owner }, done })
      // If this caller is interrupted before its request is committed, the background
      // writer commits it: an interrupted append may still be written (never half).
      return Effect.zipRight(
        Effect.onInterrupt(drain(s, false), () => signal),
        Deferred.await(done)
      )
    })

/** `appendLater`: queues the request and wakes the background writer (`signal`); nothing waits for the commit. */
const appendLater =
  (s: Shared, signal: Effect.Effect<void>): EventStoreService["appendLater"] =>
  (sessionId, events, options: AppendOptions = {}) =>
    events.length === 0
      ? Effect.void
      : Effect.clockWith((clock) => {
          const prepared = prepareEventsAt(events, clock.unsafeCurrentTimeMillis())
          if (prepared instanceof EventStoreError) return Effect.fail(prepared)
          s.pending.push({ request: { sessionId, events: prepared, owner: options.owner }, done: undefined })
          return signal
        })

/** A session's stored rows in `range`, read a page at a time. */
const readRaw =
  (backend: Backend): EventStoreService["readRaw"] =>
  (sessionId, range = {}) => {
    const to = range.to ?? Number.MAX_SAFE_INTEGER
    return Stream.paginateChunkEffect(Math.max(1, range.from ?? 1), (from) =>
      backend.readPage(sessionId, from, to, PAGE).pipe(
        Effect.map((rows) => {
          const chunk = Chunk.fromIterable(rows.map((r) => rowToRaw(sessionId, r)))
          const last = rows[rows.length - 1]
          return [chunk, rows.length < PAGE || last === undefined ? Option.none() : Option.some(last.seq + 1)] as const
        })
      )
    )
  }

/** A session's rows in `range` with their chain columns, read a page at a time. */
const readChain =
  (backend: Backend): EventStoreService["readChain"] =>
  (sessionId, range = {}) => {
    const to = range.to ?? Number.MAX_SAFE_INTEGER
    return Stream.paginateChunkEffect(Math.max(1, range.from ?? 1), (from) =>
      backend.readChainPage(sessionId, from, to, PAGE).pipe(
        Effect.map((rows) => {
          const last = rows[rows.length - 1]
          return [
            Chunk.unsafeFromArray(rows.slice()),
            rows.length < PAGE || last === undefined ? Option.none() : Option.some(last.seq + 1)
          ] as const
        })
      )
    )
  }

/**
 * Stored rows from `from`, then live ones. The bus is only a hint: a forked fiber keeps the
 * session's live envelopes in a small sliding buffer (so a slow reader holds no more than that
 * in memory); whenever the buffer does not continue exactly at `next`, the rows are read from
 * the store instead. Other processes' commits are found by polling: a second fiber puts a
 * `POLL` mark into the buffer when `pollMs` passed without anything for this session, and the
 * mark sends the next pull to the store. A pull only takes from the buffer: no race of the
 * bus against a timer per wait (two fibers forked per commit, each commit a wait).
 */
const openFollow = (s: Shared, sessionId: SessionId, from: number): OpenPull<RawEnvelope, EventStoreError> =>
  Effect.gen(function* () {
    const { backend, bus, pollMs } = s
    // subscribe first, then read: nothing committed in between can be missed
    const subscription = yield* bus.subscribe
    const live = yield* Queue.sliding<RawEnvelope | Poll>(FOLLOW_BUFFER)
    const clock = yield* Effect.clock
    /** when the buffer last got something (an envelope of this session, or a mark) */
    let lastLive = clock.unsafeCurrentTimeMillis()
    /** a mark is in the buffer, not taken yet: one is enough */
    let marked = false
    // what a commit published, taken together (one wait, then what else is there)
    yield* Effect.zipWith(Queue.take(subscription), Queue.takeAll(subscription), (first, rest) => {
      const mine: Array<RawEnvelope> = first.sessionId === sessionId ? [first] : []
      for (const e of rest) if (e.sessionId === sessionId) mine.push(e)
      return mine
    }).pipe(
      Effect.flatMap((mine) => {
        if (mine.length === 0) return Effect.void
        lastLive = clock.unsafeCurrentTimeMillis()
        return Queue.offerAll(live, mine)
      }),
      Effect.forever,
      Effect.forkScoped
    )
    yield* Effect.suspend(() => {
      const left = lastLive + pollMs - clock.unsafeCurrentTimeMillis()
      if (left > 0) return Effect.sleep(Duration.millis(left))
      lastLive = clock.unsafeCurrentTimeMillis()
      if (marked) return Effect.void
      marked = true
      return Queue.offer(live, POLL)
    }).pipe(Effect.forever, Effect.forkScoped)
    let next = Math.max(1, from)
    /**
     * the last chunk came from the bus and continued exactly at `next`: the store holds nothing
     * newer from this process that the bus will not bring, so the next pull waits for it (or
     * for the poll) without reading the store first — a read per commit saved while a session runs
     */
    let caughtUp = false
    const pull: Pull<RawEnvelope, EventStoreError> = Effect.gen(function* () {
      while (true) {
        if (!caughtUp) {
          const rows = yield* Effect.mapError(
            backend.readPage(sessionId, next, Number.MAX_SAFE_INTEGER, PAGE),
            Option.some
          )
          if (rows.length > 0) {
            next = rows[rows.length - 1]!.seq + 1
            return Chunk.unsafeFromArray(rows.map((row) => rowToRaw(sessionId, row)))
          }
        }
        caughtUp = false
        // nothing stored past `next`: wait for a commit in this process, or for the poll's mark
        const seen: Array<RawEnvelope | Poll> = [yield* Queue.take(live), ...(yield* Queue.takeAll(live))]
        const fresh: Array<RawEnvelope> = []
        let polled = false
        for (const e of seen) {
          if (e === POLL) polled = true
          else if (e.seq >= next) fresh.push(e)
        }
        if (polled) marked = false
        if (fresh.length > 0 && fresh[0]!.seq === next) {
          const out: Array<RawEnvelope> = []
          for (const e of fresh) {
            if (e.seq !== next) break
            out.push(e)
            next++
          }
          // a gap inside what came (another process's commit between two of ours), or the
          // poll's mark with it: read the store next
          caughtUp = out.length === fresh.length && !polled
          return Chunk.unsafeFromArray(out)
        }
      }
    })
    return pull
  })

/** Headers matching the query, a keyset page at a time, up to its limit. */
const query =
  (backend: Backend): EventStoreService["query"] =>
  (q) => {
    const limit = q.limit
    let seen = 0
    return Stream.paginateChunkEffect(undefined as QueryCursor | undefined, (after) => {
      const page = limit === undefined ? PAGE : Math.min(PAGE, limit - seen)
      if (page <= 0) return Effect.succeed([Chunk.empty(), Option.none()] as const)
      return backend.queryPage(q, after, page).pipe(
        Effect.map((rows) => {
          seen += rows.length
          const last = rows[rows.length - 1]
          const more = rows.length === page && last !== undefined && (limit === undefined || seen < limit)
          return [
            Chunk.fromIterable(rows),
            more ? Option.some({ at: last.at, sessionId: last.sessionId, seq: last.seq }) : Option.none()
          ] as const
        })
      )
    })
  }

/** Saves a snapshot's state as JSON with its hash, keeping the newest `SNAPSHOTS_KEPT`. */
const saveSnapshot =
  (backend: Backend): EventStoreService["saveSnapshot"] =>
  ({ state, ...snapshot }) =>
    Effect.suspend(() => {
      const json = JSON.stringify(state)
      return backend.saveSnapshot(snapshot, { json, hash: hashContent(json) }, SNAPSHOTS_KEPT)
    }).pipe(Effect.catchAllDefect((d) => Effect.fail(storeError("saveSnapshot", d))))

/** The newest snapshot at or below a seq, its state parsed and checked against its hash (`intact`). */
const loadSnapshot =
  (backend: Backend): EventStoreService["loadSnapshot"] =>
  (sessionId, o) =>
    backend.loadSnapshot(sessionId, o.version, o.atOrBelow ?? Number.MAX_SAFE_INTEGER).pipe(
      Effect.flatMap(
        Option.match({
          onNone: () => Effect.succeedNone,
          onSome: ({ json, hash, ...rest }) =>
            Effect.try({
              try: () =>
                Option.some({ ...rest, state: JSON.parse(json) as unknown, intact: hash === hashContent(json) }),
              catch: (e) => storeError("loadSnapshot", e, `snapshot ${sessionId}@${rest.seq} is not valid JSON`)
            })
        })
      )
    )

/** Stores a blob under its content hash and returns the hash. */
const putBlob =
  (backend: Backend): EventStoreService["putBlob"] =>
  (content) =>
    Effect.suspend(() => {
      const bytes = toBytes(content)
      const hash = hashContent(bytes)
      return Effect.as(backend.putBlob(hash, bytes), hash)
    })

/** The index row of a session just imported; failing with `missing` when there is none. */
const importedSummary = (
  backend: Backend,
  sessionId: SessionId,
  missing: string
): Effect.Effect<SessionSummary, EventStoreError> =>
  Effect.flatMap(
    backend.session(sessionId),
    Option.match({
      onNone: () => Effect.fail(storeError("importSession", undefined, missing)),
      onSome: Effect.succeed
    })
  )

/**
 * Import items as the backend writes them: each chunk's events checked, numbered from 1 and
 * grouped between the session and the blobs, each blob with its hash.
 */
const prepareImportItems = <E>(
  items: Stream.Stream<ImportItem, E>
): Stream.Stream<BackendImportItem, E | EventStoreError> => {
  let sessionId: SessionId | undefined
  let seq = 0
  return items.pipe(
    Stream.mapChunksEffect((chunk) =>
      Effect.suspend(() => {
        const out: Array<BackendImportItem> = []
        let events: Array<PreparedEvent> = []
        const flush = () => {
          if (events.length > 0) out.push({ _tag: "events", events })
          events = []
        }
        for (const item of chunk) {
          if (item._tag === "session") {
            flush()
            sessionId = item.sessionId
            out.push(item)
          } else if (item._tag === "blob") {
            flush()
            out.push({ _tag: "blob", hash: hashContent(item.content), content: item.content })
          } else {
            const e = prepareImported(sessionId!, item.event, ++seq)
            if (Either.isLeft(e)) return Effect.fail(e.left)
            events.push(e.right)
          }
        }
        flush()
        return Effect.succeed(Chunk.unsafeFromArray(out))
      })
    )
  )
}

/** `importStream`: the items prepared as they come and written in one backend transaction; the session's index row. */
const importStream =
  (backend: Backend): EventStoreService["importStream"] =>
  (items) =>
    Effect.suspend(() =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => backend.importStream(prepareImportItems(items), now))
    ).pipe(
      Effect.catchAllDefect((d) => Effect.fail(storeError("importSession", d))),
      Effect.flatMap((sessionId) => importedSummary(backend, sessionId, "importSession: the session has no index row"))
    )

/** `importSession`: the events checked (an id given twice is refused) and written with the blobs; the session's index row. */
const importSession =
  (backend: Backend): EventStoreService["importSession"] =>
  (sessionId, imported) =>
    Effect.suspend(() => {
      const events: Array<PreparedEvent> = new Array(imported.events.length)
      const ids = new Set<string>()
      for (let i = 0; i < imported.events.length; i++) {
        const e = imported.events[i]!
        if (ids.has(e.id)) {
          return Effect.fail(
            storeError(
              "importSession",
              undefined,
              `importSession: event ${i + 1} (${e.type}): event id ${e.id} is used twice`,
              true
            )
          )
        }
        ids.add(e.id)
        const prepared = prepareImported(sessionId, e, i + 1)
        if (Either.isLeft(prepared)) return Effect.fail(prepared.left)
        events[i] = prepared.right
      }
      const blobs = imported.blobs.map((content) => ({ hash: hashContent(content), content }))
      return Effect.flatMap(Clock.currentTimeMillis, (now) => backend.importSession(sessionId, events, blobs, now))
    }).pipe(
      Effect.catchAllDefect((d) => Effect.fail(storeError("importSession", d))),
      Effect.zipRight(importedSummary(backend, sessionId, `importSession: ${sessionId} has no index row`))
    )

/** Takes or renews a session's lease at the `Clock`'s time. */
const acquireLease =
  (backend: Backend): EventStoreService["acquireLease"] =>
  (sessionId, owner, ttlMs, options) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      backend.acquireLease(sessionId, owner, now, ttlMs, options?.renewOnly === true)
    )

/**
 * Builds the EventStore service over a backend: group commit, bus publishing, paging, follow.
 *
 * Group commit without a hand-off: requests wait in `pending` in call order. A caller of `append`
 * takes the commit lock and commits everything pending at that moment (its own request and
 * whatever others handed over) in one transaction; callers that arrive meanwhile queue up behind
 * the lock and usually find their request already committed by the one before. `appendLater`
 * only queues and wakes a background writer fiber, which drains in the same way.
 */
export const makeService = (
  backend: Backend,
  options: StoreOptions = {}
): Effect.Effect<EventStoreService, never, Scope.Scope | EventBus> =>
  Effect.gen(function* () {
    const s: Shared = {
      backend,
      bus: yield* EventBus,
      pending: [],
      lock: yield* Effect.makeSemaphore(1),
      wake: yield* Queue.sliding<void>(1),
      lostLater: new Map(),
      fencedLogged: new Set(),
      maxBatch: options.maxBatch ?? 1024,
      pollMs: options.followPollMs ?? 200,
      woken: false
    }
    const signal = wakeWriter(s)
    yield* Effect.forkScoped(backgroundWriter(s))
    const flush = flushAll(s)
    // added after the writer started, so it runs before the writer is interrupted: nothing handed
    // over is lost on a normal close, and a failure to write it is logged, not swallowed
    yield* Effect.addFinalizer(() =>
      Effect.catchAll(flush, (error) => Effect.logError("logbook: events could not be written before closing", error))
    )
    const readRawOf = readRaw(backend)
    const service: EventStoreService = {
      append: append(s, signal),
      appendLater: appendLater(s, signal),
      flush,
      read: (sessionId, range) => decodeChunks(readRawOf(sessionId, range)),
      readRaw: readRawOf,
      follow: (sessionId, from = 1) =>
        // built from the pull (not `decodeChunks(followRaw(…))`), so that a reader can take the pull itself
        fromPull(
          Effect.map(openFollow(s, sessionId, from), (pull) =>
            mapPullEither<RawEnvelope, Envelope, EventStoreError, EventDecodeError>(pull, decodeEnvelope)
          )
        ),
      followRaw: (sessionId, from = 1) => fromPull(openFollow(s, sessionId, from)),
      query: query(backend),
      readChain: readChain(backend),
      consistent: backend.consistent,
      chainInfo: backend.chainInfo,
      seqGaps: backend.seqGaps,
      snapshotSeqs: backend.snapshotSeqs,
      lastSeq: backend.lastSeq,
      sessions: (o) => backend.sessions(o ?? {}),
      session: backend.session,
      sessionIds: backend.sessionIds,
      saveSnapshot: saveSnapshot(backend),
      loadSnapshot: loadSnapshot(backend),
      putBlob: putBlob(backend),
      getBlob: backend.getBlob,
      importStream: importStream(backend),
      importSession: importSession(backend),
      acquireLease: acquireLease(backend),
      releaseLease: backend.releaseLease,
      lease: backend.lease,
      leases: backend.leases
    }
    return service
  })
