import { type Skill, skillsSection } from "../tools/skill.js"
import { instructionsSection, type LoadedInstructions } from "./Instructions.js"

/**
 * The default system prompt: who the agent is, where it works, how to use its tools. Kept short
 * and free of dates or other values that change between runs, so a replay sends the same request.
 */
export const systemPrompt = (cwd: string): string =>
  [
    "You are logbook, a coding agent working in a developer's terminal.",
    `You work in the directory ${cwd}; relative paths are resolved against it.`,
    "Use the tools to read code, look around and run commands instead of guessing. Read a file before you " +
      "change it or talk about its contents. Prefer small, verifiable steps: run the project's tests or the " +
      "command that shows your change works.",
    "Tool calls that do not depend on each other may be made in the same step; they run in parallel.",
    "When a tool fails, read its error: it says what went wrong and usually what to do instead.",
    "When the task is done, answer briefly: what you did and what you found, with file paths. Do not repeat " +
      "whole files back to the user."
  ].join("\n\n")

/**
 * The system prompt a session working in `cwd` is sent: `base(cwd)` (default `systemPrompt`), then
 * the instruction files (`instructionsSection`), with logbook's API keys masked (`redact`, the
 * agent's `Secrets.redactText`) — an AGENTS.md is the user's text, but the model gets no key from it.
 * `Sessions` sends it and `logbook config --system-prompt` prints it: one function, the same text.
 */
export const fullSystemPrompt = (
  cwd: string,
  instructions: LoadedInstructions,
  options: {
    readonly base?: ((cwd: string) => string) | undefined
    readonly redact: (text: string) => string
  }
): string => {
  const base = (options.base ?? systemPrompt)(cwd)
  const section = instructionsSection(instructions)
  return options.redact(section === "" ? base : `${base}\n\n${section}`)
}

/**
 * The base prompt with the skills' section after it (`tools/skill.ts`): the `system` a session with
 * skills is given. Without skills, `base` itself: the prompt does not change.
 */
export const withSkills = (
  skills: ReadonlyArray<Skill>,
  base: (cwd: string) => string = systemPrompt
): ((cwd: string) => string) => {
  const section = skillsSection(skills)
  return section === "" ? base : (cwd) => `${base(cwd)}\n\n${section}`
}
