/**
 * Small hand-written sessions shared by the projection and history tests: the ids, a usage, and a
 * prelude that opens a turn, an assistant message and its step 0.
 */
import { type Event, type EventType, make, type PayloadOf } from "../../src/domain/Events.js"
import { CallId, MessageId, PartId, TurnId } from "../../src/domain/Ids.js"

/** An event with its payload type checked. */
export const e = <T extends EventType>(type: T, payload: PayloadOf<T>): Event => make(type, payload)

export const U1 = MessageId.make("u1")
export const A1 = MessageId.make("a1")
export const T1 = TurnId.make("t1")
export const C1 = CallId.make("c1")
export const P1 = PartId.make("p1")

export const usage = { input: 10, output: 5, reasoning: 1, cacheRead: 2, cacheWrite: 3, cost: 0.5 }

/** A session with an open turn, an assistant message and its step 0 open. */
export const prelude: ReadonlyArray<Event> = [
  e("session.created", { title: "t", cwd: "/w", model: "m" }),
  e("user.message", { messageId: U1, text: "hi", mode: "prompt" }),
  e("turn.started", { turnId: T1, messageIds: [U1] }),
  e("assistant.started", { messageId: A1 }),
  e("step.started", { messageId: A1, step: 0 })
]
