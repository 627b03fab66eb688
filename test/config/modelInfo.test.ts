/**
 * A model's limits and prices: the config's settings over the model catalog's, field by field, and
 * which catalog provider a provider's models are looked up in.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Exit } from "effect"
import { type ConfigInput, maskConfig, resolveModel, resolveSources } from "../../src/config/Config.js"
import { catalogProviderOf, effectivePrice, modelInfo } from "../../src/config/ModelInfo.js"

const file = { _tag: "File", path: "/p/logbook.json" } as const

/** The info of `model` with `config` as the project file. */
const infoOf = (config: ConfigInput, model: string) =>
  Effect.gen(function* () {
    const loaded = Either.getOrThrow(resolveSources([{ source: file, value: config }]))
    const resolved = yield* resolveModel(loaded.config, model)
    return yield* modelInfo(resolved, { at: new Date("2026-06-01T10:00:00Z"), originOf: loaded.originOf })
  })

describe("modelInfo", () => {
  it.effect("a built-in provider's model: everything from the catalog but maxOutput (the type's default)", () =>
    Effect.gen(function* () {
      const info = yield* infoOf({}, "anthropic/claude-sonnet-4-5-20250929")
      expect(info.catalog).toMatchObject({
        _tag: "Found",
        entry: { provider: "anthropic", model: "claude-sonnet-4-5" }
      })
      expect(info.contextWindow).toEqual({ value: 200_000, from: "catalog" })
      expect(info.maxOutput).toEqual({ value: 32_000, from: "default" })
      expect(effectivePrice(info)).toEqual({ input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 })
      expect(Object.values(info.price).every((p) => p?.from === "catalog")).toBe(true)
    })
  )

  it.effect("the config wins field by field; the rest still comes from the catalog", () =>
    Effect.gen(function* () {
      const info = yield* infoOf(
        {
          provider: {
            anthropic: {
              models: { "claude-sonnet-4-5": { contextWindow: 100_000, maxOutput: 8192, price: { output: 10 } } }
            }
          }
        },
        "anthropic/claude-sonnet-4-5"
      )
      expect(info.contextWindow).toEqual({ value: 100_000, from: "config" })
      expect(info.maxOutput).toEqual({ value: 8192, from: "config" })
      expect(info.price).toEqual({
        input: { value: 3, from: "catalog" },
        output: { value: 10, from: "config" },
        cacheRead: { value: 0.3, from: "catalog" },
        cacheWrite: { value: 3.75, from: "catalog" }
      })
      expect(effectivePrice(info)).toEqual({ input: 3, output: 10, cacheRead: 0.3, cacheWrite: 3.75 })
    })
  )

  it.effect("a price of 0 in the config is a price", () =>
    Effect.gen(function* () {
      const info = yield* infoOf(
        { provider: { ollama: { models: { m: { price: { input: 0, output: 0 } } } } } },
        "ollama/m"
      )
      expect(effectivePrice(info)).toEqual({ input: 0, output: 0 })
    })
  )

  it.effect("a model the catalog does not have: only the config's settings; none at all: no price", () =>
    Effect.gen(function* () {
      const unknown = yield* infoOf({}, "openai/not-a-model")
      expect(unknown.catalog).toEqual({ _tag: "NotFound", provider: "openai" })
      expect(unknown.contextWindow).toBeUndefined()
      expect(effectivePrice(unknown)).toBeUndefined()
      const priced = yield* infoOf(
        { provider: { openai: { models: { "not-a-model": { price: { input: 1 } } } } } },
        "openai/not-a-model"
      )
      expect(effectivePrice(priced)).toEqual({ input: 1 })
    })
  )

  it.effect("an openai-compatible provider is looked up only when its `catalog` says where", () =>
    Effect.gen(function* () {
      const local = { type: "openai-compatible", baseURL: "http://localhost:8000/v1" } as const
      const plain = yield* infoOf({ provider: { local } }, "local/gpt-4.1")
      expect(plain.catalog).toEqual({ _tag: "None" })
      expect(effectivePrice(plain)).toBeUndefined()
      const deepseek = yield* infoOf({ provider: { ds: { ...local, catalog: "deepseek" } } }, "ds/deepseek-chat")
      expect(deepseek.catalog).toMatchObject({ _tag: "Found", entry: { provider: "deepseek", model: "deepseek-chat" } })
      // the price in force at 10:00 UTC (peak hours)
      expect(deepseek.price.input).toEqual({ value: 0.27, from: "catalog" })
    })
  )

  it.effect("a `catalog` that names no provider of the catalog is a config error naming the file and key", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(
        infoOf(
          { provider: { ds: { type: "openai-compatible", baseURL: "http://localhost:1/v1", catalog: "deepseeek" } } },
          "ds/deepseek-chat"
        )
      )
      expect(Exit.isFailure(exit)).toBe(true)
      const error = Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined
      expect(error).toMatchObject({ _tag: "ConfigError", source: "file /p/logbook.json", path: "provider.ds.catalog" })
      expect(error?.message).toMatch(
        /^invalid config in file \/p\/logbook\.json at provider\.ds\.catalog: "deepseeek" is not a provider of the model catalog/
      )
    })
  )
})

describe("provider.<id>.catalog", () => {
  it("is a provider id: anything else is refused naming the key; `logbook config` shows it", () => {
    const bad = resolveSources([
      {
        source: file,
        value: { provider: { ds: { type: "openai-compatible", baseURL: "http://x/v1", catalog: "a b" } } }
      }
    ])
    expect(Either.getLeft(bad).pipe((e) => (e._tag === "Some" ? e.value.message : ""))).toContain(
      "at provider.ds.catalog: expected a provider id of the model catalog"
    )
    const good = Either.getOrThrow(
      resolveSources([
        {
          source: file,
          value: { provider: { ds: { type: "openai-compatible", baseURL: "http://x/v1", catalog: "deepseek" } } }
        }
      ])
    )
    expect(maskConfig(good.config, () => false).provider.ds).toMatchObject({ catalog: "deepseek" })
  })
})

describe("catalogProviderOf", () => {
  it("openai and anthropic use their own; openai-compatible none unless `catalog` says; `catalog` wins", () => {
    expect(catalogProviderOf({ type: "openai" })).toBe("openai")
    expect(catalogProviderOf({ type: "anthropic" })).toBe("anthropic")
    expect(catalogProviderOf({ type: "openai-compatible" })).toBeUndefined()
    expect(catalogProviderOf({ type: "openai-compatible", catalog: "openrouter" })).toBe("openrouter")
    expect(catalogProviderOf({ type: "openai", catalog: "azure" })).toBe("azure")
  })
})
