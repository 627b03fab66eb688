/**
 * The kernel in process: Sessions -> Processor/Actions -> scripted Model, in-memory store.
 * Every scenario ends with the session idle and checks the log tells what happened.
 */
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { hostname } from "node:os"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber, Layer, Option, Ref, Schema, Stream, TestClock } from "effect"
import type { Envelope } from "../../src/domain/Events.js"
import type { CallId, SessionId } from "../../src/domain/Ids.js"
import { Model, ModelError, ModelEvent, type ModelRequest } from "../../src/model/Model.js"
import { layerScripted, Script, ScriptedModel, type ScriptStep, zeroUsage } from "../../src/model/Scripted.js"
import { makeAgentLayer } from "../../src/session/Agent.js"
import { unansweredCalls, validateHistory } from "../../src/session/History.js"
import { ownerIsDead, Sessions } from "../../src/session/Sessions.js"
import { EventStoreError } from "../../src/store/Errors.js"
import { EventStore } from "../../src/store/EventStore.js"
import * as Projection from "../../src/store/Projection.js"
import * as Snapshots from "../../src/store/Snapshots.js"
import { DEFAULT_SNAPSHOT_EVERY, turnEndMinimum } from "../../src/store/Snapshots.js"
import { groupAlive, newProcessToken, PROCESS_TOKEN_ENV } from "../../src/tools/processGroup.js"
import { redactionMarker, Secrets, type SecretsOptions } from "../../src/tools/Secrets.js"
import {
  type AnyTool,
  defineTool,
  Hooks,
  LOG_UNAVAILABLE,
  ToolFailure,
  type ToolsOptions
} from "../../src/tools/Tools.js"
import { todo } from "../../src/tools/todo.js"
import { FiberCount } from "../support/fiberCount.js"
import { A1, C1, e, prelude, usage } from "../support/fixtures.js"
import { tempDir } from "../support/tmp.js"

const C2 = "c2" as CallId

const echo = defineTool({
  name: "echo",
  description: "echoes its text",
  input: Schema.Struct({ text: Schema.String }),
  execute: (input) => Effect.succeed({ output: `echo: ${input.text}` })
})

const failing = defineTool({
  name: "fails",
  description: "always fails",
  input: Schema.Struct({}),
  execute: () => Effect.fail(new ToolFailure({ message: "it broke" }))
})

const crashing = defineTool({
  name: "crashes",
  description: "dies",
  input: Schema.Struct({}),
  execute: () => Effect.die(new Error("boom"))
})

const fastRetry = {
  maxAttempts: 3,
  initialDelayMs: 1,
  maxDelayMs: 2,
  maxRetryAfterMs: 1000,
  budgetMs: 60_000,
  minRetryAfterMs: 1
}

/**
 * The agent over the scripted model and the memory store: the test tools plus `extraTools`, or
 * `options.tools` (tools and hooks) in their place.
 */
const layer = (
  script: ReadonlyArray<ScriptStep>,
  extraTools: ReadonlyArray<AnyTool> = [],
  options: {
    readonly maxSteps?: number
    readonly tools?: ToolsOptions
    readonly secrets?: SecretsOptions
  } = {}
) =>
  makeAgentLayer({
    sessions: { maxSteps: options.maxSteps ?? 10, system: () => "system" },
    tools: options.tools ?? { tools: [echo, failing, crashing, ...extraTools] },
    retry: fastRetry
  }).pipe(
    Layer.provideMerge(layerScripted(script)),
    // the keys the test names, else those `logbook` holds without a config: the built-in providers'
    Layer.provide(options.secrets === undefined ? Secrets.layerFromEnv : Secrets.layer(options.secrets)),
    Layer.provideMerge(EventStore.layerMemory)
  )

const events = (sessionId: SessionId) =>
  Effect.flatMap(EventStore, (store) => Stream.runCollect(store.read(sessionId))).pipe(
    Effect.map((chunk) => Array.from(chunk) as Array<Envelope>)
  )

const types = (list: ReadonlyArray<Envelope>) => list.map((e) => e.type)

/** Runs one prompt to the end of its turn. */
const prompt = (text: string) =>
  Effect.gen(function* () {
    const sessions = yield* Sessions
    const id = yield* sessions.create({ cwd: "/tmp" })
    yield* sessions.send(id, text)
    const outcome = yield* sessions.wait(id)
    return { id, outcome: Option.getOrThrow(outcome), state: yield* sessions.state(id) }
  })

const requests = Effect.flatMap(ScriptedModel, (m) => m.requests)

const expectValidHistories = (list: ReadonlyArray<ModelRequest>) => {
  for (const request of list) expect(validateHistory(request.messages)).toEqual([])
}

describe("Sessions: a turn", () => {
  it.live("answers a prompt: one step, idle at the end", () =>
    Effect.gen(function* () {
      const { id, outcome, state } = yield* prompt("hello")
      expect(outcome.reason).toBe("stop")
      expect(state.status._tag).toBe("idle")
      expect(state.chatState).toBe("idle")
      expect(state.turn).toBeNull()
      const log = yield* events(id)
      expect(types(log)).toEqual([
        "session.created",
        "user.message",
        "turn.started",
        "session.status",
        "assistant.started",
        "chat.state",
        "step.started",
        "prompt.recorded",
        "text.delta",
        "step.finished",
        "assistant.completed",
        "turn.finished",
        "chat.state",
        "session.status"
      ])
      const sent = yield* requests
      expect(sent[0]!.messages).toEqual([{ role: "user", content: "hello" }])
      expect(sent[0]!.system).toBe("system")
      expect(sent[0]!.tools.map((t) => t.name)).toEqual(["echo", "fails", "crashes"])
    }).pipe(Effect.provide(layer([Script.text("hi there", { chunks: 3 })])))
  )

  it.live("records reasoning metadata with its part and sends it back in place with the call it led to", () =>
    Effect.gen(function* () {
      const { id, outcome } = yield* prompt("use echo")
      expect(outcome.reason).toBe("stop")
      const log = yield* events(id)
      const reasoning = log.filter((e) => e.type === "reasoning.delta").map((e) => e.payload)
      // what arrived together is one event; the signature is kept with the text of its part
      expect(reasoning.map((p) => [p.delta, p.metadata])).toEqual([
        ["think more", { scripted: { signature: "sig", n: 1 } }],
        ["", { scripted: { redacted: "r" } }]
      ])
      const sent = yield* requests
      expect(sent[1]!.messages[1]).toEqual({
        role: "assistant",
        parts: [
          { type: "reasoning", text: "think more", metadata: { scripted: { signature: "sig", n: 1 } } },
          { type: "reasoning", text: "", metadata: { scripted: { redacted: "r" } } },
          { type: "tool-call", callId: "c1", tool: "echo", input: { text: "x" } }
        ]
      })
    }).pipe(
      Effect.provide(
        layer([
          {
            events: [
              ModelEvent.ReasoningDelta({ id: "r1", delta: "think " }),
              ModelEvent.ReasoningDelta({ id: "r1", delta: "more", metadata: { scripted: { n: 1 } } }),
              ModelEvent.ReasoningDelta({ id: "r1", delta: "", metadata: { scripted: { signature: "sig" } } }),
              ModelEvent.ReasoningDelta({ id: "r2", delta: "", metadata: { scripted: { redacted: "r" } } }),
              ...Script.toolCall({ callId: "c1", tool: "echo", input: { text: "x" } }),
              Script.finish("tool-calls")
            ]
          },
          Script.text("done")
        ])
      )
    )
  )

  it.live("runs a tool call and sends its result back", () =>
    Effect.gen(function* () {
      const { id, outcome, state } = yield* prompt("use echo")
      expect(outcome.reason).toBe("stop")
      expect(outcome.steps).toBe(2)
      const log = yield* events(id)
      const t = types(log)
      expect(t.indexOf("tool.pending")).toBeLessThan(t.indexOf("tool.invoked"))
      expect(t.indexOf("tool.invoked")).toBeLessThan(t.indexOf("tool.finished"))
      expect(log.filter((e) => e.type === "action.state").map((e) => (e.payload as { state: string }).state)).toEqual([
        "running",
        "archived"
      ])
      const part = Array.from(state.toolParts.values())[0]!
      expect(part.state._tag).toBe("completed")
      const sent = yield* requests
      expect(sent).toHaveLength(2)
      expectValidHistories(sent)
      expect(sent[1]!.messages).toEqual([
        { role: "user", content: "use echo" },
        { role: "assistant", parts: [{ type: "tool-call", callId: "c1", tool: "echo", input: { text: "x" } }] },
        { role: "tool", results: [{ callId: "c1", tool: "echo", output: "echo: x", isError: false }] }
      ])
    }).pipe(
      Effect.provide(
        layer([Script.toolCalls([{ callId: "c1", tool: "echo", input: { text: "x" } }]), Script.text("done")])
      )
    )
  )

  it.live(
    "turns bad calls into tool errors the model reads: invalid input, unknown tool, failure, crash, not JSON",
    () =>
      Effect.gen(function* () {
        const { id, outcome, state } = yield* prompt("go")
        expect(outcome.reason).toBe("stop")
        expect(state.status._tag).toBe("idle")
        const sent = yield* requests
        expectValidHistories(sent)
        const results = sent[1]!.messages.find((m) => m.role === "tool")
        expect(results?.role).toBe("tool")
        const byId = new Map(
          (results as { results: ReadonlyArray<{ callId: string; output: string; isError: boolean }> }).results.map(
            (r) => [r.callId, r]
          )
        )
        expect(byId.get("bad")!.isError).toBe(true)
        expect(byId.get("bad")!.output).toMatch(/Invalid input for tool "echo"/)
        expect(byId.get("unknown")!.output).toMatch(/Unknown tool "nope".*echo/)
        expect(byId.get("f")!.output).toBe("it broke")
        expect(byId.get("crash")!.output).toMatch(/crashed: boom/)
        expect(byId.get("nojson")!.output).toMatch(/not valid JSON/)
        const log = yield* events(id)
        // only the calls that could run were invoked
        expect(
          log
            .filter((e) => e.type === "tool.invoked")
            .map((e) => (e.payload as { callId: string }).callId)
            .sort()
        ).toEqual(["crash", "f"])
        const action = log.filter((e) => e.type === "action.state").at(-1)!
        expect((action.payload as { state: string }).state).toBe("failed")
      }).pipe(
        Effect.provide(
          layer([
            {
              events: [
                ...Script.toolCall({ callId: "bad", tool: "echo", input: { txt: 1 } }),
                ...Script.toolCall({ callId: "unknown", tool: "nope", input: {} }),
                ...Script.toolCall({ callId: "f", tool: "fails", input: {} }),
                ...Script.toolCall({ callId: "crash", tool: "crashes", input: {} }),
                ModelEvent.ToolInputStart({ callId: "nojson", tool: "echo" }),
                ModelEvent.ToolCall({ callId: "nojson", tool: "echo", input: undefined, inputText: "{oops" }),
                Script.finish("tool-calls")
              ]
            },
            Script.text("sorry")
          ])
        )
      )
  )

  it.live("renames a call id the model reuses in a later step", () =>
    Effect.gen(function* () {
      const { state } = yield* prompt("twice")
      expect(Array.from(state.toolParts.keys()).sort()).toEqual(["call_0", "call_0_2"])
      expectValidHistories(yield* requests)
    }).pipe(
      Effect.provide(
        layer([
          Script.toolCalls([{ callId: "call_0", tool: "echo", input: { text: "a" } }]),
          Script.toolCalls([{ callId: "call_0", tool: "echo", input: { text: "b" } }]),
          Script.text("ok")
        ])
      )
    )
  )

  it.live("stops at maxSteps with every call answered", () =>
    Effect.gen(function* () {
      const { outcome, state } = yield* prompt("loop")
      expect(outcome.reason).toBe("max-steps")
      expect(outcome.steps).toBe(2)
      expect(state.status._tag).toBe("idle")
      expect(state.lastTurn?.reason).toBe("max-steps")
    }).pipe(
      Effect.provide(
        layer(
          [
            Script.toolCalls([{ callId: "a", tool: "echo", input: { text: "1" } }]),
            Script.toolCalls([{ callId: "b", tool: "echo", input: { text: "2" } }]),
            Script.text("never")
          ],
          [],
          { maxSteps: 2 }
        )
      )
    )
  )
})

describe("Sessions: the fibers of a step", () => {
  // on the live clock: under a test clock a call's wait for its tool is the straightforward race of
  // two fibers (src/session/internal/awaitWithin.ts), not the one timer counted here
  it.live("a step with one in-process call starts two: the model's reader and the tool's", () =>
    Effect.gen(function* () {
      const fibersOf = (calls: number) =>
        Effect.gen(function* () {
          const count = new FiberCount()
          const script = [
            ...Array.from({ length: calls }, (_, i) =>
              Script.toolCalls([{ callId: `c${i}`, tool: "echo", input: { text: String(i) } }])
            ),
            Script.text("done")
          ]
          const { outcome } = yield* prompt("go").pipe(Effect.supervised(count), Effect.provide(layer(script)))
          expect(outcome.reason).toBe("stop")
          return count.started
        })
      // what a turn starts once cancels out: the difference is two steps' fibers
      // the first turn in a process starts one more (something made once, on first use)
      yield* fibersOf(1)
      expect((yield* fibersOf(4)) - (yield* fibersOf(2))).toBe(4)
      expect((yield* fibersOf(6)) - (yield* fibersOf(4))).toBe(4)
    })
  )
})

describe("Sessions: model failures", () => {
  const rateLimited = new ModelError({
    reason: "http",
    message: "rate limited",
    status: 429,
    headers: { "retry-after-ms": "1" }
  })

  it.live("retries a retryable error: model.retry, status retry, the aborted step's text not sent again", () =>
    Effect.gen(function* () {
      const { id, outcome, state } = yield* prompt("hi")
      expect(outcome.reason).toBe("stop")
      const log = yield* events(id)
      const retries = log.filter((e) => e.type === "model.retry")
      expect(retries).toHaveLength(1)
      expect((retries[0]!.payload as { attempt: number; status: number }).attempt).toBe(2)
      expect((retries[0]!.payload as { status: number }).status).toBe(429)
      const statuses = log
        .filter((e) => e.type === "session.status")
        .map((e) => (e.payload as { status: { _tag: string } }).status._tag)
      expect(statuses).toEqual(["busy", "retry", "busy", "idle"])
      const steps = (
        state.messages.find((m) => m.role === "assistant") as {
          steps: ReadonlyArray<{ step: number; aborted: boolean }>
        }
      ).steps
      expect(steps.map((s) => [s.step, s.aborted])).toEqual([
        [0, true],
        [1, false]
      ])
      const sent = yield* requests
      expect(sent).toHaveLength(2)
      expect(sent[1]!.messages).toEqual([{ role: "user", content: "hi" }])
    }).pipe(
      Effect.provide(
        layer([
          Script.fail(rateLimited, [ModelEvent.TextDelta({ id: "t", delta: "partial " })]),
          Script.text("whole answer")
        ])
      )
    )
  )

  it.live("a stream that ends without finishing is retried as cut", () =>
    Effect.gen(function* () {
      const { id, outcome } = yield* prompt("hi")
      expect(outcome.reason).toBe("stop")
      const log = yield* events(id)
      expect(log.filter((e) => e.type === "model.retry")).toHaveLength(1)
    }).pipe(Effect.provide(layer([{ events: [ModelEvent.TextDelta({ id: "t", delta: "cut" })] }, Script.text("ok")])))
  )

  it.live("a call cut mid-input by a failure never runs and is not sent again", () =>
    Effect.gen(function* () {
      const { id, state } = yield* prompt("hi")
      const part = state.toolParts.get("c1" as never)!
      expect(part.state._tag).toBe("error")
      const log = yield* events(id)
      expect(types(log)).not.toContain("tool.invoked")
      const sent = yield* requests
      expectValidHistories(sent)
      expect(sent[1]!.messages).toEqual([{ role: "user", content: "hi" }])
    }).pipe(
      Effect.provide(
        layer([
          Script.fail(rateLimited, [ModelEvent.ToolInputStart({ callId: "c1", tool: "echo" })]),
          Script.text("ok")
        ])
      )
    )
  )

  it.live("a non-retryable error ends the turn with model.error, idle", () =>
    Effect.gen(function* () {
      const { id, outcome, state } = yield* prompt("hi")
      expect(outcome.reason).toBe("error")
      expect(outcome.message).toMatch(/401/)
      expect(state.status._tag).toBe("idle")
      expect(state.chatState).toBe("idle")
      expect(state.lastError?.retryable).toBe(false)
      expect(state.lastTurn?.reason).toBe("error")
      const log = yield* events(id)
      expect(types(log)).not.toContain("model.retry")
      expect(types(log).slice(-4)).toEqual(["assistant.completed", "turn.finished", "chat.state", "session.status"])
    }).pipe(Effect.provide(layer([Script.fail(new ModelError({ reason: "http", message: "bad key", status: 401 }))])))
  )

  it.live("gives up after maxAttempts", () =>
    Effect.gen(function* () {
      const { id, outcome, state } = yield* prompt("hi")
      expect(outcome.reason).toBe("error")
      expect(outcome.message).toMatch(/gave up after 3 attempts/)
      expect(state.lastError?.retryable).toBe(true)
      const log = yield* events(id)
      expect(log.filter((e) => e.type === "model.retry")).toHaveLength(2)
      expect(state.status._tag).toBe("idle")
    }).pipe(Effect.provide(layer([Script.fail(rateLimited), Script.fail(rateLimited), Script.fail(rateLimited)])))
  )
})

describe("Sessions: interrupt, steer, queue", () => {
  /** a tool that signals it started, then waits for `release` (or forever), recording its finalizer */
  const gate = () =>
    Effect.gen(function* () {
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const finalized = yield* Ref.make(false)
      const tool = defineTool({
        name: "wait",
        description: "waits",
        input: Schema.Struct({}),
        execute: (_input, context) =>
          Deferred.succeed(started, undefined).pipe(
            Effect.zipRight(Deferred.await(release)),
            Effect.as({ output: "released" }),
            Effect.onInterrupt(() =>
              Ref.set(finalized, true).pipe(Effect.zipRight(context.recordStopped({ stoppedWhile: "waiting" })))
            )
          )
      })
      return { started, release, finalized, tool }
    })

  /** `body` with the agent over a script that first calls the gated `wait` tool (call w1), then `after` */
  const gated = <A, E, R>(
    body: (g: Effect.Effect.Success<ReturnType<typeof gate>>) => Effect.Effect<A, E, R>,
    after: ReadonlyArray<ScriptStep> = [Script.text("ok")]
  ) =>
    Effect.gen(function* () {
      const g = yield* gate()
      return yield* body(g).pipe(
        Effect.provide(layer([Script.toolCalls([{ callId: "w1", tool: "wait", input: {} }]), ...after], [g.tool]))
      )
    })

  it.live("interrupt during a running tool: the tool is stopped, its part ends interrupted, the session idle", () =>
    gated((g) =>
      Effect.gen(function* () {
        const sessions = yield* Sessions
        const id = yield* sessions.create({ cwd: "/tmp" })
        yield* sessions.send(id, "wait")
        yield* Deferred.await(g.started)
        yield* sessions.interrupt(id)
        const outcome = Option.getOrThrow(yield* sessions.wait(id))
        expect(outcome.reason).toBe("interrupted")
        expect(yield* Ref.get(g.finalized)).toBe(true)
        const state = yield* sessions.state(id)
        expect(state.status._tag).toBe("idle")
        expect(state.chatState).toBe("idle")
        expect(state.turn).toBeNull()
        expect(state.lastTurn).toMatchObject({ interrupted: true, reason: "user" })
        const part = state.toolParts.get("w1" as never)!
        expect(part.state).toMatchObject({ _tag: "error", interrupted: true, reason: "user" })
        expect(Array.from(state.actions.values()).map((a) => a.state)).toEqual(["failed"])
        // what the tool recorded as it was stopped is the metadata of its tool.failed
        const failed = (yield* events(id)).filter((e) => e.type === "tool.failed")
        expect(failed.map((e) => e.payload)).toMatchObject([{ callId: "w1", metadata: { stoppedWhile: "waiting" } }])
        // stopped at once and confirmed (not after the bounded wait for a tool that does not stop)
        expect((failed[0]!.payload as { error: string }).error).toMatch(
          /^The call was interrupted \(user\) and stopped/
        )
        // the next prompt's history answers the interrupted call
        yield* sessions.send(id, "again")
        yield* sessions.wait(id)
        const sent = yield* requests
        expectValidHistories(sent)
        expect(unansweredCalls(sent[1]!.messages)).toEqual([])
        expect(JSON.stringify(sent[1]!.messages)).toMatch(/interrupted \(user\)/)
      })
    )
  )

  it.live("a driver that lost its lease writes nothing more: its appends are fenced, the turn ends with an error", () =>
    gated((g) =>
      Effect.gen(function* () {
        const sessions = yield* Sessions
        const store = yield* EventStore
        const id = yield* sessions.create({ cwd: "/tmp" })
        yield* sessions.send(id, "wait")
        yield* Deferred.await(g.started)
        // this process stalls past its ttl; another takes the session over
        const held = Option.getOrThrow(yield* store.lease(id))
        yield* store.releaseLease(id, held.owner)
        yield* store.acquireLease(id, "another-process", 60_000)
        const before = yield* store.lastSeq(id)
        yield* Deferred.succeed(g.release, undefined)
        const outcome = yield* sessions.wait(id)
        expect(Option.map(outcome, (o) => o.reason)).not.toEqual(Option.some("stop"))
        // not one event after the takeover: the tool's result, the cleanup, the turn's end were all refused
        expect(yield* store.lastSeq(id)).toBe(before)
        expect(Option.getOrThrow(yield* store.lease(id)).owner).toBe("another-process")
        // the refused write marked the lease lost (no renewal had found out yet): the next message is
        // refused with the reason, instead of failing on a refused write
        const refused = yield* Effect.flip(sessions.send(id, "again"))
        expect(refused).toMatchObject({ _tag: "SessionUnavailable", reason: "lease-lost" })
        expect(yield* store.lastSeq(id)).toBe(before)
      })
    )
  )

  it.live("interrupt while the model streams aborts the step", () =>
    Effect.gen(function* () {
      const sessions = yield* Sessions
      const store = yield* EventStore
      const id = yield* sessions.create({ cwd: "/tmp" })
      yield* sessions.send(id, "hang")
      // wait until the partial text is recorded
      yield* store.follow(id).pipe(
        Stream.filter((e) => e.type === "text.delta"),
        Stream.runHead
      )
      yield* sessions.interrupt(id)
      const state = yield* sessions.state(id)
      expect(state.status._tag).toBe("idle")
      const message = state.messages.find((m) => m.role === "assistant") as {
        steps: ReadonlyArray<{ aborted: boolean }>
        completedAt?: number
      }
      expect(message.steps.map((s) => s.aborted)).toEqual([true])
      expect(message.completedAt).toBeDefined()
    }).pipe(Effect.provide(layer([{ events: [ModelEvent.TextDelta({ id: "t", delta: "partial" })], hang: true }])))
  )

  it.live("steer while streaming: the stream stops, the partial text is kept, the next step delivers the message", () =>
    Effect.gen(function* () {
      const sessions = yield* Sessions
      const store = yield* EventStore
      const id = yield* sessions.create({ cwd: "/tmp" })
      yield* sessions.send(id, "write a poem")
      yield* store.follow(id).pipe(
        Stream.filter((e) => e.type === "text.delta"),
        Stream.runHead
      )
      yield* sessions.send(id, "make it short", { mode: "steer" })
      const outcome = Option.getOrThrow(yield* sessions.wait(id))
      expect(outcome.reason).toBe("stop")
      const state = yield* sessions.state(id)
      expect(state.status._tag).toBe("idle")
      const log = yield* events(id)
      expect(log.filter((e) => e.type === "chat.state").map((e) => (e.payload as { state: string }).state)).toContain(
        "interrupted"
      )
      const sent = yield* requests
      expect(sent).toHaveLength(2)
      expectValidHistories(sent)
      expect(sent[1]!.messages).toEqual([
        { role: "user", content: "write a poem" },
        { role: "assistant", parts: [{ type: "text", text: "Roses are" }] },
        { role: "user", content: "make it short" }
      ])
    }).pipe(
      Effect.provide(
        layer([{ events: [ModelEvent.TextDelta({ id: "t", delta: "Roses are" })], hang: true }, Script.text("Short.")])
      )
    )
  )

  it.live("steer while a tool runs: delivered with the tool results", () =>
    gated((g) =>
      Effect.gen(function* () {
        const sessions = yield* Sessions
        const id = yield* sessions.create({ cwd: "/tmp" })
        yield* sessions.send(id, "start")
        yield* Deferred.await(g.started)
        yield* sessions.send(id, "also check b", { mode: "steer" })
        yield* Deferred.succeed(g.release, undefined)
        const outcome = Option.getOrThrow(yield* sessions.wait(id))
        expect(outcome.reason).toBe("stop")
        const sent = yield* requests
        expectValidHistories(sent)
        expect(sent[1]!.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "user"])
        expect(sent[1]!.messages[3]).toEqual({ role: "user", content: "also check b" })
      })
    )
  )

  it.live("queue: delivered as a new turn when the turn ends", () =>
    gated(
      (g) =>
        Effect.gen(function* () {
          const sessions = yield* Sessions
          const id = yield* sessions.create({ cwd: "/tmp" })
          yield* sessions.send(id, "first")
          yield* Deferred.await(g.started)
          yield* sessions.send(id, "second", { mode: "queue" })
          yield* Deferred.succeed(g.release, undefined)
          const outcome = Option.getOrThrow(yield* sessions.wait(id))
          expect(outcome.reason).toBe("stop")
          const log = yield* events(id)
          expect(log.filter((e) => e.type === "turn.started")).toHaveLength(2)
          expect(log.filter((e) => e.type === "turn.finished")).toHaveLength(2)
          const sent = yield* requests
          expect(sent).toHaveLength(3)
          expectValidHistories(sent)
          // the queued message was not sent during the first turn
          expect(JSON.stringify(sent[1]!.messages)).not.toMatch(/second/)
          expect(sent[2]!.messages.at(-1)).toEqual({ role: "user", content: "second" })
          expect((yield* sessions.state(id)).queued).toEqual([])
        }),
      [Script.text("one"), Script.text("two")]
    )
  )

  it.live("withdraw a steered message before its step: never sent; sent again edited, it is delivered", () =>
    gated((g) =>
      Effect.gen(function* () {
        const sessions = yield* Sessions
        const id = yield* sessions.create({ cwd: "/tmp" })
        yield* sessions.send(id, "start")
        yield* Deferred.await(g.started)
        const steered = yield* sessions.send(id, "also check b", { mode: "steer" })
        expect(yield* sessions.withdraw(id, steered)).toEqual({ text: "also check b", mode: "steer" })
        // gone from the state; a second withdrawal finds nothing
        expect((yield* sessions.state(id)).messages.some((m) => m.id === steered)).toBe(false)
        expect(yield* Effect.flip(sessions.withdraw(id, steered))).toMatchObject({
          _tag: "WithdrawRefused",
          reason: "unknown"
        })
        yield* sessions.send(id, "also check c", { mode: "steer" })
        yield* Deferred.succeed(g.release, undefined)
        expect(Option.getOrThrow(yield* sessions.wait(id)).reason).toBe("stop")
        const sent = yield* requests
        expectValidHistories(sent)
        expect(JSON.stringify(sent)).not.toMatch(/check b/)
        expect(sent[1]!.messages.at(-1)).toEqual({ role: "user", content: "also check c" })
        const log = yield* events(id)
        expect(log.filter((e) => e.type === "user.withdrawn").map((e) => e.payload)).toEqual([{ messageId: steered }])
        // the log keeps what was withdrawn
        expect(log.some((e) => e.type === "user.message" && e.payload.text === "also check b")).toBe(true)
      })
    )
  )

  it.live("withdraw a queued message: no turn for it; a delivered message cannot be withdrawn", () =>
    gated(
      (g) =>
        Effect.gen(function* () {
          const sessions = yield* Sessions
          const id = yield* sessions.create({ cwd: "/tmp" })
          const first = yield* sessions.send(id, "first")
          yield* Deferred.await(g.started)
          const queued = yield* sessions.send(id, "second", { mode: "queue" })
          expect((yield* sessions.state(id)).queued).toEqual([queued])
          expect(yield* sessions.withdraw(id, queued)).toEqual({ text: "second", mode: "queue" })
          expect((yield* sessions.state(id)).queued).toEqual([])
          const before = (yield* events(id)).length
          expect(yield* Effect.flip(sessions.withdraw(id, first))).toMatchObject({
            _tag: "WithdrawRefused",
            reason: "delivered"
          })
          expect(yield* events(id)).toHaveLength(before)
          yield* Deferred.succeed(g.release, undefined)
          expect(Option.getOrThrow(yield* sessions.wait(id)).reason).toBe("stop")
          const log = yield* events(id)
          expect(log.filter((e) => e.type === "turn.started")).toHaveLength(1)
          expect(yield* requests).toHaveLength(2)
        }),
      [Script.text("one")]
    )
  )

  it.live("a withdrawal racing the step that delivers: either withdrawn and never sent, or delivered and refused", () =>
    Effect.gen(function* () {
      const outcomes = { withdrawn: 0, delivered: 0 }
      for (let round = 0; round < 24; round++) {
        const g = yield* gate()
        yield* Effect.gen(function* () {
          const sessions = yield* Sessions
          const id = yield* sessions.create({ cwd: "/tmp" })
          yield* sessions.send(id, "start")
          yield* Deferred.await(g.started)
          const steered = yield* sessions.send(id, "steer me", { mode: "steer" })
          // the tool ends and the next step starts while the withdrawal runs, at a shifting moment
          const withdrawal = yield* Effect.fork(
            Effect.zipRight(
              Effect.repeatN(Effect.yieldNow(), round % 12),
              Effect.either(sessions.withdraw(id, steered))
            )
          )
          yield* Deferred.succeed(g.release, undefined)
          const result = yield* Fiber.join(withdrawal)
          expect(Option.getOrThrow(yield* sessions.wait(id)).reason).toBe("stop")
          const sent = JSON.stringify(yield* requests)
          const log = yield* events(id)
          const withdrawnEvents = log.filter((e) => e.type === "user.withdrawn")
          const deliveredBy = log.filter(
            (e) => e.type === "step.started" && (e.payload.deliveredMessageIds ?? []).includes(steered)
          )
          if (result._tag === "Right") {
            outcomes.withdrawn++
            expect(withdrawnEvents).toHaveLength(1)
            expect(deliveredBy).toHaveLength(0)
            expect(sent).not.toMatch(/steer me/)
          } else {
            outcomes.delivered++
            expect(result.left).toMatchObject({ _tag: "WithdrawRefused", reason: "delivered" })
            expect(withdrawnEvents).toHaveLength(0)
            expect(deliveredBy).toHaveLength(1)
            expect(sent).toMatch(/steer me/)
          }
        }).pipe(
          Effect.provide(
            layer([Script.toolCalls([{ callId: "w1", tool: "wait", input: {} }]), Script.text("ok")], [g.tool])
          )
        )
      }
      expect(outcomes.withdrawn + outcomes.delivered).toBe(24)
    })
  )

  it.live("sendPending: after an interrupt, the messages left waiting (queued, steered) alone start a turn", () =>
    gated(
      (g) =>
        Effect.gen(function* () {
          const sessions = yield* Sessions
          const id = yield* sessions.create({ cwd: "/tmp" })
          expect(yield* sessions.sendPending(id)).toBe(false)
          yield* sessions.send(id, "first")
          yield* Deferred.await(g.started)
          const queued = yield* sessions.send(id, "second", { mode: "queue" })
          const steered = yield* sessions.send(id, "and b", { mode: "steer" })
          // a turn runs: it delivers them itself
          expect(yield* sessions.sendPending(id)).toBe(false)
          yield* sessions.interrupt(id)
          expect((yield* sessions.state(id)).queued).toEqual([queued])
          expect(yield* sessions.sendPending(id)).toBe(true)
          expect(Option.getOrThrow(yield* sessions.wait(id)).reason).toBe("stop")
          const turns = (yield* events(id)).filter((e) => e.type === "turn.started")
          expect(turns.map((e) => e.payload.messageIds)).toEqual([[expect.any(String)], [queued, steered]])
          const sent = yield* requests
          expectValidHistories(sent)
          expect(sent.at(-1)!.messages.slice(-2)).toEqual([
            { role: "user", content: "second" },
            { role: "user", content: "and b" }
          ])
          expect((yield* sessions.state(id)).queued).toEqual([])
        }),
      [Script.text("two")]
    )
  )

  it.live("the file stamps a call recorded go with its end, failed or finished, into the session's reads", () =>
    Effect.gen(function* () {
      const stamping = (name: string, path: string, fails: boolean) =>
        defineTool({
          name,
          description: "records a stamp",
          input: Schema.Struct({}),
          execute: (_input, context) =>
            context.reads
              .record(path, { mtimeMs: 7, size: 3, hash: "h" })
              .pipe(
                Effect.zipRight(
                  fails
                    ? Effect.fail(new ToolFailure({ message: "wrote, then failed" }))
                    : Effect.succeed({ output: "ok" })
                )
              )
        })
      yield* Effect.gen(function* () {
        const { id, state } = yield* prompt("stamps")
        // an edit that wrote the file and then failed: what it left is still what the agent saw
        expect(Object.fromEntries(state.reads)).toEqual({
          "/w/failed.ts": { mtimeMs: 7, size: 3, hash: "h" },
          "/w/finished.ts": { mtimeMs: 7, size: 3, hash: "h" }
        })
        const ends = (yield* events(id)).filter((e) => e.type === "tool.failed" || e.type === "tool.finished")
        expect(
          ends.map((e) => [e.type, (e.payload as { reads?: ReadonlyArray<{ path: string }> }).reads?.[0]?.path])
        ).toEqual([
          ["tool.failed", "/w/failed.ts"],
          ["tool.finished", "/w/finished.ts"]
        ])
      }).pipe(
        Effect.provide(
          layer(
            [
              Script.toolCalls([{ callId: "f1", tool: "stamp_fail", input: {} }]),
              Script.toolCalls([{ callId: "f2", tool: "stamp_ok", input: {} }]),
              Script.text("ok")
            ],
            [stamping("stamp_fail", "/w/failed.ts", true), stamping("stamp_ok", "/w/finished.ts", false)]
          )
        )
      )
    })
  )

  it.effect("a tool past its timeout: tool.timeout, stopped, tool.failed timedOut (on the test clock)", () =>
    Effect.gen(function* () {
      const stopped = yield* Ref.make(false)
      const started = yield* Deferred.make<void>()
      const slow = defineTool({
        name: "slow",
        description: "never ends",
        input: Schema.Struct({}),
        timeoutMs: () => 600_000,
        execute: (_input, context) =>
          context.progress("compiling 3/10").pipe(
            Effect.zipRight(Deferred.succeed(started, undefined)),
            Effect.zipRight(Effect.never),
            Effect.onInterrupt(() =>
              Ref.set(stopped, true).pipe(Effect.zipRight(context.recordStopped({ step: 3, of: 10 })))
            )
          )
      })
      yield* Effect.gen(function* () {
        const turn = yield* Effect.fork(prompt("slow"))
        yield* Deferred.await(started)
        // the call's wait for its tool follows the clock: nothing ends it until the clock passes the
        // timeout (a wait on the wall clock would outlast the test)
        yield* TestClock.adjust(Duration.millis(599_999))
        expect(yield* Ref.get(stopped)).toBe(false)
        yield* TestClock.adjust(Duration.millis(1))
        const { id, state } = yield* Fiber.join(turn)
        expect(yield* Ref.get(stopped)).toBe(true)
        const t = types(yield* events(id))
        expect(t.indexOf("tool.timeout")).toBeLessThan(t.indexOf("tool.failed"))
        // the tool's record of the stopped call (written by its finalizer) is in tool.failed
        const failed = (yield* events(id)).find((e) => e.type === "tool.failed")!
        expect(failed.payload).toMatchObject({ timedOut: true, metadata: { step: 3, of: 10 } })
        const part = state.toolParts.get("s1" as never)!.state
        expect(part).toMatchObject({ _tag: "error", timedOut: true, interrupted: false })
        // the model reads what the tool printed before it was stopped
        expect((part as { error: string }).error).toMatch(
          /timed out after 600s[\s\S]*Output before it was stopped:\ncompiling 3\/10/
        )
        expect(state.status._tag).toBe("idle")
      }).pipe(
        Effect.provide(
          layer([Script.toolCalls([{ callId: "s1", tool: "slow", input: {} }]), Script.text("ok")], [slow])
        )
      )
    })
  )
})

describe("Sessions: snapshots at a turn's end", () => {
  it.live("the first turn's end takes one; a session opened again counts from the snapshot it was restored from", () =>
    Effect.gen(function* () {
      const store = yield* EventStore
      const sessions = yield* Sessions
      const snapshotSeqs = (id: SessionId) => store.snapshotSeqs(id, Projection.PROJECTION_VERSION)
      const { id } = yield* prompt("hello")
      const first = yield* snapshotSeqs(id)
      const end = (yield* sessions.state(id)).lastSeq
      // none yet: the turn's end took one
      expect(first).toEqual([end])
      // opened again (a new driver, restored from that snapshot): a one-step turn adds ≈ 14 events,
      // fewer than a fifth of `DEFAULT_SNAPSHOT_EVERY` since the snapshot, so its end takes none
      yield* sessions.close(id)
      yield* sessions.open(id)
      yield* sessions.send(id, "again")
      expect(Option.getOrThrow(yield* sessions.wait(id)).reason).toBe("stop")
      const later = (yield* sessions.state(id)).lastSeq
      expect(later - end).toBeGreaterThan(5)
      expect(later - end).toBeLessThan(turnEndMinimum(DEFAULT_SNAPSHOT_EVERY))
      expect(yield* snapshotSeqs(id)).toEqual(first)
      // and the state restored from the snapshot and those events is the log's
      expect(yield* Snapshots.restore(id)).toEqual(yield* sessions.state(id))
    }).pipe(Effect.provide(layer([Script.text("hi"), Script.text("again")])))
  )
})

describe("Sessions: opening a session a crashed process left", () => {
  it.live("sweeps the open call, then the next request has a result for every call", () =>
    Effect.gen(function* () {
      const store = yield* EventStore
      const sessions = yield* Sessions
      const id = "crashed" as SessionId
      // what a process killed during a tool left behind
      yield* store.append(id, [
        ...prelude,
        e("tool.pending", { messageId: A1, callId: C1, tool: "echo" }),
        e("step.finished", { messageId: A1, step: 0, finishReason: "tool-calls", usage }),
        e("chat.state", { state: "awaiting_tool" }),
        e("tool.invoked", { messageId: A1, callId: C1, tool: "echo", input: { text: "x" } })
      ])
      const opened = yield* sessions.open(id)
      expect(opened.toolParts.get(C1)!.state).toMatchObject({ _tag: "error", interrupted: true, reason: "crash" })
      expect(opened.status._tag).toBe("idle")
      yield* sessions.send(id, "go on")
      const outcome = Option.getOrThrow(yield* sessions.wait(id))
      expect(outcome.reason).toBe("stop")
      const sent = yield* requests
      expectValidHistories(sent)
      expect(sent[0]!.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "user"])
      expect(JSON.stringify(sent[0]!.messages[2])).toMatch(/interrupted \(crash\)/)
    }).pipe(Effect.provide(layer([Script.text("resumed")])))
  )

  it.live("stops what is left of a command the dead process started (its recorded group), and says so", () =>
    Effect.gen(function* () {
      const store = yield* EventStore
      const sessions = yield* Sessions
      const id = "crashed-cmd" as SessionId
      // a command left running by a process killed with SIGKILL: its own process group, still alive
      const token = newProcessToken()
      const orphan = spawn("sleep", ["30"], {
        detached: true,
        stdio: "ignore",
        env: { ...process.env, [PROCESS_TOKEN_ENV]: token }
      })
      orphan.unref()
      const pgid = orphan.pid!
      const group = { pgid, token }
      // another call's recorded group id, now a group of another program (the id reused): left alone
      const other = spawn("sleep", ["30"], { detached: true, stdio: "ignore" })
      other.unref()
      const reused = { pgid: other.pid!, token: newProcessToken() }
      try {
        yield* store.append(id, [
          ...prelude,
          e("tool.pending", { messageId: A1, callId: C1, tool: "bash" }),
          e("tool.pending", { messageId: A1, callId: C2, tool: "bash" }),
          e("step.finished", { messageId: A1, step: 0, finishReason: "tool-calls", usage }),
          e("chat.state", { state: "awaiting_tool" }),
          e("tool.invoked", { messageId: A1, callId: C1, tool: "bash", input: { command: "sleep 30" } }),
          e("tool.process", { callId: C1, ...group }),
          e("tool.invoked", { messageId: A1, callId: C2, tool: "bash", input: { command: "sleep 30" } }),
          e("tool.process", { callId: C2, ...reused })
        ])
        expect(groupAlive(pgid)).toBe(true)
        const opened = yield* sessions.open(id)
        expect(groupAlive(pgid)).toBe(false)
        expect(groupAlive(other.pid!)).toBe(true)
        const first = opened.toolParts.get(C1)!.state
        expect(first).toMatchObject({ _tag: "error", interrupted: true, reason: "crash" })
        expect((first as { error: string }).error).toBe(
          "The process running this tool stopped before it finished (crash); its outcome is unknown. " +
            "Its command was still running and was stopped."
        )
        expect((opened.toolParts.get(C2)!.state as { error: string }).error).not.toContain("was stopped")
      } finally {
        for (const pid of [pgid, other.pid!]) {
          try {
            process.kill(-pid, "SIGKILL")
          } catch {
            // gone
          }
        }
      }
    }).pipe(Effect.provide(layer([])))
  )

  it("takes over the lease of a process of this machine that is gone, never a live one", () => {
    const child = spawnSync(process.execPath, ["-e", "0"])
    expect(child.status).toBe(0)
    expect(ownerIsDead(`${hostname()}:${child.pid}:x`)).toBe(true)
    expect(ownerIsDead(`${hostname()}:${process.pid}:x`)).toBe(false)
    expect(ownerIsDead(`${hostname()}:${process.ppid}:x`)).toBe(false)
    expect(ownerIsDead(`another-host:${child.pid}:x`)).toBe(false)
    expect(ownerIsDead("not-an-owner")).toBe(false)
  })

  it.live.skipIf(process.platform !== "linux")(
    "a process of this machine that exited but was never reaped (a zombie) is gone too",
    () =>
      Effect.gen(function* () {
        // `sleep 0` exits under a parent (`exec sleep 30`) that never waits for it: a zombie
        const parent = spawn("sh", ["-c", "sleep 0 & exec sleep 30"], { stdio: "ignore" })
        yield* Effect.addFinalizer(() => Effect.sync(() => parent.kill("SIGKILL")))
        const zombie = yield* Effect.promise(async () => {
          for (;;) {
            const children = fs.readFileSync(`/proc/${parent.pid}/task/${parent.pid}/children`, "utf8").trim()
            const pid = Number(children.split(" ")[0])
            if (pid > 0 && fs.readFileSync(`/proc/${pid}/stat`, "utf8").includes(") Z ")) return pid
            await new Promise((resolve) => setTimeout(resolve, 10))
          }
        })
        expect(ownerIsDead(`${hostname()}:${zombie}:x`)).toBe(true)
        expect(ownerIsDead(`${hostname()}:${parent.pid}:x`)).toBe(false)
      }).pipe(Effect.scoped)
  )
})

describe("Tools: hooks and progress", () => {
  it.live("a before hook changes the input or blocks the call; an after hook changes the output", () =>
    Effect.gen(function* () {
      const { id, state } = yield* prompt("hooks")
      expect(state.toolParts.get("h1" as never)!.state).toMatchObject({
        _tag: "completed",
        input: { text: "HOOKED" },
        output: "echo: HOOKED (after)"
      })
      expect(state.toolParts.get("h2" as never)!.state).toMatchObject({
        _tag: "error",
        error: "The call was blocked: no secrets"
      })
      const log = yield* events(id)
      // the blocked call never ran
      expect(log.filter((x) => x.type === "tool.invoked").map((x) => (x.payload as { callId: string }).callId)).toEqual(
        ["h1"]
      )
    }).pipe(
      Effect.provide(
        layer(
          [
            Script.toolCalls([
              { callId: "h1", tool: "echo", input: { text: "hooked" } },
              { callId: "h2", tool: "echo", input: { text: "secret" } }
            ]),
            Script.text("ok")
          ],
          [],
          {
            tools: {
              tools: [echo],
              hooks: {
                before: [
                  (call) =>
                    Effect.succeed(
                      (call.input as { text: string }).text === "secret"
                        ? { block: "no secrets" }
                        : { input: { text: (call.input as { text: string }).text.toUpperCase() } }
                    )
                ],
                after: [(_call, output) => Effect.succeed({ ...output, output: `${output.output} (after)` })]
              }
            }
          }
        )
      )
    )
  )

  it.live(
    "progress throttled within its window is recorded at the window's end: the last output before a quiet spell",
    () =>
      Effect.gen(function* () {
        // two reports at once (one window), then nothing for longer than the window (250 ms)
        const quiet = defineTool({
          name: "quiet",
          description: "reports twice, then works quietly",
          input: Schema.Struct({}),
          execute: (_input, context) =>
            context
              .progress("starting")
              .pipe(
                Effect.zipRight(context.progress("starting\ncompiling")),
                Effect.zipRight(Effect.sleep(Duration.millis(1000))),
                Effect.as({ output: "done" })
              )
        })
        yield* Effect.gen(function* () {
          const { id } = yield* prompt("quiet")
          const log = yield* events(id)
          const progress = log.filter((x) => x.type === "tool.progress")
          expect(progress.map((x) => (x.payload as { output: string }).output)).toEqual([
            "starting",
            "starting\ncompiling"
          ])
          const t = types(log)
          expect(t.lastIndexOf("tool.progress")).toBeLessThan(t.indexOf("tool.finished"))
        }).pipe(
          Effect.provide(
            layer([Script.toolCalls([{ callId: "q1", tool: "quiet", input: {} }]), Script.text("ok")], [quiet])
          )
        )
      })
  )

  it.live("a tool's progress is recorded while it runs", () =>
    Effect.gen(function* () {
      const progressing = defineTool({
        name: "progress",
        description: "reports progress",
        input: Schema.Struct({}),
        execute: (_input, context) => context.progress("half way").pipe(Effect.as({ output: "done" }))
      })
      yield* Effect.gen(function* () {
        const { id } = yield* prompt("progress")
        const log = yield* events(id)
        const progress = log.filter((x) => x.type === "tool.progress")
        expect(progress.map((x) => (x.payload as { output: string }).output)).toEqual(["half way"])
        const t = types(log)
        expect(t.indexOf("tool.invoked")).toBeLessThan(t.indexOf("tool.progress"))
        expect(t.indexOf("tool.progress")).toBeLessThan(t.indexOf("tool.finished"))
      }).pipe(
        Effect.provide(
          layer([Script.toolCalls([{ callId: "p1", tool: "progress", input: {} }]), Script.text("ok")], [progressing])
        )
      )
    })
  )
})

/**
 * The kernel on the memory store with one tool, where the disk is full for one content: storing a
 * blob of exactly `fullFor` (as text or bytes) fails; every other blob goes in.
 */
const agentWithFullDisk = (script: ReadonlyArray<ScriptStep>, tool: AnyTool, fullFor: string) => {
  const fullDisk = Layer.effect(
    EventStore,
    Effect.map(EventStore, (store) => ({
      ...store,
      putBlob: (content: string | Uint8Array) =>
        (typeof content === "string" ? content : Buffer.from(content).toString("utf8")) === fullFor
          ? Effect.fail(new EventStoreError({ method: "putBlob", message: "putBlob: disk full" }))
          : store.putBlob(content)
    }))
  )
  return makeAgentLayer({
    sessions: { maxSteps: 10, system: () => "system" },
    tools: { tools: [tool] },
    retry: fastRetry
  }).pipe(
    Layer.provideMerge(layerScripted(script)),
    Layer.provide(Secrets.layerFromEnv),
    Layer.provide(fullDisk),
    Layer.provideMerge(EventStore.layerMemory)
  )
}

describe("a store that fails under a tool", () => {
  it.live("stops the tool and fails the turn with the store's error, not a defect and not a call failure", () => {
    let after = false
    const storing = defineTool({
      name: "store",
      description: "stores its text as a blob",
      input: Schema.Struct({ text: Schema.String }),
      execute: (input, context) =>
        context.storeBlob(input.text).pipe(
          Effect.tap(() => {
            after = true
          }),
          Effect.as({ output: "stored" })
        )
    })
    const script: ReadonlyArray<ScriptStep> = [
      {
        events: [
          ...Script.toolCall({ callId: "s1", tool: "store", input: { text: "the tool's blob" } }),
          Script.finish("tool-calls")
        ]
      },
      Script.text("never")
    ]
    // the memory store, but the disk is full when the tool stores its blob (the kernel's own blobs,
    // the requests it sends, go in)
    const agent = agentWithFullDisk(script, storing, "the tool's blob")
    return Effect.gen(function* () {
      const sessions = yield* Sessions
      const id = yield* sessions.create({ cwd: "/tmp" })
      yield* sessions.send(id, "go")
      const outcome = Option.getOrThrow(yield* sessions.wait(id))
      expect(outcome.reason).toBe("error")
      expect(outcome.message).toContain("disk full")
      expect(outcome.message).not.toContain("crashed")
      expect(after).toBe(false)
      const log = yield* events(id)
      // the model was not told the call failed (the log could not hold what it did), and the call
      // did not finish: the turn ended with the store's error, after its first step
      expect(types(log)).not.toContain("tool.finished")
      const failed = log.filter((x) => x.type === "tool.failed").map((x) => (x.payload as { error: string }).error)
      expect(failed.every((error) => !error.includes(LOG_UNAVAILABLE))).toBe(true)
      expect(log.filter((x) => x.type === "step.started")).toHaveLength(1)
      expect(types(log)).toContain("tool.invoked")
    }).pipe(Effect.provide(agent))
  })
})

describe("a store that fails under the workspace snapshot of a command", () => {
  it.live("the call fails the turn with the store's error (typed, not a defect), and nothing says it finished", () => {
    const cwd = tempDir()
    // a command-like tool (its changes are found by the snapshots around it) that writes a file
    const making = defineTool({
      name: "make",
      description: "writes a file the way a command would",
      input: Schema.Struct({}),
      snapshotWorkspace: true,
      execute: () =>
        Effect.sync(() => {
          fs.writeFileSync(`${cwd}/made.txt`, "what the command made")
          return { output: "made" }
        })
    })
    const script: ReadonlyArray<ScriptStep> = [
      {
        events: [...Script.toolCall({ callId: "m1", tool: "make", input: {} }), Script.finish("tool-calls")]
      },
      Script.text("never")
    ]
    // the disk is full when the snapshot after the call stores the new file's content
    const agent = agentWithFullDisk(script, making, "what the command made")
    return Effect.gen(function* () {
      const sessions = yield* Sessions
      const id = yield* sessions.create({ cwd })
      yield* sessions.send(id, "go")
      const outcome = Option.getOrThrow(yield* sessions.wait(id))
      expect(outcome.reason).toBe("error")
      expect(outcome.message).toContain("disk full")
      expect(outcome.message).not.toContain("crashed")
      expect(fs.readFileSync(`${cwd}/made.txt`, "utf8")).toBe("what the command made")
      const log = yield* events(id)
      // the snapshot before the call was recorded; the one after it could not be, and the call did not finish
      expect(
        log.filter((x) => x.type === "workspace.snapshot").map((x) => (x.payload as { phase: string }).phase)
      ).toEqual(["baseline"])
      expect(types(log)).toContain("tool.invoked")
      expect(types(log)).not.toContain("tool.finished")
      expect(log.filter((x) => x.type === "step.started")).toHaveLength(1)
    }).pipe(Effect.provide(agent))
  })
})

describe("Sessions: no message is stranded, no turn is stuck", () => {
  it.live("a defect in the model stream ends the turn as an error, idle; the next message starts a turn", () =>
    Effect.gen(function* () {
      const sessions = yield* Sessions
      const id = yield* sessions.create({ cwd: "/tmp" })
      yield* sessions.send(id, "first")
      const outcome = Option.getOrThrow(yield* sessions.wait(id))
      expect(outcome.reason).toBe("error")
      expect(outcome.message).toMatch(/has no step/)
      const state = yield* sessions.state(id)
      expect(state.status._tag).toBe("idle")
      expect(state.turn).toBeNull()
      expect(state.lastTurn).toMatchObject({ interrupted: true, reason: "error" })
      // the session is usable again: the next message is a prompt that starts (and fails) a turn
      yield* sessions.send(id, "second")
      expect(Option.getOrThrow(yield* sessions.wait(id)).reason).toBe("error")
      const log = yield* events(id)
      expect(log.filter((x) => x.type === "user.message").map((x) => (x.payload as { mode: string }).mode)).toEqual([
        "prompt",
        "prompt"
      ])
      expect(log.filter((x) => x.type === "turn.started")).toHaveLength(2)
    }).pipe(Effect.provide(layer([])))
  )

  it.live(
    "a crashing after-hook is skipped (the output as the tool gave it) and recorded as hook.ran; the turn goes on",
    () =>
      Effect.gen(function* () {
        const { id, outcome, state } = yield* prompt("hook")
        expect(outcome.reason).toBe("stop")
        expect(state.toolParts.get("c1" as never)!.state).toMatchObject({ _tag: "completed", output: "echo: x" })
        const log = yield* events(id)
        const ran = log.findIndex((x) => x.type === "hook.ran")
        expect(log[ran]!.payload).toMatchObject({
          source: "tool.execute.after[0]",
          hook: "tool.execute.after",
          callId: "c1",
          tool: "echo",
          outcome: "failed",
          changed: false,
          error: "hook bug"
        })
        expect(log[ran + 1]!.type).toBe("tool.finished")
      }).pipe(
        Effect.provide(
          layer([Script.toolCalls([{ callId: "c1", tool: "echo", input: { text: "x" } }]), Script.text("ok")], [], {
            tools: { tools: [echo], hooks: { after: [() => Effect.die(new Error("hook bug"))] } }
          })
        )
      )
  )

  it.live("a before hook that changes the input: hook.ran, then tool.invoked with the changed input", () =>
    Effect.gen(function* () {
      const { id, state } = yield* prompt("hook")
      expect(state.toolParts.get("c1" as never)!.state).toMatchObject({ _tag: "completed", output: "echo: y" })
      const log = yield* events(id)
      const ran = log.findIndex((x) => x.type === "hook.ran")
      expect(log[ran]!.payload).toMatchObject({
        source: "plugin:swap",
        outcome: "changed",
        changed: true,
        input: { text: "x" }
      })
      expect(log[ran + 1]).toMatchObject({ type: "tool.invoked", payload: { callId: "c1", input: { text: "y" } } })
      expect(state.toolParts.get("c1" as never)!.hooks).toEqual([
        { source: "plugin:swap", hook: "tool.execute.before", outcome: "changed" }
      ])
    }).pipe(
      Effect.provide(
        layer([Script.toolCalls([{ callId: "c1", tool: "echo", input: { text: "x" } }]), Script.text("ok")], [], {
          tools: {
            tools: [echo],
            hooks: { before: [{ source: "plugin:swap", run: () => Effect.succeed({ input: { text: "y" } }) }] }
          }
        })
      )
    )
  )

  it.live("a steer sent during the last step of a max-steps turn is delivered by a new turn", () =>
    Effect.gen(function* () {
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const waiting = defineTool({
        name: "wait",
        description: "waits",
        input: Schema.Struct({}),
        execute: () =>
          Deferred.succeed(started, undefined).pipe(
            Effect.zipRight(Deferred.await(release)),
            Effect.as({ output: "ok" })
          )
      })
      yield* Effect.gen(function* () {
        const sessions = yield* Sessions
        const id = yield* sessions.create({ cwd: "/tmp" })
        yield* sessions.send(id, "go")
        yield* Deferred.await(started)
        yield* sessions.send(id, "late steer", { mode: "steer" })
        yield* Deferred.succeed(release, undefined)
        const outcome = Option.getOrThrow(yield* sessions.wait(id))
        expect(outcome.reason).toBe("stop")
        const state = yield* sessions.state(id)
        expect(state.messages.filter((m) => m.role === "user").every((m) => m.delivered)).toBe(true)
        const log = yield* events(id)
        expect(
          log.filter((x) => x.type === "turn.finished").map((x) => (x.payload as { reason: string }).reason)
        ).toEqual(["max-steps", "stop"])
        const sent = yield* requests
        expect(sent[1]!.messages.at(-1)).toEqual({ role: "user", content: "late steer" })
      }).pipe(
        Effect.provide(
          layer([Script.toolCalls([{ callId: "w", tool: "wait", input: {} }]), Script.text("answered")], [waiting], {
            maxSteps: 1
          })
        )
      )
    })
  )

  it.live("a message sent while an interrupt is stopping a tool starts a new turn", () =>
    Effect.gen(function* () {
      const started = yield* Deferred.make<void>()
      const stopping = yield* Deferred.make<void>()
      const letStop = yield* Deferred.make<void>()
      const slowStop = defineTool({
        name: "slowstop",
        description: "takes a while to stop",
        input: Schema.Struct({}),
        execute: () =>
          Deferred.succeed(started, undefined).pipe(
            Effect.zipRight(Effect.never),
            Effect.onInterrupt(() =>
              Deferred.succeed(stopping, undefined).pipe(Effect.zipRight(Deferred.await(letStop)))
            )
          )
      })
      yield* Effect.gen(function* () {
        const sessions = yield* Sessions
        const id = yield* sessions.create({ cwd: "/tmp" })
        yield* sessions.send(id, "go")
        yield* Deferred.await(started)
        const interrupting = yield* Effect.fork(sessions.interrupt(id))
        yield* Deferred.await(stopping)
        const sending = yield* Effect.fork(sessions.send(id, "next task"))
        yield* Deferred.succeed(letStop, undefined)
        yield* Fiber.join(interrupting)
        yield* Fiber.join(sending)
        const outcome = Option.getOrThrow(yield* sessions.wait(id))
        expect(outcome.reason).toBe("stop")
        const log = yield* events(id)
        const messages = log
          .filter((x) => x.type === "user.message")
          .map((x) => x.payload as { text: string; mode: string })
        expect(messages).toEqual([
          expect.objectContaining({ text: "go", mode: "prompt" }),
          expect.objectContaining({ text: "next task", mode: "prompt" })
        ])
        expect(
          types(log).filter((t) => t === "turn.started" || t === "turn.interrupted" || t === "turn.finished")
        ).toEqual(["turn.started", "turn.interrupted", "turn.started", "turn.finished"])
      }).pipe(
        Effect.provide(
          layer([Script.toolCalls([{ callId: "s", tool: "slowstop", input: {} }]), Script.text("done")], [slowStop])
        )
      )
    })
  )

  it.live("an interrupt right after send still records the turn it ended", () =>
    Effect.gen(function* () {
      const sessions = yield* Sessions
      const id = yield* sessions.create({ cwd: "/tmp" })
      yield* sessions.send(id, "go")
      yield* sessions.interrupt(id)
      const state = yield* sessions.state(id)
      expect(state.turn).toBeNull()
      expect(state.status._tag).toBe("idle")
      const t = types(yield* events(id))
      expect(t).toContain("turn.started")
      expect(t).toContain("turn.interrupted")
      expect(t.at(-1)).toBe("session.status")
    }).pipe(Effect.provide(layer([{ events: [], hang: true }])))
  )
})

describe("Actions: file changes", () => {
  it.live("recordFileChange stores the contents as blobs and commits file.changed, relative to the workspace", () =>
    Effect.gen(function* () {
      const writer = defineTool({
        name: "writer",
        description: "pretends to write a file",
        input: Schema.Struct({}),
        execute: (_input, context) =>
          context
            .recordFileChange({ path: `${context.cwd}/src/x.txt`, op: "update", before: "old\n", after: "new\n" })
            .pipe(Effect.as({ output: "written" }))
      })
      yield* Effect.gen(function* () {
        const { id, state } = yield* prompt("write")
        const store = yield* EventStore
        const changed = (yield* events(id)).filter((x) => x.type === "file.changed")
        expect(changed).toHaveLength(1)
        const payload = changed[0]!.payload as {
          path: string
          op: string
          beforeHash: string
          afterHash: string
          callId: string
        }
        expect(payload).toMatchObject({ path: "src/x.txt", op: "update", callId: "w1" })
        const text = (hash: string) =>
          store.getBlob(hash).pipe(Effect.map((blob) => new TextDecoder().decode(Option.getOrThrow(blob))))
        expect(yield* text(payload.beforeHash)).toBe("old\n")
        expect(yield* text(payload.afterHash)).toBe("new\n")
        expect(state.files["src/x.txt"]).toMatchObject({ op: "update", callId: "w1" })
        // the change is committed before the call's result
        const t = types(yield* events(id))
        expect(t.indexOf("file.changed")).toBeLessThan(t.indexOf("tool.finished"))
      }).pipe(
        Effect.provide(
          layer([Script.toolCalls([{ callId: "w1", tool: "writer", input: {} }]), Script.text("ok")], [writer])
        )
      )
    })
  )
})

describe("the todo tool through the kernel", () => {
  it.live("the task list is kept as todo.updated events and in the projection", () =>
    Effect.gen(function* () {
      const { id, state } = yield* prompt("plan")
      expect(state.todos).toEqual([
        { content: "Read", status: "completed" },
        { content: "Fix", status: "in_progress" }
      ])
      const updates = (yield* events(id)).filter((x) => x.type === "todo.updated")
      expect(updates.map((x) => (x.payload as { callId: string }).callId)).toEqual(["t1"])
    }).pipe(
      Effect.provide(
        layer(
          [
            Script.toolCalls([
              {
                callId: "t1",
                tool: "todo",
                input: {
                  todos: [
                    { content: "Read", status: "completed" },
                    { content: "Fix", status: "in_progress" }
                  ]
                }
              }
            ]),
            Script.text("ok")
          ],
          [],
          { tools: { tools: [todo] } }
        )
      )
    )
  )
})

describe("Hooks as a layer", () => {
  it.live("a program adds hooks by providing Hooks.layer: they run after the registry's own, both ways", () =>
    Effect.gen(function* () {
      const { id, state } = yield* prompt("hooks")
      // the registry's before hook upper-cases, then the layer's appends "!"; the after hooks likewise
      expect(state.toolParts.get("h1" as never)!.state).toMatchObject({
        _tag: "completed",
        input: { text: "HI!" },
        output: "echo: HI! (registry) (layer)"
      })
      expect(state.toolParts.get("h2" as never)!.state).toMatchObject({
        _tag: "error",
        error: "The call was blocked: the layer blocks rm"
      })
      const invoked = (yield* events(id)).filter((x) => x.type === "tool.invoked")
      expect(invoked.map((x) => (x.payload as { callId: string }).callId)).toEqual(["h1"])
    }).pipe(
      Effect.provide(
        makeAgentLayer({
          sessions: { maxSteps: 5, system: () => "system" },
          tools: {
            tools: [echo],
            hooks: {
              before: [
                (call) => Effect.succeed({ input: { text: (call.input as { text: string }).text.toUpperCase() } })
              ],
              after: [(_call, output) => Effect.succeed({ ...output, output: `${output.output} (registry)` })]
            }
          },
          retry: fastRetry
        }).pipe(
          Layer.provide(
            Hooks.layer({
              before: [
                (call) =>
                  Effect.succeed(
                    (call.input as { text: string }).text === "RM"
                      ? { block: "the layer blocks rm" }
                      : { input: { text: `${(call.input as { text: string }).text}!` } }
                  )
              ],
              after: [(_call, output) => Effect.succeed({ ...output, output: `${output.output} (layer)` })]
            })
          ),
          Layer.provideMerge(
            layerScripted([
              Script.toolCalls([
                { callId: "h1", tool: "echo", input: { text: "hi" } },
                { callId: "h2", tool: "echo", input: { text: "rm" } }
              ]),
              Script.text("ok")
            ])
          ),
          Layer.provide(Secrets.layerFromEnv),
          Layer.provideMerge(EventStore.layerMemory)
        )
      )
    )
  )
})

describe("Sessions: API keys (Secrets)", () => {
  const KEY = "sk-test-kernel-0123456789"
  const marker = redactionMarker("MY_KEY")
  /** a tool that leaks the key everywhere it can: its output, progress, metadata, a blob, its env */
  const leak = defineTool({
    name: "leak",
    description: "leaks",
    input: Schema.Struct({ fail: Schema.Boolean }),
    execute: (input, context) =>
      Effect.gen(function* () {
        yield* context.progress(`progress ${KEY}`)
        const blob = yield* context.storeBlob(Buffer.from(`blob ${KEY}`))
        if (input.fail) return yield* new ToolFailure({ message: `failed with ${KEY}` })
        return {
          output: `output ${KEY}; env has it: ${context.secrets.env.MY_KEY !== undefined}`,
          metadata: { nested: [{ key: KEY }], blob }
        }
      })
  })

  it.live(
    "no key reaches the log or the model: outputs, errors, metadata and blobs are masked; the tools' env lacks it",
    () =>
      Effect.gen(function* () {
        const { id, outcome } = yield* prompt("leak it")
        expect(outcome.reason).toBe("stop")
        const log = yield* events(id)
        const text = JSON.stringify(log)
        expect(text).not.toContain(KEY)
        expect(text).toContain(marker)
        const progress = log.filter((e) => e.type === "tool.progress").map((e) => e.payload)
        expect(progress).toContainEqual(expect.objectContaining({ output: `progress ${marker}` }))
        const finished = log.find((e) => e.type === "tool.finished")!
        const blob = (finished.payload as { metadata: { blob: string } }).metadata.blob
        const stored = yield* Effect.flatMap(EventStore, (store) => store.getBlob(blob))
        expect(Buffer.from(Option.getOrThrow(stored)).toString()).toBe(`blob ${marker}`)
        const sent = yield* requests
        const results = JSON.stringify(sent[1]!.messages)
        expect(results).not.toContain(KEY)
        expect(results).toContain(`output ${marker}; env has it: false`)
        expect(results).toContain(`failed with ${marker}`)
      }).pipe(
        Effect.provide(
          layer(
            [
              Script.toolCalls([
                { callId: "ok", tool: "leak", input: { fail: false } },
                { callId: "bad", tool: "leak", input: { fail: true } }
              ]),
              Script.text("done")
            ],
            [leak],
            { secrets: { hide: ["MY_KEY"], env: { MY_KEY: KEY, PATH: "/bin" } } }
          )
        )
      )
  )

  it.live(
    "the model's own text: a key split over two deltas is masked whole; a held-back start comes out at the end",
    () =>
      Effect.gen(function* () {
        const gate = yield* Deferred.make<void>()
        // the second delta comes only once the first is in the log: two batches, two text.delta events
        const gated = Layer.succeed(Model, {
          name: "test/gated",
          stream: () =>
            Stream.concat(
              Stream.make(ModelEvent.TextDelta({ id: "t", delta: `the key is ${KEY.slice(0, 12)}` })),
              Stream.fromEffect(Deferred.await(gate)).pipe(
                Stream.flatMap(() =>
                  Stream.make(
                    ModelEvent.TextDelta({ id: "t", delta: `${KEY.slice(12)} and sk-t` }),
                    ModelEvent.Finish({ finishReason: "stop", usage: zeroUsage })
                  )
                )
              )
            )
        })
        const agent = makeAgentLayer({
          sessions: { maxSteps: 3, system: () => "system" },
          tools: { tools: [] },
          retry: fastRetry
        }).pipe(
          Layer.provideMerge(gated),
          Layer.provide(Secrets.layer({ hide: ["MY_KEY"], env: { MY_KEY: KEY } })),
          Layer.provideMerge(EventStore.layerMemory)
        )
        yield* Effect.gen(function* () {
          const sessions = yield* Sessions
          const store = yield* EventStore
          const id = yield* sessions.create({ cwd: "/tmp" })
          yield* sessions.send(id, "say it")
          const first = yield* store.follow(id).pipe(
            Stream.filter((e) => e.type === "text.delta"),
            Stream.runHead
          )
          // the key's start is held back until the next delta says whether it is a key
          expect(Option.getOrThrow(first).payload).toMatchObject({ delta: "the key is " })
          yield* Deferred.succeed(gate, undefined)
          expect(Option.map(yield* sessions.wait(id), (o) => o.reason)).toEqual(Option.some("stop"))
          const log = yield* events(id)
          expect(JSON.stringify(log)).not.toContain(KEY.slice(0, 12))
          const deltas = log.flatMap((e) => (e.type === "text.delta" ? [e.payload.delta] : []))
          // "sk-t" could have begun a key: it waited, and came out with the step's end
          expect(deltas).toEqual(["the key is ", `${marker} and `, "sk-t"])
          const state = yield* sessions.state(id)
          expect(JSON.stringify(state.messages)).toContain(`the key is ${marker} and sk-t`)
        }).pipe(Effect.provide(agent))
      })
  )

  it.live("a part's held-back text comes out when the next part or a tool call begins, in its place", () =>
    Effect.gen(function* () {
      const { id } = yield* prompt("go")
      const log = yield* events(id)
      const order = log.flatMap((e) =>
        e.type === "text.delta"
          ? [`${e.payload.partId.split(":").at(-1)}=${e.payload.delta}`]
          : e.type === "tool.pending"
            ? [`call ${e.payload.callId}`]
            : []
      )
      // "sk-t" could have begun a key: it waits, and comes out before what follows it
      expect(order.slice(0, 5)).toEqual(["t0=first ", "t0=sk-t", "t1=second ", "t1=sk-", "call c1"])
      const state = yield* Effect.flatMap(Sessions, (sessions) => sessions.state(id))
      const parts = (state.messages.find((m) => m.role === "assistant") as { parts: ReadonlyArray<{ type: string }> })
        .parts
      expect(parts.map((p) => p.type)).toEqual(["text", "text", "tool", "text"])
    }).pipe(
      Effect.provide(
        layer(
          [
            {
              events: [
                ModelEvent.TextDelta({ id: "t0", delta: "first sk-t" }),
                ModelEvent.TextDelta({ id: "t1", delta: "second sk-" }),
                ModelEvent.ToolCall({ callId: "c1", tool: "echo", input: { text: "x" }, inputText: '{"text":"x"}' }),
                Script.finish("tool-calls")
              ]
            },
            Script.text("done")
          ],
          [],
          { secrets: { hide: ["MY_KEY"], env: { MY_KEY: KEY } } }
        )
      )
    )
  )
})

/**
 * `note` writes NOTES.md the way `write` does (its intent, the file, then its change) while `cmd`,
 * a command-like tool (workspace snapshots around it), runs in the same batch and ends once the
 * file is on disk. The order is forced through the log: the file is written after the command's
 * snapshot before it, and the command's snapshot after it is taken before `note` records its change.
 * `intentFirst`: `note` records its intent before the command's snapshot before it (a hook holds
 * the command until the intent is in the log), so that snapshot's reset of what file tools noted
 * comes between the intent and the write.
 */
const fileToolBesideCommand = (options: { readonly intentFirst: boolean }) => {
  const cwd = tempDir()
  const content = "# notes\nwritten by the file tool\n"
  /** the file tool wrote its file (and has not recorded the change yet) */
  const written = Deferred.unsafeMake<void>(undefined as never)
  let store: EventStore["Type"] | undefined
  let sessionId: SessionId | undefined
  /** an event of `type` (and `phase`, for a snapshot) is in the log */
  const logged = (type: string, phase?: "baseline" | "after") =>
    Effect.suspend(() =>
      store!.follow(sessionId!).pipe(
        Stream.filter(
          (x) => x.type === type && (phase === undefined || (x.payload as { phase: string }).phase === phase)
        ),
        Stream.take(1),
        Stream.runDrain,
        Effect.orDie
      )
    )
  const intent = { path: `${cwd}/NOTES.md`, op: "create" as const, after: content, temp: `${cwd}/.NOTES.md.tmp` }
  const noting = defineTool({
    name: "note",
    description: "writes NOTES.md the way write does",
    input: Schema.Struct({}),
    execute: (_input, context) =>
      Effect.gen(function* () {
        if (options.intentFirst) yield* context.recordFileIntent(intent)
        // the command took its snapshot before: the file is new to it
        yield* logged("workspace.snapshot", "baseline")
        if (!options.intentFirst) yield* context.recordFileIntent(intent)
        fs.writeFileSync(intent.path, content)
        yield* Deferred.succeed(written, undefined)
        // the command ends and scans the workspace before this tool records its change
        yield* logged("workspace.snapshot", "after")
        yield* context.recordFileChange({ path: intent.path, op: "create", after: content })
        return { output: "written" }
      })
  })
  const command = defineTool({
    name: "cmd",
    description: "a command that changes nothing itself",
    input: Schema.Struct({}),
    snapshotWorkspace: true,
    execute: () => Effect.as(Deferred.await(written), { output: "done" })
  })
  const script: ReadonlyArray<ScriptStep> = [
    {
      events: [
        ...Script.toolCall({ callId: "n1", tool: "note", input: {} }),
        ...Script.toolCall({ callId: "k1", tool: "cmd", input: {} }),
        Script.finish("tool-calls")
      ]
    },
    Script.text("done")
  ]
  // the before hooks run before the call's snapshot: the command waits there for the intent
  const holdCommand = (call: { readonly tool: string; readonly input: unknown }) =>
    Effect.as(options.intentFirst && call.tool === "cmd" ? logged("file.intent") : Effect.void, { input: call.input })
  const agent = layer(script, [], { tools: { tools: [noting, command], hooks: { before: [holdCommand] } } })
  return Effect.gen(function* () {
    store = yield* EventStore
    const sessions = yield* Sessions
    const id = yield* sessions.create({ cwd })
    sessionId = id
    yield* sessions.send(id, "go")
    const outcome = Option.getOrThrow(yield* sessions.wait(id))
    expect(outcome.reason).toBe("stop")
    const log = yield* events(id)
    const order = log.flatMap((x) =>
      x.type === "file.intent"
        ? ["intent"]
        : x.type === "workspace.snapshot"
          ? [(x.payload as { phase: string }).phase]
          : x.type === "file.changed"
            ? ["changed"]
            : []
    )
    expect(order).toEqual(
      options.intentFirst ? ["intent", "baseline", "after", "changed"] : ["baseline", "intent", "after", "changed"]
    )
    const changes = log
      .filter((x) => x.type === "file.changed")
      .map((x) => x.payload as { path: string; callId?: string; observed?: boolean })
    // once, by the file tool; the command's snapshot found it but knew it was not the command's
    expect(changes.map((c) => [c.path, c.callId, c.observed ?? false])).toEqual([["NOTES.md", "n1", false]])
    const after = log.find(
      (x) => x.type === "workspace.snapshot" && (x.payload as { phase: string }).phase === "after"
    )!.payload as { changed: number }
    expect(after.changed).toBe(0)
  }).pipe(Effect.provide(agent))
}

describe("a file tool beside a command", () => {
  it.live(
    "the command's snapshot does not take the file tool's change for its own, even when it ends between the write and the tool's record",
    () => fileToolBesideCommand({ intentFirst: false })
  )

  it.live("nor when the file tool's intent came before the command's first snapshot and the write after it", () =>
    fileToolBesideCommand({ intentFirst: true })
  )

  it.live("an intent whose call ended without writing does not hide a later command's change of that file", () => {
    const cwd = tempDir()
    const content = "# notes\nthe same bytes\n"
    const path = `${cwd}/NOTES.md`
    // like `write` refused after its intent: nothing is written
    const refusing = defineTool({
      name: "note",
      description: "records an intent for NOTES.md, then fails",
      input: Schema.Struct({}),
      execute: (_input, context) =>
        Effect.zipRight(
          context.recordFileIntent({ path, op: "create", after: content, temp: `${cwd}/.NOTES.md.tmp` }),
          Effect.fail(new ToolFailure({ message: "refused" }))
        )
    })
    // a command that writes exactly what the intent was about to (or, first, nothing)
    const command = defineTool({
      name: "cmd",
      description: "writes NOTES.md itself",
      input: Schema.Struct({ write: Schema.Boolean }),
      snapshotWorkspace: true,
      execute: (input) =>
        Effect.sync(() => (input.write ? fs.writeFileSync(path, content) : undefined)).pipe(
          Effect.as({ output: "done" })
        )
    })
    const step = (callId: string, tool: string, input: unknown): ScriptStep => ({
      events: [...Script.toolCall({ callId, tool, input }), Script.finish("tool-calls")]
    })
    const script: ReadonlyArray<ScriptStep> = [
      // a command first: the session's snapshots exist before the intent
      step("k0", "cmd", { write: false }),
      step("n1", "note", {}),
      step("k1", "cmd", { write: true }),
      Script.text("done")
    ]
    const agent = layer(script, [], { tools: { tools: [refusing, command] } })
    return Effect.gen(function* () {
      const sessions = yield* Sessions
      const id = yield* sessions.create({ cwd })
      yield* sessions.send(id, "go")
      expect(Option.getOrThrow(yield* sessions.wait(id)).reason).toBe("stop")
      const log = yield* events(id)
      expect(log.filter((x) => x.type === "tool.failed").map((x) => (x.payload as { callId: string }).callId)).toEqual([
        "n1"
      ])
      const changes = log
        .filter((x) => x.type === "file.changed")
        .map((x) => x.payload as { path: string; callId?: string; observed?: boolean })
      // the command's own change, recorded by its snapshot: the dropped intent held the same bytes
      expect(changes.map((c) => [c.path, c.callId, c.observed ?? false])).toEqual([["NOTES.md", "k1", true]])
    }).pipe(Effect.provide(agent))
  })
})
