/**
 * Session files (`store/SessionFile.ts`): export → import (into another SQLite database) → export is
 * byte for byte the same, for random valid sessions (`simulate`) whose events reference real blobs,
 * read back in random chunk sizes; and every kind of damage is refused with the line it is on,
 * with nothing written. The CLI's side, on sessions from real runs, is test/cli/export.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Chunk, Effect, Either, Exit, FastCheck, Option, Stream } from "effect"
import type { Event } from "../../src/domain/Events.js"
import { SessionId } from "../../src/domain/Ids.js"
import { EventStore } from "../../src/store/EventStore.js"
import { hashContent } from "../../src/store/internal/storeService.js"
import {
  blobReferences,
  exportSession,
  importSession,
  readSessionFile,
  type SessionFileError,
  type SessionFileLimits
} from "../../src/store/SessionFile.js"
import { choicesFromSeed, eventsArb, simulate } from "../support/arbitraries.js"
import { tempDb } from "../support/tmp.js"

const ID = SessionId.make("session-file-1")

/**
 * The simulated events with their made-up blob names (`blob-pv-0`, `b3` …) replaced by the hashes of
 * real contents, and a command record's `outputBlob` added to some tool results; the contents.
 */
const withRealBlobs = (events: ReadonlyArray<Event>): { events: Array<Event>; contents: Map<string, string> } => {
  const contents = new Map<string, string>()
  const real = (name: string) => {
    const content = `content of ${name}\n${"x".repeat(name.length * 7)}`
    const hash = hashContent(content)
    contents.set(hash, content)
    return hash
  }
  const out = events.map((e, i): Event => {
    switch (e.type) {
      case "prompt.recorded":
        return { ...e, payload: { ...e.payload, blob: real(e.payload.blob) } }
      case "file.changed": {
        const p = e.payload
        return {
          ...e,
          payload: {
            ...p,
            ...(p.beforeHash === undefined ? {} : { beforeHash: real(p.beforeHash) }),
            ...(p.afterHash === undefined ? {} : { afterHash: real(p.afterHash) })
          }
        }
      }
      case "tool.finished":
        return e.payload.metadata === undefined
          ? e
          : {
              ...e,
              payload: {
                ...e.payload,
                metadata: { ...(e.payload.metadata as object), outputBlob: real(`out${i % 5}`) }
              }
            }
      default:
        return e
    }
  })
  return { events: out, contents }
}

const sqlite = (file: string) => EventStore.layerSqlite({ filename: file })

/** The export of a session as one string. */
const exportText = (sessionId: SessionId) =>
  exportSession(sessionId).pipe(
    Stream.runCollect,
    Effect.map((chunk) => Chunk.join(chunk, ""))
  )

/** `text` as a byte stream cut into chunks of `size` bytes. */
const bytesOf = (text: string, size = 65536): Stream.Stream<Uint8Array> => {
  const bytes = Buffer.from(text)
  const chunks: Array<Uint8Array> = []
  for (let i = 0; i < bytes.length; i += size) chunks.push(bytes.subarray(i, i + size))
  return Stream.fromIterable(chunks)
}

const seedSession = (events: ReadonlyArray<Event>, contents: ReadonlyMap<string, string>) =>
  Effect.gen(function* () {
    const store = yield* EventStore
    for (const content of contents.values()) yield* store.putBlob(content)
    // in a few batches, as a kernel appends
    for (let i = 0; i < events.length; i += 7) yield* store.append(ID, events.slice(i, i + 7))
  })

describe("session files", () => {
  it("export → import into another database → export gives the same bytes (random sessions, random chunking)", async () => {
    await FastCheck.assert(
      FastCheck.asyncProperty(
        eventsArb({ maxLength: 100 }),
        FastCheck.integer({ min: 1, max: 5000 }),
        async (simulated, chunkSize) => {
          const { contents, events } = withRealBlobs(simulated)
          const a = tempDb()
          const b = tempDb()
          const first = await Effect.runPromise(
            Effect.zipRight(seedSession(events, contents), exportText(ID)).pipe(Effect.provide(sqlite(a)))
          )
          const [summary, second, rawB] = await Effect.runPromise(
            Effect.gen(function* () {
              const summary = yield* importSession(bytesOf(first, chunkSize))
              const store = yield* EventStore
              const raw = Chunk.toReadonlyArray(yield* Stream.runCollect(store.readRaw(ID)))
              return [summary, yield* exportText(ID), raw] as const
            }).pipe(Effect.provide(sqlite(b)))
          )
          expect(second).toBe(first)
          const [rawA, summaryA] = await Effect.runPromise(
            Effect.gen(function* () {
              const store = yield* EventStore
              return [
                Chunk.toReadonlyArray(yield* Stream.runCollect(store.readRaw(ID))),
                Option.getOrThrow(yield* store.session(ID))
              ] as const
            }).pipe(Effect.provide(sqlite(a)))
          )
          // the envelopes exactly as stored, and the same index row
          expect(rawB).toEqual(rawA)
          expect(summary).toEqual(summaryA)
          // the header's counts, and every referenced blob once
          const lines = first.trimEnd().split("\n")
          const header = JSON.parse(lines[0]!)
          const referenced = new Set(events.flatMap((e) => blobReferences(e)))
          expect(header).toEqual({
            format: "logbook-session",
            version: 1,
            sessionId: ID,
            events: events.length,
            blobs: referenced.size
          })
          expect(lines).toHaveLength(1 + events.length + referenced.size)
        }
      ),
      { numRuns: 25 }
    )
  })

  // -------------------------------------------------------------------------------------------
  // refusals

  /** A valid session file with blobs of every kind (a prompt, a file change, a command's output). */
  const validFile = async (): Promise<ReadonlyArray<string>> => {
    const { contents, events } = withRealBlobs(simulate(choicesFromSeed(7, 200)))
    const text = await Effect.runPromise(
      Effect.zipRight(seedSession(events, contents), exportText(ID)).pipe(Effect.provide(sqlite(tempDb())))
    )
    return text.trimEnd().split("\n")
  }

  const refusal = async (
    lines: ReadonlyArray<string>,
    limits?: Partial<SessionFileLimits>
  ): Promise<{ readonly error: SessionFileError; readonly db: string }> => {
    const db = tempDb()
    const exit = await Effect.runPromiseExit(
      importSession(bytesOf(lines.length === 0 ? "" : `${lines.join("\n")}\n`, 333), { limits }).pipe(
        Effect.provide(sqlite(db))
      )
    )
    if (!Exit.isFailure(exit)) throw new Error("the import went through")
    const failure = Cause.failureOption(exit.cause)
    // nothing was written: no session, no blob of the file
    const [sessions, blobs] = await Effect.runPromise(
      Effect.gen(function* () {
        const store = yield* EventStore
        const blobs: Array<boolean> = []
        for (const line of lines) {
          const hash = /^\{"blob":"([0-9a-f]{64})"/.exec(line)?.[1]
          if (hash !== undefined) blobs.push(Option.isSome(yield* store.getBlob(hash)))
        }
        return [yield* store.sessions({ includeDeleted: true }), blobs] as const
      }).pipe(Effect.provide(sqlite(db)))
    )
    expect(sessions).toEqual([])
    expect(blobs.every((stored) => !stored)).toBe(true)
    return { error: Option.getOrThrow(failure) as SessionFileError, db }
  }

  it("names the line of each kind of damage, and writes nothing", async () => {
    const lines = await validFile()
    const header = JSON.parse(lines[0]!) as { events: number; blobs: number }
    expect(header.blobs).toBeGreaterThan(0)
    const firstBlob = 1 + header.events
    const blob = JSON.parse(lines[firstBlob]!) as { blob: string; size: number; base64: string }
    const event = (i: number) => JSON.parse(lines[i]!) as Record<string, unknown>
    const replace = (i: number, line: string) => [...lines.slice(0, i), line, ...lines.slice(i + 1)]
    const cases: ReadonlyArray<readonly [ReadonlyArray<string>, number, RegExp]> = [
      [[], 0, /the file is empty/],
      [replace(0, '{"format":"something-else"}'), 1, /not the header of a logbook session file/],
      [replace(0, lines[0]!.replace('"version":1', '"version":9')), 1, /version 9, written by a newer logbook/],
      [replace(0, lines[0]!.replace(/"events":\d+/, '"events":-1')), 1, /the header is malformed/],
      [replace(2, "not json"), 3, /not JSON/],
      [replace(2, ""), 3, /an empty line/],
      [replace(2, JSON.stringify({ ...event(2), seq: 7 })), 3, /expected event seq 2, found seq 7/],
      [replace(2, JSON.stringify({ ...event(2), id: event(1).id })), 3, /which an earlier event has/],
      // the last event repeats the first one's id: found when it is written, long after the first
      [
        replace(header.events, JSON.stringify({ ...event(header.events), id: event(1).id })),
        header.events + 1,
        new RegExp(`event ${header.events} has the id ${String(event(1).id)}, which an earlier event has`)
      ],
      [replace(2, JSON.stringify({ ...event(2), sessionId: "other" })), 3, /belongs to session other, not/],
      [replace(2, JSON.stringify({ ...event(2), type: "no.such" })), 3, /unknown event type "no.such"/],
      [replace(2, JSON.stringify({ ...event(2), v: 2 })), 3, /payload version 2 is newer/],
      [replace(2, JSON.stringify({ ...event(2), extra: 1 })), 3, /fields an envelope does not have: extra/],
      [
        replace(1, JSON.stringify({ ...event(1), type: "session.titled", payload: { title: 3 } })),
        2,
        /malformed payload/
      ],
      // legal on its own, illegal where it is: a second session.created
      [
        replace(2, JSON.stringify({ ...event(1), id: event(2).id, seq: 2 })),
        3,
        /does not follow from the events before it/
      ],
      [replace(firstBlob, JSON.stringify({ ...blob, base64: `${blob.base64}!!` })), firstBlob + 1, /not valid base64/],
      [replace(firstBlob, JSON.stringify({ ...blob, size: blob.size + 1 })), firstBlob + 1, /but its line says/],
      [
        replace(firstBlob, JSON.stringify({ ...blob, base64: Buffer.alloc(blob.size, 65).toString("base64") })),
        firstBlob + 1,
        /does not match its bytes/
      ],
      [
        replace(firstBlob, JSON.stringify({ ...blob, blob: "f".repeat(64) })),
        firstBlob + 1,
        /is not referenced by any event/
      ],
      [
        [...lines.slice(0, firstBlob + 1), lines[firstBlob]!, ...lines.slice(firstBlob + 1)],
        firstBlob + 2,
        /appears twice|goes on/
      ],
      [[...lines, lines[1]!], lines.length + 1, /but the file goes on/],
      [lines.slice(0, 5), 6, /ends after 4 of the \d+ events/],
      [[...lines.slice(0, firstBlob), ...lines.slice(firstBlob + 1)], 0, /which the file does not hold/]
    ]
    for (const [content, line, message] of cases) {
      const { error } = await refusal(content)
      expect(error._tag).toBe("SessionFileError")
      expect(error.message).toMatch(message)
      if (line > 0) {
        expect(error.line).toBe(line)
        expect(error.message.startsWith(`line ${line}: `)).toBe(true)
      }
    }
  })

  it("refuses a line or a blob over the limits, and a file over its limit, with a sentence", async () => {
    const lines = await validFile()
    const header = JSON.parse(lines[0]!) as { events: number }
    const longest = Math.max(...lines.slice(1, 1 + header.events).map((l) => Buffer.byteLength(l)))
    const tooLong = await refusal(lines, { maxEventBytes: longest - 1 })
    expect(tooLong.error.message).toMatch(/^line \d+: the line holds \d+ bytes, more than the limit of \d+ bytes$/)
    const blob = JSON.parse(lines[1 + header.events]!) as { size: number }
    const bigBlob = await refusal(lines, { maxBlobBytes: blob.size - 1 })
    expect(bigBlob.error.message).toMatch(
      /holds \d+ bytes, more than the limit of \d+ bytes per blob|the line (holds|is longer)/
    )
    const bigFile = await refusal(lines, { maxFileBytes: 1000 })
    expect(bigFile.error.message).toBe("the file is larger than the limit of 1000 bytes for one import")
    // a line with no end, longer than any limit, is refused before it is held whole
    const endless = await refusal([`{"format":"logbook-session","x":"${"y".repeat(5000)}`], {
      maxEventBytes: 100,
      maxBlobBytes: 100
    })
    expect(endless.error.message).toMatch(/^line 1: the line (holds|is longer)/)
  })

  it("export refuses a blob over the limit, and a referenced blob the database does not hold", async () => {
    const missing = await Effect.runPromiseExit(
      Effect.gen(function* () {
        const store = yield* EventStore
        yield* store.append(ID, [
          { type: "session.created", payload: {} },
          { type: "prompt.recorded", payload: { promptVersion: "abc", blob: "0".repeat(64) } }
        ])
        return yield* exportText(ID)
      }).pipe(Effect.provide(sqlite(tempDb())))
    )
    expect(Exit.isFailure(missing)).toBe(true)
    expect(String(Exit.isFailure(missing) ? missing.cause : "")).toMatch(
      /the blob 0{64} that event 2 references is missing from the database/
    )
    const big = await Effect.runPromiseExit(
      Effect.gen(function* () {
        const store = yield* EventStore
        const hash = yield* store.putBlob("z".repeat(2000))
        yield* store.append(ID, [
          { type: "session.created", payload: {} },
          { type: "prompt.recorded", payload: { promptVersion: "abc", blob: hash } }
        ])
        return yield* exportSession(ID, { limits: { maxBlobBytes: 1000 } }).pipe(Stream.runDrain)
      }).pipe(Effect.provide(sqlite(tempDb())))
    )
    expect(String(Exit.isFailure(big) ? big.cause : "")).toMatch(
      /holds 2000 bytes, more than a session file's limit of 1000 bytes per blob/
    )
  })

  it("EventStore.importSession refuses a session id the database holds, in the memory layer too", async () => {
    for (const layer of [EventStore.layerMemory, sqlite(tempDb())]) {
      const result = await Effect.runPromise(
        Effect.gen(function* () {
          const store = yield* EventStore
          yield* store.append(ID, [{ type: "session.created", payload: { title: "there" } }])
          const file = yield* readSessionFile(bytesOf(yield* exportText(ID)))
          return yield* Effect.either(store.importSession(ID, { events: file.events, blobs: file.blobs }))
        }).pipe(Effect.provide(layer))
      )
      expect(Either.isLeft(result) && result.left.message).toBe(`session ${ID} already exists in this database`)
    }
  })

  it("EventStore.importSession refuses an event id the database holds (ids are unique across it), and writes nothing", async () => {
    for (const layer of [EventStore.layerMemory, sqlite(tempDb())]) {
      const [result, other, blob] = await Effect.runPromise(
        Effect.gen(function* () {
          const store = yield* EventStore
          const hash = yield* store.putBlob("a prompt")
          yield* store.append(ID, [
            { type: "session.created", payload: { title: "there" } },
            { type: "prompt.recorded", payload: { promptVersion: "p", blob: hash } }
          ])
          // the same events under another session id
          const text = (yield* exportText(ID)).replaceAll(ID, "session-copy")
          const file = yield* readSessionFile(bytesOf(text))
          const copy = SessionId.make("session-copy")
          const newBlob = new TextEncoder().encode("a blob only the copy has")
          const result = yield* Effect.either(
            store.importSession(copy, { events: file.events, blobs: [...file.blobs, newBlob] })
          )
          return [result, yield* store.session(copy), yield* store.getBlob(hashContent(newBlob))] as const
        }).pipe(Effect.provide(layer))
      )
      expect(Either.isLeft(result) && result.left.message).toMatch(
        new RegExp(`^event 1 has the id \\S+, which this database already holds \\(in session ${ID}\\)$`)
      )
      expect(Option.isNone(other)).toBe(true)
      expect(Option.isNone(blob)).toBe(true)
    }
  })
})
