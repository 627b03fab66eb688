/**
 * The committed JSON Schema (schema/config.schema.json) is generated from the Effect Schema and
 * must be regenerated when the config keys change: `npx tsx scripts/config-schema.ts`.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { defaults } from "../../src/config/Config.js"
import { configJsonSchema, configJsonSchemaText } from "../../src/config/JsonSchema.js"
import { root } from "../support/cli.js"

const file = path.join(root, "schema", "config.schema.json")

describe("schema/config.schema.json", () => {
  it("is up to date with the Effect Schema (run `npx tsx scripts/config-schema.ts` if not)", () => {
    expect(fs.readFileSync(file, "utf8")).toBe(configJsonSchemaText())
  })

  it("describes every top-level key, allows $schema and forbids unknown keys", () => {
    const schema = configJsonSchema() as {
      $ref: string
      $defs: Record<string, { properties: Record<string, unknown>; additionalProperties: unknown }>
    }
    const top = schema.$defs[schema.$ref.replace("#/$defs/", "")]!
    expect(Object.keys(top.properties).sort()).toEqual(
      [
        "$schema",
        "compaction",
        "hooks",
        "maxSteps",
        "mcp",
        "mcpServers",
        "model",
        "permission",
        "plugins",
        "provider",
        "retry",
        "snapshotEvery",
        "step",
        "tools"
      ].sort()
    )
    expect(top.additionalProperties).toBe(false)
    // every default is a valid value for its key: the defaults themselves satisfy the input schema
    expect(Object.keys(defaults).every((key) => key in top.properties)).toBe(true)
  })

  it("provider entries have no field for a literal key, only apiKeyEnv", () => {
    const text = configJsonSchemaText()
    expect(text).toContain('"apiKeyEnv"')
    expect(text).not.toMatch(/"apiKey"\s*:/)
    expect(text).toContain('"openai-compatible"')
  })
})
