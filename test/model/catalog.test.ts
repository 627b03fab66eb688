/**
 * The model catalog (`@pydantic/genai-prices`, read through `model/Catalog.ts`): real models with
 * the figures the pinned package holds; unknown ones are nothing.
 */
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { catalogSource, hasProvider, lookup } from "../../src/model/Catalog.js"

const found = (provider: string, model: string, at?: Date) =>
  lookup(provider, model, { at }).pipe(Effect.map(Option.getOrThrow))

describe("Catalog.lookup", () => {
  it.effect("Claude Sonnet 4.5: 200k context, $3 / $15, cache read $0.30, cache write $3.75", () =>
    Effect.gen(function* () {
      const entry = yield* found("anthropic", "claude-sonnet-4-5")
      expect(entry).toEqual({
        provider: "anthropic",
        model: "claude-sonnet-4-5",
        name: "Claude Sonnet 4.5",
        contextWindow: 200_000,
        price: { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 }
      })
    })
  )

  it.effect("a dated model id is the model it dates", () =>
    Effect.gen(function* () {
      expect((yield* found("anthropic", "claude-sonnet-4-5-20250929")).model).toBe("claude-sonnet-4-5")
      expect((yield* found("anthropic", "claude-sonnet-4-20250514")).model).toBe("claude-sonnet-4-0")
      expect((yield* found("openai", "gpt-4.1-2025-04-14")).model).toBe("gpt-4.1")
    })
  )

  it.effect("Claude Opus 4 and 4.1, GPT-4.1 and GPT-5, with their cache prices", () =>
    Effect.gen(function* () {
      expect((yield* found("anthropic", "claude-opus-4-1")).price).toEqual({
        input: 15,
        output: 75,
        cacheRead: 1.5,
        cacheWrite: 18.75
      })
      expect((yield* found("anthropic", "claude-opus-4-20250514")).model).toBe("claude-opus-4-0")
      const gpt41 = yield* found("openai", "gpt-4.1")
      expect(gpt41.contextWindow).toBe(1_000_000)
      // OpenAI charges nothing extra to write its cache: the catalog gives no cache-write price
      expect(gpt41.price).toEqual({ input: 2, output: 8, cacheRead: 0.5 })
      const gpt5 = yield* found("openai", "gpt-5")
      expect(gpt5).toMatchObject({ model: "gpt-5", contextWindow: 400_000 })
      expect(gpt5.price).toEqual({ input: 1.25, output: 10, cacheRead: 0.125 })
      // a sibling with a longer id is its own model, not the shorter one's
      expect((yield* found("openai", "gpt-5-mini")).price.input).toBe(0.25)
    })
  )

  it.effect("a price that depends on the time of day is the one in force at `at`", () =>
    Effect.gen(function* () {
      // DeepSeek's off-peak discount (16:30 to 00:30 UTC)
      const peak = yield* found("deepseek", "deepseek-chat", new Date("2026-06-01T10:00:00Z"))
      const offPeak = yield* found("deepseek", "deepseek-chat", new Date("2026-06-01T20:00:00Z"))
      expect(peak.price.input).toBe(0.27)
      expect(offPeak.price.input).toBe(0.135)
    })
  )

  it.effect("an unknown model or provider is nothing; provider ids are exact", () =>
    Effect.gen(function* () {
      expect(yield* lookup("anthropic", "not-a-model")).toEqual(Option.none())
      expect(yield* lookup("openai", "claude-sonnet-4-5")).toEqual(Option.none())
      expect(yield* lookup("no-such-provider", "gpt-4.1")).toEqual(Option.none())
      // the package alone would match this to anthropic
      expect(yield* lookup("my-anthropic-proxy", "claude-sonnet-4-5")).toEqual(Option.none())
      expect(yield* hasProvider("my-anthropic-proxy")).toBe(false)
      expect(yield* hasProvider("deepseek")).toBe(true)
      expect(yield* hasProvider("openai")).toBe(true)
    })
  )
})

describe("catalogSource", () => {
  it("names the installed version of the package", () => {
    const require = createRequire(import.meta.url)
    // the package's exports hide its package.json: find it from its entry point
    const entry = require.resolve("@pydantic/genai-prices")
    const manifest = path.join(path.dirname(entry), "..", "package.json")
    const pkg = JSON.parse(fs.readFileSync(manifest, "utf8")) as { name: string; version: string }
    expect(pkg).toMatchObject({ name: catalogSource.package, version: catalogSource.version })
  })
})
