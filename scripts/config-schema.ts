/**
 * Writes schema/config.schema.json, the JSON Schema of a logbook config file, from the Effect
 * Schema in src/config/ConfigSchema.ts. Run after changing the config keys:
 *
 *   npx tsx scripts/config-schema.ts          # rewrite the file
 *   npx tsx scripts/config-schema.ts --check  # exit 1 when the file is out of date
 *
 * test/config/jsonSchema.test.ts fails when the committed file differs from the generated one.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { configJsonSchemaText } from "../src/config/JsonSchema.js"

const file = join(dirname(fileURLToPath(import.meta.url)), "..", "schema", "config.schema.json")
const text = configJsonSchemaText()

if (process.argv.includes("--check")) {
  let current = ""
  try {
    current = readFileSync(file, "utf8")
  } catch {}
  if (current !== text) {
    console.error(`${file} is out of date: run npx tsx scripts/config-schema.ts`)
    process.exitCode = 1
  }
} else {
  writeFileSync(file, text)
  console.log(`wrote ${file}`)
}
