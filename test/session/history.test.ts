import { createHash } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { Either, FastCheck } from "effect"
import type { Event } from "../../src/domain/Events.js"
import { CallId, MessageId, PartId, TurnId } from "../../src/domain/Ids.js"
import type { AssistantMessage } from "../../src/domain/Message.js"
import type { ModelMessage } from "../../src/model/Model.js"
import {
  summaryContent,
  toModelMessages,
  toolResult,
  unansweredCalls,
  validateHistory,
  wasInvoked
} from "../../src/session/History.js"
import { requestDigestOf } from "../../src/session/PromptVersion.js"
import type { SessionState } from "../../src/store/Projection.js"
import * as Projection from "../../src/store/Projection.js"
import { adversarialLog } from "../support/adversarialLog.js"
import { envelopesArb, SESSION_ID, simulate, toEnvelopes } from "../support/arbitraries.js"
import { A1, C1, e, P1, prelude, T1, U1, usage } from "../support/fixtures.js"

// ---------------------------------------------------------------------------------------------
// helpers

const C2 = CallId.make("c2")
const C3 = CallId.make("c3")
const C4 = CallId.make("c4")
const P2 = PartId.make("p2")
const P3 = PartId.make("p3")

const text = (partId: PartId, delta: string, messageId: MessageId = A1) => e("text.delta", { messageId, partId, delta })
const reasoning = (partId: PartId, delta: string, messageId: MessageId = A1) =>
  e("reasoning.delta", { messageId, partId, delta })
/** `tool.invoked` of a `read` call; the input is `{path: "a.ts"}` unless given (even as undefined) */
const invoked = (callId: CallId, ...input: [unknown?]) =>
  e("tool.invoked", { messageId: A1, callId, tool: "read", input: input.length > 0 ? input[0] : { path: "a.ts" } })
const finished = (callId: CallId, output = `out ${callId}`) => e("tool.finished", { callId, output })
const stepFinished = (step: number, aborted = false, messageId: MessageId = A1) =>
  e("step.finished", {
    messageId,
    step,
    finishReason: aborted ? "interrupted" : "stop",
    usage,
    ...(aborted ? { aborted } : {})
  })
const stepStarted = (step: number, messageId: MessageId = A1) => e("step.started", { messageId, step })

const ok = (events: ReadonlyArray<Event>): SessionState => {
  const result = Projection.applyAll(Projection.empty(SESSION_ID), toEnvelopes(SESSION_ID, events))
  if (Either.isLeft(result)) throw new Error(`unexpected ProjectionError: ${result.left.message}`)
  return result.right
}

/** Builds the history and asserts it is valid. */
const history = (events: ReadonlyArray<Event>, options?: { includeReasoning?: boolean | string }) => {
  const messages = toModelMessages(ok(events), options)
  expect(validateHistory(messages)).toEqual([])
  return messages
}

const user = (content: string): ModelMessage => ({ role: "user", content })
const call = (callId: CallId, ...input: [unknown?]) =>
  ({ type: "tool-call", callId, tool: "read", input: input.length > 0 ? input[0] : { path: "a.ts" } }) as const
const ok_ = (callId: CallId, output = `out ${callId}`) => ({ callId, tool: "read", output, isError: false })

/** An adversarial log (test/support/adversarialLog.ts), with step numbers recorded again in every other one. */
const adversarial = (choices: ReadonlyArray<number>): Array<Event> =>
  adversarialLog(choices, { dupSteps: (choices[0] ?? 0) % 2 === 0 })

const deepFreeze = <T>(value: T): T => {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const v of Object.values(value)) deepFreeze(v)
  }
  return value
}

// ---------------------------------------------------------------------------------------------
// unit tests

describe("History: steps and tool results", () => {
  it("a plain answer: the prompt, then the text", () => {
    expect(history([...prelude, text(P1, "hel"), text(P1, "lo"), stepFinished(0)])).toEqual([
      user("hi"),
      { role: "assistant", parts: [{ type: "text", text: "hello" }] }
    ])
  })

  it("splits an assistant message per step, each step's calls answered right after it", () => {
    const messages = history([
      ...prelude,
      text(P1, "let me look"),
      invoked(C1),
      invoked(C2, { path: "b.ts" }),
      stepFinished(0),
      finished(C2),
      finished(C1),
      stepStarted(1),
      text(P2, "done"),
      stepFinished(1),
      e("assistant.completed", { messageId: A1, finishReason: "stop" }),
      e("turn.finished", { turnId: T1, reason: "stop" })
    ])
    expect(messages).toEqual([
      user("hi"),
      { role: "assistant", parts: [{ type: "text", text: "let me look" }, call(C1), call(C2, { path: "b.ts" })] },
      { role: "tool", results: [ok_(C1), ok_(C2)] },
      { role: "assistant", parts: [{ type: "text", text: "done" }] }
    ])
  })

  it("keeps text and calls in stream order within a step", () => {
    const messages = history([...prelude, text(P1, "a"), invoked(C1), text(P2, "b"), invoked(C2), stepFinished(0)])
    expect(messages[1]).toEqual({
      role: "assistant",
      parts: [{ type: "text", text: "a" }, call(C1), { type: "text", text: "b" }, call(C2)]
    })
    expect(messages[2]).toMatchObject({ role: "tool", results: [{ callId: C1 }, { callId: C2 }] })
  })

  it("a failed call is an error result with the tool's error text", () => {
    const messages = history([...prelude, invoked(C1), e("tool.failed", { callId: C1, error: "exit code 2" })])
    expect(messages[2]).toEqual({
      role: "tool",
      results: [{ callId: C1, tool: "read", output: "exit code 2", isError: true }]
    })
  })

  it("an interrupted call is an error result that says so, with the reason", () => {
    const messages = history([
      ...prelude,
      invoked(C1),
      e("tool.failed", { callId: C1, error: "interrupted by the user", interrupted: true, reason: "user" })
    ])
    expect(messages[2]).toEqual({
      role: "tool",
      results: [
        {
          callId: C1,
          tool: "read",
          output: "The call was interrupted (user) before it finished.\ninterrupted by the user",
          isError: true
        }
      ]
    })
  })

  it("a timed-out call says it timed out; interrupted while timing out says both", () => {
    const timedOut = history([
      ...prelude,
      invoked(C1),
      e("tool.timeout", { callId: C1, timeoutMs: 1000 }),
      e("tool.failed", { callId: C1, error: "killed after 1s" })
    ])
    expect(timedOut[2]).toMatchObject({
      results: [{ output: "The call timed out before it finished.\nkilled after 1s", isError: true }]
    })
    const crashed = history([
      ...prelude,
      invoked(C1),
      e("tool.timeout", { callId: C1, timeoutMs: 1000 }),
      e("tool.failed", { callId: C1, error: "", interrupted: true, reason: "crash" })
    ])
    expect(crashed[2]).toMatchObject({
      results: [
        { output: "The call was interrupted (crash) before it finished. It had timed out and was being stopped." }
      ]
    })
  })

  it("calls still pending or running (a state mid-step) get a 'did not finish' error result", () => {
    const messages = history([
      ...prelude,
      e("tool.pending", { messageId: A1, callId: C1, tool: "write" }),
      invoked(C2),
      e("tool.progress", { callId: C2, output: "half" })
    ])
    expect(messages[1]).toEqual({
      role: "assistant",
      parts: [{ type: "tool-call", callId: C1, tool: "write", input: {} }, call(C2)]
    })
    expect(messages[2]).toMatchObject({
      role: "tool",
      results: [
        { callId: C1, tool: "write", isError: true, output: expect.stringContaining("did not finish") },
        { callId: C2, tool: "read", isError: true, output: expect.stringContaining("still running") }
      ]
    })
  })

  it("a call whose input is not an object is sent with {} and the state's error as its result", () => {
    for (const input of [undefined, null, "{not json", [1, 2], 42]) {
      const messages = history([
        ...prelude,
        invoked(C1, input),
        e("tool.failed", { callId: C1, error: "the input is not valid JSON: {not json" })
      ])
      expect(messages[1]).toEqual({ role: "assistant", parts: [call(C1, {})] })
      expect(messages[2]).toMatchObject({
        results: [{ callId: C1, isError: true, output: "the input is not valid JSON: {not json" }]
      })
    }
  })

  it("a pending call whose input was cut off keeps {} and an error result in a finished step", () => {
    const messages = history([
      ...prelude,
      text(P1, "writing"),
      e("tool.pending", { messageId: A1, callId: C1, tool: "write" }),
      e("tool.failed", { callId: C1, error: "the call's input was cut off", interrupted: true, reason: "step" }),
      stepFinished(0)
    ])
    expect(messages.slice(1)).toEqual([
      {
        role: "assistant",
        parts: [
          { type: "text", text: "writing" },
          { type: "tool-call", callId: C1, tool: "write", input: {} }
        ]
      },
      {
        role: "tool",
        results: [
          {
            callId: C1,
            tool: "write",
            output: "The call was interrupted (step) before it finished.\nthe call's input was cut off",
            isError: true
          }
        ]
      }
    ])
  })
})

describe("History: aborted steps", () => {
  it("leaves out the text, reasoning and never-run calls of an aborted step, keeps calls that ran", () => {
    const messages = history(
      [
        ...prelude,
        reasoning(P1, "thinking"),
        text(P2, "partial answer"),
        invoked(C1), // ran and completed
        invoked(C2, { path: "b.ts" }), // ran, then was interrupted
        e("tool.pending", { messageId: A1, callId: C3, tool: "write" }), // never ran, cut off
        e("tool.pending", { messageId: A1, callId: C4, tool: "write" }), // never ran, failed from pending
        finished(C1),
        e("tool.failed", { callId: C3, error: "cut off", interrupted: true, reason: "step" }),
        e("model.retry", { attempt: 1, delayMs: 100, nextAt: 1, message: "overloaded" }),
        e("tool.failed", { callId: C4, error: "cut off", interrupted: true, reason: "step" }),
        e("tool.failed", { callId: C2, error: "stopped", interrupted: true, reason: "retry" }),
        stepFinished(0, true),
        stepStarted(1),
        text(P3, "the real answer"),
        stepFinished(1)
      ],
      { includeReasoning: true }
    )
    expect(messages).toEqual([
      user("hi"),
      { role: "assistant", parts: [call(C1), call(C2, { path: "b.ts" })] },
      {
        role: "tool",
        results: [
          ok_(C1),
          {
            callId: C2,
            tool: "read",
            output: "The call was interrupted (retry) before it finished.\nstopped",
            isError: true
          }
        ]
      },
      { role: "assistant", parts: [{ type: "text", text: "the real answer" }] }
    ])
  })

  it("an aborted step with only text leaves nothing", () => {
    const messages = history([...prelude, text(P1, "partial"), stepFinished(0, true), stepStarted(1)])
    expect(messages).toEqual([user("hi")])
  })

  it("parts without a step (older logs) belong to no aborted step", () => {
    const messages = history([
      e("user.message", { messageId: U1, text: "hi", mode: "prompt" }),
      e("turn.started", { turnId: T1, messageIds: [U1] }),
      e("assistant.started", { messageId: A1 }),
      text(P1, "old text"),
      invoked(C1),
      finished(C1),
      e("step.started", { messageId: A1, step: 0 }),
      text(P2, "cut"),
      stepFinished(0, true)
    ])
    expect(messages).toEqual([
      user("hi"),
      { role: "assistant", parts: [{ type: "text", text: "old text" }, call(C1)] },
      { role: "tool", results: [ok_(C1)] }
    ])
  })
})

describe("History: user messages", () => {
  it("undelivered messages are not sent; a steered message goes before the step that delivered it", () => {
    const S1 = MessageId.make("s1")
    const base = [
      ...prelude,
      text(P1, "reading"),
      invoked(C1),
      stepFinished(0),
      e("user.message", { messageId: S1, text: "use b.ts instead", mode: "steer" }),
      finished(C1)
    ]
    // recorded, not delivered yet: not sent
    expect(history(base)).toEqual([
      user("hi"),
      { role: "assistant", parts: [{ type: "text", text: "reading" }, call(C1)] },
      { role: "tool", results: [ok_(C1)] }
    ])
    const delivered = history([
      ...base,
      e("step.started", { messageId: A1, step: 1, deliveredMessageIds: [S1] }),
      text(P2, "ok, b.ts"),
      stepFinished(1)
    ])
    expect(delivered).toEqual([
      user("hi"),
      { role: "assistant", parts: [{ type: "text", text: "reading" }, call(C1)] },
      { role: "tool", results: [ok_(C1)] },
      user("use b.ts instead"),
      { role: "assistant", parts: [{ type: "text", text: "ok, b.ts" }] }
    ])
  })

  it("a steer that stopped the stream: the aborted partial text is dropped, the steer comes before the next step", () => {
    const S1 = MessageId.make("s1")
    const messages = history([
      ...prelude,
      text(P1, "I will edit a.ts"),
      e("user.message", { messageId: S1, text: "no, b.ts", mode: "steer" }),
      e("chat.state", { state: "interrupted" }),
      stepFinished(0, true),
      e("step.started", { messageId: A1, step: 1, deliveredMessageIds: [S1] }),
      text(P2, "editing b.ts")
    ])
    expect(messages).toEqual([
      user("hi"),
      user("no, b.ts"),
      { role: "assistant", parts: [{ type: "text", text: "editing b.ts" }] }
    ])
  })

  it("a queued message waits for the next turn and comes after the turn it was recorded in", () => {
    const Q1 = MessageId.make("q1")
    const A2 = MessageId.make("a2")
    const base = [
      ...prelude,
      text(P1, "first"),
      e("user.message", { messageId: Q1, text: "and then this", mode: "queue" }),
      text(P1, " answer"),
      stepFinished(0),
      e("assistant.completed", { messageId: A1 }),
      e("turn.finished", { turnId: T1, reason: "stop" })
    ]
    expect(history(base)).toEqual([user("hi"), { role: "assistant", parts: [{ type: "text", text: "first answer" }] }])
    expect(
      history([
        ...base,
        e("turn.started", { turnId: TurnId.make("t2"), messageIds: [Q1] }),
        e("assistant.started", { messageId: A2 }),
        stepStarted(0, A2),
        text(P2, "second", A2)
      ])
    ).toEqual([
      user("hi"),
      { role: "assistant", parts: [{ type: "text", text: "first answer" }] },
      user("and then this"),
      { role: "assistant", parts: [{ type: "text", text: "second" }] }
    ])
  })
})

describe("History: filtering and compaction", () => {
  it("reasoning is left out by default and sent with includeReasoning", () => {
    const events = [...prelude, reasoning(P1, "hmm"), text(P2, "answer"), stepFinished(0)]
    expect(history(events)[1]).toEqual({ role: "assistant", parts: [{ type: "text", text: "answer" }] })
    expect(history(events, { includeReasoning: true })[1]).toEqual({
      role: "assistant",
      parts: [
        { type: "reasoning", text: "hmm" },
        { type: "text", text: "answer" }
      ]
    })
  })

  it("signed reasoning keeps its place and its metadata, a signature-only block included", () => {
    const signed = { anthropic: { signature: "sig-1" } }
    const redacted = { anthropic: { redactedData: "opaque" } }
    const P4 = PartId.make("p4")
    const events = [
      ...prelude,
      reasoning(P1, "let me look"),
      e("reasoning.delta", { messageId: A1, partId: P1, delta: "", metadata: signed }),
      e("reasoning.delta", { messageId: A1, partId: P2, delta: "", metadata: redacted }),
      text(P3, "reading"),
      e("reasoning.delta", { messageId: A1, partId: P4, delta: "", metadata: { anthropic: { signature: "sig-2" } } }),
      invoked(C1),
      finished(C1),
      stepFinished(0)
    ]
    expect(history(events, { includeReasoning: true })[1]).toEqual({
      role: "assistant",
      parts: [
        { type: "reasoning", text: "let me look", metadata: signed },
        { type: "reasoning", text: "", metadata: redacted },
        { type: "text", text: "reading" },
        { type: "reasoning", text: "", metadata: { anthropic: { signature: "sig-2" } } },
        call(C1)
      ]
    })
  })

  it("metadata of one part merges per provider key (a later value wins)", () => {
    const events = [
      ...prelude,
      e("reasoning.delta", { messageId: A1, partId: P1, delta: "a", metadata: { x: { id: "1", keep: true } } }),
      e("reasoning.delta", { messageId: A1, partId: P1, delta: "b", metadata: { x: { id: "2" }, y: { n: 1 } } }),
      stepFinished(0)
    ]
    expect(history(events, { includeReasoning: true })[1]).toEqual({
      role: "assistant",
      parts: [{ type: "reasoning", text: "ab", metadata: { x: { id: "2", keep: true }, y: { n: 1 } } }]
    })
  })

  it("with a provider id, only the reasoning of that provider's models goes back", () => {
    const U2 = MessageId.make("u2")
    const A2 = MessageId.make("a2")
    const T2 = TurnId.make("t2")
    const signed = { anthropic: { signature: "s" } }
    const events = [
      e("session.created", { title: "t", cwd: "/w", model: "anthropic/claude-a" }),
      e("user.message", { messageId: U1, text: "hi", mode: "prompt" }),
      e("turn.started", { turnId: T1, messageIds: [U1] }),
      e("assistant.started", { messageId: A1, model: "anthropic/claude-a" }),
      e("step.started", { messageId: A1, step: 0 }),
      e("reasoning.delta", { messageId: A1, partId: P1, delta: "claude thinks", metadata: signed }),
      text(P2, "one"),
      stepFinished(0),
      e("assistant.completed", { messageId: A1 }),
      e("turn.finished", { turnId: T1, reason: "stop" }),
      e("user.message", { messageId: U2, text: "again", mode: "prompt" }),
      e("turn.started", { turnId: T2, messageIds: [U2] }),
      e("assistant.started", { messageId: A2, model: "deepseek/deepseek-reasoner" }),
      e("step.started", { messageId: A2, step: 0 }),
      reasoning(P3, "deepseek thinks", A2),
      text(PartId.make("p5"), "two", A2),
      stepFinished(0, false, A2)
    ]
    const reasoningOf = (provider: string) =>
      history(events, { includeReasoning: provider }).flatMap((m) =>
        m.role === "assistant" ? m.parts.filter((p) => p.type === "reasoning") : []
      )
    expect(reasoningOf("anthropic")).toEqual([{ type: "reasoning", text: "claude thinks", metadata: signed }])
    expect(reasoningOf("deepseek")).toEqual([{ type: "reasoning", text: "deepseek thinks" }])
    expect(reasoningOf("openai")).toEqual([])
  })

  it("an aborted step's call that ran keeps the signed reasoning before it; unsigned reasoning stays out", () => {
    const signed = { anthropic: { signature: "s" } }
    const events = [
      ...prelude,
      reasoning(P1, "unsigned"),
      e("reasoning.delta", { messageId: A1, partId: P2, delta: "signed", metadata: signed }),
      invoked(C1),
      e("reasoning.delta", { messageId: A1, partId: P3, delta: "after", metadata: signed }),
      finished(C1),
      stepFinished(0, true)
    ]
    expect(history(events, { includeReasoning: true })[1]).toEqual({
      role: "assistant",
      parts: [{ type: "reasoning", text: "signed", metadata: signed }, call(C1)]
    })
  })

  it("omits empty assistant messages and blank text parts", () => {
    expect(history(prelude)).toEqual([user("hi")])
    expect(history([...prelude, text(P1, " \n "), stepFinished(0), stepStarted(1), reasoning(P2, "x")])).toEqual([
      user("hi")
    ])
  })

  it("a compaction replaces the messages before upToMessageId with one summary message", () => {
    const U2 = MessageId.make("u2")
    const A2 = MessageId.make("a2")
    const events = [
      ...prelude,
      invoked(C1),
      finished(C1),
      stepFinished(0),
      e("assistant.completed", { messageId: A1 }),
      e("turn.finished", { turnId: T1, reason: "stop" }),
      e("user.message", { messageId: U2, text: "next", mode: "prompt" }),
      e("turn.started", { turnId: TurnId.make("t2"), messageIds: [U2] }),
      e("assistant.started", { messageId: A2 }),
      stepStarted(0, A2),
      text(P2, "answer 2", A2),
      stepFinished(0, false, A2),
      e("assistant.completed", { messageId: A2 }),
      e("turn.finished", { turnId: TurnId.make("t2"), reason: "stop" })
    ]
    expect(history([...events, e("compaction.done", { upToMessageId: U2, summary: "we read a.ts" })])).toEqual([
      user(summaryContent("we read a.ts")),
      user("next"),
      { role: "assistant", parts: [{ type: "text", text: "answer 2" }] }
    ])
    expect(history([...events, e("compaction.done", { upToMessageId: A2, summary: "s" })])).toEqual([
      user(summaryContent("s")),
      { role: "assistant", parts: [{ type: "text", text: "answer 2" }] }
    ])
    expect(summaryContent("s")).toContain("s")
  })

  it("is pure: works on a deeply frozen state and gives equal results twice", () => {
    const state = deepFreeze(ok([...prelude, text(P1, "a"), invoked(C1), stepFinished(0), finished(C1)]))
    expect(toModelMessages(state)).toEqual(toModelMessages(state))
    expect(toModelMessages(state)).toHaveLength(3)
  })

  it("toolResult and wasInvoked follow the part's state", () => {
    const s = ok([...prelude, e("tool.pending", { messageId: A1, callId: C1, tool: "bash" }), invoked(C2)])
    expect(wasInvoked(s.toolParts.get(C1)!)).toBe(false)
    expect(wasInvoked(s.toolParts.get(C2)!)).toBe(true)
    expect(toolResult(s.toolParts.get(C2)!).isError).toBe(true)
    const failedPending = ok([
      ...prelude,
      e("tool.pending", { messageId: A1, callId: C1, tool: "bash" }),
      e("tool.failed", { callId: C1, error: "x" })
    ])
    expect(wasInvoked(failedPending.toolParts.get(C1)!)).toBe(false)
  })
})

describe("History: validateHistory", () => {
  const asst = (...parts: Array<ReturnType<typeof call> | { type: "text"; text: string }>): ModelMessage => ({
    role: "assistant",
    parts
  })
  const results = (...callIds: Array<CallId>): ModelMessage => ({ role: "tool", results: callIds.map((c) => ok_(c)) })

  it("accepts a valid history", () => {
    expect(validateHistory([user("a"), asst(call(C1)), results(C1), asst({ type: "text", text: "x" })])).toEqual([])
  })

  it("finds a call without a result, and a result in the wrong place", () => {
    expect(validateHistory([user("a"), asst(call(C1), call(C2)), results(C1)])).toEqual([
      expect.stringContaining(`call ${C2} has no result`)
    ])
    expect(unansweredCalls([user("a"), asst(call(C1), call(C2)), results(C1)])).toEqual([C2])
    // the result after a user message in between: the call is unanswered and the result is an orphan
    expect(validateHistory([asst(call(C1)), user("b"), results(C1)])).toHaveLength(3)
  })

  it("finds an orphan result, a tool message first, duplicate call ids and duplicate results", () => {
    expect(validateHistory([results(C1)])).toEqual([
      expect.stringContaining("does not follow an assistant message"),
      expect.stringContaining(`result for call ${C1} without its call`)
    ])
    expect(validateHistory([asst(call(C1)), results(C1, C2)])).toEqual([
      expect.stringContaining(`result for call ${C2} without its call`)
    ])
    expect(validateHistory([asst(call(C1)), results(C1), asst(call(C1)), results(C1)])).toEqual([
      expect.stringContaining(`call ${C1} was made twice`),
      expect.stringContaining(`second result for call ${C1}`)
    ])
  })

  it("finds a non-object input, empty messages and blank text", () => {
    expect(validateHistory([asst(call(C1, undefined)), results(C1)])).toEqual([
      expect.stringContaining("is not an object")
    ])
    expect(validateHistory([asst(), { role: "tool", results: [] }])).toEqual([
      expect.stringContaining("an empty assistant message"),
      expect.stringContaining("does not follow an assistant message with tool calls"),
      expect.stringContaining("a tool message without results")
    ])
    expect(validateHistory([asst({ type: "text", text: " " })])).toEqual([expect.stringContaining("empty text part")])
  })
})

// ---------------------------------------------------------------------------------------------
// property: every prefix of every random session gives a valid history

/** What the history must contain, counted from the state independently of the builder. */
const expected = (state: SessionState) => {
  let messages = state.messages
  if (state.compaction !== null) {
    const i = state.compaction.keepFrom
    messages = messages.slice(i)
  }
  let users = state.compaction === null ? 0 : 1
  let texts = 0
  const calls: Array<string> = []
  for (const message of messages) {
    if (message.role === "user") {
      if (message.delivered) users++
      continue
    }
    const aborted = new Set(message.steps.filter((s) => s.aborted).map((s) => s.step))
    for (const part of message.parts) {
      const inAborted = part.step !== undefined && aborted.has(part.step)
      if (part.type === "text" && !inAborted && part.text.trim() !== "") texts++
      if (part.type === "tool" && (!inAborted || wasInvoked(state.toolParts.get(part.callId)!))) calls.push(part.callId)
    }
  }
  return { users, texts, calls }
}

/**
 * How many reasoning parts a history with every reasoning must hold: those of steps that went
 * through with text or metadata, and the signed ones of an aborted step that come before a call of
 * it that ran.
 */
const expectedReasoning = (state: SessionState): number => {
  let messages = state.messages
  if (state.compaction !== null) {
    const i = state.compaction.keepFrom
    messages = messages.slice(i)
  }
  let count = 0
  for (const message of messages) {
    if (message.role === "user") continue
    const aborted = new Set(message.steps.filter((s) => s.aborted).map((s) => s.step))
    message.parts.forEach((part, k) => {
      if (part.type !== "reasoning") return
      const signed = part.metadata !== undefined
      if (part.step === undefined || !aborted.has(part.step)) {
        if (signed || part.text.trim() !== "") count++
        return
      }
      const ranLater = message.parts
        .slice(k + 1)
        .some((p) => p.type === "tool" && p.step === part.step && wasInvoked(state.toolParts.get(p.callId)!))
      if (signed && ranLater) count++
    })
  }
  return count
}

describe("History: property", () => {
  it("the history at every seq of a random session is valid and complete", () => {
    let checked = 0
    FastCheck.assert(
      FastCheck.property(envelopesArb({ maxLength: 100 }), (envelopes) => {
        const folder = Projection.folder(Projection.empty(SESSION_ID))
        for (const envelope of envelopes) {
          expect(Either.isRight(folder.push(envelope))).toBe(true)
          const state = Either.getOrThrow(folder.state())
          const messages = toModelMessages(state)
          expect(validateHistory(messages)).toEqual([])
          const want = expected(state)
          const got = {
            users: messages.filter((m) => m.role === "user").length,
            texts: messages.flatMap((m) => (m.role === "assistant" ? m.parts : [])).filter((p) => p.type === "text")
              .length,
            calls: messages.flatMap((m) =>
              m.role === "assistant" ? m.parts.flatMap((p) => (p.type === "tool-call" ? [p.callId] : [])) : []
            )
          }
          expect(got).toEqual(want)
          // with every reasoning part (signed ones without text included) the history is still valid
          const withReasoning = toModelMessages(state, { includeReasoning: true })
          expect(validateHistory(withReasoning)).toEqual([])
          expect(
            withReasoning.flatMap((m) => (m.role === "assistant" ? m.parts : [])).filter((p) => p.type === "reasoning")
              .length
          ).toBe(expectedReasoning(state))
          // one assistant message per step: its calls all come from one step of one message
          const stepOf = new Map<string, string>()
          for (const message of state.messages) {
            if (message.role === "assistant") {
              for (const part of message.parts) {
                if (part.type === "tool") stepOf.set(part.callId, `${message.id}/${part.step}`)
              }
            }
          }
          for (const m of messages) {
            if (m.role !== "assistant") continue
            const steps = new Set(m.parts.flatMap((p) => (p.type === "tool-call" ? [stepOf.get(p.callId)] : [])))
            expect(steps.size).toBeLessThanOrEqual(1)
          }
          // every result is the part's own result
          for (const m of messages) {
            if (m.role === "tool")
              for (const r of m.results) expect(r).toEqual(toolResult(state.toolParts.get(r.callId as CallId)!))
          }
          checked++
        }
      }),
      { numRuns: 200, seed: 17 }
    )
    expect(checked).toBeGreaterThan(1000)
  })
})

describe("History: remembered pieces", () => {
  /** Step `i` of message A1: a text part and a `read` call (C1..C4) that finishes. */
  const stepOf = (i: number): ReadonlyArray<Event> => {
    const callId = [C1, C2, C3, C4][i]!
    return [
      ...(i === 0 ? [] : [stepStarted(i)]),
      text(PartId.make(`t${i}`), `step ${i}`),
      e("tool.pending", { messageId: A1, callId, tool: "read" }),
      invoked(callId),
      finished(callId),
      stepFinished(i)
    ]
  }

  it("the history at every seq, built after the seqs before it, is the one built from a fresh copy of the state", () => {
    let reused = 0
    FastCheck.assert(
      FastCheck.property(envelopesArb({ maxLength: 100 }), (envelopes) => {
        const folder = Projection.folder(Projection.empty(SESSION_ID))
        let before: ReadonlyArray<unknown> = []
        for (const envelope of envelopes) {
          expect(Either.isRight(folder.push(envelope))).toBe(true)
          const state = Either.getOrThrow(folder.state())
          // the copy shares no object with the states before it: nothing remembered applies to it
          const copy = structuredClone(state)
          for (const includeReasoning of [false, true, "scripted"] as const) {
            expect(toModelMessages(state, { includeReasoning })).toEqual(toModelMessages(copy, { includeReasoning }))
          }
          // what did not change since the seq before is the same object (the request digest builds on it)
          const now = toModelMessages(state)
          const kept = new Set(before)
          reused += now.filter((m) => kept.has(m)).length
          before = now
          // the digest, hashed on from the request before, is the one of the whole list
          expect(requestDigestOf("prompt", now)).toBe(
            createHash("sha256")
              .update(`prompt\n${JSON.stringify(now)}`, "utf8")
              .digest("hex")
          )
        }
      }),
      { numRuns: 200, seed: 23 }
    )
    expect(reused).toBeGreaterThan(1000)
  })

  it.each([
    ["the simulated sessions", (choices: ReadonlyArray<number>) => simulate(choices)],
    ["adversarial logs (calls running across steps, late prunes, repeated step numbers)", adversarial]
  ])(
    "histories of two branches of folds from one state, built in any order, are the ones built fresh: %s",
    (_, log) => {
      const choices = FastCheck.array(FastCheck.integer({ min: 0, max: 1_000_000 }), { minLength: 1, maxLength: 80 })
      FastCheck.assert(
        FastCheck.property(
          choices,
          choices,
          choices,
          FastCheck.array(FastCheck.nat(), { maxLength: 60 }),
          (prefix, a, b, order) => {
            // the prefix, then each branch's continuation (a longer log from the same choices), folded from it
            const fold = (events: ReadonlyArray<Event>, state: SessionState, from: number) =>
              Either.getOrThrow(Projection.applyAll(state, toEnvelopes(SESSION_ID, events).slice(from)))
            const head = log(prefix)
            const shared = fold(head, Projection.empty(SESSION_ID), 0)
            const states: Array<SessionState> = [shared]
            for (const tail of [a, b]) {
              const events = log([...prefix, ...tail])
              let state = shared
              for (let at = head.length; at < events.length; at += 3) {
                state = fold(events.slice(0, Math.min(at + 3, events.length)), state, at)
                states.push(state)
              }
            }
            // built in a random order, also on copies a fold did not make (JSON, a spread map)
            for (const x of order) {
              const state = states[x % states.length]!
              const variant =
                x % 5 === 3
                  ? Projection.fromJsonState(JSON.parse(JSON.stringify(Projection.toJsonState(state))))!
                  : x % 5 === 4
                    ? { ...state, toolParts: new Map(state.toolParts) }
                    : state
              const includeReasoning = x % 2 === 0
              expect(toModelMessages(variant, { includeReasoning })).toEqual(
                toModelMessages(structuredClone(state), { includeReasoning })
              )
            }
            // and each state of the branches in order, as the kernel does
            for (const state of states) expect(toModelMessages(state)).toEqual(toModelMessages(structuredClone(state)))
          }
        ),
        { numRuns: 150, seed: 31 }
      )
    }
  )

  it("a turn's earlier steps are reused as they were, and a call pruned after them is sent pruned", () => {
    const folder = Projection.folder(Projection.empty(SESSION_ID))
    const log: Array<Event> = []
    const fold = (events: ReadonlyArray<Event>): SessionState => {
      const envelopes = toEnvelopes(SESSION_ID, [...log, ...events]).slice(log.length)
      log.push(...events)
      for (const envelope of envelopes) expect(Either.isRight(folder.push(envelope))).toBe(true)
      return Either.getOrThrow(folder.state())
    }
    // a fresh copy shares no object with the folded states: it is built without anything remembered
    const fresh = (state: SessionState) => toModelMessages(structuredClone(state))
    const first = fold([...prelude, ...stepOf(0), ...stepOf(1), ...stepOf(2)])
    const before = toModelMessages(first)
    expect(before).toHaveLength(7) // the prompt, then an assistant and a tool message per step
    const grown = fold(stepOf(3))
    const after = toModelMessages(grown)
    expect(after).toEqual(fresh(grown))
    expect(after).toHaveLength(9)
    // the three steps before are the same objects: only the new one was built
    for (let i = 0; i < 7; i++) expect(after[i]).toBe(before[i])
    // the second step's call is pruned: its tool message is built again, the steps around it are kept
    const pruned = fold([e("context.pruned", { callIds: [C2] })])
    const now = toModelMessages(pruned)
    expect(now).toEqual(fresh(pruned))
    expect(now[4]).toMatchObject({
      role: "tool",
      results: [{ callId: C2, output: expect.stringMatching(/^\[output pruned/) }]
    })
    for (const i of [0, 1, 2, 5, 6, 7, 8]) expect(now[i]).toBe(after[i])
    expect(now[4]).not.toBe(after[4])
  })

  it("a step number recorded again: its groups take the last step info of that number, also after a walk", () => {
    const events = [...prelude, ...stepOf(0), ...stepOf(1), ...stepOf(2)]
    const folded = ok(events)
    const first = toModelMessages(folded)
    // step 1 again (the kernel never does this; a log may), aborted: the groups of step 1 take it
    const again = [stepStarted(1), text(PartId.make("again"), "retry"), stepFinished(1, true)]
    const all = [...events, ...again]
    const grown = Either.getOrThrow(Projection.applyAll(folded, toEnvelopes(SESSION_ID, all).slice(events.length)))
    const now = toModelMessages(grown)
    expect(now).toEqual(toModelMessages(structuredClone(grown)))
    expect(now).not.toEqual(first)
    // step 1's call ran, so it stays with its result; its text is dropped with the aborted step's
    expect(JSON.stringify(now)).not.toContain("step 1")
    expect(JSON.stringify(now)).toContain(`"callId":"${C2}"`)
  })

  it("a call of an earlier step finished after a request is seen, whatever message id its part names", () => {
    // step 0's call is still running at the first request; the message is renamed by hand (a state
    // built with spread), so its tool parts name another message than the one that holds them
    const events = [
      ...prelude,
      text(PartId.make("t0"), "step 0"),
      e("tool.pending", { messageId: A1, callId: C1, tool: "read" }),
      invoked(C1),
      stepFinished(0),
      ...stepOf(1),
      stepStarted(2),
      text(PartId.make("t2"), "step 2")
    ]
    const folded = ok(events)
    const A9 = MessageId.make("a9")
    const renamed: SessionState = {
      ...folded,
      messages: folded.messages.map((m) => (m.id === A1 ? { ...m, id: A9 } : m))
    }
    const before = toModelMessages(renamed)
    expect(JSON.stringify(before)).toContain("the tool was still running")
    const later = [finished(C1, "late"), text(PartId.make("t2"), " more", A9)]
    const next = Either.getOrThrow(
      Projection.applyAll(renamed, toEnvelopes(SESSION_ID, [...events, ...later]).slice(events.length))
    )
    const now = toModelMessages(next)
    expect(now).toEqual(toModelMessages(structuredClone(next)))
    expect(now[2]).toMatchObject({ role: "tool", results: [{ callId: C1, output: "late" }] })
  })

  it("a request after a new step reads no part of the steps before the last one", () => {
    const events = [...prelude, ...stepOf(0), ...stepOf(1), ...stepOf(2)]
    const folded = ok(events)
    // the first three parts (step 0's text and call, step 1's text) count the reads of their fields
    let reads = 0
    const watched = <T extends object>(part: T): T =>
      new Proxy(part, {
        get: (target, key, receiver) => {
          reads++
          return Reflect.get(target, key, receiver)
        }
      })
    const message = folded.messages.find((m) => m.id === A1) as AssistantMessage
    const state: SessionState = {
      ...folded,
      messages: folded.messages.map((m) =>
        m === message ? { ...message, parts: message.parts.map((part, i) => (i < 3 ? watched(part) : part)) } : m
      )
    }
    const first = toModelMessages(state)
    expect(reads).toBeGreaterThan(0)
    const all = [...events, ...stepOf(3)]
    const grown = Either.getOrThrow(Projection.applyAll(state, toEnvelopes(SESSION_ID, all).slice(events.length)))
    reads = 0
    const next = toModelMessages(grown)
    expect(reads).toBe(0)
    expect(next).toEqual(toModelMessages(ok(all)))
    for (let i = 0; i < 5; i++) expect(next[i]).toBe(first[i])
    // a pruned call of an earlier step: every step is looked at again, and the history says so
    const pruned = Either.getOrThrow(
      Projection.applyAll(
        grown,
        toEnvelopes(SESSION_ID, [...all, e("context.pruned", { callIds: [C1] })]).slice(all.length)
      )
    )
    reads = 0
    const after = toModelMessages(pruned)
    expect(reads).toBeGreaterThan(0)
    expect(after).toEqual(toModelMessages(ok([...all, e("context.pruned", { callIds: [C1] })])))
    expect(after[2]).toMatchObject({
      role: "tool",
      results: [{ callId: C1, output: expect.stringMatching(/^\[output pruned/) }]
    })
  })
})
