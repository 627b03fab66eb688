/**
 * `follow` while this process appends: once it has caught up, the bus brings each commit and the
 * store is not read again for it (a read per commit was most of the CLI's follow cost while a
 * session runs); a gap in what the bus brings still sends it to the store.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Context, Deferred, Effect, Fiber, Layer, Option, Queue, Stream, TestClock } from "effect"
import * as Events from "../../src/domain/Events.js"
import { CallId, SessionId } from "../../src/domain/Ids.js"
import { EventBus } from "../../src/store/EventBus.js"
import { EventStore } from "../../src/store/EventStore.js"
import { makeService } from "../../src/store/internal/storeService.js"
import { makeMemoryBackend } from "../../src/store/Memory.js"
import { keepsPull, openPull } from "../../src/stream/internal/pull.js"

const sid = SessionId.make("s1")
const progress = (n: number) => Events.make("tool.progress", { callId: CallId.make("c1"), output: `line ${n}` })

type Backend = Effect.Effect.Success<typeof makeMemoryBackend>

/** A store over `backend` with a bus of its own (another process, when two share a backend). */
const storeOver = (backend: Backend, followPollMs?: number) =>
  Effect.map(
    Layer.build(
      Layer.scoped(EventStore, makeService(backend, { followPollMs })).pipe(Layer.provideMerge(EventBus.layer))
    ),
    (context) => Context.get(context, EventStore)
  )

/** A memory store whose backend counts the pages `follow` reads of `sid`. */
const counted = Effect.gen(function* () {
  const backend = yield* makeMemoryBackend
  const reads = { count: 0 }
  const countingBackend: Backend = {
    ...backend,
    readPage: (sessionId, from, to, limit) => {
      if (sessionId === sid) reads.count++
      return backend.readPage(sessionId, from, to, limit)
    }
  }
  return { store: yield* storeOver(countingBackend), backend: countingBackend, reads }
})

describe("follow", () => {
  it.scoped("reads the store once to catch up, then takes this process's commits from the bus", () =>
    Effect.gen(function* () {
      const { store, reads } = yield* counted
      yield* store.append(sid, [progress(1), progress(2)])
      const seen = yield* Queue.unbounded<number>()
      const fiber = yield* Effect.fork(
        store.follow(sid).pipe(
          Stream.tap((e) => Queue.offer(seen, e.seq)),
          Stream.take(22),
          Stream.runDrain
        )
      )
      // caught up: both stored events arrived through the first read
      expect([yield* Queue.take(seen), yield* Queue.take(seen)]).toEqual([1, 2])
      const before = reads.count
      for (let n = 3; n <= 22; n++) {
        yield* store.append(sid, [progress(n)])
        // each commit is seen before the next one is made: one bus delivery per commit
        expect(yield* Queue.take(seen)).toBe(n)
      }
      yield* Fiber.join(fiber)
      // at most the read that found nothing more after catching up, none for the 20 commits (the
      // follow before read the store again after almost every commit)
      expect(reads.count - before).toBeLessThanOrEqual(1)
    })
  )

  it.scoped("goes back to the store when the bus does not continue where it left off", () =>
    Effect.gen(function* () {
      const { store, backend } = yield* counted
      // another process on the same log: its commits are not on this process's bus
      const other = yield* storeOver(backend)
      yield* store.append(sid, [progress(1)])
      const first = yield* Deferred.make<void>()
      const fiber = yield* Effect.fork(
        store.follow(sid).pipe(
          Stream.tap((e) => (e.seq === 1 ? Deferred.succeed(first, undefined) : Effect.void)),
          Stream.take(4),
          Stream.runCollect
        )
      )
      yield* Deferred.await(first)
      yield* store.append(sid, [progress(2)])
      yield* other.append(sid, [progress(3)])
      // seq 4 on the bus after 2: the follower reads 3 and 4 from the store at once (the TestClock
      // never advances, so waiting for the poll instead would never end)
      yield* store.append(sid, [progress(4)])
      const all = yield* Fiber.join(fiber)
      expect(Array.from(all, (e) => [e.seq, (e.payload as { output: string }).output])).toEqual([
        [1, "line 1"],
        [2, "line 2"],
        [3, "line 3"],
        [4, "line 4"]
      ])
    })
  )

  it.scoped("finds another process's commit by the poll, once pollMs passed without a commit (TestClock)", () =>
    Effect.gen(function* () {
      const backend = yield* makeMemoryBackend
      const store = yield* storeOver(backend, 1_000)
      const other = yield* storeOver(backend)
      yield* store.append(sid, [progress(1)])
      const seen = yield* Queue.unbounded<number>()
      yield* Effect.fork(store.follow(sid).pipe(Stream.runForEach((e) => Queue.offer(seen, e.seq))))
      expect(yield* Queue.take(seen)).toBe(1)
      // this process's commit comes by the bus, at once, and moves the poll's deadline
      yield* TestClock.adjust(600)
      yield* store.append(sid, [progress(2)])
      expect(yield* Queue.take(seen)).toBe(2)
      // another process's commit is on no bus here: only the poll finds it
      yield* other.append(sid, [progress(3)])
      yield* TestClock.adjust(999)
      for (let i = 0; i < 20; i++) yield* Effect.yieldNow()
      expect(yield* Queue.size(seen)).toBe(0)
      yield* TestClock.adjust(1)
      expect(yield* Queue.take(seen)).toBe(3)
      // and again after the next quiet second
      yield* other.append(sid, [progress(4)])
      yield* TestClock.adjust(1_000)
      expect(yield* Queue.take(seen)).toBe(4)
    })
  )

  it.scoped("keeps its pull: a reader can take it without the Stream's channel, and gets the same envelopes", () =>
    Effect.gen(function* () {
      const { store } = yield* counted
      yield* store.append(sid, [progress(1), progress(2)])
      const follow = store.follow(sid)
      expect(keepsPull(follow)).toBe(true)
      expect(keepsPull(store.followRaw(sid))).toBe(true)
      const pulled = yield* Effect.scoped(
        Effect.gen(function* () {
          const pull = yield* openPull(follow)
          const first = yield* pull
          yield* store.append(sid, [progress(3)])
          const second = yield* pull
          return [...first, ...second]
        })
      )
      expect(pulled.map((e) => [e.seq, e.type])).toEqual([
        [1, "tool.progress"],
        [2, "tool.progress"],
        [3, "tool.progress"]
      ])
      expect(pulled.map((e) => e.payload)).toEqual([1, 2, 3].map((n) => progress(n).payload))
    })
  )

  it.scoped("an envelope that does not decode: the ones before it come, then the follow fails with it", () =>
    Effect.gen(function* () {
      const backend = yield* makeMemoryBackend
      const store = yield* storeOver(backend)
      yield* store.append(sid, [progress(1), progress(2)])
      // a row the memory backend holds with a payload its schema refuses, as a damaged file would
      const rows = yield* backend.readPage(sid, 1, 2, 10)
      const damaged = { ...rows[1]!, json: JSON.stringify({ callId: 5 }) }
      const broken: Backend = {
        ...backend,
        readPage: (sessionId, from, to, limit) =>
          Effect.map(backend.readPage(sessionId, from, to, limit), (page) =>
            page.map((row) => (row.seq === 2 ? damaged : row))
          )
      }
      // a session with no events gives no chunk at all (not an empty one)
      expect(Chunk.size(yield* Stream.runCollect(Stream.chunks(store.read(SessionId.make("none")))))).toBe(0)
      const reader = yield* storeOver(broken)
      for (const stream of [reader.follow(sid), reader.read(sid)]) {
        const seen: Array<number> = []
        const failure = yield* stream.pipe(
          Stream.runForEach((e) => Effect.sync(() => seen.push(e.seq))),
          Effect.flip
        )
        expect(seen).toEqual([1])
        expect(failure).toMatchObject({ _tag: "EventDecodeError", seq: 2 })
      }
      // through the pull too: the envelope before it, then the failure
      const pulled = yield* Effect.scoped(
        Effect.gen(function* () {
          const pull = yield* openPull(reader.follow(sid))
          return [yield* pull, yield* Effect.flip(pull)] as const
        })
      )
      expect(Chunk.toReadonlyArray(pulled[0]).map((e) => e.seq)).toEqual([1])
      expect(Option.getOrThrow(pulled[1])).toMatchObject({ _tag: "EventDecodeError", seq: 2 })
    })
  )
})
