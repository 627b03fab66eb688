/**
 * The in-memory EventStore backend: for tests and for programs that embed logbook without
 * durable history. It behaves like the SQLite layer (same conformance suite), minus durability.
 */
import { Effect, Option, Stream } from "effect"
import type { SessionId } from "../domain/Ids.js"
import { LeaseHeld } from "./Errors.js"
import { eventHash, genesisHash } from "./internal/chain.js"
import type { Lease, SessionSummary } from "./internal/records.js"
import {
  type Backend,
  type ChainMark,
  type ChainRow,
  eventExistsError,
  fencedError,
  type PreparedEvent,
  RELEASED_LEASE,
  repeatedEventError,
  sessionExistsError,
  storeError,
  summarize
} from "./internal/storeService.js"

interface SnapshotRow {
  readonly seq: number
  readonly version: number
  readonly at: number
  readonly json: string
  readonly hash: string | null
}

/** The memory store's tables. */
interface Tables {
  readonly events: Map<string, Array<ChainRow>>
  readonly marks: Map<string, ChainMark>
  readonly index: Map<string, SessionSummary>
  readonly snapshots: Map<string, Array<SnapshotRow>>
  readonly blobs: Map<string, Uint8Array>
  readonly leases: Map<string, Lease>
  /** every row in commit order, for queries across sessions */
  readonly all: Array<ChainRow>
  /** event ids are unique across the store, as in SQLite */
  readonly ids: Set<string>
}

const rowsOf = (t: Tables, sessionId: string) => {
  let rows = t.events.get(sessionId)
  if (rows === undefined) {
    rows = []
    t.events.set(sessionId, rows)
  }
  return rows
}

/** Appends the requests' events, all or nothing (the caller holds the lock); each request's first seq. */
const commit =
  (t: Tables): Backend["commit"] =>
  (requests) =>
    Effect.suspend(() => {
      // all or nothing, like a transaction: check before writing anything
      const seen = new Set<string>()
      for (const request of requests) {
        if (request.owner !== undefined) {
          const holder = t.leases.get(request.sessionId)?.owner
          if (holder !== request.owner) return Effect.fail(fencedError(request.sessionId, request.owner, holder))
        }
        for (const e of request.events) {
          if (t.ids.has(e.id) || seen.has(e.id)) {
            return Effect.fail(storeError("append", undefined, `append: event id ${e.id} already exists`, true))
          }
          seen.add(e.id)
        }
      }
      for (const id of seen) t.ids.add(id)
      return Effect.succeed(
        requests.map((request) => {
          const rows = rowsOf(t, request.sessionId)
          const first = rows.length + 1
          for (const e of request.events) {
            const fields = {
              id: e.id,
              sessionId: request.sessionId,
              seq: rows.length + 1,
              type: e.type,
              at: e.at,
              parentId: e.parentId,
              v: e.v,
              json: e.json
            }
            const prevHash = rows.length === 0 ? genesisHash(request.sessionId) : rows[rows.length - 1]!.hash!
            const row: ChainRow = { ...fields, prevHash, hash: eventHash(prevHash, fields) }
            rows.push(row)
            t.all.push(row)
          }
          t.index.set(
            request.sessionId,
            summarize(t.index.get(request.sessionId), request.sessionId, first, request.events)
          )
          return first
        })
      )
    })

/** A whole session added under the lock: refused when the session or one of its event ids exists. */
const importSession =
  (t: Tables, lock: Effect.Semaphore, append: Backend["commit"]): Backend["importSession"] =>
  (sessionId, imported, importedBlobs, now) =>
    lock.withPermits(1)(
      Effect.suspend(() => {
        if (t.index.has(sessionId) || (t.events.get(sessionId)?.length ?? 0) > 0) {
          return Effect.fail(sessionExistsError(sessionId))
        }
        // the event ids are checked (all or nothing) by `commit` before anything is written
        const given = new Set<string>()
        for (let i = 0; i < imported.length; i++) {
          const id = imported[i]!.id
          if (given.has(id)) return Effect.fail(repeatedEventError(id, i + 1))
          given.add(id)
          const other = t.ids.has(id) ? t.all.find((row) => row.id === id) : undefined
          if (other !== undefined) return Effect.fail(eventExistsError(id, i + 1, other.sessionId))
        }
        return Effect.zipRight(
          append([{ sessionId, events: imported }]),
          Effect.sync(() => {
            for (const { hash, content } of importedBlobs) if (!t.blobs.has(hash)) t.blobs.set(hash, content.slice())
            t.marks.set(sessionId, { reason: "imported", throughSeq: imported.length, at: now })
          })
        )
      })
    )

/** An import stream collected, then imported as one session. */
const importStream =
  (importOne: Backend["importSession"]): Backend["importStream"] =>
  (items, now) =>
    Effect.flatMap(Stream.runCollect(items), (chunk) => {
      let sessionId: SessionId | undefined
      const imported: Array<PreparedEvent> = []
      const importedBlobs: Array<{ readonly hash: string; readonly content: Uint8Array }> = []
      for (const item of chunk) {
        if (item._tag === "session") sessionId = item.sessionId
        else if (item._tag === "blob") importedBlobs.push(item)
        else imported.push(...item.events)
      }
      if (sessionId === undefined) {
        return Effect.fail(storeError("importSession", undefined, "importSession: no session was given", true))
      }
      const id = sessionId
      return Effect.as(importOne(id, imported, importedBlobs, now), id)
    })

/** The headers of the events that match, ordered by time, session and seq, after the cursor `after`. */
const queryPage =
  (t: Tables): Backend["queryPage"] =>
  (query, after, limit) =>
    Effect.sync(() => {
      const types = query.types === undefined ? undefined : new Set(query.types)
      const matches = t.all.filter(
        (r) =>
          (types === undefined || types.has(r.type)) &&
          (query.sessionId === undefined || r.sessionId === query.sessionId) &&
          (query.since === undefined || r.at >= query.since) &&
          (query.until === undefined || r.at < query.until) &&
          (after === undefined ||
            r.at > after.at ||
            (r.at === after.at &&
              (r.sessionId > after.sessionId || (r.sessionId === after.sessionId && r.seq > after.seq))))
      )
      matches.sort((a, b) =>
        a.at !== b.at ? a.at - b.at : a.sessionId !== b.sessionId ? (a.sessionId < b.sessionId ? -1 : 1) : a.seq - b.seq
      )
      return matches.slice(0, limit).map(({ json: _json, prevHash: _p, hash: _h, ...header }) => header)
    })

/** Keeps the snapshot, and the newest `keep` of each version. */
const saveSnapshot =
  (t: Tables): Backend["saveSnapshot"] =>
  (snapshot, stored, keep) =>
    Effect.sync(() => {
      const list = (t.snapshots.get(snapshot.sessionId) ?? []).filter(
        (s) => !(s.seq === snapshot.seq && s.version === snapshot.version)
      )
      list.push({ seq: snapshot.seq, version: snapshot.version, at: snapshot.at, ...stored })
      list.sort((a, b) => a.version - b.version || b.seq - a.seq)
      const kept = list.filter((s, i) => list.findIndex((other) => other.version === s.version) + keep > i)
      t.snapshots.set(snapshot.sessionId, kept)
    })

/** The newest snapshot of a version at or below a seq. */
const loadSnapshot =
  (t: Tables): Backend["loadSnapshot"] =>
  (sessionId, version, atOrBelow) =>
    Effect.sync(() => {
      let best: SnapshotRow | undefined
      for (const s of t.snapshots.get(sessionId) ?? []) {
        if (s.version === version && s.seq <= atOrBelow && (best === undefined || s.seq > best.seq)) best = s
      }
      return best === undefined
        ? Option.none()
        : Option.some({
            sessionId: sessionId as SessionId,
            seq: best.seq,
            version: best.version,
            at: best.at,
            json: best.json,
            hash: best.hash
          })
    })

/** Takes or renews a session's lease: refused while another owner's has not expired (`renewOnly`: unless it is the owner's). */
const acquireLease =
  (t: Tables): Backend["acquireLease"] =>
  (sessionId, owner, now, ttlMs, renewOnly) =>
    Effect.suspend(() => {
      const current = t.leases.get(sessionId)
      if (renewOnly && current?.owner !== owner) {
        return Effect.fail(
          new LeaseHeld({ sessionId, owner: current?.owner ?? RELEASED_LEASE, expiresAt: current?.expiresAt ?? 0 })
        )
      }
      if (current !== undefined && current.owner !== owner && current.expiresAt > now) {
        return Effect.fail(new LeaseHeld({ sessionId, owner: current.owner, expiresAt: current.expiresAt }))
      }
      const lease: Lease = { sessionId, owner, expiresAt: now + ttlMs }
      t.leases.set(sessionId, lease)
      return Effect.succeed(lease)
    })

export const makeMemoryBackend: Effect.Effect<Backend> = Effect.sync(() => {
  const t: Tables = {
    events: new Map(),
    marks: new Map(),
    index: new Map(),
    snapshots: new Map(),
    blobs: new Map(),
    leases: new Map(),
    all: [],
    ids: new Set()
  }
  /** held by each commit and by each `consistent` read: no commit lands between a read's statements */
  const lock = Effect.unsafeMakeSemaphore(1)
  const append = commit(t)
  const importOne = importSession(t, lock, append)
  return {
    consistent: (effect) => lock.withPermits(1)(effect),
    importSession: importOne,
    importStream: importStream(importOne),
    commit: (requests) => lock.withPermits(1)(append(requests)),
    readPage: (sessionId, from, to, limit) =>
      Effect.sync(() =>
        (t.events.get(sessionId) ?? [])
          .slice(from - 1, Math.min(to, from - 1 + limit))
          .map(({ prevHash: _p, hash: _h, ...row }) => row)
      ),
    readChainPage: (sessionId, from, to, limit) =>
      Effect.sync(() => (t.events.get(sessionId) ?? []).slice(from - 1, Math.min(to, from - 1 + limit))),
    chainInfo: (sessionId) =>
      Effect.sync(() => {
        const rows = t.events.get(sessionId) ?? []
        return {
          counts: { count: rows.length, first: rows.length === 0 ? 0 : 1, last: rows.length },
          mark: Option.fromNullable(t.marks.get(sessionId))
        }
      }),
    // the memory log is written only through `commit`: its seqs never have a gap
    seqGaps: () => Effect.succeed([]),
    snapshotSeqs: (sessionId, version) =>
      Effect.sync(() =>
        (t.snapshots.get(sessionId) ?? [])
          .filter((s) => s.version === version)
          .map((s) => s.seq)
          .sort((a, b) => a - b)
      ),
    queryPage: queryPage(t),
    lastSeq: (sessionId) => Effect.sync(() => t.events.get(sessionId)?.length ?? 0),
    sessions: (options) =>
      Effect.sync(() =>
        Array.from(t.index.values())
          .filter((s) => (options.includeDeleted || !s.deleted) && (options.cwd === undefined || s.cwd === options.cwd))
          .sort((a, b) => b.updatedAt - a.updatedAt || (a.id < b.id ? 1 : -1))
          .slice(0, options.limit !== undefined && options.limit >= 0 ? options.limit : Number.MAX_SAFE_INTEGER)
      ),
    session: (sessionId) => Effect.sync(() => Option.fromNullable(t.index.get(sessionId))),
    sessionIds: Effect.sync(() => Array.from(t.index.keys()) as Array<SessionId>),
    saveSnapshot: saveSnapshot(t),
    loadSnapshot: loadSnapshot(t),
    putBlob: (hash, content) =>
      Effect.sync(() => {
        if (!t.blobs.has(hash)) t.blobs.set(hash, Uint8Array.from(content))
      }),
    getBlob: (hash) =>
      Effect.sync(() => Option.fromNullable(t.blobs.get(hash)).pipe(Option.map((b) => Uint8Array.from(b)))),
    acquireLease: acquireLease(t),
    releaseLease: (sessionId, owner) =>
      Effect.sync(() => {
        if (t.leases.get(sessionId)?.owner === owner) t.leases.delete(sessionId)
      }),
    lease: (sessionId) => Effect.sync(() => Option.fromNullable(t.leases.get(sessionId))),
    leases: Effect.sync(() => [...t.leases.values()])
  }
})
