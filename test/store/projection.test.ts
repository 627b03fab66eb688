import { describe, expect, it } from "@effect/vitest"
import { Either, FastCheck } from "effect"
import type { Envelope, Event } from "../../src/domain/Events.js"
import * as Events from "../../src/domain/Events.js"
import { ActionId, type CallId, MessageId, PartId, SessionId, TurnId } from "../../src/domain/Ids.js"
import type { AssistantMessage, ToolPart, ToolState, UserMessage } from "../../src/domain/Message.js"
import type { SessionState } from "../../src/store/Projection.js"
import * as Projection from "../../src/store/Projection.js"
import { envelopesArb, SESSION_ID, START_AT, simulate, toEnvelopes } from "../support/arbitraries.js"
import { A1, C1, e, P1, prelude, T1, U1, usage } from "../support/fixtures.js"

// ---------------------------------------------------------------------------------------------
// helpers

const at = (seq: number) => START_AT + seq * 7

const X1 = ActionId.make("x1")

const fold = (events: ReadonlyArray<Event>) =>
  Projection.applyAll(Projection.empty(SESSION_ID), toEnvelopes(SESSION_ID, events))

const ok = (events: ReadonlyArray<Event>): SessionState => {
  const result = fold(events)
  if (Either.isLeft(result)) throw new Error(`unexpected ProjectionError: ${result.left.message}`)
  return result.right
}

/** Asserts that the last event is illegal after the others, with the typed error. */
const expectIllegal = (events: ReadonlyArray<Event>, messagePart?: string) => {
  const before = ok(events.slice(0, -1))
  const last = toEnvelopes(SESSION_ID, events)[events.length - 1]!
  const result = Projection.apply(before, last)
  expect(Either.isLeft(result)).toBe(true)
  const error = Either.getLeft(result).pipe((o) => (o._tag === "Some" ? o.value : undefined))!
  expect(error).toBeInstanceOf(Projection.ProjectionError)
  expect(error._tag).toBe("ProjectionError")
  expect(error.sessionId).toBe(SESSION_ID)
  expect(error.seq).toBe(events.length)
  expect(error.type).toBe(last.type)
  if (messagePart !== undefined) expect(error.message).toContain(messagePart)
  // the same through applyAll
  expect(Either.isLeft(fold(events))).toBe(true)
}

const assistant = (state: SessionState, id: MessageId = A1): AssistantMessage =>
  state.messages.find((m) => m.id === id) as AssistantMessage
const user = (state: SessionState, id: MessageId): UserMessage => state.messages.find((m) => m.id === id) as UserMessage
const tool = (state: SessionState, callId: CallId = C1): ToolPart => state.toolParts.get(callId)!

const deepFreeze = <T>(value: T): T => {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const v of Object.values(value)) deepFreeze(v)
  }
  return value
}

// ---------------------------------------------------------------------------------------------
// unit tests

describe("Projection: session", () => {
  it("starts empty", () => {
    const s = Projection.empty(SESSION_ID)
    expect(s).toMatchObject({ lastSeq: 0, chatState: "idle", status: { _tag: "idle" }, turn: null, deleted: false })
    expect(s.messages).toEqual([])
  })

  it("session.created, titled, deleted, status and chat.state set their fields", () => {
    const s = ok([
      e("session.created", { title: "first", cwd: "/w", model: "m1" }),
      e("session.titled", { title: "second" }),
      e("session.status", { status: { _tag: "retry", attempt: 2, nextAt: 99, message: "429" } }),
      e("chat.state", { state: "streaming" }),
      e("session.deleted", {})
    ])
    expect(s.title).toBe("second")
    expect(s.cwd).toBe("/w")
    expect(s.model).toBe("m1")
    expect(s.createdAt).toBe(at(1))
    expect(s.updatedAt).toBe(at(5))
    expect(s.lastSeq).toBe(5)
    expect(s.status).toEqual({ _tag: "retry", attempt: 2, nextAt: 99, message: "429" })
    expect(s.chatState).toBe("streaming")
    expect(s.deleted).toBe(true)
  })

  it("session.created after the first event is illegal", () => {
    expectIllegal([e("session.titled", { title: "x" }), e("session.created", {})], "first event")
  })

  it("rejects a seq gap, a repeated seq and another session's event", () => {
    const s = ok(prelude)
    const next = toEnvelopes(SESSION_ID, [e("session.titled", { title: "x" })], { fromSeq: s.lastSeq + 2 })[0]!
    expect(Either.isLeft(Projection.apply(s, next))).toBe(true)
    const again = toEnvelopes(SESSION_ID, [e("session.titled", { title: "x" })], { fromSeq: s.lastSeq })[0]!
    expect(Either.isLeft(Projection.apply(s, again))).toBe(true)
    const other = toEnvelopes(SessionId.make("other"), [e("session.titled", { title: "x" })], {
      fromSeq: s.lastSeq + 1
    })[0]!
    expect(Either.isLeft(Projection.apply(s, other))).toBe(true)
  })

  it("model.retry, model.error, permissions, file.changed and compaction are recorded", () => {
    const s = ok([
      ...prelude,
      e("model.retry", { attempt: 1, delayMs: 500, nextAt: 123, message: "overloaded", status: 529 }),
      e("model.error", { message: "bad", status: 400, retryable: false }),
      e("permission.asked", { permissionId: "perm1", tool: "bash", pattern: "rm *" }),
      e("permission.replied", { permissionId: "perm1", reply: "reject" }),
      e("file.changed", { path: "a.ts", op: "create", afterHash: "h1" }),
      e("file.changed", { path: "a.ts", op: "update", beforeHash: "h1", afterHash: "h2" }),
      e("compaction.done", { upToMessageId: U1, summary: "sum" })
    ])
    expect(s.lastRetry).toEqual({
      attempt: 1,
      delayMs: 500,
      nextAt: 123,
      message: "overloaded",
      status: 529,
      at: at(6)
    })
    expect(s.lastError).toEqual({ message: "bad", status: 400, retryable: false, at: at(7) })
    expect(s.permissions.perm1).toEqual({
      permissionId: "perm1",
      tool: "bash",
      pattern: "rm *",
      askedAt: at(8),
      reply: "reject",
      repliedAt: at(9)
    })
    expect(s.files["a.ts"]).toEqual({ op: "update", beforeHash: "h1", afterHash: "h2", seq: 11, at: at(11) })
    expect(s.compaction).toEqual({ upToMessageId: U1, keepFrom: 0, summary: "sum", at: at(12) })
  })

  it("prompt.recorded keeps each prompt version's blob; step.finished decodes with and without a version", () => {
    const s = ok([
      ...prelude,
      e("prompt.recorded", { promptVersion: "0123456789abcdef", blob: "b1" }),
      e("step.finished", { messageId: A1, step: 0, finishReason: "stop", usage, promptVersion: "0123456789abcdef" }),
      e("prompt.recorded", { promptVersion: "fedcba9876543210", blob: "b2" })
    ])
    expect(s.prompts).toEqual({ "0123456789abcdef": "b1", fedcba9876543210: "b2" })
    expect(assistant(s).steps[0]!.endedAt).toBe(at(7))
    // a step.finished of an older log (no promptVersion) still decodes, and one with it keeps it
    const raw = { id: "e1", sessionId: SESSION_ID, seq: 1, at: 1, parentId: null, v: 1, type: "step.finished" }
    const payload = { messageId: A1, step: 0, finishReason: "stop", usage }
    const old = Events.decodeEnvelope({ ...raw, payload } as never)
    expect(Either.isRight(old)).toBe(true)
    const withVersion = Events.decodeEnvelope({ ...raw, payload: { ...payload, promptVersion: "abc" } } as never)
    expect(Either.getOrThrow(withVersion).payload).toMatchObject({ promptVersion: "abc" })
    expect(Projection.empty(SESSION_ID).prompts).toEqual({})
    const decoded = Projection.decodeState(
      JSON.parse(JSON.stringify(Projection.encodeState(s).pipe(Either.getOrThrow)))
    )
    expect(Either.getOrThrow(decoded).prompts).toEqual(s.prompts)
  })

  it("illegal permission and compaction events", () => {
    expectIllegal([...prelude, e("permission.replied", { permissionId: "nope", reply: "once" })], "never asked")
    const asked = e("permission.asked", { permissionId: "p", tool: "bash", pattern: "*" })
    expectIllegal([...prelude, asked, asked], "already asked")
    const replied = e("permission.replied", { permissionId: "p", reply: "once" })
    expectIllegal([...prelude, asked, replied, replied], "already answered")
    expectIllegal([...prelude, e("compaction.done", { upToMessageId: MessageId.make("zz"), summary: "" })])
  })
})

describe("Projection: messages and turns", () => {
  it("a prompt is delivered by turn.started", () => {
    const s = ok(prelude)
    expect(user(s, U1)).toEqual({ role: "user", id: U1, text: "hi", mode: "prompt", at: at(2), delivered: true })
    expect(s.turn).toEqual({ turnId: T1, startedAt: at(3), messageIds: [U1] })
    expect(ok(prelude.slice(0, 2)).messages[0]).toMatchObject({ delivered: false })
  })

  it("queued messages wait in `queued` until a turn delivers them", () => {
    const Q1 = MessageId.make("q1")
    const Q2 = MessageId.make("q2")
    const base = [
      ...prelude,
      e("user.message", { messageId: Q1, text: "later", mode: "queue" }),
      e("user.message", { messageId: Q2, text: "later 2", mode: "queue" })
    ]
    const s1 = ok(base)
    expect(s1.queued).toEqual([Q1, Q2])
    expect(user(s1, Q1).delivered).toBe(false)
    const s2 = ok([
      ...base,
      e("turn.finished", { turnId: T1, reason: "stop" }),
      e("turn.started", { turnId: TurnId.make("t2"), messageIds: [Q1] })
    ])
    expect(s2.queued).toEqual([Q2])
    expect(user(s2, Q1).delivered).toBe(true)
    expect(user(s2, Q2).delivered).toBe(false)
  })

  it("a steered message is delivered by step.started", () => {
    const S1 = MessageId.make("s1")
    const base = [
      ...prelude,
      e("user.message", { messageId: S1, text: "no, the other file", mode: "steer" }),
      e("chat.state", { state: "interrupted" }),
      e("step.finished", { messageId: A1, step: 0, finishReason: "interrupted", usage, aborted: true })
    ]
    expect(user(ok(base), S1).delivered).toBe(false)
    const s = ok([...base, e("step.started", { messageId: A1, step: 1, deliveredMessageIds: [S1] })])
    expect(user(s, S1).delivered).toBe(true)
    expect(assistant(s).steps.map((x) => [x.step, x.aborted])).toEqual([
      [0, true],
      [1, false]
    ])
  })

  it("user.withdrawn removes an undelivered message (and un-queues it); a delivered one cannot be withdrawn", () => {
    const S1 = MessageId.make("s1")
    const Q1 = MessageId.make("q1")
    const base = [
      ...prelude,
      e("user.message", { messageId: S1, text: "steer", mode: "steer" }),
      e("user.message", { messageId: Q1, text: "later", mode: "queue" })
    ]
    const s = ok([...base, e("user.withdrawn", { messageId: Q1 })])
    expect(s.queued).toEqual([])
    expect(s.messages.map((m) => m.id)).toEqual([U1, A1, S1])
    const both = ok([...base, e("user.withdrawn", { messageId: S1 }), e("user.withdrawn", { messageId: Q1 })])
    expect(both.messages.map((m) => m.id)).toEqual([U1, A1])
    // the message after a withdrawn one is still found (the index of positions is rebuilt)
    const after = ok([
      ...base,
      e("user.withdrawn", { messageId: S1 }),
      e("turn.finished", { turnId: T1, reason: "stop" }),
      e("turn.started", { turnId: TurnId.make("t2"), messageIds: [Q1] })
    ])
    expect(user(after, Q1).delivered).toBe(true)
    expectIllegal([...base, e("user.withdrawn", { messageId: U1 })], "delivered")
    expectIllegal([...base, e("user.withdrawn", { messageId: A1 })], "not a user message")
    expectIllegal([...base, e("user.withdrawn", { messageId: MessageId.make("x") })], "unknown message")
    expectIllegal([...base, e("user.withdrawn", { messageId: S1 }), e("user.withdrawn", { messageId: S1 })])
    // a step cannot deliver a withdrawn message
    expectIllegal([
      ...base,
      e("chat.state", { state: "interrupted" }),
      e("step.finished", { messageId: A1, step: 0, finishReason: "interrupted", usage, aborted: true }),
      e("user.withdrawn", { messageId: S1 }),
      e("step.started", { messageId: A1, step: 1, deliveredMessageIds: [S1] })
    ])
  })

  it("model.switched: the session is on its `to` from then on; each switch is kept where it falls among the messages", () => {
    const S1 = MessageId.make("s1")
    const Q1 = MessageId.make("q1")
    const s = ok([
      ...prelude,
      e("user.message", { messageId: S1, text: "steer", mode: "steer" }),
      e("user.message", { messageId: Q1, text: "later", mode: "queue" }),
      e("step.finished", { messageId: A1, step: 0, finishReason: "stop", usage }),
      e("turn.finished", { turnId: T1, reason: "stop" }),
      e("model.switched", { from: "m", to: "other/big" })
    ])
    expect(s.model).toBe("other/big")
    expect(s.modelSwitches).toEqual([{ from: "m", to: "other/big", beforeMessage: 4, seq: 10, at: at(10) }])
    // a message withdrawn before the switch moves it up with the messages after it
    const withdrawn = ok([
      ...prelude,
      e("user.message", { messageId: S1, text: "steer", mode: "steer" }),
      e("user.message", { messageId: Q1, text: "later", mode: "queue" }),
      e("step.finished", { messageId: A1, step: 0, finishReason: "stop", usage }),
      e("turn.finished", { turnId: T1, reason: "stop" }),
      e("model.switched", { from: "m", to: "other/big" }),
      e("user.withdrawn", { messageId: S1 })
    ])
    expect(withdrawn.modelSwitches.map((change) => change.beforeMessage)).toEqual([3])
    // a later assistant.started names the model it was sent to; the last of either wins
    const later = ok([
      ...prelude,
      e("model.switched", { from: "m", to: "other/big" }),
      e("assistant.started", { messageId: MessageId.make("a2"), model: "local/small" })
    ])
    expect(later.model).toBe("local/small")
    expect(later.modelSwitches).toHaveLength(1)
  })

  it("turn.finished and turn.interrupted close the turn", () => {
    const finished = ok([...prelude, e("turn.finished", { turnId: T1, reason: "stop" })])
    expect(finished.turn).toBeNull()
    expect(finished.lastTurn).toEqual({ turnId: T1, reason: "stop", interrupted: false, at: at(6) })
    const interrupted = ok([...prelude, e("turn.interrupted", { reason: "user" })])
    expect(interrupted.turn).toBeNull()
    expect(interrupted.lastTurn).toEqual({ turnId: T1, reason: "user", interrupted: true, at: at(6) })
    // with no open turn, turn.interrupted without a turn id only records the interrupt
    const idle = ok([e("session.created", {}), e("turn.interrupted", { reason: "crash" })])
    expect(idle.lastTurn).toEqual({ reason: "crash", interrupted: true, at: at(2) })
  })

  it("illegal turn events", () => {
    expectIllegal([...prelude, e("turn.started", { turnId: TurnId.make("t2"), messageIds: [] })], "still open")
    expectIllegal([...prelude, e("turn.finished", { turnId: TurnId.make("t9"), reason: "stop" })], "not the open turn")
    expectIllegal([e("session.created", {}), e("turn.finished", { turnId: T1, reason: "stop" })], "not open")
    expectIllegal([...prelude, e("turn.interrupted", { turnId: TurnId.make("t9"), reason: "user" })])
    expectIllegal([e("session.created", {}), e("turn.started", { turnId: T1, messageIds: [MessageId.make("x")] })])
    expectIllegal(
      [
        ...prelude.slice(0, 4),
        e("turn.finished", { turnId: T1, reason: "stop" }),
        e("turn.started", { turnId: TurnId.make("t2"), messageIds: [A1] })
      ],
      "not a user message"
    )
  })

  it("duplicate message ids are illegal", () => {
    expectIllegal([...prelude, e("user.message", { messageId: U1, text: "again", mode: "prompt" })], "already exists")
    expectIllegal([...prelude, e("assistant.started", { messageId: U1 })], "already exists")
  })

  it("text and reasoning deltas append to their part, creating it at the first delta", () => {
    const P2 = PartId.make("p2")
    const R1 = PartId.make("r1")
    const s = ok([
      ...prelude,
      e("reasoning.delta", { messageId: A1, partId: R1, delta: "think" }),
      e("text.delta", { messageId: A1, partId: P1, delta: "Hel" }),
      e("reasoning.delta", { messageId: A1, partId: R1, delta: "ing" }),
      e("text.delta", { messageId: A1, partId: P1, delta: "lo" }),
      e("text.delta", { messageId: A1, partId: P2, delta: "!" })
    ])
    expect(assistant(s).parts).toEqual([
      { type: "reasoning", id: R1, text: "thinking", step: 0 },
      { type: "text", id: P1, text: "Hello", step: 0 },
      { type: "text", id: P2, text: "!", step: 0 }
    ])
  })

  it("a delta finds its part however far back, also in a state folded again from an earlier point", () => {
    const P2 = PartId.make("p2")
    const P3 = PartId.make("p3")
    const common = [
      ...prelude,
      e("text.delta", { messageId: A1, partId: P1, delta: "a" }),
      e("text.delta", { messageId: A1, partId: P2, delta: "b" }),
      ...Array.from({ length: 40 }, (_, i) =>
        e("text.delta", { messageId: A1, partId: PartId.make(`q${i}`), delta: "q" })
      )
    ]
    const left = [
      e("text.delta", { messageId: A1, partId: P1, delta: "1" }),
      e("text.delta", { messageId: A1, partId: P3, delta: "L" })
    ]
    const right = [
      e("text.delta", { messageId: A1, partId: P3, delta: "R" }),
      e("text.delta", { messageId: A1, partId: P2, delta: "2" })
    ]
    const envelopes = (tail: ReadonlyArray<Event>) => toEnvelopes(SESSION_ID, [...common, ...tail]).slice(common.length)
    const base = ok(common)
    // one event at a time (each fold copies the parts), then the other branch from the same state
    let l = base
    for (const env of envelopes(left)) l = Either.getOrThrow(Projection.apply(l, env))
    let r = base
    for (const env of envelopes(right)) r = Either.getOrThrow(Projection.apply(r, env))
    // and a third time from the left branch's state before its last event
    const l1 = Either.getOrThrow(Projection.apply(base, envelopes(left)[0]!))
    const again = Either.getOrThrow(Projection.apply(l1, envelopes(left)[1]!))
    expect(l).toEqual(ok([...common, ...left]))
    expect(again).toEqual(l)
    expect(r).toEqual(ok([...common, ...right]))
    const texts = (state: SessionState) =>
      assistant(state).parts.flatMap((part) => (part.type === "tool" ? [] : [`${part.id}=${part.text}`]))
    expect(texts(l).filter((t) => !t.startsWith("q"))).toEqual(["p1=a1", "p2=b", "p3=L"])
    expect(texts(r).filter((t) => !t.startsWith("q"))).toEqual(["p1=a", "p2=b2", "p3=R"])
    expect(assistant(base).parts).toHaveLength(42)
  })

  it("parts carry the step that produced them, so an aborted step's output can be left out", () => {
    const P2 = PartId.make("p2")
    const s = ok([
      ...prelude,
      e("text.delta", { messageId: A1, partId: P1, delta: "cut off mid-" }),
      e("step.finished", { messageId: A1, step: 0, finishReason: "error", usage, aborted: true }),
      e("step.started", { messageId: A1, step: 1 }),
      e("text.delta", { messageId: A1, partId: P2, delta: "whole answer" })
    ])
    const message = assistant(s)
    const aborted = new Set(message.steps.filter((x) => x.aborted).map((x) => x.step))
    expect(message.parts.filter((p) => p.step === undefined || !aborted.has(p.step))).toEqual([
      { type: "text", id: P2, text: "whole answer", step: 1 }
    ])
  })

  it("illegal deltas", () => {
    const delta = (messageId: MessageId) => e("text.delta", { messageId, partId: P1, delta: "x" })
    expectIllegal([...prelude, delta(MessageId.make("nope"))], "unknown message")
    expectIllegal([...prelude, delta(U1)], "user message")
    expectIllegal(
      [...prelude, delta(A1), e("reasoning.delta", { messageId: A1, partId: P1, delta: "x" })],
      "is a text part"
    )
    expectIllegal([...prelude, e("assistant.completed", { messageId: A1 }), delta(A1)], "already completed")
  })

  it("step.finished sums usage into the message and the totals; assistant.completed closes the message", () => {
    const s = ok([
      ...prelude,
      e("step.finished", { messageId: A1, step: 0, finishReason: "tool-calls", usage }),
      e("step.started", { messageId: A1, step: 1 }),
      e("step.finished", { messageId: A1, step: 1, finishReason: "stop", usage }),
      e("assistant.completed", { messageId: A1, finishReason: "stop" })
    ])
    const expected = { input: 20, output: 10, reasoning: 2, cacheRead: 4, cacheWrite: 6, cost: 1 }
    expect(assistant(s).usage).toEqual(expected)
    expect(s.totals).toEqual(expected)
    expect(assistant(s).steps[0]).toEqual({
      step: 0,
      startedAt: at(5),
      endedAt: at(6),
      finishReason: "tool-calls",
      usage,
      aborted: false
    })
    expect(assistant(s).completedAt).toBe(at(9))
    expect(assistant(s).finishReason).toBe("stop")
  })

  it("a step whose cost is unknown makes the sums' cost partly unknown; known costs still add up", () => {
    const unpriced = { ...usage, cost: 0, costKnown: false }
    const s = ok([
      ...prelude,
      e("step.finished", { messageId: A1, step: 0, finishReason: "tool-calls", usage }),
      e("step.started", { messageId: A1, step: 1 }),
      e("step.finished", { messageId: A1, step: 1, finishReason: "stop", usage: unpriced })
    ])
    const expected = { input: 20, output: 10, reasoning: 2, cacheRead: 4, cacheWrite: 6, cost: 0.5, costKnown: false }
    expect(assistant(s).usage).toEqual(expected)
    expect(s.totals).toEqual(expected)
    expect(assistant(s).steps.map((step) => step.usage?.costKnown)).toEqual([undefined, false])
    // through a snapshot (JSON) and back
    const decoded = Projection.decodeState(JSON.parse(JSON.stringify(Either.getOrThrow(Projection.encodeState(s)))))
    expect(Either.getOrThrow(decoded).totals).toEqual(expected)
  })

  it("illegal step and assistant events", () => {
    const finish = (step: number) => e("step.finished", { messageId: A1, step, finishReason: "stop", usage })
    expectIllegal([...prelude, e("step.started", { messageId: A1, step: 1 })], "still open")
    expectIllegal([...prelude, finish(3)], "not open")
    expectIllegal([...prelude, finish(0), finish(0)], "not open")
    expectIllegal([...prelude, e("step.started", { messageId: U1, step: 0 })], "user message")
    const done = e("assistant.completed", { messageId: A1 })
    expectIllegal([...prelude, done, done], "already completed")
    expectIllegal([...prelude, e("assistant.completed", { messageId: MessageId.make("nope") })], "unknown message")
  })
})

// ---------------------------------------------------------------------------------------------
// the ToolPart state machine

const pending = e("tool.pending", { messageId: A1, callId: C1, tool: "bash" })
const invoked = e("tool.invoked", { messageId: A1, callId: C1, tool: "bash", input: { command: "ls" } })
const progress = e("tool.progress", { callId: C1, output: "a\nb" })
const timeout = e("tool.timeout", { callId: C1, timeoutMs: 1000 })
const finished = e("tool.finished", { callId: C1, output: "done", metadata: { exit: 0 } })
const failed = e("tool.failed", { callId: C1, error: "boom" })
const interrupted = e("tool.failed", { callId: C1, error: "cut", interrupted: true, reason: "user" })

describe("Projection: ToolPart transitions", () => {
  it("(none) -> pending via tool.pending, with a ref in the message", () => {
    const s = ok([...prelude, pending])
    expect(tool(s)).toEqual({
      type: "tool",
      callId: C1,
      tool: "bash",
      messageId: A1,
      state: { _tag: "pending", inputText: "", createdAt: at(6) }
    })
    expect(assistant(s).parts).toEqual([{ type: "tool", callId: C1, step: 0 }])
  })

  it("(none) -> running via tool.invoked", () => {
    const s = ok([...prelude, invoked])
    expect(tool(s).state).toEqual({ _tag: "running", input: { command: "ls" }, startedAt: at(6), timedOut: false })
    expect(assistant(s).parts).toEqual([{ type: "tool", callId: C1, step: 0 }])
  })

  it("pending -> running via tool.invoked, keeping one ref", () => {
    const s = ok([...prelude, pending, invoked])
    expect(tool(s).state._tag).toBe("running")
    expect(assistant(s).parts).toEqual([{ type: "tool", callId: C1, step: 0 }])
  })

  it("running -> running via tool.progress (latest) and tool.timeout", () => {
    const s = ok([...prelude, invoked, progress, e("tool.progress", { callId: C1, output: "latest" }), timeout])
    expect(tool(s).state).toEqual({
      _tag: "running",
      input: { command: "ls" },
      startedAt: at(6),
      progress: "latest",
      timedOut: true
    })
  })

  it("running -> running via tool.process: each process group the call started is kept", () => {
    const group = (pgid: number) => ({ pgid, token: `t${pgid}` })
    const s = ok([
      ...prelude,
      invoked,
      e("tool.process", { callId: C1, ...group(41) }),
      e("tool.process", { callId: C1, pgid: 42 })
    ])
    expect(tool(s).state).toEqual({
      _tag: "running",
      input: { command: "ls" },
      startedAt: at(6),
      timedOut: false,
      processes: [group(41), { pgid: 42 }]
    })
  })

  it("tool.finished with reads: the session's reads keep each file's latest stamp", () => {
    const c2 = "c2" as CallId
    const s = ok([
      ...prelude,
      invoked,
      e("tool.finished", {
        callId: C1,
        output: "read",
        reads: [
          { path: "/w/a.ts", mtimeMs: 1, size: 10, hash: "h1" },
          { path: "/w/b.ts", mtimeMs: 2, size: 20 }
        ]
      }),
      e("tool.invoked", { messageId: A1, callId: c2, tool: "edit", input: {} }),
      e("tool.finished", {
        callId: c2,
        output: "edited",
        reads: [{ path: "/w/a.ts", mtimeMs: 3, size: 12, hash: "h2" }]
      })
    ])
    expect(Object.fromEntries(s.reads)).toEqual({
      "/w/a.ts": { mtimeMs: 3, size: 12, hash: "h2" },
      "/w/b.ts": { mtimeMs: 2, size: 20 }
    })
    expect(Projection.empty(SESSION_ID).reads.size).toBe(0)
  })

  it("running -> completed via tool.finished", () => {
    const s = ok([...prelude, invoked, finished])
    expect(tool(s).state).toEqual({
      _tag: "completed",
      input: { command: "ls" },
      output: "done",
      metadata: { exit: 0 },
      startedAt: at(6),
      endedAt: at(7)
    })
  })

  it("running -> error via tool.failed (a timed-out call stays timed out)", () => {
    const s = ok([...prelude, invoked, timeout, failed])
    expect(tool(s).state).toEqual({
      _tag: "error",
      input: { command: "ls" },
      error: "boom",
      interrupted: false,
      timedOut: true,
      startedAt: at(6),
      endedAt: at(8)
    })
  })

  it("pending -> error via tool.failed with the interrupted flags", () => {
    const s = ok([...prelude, pending, interrupted])
    expect(tool(s).state).toEqual({
      _tag: "error",
      input: {},
      error: "cut",
      interrupted: true,
      timedOut: false,
      reason: "user",
      endedAt: at(7)
    })
  })

  const illegalCases: ReadonlyArray<readonly [string, ReadonlyArray<Event>, string]> = [
    ["tool.pending twice", [pending, pending], "already exists"],
    ["tool.pending on a running call", [invoked, pending], "already exists"],
    ["tool.invoked on a running call", [invoked, invoked], "not pending"],
    ["tool.invoked on a completed call", [invoked, finished, invoked], "not pending"],
    ["tool.invoked on a failed call", [pending, failed, invoked], "not pending"],
    [
      "tool.invoked with another message",
      [
        pending,
        e("assistant.started", { messageId: MessageId.make("a2") }),
        e("tool.invoked", { messageId: MessageId.make("a2"), callId: C1, tool: "bash", input: {} })
      ],
      "belongs to message"
    ],
    [
      "tool.invoked with another tool",
      [pending, e("tool.invoked", { messageId: A1, callId: C1, tool: "read", input: {} })],
      "bash call"
    ],
    ["tool.progress on a pending call", [pending, progress], "not running"],
    ["tool.progress on a completed call", [invoked, finished, progress], "not running"],
    ["tool.timeout on a pending call", [pending, timeout], "not running"],
    ["tool.timeout on a failed call", [invoked, failed, timeout], "not running"],
    ["tool.finished on a pending call", [pending, finished], "not running"],
    ["tool.finished on a completed call", [invoked, finished, finished], "not running"],
    ["tool.finished on a failed call", [invoked, failed, finished], "not running"],
    ["tool.failed on a completed call", [invoked, finished, failed], "already completed"],
    ["tool.failed on a failed call", [invoked, interrupted, failed], "already error"],
    ["tool.progress on an unknown call", [progress], "unknown call"],
    ["tool.timeout on an unknown call", [timeout], "unknown call"],
    ["tool.process on a pending call", [pending, e("tool.process", { callId: C1, pgid: 7 })], "not running"],
    [
      "tool.process on a completed call",
      [invoked, finished, e("tool.process", { callId: C1, pgid: 7 })],
      "not running"
    ],
    ["tool.finished on an unknown call", [finished], "unknown call"],
    ["tool.failed on an unknown call", [failed], "unknown call"],
    [
      "tool.pending in an unknown message",
      [e("tool.pending", { messageId: MessageId.make("nope"), callId: C1, tool: "bash" })],
      "unknown message"
    ],
    [
      "tool.invoked in an unknown message",
      [e("tool.invoked", { messageId: MessageId.make("nope"), callId: C1, tool: "bash", input: {} })],
      "unknown message"
    ],
    [
      "tool.invoked in a user message",
      [e("tool.invoked", { messageId: U1, callId: C1, tool: "bash", input: {} })],
      "user message"
    ],
    ["tool.pending in a completed message", [e("assistant.completed", { messageId: A1 }), pending], "completed"]
  ]

  for (const [name, events, message] of illegalCases) {
    it(`illegal: ${name}`, () => expectIllegal([...prelude, ...events], message))
  }

  it("a final part is not changed by a later illegal event, and the input state is kept", () => {
    const s = ok([...prelude, invoked, finished])
    const result = Projection.apply(s, toEnvelopes(SESSION_ID, [failed], { fromSeq: s.lastSeq + 1 })[0]!)
    expect(Either.isLeft(result)).toBe(true)
    expect(tool(s).state._tag).toBe("completed")
  })
})

describe("Projection: actions", () => {
  const action = (state: "pending" | "running" | "archived" | "failed") =>
    e("action.state", { actionId: X1, state, callIds: [C1] })

  it("pending -> running -> archived, and pending -> failed", () => {
    const s = ok([...prelude, action("pending"), action("running"), action("archived")])
    expect(s.actions.get(X1)).toEqual({ state: "archived", callIds: [C1], updatedAt: at(8) })
    expect(ok([...prelude, action("pending"), action("failed")]).actions.get(X1)!.state).toBe("failed")
    expect(ok([...prelude, action("running")]).actions.get(X1)!.state).toBe("running")
    expect(Projection.openActions(ok([...prelude, action("running")])).map(([id]) => id)).toEqual([X1])
  })

  it("archived and failed are final; an action starts pending or running", () => {
    expectIllegal([...prelude, action("archived")], "from none")
    expectIllegal([...prelude, action("failed")], "from none")
    expectIllegal([...prelude, action("running"), action("pending")], "from running to pending")
    expectIllegal([...prelude, action("running"), action("archived"), action("running")], "from archived")
    expectIllegal([...prelude, action("pending"), action("failed"), action("failed")], "from failed")
  })
})

describe("Projection: purity and encoding", () => {
  it("apply never mutates its input (deeply frozen states fold fine and stay equal)", () => {
    const events = simulate(
      Array.from({ length: 300 }, (_, i) => (i * 7919) % 1000),
      { deltaWeight: 6 }
    )
    const envelopes = toEnvelopes(SESSION_ID, events)
    let state = Projection.empty(SESSION_ID)
    for (const env of envelopes) {
      const before = structuredClone(state)
      deepFreeze(state)
      const next = Projection.apply(state, env)
      expect(Either.isRight(next)).toBe(true)
      expect(state).toEqual(before)
      state = Either.getOrThrow(next)
    }
    expect(state.lastSeq).toBe(envelopes.length)
  })

  it("applyAll never mutates its input", () => {
    const envelopes = toEnvelopes(SESSION_ID, simulate(Array.from({ length: 200 }, (_, i) => (i * 104729) % 9973)))
    const half = Either.getOrThrow(Projection.applyAll(Projection.empty(SESSION_ID), envelopes.slice(0, 100)))
    const before = structuredClone(half)
    deepFreeze(half)
    const full = Either.getOrThrow(Projection.applyAll(half, envelopes.slice(100)))
    expect(half).toEqual(before)
    expect(full.lastSeq).toBe(envelopes.length)
  })

  it("a failed applyAll leaves its input unchanged", () => {
    const s = ok(prelude)
    const before = structuredClone(s)
    const events = toEnvelopes(SESSION_ID, [...prelude, e("text.delta", { messageId: A1, partId: P1, delta: "x" })])
    const bad = toEnvelopes(SESSION_ID, [...prelude, progress])
    const result = Projection.applyAll(s, [events[5]!, { ...bad[5]!, seq: 7 }])
    expect(Either.isLeft(result)).toBe(true)
    expect(s).toEqual(before)
  })

  it("a state encodes to JSON and decodes back; garbage does not decode", () => {
    const s = ok([...prelude, invoked, progress, e("text.delta", { messageId: A1, partId: P1, delta: "é🙂" })])
    const json = JSON.parse(JSON.stringify(Either.getOrThrow(Projection.encodeState(s))))
    expect(Either.getOrThrow(Projection.decodeState(json))).toEqual(s)
    expect(Either.isLeft(Projection.decodeState({ ...json, lastSeq: "seven" }))).toBe(true)
    expect(Either.isLeft(Projection.decodeState(null))).toBe(true)
  })

  it("toJsonState is the Schema's encoding without the Schema (snapshots save it), and decodes back to the state", () => {
    FastCheck.assert(
      FastCheck.property(envelopesArb({ maxLength: 150 }), (envelopes) => {
        const s = Either.getOrThrow(Projection.applyAll(Projection.empty(SESSION_ID), envelopes))
        const encoded = Either.getOrThrow(Projection.encodeState(s))
        // the same JSON value (the encode writes keys in the Schema's order; key order is not part of it)
        const asJson = (value: unknown): unknown => JSON.parse(JSON.stringify(value))
        const json = asJson(Projection.toJsonState(s))
        expect(json).toStrictEqual(asJson(encoded))
        expect(Either.getOrThrow(Projection.decodeState(json))).toEqual(s)
        // what an intact snapshot is restored with, without the Schema
        expect(Projection.fromJsonState(json)).toEqual(s)
      }),
      { numRuns: 300, seed: 7 }
    )
  })

  it("a folder that releases each settled message as it goes ends in the full fold's state but for their content", () => {
    FastCheck.assert(
      FastCheck.property(envelopesArb({ maxLength: 150 }), (envelopes) => {
        const full = Either.getOrThrow(Projection.applyAll(Projection.empty(SESSION_ID), envelopes))
        const f = Projection.folder(Projection.empty(SESSION_ID))
        let released = 0
        for (const env of envelopes) {
          expect(Either.isRight(f.push(env))).toBe(true)
          const upTo = Projection.settledUpTo(Either.getOrThrow(f.view()), released)
          // a settled message stays as it was in the full fold (later events leave it alone)
          for (let i = released; i < upTo; i++) {
            const message = Either.getOrThrow(f.view()).messages[i]!
            expect(message.id).toBe(full.messages[i]!.id)
            if (message.role === "user") expect(message.text).toBe((full.messages[i] as UserMessage).text)
            else expect(message.parts).toEqual((full.messages[i] as AssistantMessage).parts)
          }
          f.release(upTo)
          released = upTo
        }
        const end = Either.getOrThrow(f.view())
        const { messages: _m, toolParts: _t, ...rest } = end
        const { messages: _fm, toolParts: _ft, ...fullRest } = full
        expect(rest).toEqual(fullRest)
        expect(end.messages.map((m) => m.id)).toEqual(full.messages.map((m) => m.id))
        expect(end.messages.slice(released)).toEqual(full.messages.slice(released))
        expect([...end.toolParts.keys()]).toEqual([...full.toolParts.keys()])
        for (const [callId, part] of end.toolParts) expect(part.state._tag).toBe(full.toolParts.get(callId)!.state._tag)
      }),
      { numRuns: 300, seed: 11 }
    )
  })

  it("the per-call maps keep their entries in the order the calls came, through a snapshot's JSON too", () => {
    FastCheck.assert(
      FastCheck.property(envelopesArb({ maxLength: 150 }), (envelopes) => {
        const s = Either.getOrThrow(Projection.applyAll(Projection.empty(SESSION_ID), envelopes))
        // a part comes with the first event of its call (pending, or invoked without a pending)
        const pending = Array.from(
          new Set(
            envelopes.flatMap((e) => (e.type === "tool.pending" || e.type === "tool.invoked" ? [e.payload.callId] : []))
          )
        )
        expect(Array.from(s.toolParts.keys())).toEqual(pending)
        const back = Either.getOrThrow(Projection.decodeState(JSON.parse(JSON.stringify(Projection.toJsonState(s)))))
        expect(Array.from(back.toolParts.keys())).toEqual(pending)
        expect(Array.from(back.actions.keys())).toEqual(Array.from(s.actions.keys()))
      }),
      { numRuns: 200, seed: 11 }
    )
  })

  it("resolveParts puts the tool parts in message order", () => {
    const s = ok([...prelude, e("text.delta", { messageId: A1, partId: P1, delta: "x" }), invoked])
    expect(Projection.resolveParts(s, assistant(s)).map((p) => p.type)).toEqual(["text", "tool"])
    expect((Projection.resolveParts(s, assistant(s))[1] as ToolPart).state._tag).toBe("running")
  })
})

// ---------------------------------------------------------------------------------------------
// properties over random valid sequences

const foldOneByOne = (envelopes: ReadonlyArray<Envelope>): Array<SessionState> => {
  const states: Array<SessionState> = [Projection.empty(SESSION_ID)]
  for (const env of envelopes) states.push(Either.getOrThrow(Projection.apply(states[states.length - 1]!, env)))
  return states
}

const roundTrip = (state: SessionState): SessionState =>
  Either.getOrThrow(
    Projection.decodeState(JSON.parse(JSON.stringify(Either.getOrThrow(Projection.encodeState(state)))))
  )

describe("Projection: properties", () => {
  it("generated sequences are valid and non-trivial", () => {
    // the generator itself: every sequence folds, and the corpus covers every event type
    const seen = new Set<string>()
    FastCheck.assert(
      FastCheck.property(envelopesArb({ maxLength: 150 }), (envelopes) => {
        for (const env of envelopes) seen.add(env.type)
        return Either.isRight(Projection.applyAll(Projection.empty(SESSION_ID), envelopes))
      }),
      // enough runs that the rarer events (a running call's process, its permission asks) show up
      { numRuns: 1000, seed: 42 }
    )
    const missing = [
      "session.created",
      "session.titled",
      "user.message",
      "turn.started",
      "turn.finished",
      "turn.interrupted",
      "assistant.started",
      "step.started",
      "text.delta",
      "reasoning.delta",
      "step.finished",
      "assistant.completed",
      "tool.pending",
      "tool.invoked",
      "tool.progress",
      "tool.process",
      "tool.finished",
      "tool.failed",
      "tool.timeout",
      "action.state",
      "chat.state",
      "session.status",
      "model.retry",
      "model.error",
      "prompt.recorded",
      "permission.asked",
      "permission.replied",
      "file.changed",
      "compaction.done"
    ].filter((t) => !seen.has(t))
    expect(missing).toEqual([])
  })

  it("(c) applyAll equals folding apply one event at a time", () => {
    FastCheck.assert(
      FastCheck.property(envelopesArb({ maxLength: 120 }), FastCheck.nat(), (envelopes, cut) => {
        const states = foldOneByOne(envelopes)
        expect(Either.getOrThrow(Projection.applyAll(Projection.empty(SESSION_ID), envelopes))).toEqual(
          states[states.length - 1]
        )
        // and from an intermediate state
        const k = envelopes.length === 0 ? 0 : cut % envelopes.length
        expect(Either.getOrThrow(Projection.applyAll(states[k]!, envelopes.slice(k)))).toEqual(
          states[states.length - 1]
        )
      }),
      { numRuns: 200, seed: 7 }
    )
  })

  it("(a) a snapshot at any seq (through JSON) + the tail equals the full fold at every later seq", () => {
    FastCheck.assert(
      FastCheck.property(envelopesArb({ maxLength: 100 }), FastCheck.nat(), (envelopes, cut) => {
        const states = foldOneByOne(envelopes)
        const k = cut % (envelopes.length + 1)
        const snapshot = roundTrip(states[k]!)
        expect(snapshot).toEqual(states[k])
        for (let n = k; n <= envelopes.length; n++) {
          expect(Either.getOrThrow(Projection.applyAll(snapshot, envelopes.slice(k, n)))).toEqual(states[n])
        }
      }),
      { numRuns: 150, seed: 11 }
    )
  })

  it("(b) once a tool part is completed or error it never changes again", () => {
    FastCheck.assert(
      FastCheck.property(envelopesArb({ maxLength: 150 }), (envelopes) => {
        const finals = new Map<CallId, ToolState>()
        let state = Projection.empty(SESSION_ID)
        for (const env of envelopes) {
          state = Either.getOrThrow(Projection.apply(state, env))
          for (const [callId, state_] of finals) expect(state.toolParts.get(callId)!.state).toBe(state_)
          for (const part of Array.from(state.toolParts.values())) {
            if (Projection.isToolFinal(part.state) && !finals.has(part.callId)) finals.set(part.callId, part.state)
          }
        }
        // and any tool event on a final part is rejected
        for (const callId of finals.keys()) {
          for (const event of [
            e("tool.finished", { callId, output: "again" }),
            e("tool.failed", { callId, error: "again" }),
            e("tool.progress", { callId, output: "again" }),
            e("tool.timeout", { callId, timeoutMs: 1 }),
            e("tool.invoked", { messageId: state.toolParts.get(callId)!.messageId, callId, tool: "x", input: {} })
          ]) {
            const env = toEnvelopes(SESSION_ID, [event], { fromSeq: state.lastSeq + 1 })[0]!
            expect(Either.isLeft(Projection.apply(state, env))).toBe(true)
          }
        }
      }),
      { numRuns: 200, seed: 3 }
    )
  })

  it("folding never mutates a frozen intermediate state", () => {
    FastCheck.assert(
      FastCheck.property(envelopesArb({ maxLength: 80 }), FastCheck.nat(), (envelopes, cut) => {
        const k = envelopes.length === 0 ? 0 : cut % envelopes.length
        const mid = Either.getOrThrow(Projection.applyAll(Projection.empty(SESSION_ID), envelopes.slice(0, k)))
        const copy = structuredClone(mid)
        deepFreeze(mid)
        Either.getOrThrow(Projection.applyAll(mid, envelopes.slice(k)))
        expect(mid).toEqual(copy)
      }),
      { numRuns: 150, seed: 5 }
    )
  })
})
