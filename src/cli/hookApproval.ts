/**
 * The question `logbook run` asks on a terminal before a command hook the project declares, and
 * the user has not approved, may run (docs/hooks.md, "Whose hooks run"): the hook, then `y` (run
 * it, and remember this definition) or `n` (not now), confirmed with Enter; a key alone never answers.
 */
import { Effect } from "effect"
import type { HookEntry } from "../config/HookConfig.js"
import type { PromptTerminal } from "./approvalPrompt.js"
import { askYesNo } from "./mcpApproval.js"
import type { Style } from "./render.js"

export const askHookApproval =
  (terminal: PromptTerminal, style: Style, onCtrlC: Effect.Effect<void>) =>
  (entry: HookEntry): Effect.Effect<boolean> =>
    Effect.gen(function* () {
      const { definition } = entry
      const text =
        `${style.yellow("?")} ${definition.event} hook of ${entry.origin} is not approved. It would run` +
        `${definition.matcher === undefined || definition.matcher === "" ? "" : ` for tools matching ${style.bold(definition.matcher)}`}` +
        ` (at most ${definition.timeoutMs / 1000} s):\n` +
        `  ${style.bold(definition.command)}\n` +
        `  y run it, and remember this hook for this workspace · n not now — choose, then Enter › `
      return yield* askYesNo(terminal, style, onCtrlC, text, "not run")
    })
