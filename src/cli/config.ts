/**
 * `logbook config`: the resolved config (defaults < global file < project file < `LOGBOOK_*` <
 * flags), with secrets masked: a provider shows the NAME of its key variable and whether it is
 * set (`"apiKey": "(set)"` / `"(not set)"`), never a key. `--format text` also says where each
 * value came from; `--schema` prints the JSON Schema of a config file instead. For the configured
 * model it adds the limits and prices that apply (`config/ModelInfo.ts`) and whether each came from
 * the config or the model catalog (`modelInfo` in JSON).
 *
 * Both formats also list the instruction files (AGENTS.md) a session in the directory would load
 * (`instructions`); `--system-prompt` prints the exact system prompt `logbook run` would send from
 * that directory (instructions included, API keys masked), without a model or the database.
 *
 * Both formats list the command hooks (`hooks`): each one's event, matcher and command, the file it
 * came from, and whether it runs (a project's runs once approved: docs/hooks.md).
 *
 * An invalid config is exit 2 with one sentence that names the file (or variable, or flag), the
 * key and what was expected.
 */

import { homedir } from "node:os"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Clock, Console, Effect, Config as EffectConfig } from "effect"
import {
  Config,
  type ConfigSource,
  describeSource,
  type MaskedConfig,
  resolveModel,
  toolSecrets,
  userInstructionsFile
} from "../config/Config.js"
import { approvedHooks, describeHook, type HookEntry, hookEntries } from "../config/HookConfig.js"
import { configJsonSchemaText } from "../config/JsonSchema.js"
import { type ModelInfo, modelInfo, priceKeys, type Sourced } from "../config/ModelInfo.js"
import { pluginEntries } from "../config/PluginTrust.js"
import { workspaceSkills } from "../config/Skills.js"
import { catalogSource } from "../model/Catalog.js"
import {
  INSTRUCTION_FILE_NAMES,
  type LoadedInstructions,
  makeInstructions,
  warnSkipped
} from "../session/Instructions.js"
import { fullSystemPrompt, withSkills } from "../session/SystemPrompt.js"
import { makeSecrets } from "../tools/Secrets.js"
import { cwdOption, formatOption, resolveCwd } from "./options.js"
import { pluginRows } from "./plugins.js"
import { type Style, stdoutStyle, table } from "./render.js"

const cwd = cwdOption("Read the project config (logbook.json) of this directory instead of the current one.")

const configFormat = formatOption(
  ["json", "text"],
  "json: the resolved config as one JSON object; text: one line per setting, with the source it came from."
)

const schemaOption = Options.boolean("schema").pipe(
  Options.withDescription("Print the JSON Schema of a config file (for editors) instead of the config.")
)

const systemPromptOption = Options.boolean("system-prompt").pipe(
  Options.withDescription(
    "Print the exact system prompt `logbook run` would send from the directory (AGENTS.md instructions " +
      "included, API keys masked) instead of the config. Calls no model and opens no database."
  )
)

/** Every leaf of the masked config as `[path, value]`, objects walked in order. */
const leaves = (value: unknown, path: ReadonlyArray<string> = []): Array<[ReadonlyArray<string>, unknown]> =>
  typeof value === "object" && value !== null && !Array.isArray(value)
    ? Object.entries(value).flatMap(([key, child]) => leaves(child, [...path, key]))
    : [[path, value]]

const originText = (source: ConfigSource): string => (source._tag === "Defaults" ? "default" : describeSource(source))

/** The instruction files as `logbook config --format json` shows them (their contents left out). */
export const instructionsJson = (loaded: LoadedInstructions) => ({
  userFile: loaded.userFile ?? null,
  root: loaded.root ?? null,
  files: loaded.files.map(({ content: _, ...file }) => file),
  skipped: loaded.skipped
})

/** One line per instruction file (loaded or skipped), or one that says where none was found. */
export const instructionLines = (loaded: LoadedInstructions, style: Style): Array<string> => {
  const lines = loaded.files.map((file) => {
    const cut = file.cut === undefined ? "" : `, cut after ${file.includedBytes}`
    return `${file.scope} instructions: ${file.path}${style.dim(` (${file.size} bytes${cut})`)}`
  })
  for (const file of loaded.skipped) lines.push(`instructions: ${file.path}${style.dim(` (skipped: ${file.reason})`)}`)
  if (lines.length > 0) return lines
  const first = loaded.directories[0]
  const last = loaded.directories[loaded.directories.length - 1]
  const where = first === last ? `in ${first}` : `from ${first} down to ${last}`
  const user = loaded.userFile === undefined ? "" : `, and no ${loaded.userFile}`
  return [`instructions: none${style.dim(` (no ${INSTRUCTION_FILE_NAMES.join(" or ")} ${where}${user})`)}`]
}

/** The text form: the files looked at, then `KEY  VALUE  FROM` rows. */
export const renderText = (
  masked: MaskedConfig,
  files: ReadonlyArray<{ readonly kind: string; readonly path: string; readonly found: boolean }>,
  originOf: (path: ReadonlyArray<string>) => ConfigSource,
  style: Style,
  instructions: ReadonlyArray<string> = []
): Array<string> => {
  const rows = leaves(masked).map(([path, value]) => {
    const last = path[path.length - 1]
    // apiKey and bearerToken are not config keys: they report the variable named by apiKeyEnv / bearerTokenEnv
    const from = last === "apiKey" || last === "bearerToken" ? "environment" : originText(originOf(path))
    return [path.join("."), typeof value === "string" ? value : JSON.stringify(value), style.dim(from)]
  })
  return [
    ...files.map((file) => `${file.kind} config: ${file.path}${file.found ? "" : style.dim(" (not found)")}`),
    ...instructions,
    "",
    ...table(["KEY", "VALUE", "FROM"], rows, style)
  ]
}

/** The command hooks as `logbook config --format json` shows them. */
export const hooksJson = (entries: ReadonlyArray<HookEntry>) =>
  entries.map((entry) => ({
    source: entry.definition.source,
    event: entry.definition.event,
    matcher: entry.definition.matcher ?? null,
    command: entry.definition.command,
    timeoutMs: entry.definition.timeoutMs,
    from: entry.origin,
    scope: entry.scope,
    approved: entry.approved
  }))

/** One line per command hook: what it runs, where it came from, whether it runs. */
export const hookLines = (entries: ReadonlyArray<HookEntry>, style: Style): Array<string> =>
  entries.map(
    (entry) =>
      `hook ${entry.definition.source}: ${describeHook(entry.definition)}${style.dim(
        ` (${entry.origin}${entry.scope === "project" ? (entry.approved ? ", approved" : ", not approved: does not run") : ""})`
      )}`
  )

const catalogName = `${catalogSource.package} ${catalogSource.version}`

/** The `modelInfo` of `--format json`: each limit and price with where it came from; `null` when unknown. */
export const modelInfoJson = (info: ModelInfo) => {
  const sourced = (value: Sourced<number> | undefined) => value ?? null
  const c = info.catalog
  return {
    model: info.ref,
    catalog:
      c._tag === "None"
        ? null
        : c._tag === "Found"
          ? { source: catalogName, provider: c.entry.provider, model: c.entry.model, name: c.entry.name ?? null }
          : c._tag === "NotFound"
            ? { source: catalogName, provider: c.provider, model: null }
            : { source: catalogName, provider: c.provider, error: c.message },
    contextWindow: sourced(info.contextWindow),
    maxOutput: sourced(info.maxOutput),
    price: Object.fromEntries(priceKeys.map((key) => [key, sourced(info.price[key])]))
  }
}

/**
 * The text form of the model's limits and prices: what the catalog says about the model, then one
 * row per limit and price, keyed by the config key that would set it, with where the value came from.
 */
export const renderModelInfo = (
  info: ModelInfo,
  keyPath: ReadonlyArray<string>,
  originOf: (path: ReadonlyArray<string>) => ConfigSource,
  style: Style
): Array<string> => {
  const c = info.catalog
  const about =
    c._tag === "Found"
      ? `in the model catalog as ${c.entry.provider}/${c.entry.model}${c.entry.name === undefined ? "" : ` (${c.entry.name})`}`
      : c._tag === "NotFound"
        ? `not in the model catalog (provider ${c.provider})`
        : c._tag === "Failed"
          ? `the model catalog could not be read: ${c.message}`
          : `no model catalog for this provider (openai-compatible: set provider.${keyPath[1]}.catalog to use one)`
  const row = (name: string, value: Sourced<number> | undefined, unknown: string) => {
    const path = [...keyPath, ...name.split(".")]
    const from =
      value === undefined
        ? "-"
        : value.from === "catalog"
          ? `catalog (${catalogName})`
          : value.from === "default"
            ? "default"
            : originText(originOf(path))
    return [path.join("."), value === undefined ? unknown : String(value.value), style.dim(from)]
  }
  return [
    `model ${info.ref}: ${about}`,
    "",
    ...table(
      ["KEY", "VALUE", "FROM"],
      [
        row("contextWindow", info.contextWindow, "unknown"),
        row("maxOutput", info.maxOutput, "unknown"),
        ...priceKeys.map((key) =>
          row(
            `price.${key}`,
            info.price[key],
            // the cost of cached tokens falls back to the input price (session/Processor.ts costOf)
            (key === "cacheRead" || key === "cacheWrite") && info.price.input !== undefined
              ? "unknown: charged as price.input"
              : "unknown"
          )
        )
      ],
      style
    )
  ]
}

export const config = Command.make(
  "config",
  { cwd, format: configFormat, schema: schemaOption, systemPrompt: systemPromptOption },
  Effect.fn("cli.config")(function* ({ cwd, format, schema, systemPrompt }) {
    if (schema) {
      yield* Console.log(configJsonSchemaText().trimEnd())
      return
    }
    const dir = yield* resolveCwd(cwd)
    const service = yield* Effect.provide(Config, Config.layer({ cwd: dir }))
    // what `logbook run` would load from this directory (the same finder, the same user file)
    const instructions = yield* makeInstructions({ userFile: userInstructionsFile(service) })
    const loaded = yield* instructions.load(dir)
    if (systemPrompt) {
      yield* warnSkipped(loaded)
      const home = yield* EffectConfig.string("HOME").pipe(EffectConfig.withDefault(homedir()))
      const skills = yield* workspaceSkills(service, dir, home)
      for (const problem of skills.problems) yield* Console.error(`logbook: skill skipped: ${problem}`)
      // masked with the keys `logbook run` would mask (toolSecrets of the same config)
      const redact = makeSecrets(toolSecrets(service)).redactText
      yield* Console.log(fullSystemPrompt(dir, loaded, { redact, base: withSkills(skills.skills) }))
      return
    }
    const masked = yield* service.masked
    const hooks = yield* hookEntries(service, dir, yield* approvedHooks(service, dir))
    for (const notice of hooks.notices) yield* Console.error(`logbook: ${notice}`)
    // the configured model's limits and prices (no key is read: only the settings)
    const resolved = service.config.model === undefined ? undefined : yield* resolveModel(service.config)
    const info =
      resolved === undefined
        ? undefined
        : yield* modelInfo(resolved, { at: new Date(yield* Clock.currentTimeMillis), originOf: service.originOf })
    // the plugin files a session here would load (or would not: a project's not approved)
    const plugins = yield* pluginEntries(service, dir)
    if (format === "json") {
      const out = {
        ...masked,
        instructions: instructionsJson(loaded),
        hooks: hooksJson(hooks.entries),
        pluginFiles: pluginRows(plugins.entries),
        ...(info === undefined ? {} : { modelInfo: modelInfoJson(info) })
      }
      yield* Console.log(JSON.stringify(out, null, 2))
      return
    }
    const style = yield* stdoutStyle
    const lines = renderText(masked, service.files, service.originOf, style, [
      ...instructionLines(loaded, style),
      ...hookLines(hooks.entries, style)
    ])
    if (info !== undefined && resolved !== undefined) {
      const keyPath = ["provider", resolved.providerId, "models", resolved.modelId]
      lines.push("", ...renderModelInfo(info, keyPath, service.originOf, style))
    }
    lines.push("", style.bold("plugins"))
    if (plugins.entries.length === 0)
      lines.push(style.dim("  none (.logbook/plugins/, the plugins directory beside your config)"))
    for (const row of pluginRows(plugins.entries))
      lines.push(`  ${row.plugin}  ${row.status}  ${style.dim(row.source)}`)
    for (const notice of plugins.notices) lines.push(`  ${style.yellow(notice)}`)
    yield* Console.log(lines.join("\n"))
  })
).pipe(
  Command.withDescription(
    "Print the resolved config (defaults < ~/.config/logbook/config.json < ./logbook.json < LOGBOOK_* < flags) " +
      "with secrets masked: for each provider, the name of its API key variable and whether it is set. For the " +
      "configured model, also its limits and prices and where each came from (the config or the model catalog)."
  )
)
