/**
 * What every EventStore layer shares: preparing events for a commit, the session index fold,
 * content hashing, the group-commit writer fiber, paging and `follow`. A layer supplies a
 * `Backend` (how rows are stored) and gets the whole `EventStore` service from `makeService`.
 */
import { createHash } from "node:crypto"
import { Chunk, Clock, Deferred, Effect, Either, Option, Queue, Ref, type Scope, Stream } from "effect"
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
import { type EventId, type SessionId, uuidV7 } from "../../domain/Ids.js"
import { EventStoreError, type LeaseHeld } from "../Errors.js"
import { EventBus } from "../EventBus.js"
import type {
  EventQuery,
  EventStoreService,
  Lease,
  ListSessionsOptions,
  SeqRange,
  SessionSummary,
  Snapshot
} from "../EventStore.js"

/** An event ready to be written: everything but its seq. */
export interface PreparedEvent {
  readonly id: EventId
  readonly type: string
  readonly at: number
  readonly parentId: EventId | null
  readonly v: number
  /** the typed payload, returned to the caller after the commit */
  readonly payload: unknown
  /** the encoded payload as JSON text, as stored */
  readonly json: string
}

export interface CommitRequest {
  readonly sessionId: SessionId
  readonly events: ReadonlyArray<PreparedEvent>
}

/** Rows as a backend returns them: the stored columns. */
export interface StoredRow extends EnvelopeHeader {
  readonly json: string
}

/** How a layer stores rows. Every method is one short transaction or query. */
export interface Backend {
  /**
   * Commits all requests in ONE transaction, assigning gapless per-session seqs in request
   * order and updating the session index; returns the stored envelopes per request.
   */
  readonly commit: (
    requests: ReadonlyArray<CommitRequest>
  ) => Effect.Effect<ReadonlyArray<ReadonlyArray<EnvelopeHeader>>, EventStoreError>
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
  readonly sessions: (options: ListSessionsOptions) => Effect.Effect<ReadonlyArray<SessionSummary>, EventStoreError>
  readonly session: (sessionId: SessionId) => Effect.Effect<Option.Option<SessionSummary>, EventStoreError>
  readonly saveSnapshot: (snapshot: Snapshot, json: string) => Effect.Effect<void, EventStoreError>
  readonly loadSnapshot: (
    sessionId: SessionId,
    version: number,
    atOrBelow: number
  ) => Effect.Effect<Option.Option<Omit<Snapshot, "state"> & { readonly json: string }>, EventStoreError>
  readonly putBlob: (hash: string, content: Uint8Array) => Effect.Effect<void, EventStoreError>
  readonly getBlob: (hash: string) => Effect.Effect<Option.Option<Uint8Array>, EventStoreError>
  readonly acquireLease: (
    sessionId: SessionId,
    owner: string,
    now: number,
    ttlMs: number
  ) => Effect.Effect<Lease, LeaseHeld | EventStoreError>
  readonly releaseLease: (sessionId: SessionId, owner: string) => Effect.Effect<void, EventStoreError>
  readonly lease: (sessionId: SessionId) => Effect.Effect<Option.Option<Lease>, EventStoreError>
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

export const storeError = (method: string, cause: unknown, message?: string): EventStoreError =>
  new EventStoreError({
    method,
    message: message ?? (cause instanceof Error ? cause.message : String(cause)),
    cause
  })

/** SHA-256 of the content, lowercase hex. */
export const hashContent = (content: Uint8Array | string): string => createHash("sha256").update(content).digest("hex")

export const toBytes = (content: Uint8Array | string): Uint8Array =>
  typeof content === "string" ? new TextEncoder().encode(content) : content

/** Validates, encodes and stamps events (id, time, version) before they are handed to the writer. */
export const prepareEvents = (
  events: ReadonlyArray<NewEvent>
): Effect.Effect<ReadonlyArray<PreparedEvent>, EventStoreError> =>
  Effect.gen(function* () {
    const out: Array<PreparedEvent> = []
    let now: number | undefined
    for (const event of events) {
      const encoded = encodePayload(event)
      if (Either.isLeft(encoded)) {
        return yield* new EventStoreError({
          method: "append",
          message: `cannot append ${event.type}: ${encoded.left.message}`
        })
      }
      if (now === undefined && event.at === undefined) now = yield* Clock.currentTimeMillis
      out.push({
        id: event.id ?? ((yield* uuidV7) as EventId),
        type: event.type,
        at: event.at ?? now!,
        parentId: event.parentId ?? null,
        v: PAYLOAD_VERSION,
        payload: event.payload,
        json: JSON.stringify(encoded.right)
      })
    }
    return out
  })

/** The session index after some committed events: a small fold over event types. */
export const summarize = (
  previous: SessionSummary | undefined,
  sessionId: SessionId,
  events: ReadonlyArray<{ readonly seq: number; readonly type: string; readonly at: number; readonly payload: unknown }>
): SessionSummary => {
  let s: {
    -readonly [K in keyof SessionSummary]: SessionSummary[K]
  } = previous
    ? { ...previous }
    : {
        id: sessionId,
        title: null,
        cwd: null,
        createdAt: events[0]?.at ?? 0,
        updatedAt: events[0]?.at ?? 0,
        lastSeq: 0,
        status: "idle",
        deleted: false
      }
  for (const e of events) {
    const p = e.payload as Record<string, unknown>
    switch (e.type) {
      case "session.created":
        s = {
          ...s,
          title: typeof p.title === "string" ? p.title : s.title,
          cwd: typeof p.cwd === "string" ? p.cwd : s.cwd
        }
        break
      case "session.titled":
        s.title = p.title as string
        break
      case "session.deleted":
        s.deleted = true
        break
      case "session.status": {
        const tag = (p.status as { _tag: SessionSummary["status"] })._tag
        s.status = tag
        break
      }
    }
    s.lastSeq = e.seq
    s.updatedAt = Math.max(s.updatedAt, e.at)
  }
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

type Pending =
  | {
      readonly _tag: "append"
      readonly request: CommitRequest
      readonly done: Deferred.Deferred<ReadonlyArray<Envelope>, EventStoreError> | undefined
    }
  | { readonly _tag: "flush"; readonly done: Deferred.Deferred<void, EventStoreError> }

/** Builds the EventStore service over a backend: writer fiber, bus publishing, paging, follow. */
export const makeService = (
  backend: Backend,
  options: StoreOptions = {}
): Effect.Effect<EventStoreService, never, Scope.Scope | EventBus> =>
  Effect.gen(function* () {
    const bus = yield* EventBus
    const queue = yield* Queue.unbounded<Pending>()
    /** a failed group commit of `appendLater` events, reported by the next append or flush */
    const laterFailure = yield* Ref.make<Option.Option<EventStoreError>>(Option.none())
    const maxBatch = options.maxBatch ?? 256
    const pollMs = options.followPollMs ?? 200

    const takeLaterFailure = Ref.getAndSet(laterFailure, Option.none())

    const commitBatch = (batch: ReadonlyArray<Pending>) =>
      Effect.gen(function* () {
        const appends = batch.filter((p): p is Extract<Pending, { _tag: "append" }> => p._tag === "append")
        const result =
          appends.length === 0
            ? Either.right([] as ReadonlyArray<ReadonlyArray<EnvelopeHeader>>)
            : yield* Effect.either(backend.commit(appends.map((a) => a.request)))
        if (Either.isLeft(result)) {
          const error = result.left
          for (const p of batch) {
            if (p.done !== undefined) yield* Deferred.fail(p.done as Deferred.Deferred<unknown, EventStoreError>, error)
          }
          // events handed over without waiting have nobody to tell but the next append or flush
          if (appends.some((a) => a.done === undefined) && !batch.some((p) => p._tag === "flush")) {
            yield* Ref.set(laterFailure, Option.some(error))
          }
          return
        }
        const published: Array<Envelope> = []
        for (let i = 0; i < appends.length; i++) {
          const a = appends[i]!
          const headers = result.right[i]!
          const envelopes = headers.map(
            (h, j) => ({ ...h, type: a.request.events[j]!.type, payload: a.request.events[j]!.payload }) as Envelope
          )
          for (const e of envelopes) published.push(e)
          if (a.done !== undefined) yield* Deferred.succeed(a.done, envelopes)
        }
        yield* bus.publish(published)
        for (const p of batch) {
          if (p._tag === "flush") {
            const failure = yield* takeLaterFailure
            yield* Option.match(failure, {
              onNone: () => Deferred.succeed(p.done, undefined),
              onSome: (e) => Deferred.fail(p.done, e)
            })
          }
        }
      })

    yield* Queue.takeBetween(queue, 1, maxBatch).pipe(
      Effect.flatMap((chunk) => commitBatch(Chunk.toReadonlyArray(chunk))),
      Effect.forever,
      Effect.forkScoped
    )

    const flush: Effect.Effect<void, EventStoreError> = Effect.gen(function* () {
      const done = yield* Deferred.make<void, EventStoreError>()
      yield* Queue.offer(queue, { _tag: "flush", done })
      yield* Deferred.await(done)
    })
    // added after the writer, so it runs before the writer is interrupted: nothing handed over is lost
    yield* Effect.addFinalizer(() => Effect.ignore(flush))

    const append = (sessionId: SessionId, events: ReadonlyArray<NewEvent>) =>
      Effect.gen(function* () {
        const failure = yield* takeLaterFailure
        if (Option.isSome(failure)) return yield* failure.value
        if (events.length === 0) return []
        const prepared = yield* prepareEvents(events)
        const done = yield* Deferred.make<ReadonlyArray<Envelope>, EventStoreError>()
        yield* Queue.offer(queue, { _tag: "append", request: { sessionId, events: prepared }, done })
        return yield* Deferred.await(done)
      }).pipe(Effect.withSpan("EventStore.append"))

    const appendLater = (sessionId: SessionId, events: ReadonlyArray<NewEvent>) =>
      Effect.gen(function* () {
        if (events.length === 0) return
        const prepared = yield* prepareEvents(events)
        yield* Queue.offer(queue, { _tag: "append", request: { sessionId, events: prepared }, done: undefined })
      })

    const readRaw = (sessionId: SessionId, range: SeqRange = {}): Stream.Stream<RawEnvelope, EventStoreError> => {
      const to = range.to ?? Number.MAX_SAFE_INTEGER
      return Stream.paginateChunkEffect(Math.max(1, range.from ?? 1), (from) =>
        backend.readPage(sessionId, from, to, PAGE).pipe(
          Effect.map((rows) => {
            const chunk = Chunk.fromIterable(rows.map((r) => rowToRaw(sessionId, r)))
            const last = rows[rows.length - 1]
            return [
              chunk,
              rows.length < PAGE || last === undefined ? Option.none() : Option.some(last.seq + 1)
            ] as const
          })
        )
      )
    }

    const decode = (raw: RawEnvelope): Effect.Effect<Envelope, EventDecodeError> => decodeEnvelope(raw)

    const read = (sessionId: SessionId, range?: SeqRange) => readRaw(sessionId, range).pipe(Stream.mapEffect(decode))

    const follow = (sessionId: SessionId, from = 1): Stream.Stream<Envelope, EventStoreError | EventDecodeError> =>
      Stream.unwrapScoped(
        Effect.gen(function* () {
          // subscribe first, then read: nothing committed in between can be missed
          const live = yield* bus.subscribe
          let next = Math.max(1, from)
          const pull: Effect.Effect<Chunk.Chunk<Envelope>, EventStoreError | EventDecodeError> = Effect.gen(
            function* () {
              while (true) {
                const rows = yield* backend.readPage(sessionId, next, Number.MAX_SAFE_INTEGER, PAGE)
                if (rows.length > 0) {
                  const out: Array<Envelope> = []
                  for (const row of rows) out.push(yield* decode(rowToRaw(sessionId, row)))
                  next = rows[rows.length - 1]!.seq + 1
                  return Chunk.unsafeFromArray(out)
                }
                // nothing stored past `next`: wait for a commit in this process, or poll for another one
                const woken = yield* Effect.raceFirst(
                  Effect.map(Queue.take(live), Option.some),
                  Effect.as(Effect.sleep(pollMs), Option.none())
                )
                const seen = Option.isSome(woken) ? [woken.value, ...(yield* Queue.takeAll(live))] : []
                const mine = seen.filter((e) => e.sessionId === sessionId && e.seq >= next)
                if (mine.length > 0 && mine[0]!.seq === next) {
                  const out: Array<Envelope> = []
                  for (const e of mine) {
                    if (e.seq !== next) break
                    out.push(e)
                    next++
                  }
                  return Chunk.unsafeFromArray(out)
                }
              }
            }
          )
          return Stream.repeatEffectChunk(pull)
        })
      )

    const query = (q: EventQuery): Stream.Stream<EnvelopeHeader, EventStoreError> => {
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

    const service: EventStoreService = {
      append,
      appendLater,
      flush,
      read,
      readRaw,
      follow,
      query,
      lastSeq: backend.lastSeq,
      sessions: (o) => backend.sessions(o ?? {}),
      session: backend.session,
      saveSnapshot: (snapshot) =>
        Effect.suspend(() => backend.saveSnapshot(snapshot, JSON.stringify(snapshot.state))).pipe(
          Effect.catchAllDefect((d) => Effect.fail(storeError("saveSnapshot", d)))
        ),
      loadSnapshot: (sessionId, o) =>
        backend.loadSnapshot(sessionId, o.version, o.atOrBelow ?? Number.MAX_SAFE_INTEGER).pipe(
          Effect.flatMap(
            Option.match({
              onNone: () => Effect.succeedNone,
              onSome: ({ json, ...rest }) =>
                Effect.try({
                  try: () => Option.some({ ...rest, state: JSON.parse(json) as unknown }),
                  catch: (e) => storeError("loadSnapshot", e, `snapshot ${sessionId}@${rest.seq} is not valid JSON`)
                })
            })
          )
        ),
      putBlob: (content) =>
        Effect.suspend(() => {
          const bytes = toBytes(content)
          const hash = hashContent(bytes)
          return Effect.as(backend.putBlob(hash, bytes), hash)
        }),
      getBlob: backend.getBlob,
      acquireLease: (sessionId, owner, ttlMs) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => backend.acquireLease(sessionId, owner, now, ttlMs)),
      releaseLease: backend.releaseLease,
      lease: backend.lease
    }
    return service
  })
