import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { parseReasoning, reasoningProviderOptions } from "../../src/model/Reasoning.js"

describe("parseReasoning (--reasoning)", () => {
  it("reads off, efforts and budgets", () => {
    expect(parseReasoning("off")).toEqual(Either.right("off"))
    expect(parseReasoning("none")).toEqual(Either.right("off"))
    expect(parseReasoning(" High ")).toEqual(Either.right("high"))
    expect(parseReasoning("minimal")).toEqual(Either.right("minimal"))
    expect(parseReasoning("2048")).toEqual(Either.right(2048))
  })

  it("refuses anything else with a sentence", () => {
    expect(Either.getLeft(parseReasoning("lots"))).toEqual(
      expect.objectContaining({ value: expect.stringContaining('got "lots"') })
    )
    expect(Either.isLeft(parseReasoning("1023"))).toBe(true)
    expect(Either.isLeft(parseReasoning("-5"))).toBe(true)
    expect(Either.isLeft(parseReasoning("1.5"))).toBe(true)
  })
})

describe("reasoningProviderOptions", () => {
  it("unset sends nothing (the provider's default)", () => {
    for (const type of ["anthropic", "openai", "openai-compatible"] as const) {
      expect(reasoningProviderOptions(type, "k", undefined)).toBeUndefined()
    }
  })

  it("anthropic: extended thinking with a budget", () => {
    expect(reasoningProviderOptions("anthropic", "anthropic", "medium")).toEqual({
      anthropic: { thinking: { type: "enabled", budgetTokens: 12_000 } }
    })
    expect(reasoningProviderOptions("anthropic", "anthropic", 5000)).toEqual({
      anthropic: { thinking: { type: "enabled", budgetTokens: 5000 } }
    })
    expect(reasoningProviderOptions("anthropic", "anthropic", "off")).toEqual({
      anthropic: { thinking: { type: "disabled" } }
    })
  })

  it("openai and openai-compatible: an effort (a budget falls into one), under the provider's key", () => {
    expect(reasoningProviderOptions("openai", "openai", "low")).toEqual({ openai: { reasoningEffort: "low" } })
    expect(reasoningProviderOptions("openai", "openai", 2000)).toEqual({ openai: { reasoningEffort: "low" } })
    expect(reasoningProviderOptions("openai", "openai", 8000)).toEqual({ openai: { reasoningEffort: "medium" } })
    expect(reasoningProviderOptions("openai", "openai", 32_000)).toEqual({ openai: { reasoningEffort: "high" } })
    expect(reasoningProviderOptions("openai", "openai", "off")).toEqual({ openai: { reasoningEffort: "none" } })
    expect(reasoningProviderOptions("openai-compatible", "deepseek", "high")).toEqual({
      deepseek: { reasoningEffort: "high" }
    })
    expect(reasoningProviderOptions("openai-compatible", "deepseek", "off")).toBeUndefined()
  })
})
