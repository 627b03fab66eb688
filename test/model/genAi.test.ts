/**
 * The GenAI spans (src/model/GenAi.ts) under a tracer that records every span: names, attributes,
 * and what a failure shows (its kind only) while the effect's own result stays as it was; and
 * without an installed tracer, none of the per-step spans is made (`ifTraced`).
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Option, Tracer } from "effect"
import {
  annotateFinish,
  chatSpan,
  errorType,
  modelIdOf,
  providerOf,
  toolSpan,
  tracedFn
} from "../../src/model/GenAi.js"
import { ModelError } from "../../src/model/Model.js"

interface Recorded {
  readonly name: string
  readonly kind: Tracer.SpanKind
  readonly attributes: Map<string, unknown>
  exit?: Exit.Exit<unknown, unknown>
}

const recording = () => {
  const spans: Array<Recorded> = []
  let id = 0
  const tracer = Tracer.make({
    span: (name, parent, context, links, startTime, kind) => {
      const recorded: Recorded = { name, kind, attributes: new Map() }
      spans.push(recorded)
      const span: Tracer.Span = {
        _tag: "Span",
        name,
        spanId: String(++id),
        traceId: "t",
        parent,
        context,
        status: { _tag: "Started", startTime },
        attributes: recorded.attributes,
        links,
        sampled: true,
        kind,
        end: (_endTime, exit) => {
          recorded.exit = exit
        },
        attribute: (key, value) => {
          recorded.attributes.set(key, value)
        },
        event: () => {},
        addLinks: () => {}
      }
      return span
    },
    context: (f) => f()
  })
  return { spans, tracer }
}

const model = {
  name: "local/qwen3:8b",
  provider: "openai-compatible",
  modelId: "qwen3:8b",
  stream: () => null as never
}

describe("providerOf, modelIdOf", () => {
  it("take the model's own fields, else the parts of its name", () => {
    expect(providerOf(model)).toBe("openai-compatible")
    expect(modelIdOf(model)).toBe("qwen3:8b")
    const bare = { name: "scripted/model", stream: model.stream }
    expect(providerOf(bare)).toBe("scripted")
    expect(modelIdOf(bare)).toBe("model")
    expect(modelIdOf({ name: "plain", stream: model.stream })).toBe("plain")
  })
})

describe("errorType", () => {
  it("is the tag, the reason and the status, never the message", () => {
    const error = new ModelError({ reason: "http", status: 429, message: "slow down: your prompt was …" })
    expect(errorType(error)).toBe("ModelError.http.429")
    expect(errorType(new ModelError({ reason: "stream-cut", message: "x" }))).toBe("ModelError.stream-cut")
    expect(errorType(new Error("boom"))).toBe("Error")
    expect(errorType("text")).toBe("unknown")
  })
})

describe("chatSpan", () => {
  it.effect("names the span after the model, kind client, with the request's GenAI attributes", () =>
    Effect.gen(function* () {
      const { spans, tracer } = recording()
      const result = yield* Effect.succeed(7).pipe(
        chatSpan(model, { messages: [], tools: [], maxOutputTokens: 500 }, { "logbook.step": 3 }),
        Effect.withTracer(tracer)
      )
      expect(result).toBe(7)
      expect(spans.map((s) => [s.name, s.kind])).toEqual([["chat qwen3:8b", "client"]])
      expect(Object.fromEntries(spans[0]!.attributes)).toEqual({
        "gen_ai.operation.name": "chat",
        "gen_ai.system": "openai-compatible",
        "gen_ai.provider.name": "openai-compatible",
        "gen_ai.request.model": "qwen3:8b",
        "gen_ai.request.max_tokens": 500,
        "logbook.model": "local/qwen3:8b",
        "logbook.step": 3
      })
    })
  )

  it.effect("a failure fails the effect as it was; the span's failure is its kind only", () =>
    Effect.gen(function* () {
      const { spans, tracer } = recording()
      const error = new ModelError({ reason: "http", status: 500, message: "the provider quoted SECRET-PROMPT" })
      const exit = yield* Effect.fail(error).pipe(
        chatSpan(model, { messages: [], tools: [] }, {}),
        Effect.withTracer(tracer),
        Effect.exit
      )
      expect(exit).toEqual(Exit.fail(error))
      const spanExit = spans[0]!.exit!
      expect(Exit.isFailure(spanExit)).toBe(true)
      const shown = Exit.isFailure(spanExit) ? Cause.failureOption(spanExit.cause) : Option.none()
      expect(Option.map(shown, (e) => (e as Error).message)).toEqual(Option.some("ModelError.http.500"))
      expect(Cause.pretty(Exit.isFailure(spanExit) ? spanExit.cause : Cause.empty)).not.toContain("SECRET-PROMPT")
      expect(spans[0]!.attributes.get("error.type")).toBe("ModelError.http.500")
    })
  )
})

describe("toolSpan", () => {
  it.effect("a call that is not ok ends its span failed; the outcome comes back unchanged", () =>
    Effect.gen(function* () {
      const { spans, tracer } = recording()
      const call = { tool: "bash", callId: "c1" }
      const ok = yield* Effect.succeed({ callId: "c1", ok: true }).pipe(toolSpan(call, {}), Effect.withTracer(tracer))
      const notOk = yield* Effect.succeed({ callId: "c1", ok: false }).pipe(
        toolSpan(call, { "logbook.session.id": "s" }),
        Effect.withTracer(tracer)
      )
      expect(ok).toEqual({ callId: "c1", ok: true })
      expect(notOk).toEqual({ callId: "c1", ok: false })
      expect(spans.map((s) => s.name)).toEqual(["execute_tool bash", "execute_tool bash"])
      expect(Exit.isSuccess(spans[0]!.exit!)).toBe(true)
      expect(Exit.isFailure(spans[1]!.exit!)).toBe(true)
      // (and effect's `code.stacktrace` of where the failure was made)
      expect(Object.fromEntries(spans[1]!.attributes)).toMatchObject({
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "bash",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
        "logbook.session.id": "s",
        "error.type": "ToolFailed"
      })
    })
  )
})

describe("spans only when traced", () => {
  /** the name of the span current inside each of the kernel's per-step span helpers, and the result */
  const insideEach = Effect.gen(function* () {
    const current = Effect.map(Effect.currentSpan, (span) => ({ callId: span.name, ok: true }))
    const body = (n: number) => Effect.map(Effect.currentSpan, (span) => `${span.name} ${n}`)
    const step = tracedFn(Effect.fn("Processor.run")(body), body)
    return {
      chat: yield* Effect.map(Effect.currentSpan, (span) => span.name).pipe(
        chatSpan(model, { messages: [], tools: [] }, {})
      ),
      tool: (yield* current.pipe(toolSpan({ tool: "bash", callId: "c1" }, {}))).callId,
      fn: yield* step(2)
    }
  })

  it.effect("with the default tracer (nothing installed) no span is made: the effects run in the caller's span", () =>
    Effect.gen(function* () {
      const inside = yield* insideEach.pipe(Effect.withSpan("caller"))
      expect(inside).toEqual({ chat: "caller", tool: "caller", fn: "caller 2" })
      // nor are the stream's tokens recorded on the caller's span
      const attributes = yield* Effect.gen(function* () {
        yield* annotateFinish({
          finishReason: "stop",
          usage: { input: 1, output: 2, reasoning: 0, cacheRead: 0, cacheWrite: 0 }
        })
        return (yield* Effect.currentSpan).attributes
      }).pipe(Effect.withSpan("caller"))
      expect([...attributes.keys()]).toEqual([])
      // and a failure still fails the effect as it was
      const error = new ModelError({ reason: "http", status: 500, message: "boom" })
      expect(yield* Effect.exit(Effect.fail(error).pipe(chatSpan(model, { messages: [], tools: [] }, {})))).toEqual(
        Exit.fail(error)
      )
    })
  )

  it.effect("with a tracer installed each helper makes its span, annotated at the stream's end", () =>
    Effect.gen(function* () {
      const { spans, tracer } = recording()
      const inside = yield* insideEach.pipe(Effect.withSpan("caller"), Effect.withTracer(tracer))
      expect(inside).toEqual({ chat: "chat qwen3:8b", tool: "execute_tool bash", fn: "Processor.run 2" })
      expect(spans.map((s) => s.name)).toEqual(["caller", "chat qwen3:8b", "execute_tool bash", "Processor.run"])
      yield* annotateFinish({
        finishReason: "stop",
        usage: { input: 1, output: 2, reasoning: 0, cacheRead: 0, cacheWrite: 0 }
      }).pipe(chatSpan(model, { messages: [], tools: [] }, {}), Effect.withTracer(tracer))
      expect(spans[4]!.attributes.get("gen_ai.usage.output_tokens")).toBe(2)
    })
  )

  it.effect(
    "a failed traced method's span names where the method was made (its call is the helper's: decided when it runs)",
    () =>
      Effect.gen(function* () {
        const { spans, tracer } = recording()
        const body = (n: number) => Effect.fail(`no ${n}`)
        const method = tracedFn(Effect.fn("Processor.run")(body), body)
        expect(yield* Effect.exit(method(1).pipe(Effect.withTracer(tracer)))).toEqual(Exit.fail("no 1"))
        const [made, called] = String(spans[0]?.attributes.get("code.stacktrace")).split("\n")
        expect(made).toContain("genAi.test.ts")
        expect(called).toContain("GenAi.ts")
      })
  )
})
