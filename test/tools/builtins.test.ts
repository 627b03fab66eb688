import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { CallId, SessionId } from "../../src/domain/Ids.js"
import { builtinTools } from "../../src/tools/builtins.js"
import { type HookCall, Tools } from "../../src/tools/Tools.js"

interface JsonSchema {
  readonly type?: string
  readonly $ref?: string
  readonly $defs?: unknown
  readonly description?: string
  readonly required?: ReadonlyArray<string>
  readonly additionalProperties?: boolean
  readonly properties?: Record<string, JsonSchema>
}

const tools = Tools.make({ tools: builtinTools({ bash: { timeoutMs: 1000, maxTimeoutMs: 5000 } }) })
const call = (tool: string, input: unknown) => ({
  sessionId: SessionId.make("s"),
  callId: CallId.make("c"),
  tool,
  input
})

describe("builtinTools", () => {
  it("are read, list, glob, grep, write, edit and bash, with plain object JSON Schemas for the model", () => {
    expect(tools.definitions.map((d) => d.name)).toEqual([
      "read",
      "list",
      "glob",
      "grep",
      "write",
      "edit",
      "bash",
      "todo"
    ])
    for (const definition of tools.definitions) {
      expect(definition.description.length).toBeGreaterThan(100)
      const schema = definition.inputSchema as JsonSchema
      expect(schema.type).toBe("object")
      expect(schema.additionalProperties).toBe(false)
      expect(schema.$defs).toBeUndefined()
      for (const property of Object.values(schema.properties ?? {})) {
        expect(property.$ref).toBeUndefined()
        expect(typeof property.description).toBe("string")
      }
    }
    const read = tools.definitions.find((d) => d.name === "read")!.inputSchema as JsonSchema
    expect(read.required).toEqual(["path"])
    expect(read.properties?.offset).toEqual({
      type: "integer",
      minimum: 1,
      description: "The 1-based line number to start at. Defaults to 1 (the start of the file)."
    })
  })

  it("describe write's and edit's inputs plainly: required fields, a boolean replaceAll", () => {
    const schema = (name: string) => tools.definitions.find((d) => d.name === name)!.inputSchema as JsonSchema
    expect(schema("write").required).toEqual(["path", "content"])
    expect(schema("write").properties?.content?.type).toBe("string")
    expect(schema("edit").required).toEqual(["path", "oldString", "newString"])
    expect(Object.keys(schema("edit").properties ?? {})).toEqual(["path", "oldString", "newString", "replaceAll"])
    expect(schema("edit").properties?.replaceAll).toEqual({
      type: "boolean",
      description: "Replace every occurrence of oldString instead of requiring exactly one. Defaults to false."
    })
    expect(JSON.stringify([schema("write"), schema("edit")])).not.toMatch(/"title"|\$ref|\$defs/)
  })

  it.effect("refuses bad input with a message the model can act on, and bounds the bash timeout", () =>
    Effect.gen(function* () {
      // what Actions does before the permission check and after it: decode, then the before hooks
      const prepare = (c: HookCall) => {
        const decoded = tools.decode(c)
        return decoded._tag === "Refused" ? Effect.succeed(decoded) : tools.before(c, decoded)
      }
      const bad = yield* prepare(call("read", { path: "a.txt", offset: 0 }))
      expect(bad._tag).toBe("Refused")
      expect(bad._tag === "Refused" && bad.error).toContain("expected a whole number of 1 or more, got 0")

      const empty = yield* prepare(call("bash", { command: "" }))
      expect(empty._tag === "Refused" && empty.error).toContain('expected a non-empty string, got ""')

      const slow = yield* prepare(call("bash", { command: "make", timeoutMs: 60_000 }))
      expect(slow._tag === "Ready" && slow.timeoutMs).toBe(5000)
      const plain = yield* prepare(call("bash", { command: "make" }))
      expect(plain._tag === "Ready" && plain.timeoutMs).toBe(1000)
    })
  )
})
