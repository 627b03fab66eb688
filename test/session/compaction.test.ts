/**
 * A bounded context (issue 9 §5) in the kernel: Sessions over the scripted model and the memory
 * store. Pruning old tool outputs, compaction before a request that would not fit, compaction and
 * one retry after a provider's overflow error — and never a loop.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer, Option, Schedule, Schema, Stream } from "effect"
import type { Envelope, EnvelopeOf } from "../../src/domain/Events.js"
import type { SessionId } from "../../src/domain/Ids.js"
import { ModelError, ModelEvent, type ModelRequest } from "../../src/model/Model.js"
import { layerScripted, Script, ScriptedModel, type ScriptStep } from "../../src/model/Scripted.js"
import { makeAgentLayer } from "../../src/session/Agent.js"
import { type CompactionOptions, estimateRequest, prunableCalls, SUMMARY_PROMPT } from "../../src/session/Compaction.js"
import { summaryContent, validateHistory } from "../../src/session/History.js"
import { Sessions } from "../../src/session/Sessions.js"
import { EventStore } from "../../src/store/EventStore.js"
import * as Projection from "../../src/store/Projection.js"
import { Secrets } from "../../src/tools/Secrets.js"
import { defineTool } from "../../src/tools/Tools.js"
import { SESSION_ID, toEnvelopes } from "../support/arbitraries.js"
import { A1, C1, e, prelude, T1, usage } from "../support/fixtures.js"

/** A tool whose output is `size` characters. */
const big = defineTool({
  name: "big",
  description: "returns a long text",
  input: Schema.Struct({ size: Schema.Number }),
  execute: (input) => Effect.succeed({ output: "o".repeat(input.size) })
})

const fastRetry = {
  maxAttempts: 2,
  initialDelayMs: 1,
  maxDelayMs: 2,
  maxRetryAfterMs: 1000,
  budgetMs: 60_000,
  minRetryAfterMs: 1
}

const layer = (script: ReadonlyArray<ScriptStep>, compaction: Partial<CompactionOptions> = {}) =>
  makeAgentLayer({
    sessions: { maxSteps: 20, system: () => "system", compaction },
    tools: { tools: [big] },
    retry: fastRetry
  }).pipe(
    Layer.provideMerge(layerScripted(script)),
    Layer.provide(Secrets.layerFromEnv),
    Layer.provideMerge(EventStore.layerMemory)
  )

const requests = Effect.flatMap(ScriptedModel, (m) => m.requests)

const events = (sessionId: SessionId) =>
  Effect.flatMap(EventStore, (store) => Stream.runCollect(store.read(sessionId))).pipe(
    Effect.map((chunk) => Array.from(chunk) as Array<Envelope>)
  )

const ofType = <T extends Envelope["type"]>(log: ReadonlyArray<Envelope>, type: T) =>
  log.filter((e): e is EnvelopeOf<T> => e.type === type)

/** Sends each prompt as a turn of one session; the outcomes. */
const turns = (...texts: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const sessions = yield* Sessions
    const id = yield* sessions.create({ cwd: "/tmp" })
    const outcomes = []
    for (const text of texts) {
      yield* sessions.send(id, text)
      outcomes.push(Option.getOrThrow(yield* sessions.wait(id)))
    }
    return { id, outcomes, state: yield* sessions.state(id) }
  })

const overflow = new ModelError({
  reason: "http",
  status: 400,
  message: "prompt is too long: 212000 tokens > 200000 maximum",
  body: '{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 212000 tokens > 200000 maximum"}}'
})

const isSummaryRequest = (request: ModelRequest) => {
  const last = request.messages.at(-1)
  return last?.role === "user" && last.content === SUMMARY_PROMPT
}

describe("compaction after a context-overflow error", () => {
  it.live("compacts once and retries the step once; the retried request is the summary and the open turn", () =>
    Effect.gen(function* () {
      const { id, outcomes } = yield* turns("first task", "second task")
      expect(outcomes.map((o) => o.reason)).toEqual(["stop", "stop"])
      const log = yield* events(id)
      const done = ofType(log, "compaction.done")
      expect(done).toHaveLength(1)
      expect(done[0]!.payload).toMatchObject({ trigger: "overflow", summary: "SUMMARY of the first task", messages: 2 })
      const sent = yield* requests
      expect(sent).toHaveLength(4)
      expect(isSummaryRequest(sent[2]!)).toBe(true)
      // the summary request holds what it summarises, and the same system prompt and tools (cached prefix)
      expect(sent[2]!.messages.slice(0, 2)).toEqual([
        { role: "user", content: "first task" },
        { role: "assistant", parts: [{ type: "text", text: "first answer" }] }
      ])
      expect(sent[2]!.system).toBe(sent[1]!.system)
      expect(sent[2]!.tools).toEqual(sent[1]!.tools)
      expect(sent[3]!.messages).toEqual([
        { role: "user", content: summaryContent("SUMMARY of the first task") },
        { role: "user", content: "second task" }
      ])
      expect(ofType(log, "model.error")).toHaveLength(0)
      // the summary step's usage is in the session's totals
      expect(done[0]!.payload.usage?.output).toBe(7)
    }).pipe(
      Effect.provide(
        layer([
          Script.text("first answer"),
          Script.fail(overflow),
          Script.text("SUMMARY of the first task", { usage: { input: 30, output: 7 } }),
          Script.text("second answer")
        ])
      )
    )
  )

  it.live("cannot loop: a second overflow at the same step ends the turn, after exactly one compaction", () =>
    Effect.gen(function* () {
      const { id, outcomes, state } = yield* turns("first task", "second task")
      expect(outcomes.map((o) => o.reason)).toEqual(["stop", "error"])
      expect(outcomes[1]!.message).toMatch(/context overflow/)
      const log = yield* events(id)
      expect(ofType(log, "compaction.done")).toHaveLength(1)
      expect(ofType(log, "model.error")).toHaveLength(1)
      expect((yield* requests).length).toBe(4)
      expect(state.status._tag).toBe("idle")
    }).pipe(
      Effect.provide(
        layer([Script.text("first answer"), Script.fail(overflow), Script.text("SUMMARY"), Script.fail(overflow)])
      )
    )
  )

  it.live("an overflow in the first turn (nothing to compact, nothing to prune) ends the turn with the reason", () =>
    Effect.gen(function* () {
      const { id, outcomes } = yield* turns("only task")
      expect(outcomes[0]!.reason).toBe("error")
      expect(outcomes[0]!.message).toMatch(/context overflow/)
      const log = yield* events(id)
      expect(ofType(log, "compaction.done")).toHaveLength(0)
      expect((yield* requests).length).toBe(1)
    }).pipe(Effect.provide(layer([Script.fail(overflow)])))
  )
})

describe("compaction before a request that would not fit", () => {
  it.live("summarises the earlier turns when the next request would pass the window minus the reserve", () =>
    Effect.gen(function* () {
      const { id, outcomes } = yield* turns("first task", "second task", "third task")
      expect(outcomes.map((o) => o.reason)).toEqual(["stop", "stop", "stop"])
      const log = yield* events(id)
      const done = ofType(log, "compaction.done")
      expect(done).toHaveLength(1)
      const p = done[0]!.payload
      expect(p.trigger).toBe("auto")
      expect(p.tokensBefore).toBeGreaterThan(1800)
      expect(p.tokensAfter).toBeLessThan(p.tokensBefore!)
      const sent = yield* requests
      // turn 1, then the summary request, then turn 2 from the summary, then turn 3 after it
      expect(sent.map(isSummaryRequest)).toEqual([false, true, false, false])
      expect(sent[2]!.messages).toEqual([
        { role: "user", content: summaryContent("short summary") },
        { role: "user", content: "second task" }
      ])
      expect(sent[3]!.messages.slice(0, 3)).toEqual([
        { role: "user", content: summaryContent("short summary") },
        { role: "user", content: "second task" },
        { role: "assistant", parts: [{ type: "text", text: "ok" }] }
      ])
      for (const request of sent) expect(validateHistory(request.messages)).toEqual([])
    }).pipe(
      Effect.provide(
        layer(
          [Script.text("a".repeat(8000)), Script.text("short summary"), Script.text("ok"), Script.text("ok again")],
          {
            contextWindow: 2000,
            reserveTokens: 200
          }
        )
      )
    )
  )

  it.live("with no context window known, nothing is compacted before a request", () =>
    Effect.gen(function* () {
      const { id } = yield* turns("first task", "second task")
      expect(ofType(yield* events(id), "compaction.done")).toHaveLength(0)
    }).pipe(Effect.provide(layer([Script.text("a".repeat(80_000)), Script.text("ok")])))
  )
})

describe("pruning old tool outputs", () => {
  // the sizes differ: the same call three times would be stopped by the loop guard
  const call = (callId: string) =>
    Script.toolCalls([{ callId, tool: "big", input: { size: 8000 + Number(callId.slice(1)) } }])

  it.live(
    "replaces the outputs of older calls by a note naming the call; the log keeps them; no compaction needed",
    () =>
      Effect.gen(function* () {
        const { id, outcomes, state } = yield* turns("work")
        expect(outcomes[0]!.reason).toBe("stop")
        const log = yield* events(id)
        const pruned = ofType(log, "context.pruned")
        expect(pruned).toHaveLength(1)
        expect(pruned[0]!.payload.callIds).toEqual(["c2", "c1"])
        expect(pruned[0]!.payload.tokensAfter).toBeLessThan(pruned[0]!.payload.tokensBefore!)
        expect(ofType(log, "compaction.done")).toHaveLength(0)
        const sent = yield* requests
        const results = (request: ModelRequest) =>
          Object.fromEntries(
            request.messages.flatMap((m) => (m.role === "tool" ? m.results.map((r) => [r.callId, r.output]) : []))
          )
        const last = results(sent[3]!)
        expect(last.c1).toMatch(/^\[output pruned from the context.*big \{"size":8001\} returned 8001 characters/)
        expect(last.c2).toMatch(/^\[output pruned/)
        expect(last.c3).toBe("o".repeat(8003))
        // before the pruning the model saw them whole
        expect(results(sent[2]!).c1).toBe("o".repeat(8001))
        // the log still has every output
        expect(ofType(log, "tool.finished").map((e) => e.payload.output.length)).toEqual([8001, 8002, 8003])
        expect(state.toolParts.get("c1" as never)?.pruned).toBe(true)
        expect(estimateRequest(sent[3]!)).toBeLessThan(5000)
      }).pipe(
        Effect.provide(
          layer([call("c1"), call("c2"), call("c3"), Script.text("done")], {
            contextWindow: 6000,
            reserveTokens: 1000,
            // less than one output: c3 is kept because it is the latest step's, not because it is protected
            pruneProtectTokens: 1000
          })
        )
      )
  )

  it.live("keeps the newest outputs within the protected tokens", () =>
    Effect.gen(function* () {
      const sessions = yield* Sessions
      const { id } = yield* turns("work")
      const state = yield* sessions.state(id)
      // the turn is over (its latest step is the text): c3 and c2 (2001 tokens each) fit 4100 protected tokens, c1 does not
      expect(prunableCalls(state, 4100)).toEqual(["c1"])
      expect(prunableCalls(state, 0)).toEqual(["c3", "c2", "c1"])
      expect(prunableCalls(state, 1_000_000)).toEqual([])
    }).pipe(Effect.provide(layer([call("c1"), call("c2"), call("c3"), Script.text("done")])))
  )
})

describe("compaction and messages waiting for delivery", () => {
  it.live("a message queued before an interrupt and a manual compaction is still sent with the next prompt", () =>
    Effect.gen(function* () {
      const sessions = yield* Sessions
      const id = yield* sessions.create({ cwd: "/tmp" })
      yield* sessions.send(id, "first task")
      // the model is streaming the first step (it hangs) when the message is queued
      yield* requests.pipe(Effect.repeat({ until: (sent) => sent.length === 1, schedule: Schedule.spaced("5 millis") }))
      yield* sessions.send(id, "queued task", { mode: "queue" })
      yield* sessions.interrupt(id)
      yield* sessions.wait(id)
      // the interrupt keeps the queued message queued (DESIGN §4)
      expect((yield* sessions.state(id)).queued).toHaveLength(1)
      yield* sessions.compact(id)
      yield* sessions.send(id, "next task")
      Option.getOrThrow(yield* sessions.wait(id))
      const sent = yield* requests
      const last = sent.at(-1)!
      expect(isSummaryRequest(last)).toBe(false)
      // the queued message is delivered by this turn: the model must see it, not only the summary
      expect(last.messages).toContainEqual({ role: "user", content: "queued task" })
      expect(last.messages.at(-1)).toEqual({ role: "user", content: "next task" })
      expect(validateHistory(last.messages)).toEqual([])
    }).pipe(
      Effect.provide(layer([{ events: [], hang: true }, Script.text("SUMMARY of the first task"), Script.text("ok")]))
    )
  )
})

describe("pruning after a context-overflow error", () => {
  it.live("keeps the outputs of the latest step that went through (the overflowed step is aborted, not latest)", () =>
    Effect.gen(function* () {
      const { id, outcomes } = yield* turns("work")
      expect(outcomes[0]!.reason).toBe("stop")
      const log = yield* events(id)
      // c1 is what the model just asked for: pruning it would send "call it again" for the call it just made
      expect(ofType(log, "context.pruned").map((e) => e.payload.callIds)).toEqual([["c0"]])
      const sent = yield* requests
      expect(sent).toHaveLength(4)
      const results = Object.fromEntries(
        sent[3]!.messages.flatMap((m) => (m.role === "tool" ? m.results.map((r) => [r.callId, r.output]) : []))
      )
      expect(results.c0).toMatch(/^\[output pruned/)
      expect(results.c1).toBe("o".repeat(8001))
    }).pipe(
      Effect.provide(
        layer([
          Script.toolCalls([{ callId: "c0", tool: "big", input: { size: 8000 } }]),
          Script.toolCalls([{ callId: "c1", tool: "big", input: { size: 8001 } }]),
          Script.fail(overflow),
          Script.text("done")
        ])
      )
    )
  )
})

describe("the summary request and reasoning", () => {
  const signed = { scripted: { signature: "sig-1" } }
  it.live(
    "sends the reasoning the model's provider takes back, as the step requests do (a tool use keeps its thinking)",
    () =>
      Effect.gen(function* () {
        const sessions = yield* Sessions
        const { id, outcomes } = yield* turns("first task")
        // the turn ends after a step with a call (here: the next request is refused), so the history
        // before the summary prompt ends with a tool use — Anthropic with thinking on wants its thinking block
        expect(outcomes[0]!.reason).toBe("error")
        yield* sessions.compact(id)
        const sent = yield* requests
        const summary = sent.at(-1)!
        expect(isSummaryRequest(summary)).toBe(true)
        const step = sent[1]!.messages.find((m) => m.role === "assistant")
        expect(step).toEqual({
          role: "assistant",
          parts: [
            { type: "reasoning", text: "plan", metadata: signed },
            { type: "tool-call", callId: "c1", tool: "big", input: { size: 10 } }
          ]
        })
        expect(summary.messages.find((m) => m.role === "assistant")).toEqual(step)
      }).pipe(
        Effect.provide(
          layer([
            {
              events: [
                ModelEvent.ReasoningDelta({ id: "r", delta: "plan" }),
                ModelEvent.ReasoningDelta({ id: "r", delta: "", metadata: signed }),
                ...Script.toolCall({ callId: "c1", tool: "big", input: { size: 10 } }),
                Script.finish("tool-calls")
              ]
            },
            Script.fail(new ModelError({ reason: "http", status: 401, message: "bad key" })),
            Script.text("SUMMARY")
          ])
        )
      )
  )
})

describe("compaction and a steered message an interrupt left undelivered", () => {
  it.live("the next turn's first step delivers it; the compaction before that step does not summarise it away", () =>
    Effect.gen(function* () {
      const sessions = yield* Sessions
      const id = yield* sessions.create({ cwd: "/tmp" })
      yield* sessions.send(id, "first task")
      Option.getOrThrow(yield* sessions.wait(id))
      // the provider counted more than the window for the first turn: each later turn starts with a compaction
      yield* sessions.send(id, "second task")
      yield* requests.pipe(Effect.repeat({ until: (sent) => sent.length === 3, schedule: Schedule.spaced("5 millis") }))
      // the user steers, then interrupts before a step could deliver it: it waits for the next step
      yield* sessions.send(id, "steered words", { mode: "steer" })
      yield* sessions.interrupt(id)
      yield* sessions.wait(id)
      yield* sessions.send(id, "third task")
      Option.getOrThrow(yield* sessions.wait(id))
      const sent = yield* requests
      expect(sent.map(isSummaryRequest)).toEqual([false, true, false, true, false])
      const last = sent.at(-1)!
      expect(last.messages).toContainEqual({ role: "user", content: "steered words" })
      expect(last.messages.at(-1)).toEqual({ role: "user", content: "third task" })
      expect(validateHistory(last.messages)).toEqual([])
    }).pipe(
      Effect.provide(
        layer(
          [
            Script.text("ok", { usage: { input: 5000 } }),
            Script.text("SUMMARY 1"),
            { events: [], hang: true },
            Script.text("SUMMARY 2"),
            Script.text("ok")
          ],
          { contextWindow: 2000, reserveTokens: 200 }
        )
      )
    )
  )

  it("a compaction's summarised messages are not sent, so none of their calls is prunable", () => {
    const events = [
      ...prelude,
      e("tool.invoked", { messageId: A1, callId: C1, tool: "big", input: { size: 1 } }),
      e("tool.finished", { callId: C1, output: "o".repeat(9000) }),
      e("step.finished", { messageId: A1, step: 0, finishReason: "tool-calls", usage }),
      e("step.started", { messageId: A1, step: 1 }),
      e("step.finished", { messageId: A1, step: 1, finishReason: "stop", usage }),
      e("assistant.completed", { messageId: A1 }),
      e("turn.finished", { turnId: T1, reason: "stop" })
    ]
    const fold = (list: typeof events) =>
      Either.getOrThrow(Projection.applyAll(Projection.empty(SESSION_ID), toEnvelopes(SESSION_ID, list)))
    expect(prunableCalls(fold(events), 0)).toEqual([C1])
    expect(prunableCalls(fold([...events, e("compaction.done", { summary: "all of it" })]), 0)).toEqual([])
  })
})
