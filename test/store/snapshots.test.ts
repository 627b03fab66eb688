import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import BetterSqlite3 from "better-sqlite3"
import { Effect, Either, FastCheck, Layer, Option, Ref, Stream, TestClock } from "effect"
import {
  type Envelope,
  type Event,
  type EventDecodeError,
  type EventType,
  make,
  type NewEvent,
  type PayloadOf
} from "../../src/domain/Events.js"
import { CallId, MessageId, PartId, SessionId, TurnId } from "../../src/domain/Ids.js"
import type { EventBus } from "../../src/store/EventBus.js"
import { EventStore, EventStoreError, SNAPSHOTS_KEPT } from "../../src/store/EventStore.js"
import type { SessionState } from "../../src/store/Projection.js"
import * as Projection from "../../src/store/Projection.js"
import * as SessionJournal from "../../src/store/SessionJournal.js"
import * as Snapshots from "../../src/store/Snapshots.js"
import { eventsArb, SESSION_ID, simulate, toEnvelopes } from "../support/arbitraries.js"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "logbook-snapshots-"))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))
let files = 0
const tempDb = () => path.join(dir, `db-${++files}.db`)

const e = <T extends EventType>(type: T, payload: PayloadOf<T>): Event => make(type, payload)

const pureFold = (events: ReadonlyArray<Event>, to = events.length): SessionState =>
  Either.getOrThrow(Projection.applyAll(Projection.empty(SESSION_ID), toEnvelopes(SESSION_ID, events.slice(0, to))))

/** Saves a state as a snapshot row as it is (planted: it need not be the true fold). */
const plant = (seq: number, state: unknown, version = Projection.PROJECTION_VERSION) =>
  Effect.flatMap(EventStore, (store) => store.saveSnapshot({ sessionId: SESSION_ID, seq, version, at: 0, state }))

const encoded = (state: SessionState) => Either.getOrThrow(Projection.encodeState(state))

const withTitle = (state: SessionState, title: string): SessionState => ({ ...state, title })

/** A deterministic session of about `n` choices, with text deltas and turns, never retitled. */
const session = (n: number) =>
  simulate(
    Array.from({ length: n }, (_, i) => (i * 7919 + 13) % 100_003),
    {}
  ).filter((event) => event.type !== "session.titled" && event.type !== "compaction.done")

/** Appends a whole session from seq 1, with the times `toEnvelopes` gives (so `pureFold` matches). */
const appendAll = (events: ReadonlyArray<Event>) =>
  Effect.flatMap(EventStore, (store) =>
    store.append(
      SESSION_ID,
      events.map(
        (event, i): NewEvent => ({ ...event, at: toEnvelopes(SESSION_ID, [event], { fromSeq: i + 1 })[0]!.at })
      )
    )
  )

describe("Snapshots.shouldSnapshot", () => {
  it("restore has the documented signature (checked by the compiler)", () => {
    const restore: (
      sessionId: SessionId,
      options?: Snapshots.RestoreOptions
    ) => Effect.Effect<SessionState, EventStoreError | EventDecodeError | Projection.ProjectionError, EventStore> =
      Snapshots.restore
    expect(restore).toBe(Snapshots.restore)
  })

  const batch = (from: number, types: ReadonlyArray<string>) => types.map((type, i) => ({ seq: from + i, type }))

  it("is true when a batch crosses a multiple of `every`", () => {
    expect(Snapshots.shouldSnapshot({ every: 10, prevSeq: 8, envelopes: batch(9, ["a", "a"]) })).toBe(true)
    expect(Snapshots.shouldSnapshot({ every: 10, prevSeq: 9, envelopes: batch(10, ["a"]) })).toBe(true)
    expect(Snapshots.shouldSnapshot({ every: 10, prevSeq: 10, envelopes: batch(11, ["a", "a", "a"]) })).toBe(false)
    expect(Snapshots.shouldSnapshot({ every: 10, prevSeq: 3, envelopes: batch(4, Array(30).fill("a")) })).toBe(true)
  })

  it("is true at a turn's end with no snapshot yet or a fifth of `every` events after the newest, false for an empty batch, and defaults to every 500", () => {
    // no snapshot yet (0, the default): every turn's end
    expect(Snapshots.shouldSnapshot({ prevSeq: 3, envelopes: batch(4, ["a", "turn.finished"]) })).toBe(true)
    expect(Snapshots.shouldSnapshot({ prevSeq: 3, envelopes: batch(4, ["turn.interrupted"]), snapshotSeq: 0 })).toBe(
      true
    )
    expect(Snapshots.shouldSnapshot({ prevSeq: 3, envelopes: batch(4, ["turn.started", "text.delta"]) })).toBe(false)
    // default every 500: 100 events or more after the newest snapshot
    expect(
      Snapshots.shouldSnapshot({ prevSeq: 1_203, envelopes: batch(1_204, ["a", "turn.finished"]), snapshotSeq: 1_105 })
    ).toBe(true)
    expect(
      Snapshots.shouldSnapshot({ prevSeq: 1_203, envelopes: batch(1_204, ["a", "turn.finished"]), snapshotSeq: 1_106 })
    ).toBe(false)
    expect(Snapshots.shouldSnapshot({ prevSeq: 13, envelopes: batch(14, ["turn.interrupted"]), snapshotSeq: 5 })).toBe(
      false
    )
    expect(Snapshots.shouldSnapshot({ prevSeq: 499, envelopes: batch(500, ["a"]), snapshotSeq: 498 })).toBe(true)
    expect(Snapshots.shouldSnapshot({ prevSeq: 500, envelopes: batch(501, ["a"]) })).toBe(false)
    expect(Snapshots.shouldSnapshot({ prevSeq: 7, envelopes: [] })).toBe(false)
    // with `every`: a fifth of it
    expect(Snapshots.turnEndMinimum(25)).toBe(5)
    expect(Snapshots.turnEndMinimum(3)).toBe(1)
    expect(
      Snapshots.shouldSnapshot({ every: 25, prevSeq: 8, envelopes: batch(9, ["turn.finished"]), snapshotSeq: 5 })
    ).toBe(false)
    expect(
      Snapshots.shouldSnapshot({ every: 25, prevSeq: 9, envelopes: batch(10, ["turn.finished"]), snapshotSeq: 5 })
    ).toBe(true)
  })
})

const layers: ReadonlyArray<readonly [string, () => Layer.Layer<EventStore | EventBus, unknown>]> = [
  ["memory", () => EventStore.layerMemory],
  ["sqlite", () => EventStore.layerSqlite({ filename: tempDb() })]
]

for (const [name, makeLayer] of layers) {
  const run = <A, E>(effect: Effect.Effect<A, E, EventStore | EventBus>) =>
    Effect.provide(effect, makeLayer()) as Effect.Effect<A, E>

  describe(`Snapshots (${name})`, () => {
    it.effect.prop(
      "restore from snapshots taken at any seqs equals the full fold at every seq",
      [eventsArb({ maxLength: 50 }), FastCheck.array(FastCheck.nat(), { maxLength: 4 })],
      ([events, cuts]) =>
        run(
          Effect.gen(function* () {
            yield* appendAll(events)
            for (const cut of cuts) {
              const k = cut % (events.length + 1)
              yield* Snapshots.takeSnapshot(yield* Snapshots.foldAll(SESSION_ID, k))
            }
            for (let n = 0; n <= events.length; n++) {
              const restored = yield* Snapshots.restore(SESSION_ID, { atSeq: n })
              expect(restored).toEqual(yield* Snapshots.foldAll(SESSION_ID, n))
              expect(restored).toEqual(pureFold(events, n))
            }
            expect(yield* Snapshots.restore(SESSION_ID)).toEqual(pureFold(events))
          })
        ),
      { fastCheck: { numRuns: name === "sqlite" ? 12 : 40, seed: 17 } }
    )

    it.effect("restore starts from the newest snapshot at or below atSeq and folds the events after it", () =>
      run(
        Effect.gen(function* () {
          const events = session(120)
          yield* appendAll(events)
          // planted snapshots with marker titles show which one restore used
          yield* plant(10, encoded(withTitle(pureFold(events, 10), "at 10")))
          yield* plant(30, encoded(withTitle(pureFold(events, 30), "at 30")))
          expect((yield* Snapshots.restore(SESSION_ID, { atSeq: 9 })).title).toBe("a session")
          expect((yield* Snapshots.restore(SESSION_ID, { atSeq: 10 })).title).toBe("at 10")
          const at29 = yield* Snapshots.restore(SESSION_ID, { atSeq: 29 })
          expect(at29).toEqual(withTitle(pureFold(events, 29), "at 10"))
          const last = yield* Snapshots.restore(SESSION_ID)
          expect(last).toEqual(withTitle(pureFold(events), "at 30"))
          expect(last.lastSeq).toBe(events.length)
          expect(yield* Snapshots.restore(SESSION_ID, { atSeq: 0 })).toEqual(Projection.empty(SESSION_ID))
        })
      )
    )

    it.effect("snapshots of another projection version are ignored", () =>
      run(
        Effect.gen(function* () {
          const events = session(60)
          yield* appendAll(events)
          yield* plant(20, encoded(withTitle(pureFold(events, 20), "old format")), Projection.PROJECTION_VERSION + 1)
          const restored = yield* Snapshots.restore(SESSION_ID)
          expect(restored.title).toBe("a session")
          expect(restored).toEqual(pureFold(events))
        })
      )
    )

    it.effect.each([
      [
        "does not decode",
        [{ garbage: true }, (events: ReadonlyArray<Event>) => ({ ...encoded(pureFold(events, 20)), lastSeq: "twenty" })]
      ],
      [
        "does not match its row",
        [(events: ReadonlyArray<Event>) => encoded(withTitle(pureFold(events, 24), "wrong seq"))]
      ]
    ] as const)("a snapshot that %s is skipped for an older one", ([, bad]) =>
      run(
        Effect.gen(function* () {
          const events = session(80)
          yield* appendAll(events)
          yield* plant(5, encoded(withTitle(pureFold(events, 5), "good")))
          let seq = 15
          for (const state of bad) {
            yield* plant(seq, typeof state === "function" ? state(events) : state)
            seq += 10
          }
          const restored = yield* Snapshots.restore(SESSION_ID)
          expect(restored).toEqual(withTitle(pureFold(events), "good"))
          const loaded = yield* Snapshots.loadSnapshotState(SESSION_ID)
          expect(Option.map(loaded, (s) => [s.lastSeq, s.title])).toEqual(Option.some([5, "good"]))
        })
      )
    )

    it.effect("a ProjectionError in the log fails restore with the typed error", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          yield* store.append(SESSION_ID, [
            e("session.created", {}),
            e("tool.finished", { callId: CallId.make("ghost"), output: "?" })
          ])
          const error = yield* Effect.flip(Snapshots.restore(SESSION_ID))
          expect(error._tag).toBe("ProjectionError")
          expect(error).toMatchObject({ seq: 2, type: "tool.finished" })
        })
      )
    )

    it.effect("takeSnapshot saves the state at its lastSeq with the current version", () =>
      run(
        Effect.gen(function* () {
          const store = yield* EventStore
          const events = session(40)
          yield* appendAll(events)
          yield* TestClock.setTime(12_345)
          yield* Snapshots.takeSnapshot(yield* Snapshots.foldAll(SESSION_ID, 17))
          yield* Snapshots.takeSnapshot(Projection.empty(SESSION_ID))
          const snapshot = Option.getOrThrow(
            yield* store.loadSnapshot(SESSION_ID, { version: Projection.PROJECTION_VERSION })
          )
          expect(snapshot).toMatchObject({ sessionId: SESSION_ID, seq: 17, version: Projection.PROJECTION_VERSION })
          expect(snapshot.at).toBe(12_345)
          expect(Either.getOrThrow(Projection.decodeState(snapshot.state))).toEqual(pureFold(events, 17))
        })
      )
    )

    describe("SessionJournal", () => {
      const snapshotSeqs = Effect.gen(function* () {
        const store = yield* EventStore
        const seqs: Array<number> = []
        let bound: number | undefined
        for (;;) {
          const found = yield* store.loadSnapshot(SESSION_ID, {
            version: Projection.PROJECTION_VERSION,
            atOrBelow: bound
          })
          if (Option.isNone(found)) return seqs.reverse()
          seqs.push(found.value.seq)
          bound = found.value.seq - 1
        }
      })

      it.effect("appends, keeps the state equal to the fold of the log, and snapshots per the policy", () =>
        run(
          Effect.gen(function* () {
            const events = session(150)
            const journal = yield* SessionJournal.makeJournal(SESSION_ID, { every: 25 })
            const expected: Array<number> = []
            let last = 0
            let i = 0
            let size = 1
            while (i < events.length) {
              const batch = events.slice(i, i + size)
              const before = (yield* journal.state).lastSeq
              const envelopes = yield* journal.append(batch)
              expect(envelopes.map((x) => x.seq)).toEqual(batch.map((_, j) => before + j + 1))
              if (Snapshots.shouldSnapshot({ every: 25, prevSeq: before, envelopes, snapshotSeq: last })) {
                last = before + batch.length
                expected.push(last)
              }
              expect(yield* journal.state).toEqual(yield* Snapshots.foldAll(SESSION_ID))
              i += size
              size = (size % 4) + 1
            }
            expect(expected.length).toBeGreaterThan(3)
            // taken at every point of the policy; the store keeps the newest SNAPSHOTS_KEPT
            expect(yield* snapshotSeqs).toEqual(expected.slice(-SNAPSHOTS_KEPT))
            expect(yield* Snapshots.restore(SESSION_ID)).toEqual(yield* journal.state)
          })
        )
      )

      it.effect("refuses an illegal batch and writes nothing of it", () =>
        run(
          Effect.gen(function* () {
            const store = yield* EventStore
            const journal = yield* SessionJournal.makeJournal(SESSION_ID)
            yield* journal.append([e("session.created", { title: "x" })])
            const error = yield* Effect.flip(
              journal.append([
                e("session.titled", { title: "y" }),
                e("tool.progress", { callId: CallId.make("ghost"), output: "" })
              ])
            )
            expect(error._tag).toBe("ProjectionError")
            expect(yield* store.lastSeq(SESSION_ID)).toBe(1)
            expect((yield* journal.state).title).toBe("x")
            yield* journal.append([e("session.titled", { title: "z" })])
            expect((yield* journal.state).lastSeq).toBe(2)
          })
        )
      )

      it.effect("redact masks each payload before it is folded and written; one it cannot read fails typed", () =>
        run(
          Effect.gen(function* () {
            const store = yield* EventStore
            const redact = <A>(payload: A): A => JSON.parse(JSON.stringify(payload).replaceAll("secret", "***")) as A
            const journal = yield* SessionJournal.makeJournal(SESSION_ID, { redact })
            yield* journal.append([e("session.created", { title: "a secret title" })])
            expect((yield* journal.state).title).toBe("a *** title")
            const logged = yield* Stream.runCollect(store.read(SESSION_ID))
            expect(Array.from(logged)[0]!.payload).toMatchObject({ title: "a *** title" })
            // a redact that throws (it met a value it cannot read) leaves the payload as it is: writing
            // it then fails or not as it would have without redact — never a defect here
            const throwing = SessionJournal.makeJournal(SESSION_ID, {
              redact: () => {
                throw new Error("unreadable")
              }
            })
            const second = yield* throwing
            yield* second.append([e("session.titled", { title: "kept" })])
            expect((yield* second.state).title).toBe("kept")
          })
        )
      )

      it.effect(
        "a turn's end takes a snapshot a fifth of `every` events after the newest one, also the one a journal was restored from",
        () =>
          run(
            Effect.gen(function* () {
              const U = MessageId.make("u1")
              /** a turn of `size` events: started, `size - 2` titles, finished */
              const turn = (k: number, size: number) => [
                e("turn.started", { turnId: TurnId.make(`t${k}`), messageIds: [U] }),
                ...Array.from({ length: size - 2 }, (_, j) => e("session.titled", { title: `${k}.${j}` })),
                e("turn.finished", { turnId: TurnId.make(`t${k}`), reason: "stop" })
              ]
              const first = yield* SessionJournal.makeJournal(SESSION_ID, { every: 50 })
              yield* first.append([
                e("session.created", {}),
                e("user.message", { messageId: U, text: "hi", mode: "prompt" })
              ])
              // seq 2 → 5: no snapshot yet
              yield* first.append(turn(1, 3))
              expect(yield* snapshotSeqs).toEqual([5])
              // → 12: 7 since 5, fewer than 10
              yield* first.append(turn(2, 7))
              expect(yield* snapshotSeqs).toEqual([5])
              // → 15: 10 since 5
              yield* first.append(turn(3, 3))
              expect(yield* snapshotSeqs).toEqual([5, 15])
              // → 22: a turn that has not ended
              yield* first.append(turn(4, 8).slice(0, -1))
              expect(yield* snapshotSeqs).toEqual([5, 15])
              // a journal opened now restores from the snapshot at 15 and folds 16…22
              const second = yield* SessionJournal.makeJournal(SESSION_ID, { every: 50 })
              expect((yield* second.state).lastSeq).toBe(22)
              // → 23: 8 since 15 (a journal that took the session for one without a snapshot would take one)
              yield* second.append(turn(4, 8).slice(-1))
              expect(yield* snapshotSeqs).toEqual([5, 15])
              // → 25: 10 since 15
              yield* second.append(turn(5, 2))
              expect(yield* snapshotSeqs).toEqual([5, 15, 25])
              // → 27: 2 since 25 (the snapshot it took)
              yield* second.append(turn(6, 2))
              expect(yield* snapshotSeqs).toEqual([5, 15, 25])
              // given the state and its snapshot's seq (as `SessionOpen` does after `Recovery.recover`)
              const restored = yield* Snapshots.restoreWithBase(SESSION_ID)
              expect(restored.snapshotSeq).toBe(25)
              expect(restored.state).toEqual(yield* Snapshots.foldAll(SESSION_ID))
              const third = yield* SessionJournal.makeJournal(SESSION_ID, {
                every: 50,
                initial: restored.state,
                snapshotSeq: restored.snapshotSeq
              })
              // → 34: 9 since 25
              yield* third.append(turn(7, 7))
              expect(yield* snapshotSeqs).toEqual([5, 15, 25])
              // → 36: 11 since 25
              yield* third.append(turn(8, 2))
              expect(yield* snapshotSeqs).toEqual([15, 25, 36])
              // crossing a multiple of `every` takes one, whatever came since the last
              yield* third.append(Array.from({ length: 14 }, (_, j) => e("session.titled", { title: `x${j}` })))
              expect(yield* snapshotSeqs).toEqual([25, 36, 50])
              expect(yield* Snapshots.restore(SESSION_ID)).toEqual(yield* Snapshots.foldAll(SESSION_ID))
            })
          )
      )

      it.effect("appendLater folds at once; a snapshot that fell due is taken after the flush", () =>
        run(
          Effect.gen(function* () {
            const journal = yield* SessionJournal.makeJournal(SESSION_ID, { every: 10 })
            const A = MessageId.make("a1")
            const U = MessageId.make("u1")
            yield* journal.append([
              e("session.created", {}),
              e("user.message", { messageId: U, text: "hi", mode: "prompt" }),
              e("turn.started", { turnId: TurnId.make("t1"), messageIds: [U] }),
              e("assistant.started", { messageId: A }),
              e("step.started", { messageId: A, step: 0 })
            ])
            for (let k = 0; k < 12; k++) {
              yield* journal.appendLater([e("text.delta", { messageId: A, partId: PartId.make("p"), delta: `${k},` })])
            }
            const state = yield* journal.state
            expect(state.lastSeq).toBe(17)
            expect((state.messages[1] as { parts: ReadonlyArray<{ text?: string }> }).parts[0]!.text).toBe(
              "0,1,2,3,4,5,6,7,8,9,10,11,"
            )
            expect(yield* snapshotSeqs).toEqual([])
            yield* journal.flush
            expect(yield* snapshotSeqs).toEqual([17])
            expect(yield* Snapshots.foldAll(SESSION_ID)).toEqual(state)
          })
        )
      )

      it.effect("rebuilds its state when the store assigned other seqs than predicted", () =>
        run(
          Effect.gen(function* () {
            const store = yield* EventStore
            const journal = yield* SessionJournal.makeJournal(SESSION_ID)
            yield* journal.append([e("session.created", { title: "a" })])
            // a writer that bypasses the journal (a second process without the lease)
            yield* store.append(SESSION_ID, [e("session.titled", { title: "b" })])
            yield* journal.append([e("session.titled", { title: "c" })])
            const state = yield* journal.state
            expect(state.lastSeq).toBe(3)
            expect(state).toEqual(yield* Snapshots.foldAll(SESSION_ID))
            yield* store.append(SESSION_ID, [e("session.titled", { title: "d" })])
            yield* journal.flush
            expect((yield* journal.state).title).toBe("d")
          })
        )
      )

      it.effect("after a failed commit its state is rebuilt from what the log holds", () =>
        Effect.gen(function* () {
          const failing = yield* Ref.make(false)
          // a store whose writer loses what `appendLater` hands over and whose next append fails
          const flaky = Layer.effect(
            EventStore,
            Effect.map(EventStore, (store) => ({
              ...store,
              appendLater: () => Effect.void,
              append: (sessionId: SessionId, events: Parameters<typeof store.append>[1]) =>
                Effect.flatMap(Ref.get(failing), (fail) =>
                  fail
                    ? Effect.fail(new EventStoreError({ method: "append", message: "disk full" }))
                    : store.append(sessionId, events)
                )
            }))
          ).pipe(Layer.provideMerge(makeLayer()))
          yield* Effect.gen(function* () {
            const journal = yield* SessionJournal.makeJournal(SESSION_ID)
            yield* journal.append([e("session.created", { title: "kept" })])
            yield* journal.appendLater([e("session.titled", { title: "lost" })])
            expect((yield* journal.state).title).toBe("lost")
            yield* Ref.set(failing, true)
            const error = yield* Effect.flip(journal.append([e("session.titled", { title: "failed" })]))
            expect(error._tag).toBe("EventStoreError")
            const state = yield* journal.state
            expect(state.title).toBe("kept")
            expect(state.lastSeq).toBe(1)
            yield* Ref.set(failing, false)
            yield* journal.append([e("session.titled", { title: "next" })])
            expect(yield* journal.state).toEqual(yield* Snapshots.foldAll(SESSION_ID))
          }).pipe(Effect.provide(flaky))
        })
      )

      it.effect("starts from the restored state of an existing session", () =>
        run(
          Effect.gen(function* () {
            const events = session(60)
            yield* appendAll(events)
            const journal = yield* SessionJournal.makeJournal(SESSION_ID)
            expect(yield* journal.state).toEqual(pureFold(events))
            yield* journal.snapshot
            expect(yield* snapshotSeqs).toEqual([events.length])
          })
        )
      )
    })
  })
}

describe("Snapshots (sqlite file)", () => {
  it.effect("a snapshot row that is not JSON is skipped: restore falls back to the events", () =>
    Effect.gen(function* () {
      const filename = tempDb()
      const events = session(80)
      const full = pureFold(events)
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* appendAll(events)
          yield* Snapshots.takeSnapshot(pureFold(events, 30))
        }).pipe(Effect.provide(EventStore.layerSqlite({ filename })))
      )
      const db = new BetterSqlite3(filename)
      const changed = db.prepare("UPDATE snapshots SET state = '{not json' WHERE seq = 30").run().changes
      db.close()
      expect(changed).toBe(1)
      const restored = yield* Snapshots.restore(SESSION_ID).pipe(Effect.provide(EventStore.layerSqlite({ filename })))
      expect(restored).toEqual(full)
    })
  )

  it.effect("restore after reopening the file equals the fold, from the snapshot the journal took", () =>
    Effect.gen(function* () {
      const filename = tempDb()
      const events = session(200)
      yield* Effect.gen(function* () {
        const journal = yield* SessionJournal.makeJournal(SESSION_ID, { every: 50 })
        for (const event of events) yield* journal.append([event])
      }).pipe(Effect.provide(EventStore.layerSqlite({ filename })))
      const reopened = Effect.gen(function* () {
        const store = yield* EventStore
        const snapshot = yield* store.loadSnapshot(SESSION_ID, { version: Projection.PROJECTION_VERSION })
        const restored = yield* Snapshots.restore(SESSION_ID)
        const envelopes: Array<Envelope> = [...(yield* Stream.runCollect(store.read(SESSION_ID)))]
        return { snapshot, restored, envelopes }
      })
      const { snapshot, restored, envelopes } = yield* reopened.pipe(
        Effect.provide(EventStore.layerSqlite({ filename }))
      )
      expect(Option.isSome(snapshot)).toBe(true)
      expect(Option.getOrThrow(snapshot).seq).toBeGreaterThan(50)
      expect(restored).toEqual(Either.getOrThrow(Projection.applyAll(Projection.empty(SESSION_ID), envelopes)))
      expect(restored.lastSeq).toBe(events.length)
      expect(SessionId.make(restored.sessionId)).toBe(SESSION_ID)
    })
  )
})
