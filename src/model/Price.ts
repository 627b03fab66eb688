/**
 * What a model's tokens cost: prices in USD per million tokens, by kind of token. A missing price
 * is unknown (and so is the cost of the tokens it would price). The model catalog gives them, the
 * config file can set them (`config/ConfigSchema.ts` adds the file's descriptions and messages to
 * these fields), and each step's cost is computed from them.
 */
import { Schema } from "effect"

/** A price in USD per million tokens: a finite number, 0 or more. */
export const UsdPerMillion = Schema.Number.pipe(Schema.finite(), Schema.nonNegative())

const optionalPrice = Schema.optionalWith(UsdPerMillion, { exact: true })

export const Price = Schema.Struct({
  input: optionalPrice,
  output: optionalPrice,
  cacheRead: optionalPrice,
  cacheWrite: optionalPrice
})
export type Price = typeof Price.Type

/** The kinds of token that have a price. */
export type PriceKind = keyof typeof Price.fields
