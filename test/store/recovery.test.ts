import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Either, Exit, FastCheck, Layer, Option, Ref, Scope, TestClock } from "effect"
import { type Event, type EventType, make, type PayloadOf } from "../../src/domain/Events.js"
import { ActionId, CallId, MessageId, PartId, type SessionId, TurnId } from "../../src/domain/Ids.js"
import type { AssistantMessage } from "../../src/domain/Message.js"
import type { EventBus } from "../../src/store/EventBus.js"
import { EventStore } from "../../src/store/EventStore.js"
import type { SessionState } from "../../src/store/Projection.js"
import * as Projection from "../../src/store/Projection.js"
import * as Recovery from "../../src/store/Recovery.js"
import * as Snapshots from "../../src/store/Snapshots.js"
import { envelopesArb, SESSION_ID, toEnvelopes } from "../support/arbitraries.js"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "logbook-recovery-"))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))
let files = 0
const tempDb = () => path.join(dir, `db-${++files}.db`)

const e = <T extends EventType>(type: T, payload: PayloadOf<T>): Event => make(type, payload)

const U1 = MessageId.make("u1")
const A1 = MessageId.make("a1")
const T1 = TurnId.make("t1")
const RUNNING = CallId.make("c-running")
const PENDING = CallId.make("c-pending")
const DONE = CallId.make("c-done")
const X1 = ActionId.make("x1")

/** The log of a process killed while a tool ran (step 0 ended with tool calls, step 1 streaming). */
const crashed: ReadonlyArray<Event> = [
  e("session.created", { title: "crashy", cwd: "/w" }),
  e("user.message", { messageId: U1, text: "fix it", mode: "prompt" }),
  e("turn.started", { turnId: T1, messageIds: [U1] }),
  e("session.status", { status: { _tag: "busy" } }),
  e("assistant.started", { messageId: A1 }),
  e("step.started", { messageId: A1, step: 0 }),
  e("chat.state", { state: "streaming" }),
  e("text.delta", { messageId: A1, partId: PartId.make("p1"), delta: "Running the tests." }),
  e("tool.invoked", { messageId: A1, callId: DONE, tool: "read", input: { path: "a.ts" } }),
  e("tool.invoked", { messageId: A1, callId: RUNNING, tool: "bash", input: { command: "npm test" } }),
  e("tool.finished", { callId: DONE, output: "contents" }),
  e("step.finished", {
    messageId: A1,
    step: 0,
    finishReason: "tool-calls",
    usage: { input: 1, output: 1, reasoning: 0, cacheRead: 0, cacheWrite: 0, cost: 0 }
  }),
  e("action.state", { actionId: X1, state: "running", callIds: [DONE, RUNNING] }),
  e("chat.state", { state: "awaiting_tool" }),
  e("tool.progress", { callId: RUNNING, output: "PASS a.test.ts" }),
  e("step.started", { messageId: A1, step: 1 }),
  e("tool.pending", { messageId: A1, callId: PENDING, tool: "edit" })
]

/** The store with `append` calls counted. */
const counted = (base: Layer.Layer<EventStore | EventBus, unknown>) =>
  Effect.gen(function* () {
    const calls = yield* Ref.make(0)
    const layer = Layer.effect(
      EventStore,
      Effect.map(EventStore, (store) => ({
        ...store,
        append: (sessionId: SessionId, events: Parameters<typeof store.append>[1]) =>
          Effect.zipRight(
            Ref.update(calls, (n) => n + 1),
            store.append(sessionId, events)
          )
      }))
    ).pipe(Layer.provideMerge(base))
    return { calls, layer }
  })

const layers: ReadonlyArray<readonly [string, () => Layer.Layer<EventStore | EventBus, unknown>]> = [
  ["memory", () => EventStore.layerMemory],
  ["sqlite", () => EventStore.layerSqlite({ filename: tempDb() })]
]

for (const [name, makeLayer] of layers) {
  describe(`Recovery (${name})`, () => {
    it.scoped("openSession closes an invoked-but-unfinished call with reason crash, in one append", () =>
      Effect.gen(function* () {
        const { calls, layer } = yield* counted(makeLayer())
        const scope = yield* Scope.make()
        const result = yield* Effect.gen(function* () {
          const store = yield* EventStore
          yield* store.append(SESSION_ID, crashed)
          yield* Ref.set(calls, 0)
          const state = yield* Recovery.openSession(SESSION_ID, "owner-a", { ttlMs: 30_000 }).pipe(Scope.extend(scope))
          const appendsBySweep = yield* Ref.get(calls)
          const folded = yield* Snapshots.foldAll(SESSION_ID)
          const lease = yield* store.lease(SESSION_ID)
          yield* Scope.close(scope, Exit.void)
          const afterClose = yield* store.lease(SESSION_ID)
          return { state, appendsBySweep, folded, lease, afterClose }
        }).pipe(Effect.provide(layer))
        const { state, appendsBySweep, folded, lease, afterClose } = result

        expect(appendsBySweep).toBe(1)
        expect(state).toEqual(folded)
        expect(state.lastSeq).toBeGreaterThan(crashed.length)
        expect(state.toolParts.get(RUNNING)!.state).toMatchObject({
          _tag: "error",
          interrupted: true,
          reason: "crash",
          input: { command: "npm test" }
        })
        expect(state.toolParts.get(PENDING)!.state).toMatchObject({ _tag: "error", interrupted: true, reason: "crash" })
        // a finished call is left alone
        expect(state.toolParts.get(DONE)!.state).toMatchObject({ _tag: "completed", output: "contents" })
        expect(state.actions.get(X1)!.state).toBe("failed")
        expect(state.turn).toBeNull()
        expect(state.lastTurn).toMatchObject({ turnId: T1, reason: "crash", interrupted: true })
        expect(state.chatState).toBe("idle")
        expect(state.status).toEqual({ _tag: "idle" })
        const message = state.messages[1] as AssistantMessage
        expect(message.finishReason).toBe("crash")
        expect(message.steps[1]).toMatchObject({ step: 1, aborted: true, finishReason: "crash" })
        expect(Option.map(lease, (l) => l.owner)).toEqual(Option.some("owner-a"))
        expect(Option.isNone(afterClose)).toBe(true)
      })
    )

    it.effect("a second sweep appends nothing", () =>
      Effect.gen(function* () {
        const { calls, layer } = yield* counted(makeLayer())
        yield* Effect.gen(function* () {
          const store = yield* EventStore
          yield* store.append(SESSION_ID, crashed)
          const first = yield* Effect.scoped(Recovery.openSession(SESSION_ID, "owner-a", { ttlMs: 30_000 }))
          yield* Ref.set(calls, 0)
          const second = yield* Effect.scoped(Recovery.openSession(SESSION_ID, "owner-b", { ttlMs: 30_000 }))
          expect(yield* Ref.get(calls)).toBe(0)
          expect(second).toEqual(first)
          expect(yield* store.lastSeq(SESSION_ID)).toBe(first.lastSeq)
          const { appended } = yield* Recovery.recover(SESSION_ID)
          expect(appended).toEqual([])
        }).pipe(Effect.provide(layer))
      })
    )

    it.scoped("a live lease of another owner fails with LeaseHeld and sweeps nothing", () =>
      Effect.gen(function* () {
        const store = yield* EventStore
        yield* store.append(SESSION_ID, crashed)
        yield* TestClock.setTime(1_000)
        yield* store.acquireLease(SESSION_ID, "owner-a", 10_000)
        yield* TestClock.adjust(9_999)
        const error = yield* Effect.flip(Recovery.openSession(SESSION_ID, "owner-b", { ttlMs: 10_000 }))
        expect(error._tag).toBe("LeaseHeld")
        expect(error).toMatchObject({ sessionId: SESSION_ID, owner: "owner-a", expiresAt: 11_000 })
        expect(yield* store.lastSeq(SESSION_ID)).toBe(crashed.length)
      }).pipe(Effect.provide(makeLayer()))
    )

    it.scoped("an expired lease (a dead process) is taken over and the session swept", () =>
      Effect.gen(function* () {
        const store = yield* EventStore
        yield* store.append(SESSION_ID, crashed)
        yield* store.acquireLease(SESSION_ID, "dead-process", 10_000)
        yield* TestClock.adjust(10_001)
        const state = yield* Recovery.openSession(SESSION_ID, "owner-b", { ttlMs: 10_000 })
        expect(state.toolParts.get(RUNNING)!.state._tag).toBe("error")
        const lease = Option.getOrThrow(yield* store.lease(SESSION_ID))
        expect(lease).toMatchObject({ owner: "owner-b", expiresAt: 10_001 + 10_000 })
      }).pipe(Effect.provide(makeLayer()))
    )

    it.scoped("the lease is renewed every ttl/3 while the scope lives and released when it closes", () =>
      Effect.gen(function* () {
        const store = yield* EventStore
        yield* store.append(SESSION_ID, crashed)
        const scope = yield* Scope.make()
        yield* Recovery.openSession(SESSION_ID, "owner-a", { ttlMs: 3_000 }).pipe(Scope.extend(scope))
        for (let i = 0; i < 10; i++) yield* TestClock.adjust(1_000)
        // ten seconds later, well past the ttl, the lease is still live thanks to the renewals
        const lease = Option.getOrThrow(yield* store.lease(SESSION_ID))
        expect(lease.owner).toBe("owner-a")
        expect(lease.expiresAt).toBeGreaterThan(10_000)
        const held = yield* Effect.flip(store.acquireLease(SESSION_ID, "owner-b", 3_000))
        expect(held._tag).toBe("LeaseHeld")
        yield* Scope.close(scope, Exit.void)
        expect(Option.isNone(yield* store.lease(SESSION_ID))).toBe(true)
        const taken = yield* store.acquireLease(SESSION_ID, "owner-b", 3_000)
        expect(taken.owner).toBe("owner-b")
      }).pipe(Effect.provide(makeLayer()))
    )

    it.scoped("holdLease reports a lost lease when a renewal finds another owner", () =>
      Effect.gen(function* () {
        const store = yield* EventStore
        const handle = yield* Recovery.holdLease(SESSION_ID, "owner-a", { ttlMs: 3_000 })
        expect(handle.lease).toMatchObject({ owner: "owner-a", expiresAt: 3_000 })
        // another process takes the session over (as if owner-a had stalled past its ttl)
        yield* store.releaseLease(SESSION_ID, "owner-a")
        yield* store.acquireLease(SESSION_ID, "owner-b", 60_000)
        expect(yield* handle.isLost).toBe(false)
        yield* TestClock.adjust(1_000)
        expect(yield* handle.isLost).toBe(true)
        const lost = yield* handle.lost
        expect(lost).toMatchObject({ _tag: "LeaseHeld", owner: "owner-b" })
        expect(Option.getOrThrow(yield* store.lease(SESSION_ID)).owner).toBe("owner-b")
      }).pipe(Effect.provide(makeLayer()))
    )

    it.scoped("a lease another owner took and released meanwhile is lost, not taken back by the renewal", () =>
      Effect.gen(function* () {
        const store = yield* EventStore
        const handle = yield* Recovery.holdLease(SESSION_ID, "owner-a", { ttlMs: 3_000 })
        // owner-b takes the session over, drives it, and is done before owner-a's next renewal
        yield* store.releaseLease(SESSION_ID, "owner-a")
        yield* store.acquireLease(SESSION_ID, "owner-b", 60_000)
        yield* store.releaseLease(SESSION_ID, "owner-b")
        yield* TestClock.adjust(1_000)
        expect(yield* handle.isLost).toBe(true)
        expect(yield* handle.lost).toMatchObject({ _tag: "LeaseHeld", owner: "nobody (the lease was released)" })
        // nobody holds it: owner-a did not take it back
        expect(Option.isNone(yield* store.lease(SESSION_ID))).toBe(true)
      }).pipe(Effect.provide(makeLayer()))
    )
  })
}

describe("Recovery (sqlite file, a killed process)", () => {
  it.effect("a process that died without releasing its lease is swept by the next one after the ttl", () =>
    Effect.gen(function* () {
      const filename = tempDb()
      // the first process: takes the lease, writes, and dies (no release, no cleanup)
      yield* Effect.gen(function* () {
        const store = yield* EventStore
        yield* store.acquireLease(SESSION_ID, "pid-1", 15_000)
        yield* store.append(SESSION_ID, crashed)
      }).pipe(Effect.provide(EventStore.layerSqlite({ filename })))
      const reopen = <A, E>(effect: Effect.Effect<A, E, EventStore | Scope.Scope>) =>
        Effect.scoped(effect).pipe(Effect.provide(EventStore.layerSqlite({ filename })))

      const early = yield* Effect.flip(reopen(Recovery.openSession(SESSION_ID, "pid-2", { ttlMs: 15_000 })))
      expect(early).toMatchObject({ _tag: "LeaseHeld", owner: "pid-1" })
      yield* TestClock.adjust(15_001)
      const state = yield* reopen(Recovery.openSession(SESSION_ID, "pid-2", { ttlMs: 15_000 }))
      expect(state.toolParts.get(RUNNING)!.state).toMatchObject({ _tag: "error", reason: "crash" })
      expect(state.status._tag).toBe("idle")
      const again = yield* reopen(
        Effect.zip(Recovery.openSession(SESSION_ID, "pid-3", { ttlMs: 15_000 }), Snapshots.foldAll(SESSION_ID))
      )
      expect(again[0]).toEqual(state)
      expect(again[1]).toEqual(state)
    })
  )
})

describe("Recovery.sweepEvents", () => {
  const fold = (state: SessionState, events: ReadonlyArray<Event>) =>
    Projection.applyAll(state, toEnvelopes(state.sessionId, events, { fromSeq: state.lastSeq + 1 }))

  it("is empty for an empty session and for a session that ended cleanly", () => {
    expect(Recovery.sweepEvents(Projection.empty(SESSION_ID))).toEqual([])
    const clean = Either.getOrThrow(
      fold(Projection.empty(SESSION_ID), [
        ...crashed.slice(0, 11),
        e("step.finished", {
          messageId: A1,
          step: 0,
          finishReason: "stop",
          usage: { input: 1, output: 1, reasoning: 0, cacheRead: 0, cacheWrite: 0, cost: 0 }
        }),
        e("tool.failed", { callId: RUNNING, error: "boom" }),
        e("assistant.completed", { messageId: A1, finishReason: "stop" }),
        e("turn.finished", { turnId: T1, reason: "stop" }),
        e("chat.state", { state: "idle" }),
        e("session.status", { status: { _tag: "idle" } })
      ])
    )
    expect(Recovery.sweepEvents(clean)).toEqual([])
  })

  it("lists the repairs in order: tools, actions, steps and messages, then the turn", () => {
    const state = Either.getOrThrow(fold(Projection.empty(SESSION_ID), crashed))
    expect(Recovery.sweepEvents(state).map((x) => x.type)).toEqual([
      "tool.failed",
      "tool.failed",
      "action.state",
      "step.finished",
      "assistant.completed",
      "turn.interrupted",
      "chat.state",
      "session.status"
    ])
  })

  it("closes an ask nobody answered first: permission.replied reject, marked interrupted", () => {
    const state = Either.getOrThrow(
      fold(Projection.empty(SESSION_ID), [
        ...crashed,
        e("permission.asked", { permissionId: "p-open", callId: PENDING, tool: "bash", pattern: "rm -rf x" })
      ])
    )
    const repairs = Recovery.sweepEvents(state)
    expect(repairs[0]).toMatchObject({
      type: "permission.replied",
      payload: { permissionId: "p-open", reply: "reject", interrupted: true }
    })
    expect(repairs.filter((x) => x.type === "permission.replied")).toHaveLength(1)
    const repaired = Either.getOrThrow(fold(state, repairs))
    expect(repaired.permissions["p-open"]!.reply).toBe("reject")
  })

  it("repairs any state a crash can leave, and a repaired state needs no repair (property)", () => {
    FastCheck.assert(
      FastCheck.property(envelopesArb({ maxLength: 120 }), (envelopes) => {
        const state = Either.getOrThrow(Projection.applyAll(Projection.empty(SESSION_ID), envelopes))
        const repairs = Recovery.sweepEvents(state)
        const repaired = Either.getOrThrow(fold(state, repairs))
        expect(Projection.openToolParts(repaired)).toEqual([])
        expect(Projection.openActions(repaired)).toEqual([])
        expect(repaired.turn).toBeNull()
        expect(repaired.chatState).toBe("idle")
        expect(repaired.status._tag).toBe("idle")
        for (const message of repaired.messages) {
          if (message.role === "assistant") expect(message.completedAt).toBeDefined()
        }
        // every ask is answered: the open ones as rejected, marked interrupted
        expect(Object.values(repaired.permissions).filter((p) => p.reply === null)).toEqual([])
        for (const [id, asked] of Object.entries(state.permissions)) {
          if (asked.reply !== null) expect(repaired.permissions[id]).toBe(asked)
        }
        expect(Recovery.sweepEvents(repaired)).toEqual([])
        // the sweep only ends things: finished tool parts are untouched
        for (const [callId, part] of Array.from(state.toolParts)) {
          if (Projection.isToolFinal(part.state)) expect(repaired.toolParts.get(callId as CallId)).toBe(part)
        }
        for (const event of repairs) {
          if (event.type === "tool.failed") expect(event.payload).toMatchObject({ interrupted: true, reason: "crash" })
        }
      }),
      { numRuns: 300, seed: 23 }
    )
  })
})

describe("file intents across a crash (issue 12 §2)", () => {
  const fold = (state: SessionState, events: ReadonlyArray<Event>) =>
    Either.getOrThrow(Projection.applyAll(state, toEnvelopes(state.sessionId, events, { fromSeq: state.lastSeq + 1 })))
  const WRITE = CallId.make("c-write")
  const intent = {
    path: "a.txt",
    op: "update",
    beforeHash: "b".repeat(64),
    afterHash: "a".repeat(64),
    temp: ".a.txt.x.logbook-tmp"
  } as const
  const writing: ReadonlyArray<Event> = [
    ...crashed.slice(0, 9),
    e("tool.invoked", { messageId: A1, callId: WRITE, tool: "write", input: { path: "a.txt", content: "new" } }),
    e("file.intent", { callId: WRITE, ...intent })
  ]
  const intentsOf = (state: SessionState) => {
    const s = state.toolParts.get(WRITE)!.state
    return s._tag === "running" ? s.intents : undefined
  }

  it("the projection keeps an intent on its running call until the sweep settles it or the call ends", () => {
    const open = fold(Projection.empty(SESSION_ID), writing)
    expect(intentsOf(open)).toEqual([intent])
    const recorded = fold(open, [
      e("file.changed", { path: "a.txt", op: "update", afterHash: intent.afterHash, callId: WRITE })
    ])
    expect(intentsOf(recorded)).toEqual([{ ...intent, recorded: true }])
    const settled = fold(open, [
      e("file.recovered", { callId: WRITE, path: "a.txt", op: "update", outcome: "not-applied" })
    ])
    expect(intentsOf(settled)).toBeUndefined()
    const ended = fold(open, [e("tool.failed", { callId: WRITE, error: "disk full" })])
    expect(ended.toolParts.get(WRITE)!.state._tag).toBe("error")
    // an intent of a call that is not running is an inconsistent log
    expect(
      Either.isLeft(
        Projection.applyAll(
          ended,
          toEnvelopes(SESSION_ID, [e("file.intent", { callId: WRITE, ...intent })], { fromSeq: ended.lastSeq + 1 })
        )
      )
    ).toBe(true)
  })

  it("applied: file.changed {recovered} and file.recovered before the call's tool.failed, which carries the file's stamp", () => {
    const state = fold(Projection.empty(SESSION_ID), writing)
    const read = { path: "/w/a.txt", mtimeMs: 5, size: 3, hash: intent.afterHash }
    const repairs = Recovery.sweepEvents(
      state,
      "crash",
      new Set(),
      new Map([[WRITE, [[intent, { outcome: "applied", tempRemoved: false, read }]]]])
    )
    const ofWrite = repairs.filter((r) => (r.payload as { callId?: string }).callId === WRITE)
    expect(ofWrite.map((r) => r.type)).toEqual(["file.changed", "file.recovered", "tool.failed"])
    expect(ofWrite[0]!.payload).toEqual({
      path: "a.txt",
      op: "update",
      beforeHash: intent.beforeHash,
      afterHash: intent.afterHash,
      callId: WRITE,
      recovered: true
    })
    expect(ofWrite[1]!.payload).toEqual({ callId: WRITE, path: "a.txt", op: "update", outcome: "applied" })
    expect(ofWrite[2]!.payload).toMatchObject({ interrupted: true, reason: "crash", reads: [read] })
    expect((ofWrite[2]!.payload as { error: string }).error).toBe(
      "The process running this tool stopped before it finished (crash). It had already replaced a.txt with the new content: the change is made, and recorded now (recovered after the crash)."
    )
    // the repaired state: the file's change is the call's, its stamp is what the agent last saw
    const repaired = fold(state, repairs)
    expect(repaired.files["a.txt"]).toMatchObject({ callId: WRITE, recovered: true })
    expect(repaired.reads.get("/w/a.txt")).toEqual({ mtimeMs: 5, size: 3, hash: intent.afterHash })
    expect(Recovery.sweepEvents(repaired)).toEqual([])
  })

  it("not applied or changed: only file.recovered, no stamp; without findings the outcome is unknown", () => {
    const state = fold(Projection.empty(SESSION_ID), writing)
    for (const finding of [
      { outcome: "not-applied", tempRemoved: true },
      { outcome: "changed", hash: "c".repeat(64), tempRemoved: false }
    ] as const) {
      const repairs = Recovery.sweepEvents(state, "crash", new Set(), new Map([[WRITE, [[intent, finding]]]]))
      const ofWrite = repairs.filter((r) => (r.payload as { callId?: string }).callId === WRITE)
      expect(ofWrite.map((r) => r.type)).toEqual(["file.recovered", "tool.failed"])
      expect(ofWrite[0]!.payload).toMatchObject({ outcome: finding.outcome })
      expect(ofWrite[1]!.payload).not.toHaveProperty("reads")
    }
    const unknown = Recovery.sweepEvents(state).filter((r) => (r.payload as { callId?: string }).callId === WRITE)
    expect(unknown.map((r) => r.type)).toEqual(["tool.failed"])
    expect((unknown[0]!.payload as { error: string }).error).toContain("its outcome is unknown")
  })

  it("a recorded intent whose call never ended: no new event, but the stamp when the file holds that content", () => {
    const state = fold(Projection.empty(SESSION_ID), [
      ...writing,
      e("file.changed", { path: "a.txt", op: "update", afterHash: intent.afterHash, callId: WRITE })
    ])
    const read = { path: "/w/a.txt", mtimeMs: 5, size: 3, hash: intent.afterHash }
    const repairs = Recovery.sweepEvents(
      state,
      "crash",
      new Set(),
      new Map([
        [
          WRITE,
          [
            [
              { ...intent, recorded: true },
              { outcome: "applied", tempRemoved: false, read }
            ]
          ]
        ]
      ])
    )
    const ofWrite = repairs.filter((r) => (r.payload as { callId?: string }).callId === WRITE)
    expect(ofWrite.map((r) => r.type)).toEqual(["tool.failed"])
    expect(ofWrite[0]!.payload).toMatchObject({ reads: [read] })
    expect((ofWrite[0]!.payload as { error: string }).error).toContain("It had written a.txt and recorded the change.")
  })
})
