/**
 * The questions `logbook run` asks on a terminal before it starts what a project brings and the
 * user has not approved (docs/extensions.md, "Approving what a project brings"): an MCP server's
 * definition (docs/mcp.md, "Whose servers") or a plugin file (docs/plugins.md, "Trust"). What it
 * is, then `y` (approve it and remember this exact content) or `n` (not now), confirmed with
 * Enter; a key alone never answers.
 */
import { Effect } from "effect"
import type { McpServerEntry } from "../config/McpTrust.js"
import type { PluginEntry } from "../config/PluginTrust.js"
import type { PromptTerminal } from "./approvalPrompt.js"
import type { Style } from "./render.js"

/** Asks `text` (ending with the choices) and reads `y` / `n` then Enter; Ctrl-D is no. */
export const askYesNo = (
  terminal: PromptTerminal,
  style: Style,
  onCtrlC: Effect.Effect<void>,
  text: string,
  no: string
): Effect.Effect<boolean> =>
  Effect.gen(function* () {
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
    yield* terminal.write(answer ? `\n${style.green("approved")}\n` : `\n${style.red(no)}\n`)
    return answer
  })

export const askMcpApproval =
  (terminal: PromptTerminal, style: Style, onCtrlC: Effect.Effect<void>) =>
  (entry: McpServerEntry): Effect.Effect<boolean> => {
    const definition = JSON.stringify(entry.entry, null, 2).replace(/\n/g, "\n  ")
    const text =
      `${style.yellow("?")} MCP server ${style.bold(`"${entry.name}"`)} of ${entry.source} is not approved. It would run:\n` +
      `  ${definition}\n` +
      `  y start it, and remember this definition for this workspace · n not now — choose, then Enter › `
    return askYesNo(terminal, style, onCtrlC, text, "not started")
  }

export const askPluginApproval =
  (terminal: PromptTerminal, style: Style, onCtrlC: Effect.Effect<void>) =>
  (entry: PluginEntry): Effect.Effect<boolean> => {
    const text =
      `${style.yellow("?")} plugin ${style.bold(entry.key)} of ${entry.source} is not approved. It is code that would ` +
      `run inside logbook with your rights: read ${entry.file} first (sha256 ${entry.hash.slice(0, 16)}…)\n` +
      `  y load it, and remember this exact file for this workspace · n not now — choose, then Enter › `
    return askYesNo(terminal, style, onCtrlC, text, "not loaded")
  }
