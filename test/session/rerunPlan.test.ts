/**
 * The plan of a re-run (`RerunPlan.planOf`) from hand-written logs, and the path replacement the
 * comparison uses (`replacePath`).
 */
import { describe, expect, it } from "vitest"
import type { Envelope, Event } from "../../src/domain/Events.js"
import { EventId, SessionId } from "../../src/domain/Ids.js"
import { ModelEvent } from "../../src/model/Model.js"
import { differOnlyInPath, replacePath } from "../../src/session/Rerun.js"
import { planOf } from "../../src/session/RerunPlan.js"
import { A1, C1, e, prelude, T1, U1, usage } from "../support/fixtures.js"

const envelopes = (events: ReadonlyArray<Event>): ReadonlyArray<Envelope> =>
  events.map(
    (event, i) =>
      ({
        ...event,
        id: EventId.make(`e${i + 1}`),
        sessionId: SessionId.make("s1"),
        seq: i + 1,
        at: 1000 + i,
        parentId: null,
        v: 1
      }) as Envelope
  )

const part = (key: string) => `${A1}:0:${key}` as never

describe("planOf", () => {
  it("serves a step's deltas as recorded, its calls with the input they ran with, and its finish", () => {
    const plan = planOf(
      envelopes([
        ...prelude,
        e("text.delta", { messageId: A1, partId: part("text-0"), delta: "Let me " }),
        e("text.delta", { messageId: A1, partId: part("text-0"), delta: "look." }),
        e("tool.pending", { messageId: A1, callId: C1, tool: "read" }),
        e("step.finished", { messageId: A1, step: 0, finishReason: "tool-calls", usage, promptVersion: "pv1" }),
        e("tool.invoked", { messageId: A1, callId: C1, tool: "read", input: { path: "a.txt" } }),
        e("tool.finished", { callId: C1, output: "a" })
      ])
    )
    expect(plan.requests).toHaveLength(1)
    const [step] = plan.requests
    expect(step).toMatchObject({ kind: "step", request: 1, seq: 5, promptVersion: "pv1", end: { _tag: "finish" } })
    expect(step!.events.map((item) => item.event)).toEqual([
      ModelEvent.TextDelta({ id: "text-0", delta: "Let me " }),
      ModelEvent.TextDelta({ id: "text-0", delta: "look." }),
      ModelEvent.ToolInputStart({ callId: C1, tool: "read" }),
      ModelEvent.ToolCall({ callId: C1, tool: "read", input: { path: "a.txt" }, inputText: '{"path":"a.txt"}' }),
      ModelEvent.Finish({
        finishReason: "tool-calls",
        usage: { input: 10, output: 5, reasoning: 1, cacheRead: 2, cacheWrite: 3 }
      })
    ])
    // the user's first message is the one input point
    expect(plan.inputs).toEqual([{ _tag: "send", index: 1, text: "hi", mode: "prompt", messageId: U1 }])
  })

  it("a failed step fails with what the log kept of its error, and the decision that followed it", () => {
    const plan = planOf(
      envelopes([
        ...prelude,
        e("step.finished", { messageId: A1, step: 0, finishReason: "stream-failed", usage, aborted: true }),
        e("model.retry", { attempt: 2, delayMs: 1200, nextAt: 5000, message: "500 server error", status: 500 }),
        e("step.started", { messageId: A1, step: 1 }),
        e("step.finished", { messageId: A1, step: 1, finishReason: "stream-failed", usage, aborted: true }),
        e("model.error", { message: "gave up after 2 attempts", status: 400, retryable: false, providerMessage: "bad" })
      ])
    )
    expect(plan.requests.map((r) => r.end._tag)).toEqual(["fail", "fail"])
    const [first, second] = plan.requests
    if (first?.end._tag !== "fail" || second?.end._tag !== "fail") throw new Error("not failed")
    expect(first.end.decision).toEqual({ _tag: "retry", attempt: 2, delayMs: 1200, message: "500 server error" })
    expect(first.end.error).toMatchObject({ reason: "http", status: 500 })
    expect(second.end.decision).toEqual({ _tag: "gaveUp", message: "gave up after 2 attempts", retryable: false })
    expect(second.end.error).toMatchObject({ status: 400, providerMessage: "bad" })
  })

  it("a steered or interrupted step never ends by itself; the interrupt is an input point where its events begin", () => {
    const plan = planOf(
      envelopes([
        ...prelude,
        e("text.delta", { messageId: A1, partId: part("text-0"), delta: "Working" }),
        e("tool.pending", { messageId: A1, callId: C1, tool: "bash" }),
        e("tool.failed", { callId: C1, error: "interrupted", interrupted: true, reason: "user" }),
        e("step.finished", { messageId: A1, step: 0, finishReason: "user", usage, aborted: true }),
        e("assistant.completed", { messageId: A1, finishReason: "user" }),
        e("turn.interrupted", { turnId: T1, reason: "user" }),
        e("chat.state", { state: "idle" }),
        e("session.status", { status: { _tag: "idle" } })
      ])
    )
    expect(plan.requests[0]!.end).toEqual({ _tag: "hang" })
    // the call whose input never fully arrived is only started
    expect(plan.requests[0]!.events.map((item) => item.event._tag)).toEqual(["TextDelta", "ToolInputStart"])
    expect(plan.inputs[1]).toEqual({ _tag: "interrupt", index: 7, reason: "user" })
  })

  it("a crash sweep is a crash point; a call refused after its step is a point a re-run cannot pass", () => {
    const plan = planOf(
      envelopes([
        ...prelude,
        e("tool.pending", { messageId: A1, callId: C1, tool: "bash" }),
        e("step.finished", { messageId: A1, step: 0, finishReason: "tool-calls", usage }),
        e("tool.failed", { callId: C1, error: "The user rejected this call.\nmore" }),
        e("step.started", { messageId: A1, step: 1 }),
        e("tool.failed", { callId: "c9" as never, error: "x", interrupted: true, reason: "crash" }),
        e("step.finished", { messageId: A1, step: 1, finishReason: "crash", usage, aborted: true }),
        e("assistant.completed", { messageId: A1, finishReason: "crash" }),
        e("turn.interrupted", { turnId: T1, reason: "crash" })
      ])
    )
    expect(plan.inputs.map((input) => input._tag)).toEqual(["send", "unsupported", "crash"])
    const unsupported = plan.inputs[1]!
    expect(unsupported).toMatchObject({ index: 5 })
    expect(unsupported._tag === "unsupported" && unsupported.why).toContain(
      "the log does not keep the input of call c1 (it never ran: The user rejected this call.; a log written before"
    )
    expect(plan.inputs[2]).toEqual({ _tag: "crash", index: 9 })
  })

  it("a compaction's summary is a request; a retry no failed step precedes is a summary request that failed", () => {
    const plan = planOf(
      envelopes([
        e("session.created", { cwd: "/w", model: "m" }),
        e("session.status", { status: { _tag: "busy" } }),
        e("model.retry", { attempt: 2, delayMs: 10, nextAt: 1, message: "429" }),
        e("session.status", { status: { _tag: "retry", attempt: 2, nextAt: 1, message: "429" } }),
        e("compaction.done", { summary: "We did things.", trigger: "manual", usage, model: "m" }),
        e("session.status", { status: { _tag: "idle" } })
      ])
    )
    expect(plan.requests.map((r) => [r.kind, r.request, r.end._tag])).toEqual([
      ["failed", 1, "fail"],
      ["summary", 2, "finish"]
    ])
    expect(plan.requests[1]!.events[0]!.event).toEqual(ModelEvent.TextDelta({ id: "summary", delta: "We did things." }))
    // where the compaction's own events begin: the session busy; its summary does not wait for it
    expect(plan.inputs).toEqual([{ _tag: "compact", index: 1 }])
    expect(plan.requests[1]!.events.map((item) => item.inputsBefore)).toEqual([0, 0])
  })
})

describe("planOf, refused calls", () => {
  it("a refused call's input from its tool.failed is sent again (JSON, or the text that was none)", () => {
    const C2 = "c2" as never
    const plan = planOf(
      envelopes([
        ...prelude,
        e("tool.pending", { messageId: A1, callId: C1, tool: "bash" }),
        e("tool.pending", { messageId: A1, callId: C2, tool: "write" }),
        e("step.finished", { messageId: A1, step: 0, finishReason: "tool-calls", usage }),
        e("tool.failed", { callId: C1, error: "rejected", input: { command: "rm -rf x" } }),
        e("tool.failed", { callId: C2, error: "not JSON", inputText: '{"path": ' })
      ])
    )
    expect(plan.inputs.map((input) => input._tag)).toEqual(["send"])
    expect(plan.requests[0]!.events.map((item) => item.event)).toContainEqual(
      ModelEvent.ToolCall({
        callId: C1,
        tool: "bash",
        input: { command: "rm -rf x" },
        inputText: '{"command":"rm -rf x"}'
      })
    )
    expect(plan.requests[0]!.events.map((item) => item.event)).toContainEqual(
      ModelEvent.ToolCall({ callId: C2, tool: "write", input: undefined, inputText: '{"path": ' })
    )
  })
})

describe("replacePath", () => {
  it("replaces a directory where it is a whole path, not where it begins a longer name", () => {
    const toScratch = replacePath(["/w/a"], "/tmp/r")
    expect(toScratch("cd /w/a && ls /w/a/src; cat '/w/a'")).toBe("cd /tmp/r && ls /tmp/r/src; cat '/tmp/r'")
    expect(toScratch("You work in /w/a.")).toBe("You work in /tmp/r.")
    expect(toScratch("/w/ab /w/a-b /w/a.txt /w/a_x")).toBe("/w/ab /w/a-b /w/a.txt /w/a_x")
    // the longer of two first, and regex characters are plain
    expect(replacePath(["/w", "/w/a+b"], "/s")("/w/a+b/x /w/y")).toBe("/s/x /s/y")
    expect(replacePath(["/w"], "/w")("/w/x")).toBe("/w/x")
  })
})

describe("differOnlyInPath", () => {
  const pa = "/home/ann/proj"
  const pb = "/tmp/lr-x/work"
  it("texts that differ only where the paths are, whole or cut at a head or a tail", () => {
    expect(differOnlyInPath(`in ${pa}/a.ts: ok`, `in ${pb}/a.ts: ok`, pa, pb)).toBe(true)
    // a head cut inside a path, then a tail that begins inside one
    const cut = (p: string) =>
      `${p}/a\n${p.slice(0, 7)}\n\n… [9 bytes (9 B) of output left out; x] …\n\n${p.slice(9)}/b`
    expect(differOnlyInPath(cut(pa), cut(pb), pa, pb)).toBe(true)
  })
  it("any other difference is one, even of letters the paths hold", () => {
    expect(differOnlyInPath("exit 1", "exit 2", pa, pb)).toBe(false)
    // 'h' and 't' are the paths' first letters after the slash, but not at a path's start
    expect(differOnlyInPath("the end", "tte end", pa, pb)).toBe(false)
    expect(differOnlyInPath(`${pa}/a`, `${pb}/b`, pa, pb)).toBe(false)
    expect(differOnlyInPath("same", "same!", pa, pb)).toBe(false)
  })
})
