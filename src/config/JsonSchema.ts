/**
 * The JSON Schema of a config file, for editors, generated from `ConfigInput` (the Effect Schema).
 * The committed copy is `schema/config.schema.json`; `npx tsx scripts/config-schema.ts` rewrites
 * it, and a test fails when it is out of date. `logbook config --schema` prints it.
 */
import { JSONSchema } from "effect"
import { ConfigInput } from "./ConfigSchema.js"

/** The JSON Schema (draft-07) of a logbook config file. */
export const configJsonSchema = (): JSONSchema.JsonSchema7Root => JSONSchema.make(ConfigInput)

/** The text of `schema/config.schema.json`: 2-space JSON and a final newline. */
export const configJsonSchemaText = (): string => `${JSON.stringify(configJsonSchema(), null, 2)}\n`
