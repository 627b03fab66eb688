/**
 * Thinking / reasoning per model: one setting, mapped to each provider's option.
 *
 * `reasoning` is `"off"`, an effort (`"minimal"`, `"low"`, `"medium"`, `"high"`) or a token budget
 * (an integer, 1024 or more). Unset means the provider's own default: logbook sends no option, so a
 * provider whose default is off stays off.
 *
 * | type | effort | budget |
 * | --- | --- | --- |
 * | `anthropic` | extended thinking with `budget_tokens` 1024 / 4096 / 12000 / 24000 | `budget_tokens` = the number |
 * | `openai` | `reasoning_effort` = the effort | the effort it falls in (below 4096 low, below 16384 medium, else high) |
 * | `openai-compatible` | `reasoning_effort` = the effort | as for `openai` |
 *
 * `"off"`: Anthropic `thinking: {type: "disabled"}`; OpenAI `reasoning_effort: "none"`; for an
 * openai-compatible server nothing is sent (there is no common way to turn thinking off; choose a
 * model without it, e.g. `deepseek-chat`).
 */
import { Either, Schema } from "effect"
import type { ModelMessage } from "./Model.js"

export const ReasoningEffort = Schema.Literal("minimal", "low", "medium", "high")
export type ReasoningEffort = typeof ReasoningEffort.Type

/** The smallest thinking budget Anthropic accepts. */
export const MIN_REASONING_BUDGET = 1024

export const ReasoningBudget = Schema.Int.pipe(Schema.greaterThanOrEqualTo(MIN_REASONING_BUDGET))

export const ReasoningSetting = Schema.Union(Schema.Literal("off"), ReasoningEffort, ReasoningBudget)
export type ReasoningSetting = typeof ReasoningSetting.Type

/** Anthropic `budget_tokens` of each effort. */
export const anthropicBudget: Readonly<Record<ReasoningEffort, number>> = {
  minimal: 1024,
  low: 4096,
  medium: 12_000,
  high: 24_000
}

/** The effort a token budget falls in, for providers that take an effort. */
export const effortOfBudget = (budget: number): ReasoningEffort =>
  budget < 4096 ? "low" : budget < 16_384 ? "medium" : "high"

/** Reads `--reasoning`: `off`, an effort, or a budget of tokens; a sentence when it is none of those. */
export const parseReasoning = (text: string): Either.Either<ReasoningSetting, string> => {
  const value = text.trim().toLowerCase()
  if (value === "off" || value === "none") return Either.right("off")
  if (Schema.is(ReasoningEffort)(value)) return Either.right(value)
  if (/^\d+$/.test(value)) {
    const budget = Number(value)
    if (budget >= MIN_REASONING_BUDGET) return Either.right(budget)
    return Either.left(`a reasoning budget must be ${MIN_REASONING_BUDGET} tokens or more, got ${budget}`)
  }
  return Either.left(
    `expected off, minimal, low, medium, high or a token budget (${MIN_REASONING_BUDGET} or more), got "${text}"`
  )
}

type ProviderOptions = Record<string, Record<string, unknown>>

/**
 * The SDK `providerOptions` of a setting for a provider of `type` whose SDK options key is
 * `optionsKey` (`anthropic`, `openai`, or an openai-compatible provider's id); undefined when nothing
 * is to be sent.
 */
export const reasoningProviderOptions = (
  type: "openai-compatible" | "openai" | "anthropic",
  optionsKey: string,
  setting: ReasoningSetting | undefined
): ProviderOptions | undefined => {
  if (setting === undefined) return undefined
  switch (type) {
    case "anthropic":
      return {
        [optionsKey]: {
          thinking:
            setting === "off"
              ? { type: "disabled" }
              : {
                  type: "enabled",
                  budgetTokens: typeof setting === "number" ? setting : anthropicBudget[setting]
                }
        }
      }
    case "openai":
      return {
        [optionsKey]: {
          reasoningEffort: setting === "off" ? "none" : typeof setting === "number" ? effortOfBudget(setting) : setting
        }
      }
    case "openai-compatible":
      return setting === "off"
        ? undefined
        : { [optionsKey]: { reasoningEffort: typeof setting === "number" ? effortOfBudget(setting) : setting } }
  }
}

/**
 * Whether an assistant message's reasoning goes back to an openai-compatible provider: DeepSeek's
 * thinking mode needs the `reasoning_content` of every assistant message of a turn that made tool
 * calls, in every later request — the messages with the calls and the answer that follows their
 * results (the message after a tool message). A turn without tool calls needs none.
 */
export const reasoningGoesBack = (message: ModelMessage, previous: ModelMessage | undefined): boolean =>
  previous?.role === "tool" || (message.role === "assistant" && message.parts.some((part) => part.type === "tool-call"))
