/**
 * `logbook config`: the resolved config (defaults < global file < project file < `LOGBOOK_*` <
 * flags), with secrets masked: a provider shows the NAME of its key variable and whether it is
 * set (`"apiKey": "(set)"` / `"(not set)"`), never a key. `--format text` also says where each
 * value came from; `--schema` prints the JSON Schema of a config file instead.
 *
 * An invalid config is exit 2 with one sentence that names the file (or variable, or flag), the
 * key and what was expected.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Console, Effect } from "effect"
import { Config, type ConfigSource, describeSource, type MaskedConfig } from "../config/Config.js"
import { configJsonSchemaText } from "../config/JsonSchema.js"
import { cwdOption, formatOption, resolveCwd } from "./options.js"
import { type Style, stdoutStyle, table } from "./render.js"

const cwd = cwdOption("Read the project config (logbook.json) of this directory instead of the current one.")

const configFormat = formatOption(
  ["json", "text"],
  "json: the resolved config as one JSON object; text: one line per setting, with the source it came from."
)

const schemaOption = Options.boolean("schema").pipe(
  Options.withDescription("Print the JSON Schema of a config file (for editors) instead of the config.")
)

/** Every leaf of the masked config as `[path, value]`, objects walked in order. */
const leaves = (value: unknown, path: ReadonlyArray<string> = []): Array<[ReadonlyArray<string>, unknown]> =>
  typeof value === "object" && value !== null && !Array.isArray(value)
    ? Object.entries(value).flatMap(([key, child]) => leaves(child, [...path, key]))
    : [[path, value]]

const originText = (source: ConfigSource): string => (source._tag === "Defaults" ? "default" : describeSource(source))

/** The text form: the files looked at, then `KEY  VALUE  FROM` rows. */
export const renderText = (
  masked: MaskedConfig,
  files: ReadonlyArray<{ readonly kind: string; readonly path: string; readonly found: boolean }>,
  originOf: (path: ReadonlyArray<string>) => ConfigSource,
  style: Style
): Array<string> => {
  const rows = leaves(masked).map(([path, value]) => {
    const last = path[path.length - 1]
    // apiKey is not a config key: it reports the variable named by apiKeyEnv
    const from = last === "apiKey" ? "environment" : originText(originOf(path))
    return [path.join("."), typeof value === "string" ? value : JSON.stringify(value), style.dim(from)]
  })
  return [
    ...files.map((file) => `${file.kind} config: ${file.path}${file.found ? "" : style.dim(" (not found)")}`),
    "",
    ...table(["KEY", "VALUE", "FROM"], rows, style)
  ]
}

export const config = Command.make(
  "config",
  { cwd, format: configFormat, schema: schemaOption },
  Effect.fn("cli.config")(function* ({ cwd, format, schema }) {
    if (schema) {
      yield* Console.log(configJsonSchemaText().trimEnd())
      return
    }
    const dir = yield* resolveCwd(cwd)
    const service = yield* Effect.provide(Config, Config.layer({ cwd: dir }))
    const masked = yield* service.masked
    if (format === "json") {
      yield* Console.log(JSON.stringify(masked, null, 2))
      return
    }
    const style = yield* stdoutStyle
    yield* Console.log(renderText(masked, service.files, service.originOf, style).join("\n"))
  })
).pipe(
  Command.withDescription(
    "Print the resolved config (defaults < ~/.config/logbook/config.json < ./logbook.json < LOGBOOK_* < flags) " +
      "with secrets masked: for each provider, the name of its API key variable and whether it is set."
  )
)
