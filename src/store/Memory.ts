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

export const makeMemoryBackend: Effect.Effect<Backend> = Effect.sync(() => {
  const events = new Map<string, Array<ChainRow>>()
  const marks = new Map<string, ChainMark>()
  const index = new Map<string, SessionSummary>()
  const snapshots = new Map<string, Array<SnapshotRow>>()
  const blobs = new Map<string, Uint8Array>()
  const leases = new Map<string, Lease>()
  /** every row in commit order, for queries across sessions */
  const all: Array<ChainRow> = []
  /** event ids are unique across the store, as in SQLite */
  const ids = new Set<string>()

  const rowsOf = (sessionId: string) => {
    let rows = events.get(sessionId)
    if (rows === undefined) {
      rows = []
      events.set(sessionId, rows)
    }
    return rows
  }

  /** held by each commit and by each `consistent` read: no commit lands between a read's statements */
  const lock = Effect.unsafeMakeSemaphore(1)

  const commit: Backend["commit"] = (requests) =>
    Effect.suspend(() => {
      // all or nothing, like a transaction: check before writing anything
      const seen = new Set<string>()
      for (const request of requests) {
        if (request.owner !== undefined) {
          const holder = leases.get(request.sessionId)?.owner
          if (holder !== request.owner) return Effect.fail(fencedError(request.sessionId, request.owner, holder))
        }
        for (const e of request.events) {
          if (ids.has(e.id) || seen.has(e.id)) {
            return Effect.fail(storeError("append", undefined, `append: event id ${e.id} already exists`, true))
          }
          seen.add(e.id)
        }
      }
      for (const id of seen) ids.add(id)
      return Effect.succeed(
        requests.map((request) => {
          const rows = rowsOf(request.sessionId)
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
            all.push(row)
          }
          index.set(
            request.sessionId,
            summarize(index.get(request.sessionId), request.sessionId, first, request.events)
          )
          return first
        })
      )
    })

  const backend: Backend = {
    consistent: (effect) => lock.withPermits(1)(effect),
    importSession: (sessionId, imported, importedBlobs, now) =>
      lock.withPermits(1)(
        Effect.suspend(() => {
          if (index.has(sessionId) || (events.get(sessionId)?.length ?? 0) > 0) {
            return Effect.fail(sessionExistsError(sessionId))
          }
          // the event ids are checked (all or nothing) by `commit` before anything is written
          const given = new Set<string>()
          for (let i = 0; i < imported.length; i++) {
            const id = imported[i]!.id
            if (given.has(id)) return Effect.fail(repeatedEventError(id, i + 1))
            given.add(id)
            const other = ids.has(id) ? all.find((row) => row.id === id) : undefined
            if (other !== undefined) return Effect.fail(eventExistsError(id, i + 1, other.sessionId))
          }
          return Effect.zipRight(
            commit([{ sessionId, events: imported }]),
            Effect.sync(() => {
              for (const { hash, content } of importedBlobs) if (!blobs.has(hash)) blobs.set(hash, content.slice())
              marks.set(sessionId, { reason: "imported", throughSeq: imported.length, at: now })
            })
          )
        })
      ),
    importStream: (items, now) =>
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
        return Effect.as(backend.importSession(id, imported, importedBlobs, now), id)
      }),
    commit: (requests) => lock.withPermits(1)(commit(requests)),
    readPage: (sessionId, from, to, limit) =>
      Effect.sync(() =>
        (events.get(sessionId) ?? [])
          .slice(from - 1, Math.min(to, from - 1 + limit))
          .map(({ prevHash: _p, hash: _h, ...row }) => row)
      ),
    readChainPage: (sessionId, from, to, limit) =>
      Effect.sync(() => (events.get(sessionId) ?? []).slice(from - 1, Math.min(to, from - 1 + limit))),
    chainInfo: (sessionId) =>
      Effect.sync(() => {
        const rows = events.get(sessionId) ?? []
        return {
          counts: { count: rows.length, first: rows.length === 0 ? 0 : 1, last: rows.length },
          mark: Option.fromNullable(marks.get(sessionId))
        }
      }),
    // the memory log is written only through `commit`: its seqs never have a gap
    seqGaps: () => Effect.succeed([]),
    snapshotSeqs: (sessionId, version) =>
      Effect.sync(() =>
        (snapshots.get(sessionId) ?? [])
          .filter((s) => s.version === version)
          .map((s) => s.seq)
          .sort((a, b) => a - b)
      ),
    queryPage: (query, after, limit) =>
      Effect.sync(() => {
        const types = query.types === undefined ? undefined : new Set(query.types)
        const matches = all.filter(
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
          a.at !== b.at
            ? a.at - b.at
            : a.sessionId !== b.sessionId
              ? a.sessionId < b.sessionId
                ? -1
                : 1
              : a.seq - b.seq
        )
        return matches.slice(0, limit).map(({ json: _json, prevHash: _p, hash: _h, ...header }) => header)
      }),
    lastSeq: (sessionId) => Effect.sync(() => events.get(sessionId)?.length ?? 0),
    sessions: (options) =>
      Effect.sync(() =>
        Array.from(index.values())
          .filter((s) => (options.includeDeleted || !s.deleted) && (options.cwd === undefined || s.cwd === options.cwd))
          .sort((a, b) => b.updatedAt - a.updatedAt || (a.id < b.id ? 1 : -1))
          .slice(0, options.limit !== undefined && options.limit >= 0 ? options.limit : Number.MAX_SAFE_INTEGER)
      ),
    session: (sessionId) => Effect.sync(() => Option.fromNullable(index.get(sessionId))),
    sessionIds: Effect.sync(() => Array.from(index.keys()) as Array<SessionId>),
    saveSnapshot: (snapshot, stored, keep) =>
      Effect.sync(() => {
        const list = (snapshots.get(snapshot.sessionId) ?? []).filter(
          (s) => !(s.seq === snapshot.seq && s.version === snapshot.version)
        )
        list.push({ seq: snapshot.seq, version: snapshot.version, at: snapshot.at, ...stored })
        list.sort((a, b) => a.version - b.version || b.seq - a.seq)
        // the newest `keep` of each version
        const kept = list.filter((s, i) => list.findIndex((t) => t.version === s.version) + keep > i)
        snapshots.set(snapshot.sessionId, kept)
      }),
    loadSnapshot: (sessionId, version, atOrBelow) =>
      Effect.sync(() => {
        let best: SnapshotRow | undefined
        for (const s of snapshots.get(sessionId) ?? []) {
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
      }),
    putBlob: (hash, content) =>
      Effect.sync(() => {
        if (!blobs.has(hash)) blobs.set(hash, Uint8Array.from(content))
      }),
    getBlob: (hash) =>
      Effect.sync(() => Option.fromNullable(blobs.get(hash)).pipe(Option.map((b) => Uint8Array.from(b)))),
    acquireLease: (sessionId, owner, now, ttlMs, renewOnly) =>
      Effect.suspend(() => {
        const current = leases.get(sessionId)
        if (renewOnly && current?.owner !== owner) {
          return Effect.fail(
            new LeaseHeld({ sessionId, owner: current?.owner ?? RELEASED_LEASE, expiresAt: current?.expiresAt ?? 0 })
          )
        }
        if (current !== undefined && current.owner !== owner && current.expiresAt > now) {
          return Effect.fail(new LeaseHeld({ sessionId, owner: current.owner, expiresAt: current.expiresAt }))
        }
        const lease: Lease = { sessionId, owner, expiresAt: now + ttlMs }
        leases.set(sessionId, lease)
        return Effect.succeed(lease)
      }),
    releaseLease: (sessionId, owner) =>
      Effect.sync(() => {
        if (leases.get(sessionId)?.owner === owner) leases.delete(sessionId)
      }),
    lease: (sessionId) => Effect.sync(() => Option.fromNullable(leases.get(sessionId))),
    leases: Effect.sync(() => [...leases.values()])
  }
  return backend
})
