/**
 * The question `logbook run` asks on a terminal before it starts an MCP server a project declares
 * and the user has not approved (docs/mcp.md, "Whose servers"): the definition, then `y` (start it
 * and remember this definition) or `n` (not now), confirmed with Enter; a key alone never answers.
 */
import { Effect } from "effect"
import type { McpServerEntry } from "../config/McpTrust.js"
import type { PromptTerminal } from "./approvalPrompt.js"
import type { Style } from "./render.js"

export const askMcpApproval =
  (terminal: PromptTerminal, style: Style, onCtrlC: Effect.Effect<void>) =>
  (entry: McpServerEntry): Effect.Effect<boolean> =>
    Effect.gen(function* () {
      const definition = JSON.stringify(entry.entry, null, 2).replace(/\n/g, "\n  ")
      const text =
        `${style.yellow("?")} MCP server ${style.bold(`"${entry.name}"`)} of ${entry.source} is not approved. It would run:\n` +
        `  ${definition}\n` +
        `  y start it, and remember this definition for this workspace · n not now — choose, then Enter › `
      let selected: boolean | undefined
      const answer = yield* terminal.question<boolean>(
        text,
        (key) => {
          if (key === "\u0003") {
            Effect.runFork(onCtrlC)
            return undefined
          }
          if (key === "\u0004") return false
          if (key === "y" || key === "Y" || key === "n" || key === "N") {
            const next = key.toLowerCase() === "y"
            if (next !== selected) terminal.echo(`${selected === undefined ? "" : "\b \b"}${next ? "y" : "n"}`)
            selected = next
            return undefined
          }
          if ((key === "\r" || key === "\n") && selected !== undefined) return selected
          return undefined
        },
        `${style.dim("(not answered: interrupted)")}\n`
      )
      yield* terminal.write(answer ? `\n${style.green("approved")}\n` : `\n${style.red("not started")}\n`)
      return answer
    })
