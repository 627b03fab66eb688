/**
 * Tool search (docs/mcp.md, "Many tools"): when the MCP tools' definitions would take more than a
 * share of the model's context window, the model is offered one tool, `mcp__tool_search`, instead
 * of them; what a search finds is offered from the next request on. The size of a definition is
 * estimated as its JSON's bytes / 4 (a token is about four bytes of English and JSON).
 */
import { Effect, Schema } from "effect"
import { type AnyTool, defineTool } from "../tools/Tools.js"

/** The search tool's name: `mcp__` and no second `__`, so no server's tool can have it. */
export const TOOL_SEARCH_NAME = "mcp__tool_search"

/** When the MCP tools are offered through the search tool. */
export interface ToolSearchSettings {
  /** the share of the context window the MCP tools' definitions may take before they are searched for */
  readonly maxContextShare: number
}

export const defaultToolSearch: ToolSearchSettings = { maxContextShare: 0.1 }

/** The most tools one search returns, and the most found tools offered at once (the oldest found leave first). */
export const MAX_RESULTS = 10
export const MAX_LOADED = 32

/** The most of a description a search result shows. */
const MAX_RESULT_DESCRIPTION = 300

/** The estimated tokens of the tools' definitions as the model is sent them: bytes / 4. */
export const estimateTokens = (tools: ReadonlyArray<AnyTool>): number =>
  Math.ceil(
    tools.reduce(
      (bytes, tool) =>
        bytes +
        Buffer.byteLength(
          JSON.stringify({ name: tool.name, description: tool.description, inputSchema: tool.inputSchema ?? {} })
        ),
      0
    ) / 4
  )

/** The token budget of the MCP tools' definitions in a context window, or none when the window is unknown. */
export const toolSearchBudget = (
  settings: ToolSearchSettings,
  contextWindow: number | undefined
): number | undefined =>
  contextWindow === undefined ? undefined : Math.floor(settings.maxContextShare * contextWindow)

/**
 * The tools that match a query, best first: each word of the query (case aside) found in a tool's
 * name counts 3 (4 when it is a whole word of the name), in its description 1; tools that match no
 * word are left out.
 */
export const searchTools = (tools: ReadonlyArray<AnyTool>, query: string, limit: number): ReadonlyArray<AnyTool> => {
  const words = [...new Set(query.toLowerCase().split(/[^\p{L}\p{N}]+/u))].filter((word) => word.length > 1)
  return tools
    .map((tool) => {
      const name = tool.name.toLowerCase()
      const nameWords = new Set(name.split(/[^\p{L}\p{N}]+/u))
      const description = tool.description.toLowerCase()
      const score = words.reduce(
        (sum, word) =>
          sum + (nameWords.has(word) ? 4 : name.includes(word) ? 3 : 0) + (description.includes(word) ? 1 : 0),
        0
      )
      return { tool, score }
    })
    .filter((scored) => scored.score > 0)
    .sort((a, b) => b.score - a.score || a.tool.name.localeCompare(b.tool.name))
    .slice(0, limit)
    .map((scored) => scored.tool)
}

const SearchInput = Schema.Struct({
  query: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(500)).annotations({
    description: "Words that say what the tool should do (e.g. 'create github issue')."
  }),
  limit: Schema.optional(
    Schema.Int.pipe(Schema.between(1, MAX_RESULTS)).annotations({
      description: `How many tools to return at most (default 5, at most ${MAX_RESULTS}).`
    })
  )
})

const oneLine = (text: string): string => {
  const line = text.replace(/\s+/g, " ").trim()
  return line.length > MAX_RESULT_DESCRIPTION ? `${line.slice(0, MAX_RESULT_DESCRIPTION - 1)}…` : line
}

/**
 * The search tool over `all()` (the MCP tools now); `found` is told the names it returned, which
 * are offered from the next request on.
 */
export const toolSearchTool = (options: {
  readonly all: () => ReadonlyArray<AnyTool>
  readonly found: (names: ReadonlyArray<string>) => void
}): AnyTool =>
  defineTool({
    name: TOOL_SEARCH_NAME,
    description:
      "Finds tools of the connected MCP servers, which are too many to list here. Give words that say what you " +
      "need; the tools found (their names and what they do) are offered to you from your next step on, and you " +
      "call them by name then.",
    input: SearchInput,
    execute: (input) =>
      Effect.sync(() => {
        const all = options.all()
        const found = searchTools(all, input.query, input.limit ?? 5)
        options.found(found.map((tool) => tool.name))
        const output =
          found.length === 0
            ? `No tool matches "${input.query}" among ${all.length} MCP tools. Try other words.`
            : [
                `${found.length} of ${all.length} MCP tools match; each is offered from your next step on:`,
                ...found.map((tool) => `- ${tool.name}: ${oneLine(tool.description)}`)
              ].join("\n")
        return { output, metadata: { query: input.query, found: found.map((tool) => tool.name) } }
      })
  })
