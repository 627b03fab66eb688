/**
 * The text and JSON output of `logbook run`, from envelopes (the rendering alone; the command is
 * tested through the built binary in test/integration).
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { makeStyle } from "../../src/cli/render.js"
import {
  describeInput,
  doneLine,
  fitWidth,
  makeAnswer,
  makeTextRenderer,
  type Piece,
  retryLine,
  type TextRenderer,
  usageSummary
} from "../../src/cli/runOutput.js"
import { makeRunWriter } from "../../src/cli/runWriter.js"
import { type Envelope, type EventType, make, type PayloadOf } from "../../src/domain/Events.js"
import { CallId, EventId, MessageId, PartId, SessionId, TurnId } from "../../src/domain/Ids.js"
import { emptyUsage } from "../../src/domain/Message.js"
import { fakeStream } from "../support/fakeStream.js"

let seq = 0
const env = <T extends EventType>(type: T, payload: PayloadOf<T>, at = 1_000): Envelope =>
  ({
    ...make(type, payload),
    id: EventId.make(`e${++seq}`),
    sessionId: SessionId.make("s"),
    seq,
    at,
    parentId: null,
    v: 1
  }) as Envelope

const M = MessageId.make("m")
const plain = makeStyle(false)

/** The status lines among pieces. */
const lines = (pieces: ReadonlyArray<Piece>): ReadonlyArray<string> =>
  pieces.flatMap((piece) => (piece._tag === "Line" ? [piece.text] : []))

describe("fitWidth", () => {
  it("cuts a line redrawn in place to one terminal row, as it is when the width is not known", () => {
    const line = retryLine(2, 8, 4_000, `429 rate limited: ${"You exceeded your current quota. ".repeat(5)}`)
    const fitted = fitWidth(line, 80)
    expect(Array.from(fitted)).toHaveLength(79)
    expect(fitted.startsWith("retry 2/8 in 4s: 429 rate limited: You exceeded")).toBe(true)
    expect(fitted.endsWith("…")).toBe(true)
    expect(fitWidth("retry 2/8 in 4s: 429 rate limited", 80)).toBe("retry 2/8 in 4s: 429 rate limited")
    expect(fitWidth(line, undefined)).toBe(line)
  })
})

describe("retryLine", () => {
  it("shows whole seconds from one second on, rounded up, and shorter waits as they are", () => {
    expect(retryLine(2, 8, 4_000, "429 rate limited")).toBe("retry 2/8 in 4s: 429 rate limited")
    expect(retryLine(2, 8, 3_200, "x")).toBe("retry 2/8 in 4s: x")
    expect(retryLine(3, 8, 500, "503 service unavailable")).toBe("retry 3/8 in 0.5s: 503 service unavailable")
    expect(retryLine(3, 8, 5, "x")).toBe("retry 3/8 in 5ms: x")
    expect(retryLine(3, 8, -20, "x")).toBe("retry 3/8 in 0s: x")
  })
})

describe("describeInput", () => {
  it("shows a command, a path, or compact JSON on one line", () => {
    expect(describeInput("bash", { command: "npm test\n  -- --run" })).toBe("npm test⏎  -- --run")
    expect(describeInput("read", { path: "src/a.ts", offset: 10 })).toBe("src/a.ts")
    expect(describeInput("echo", { text: "hi" })).toBe('{"text":"hi"}')
  })
})

/** What a run writes for `events` where neither stdout nor stderr is a terminal. */
const transcript = (r: TextRenderer, events: ReadonlyArray<Envelope>, answer = "") =>
  Effect.gen(function* () {
    const stdout = fakeStream(false)
    const stderr = fakeStream(false)
    const writer = yield* makeRunWriter({ stdout, stderr })
    const now = yield* Clock.currentTimeMillis
    for (const event of events) writer.unsafeShow(r.render(event), now)
    yield* writer.end
    yield* writer.answer(answer)
    return { stdout: stdout.text(), stderr: stderr.text() }
  }).pipe(Effect.scoped)

describe("the text renderer", () => {
  it.effect(
    "streams text, gives each tool call a start and an end line with its duration, and marks a cut response",
    () =>
      Effect.gen(function* () {
        const r = makeTextRenderer(plain, { maxAttempts: 8 })
        const out = yield* transcript(
          r,
          [
            env("step.started", { messageId: M, step: 0 }),
            env("text.delta", { messageId: M, partId: PartId.make("p"), delta: "Let me look" }),
            env(
              "tool.invoked",
              { messageId: M, callId: CallId.make("c1"), tool: "bash", input: { command: "ls" } },
              1_000
            ),
            env("tool.progress", { callId: CallId.make("c1"), output: "a.txt\n" }, 1_500),
            env("tool.finished", { callId: CallId.make("c1"), output: "a.txt" }, 2_200),
            env("tool.invoked", { messageId: M, callId: CallId.make("c2"), tool: "read", input: { path: "b" } }, 2_300),
            env(
              "tool.failed",
              { callId: CallId.make("c2"), error: "File not found: b\nmore", interrupted: false },
              2_305
            ),
            env("step.started", { messageId: M, step: 1 }),
            env("text.delta", { messageId: M, partId: PartId.make("q"), delta: "partial" }),
            env("step.finished", {
              messageId: M,
              step: 1,
              finishReason: "stream-failed",
              usage: emptyUsage,
              aborted: true
            }),
            env("model.retry", { attempt: 2, delayMs: 4_000, nextAt: 9_000, message: "429 rate limited", status: 429 }),
            env("step.started", { messageId: M, step: 2 }),
            env("text.delta", { messageId: M, partId: PartId.make("r"), delta: "Done." })
          ],
          "Done."
        )
        expect(out.stderr).toBe(
          [
            "Let me look",
            "⋯ bash ls",
            "✓ bash ls  1.2s",
            "⋯ read b",
            "✗ read b  5ms  File not found: b⏎more",
            "partial",
            "(the response was cut off)",
            "retry 2/8 in 4s: 429 rate limited",
            "Done.",
            ""
          ].join("\n")
        )
        expect(out.stdout).toBe("Done.\n")
      })
  )

  it.effect("the text of a new step starts on a line of its own", () =>
    Effect.gen(function* () {
      const r = makeTextRenderer(plain, { maxAttempts: 8 })
      const out = yield* transcript(r, [
        env("step.started", { messageId: M, step: 0 }),
        env("text.delta", { messageId: M, partId: PartId.make("p"), delta: "one" }),
        env("step.started", { messageId: M, step: 1 }),
        env("text.delta", { messageId: M, partId: PartId.make("q"), delta: "two\n" }),
        env("step.started", { messageId: M, step: 2 }),
        env("text.delta", { messageId: M, partId: PartId.make("r"), delta: "three" })
      ])
      expect(out.stderr).toBe("one\ntwo\nthree\n")
    })
  )

  it("labels the failure of a call it did not see start from labelOf, else by its id", () => {
    const r = makeTextRenderer(plain, {
      maxAttempts: 8,
      labelOf: (id) => (id === "old" ? "bash sleep 300" : undefined)
    })
    expect(
      lines(
        r.render(env("tool.failed", { callId: CallId.make("old"), error: "x", interrupted: true, reason: "crash" }))
      )
    ).toEqual(["✗ bash sleep 300  interrupted (crash)"])
    expect(lines(r.render(env("tool.failed", { callId: CallId.make("new"), error: "x", timedOut: true })))).toEqual([
      "✗ new  timed out"
    ])
  })

  it("labels a call that was asked about and never ran by what was asked; a rejected ask is 'rejected'", () => {
    const r = makeTextRenderer(plain, { maxAttempts: 8 })
    const ask = (permissionId: string, callId: string, pattern: string) =>
      r.render(env("permission.asked", { permissionId, callId: CallId.make(callId), tool: "bash", pattern }))
    expect(ask("p1", "c1", "rm -rf build")).toEqual([])
    expect(r.render(env("permission.replied", { permissionId: "p1", reply: "reject" }))).toEqual([])
    expect(
      lines(r.render(env("tool.failed", { callId: CallId.make("c1"), error: "Denied: … and the user rejected it." })))
    ).toEqual(["✗ bash rm -rf build  rejected (the model is told)"])
    // denied by a rule (no reply): the error's first line
    ask("p2", "c2", "rm x")
    expect(lines(r.render(env("tool.failed", { callId: CallId.make("c2"), error: "Denied: by the rule." })))).toEqual([
      "✗ bash rm x  Denied: by the rule."
    ])
    // an ask closed by an interrupt: the call ends interrupted
    ask("p3", "c3", "rm y")
    r.render(env("permission.replied", { permissionId: "p3", reply: "reject", interrupted: true }))
    expect(
      lines(r.render(env("tool.failed", { callId: CallId.make("c3"), error: "x", interrupted: true, reason: "user" })))
    ).toEqual(["✗ bash rm y  interrupted (user)"])
  })

  it("prints nothing for events that are not part of the transcript", () => {
    const r = makeTextRenderer(plain, { maxAttempts: 8 })
    expect(r.render(env("turn.started", { turnId: TurnId.make("t"), messageIds: [] }))).toEqual([])
    expect(r.render(env("model.error", { message: "401 unauthorized", retryable: false }))).toEqual([])
  })

  it("a running call and a retry wait are live pieces, each ended by what ends it", () => {
    const r = makeTextRenderer(plain, { maxAttempts: 8 })
    const [started] = r.render(
      env("tool.invoked", { messageId: M, callId: CallId.make("c1"), tool: "bash", input: { command: "make" } }, 1_000)
    )
    expect(started).toMatchObject({ _tag: "Live", key: "c1", plain: "⋯ bash make" })
    const row = (started as Extract<Piece, { _tag: "Live" }>).row
    expect(row.text(1_400)).toBe("⋯ bash make  0s")
    expect(r.render(env("tool.progress", { callId: CallId.make("c1"), output: "cc a.c\ncc b.c\n" }))).toEqual([
      { _tag: "Touch", key: "c1" }
    ])
    expect(row.text(13_900)).toBe("⋯ bash make  12s  cc b.c")
    expect(r.render(env("tool.finished", { callId: CallId.make("c1"), output: "" }, 14_000))[0]).toEqual({
      _tag: "End",
      key: "c1"
    })
    const [retry] = r.render(
      env("model.retry", { attempt: 2, delayMs: 4_000, nextAt: 20_000, message: "429 rate limited", status: 429 })
    )
    expect((retry as Extract<Piece, { _tag: "Live" }>).row.text(17_100)).toBe("retry 2/8 in 3s: 429 rate limited")
    // the status committed with the retry does not end the wait; the next event does
    expect(
      r.render(env("session.status", { status: { _tag: "retry", attempt: 2, nextAt: 20_000, message: "" } }))
    ).toEqual([])
    expect(r.render(env("step.started", { messageId: M, step: 1 }))).toEqual([
      { _tag: "End", key: "retry" },
      { _tag: "Break" }
    ])
  })
})

describe("the answer", () => {
  it("is the text of the last step, as far as it came", () => {
    const answer = makeAnswer()
    for (const event of [
      env("step.started", { messageId: M, step: 0 }),
      env("text.delta", { messageId: M, partId: PartId.make("p"), delta: "Let me look." }),
      env("step.started", { messageId: M, step: 1 }),
      env("text.delta", { messageId: M, partId: PartId.make("q"), delta: "It is " }),
      env("text.delta", { messageId: M, partId: PartId.make("q"), delta: "42." })
    ])
      answer.see(event)
    expect(answer.text()).toBe("It is 42.")
    answer.see(env("step.started", { messageId: M, step: 2 }))
    expect(answer.text()).toBe("")
  })
})

describe("the summary and done lines", () => {
  it("sum up tokens, cost, steps and time", () => {
    const usage = { ...emptyUsage, input: 12_034, output: 311, cacheRead: 10_000, cost: 0.0412 }
    expect(usageSummary(usage, 3, 9_800)).toBe(
      "tokens in 12,034 · out 311 · cached 10,000 · cost $0.0412 · 3 steps · 9.8s"
    )
    expect(usageSummary(emptyUsage, 1, 400)).toBe("tokens in 0 · out 0 · cost $0 · 1 step · 400ms")
  })

  it("say the cost is unknown, never $0, when steps had no price; a lower bound when only some had", () => {
    const tokens = { ...emptyUsage, input: 1_000, output: 20 }
    expect(usageSummary({ ...tokens, cost: 0, costKnown: false }, 2, 1_500)).toBe(
      "tokens in 1,000 · out 20 · cost unknown · 2 steps · 1.5s"
    )
    expect(usageSummary({ ...tokens, cost: 0.0123, costKnown: false }, 2, 1_500)).toBe(
      "tokens in 1,000 · out 20 · cost ≥ $0.0123 (partly unpriced) · 2 steps · 1.5s"
    )
    // a price of 0 is a price
    expect(usageSummary({ ...tokens, cost: 0 }, 1, 400)).toBe("tokens in 1,000 · out 20 · cost $0 · 1 step · 400ms")
  })

  it("the done line keeps the log's usage: costKnown false when the cost is unknown", () => {
    const usage = { ...emptyUsage, input: 5, cost: 0, costKnown: false }
    const done = JSON.parse(
      doneLine({
        sessionId: "s",
        outcome: { turnId: TurnId.make("t"), reason: "stop", steps: 1, usage },
        text: "",
        exitCode: 0,
        elapsedMs: 3
      })
    )
    expect(done.usage).toEqual(usage)
    expect([done.cost, done.costKnown]).toEqual([0, false])
    // a lower bound when only some of it was priced
    const partly = JSON.parse(
      doneLine({
        sessionId: "s",
        outcome: { turnId: TurnId.make("t"), reason: "stop", steps: 1, usage: { ...usage, cost: 0.25 } },
        text: "",
        exitCode: 0,
        elapsedMs: 3
      })
    )
    expect([partly.cost, partly.costKnown]).toEqual([0.25, false])
  })

  it("the done line says how the turn ended, and `interrupted` when there is no outcome", () => {
    const done = JSON.parse(
      doneLine({
        sessionId: "s",
        outcome: {
          turnId: TurnId.make("t"),
          reason: "stop",
          finishReason: "stop",
          steps: 2,
          usage: { ...emptyUsage, input: 30, output: 4, cost: 0.0021 }
        },
        text: "It is 42.",
        exitCode: 0,
        elapsedMs: 12
      })
    )
    expect(done).toEqual({
      type: "done",
      sessionId: "s",
      reason: "stop",
      finishReason: "stop",
      text: "It is 42.",
      steps: 2,
      usage: { ...emptyUsage, input: 30, output: 4, cost: 0.0021 },
      cost: 0.0021,
      costKnown: true,
      durationMs: 12,
      exitCode: 0
    })
    expect(
      JSON.parse(doneLine({ sessionId: "s", outcome: undefined, text: "Let me", exitCode: 130, elapsedMs: 1 }))
    ).toMatchObject({ reason: "interrupted", text: "Let me", steps: 0, cost: 0, costKnown: true, exitCode: 130 })
  })
})
