/**
 * `logbook plugins`: the plugin files of the user and of the project (docs/plugins.md). `list`
 * shows each with where it came from and whether it loads; `approve` lets a plugin a project brings
 * load in this workspace, pinned to the file as it is now (its SHA-256).
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import { Console, Effect } from "effect"
import { Config } from "../config/Config.js"
import { approvePlugin, type PluginEntry, pluginEntries } from "../config/PluginTrust.js"
import { CliError } from "./errors.js"
import { cwdOption, formatOption, resolveCwd } from "./options.js"
import { stdoutStyle, table } from "./render.js"

const cwd = cwdOption("The workspace whose project plugins (.logbook/plugins, logbook.json) to include.")
const fileArg = Args.text({ name: "plugin" }).pipe(
  Args.withDescription("The plugin file as `logbook plugins list` names it (.logbook/plugins/guard.js), or its path.")
)

const loadConfig = (dir: string) => Effect.provide(Config, Config.layer({ cwd: dir }))

const status = (entry: PluginEntry): string =>
  !entry.approved ? "not approved" : entry.scope === "project" ? "approved" : "loads"

/** The plugins `logbook config` and `logbook plugins list` show: each file, whether it loads, and where it came from. */
export const pluginRows = (entries: ReadonlyArray<PluginEntry>) =>
  entries.map((e) => ({ plugin: e.key, status: status(e), scope: e.scope, source: e.source, hash: e.hash }))

const pluginsList = Command.make(
  "list",
  { cwd, format: formatOption(["text", "json"], "text: a table; json: one object per plugin file.") },
  Effect.fn("cli.plugins.list")(function* ({ cwd, format }) {
    const dir = yield* resolveCwd(cwd)
    const config = yield* loadConfig(dir)
    const { entries, notices } = yield* pluginEntries(config, dir)
    for (const notice of notices) yield* Console.error(`logbook: ${notice}`)
    if (format === "json") {
      yield* Console.log(JSON.stringify(pluginRows(entries), null, 2))
      return
    }
    if (entries.length === 0) {
      yield* Console.log("No plugins. Put one in .logbook/plugins/ or in the plugins directory beside your config.")
      return
    }
    const style = yield* stdoutStyle
    const rows = pluginRows(entries).map((row) => [row.plugin, row.status, style.dim(row.source)])
    yield* Console.log(table(["PLUGIN", "STATUS", "FROM"], rows, style).join("\n"))
    if (entries.some((e) => !e.approved)) {
      yield* Console.log(
        "\nA plugin a project brings loads only once you approved it: read it, then `logbook plugins approve <plugin>`."
      )
    }
  })
).pipe(
  Command.withDescription(
    "List the plugin files of your plugins directory and config, and of the project (.logbook/plugins, " +
      "logbook.json): whether each loads (a project's only once approved) and where it came from.\n" +
      "Example: logbook plugins list --cwd ~/src/app"
  )
)

const pluginsApprove = Command.make(
  "approve",
  { plugin: fileArg, cwd },
  Effect.fn("cli.plugins.approve")(function* ({ plugin, cwd }) {
    const dir = yield* resolveCwd(cwd)
    const config = yield* loadConfig(dir)
    const { entries } = yield* pluginEntries(config, dir)
    const entry = entries.find((e) => e.key === plugin || e.file === plugin || e.file.endsWith(`/${plugin}`))
    if (entry === undefined) {
      const known = entries.map((e) => e.key)
      return yield* CliError.usage(
        `no plugin "${plugin}" for ${dir}` + (known.length === 0 ? "" : ` (plugins: ${known.join(", ")})`)
      )
    }
    if (entry.scope === "user") {
      yield* Console.log(`Plugin ${entry.key} is your own (${entry.source}): it needs no approval.`)
      return
    }
    const file = yield* approvePlugin(config, dir, entry).pipe(
      Effect.catchAll((error) => CliError.failed(`could not record the approval: ${error.message}`))
    )
    yield* Console.log(
      `Approved plugin ${entry.key} of ${entry.source} for ${dir}, as it is now (sha256 ${entry.hash}).\n` +
        `(recorded in ${file}; if the file changes, it must be approved again)`
    )
  })
).pipe(
  Command.withDescription(
    "Let a plugin a project brings (.logbook/plugins, its logbook.json) load in this workspace: the file as it " +
      "is now is approved; a changed one is not.\nExample: logbook plugins approve .logbook/plugins/guard.js"
  )
)

export const plugins = Command.make("plugins", {}, () =>
  Console.log("Usage: logbook plugins list | approve <plugin>  (see `logbook plugins --help`)")
).pipe(
  Command.withDescription(
    "The plugins that add hooks and tools to the agent: list them, approve one a project brings. See docs/plugins.md."
  ),
  Command.withSubcommands([pluginsList, pluginsApprove])
)
