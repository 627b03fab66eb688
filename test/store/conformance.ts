/**
 * The EventStore conformance suite: every layer (memory, SQLite, later Postgres) must pass it.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Deferred, Effect, Either, Fiber, type Layer, Option, Queue, Stream, TestClock } from "effect"
import * as Events from "../../src/domain/Events.js"
import { CallId, MessageId, SessionId, TurnId } from "../../src/domain/Ids.js"
import { EventBus } from "../../src/store/EventBus.js"
import { EventStore } from "../../src/store/EventStore.js"

const sid = (s: string) => SessionId.make(s)
const created = (title = "a session") => Events.make("session.created", { title, cwd: "/work" })
const userMsg = (text: string) =>
  Events.make("user.message", { messageId: MessageId.make(`m-${text}`), text, mode: "prompt" })
const progress = (n: number) => Events.make("tool.progress", { callId: CallId.make("c1"), output: `line ${n}` })

const collect = <A, E, R>(stream: Stream.Stream<A, E, R>) => Effect.map(Stream.runCollect(stream), Chunk.toArray)

export const conformance = (name: string, makeLayer: () => Layer.Layer<EventStore | EventBus, unknown>) =>
  describe(`EventStore conformance: ${name}`, () => {
    const run = <A, E>(effect: Effect.Effect<A, E, EventStore | EventBus>) =>
      Effect.provide(effect, makeLayer()) as Effect.Effect<A, E>

    it.effect("append assigns gapless seqs and returns the committed envelopes", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          yield* TestClock.setTime(1_000)
          const first = yield* store.append(sid("s1"), [created(), userMsg("hello")])
          const second = yield* store.append(sid("s1"), [userMsg("again")])
          expect(first.map((e) => e.seq)).toEqual([1, 2])
          expect(second.map((e) => e.seq)).toEqual([3])
          expect(first[0]).toMatchObject({ sessionId: "s1", type: "session.created", at: 1_000, parentId: null, v: 1 })
          expect(new Set([...first, ...second].map((e) => e.id)).size).toBe(3)
          expect(yield* store.lastSeq(sid("s1"))).toBe(3)
          expect(yield* store.lastSeq(sid("nobody"))).toBe(0)
          expect(yield* store.append(sid("s1"), [])).toEqual([])
          const stored = yield* collect(store.read(sid("s1")))
          expect(stored).toEqual([...first, ...second])
        })
      )
    )

    it.effect("keeps the caller's id, parent and time, and sessions are independent", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          const [a] = yield* store.append(sid("s1"), [created()])
          const [b] = yield* store.append(sid("s2"), [{ ...userMsg("x"), parentId: a!.id, at: 42 }])
          expect(b).toMatchObject({ seq: 1, sessionId: "s2", parentId: a!.id, at: 42 })
          const [c] = yield* store.append(sid("s1"), [
            { ...userMsg("y"), id: Events.EnvelopeHeader.fields.id.make("fixed-id") }
          ])
          expect(c).toMatchObject({ seq: 2, id: "fixed-id" })
        })
      )
    )

    it.effect("read honours inclusive from/to bounds and pages through long sessions", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          yield* store.append(
            sid("s1"),
            Array.from({ length: 2_500 }, (_, i) => progress(i))
          )
          const middle = yield* collect(store.read(sid("s1"), { from: 10, to: 12 }))
          expect(middle.map((e) => e.seq)).toEqual([10, 11, 12])
          const all = yield* collect(store.read(sid("s1")))
          expect(all.length).toBe(2_500)
          expect(all.every((e, i) => e.seq === i + 1)).toBe(true)
          expect((yield* collect(store.read(sid("s1"), { from: 2_501 }))).length).toBe(0)
          const raw = yield* collect(store.readRaw(sid("s1"), { from: 5, to: 5 }))
          expect(raw[0]!.payload).toEqual({ callId: "c1", output: "line 4" })
        })
      )
    )

    it.effect("rejects an invalid payload without appending anything", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          yield* store.append(sid("s1"), [created()])
          const bad = { type: "user.message", payload: { text: 3 } } as unknown as Events.NewEvent
          const result = yield* Effect.either(store.append(sid("s1"), [userMsg("ok"), bad]))
          expect(Either.isLeft(result)).toBe(true)
          if (Either.isLeft(result)) expect(result.left.message).toContain("user.message")
          expect(yield* store.lastSeq(sid("s1"))).toBe(1)
        })
      )
    )

    it.effect("many fibers appending to one session produce a gapless seq with nothing lost", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          yield* Effect.forEach(
            Array.from({ length: 40 }, (_, f) => f),
            (f) =>
              Effect.forEach(
                Array.from({ length: 10 }, (_, i) => i),
                (i) =>
                  i % 2 === 0
                    ? store.append(sid("s1"), [progress(f * 100 + i)])
                    : store.appendLater(sid("s1"), [progress(f * 100 + i)]),
                { discard: true }
              ),
            { concurrency: "unbounded", discard: true }
          )
          yield* store.flush
          const all = yield* collect(store.read(sid("s1")))
          expect(all.map((e) => e.seq)).toEqual(Array.from({ length: 400 }, (_, i) => i + 1))
          const outputs = new Set(all.map((e) => (e.payload as { output: string }).output))
          expect(outputs.size).toBe(400)
          // each fiber's own events keep their order
          for (let f = 0; f < 40; f++) {
            const mine = all
              .map((e) => Number((e.payload as { output: string }).output.slice(5)))
              .filter((n) => Math.floor(n / 100) === f)
            expect(mine).toEqual([...mine].sort((a, b) => a - b))
          }
        })
      )
    )

    it.effect("a request the database refuses fails only its own caller; the rest of the group commit is written", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          const [first] = yield* store.append(sid("s1"), [created()])
          // queued together: s3's deltas, a request reusing an existing id, another session's append
          yield* store.appendLater(sid("s3"), [progress(1), progress(2)])
          const clash = yield* Effect.fork(Effect.either(store.append(sid("s2"), [{ ...userMsg("x"), id: first!.id }])))
          const fine = yield* Effect.fork(Effect.either(store.append(sid("s5"), [created("five")])))
          const clashed = yield* Fiber.join(clash)
          const succeeded = yield* Fiber.join(fine)
          expect(Either.isLeft(clashed)).toBe(true)
          expect(Either.isRight(succeeded)).toBe(true)
          yield* store.flush
          expect(yield* store.lastSeq(sid("s2"))).toBe(0)
          expect(yield* store.lastSeq(sid("s3"))).toBe(2)
          expect(yield* store.lastSeq(sid("s5"))).toBe(1)
        })
      )
    )

    it.effect("a lost appendLater is reported to that session's next append and to flush, not to others", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          const [first] = yield* store.append(sid("s1"), [created()])
          // refused by the database (the id exists), then a later request of the same session
          yield* store.appendLater(sid("s2"), [{ ...progress(1), id: first!.id }])
          yield* store.appendLater(sid("s2"), [progress(2)])
          // another session is not affected
          const other = yield* Effect.either(store.append(sid("s3"), [created("three")]))
          expect(Either.isRight(other)).toBe(true)
          // nothing of s2 is written past the refused request
          expect(yield* store.lastSeq(sid("s2"))).toBe(0)
          const next = yield* Effect.either(store.append(sid("s2"), [progress(3)]))
          // the refused request's error: the id already exists
          expect(Either.isLeft(next) && next.left.message).toMatch(
            /already exists|UNIQUE constraint failed: events\.id/
          )
          // reported once: the session can go on afterwards
          expect((yield* store.append(sid("s2"), [progress(4)]))[0]!.seq).toBe(1)
          // flush reports a loss nobody asked about yet
          yield* store.appendLater(sid("s4"), [{ ...progress(5), id: first!.id }])
          const flushed = yield* Effect.either(store.flush)
          expect(Either.isLeft(flushed)).toBe(true)
          expect(Either.isRight(yield* Effect.either(store.flush))).toBe(true)
        })
      )
    )

    it.effect(
      "refuses what cannot be stored faithfully: non-finite numbers, fractional times, BigInts, repeated ids",
      () =>
        run(
          Effect.gen(function* () {
            const store = yield* EventStore
            const s = sid("s1")
            const attempts: ReadonlyArray<Events.NewEvent> = [
              Events.make("model.retry", { attempt: 1, delayMs: Number.POSITIVE_INFINITY, nextAt: 0, message: "x" }),
              Events.make("model.retry", { attempt: 1, delayMs: 1, nextAt: Number.NaN, message: "x" }),
              { ...created(), at: Number.NaN },
              { ...created(), at: 1.5 },
              Events.make("tool.invoked", {
                messageId: MessageId.make("m"),
                callId: CallId.make("c"),
                tool: "bash",
                input: { n: 10n }
              })
            ]
            for (const event of attempts) {
              const result = yield* Effect.either(store.append(s, [event]))
              expect(Either.isLeft(result) && result.left._tag).toBe("EventStoreError")
            }
            const id = Events.EnvelopeHeader.fields.id.make("same")
            const twice = yield* Effect.either(
              store.append(s, [
                { ...created(), id },
                { ...userMsg("a"), id }
              ])
            )
            expect(Either.isLeft(twice)).toBe(true)
            expect(yield* store.lastSeq(s)).toBe(0)
            // the log stays readable
            yield* store.append(s, [created()])
            expect((yield* collect(store.read(s))).length).toBe(1)
          })
        )
    )

    it.effect("returned and published envelopes carry the payload as stored, not the caller's object", () =>
      run(
        Effect.scoped(
          Effect.gen(function* () {
            const store = yield* EventStore
            const bus = yield* EventBus
            const sub = yield* bus.subscribe
            const payload = { messageId: MessageId.make("m1"), text: "hello", mode: "prompt" as const, apiKey: "sk-x" }
            const [returned] = yield* store.append(sid("s1"), [{ type: "user.message", payload }])
            payload.text = "changed afterwards"
            const [published] = Chunk.toArray(yield* Queue.takeAll(sub))
            const [stored] = yield* collect(store.read(sid("s1")))
            expect(returned!.payload).toEqual({ messageId: "m1", text: "hello", mode: "prompt" })
            expect(published).toEqual(returned)
            expect(stored).toEqual(returned)
          })
        )
      )
    )

    it.effect("appendLater keeps order with later appends of the same fiber", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          yield* store.appendLater(sid("s1"), [progress(1), progress(2)])
          const [third] = yield* store.append(sid("s1"), [progress(3)])
          expect(third!.seq).toBe(3)
          const all = yield* collect(store.read(sid("s1")))
          expect(all.map((e) => (e.payload as { output: string }).output)).toEqual(["line 1", "line 2", "line 3"])
        })
      )
    )

    it.effect("publishes committed envelopes on the EventBus, in commit order", () =>
      run(
        Effect.scoped(
          Effect.gen(function* () {
            const store = yield* EventStore
            const bus = yield* EventBus
            const sub = yield* bus.subscribe
            const appended = yield* store.append(sid("s1"), [created(), userMsg("a")])
            yield* store.appendLater(sid("s2"), [created("other")])
            yield* store.flush
            const seen = Chunk.toArray(yield* Queue.takeAll(sub))
            expect(seen.slice(0, 2)).toEqual(appended)
            expect(seen.map((e) => `${e.sessionId}:${e.seq}`)).toEqual(["s1:1", "s1:2", "s2:1"])
            // a rejected append publishes nothing
            yield* Effect.either(store.append(sid("s1"), [{ type: "nope", payload: {} } as unknown as Events.NewEvent]))
            expect(Chunk.size(yield* Queue.takeAll(sub))).toBe(0)
          })
        )
      )
    )

    it.effect("the bus counts its open subscriptions (publishers skip building envelopes for nobody)", () =>
      run(
        Effect.gen(function* () {
          const bus = yield* EventBus
          expect(yield* bus.subscribers).toBe(0)
          const seen = yield* Effect.scoped(
            Effect.gen(function* () {
              const sub = yield* bus.subscribe
              expect(yield* bus.subscribers).toBe(1)
              const store = yield* EventStore
              yield* store.appendLater(sid("s1"), [progress(1)])
              yield* store.flush
              return Chunk.toArray(yield* Queue.takeAll(sub))
            })
          )
          expect(seen.map((e) => e.seq)).toEqual([1])
          expect(yield* bus.subscribers).toBe(0)
        })
      )
    )

    it.effect("follow gives stored events then live ones with no gap and no duplicate", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          yield* store.append(
            sid("s1"),
            Array.from({ length: 5 }, (_, i) => progress(i + 1))
          )
          const fiber = yield* Effect.fork(collect(Stream.take(store.follow(sid("s1"), 3), 13)))
          // appended while the follower starts: each must appear exactly once
          for (let i = 6; i <= 15; i++) {
            if (i % 3 === 0) yield* store.appendLater(sid("s1"), [progress(i)])
            else yield* store.append(sid("s1"), [progress(i)])
            yield* store.append(sid("other"), [progress(i)])
          }
          yield* store.flush
          const seen = yield* Fiber.join(fiber)
          expect(seen.map((e) => e.seq)).toEqual(Array.from({ length: 13 }, (_, i) => i + 3))
          expect(seen.every((e) => e.sessionId === "s1")).toBe(true)
        })
      )
    )

    it.effect("follow delivers live events through the bus once it has caught up (no polling under TestClock)", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          yield* store.append(sid("s1"), [progress(1), progress(2)])
          const caughtUp = yield* Deferred.make<void>()
          const fiber = yield* Effect.fork(
            collect(
              store.follow(sid("s1")).pipe(
                Stream.tap((e) => (e.seq === 2 ? Deferred.succeed(caughtUp, undefined) : Effect.void)),
                Stream.take(6)
              )
            )
          )
          yield* Deferred.await(caughtUp)
          // the follower now waits; the TestClock never advances, so only the bus can wake it
          yield* store.append(sid("s1"), [progress(3)])
          yield* store.appendLater(sid("s1"), [progress(4), progress(5)])
          yield* store.append(sid("other"), [progress(0)])
          yield* store.append(sid("s1"), [progress(6)])
          const seen = yield* Fiber.join(fiber)
          expect(seen.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6])
        })
      )
    )

    it.effect("followRaw gives the payloads as stored", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          yield* store.append(sid("s1"), [progress(1)])
          const [first] = yield* collect(Stream.take(store.followRaw(sid("s1")), 1))
          expect(first!.payload).toEqual({ callId: "c1", output: "line 1" })
        })
      )
    )

    it.effect("follow of an empty session waits for the first event", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          const fiber = yield* Effect.fork(collect(Stream.take(store.follow(sid("new")), 2)))
          yield* Effect.yieldNow()
          yield* store.append(sid("new"), [created(), userMsg("hi")])
          const seen = yield* Fiber.join(fiber)
          expect(seen.map((e) => e.type)).toEqual(["session.created", "user.message"])
        })
      )
    )

    it.effect("query filters by type, session and time across sessions, in time order, with paging", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          yield* store.append(sid("b"), [
            { ...created(), at: 10 },
            { ...userMsg("1"), at: 20 }
          ])
          yield* store.append(sid("a"), [
            { ...created(), at: 10 },
            { ...userMsg("2"), at: 30 }
          ])
          yield* store.append(
            sid("c"),
            Array.from({ length: 1_500 }, (_, i) => ({ ...progress(i), at: 100 + i }))
          )
          const createdRows = yield* collect(store.query({ types: ["session.created"] }))
          expect(createdRows.map((r) => r.sessionId)).toEqual(["a", "b"])
          expect(createdRows[0]).not.toHaveProperty("payload")
          const msgs = yield* collect(store.query({ types: ["user.message", "session.created"], since: 15, until: 30 }))
          expect(msgs.map((r) => `${r.sessionId}:${r.seq}`)).toEqual(["b:2"])
          const onlyA = yield* collect(store.query({ sessionId: sid("a") }))
          expect(onlyA.map((r) => r.seq)).toEqual([1, 2])
          const progressRows = yield* collect(store.query({ types: ["tool.progress"] }))
          expect(progressRows.length).toBe(1_500)
          expect(progressRows.every((r, i) => r.seq === i + 1)).toBe(true)
          const limited = yield* collect(store.query({ types: ["tool.progress"], limit: 1_200 }))
          expect(limited.length).toBe(1_200)
        })
      )
    )

    it.effect("keeps the session index up to date", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          yield* store.append(sid("s1"), [{ ...created("first"), at: 100 }])
          yield* store.append(sid("s2"), [{ ...created("second"), at: 200 }])
          yield* store.append(sid("s1"), [
            { ...Events.make("session.titled", { title: "renamed" }), at: 300 },
            { ...Events.make("session.status", { status: { _tag: "busy" } }), at: 301 }
          ])
          const list = yield* store.sessions()
          expect(list.map((s) => s.id)).toEqual(["s1", "s2"])
          expect(list[0]).toEqual({
            id: "s1",
            title: "renamed",
            cwd: "/work",
            createdAt: 100,
            updatedAt: 301,
            lastSeq: 3,
            status: "busy",
            deleted: false,
            model: null,
            turnOpen: false,
            lastTurn: null,
            cost: 0,
            costKnown: true
          })
          yield* store.append(sid("s2"), [{ ...Events.make("session.deleted", {}), at: 400 }])
          expect((yield* store.sessions()).map((s) => s.id)).toEqual(["s1"])
          expect((yield* store.sessions({ includeDeleted: true })).map((s) => s.id)).toEqual(["s2", "s1"])
          expect((yield* store.sessions({ limit: 1, includeDeleted: true })).length).toBe(1)
          expect((yield* store.sessions({ limit: -1, includeDeleted: true })).length).toBe(2)
          expect((yield* store.sessions({ cwd: "/elsewhere" })).length).toBe(0)
          expect(Option.isNone(yield* store.session(sid("nobody")))).toBe(true)
          expect(Option.getOrThrow(yield* store.session(sid("s2"))).deleted).toBe(true)
        })
      )
    )

    it.effect("the index keeps the model, whether a turn is open, how the last one ended and the cost", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          const s = sid("s1")
          const m1 = MessageId.make("a1")
          const m2 = MessageId.make("a2")
          const usage = (cost: number, costKnown?: boolean) => ({
            input: 10,
            output: 1,
            reasoning: 0,
            cacheRead: 0,
            cacheWrite: 0,
            cost,
            ...(costKnown === undefined ? {} : { costKnown })
          })
          const summary = () => Effect.map(store.session(s), Option.getOrThrow)
          yield* store.append(s, [Events.make("session.created", { title: "t", model: "p/first" })])
          expect(yield* summary()).toMatchObject({ model: "p/first", turnOpen: false, lastTurn: null, cost: 0 })
          yield* store.append(s, [
            Events.make("turn.started", { turnId: TurnId.make("t1"), messageIds: [] }),
            Events.make("assistant.started", { messageId: m1, model: "p/second" }),
            Events.make("step.started", { messageId: m1, step: 0 }),
            Events.make("step.finished", { messageId: m1, step: 0, finishReason: "stop", usage: usage(0.1) })
          ])
          expect(yield* summary()).toMatchObject({ model: "p/second", turnOpen: true, lastTurn: null, cost: 0.1 })
          yield* store.append(s, [Events.make("turn.finished", { turnId: TurnId.make("t1"), reason: "max-steps" })])
          expect(yield* summary()).toMatchObject({
            turnOpen: false,
            lastTurn: { reason: "max-steps", interrupted: false }
          })
          // an assistant message that names no model keeps the previous one; an unpriced step makes the cost a lower bound
          yield* store.append(s, [
            Events.make("turn.started", { turnId: TurnId.make("t2"), messageIds: [] }),
            Events.make("assistant.started", { messageId: m2 }),
            Events.make("step.started", { messageId: m2, step: 0 }),
            Events.make("step.finished", { messageId: m2, step: 0, finishReason: "stop", usage: usage(0.2, false) }),
            Events.make("compaction.done", { summary: "…", usage: usage(0.05) }),
            Events.make("turn.interrupted", { turnId: TurnId.make("t2"), reason: "user" })
          ])
          const last = yield* summary()
          expect(last).toMatchObject({
            model: "p/second",
            turnOpen: false,
            lastTurn: { reason: "user", interrupted: true },
            costKnown: false
          })
          // the same sum, in the same order, as the projection's totals
          expect(last.cost).toBe(0.1 + 0.2 + 0.05)
          expect(last.lastSeq).toBe(12)
          expect((yield* store.sessionIds).slice().sort()).toEqual(["s1"])
        })
      )
    )

    it.effect("sessionIds lists every session of the index, deleted ones too", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          expect(yield* store.sessionIds).toEqual([])
          yield* store.append(sid("b"), [created()])
          yield* store.append(sid("a"), [created(), Events.make("session.deleted", {})])
          expect((yield* store.sessionIds).slice().sort()).toEqual(["a", "b"])
        })
      )
    )

    it.effect("snapshots: newest at or below a seq, per format version", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          const s = sid("s1")
          yield* store.saveSnapshot({ sessionId: s, seq: 10, version: 1, at: 1, state: { n: 10 } })
          yield* store.saveSnapshot({ sessionId: s, seq: 20, version: 1, at: 2, state: { n: 20 } })
          yield* store.saveSnapshot({ sessionId: s, seq: 30, version: 2, at: 3, state: { n: 30 } })
          const newest = yield* store.loadSnapshot(s, { version: 1 })
          expect(Option.getOrThrow(newest)).toEqual({
            sessionId: s,
            seq: 20,
            version: 1,
            at: 2,
            state: { n: 20 },
            intact: true
          })
          expect(Option.getOrThrow(yield* store.loadSnapshot(s, { version: 1, atOrBelow: 19 })).seq).toBe(10)
          expect(Option.isNone(yield* store.loadSnapshot(s, { version: 1, atOrBelow: 9 }))).toBe(true)
          expect(Option.getOrThrow(yield* store.loadSnapshot(s, { version: 2 })).state).toEqual({ n: 30 })
          expect(Option.isNone(yield* store.loadSnapshot(sid("other"), { version: 1 }))).toBe(true)
          // saving the same seq again replaces it
          yield* store.saveSnapshot({ sessionId: s, seq: 20, version: 1, at: 5, state: { n: 21 } })
          expect(Option.getOrThrow(yield* store.loadSnapshot(s, { version: 1 })).state).toEqual({ n: 21 })
          // only the newest SNAPSHOTS_KEPT of a version are kept
          for (const seq of [40, 50, 60]) {
            yield* store.saveSnapshot({ sessionId: s, seq, version: 1, at: seq, state: { n: seq } })
          }
          expect(Option.isNone(yield* store.loadSnapshot(s, { version: 1, atOrBelow: 39 }))).toBe(true)
          expect(Option.getOrThrow(yield* store.loadSnapshot(s, { version: 1, atOrBelow: 45 })).seq).toBe(40)
          // another version's snapshots are not pruned by these
          expect(Option.getOrThrow(yield* store.loadSnapshot(s, { version: 2 })).seq).toBe(30)
        })
      )
    )

    it.effect("blobs are content-addressed by SHA-256", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          const hash = yield* store.putBlob("hello\n")
          expect(hash).toBe("5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03")
          expect(yield* store.putBlob(new TextEncoder().encode("hello\n"))).toBe(hash)
          const bytes = Option.getOrThrow(yield* store.getBlob(hash))
          expect(new TextDecoder().decode(bytes)).toBe("hello\n")
          const binary = Uint8Array.from([0, 255, 1, 254])
          const binHash = yield* store.putBlob(binary)
          expect(Array.from(Option.getOrThrow(yield* store.getBlob(binHash)))).toEqual([0, 255, 1, 254])
          expect(Option.isNone(yield* store.getBlob("0".repeat(64)))).toBe(true)
        })
      )
    )

    it.effect("an append fenced by a lease owner is written only while that owner holds the lease", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          const s = sid("fenced")
          const other = sid("other")
          yield* TestClock.setTime(1_000)
          yield* store.append(s, [created()])
          yield* store.append(other, [created()])
          // no lease yet: a fenced append is refused, an unfenced one is not
          const none = yield* Effect.flip(store.append(s, [progress(1)], { owner: "proc-a" }))
          expect(none.reason).toBe("fenced")
          expect(none.isRefusal).toBe(true)
          expect(none.message).toBe(
            `append: session ${s} is no longer driven by this process (proc-a): its lease was released`
          )
          yield* store.acquireLease(s, "proc-a", 1_000)
          expect((yield* store.append(s, [progress(2)], { owner: "proc-a" })).map((e) => e.seq)).toEqual([2])
          // proc-a stalls past its ttl; proc-b takes the session over
          yield* TestClock.adjust(1_000)
          yield* store.acquireLease(s, "proc-b", 1_000)
          const lost = yield* Effect.flip(store.append(s, [progress(3), progress(4)], { owner: "proc-a" }))
          expect(lost.message).toContain("its lease is held by proc-b")
          expect(lost).toMatchObject({ reason: "fenced" })
          // …and the same for events handed over without waiting: not written, and not reported to the
          // session's next append or flush either (that may be the new driver's, which did nothing wrong)
          yield* store.appendLater(s, [progress(5)], { owner: "proc-a" })
          yield* store.flush
          // nothing of proc-a's was written after it lost the lease; proc-b and other sessions go on
          expect((yield* store.append(s, [progress(6)], { owner: "proc-b" })).map((e) => e.seq)).toEqual([3])
          expect((yield* store.append(other, [progress(7)])).map((e) => e.seq)).toEqual([2])
          const outputs = (yield* collect(store.read(s))).map((e) => (e.payload as { output?: string }).output)
          expect(outputs).toEqual([undefined, "line 2", "line 6"])
        })
      )
    )

    it.effect("renewOnly renews the owner's lease (even expired), never one taken over or released meanwhile", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          const s = sid("renew")
          yield* TestClock.setTime(1_000)
          yield* store.acquireLease(s, "proc-a", 1_000)
          // expired, but nobody took it: still proc-a's to renew
          yield* TestClock.adjust(5_000)
          expect((yield* store.acquireLease(s, "proc-a", 1_000, { renewOnly: true })).expiresAt).toBe(7_000)
          // taken over: renewal fails, naming the holder, and changes nothing
          yield* TestClock.adjust(1_000)
          yield* store.acquireLease(s, "proc-b", 1_000)
          const taken = yield* Effect.flip(store.acquireLease(s, "proc-a", 1_000, { renewOnly: true }))
          expect(taken).toMatchObject({ _tag: "LeaseHeld", owner: "proc-b" })
          // taken and released: renewal fails too, and does not take it back
          yield* store.releaseLease(s, "proc-b")
          const released = yield* Effect.flip(store.acquireLease(s, "proc-a", 1_000, { renewOnly: true }))
          expect(released).toMatchObject({ _tag: "LeaseHeld", owner: "nobody (the lease was released)" })
          expect(Option.isNone(yield* store.lease(s))).toBe(true)
        })
      )
    )

    it.effect("leases: every lease held, live or expired, until it is released", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          const [a, b] = [sid("all-a"), sid("all-b")]
          yield* TestClock.setTime(1_000)
          const before = (yield* store.leases).length
          yield* store.acquireLease(a, "proc-a", 1_000)
          yield* store.acquireLease(b, "proc-b", 1_000)
          // expired leases stay listed: a process that died released nothing
          yield* TestClock.adjust(5_000)
          const listed = (yield* store.leases).filter((l) => l.sessionId === a || l.sessionId === b)
          expect([...listed].sort((x, y) => x.owner.localeCompare(y.owner))).toEqual([
            { sessionId: a, owner: "proc-a", expiresAt: 2_000 },
            { sessionId: b, owner: "proc-b", expiresAt: 2_000 }
          ])
          yield* store.releaseLease(a, "proc-a")
          expect((yield* store.leases).map((l) => l.sessionId)).not.toContain(a)
          expect((yield* store.leases).length).toBe(before + 1)
        })
      )
    )

    it.effect("leases: one owner at a time until expiry or release", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          const s = sid("s1")
          yield* TestClock.setTime(1_000)
          const lease = yield* store.acquireLease(s, "proc-a", 5_000)
          expect(lease).toEqual({ sessionId: s, owner: "proc-a", expiresAt: 6_000 })
          const held = yield* Effect.either(store.acquireLease(s, "proc-b", 5_000))
          expect(Either.isLeft(held) && held.left._tag === "LeaseHeld" && held.left.owner === "proc-a").toBe(true)
          // the owner renews
          yield* TestClock.adjust(4_000)
          expect((yield* store.acquireLease(s, "proc-a", 5_000)).expiresAt).toBe(10_000)
          yield* TestClock.adjust(4_999)
          expect(Either.isLeft(yield* Effect.either(store.acquireLease(s, "proc-b", 5_000)))).toBe(true)
          // expired: another owner takes over
          yield* TestClock.adjust(1)
          expect((yield* store.acquireLease(s, "proc-b", 1_000)).owner).toBe("proc-b")
          // release by a non-owner does nothing; by the owner frees it
          yield* store.releaseLease(s, "proc-a")
          expect(Option.getOrThrow(yield* store.lease(s)).owner).toBe("proc-b")
          yield* store.releaseLease(s, "proc-b")
          expect(Option.isNone(yield* store.lease(s))).toBe(true)
          expect((yield* store.acquireLease(s, "proc-c", 1_000)).owner).toBe("proc-c")
        })
      )
    )
  })
