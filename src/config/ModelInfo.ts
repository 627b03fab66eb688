/**
 * The limits and prices that apply to a resolved model, field by field: the config's
 * (`provider.<id>.models.<model>.contextWindow`, `.maxOutput`, `.price.*`) where it gives one, else
 * the model catalog's (`model/Catalog.ts`), else unknown. `logbook run` computes the cost of each
 * step from `effectivePrice`; `logbook config` shows every field with where it came from.
 *
 * Which catalog provider a provider's models are looked up in: `provider.<id>.catalog` when set (an
 * openai-compatible server that serves a catalog provider's models, e.g. `"deepseek"`); otherwise
 * `openai` for type openai and `anthropic` for type anthropic; an openai-compatible provider
 * without `catalog` is not looked up (its models are whatever the server says they are).
 *
 * `maxOutput` comes from the config, else the provider type's default (`defaultMaxOutputTokens`):
 * the catalog has no output limits, and every request is sent with one.
 */
import { Effect, Option } from "effect"
import { defaultMaxOutputTokens } from "../model/AiSdk.js"
import * as Catalog from "../model/Catalog.js"
import type { Price, PriceKind } from "../model/Price.js"
import { ConfigError, type ConfigSource, describeSource, formatPath, type ResolvedModel } from "./Config.js"
import type { ProviderType } from "./ConfigSchema.js"

/** A value and where it came from. */
export interface Sourced<A> {
  readonly value: A
  readonly from: "config" | "catalog" | "default"
}

/** What the catalog said about the model. */
export type CatalogMatch =
  /** the provider has no catalog provider (openai-compatible without `catalog`) */
  | { readonly _tag: "None" }
  /** the catalog has no such model */
  | { readonly _tag: "NotFound"; readonly provider: string }
  | { readonly _tag: "Found"; readonly entry: Catalog.CatalogEntry }
  /** the catalog could not be read (a broken install): only the config's settings apply */
  | { readonly _tag: "Failed"; readonly provider: string; readonly message: string }

export type PriceKey = PriceKind
export const priceKeys: ReadonlyArray<PriceKey> = ["input", "output", "cacheRead", "cacheWrite"]

export interface ModelInfo {
  /** `provider/model` */
  readonly ref: string
  readonly catalog: CatalogMatch
  readonly contextWindow?: Sourced<number> | undefined
  readonly maxOutput?: Sourced<number> | undefined
  readonly price: { readonly [K in PriceKey]?: Sourced<number> | undefined }
}

/** The catalog provider of a provider: `catalog` when set, else the type's own (openai, anthropic). */
export const catalogProviderOf = (provider: {
  readonly type: ProviderType
  readonly catalog?: string | undefined
}): string | undefined => provider.catalog ?? (provider.type === "openai-compatible" ? undefined : provider.type)

const pick = <A>(config: A | undefined, catalog: A | undefined): Sourced<A> | undefined =>
  config !== undefined
    ? { value: config, from: "config" }
    : catalog !== undefined
      ? { value: catalog, from: "catalog" }
      : undefined

/** The config's settings over the catalog's entry (if any), field by field. */
export const combine = (resolved: ResolvedModel, catalog: CatalogMatch): ModelInfo => {
  const entry = catalog._tag === "Found" ? catalog.entry : undefined
  const price: { [K in PriceKey]?: Sourced<number> } = {}
  for (const key of priceKeys) {
    const value = pick(resolved.model.price?.[key], entry?.price[key])
    if (value !== undefined) price[key] = value
  }
  return {
    ref: resolved.ref,
    catalog,
    contextWindow: pick(resolved.model.contextWindow, entry?.contextWindow),
    maxOutput: pick(resolved.model.maxOutput, undefined) ?? {
      value: defaultMaxOutputTokens[resolved.provider.type],
      from: "default"
    },
    price
  }
}

/** The prices to compute costs with; `undefined` when none is known. */
export const effectivePrice = (info: ModelInfo): Price | undefined => {
  const out: { -readonly [K in PriceKey]?: number } = {}
  for (const key of priceKeys) {
    const value = info.price[key]
    if (value !== undefined) out[key] = value.value
  }
  return Object.keys(out).length === 0 ? undefined : out
}

/**
 * The model's limits and prices, with the catalog looked up at `at`. A `catalog` that names no
 * provider of the catalog is a ConfigError; a catalog that cannot be read is `Failed`, not an error
 * (the config's settings still apply).
 */
export const modelInfo = (
  resolved: ResolvedModel,
  options: {
    readonly at?: Date | undefined
    /** where a config value came from (`LoadedConfig.originOf`), to name it in an error */
    readonly originOf?: ((path: ReadonlyArray<string>) => ConfigSource) | undefined
  } = {}
): Effect.Effect<ModelInfo, ConfigError> =>
  Effect.gen(function* () {
    const provider = catalogProviderOf(resolved.provider)
    if (provider === undefined) return combine(resolved, { _tag: "None" })
    const match = yield* Effect.gen(function* () {
      if (resolved.provider.catalog !== undefined && !(yield* Catalog.hasProvider(provider))) {
        const path = ["provider", resolved.providerId, "catalog"]
        const source = describeSource(options.originOf?.(path) ?? { _tag: "Argument", name: "the config" })
        return yield* new ConfigError({
          source,
          path: formatPath(path),
          message:
            `invalid config in ${source} at ${formatPath(path)}: "${provider}" is not a provider of the model ` +
            `catalog (${Catalog.catalogSource.package} ${Catalog.catalogSource.version}); use one of its ` +
            'provider ids, such as "deepseek", "openrouter", "groq" or "mistral", or remove the key'
        })
      }
      const entry = yield* Catalog.lookup(provider, resolved.modelId, { at: options.at })
      return Option.match(entry, {
        onNone: (): CatalogMatch => ({ _tag: "NotFound", provider }),
        onSome: (found): CatalogMatch => ({ _tag: "Found", entry: found })
      })
    }).pipe(
      Effect.catchTag("CatalogError", (error) =>
        Effect.succeed<CatalogMatch>({ _tag: "Failed", provider, message: error.message })
      )
    )
    return combine(resolved, match)
  })
