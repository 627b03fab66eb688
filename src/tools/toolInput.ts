/**
 * The input schemas the built-in tools share: plain JSON Schemas for the model (no `$defs`, no
 * generated titles), with decoding errors the model can act on.
 */
import { Schema } from "effect"

const showActual = (actual: unknown): string => {
  const text = JSON.stringify(actual)
  return text === undefined ? String(actual) : text.length > 60 ? `${text.slice(0, 59)}…` : text
}

/** A whole number of at least `min`. */
export const intAtLeast = (min: number, description: string) =>
  Schema.Int.pipe(
    Schema.greaterThanOrEqualTo(min),
    Schema.annotations({
      description,
      message: (issue) => ({
        message: `expected a whole number of ${min} or more, got ${showActual(issue.actual)}`,
        override: true
      }),
      jsonSchema: { type: "integer", minimum: min, description }
    })
  )

/** A string that is not empty. */
export const nonEmptyString = (description: string) =>
  Schema.String.pipe(
    Schema.minLength(1),
    Schema.annotations({
      description,
      message: (issue) => ({ message: `expected a non-empty string, got ${showActual(issue.actual)}`, override: true }),
      jsonSchema: { type: "string", minLength: 1, description }
    })
  )
