/**
 * The model catalog: what is publicly known about a provider's models — the context window and the
 * prices (input, output, cache read, cache write; USD per million tokens) — so that a model without
 * settings in the config still gets a cost. The data is that of the `@pydantic/genai-prices`
 * package (pinned; bundled into `dist/bin.js`, so no network): this module is the only one that
 * reads it, and only these fields.
 *
 * - `lookup(provider, modelId)` takes a catalog provider id (`"openai"`, `"anthropic"`, or another
 *   one of the package, e.g. `"deepseek"`, `"openrouter"`) and the model id as the provider spells
 *   it. Model ids are matched by the package's own rules: a dated id is the model it dates
 *   (`claude-sonnet-4-5-20250929` is `claude-sonnet-4-5`, `gpt-4.1-2025-04-14` is `gpt-4.1`). An
 *   unknown provider or model is `None`.
 * - Prices are the base rates in force at `at` (a price that depends on the date or the time of day
 *   is the one of that moment). Higher rates above a prompt size (long-context tiers) are not
 *   applied: the cost of such a step is at the base rate.
 * - The package has no output limits: the catalog never gives `maxOutput` (docs/models.md, "Model
 *   catalog": the SDK's own default is sent instead).
 *
 * The package holds every provider's data (about 470 kB of JavaScript), which takes tens of
 * milliseconds to evaluate: it is imported on first use, so only the commands that need it pay.
 */
import { Effect, Option, Schema } from "effect"
import type { Price, PriceKind } from "./Price.js"

/** (the public name: `Catalog.Price`) */
export type { Price } from "./Price.js"

/** The catalog's package and version (a test checks it against the installed one). */
export const catalogSource = { package: "@pydantic/genai-prices", version: "0.1.8" } as const

/** What the catalog knows about one model. */
export interface CatalogEntry {
  /** the catalog's provider id, e.g. `anthropic` */
  readonly provider: string
  /** the catalog's id of the model that matched, e.g. `claude-sonnet-4-5` for `claude-sonnet-4-5-20250929` */
  readonly model: string
  /** its display name, e.g. `Claude Sonnet 4.5` */
  readonly name?: string | undefined
  /** the context window, in tokens */
  readonly contextWindow?: number | undefined
  /** the prices the catalog gives (each one may be missing) */
  readonly price: Price
}

/** The catalog's package could not be loaded, or failed on a lookup. */
export class CatalogError extends Schema.TaggedError<CatalogError>()("CatalogError", {
  message: Schema.String,
  cause: Schema.Defect
}) {}

type Package = typeof import("@pydantic/genai-prices")

/** The package, loaded once (the module cache keeps it). */
const load: Effect.Effect<Package, CatalogError> = Effect.tryPromise({
  try: () => import("@pydantic/genai-prices"),
  catch: (cause) =>
    new CatalogError({ message: `cannot load the model catalog (${catalogSource.package}): ${String(cause)}`, cause })
})

/** A price of the package: a number, or tiers whose `base` is the rate below the first tier. */
const rate = (value: unknown): number | undefined => {
  const n =
    typeof value === "number"
      ? value
      : typeof value === "object" && value !== null && "base" in value
        ? (value as { readonly base: unknown }).base
        : undefined
  return typeof n === "number" && Number.isFinite(n) && n >= 0 ? n : undefined
}

const positiveInt = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isInteger(value) && value > 0 ? value : undefined

/** Whether `provider` is a provider id of the catalog (exactly, not by the package's looser matching). */
export const hasProvider = (provider: string): Effect.Effect<boolean, CatalogError> =>
  Effect.flatMap(load, (pkg) =>
    Effect.try({
      try: () => pkg.findProvider({ providerId: provider })?.id === provider,
      catch: (cause) => new CatalogError({ message: `the model catalog failed: ${String(cause)}`, cause })
    })
  )

/** What the catalog knows about `modelId` of the catalog provider `provider`, at `at` (default: now). */
export const lookup = Effect.fn("Catalog.lookup")(function* (
  provider: string,
  modelId: string,
  options: { readonly at?: Date | undefined } = {}
) {
  const pkg = yield* load
  return yield* Effect.try({
    try: (): Option.Option<CatalogEntry> => {
      const found = pkg.findProvider({ providerId: provider })
      // the package also matches a provider id loosely ("my-anthropic" -> anthropic): only exact ids here
      if (found === undefined || found.id !== provider) return Option.none()
      const result = pkg.calcPrice({}, modelId, {
        providerId: found.id,
        ...(options.at === undefined ? {} : { timestamp: options.at })
      })
      if (result === null) return Option.none()
      const prices = result.model_price
      const rates: Record<PriceKind, number | undefined> = {
        input: rate(prices.input_mtok),
        output: rate(prices.output_mtok),
        cacheRead: rate(prices.cache_read_mtok),
        cacheWrite: rate(prices.cache_write_mtok)
      }
      const price: { -readonly [K in PriceKind]?: number } = {}
      for (const [key, value] of Object.entries(rates) as Array<[PriceKind, number | undefined]>) {
        if (value !== undefined) price[key] = value
      }
      return Option.some({
        provider: found.id,
        model: result.model.id,
        name: result.model.name,
        contextWindow: positiveInt(result.model.context_window),
        price
      })
    },
    catch: (cause) =>
      new CatalogError({ message: `the model catalog failed on ${provider}/${modelId}: ${String(cause)}`, cause })
  })
})
