/**
 * The hook core of the registry (`Tools.before` / `Tools.finish`): named and plain hooks, each run
 * bounded by its timeout (TestClock), what it returned checked, and a report of each run that
 * changed, blocked, failed or timed out — a before hook that fails refuses its call (fail closed),
 * an after hook that fails is skipped.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Schema, TestClock } from "effect"
import { CallId, SessionId } from "../../src/domain/Ids.js"
import {
  type AnyTool,
  defineTool,
  HookTimeout,
  type PreparedCall,
  type ToolHooks,
  Tools
} from "../../src/tools/Tools.js"

const bash = defineTool({
  name: "bash",
  description: "runs a command",
  input: Schema.Struct({ command: Schema.String }),
  execute: (input) => Effect.succeed({ output: input.command })
})

const call = (input: unknown) => ({ sessionId: SessionId.make("s"), callId: CallId.make("c1"), tool: "bash", input })

const prepare = (hooks: ToolHooks, input: unknown = { command: "ls" }, options: { hookTimeoutMs?: number } = {}) => {
  const tools = Tools.make({ tools: [bash], hooks, ...options })
  return tools.before(call(input), { tool: bash as AnyTool, input })
}

const ready = (prepared: PreparedCall) => {
  if (prepared._tag !== "Ready") throw new Error(`refused: ${prepared.error}`)
  return prepared
}

describe("before hooks", () => {
  it.effect("a plain hook that changes the input: the call runs with it, and the run is reported", () =>
    Effect.gen(function* () {
      const prepared = ready(
        yield* prepare({
          before: [(c) => Effect.succeed({ input: { command: `${(c.input as { command: string }).command} -la` } })]
        })
      )
      expect(prepared.input).toEqual({ command: "ls -la" })
      expect(prepared.hookRuns).toEqual([
        {
          source: "tool.execute.before[0]",
          hook: "tool.execute.before",
          callId: "c1",
          tool: "bash",
          outcome: "changed",
          changed: true,
          input: { command: "ls" },
          ms: 0
        }
      ])
    })
  )

  it.effect("a run that returns the input unchanged, or nothing, is not reported", () =>
    Effect.gen(function* () {
      const prepared = ready(
        yield* prepare({
          before: [
            (c) => Effect.succeed({ input: { ...(c.input as object) } }),
            { source: "plugin:quiet", run: () => Effect.succeed(undefined) }
          ]
        })
      )
      expect(prepared.input).toEqual({ command: "ls" })
      expect(prepared.hookRuns).toEqual([])
    })
  )

  it.effect("a named hook that blocks: the call is refused with its reason, and the run is reported", () =>
    Effect.gen(function* () {
      const prepared = yield* prepare({
        before: [{ source: "plugin:guard", run: () => Effect.succeed({ block: "no listing today" }) }]
      })
      expect(prepared).toMatchObject({
        _tag: "Refused",
        error: "The call was blocked: no listing today",
        hookRuns: [{ source: "plugin:guard", outcome: "blocked", changed: false, reason: "no listing today" }]
      })
    })
  )

  it.effect("a hook that throws, fails or dies refuses the call (fail closed), naming the hook and the error", () =>
    Effect.gen(function* () {
      const hooks = [
        () => {
          throw new Error("thrown")
        },
        () => Effect.fail(new Error("failed")),
        () => Effect.die(new Error("died"))
      ]
      for (const [i, run] of hooks.entries()) {
        const prepared = yield* prepare({ before: [{ source: `plugin:p${i}`, run }] })
        expect(prepared._tag).toBe("Refused")
        expect(prepared).toMatchObject({
          error: `The call was not run: the tool.execute.before hook plugin:p${i} failed: ${["thrown", "failed", "died"][i]}`,
          hookRuns: [{ source: `plugin:p${i}`, outcome: "failed", error: ["thrown", "failed", "died"][i] }]
        })
      }
    })
  )

  it.effect("a hook that returns a bad value, or input the tool cannot take, refuses the call", () =>
    Effect.gen(function* () {
      const bad = yield* prepare({ before: [{ source: "plugin:odd", run: () => Effect.succeed(42 as never) }] })
      expect(bad).toMatchObject({ _tag: "Refused", hookRuns: [{ outcome: "failed" }] })
      expect((bad as { error: string }).error).toMatch(/plugin:odd failed: it returned neither/)
      const invalid = yield* prepare({ before: [() => Effect.succeed({ input: { command: 7 } })] })
      expect(invalid).toMatchObject({ _tag: "Refused", hookRuns: [{ outcome: "failed" }] })
      expect((invalid as { error: string }).error).toMatch(/input the tool cannot take/)
    })
  )

  it.effect("a hook that hangs past its timeout refuses the call (TestClock)", () =>
    Effect.gen(function* () {
      const fiber = yield* Effect.fork(
        prepare({ before: [{ source: "plugin:slow", timeoutMs: 5_000, run: () => Effect.never }] }, undefined, {
          hookTimeoutMs: 60_000
        })
      )
      yield* TestClock.adjust("4999 millis")
      expect(fiber.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 millis")
      const prepared = yield* Fiber.join(fiber)
      expect(prepared).toMatchObject({
        _tag: "Refused",
        error:
          "The call was not run: the tool.execute.before hook plugin:slow timed out: it did not return within 5000 ms",
        hookRuns: [{ source: "plugin:slow", outcome: "timeout", changed: false, ms: 5_000 }]
      })
    })
  )

  it.effect("a hook that bounds its own work reports a timeout with HookTimeout", () =>
    Effect.gen(function* () {
      const prepared = yield* prepare({
        before: [
          {
            source: "hook:PreToolUse[0]",
            run: () => Effect.fail(new HookTimeout({ message: "its command ran past 5 s" }))
          }
        ]
      })
      expect(prepared).toMatchObject({
        _tag: "Refused",
        error:
          "The call was not run: the tool.execute.before hook hook:PreToolUse[0] timed out: its command ran past 5 s",
        hookRuns: [{ outcome: "timeout", error: "its command ran past 5 s" }]
      })
    })
  )

  it.effect("a plain hook is bounded by the registry's hookTimeoutMs", () =>
    Effect.gen(function* () {
      const fiber = yield* Effect.fork(prepare({ before: [() => Effect.never] }, undefined, { hookTimeoutMs: 250 }))
      yield* TestClock.adjust("250 millis")
      expect(yield* Fiber.join(fiber)).toMatchObject({ _tag: "Refused", hookRuns: [{ outcome: "timeout", ms: 250 }] })
    })
  )
})

describe("after hooks", () => {
  const finish = (hooks: ToolHooks) =>
    Tools.make({ tools: [bash], hooks, hookTimeoutMs: 1_000 }).finish(call({ command: "ls" }), { output: "a\nb" })

  it.effect("a hook that changes the output: the model reads it, the run is reported", () =>
    Effect.gen(function* () {
      const finished = yield* finish({
        after: [{ source: "plugin:upper", run: (_c, out) => Effect.succeed(out.output.toUpperCase()) }]
      })
      expect(finished.output).toEqual({ output: "A\nB" })
      expect(finished.hookRuns).toMatchObject([{ source: "plugin:upper", outcome: "changed", changed: true }])
    })
  )

  it.effect("a hook that fails, returns a bad value or hangs is skipped: the output as it was, each run reported", () =>
    Effect.gen(function* () {
      const fiber = yield* Effect.fork(
        finish({
          after: [
            { source: "plugin:crash", run: () => Effect.die(new Error("boom")) },
            { source: "plugin:odd", run: () => Effect.succeed(3 as never) },
            { source: "plugin:slow", run: () => Effect.never },
            (_c, out) => Effect.succeed({ output: `${out.output}!` })
          ]
        })
      )
      yield* TestClock.adjust("1 second")
      const finished = yield* Fiber.join(fiber)
      expect(finished.output).toEqual({ output: "a\nb!" })
      expect(finished.hookRuns.map((r) => [r.source, r.outcome, r.error])).toEqual([
        ["plugin:crash", "failed", "boom"],
        ["plugin:odd", "failed", "it returned neither a string, nor { output: string }, nor nothing"],
        ["plugin:slow", "timeout", "it did not return within 1000 ms"],
        ["tool.execute.after[3]", "changed", undefined]
      ])
    })
  )
})
