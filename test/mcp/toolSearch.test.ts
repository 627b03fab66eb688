/**
 * Tool search (src/mcp/ToolSearch.ts, `layerMcpTools`): the estimate of the definitions' tokens,
 * the budget from the context window, the search's ranking, and which tools `LateTools` offers —
 * all of them under the budget; the search tool and what it found over it.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Deferred, Effect, Layer, Schema } from "effect"
import { McpClient, type McpConnection, type McpToolInfo } from "../../src/mcp/McpClient.js"
import { defaultMcpBounds, type McpServerSpec } from "../../src/mcp/McpSettings.js"
import { layerMcpTools } from "../../src/mcp/McpTools.js"
import {
  estimateTokens,
  MAX_LOADED,
  searchTools,
  TOOL_SEARCH_NAME,
  toolSearchBudget
} from "../../src/mcp/ToolSearch.js"
import { type AnyTool, defineTool, LateTools } from "../../src/tools/Tools.js"
import { testContext } from "../support/toolContext.js"

const tool = (name: string, description: string): AnyTool =>
  defineTool({
    name,
    description,
    input: Schema.Struct({}),
    inputSchema: { type: "object" },
    execute: () => Effect.succeed({ output: "" })
  })

describe("estimateTokens and toolSearchBudget", () => {
  it("counts the definitions' JSON bytes / 4, rounded up; the budget is the share of a known window", () => {
    const one = tool("a", "b")
    const bytes = Buffer.byteLength(JSON.stringify({ name: "a", description: "b", inputSchema: { type: "object" } }))
    expect(estimateTokens([one])).toBe(Math.ceil(bytes / 4))
    expect(estimateTokens([one, one])).toBe(Math.ceil((2 * bytes) / 4))
    expect(toolSearchBudget({ maxContextShare: 0.1 }, 200_000)).toBe(20_000)
    expect(toolSearchBudget({ maxContextShare: 0.1 }, undefined)).toBeUndefined()
  })
})

describe("searchTools", () => {
  const tools = [
    tool("mcp__gh__create_issue", "Creates an issue in a repository."),
    tool("mcp__gh__list_issues", "Lists the issues of a repository."),
    tool("mcp__gh__get_file", "Reads a file of a repository; mentions an issue."),
    tool("mcp__db__query", "Runs SQL.")
  ]
  it("ranks a word in the name above one in the description, leaves out what matches nothing, keeps to the limit", () => {
    expect(searchTools(tools, "create ISSUE", 10).map((t) => t.name)).toEqual([
      "mcp__gh__create_issue",
      "mcp__gh__list_issues",
      "mcp__gh__get_file"
    ])
    expect(searchTools(tools, "issue", 2).map((t) => t.name)).toEqual(["mcp__gh__create_issue", "mcp__gh__list_issues"])
    expect(searchTools(tools, "kubernetes", 10)).toEqual([])
    expect(searchTools(tools, "a", 10)).toEqual([])
  })
})

const infos = (n: number): ReadonlyArray<McpToolInfo> =>
  Array.from({ length: n }, (_, i) => ({
    name: `widget_${i}`,
    description: `Reads widget number ${i}. ${"Details. ".repeat(20)}`,
    inputSchema: { type: "object" }
  }))

/** A client whose one server lists `tools` at once; `ready` completes once it was connected. */
const fakeClient = (tools: ReadonlyArray<McpToolInfo>, ready: Deferred.Deferred<void>) =>
  Layer.succeed(McpClient, {
    connect: (name) =>
      Effect.as(Deferred.succeed(ready, undefined), {
        name,
        tools,
        toolsLeftOut: 0,
        processGroup: Effect.succeed(undefined),
        callTool: () => Effect.succeed({ content: [{ type: "text", text: "ok" }] })
      } as unknown as McpConnection)
  })

const spec: McpServerSpec = { ...defaultMcpBounds, type: "stdio", command: "x", args: [], env: {} }

const lateOf = (tools: ReadonlyArray<McpToolInfo>, toolSearchTokens: number | undefined) =>
  Effect.gen(function* () {
    const ready = yield* Deferred.make<void>()
    const context = yield* Layer.build(
      layerMcpTools({ servers: [{ name: "w", spec }], cwd: "/", notify: () => Effect.void, toolSearchTokens }).pipe(
        Layer.provide(fakeClient(tools, ready))
      )
    )
    const late = Context.get(context, LateTools)
    yield* Deferred.await(ready)
    yield* late.awaitTool!("mcp__w__widget_0")
    return late
  })

const names = (tools: ReadonlyArray<AnyTool>) => tools.map((t) => t.name)

describe("layerMcpTools with a tool search budget", () => {
  it.scoped("under the budget (or with none) every tool is offered and no search tool", () =>
    Effect.gen(function* () {
      const few = infos(3)
      const under = yield* lateOf(few, 1_000_000)
      expect(names(under.current())).toEqual(["mcp__w__widget_0", "mcp__w__widget_1", "mcp__w__widget_2"])
      expect(under.find!(TOOL_SEARCH_NAME)).toBeUndefined()
      const none = yield* lateOf(infos(300), undefined)
      expect(none.current()).toHaveLength(300)
    })
  )

  it.scoped("over it: only the search tool, then what a search found too; any tool is still found by name", () =>
    Effect.gen(function* () {
      const many = infos(300)
      const late = yield* lateOf(many, 1000)
      expect(names(late.current())).toEqual([TOOL_SEARCH_NAME])
      expect(late.find!("mcp__w__widget_7")?.name).toBe("mcp__w__widget_7")
      const search = late.find!(TOOL_SEARCH_NAME)!
      const result = yield* search.execute({ query: "widget number 42", limit: 3 }, testContext("/"))
      expect(result.output).toMatch(
        /^3 of 300 MCP tools match; each is offered from your next step on:\n- mcp__w__widget_/
      )
      const found = (result.metadata as { found: ReadonlyArray<string> }).found
      expect(found).toHaveLength(3)
      expect(found).toContain("mcp__w__widget_42")
      expect(names(late.current())).toEqual([TOOL_SEARCH_NAME, ...found])
      const none = yield* search.execute({ query: "kubernetes" }, testContext("/"))
      expect(none.output).toBe('No tool matches "kubernetes" among 300 MCP tools. Try other words.')
      // what searches found is bounded: the oldest leave first
      for (let i = 0; i < MAX_LOADED + 5; i++)
        yield* search.execute({ query: `widget_${i + 10}`, limit: 1 }, testContext("/"))
      const offered = names(late.current())
      expect(offered).toHaveLength(MAX_LOADED + 1)
      expect(offered.at(-1)).toBe(`mcp__w__widget_${MAX_LOADED + 14}`)
    })
  )
})
