/**
 * The registry's late tools (`LateTools`, an MCP server's once it is ready): offered from the first
 * request after they joined, decoded and run through the same hooks, their JSON Schema passed to the
 * model as given; a call of one that is not there yet waits for it (`awaitTool`).
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Option, Schema } from "effect"
import { CallId, SessionId } from "../../src/domain/Ids.js"
import { type AnyTool, defineTool, Hooks, LateTools, Tools } from "../../src/tools/Tools.js"

const fixed = defineTool({
  name: "fixed",
  description: "a built-in",
  input: Schema.Struct({}),
  execute: () => Effect.succeed({ output: "fixed" })
})

const rawSchema = { type: "object", properties: { message: { type: "string", description: "as given" } } }
const late = defineTool({
  name: "mcp__srv__echo",
  description: "a late one",
  input: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  inputSchema: rawSchema,
  execute: (input) => Effect.succeed({ output: String(input.message) })
})

const call = (tool: string, input: unknown) => ({
  sessionId: SessionId.make("s"),
  callId: CallId.make("c"),
  tool,
  input
})

describe("LateTools", () => {
  it.effect("join the definitions and the lookup when they appear; a built-in name is never replaced", () =>
    Effect.gen(function* () {
      let current: ReadonlyArray<AnyTool> = []
      const shadow = { ...late, name: "fixed", description: "not me" }
      const tools = yield* Effect.provide(
        Tools,
        Tools.layer({ tools: [fixed] }).pipe(Layer.provide(Layer.succeed(LateTools, { current: () => current })))
      )
      expect(tools.definitions.map((d) => d.name)).toEqual(["fixed"])
      expect(tools.decode(call("mcp__srv__echo", {}))._tag).toBe("Refused")
      current = [late, shadow]
      expect(tools.definitions).toEqual([
        { name: "fixed", description: "a built-in", inputSchema: expect.anything() },
        { name: "mcp__srv__echo", description: "a late one", inputSchema: rawSchema }
      ])
      const decoded = tools.decode(call("mcp__srv__echo", { message: "hi" }))
      expect(decoded._tag).toBe("Decoded")
      expect(Option.map(tools.get("fixed"), (t) => t.description)).toEqual(Option.some("a built-in"))
    })
  )

  it.effect("the hooks run on a late tool's call as on a built-in's", () =>
    Effect.gen(function* () {
      const tools = yield* Effect.provide(
        Tools,
        Tools.layer({ tools: [fixed] }).pipe(
          Layer.provide(Layer.succeed(LateTools, { current: () => [late] })),
          Layer.provide(
            Hooks.layer({
              before: [(c) => Effect.succeed(c.tool === "mcp__srv__echo" ? { block: "no echo" } : { input: c.input })]
            })
          )
        )
      )
      const decoded = tools.decode(call("mcp__srv__echo", { message: "hi" }))
      if (decoded._tag !== "Decoded") throw new Error(decoded.error)
      const prepared = yield* tools.before(call("mcp__srv__echo", { message: "hi" }), decoded)
      expect(prepared).toEqual({
        _tag: "Refused",
        error: "The call was blocked: no echo",
        hookRuns: [
          {
            source: "tool.execute.before[0]",
            hook: "tool.execute.before",
            callId: "c",
            tool: "mcp__srv__echo",
            outcome: "blocked",
            changed: false,
            reason: "no echo",
            ms: 0
          }
        ]
      })
    })
  )

  it.effect("awaitTool waits for the source of a late tool; a built-in or no source does not wait", () =>
    Effect.gen(function* () {
      const ready = yield* Deferred.make<void>()
      const tools = Tools.make({
        tools: [fixed],
        late: {
          current: () => [],
          awaitTool: (name) => (name.startsWith("mcp__") ? Deferred.await(ready) : Effect.void)
        }
      })
      yield* tools.awaitTool("fixed")
      const waiting = yield* Effect.fork(tools.awaitTool("mcp__srv__echo"))
      yield* Effect.yieldNow()
      expect(Option.isNone(yield* Fiber.poll(waiting))).toBe(true)
      yield* Deferred.succeed(ready, undefined)
      yield* Fiber.join(waiting)
      yield* Tools.make({ tools: [fixed] }).awaitTool("mcp__srv__echo")
    })
  )
})
