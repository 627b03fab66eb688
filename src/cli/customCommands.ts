/**
 * The custom commands of a directory (`config/CustomCommands.ts`) as the CLI reads them: the
 * project's folders under `cwd`, the user's beside the global config file and under `~/.claude`.
 */
import { homedir } from "node:os"
import * as Path from "@effect/platform/Path"
import { Effect } from "effect"
import { globalConfigPath } from "../config/ConfigSources.js"
import { commandDirs, loadCommands } from "../config/CustomCommands.js"

/** The interactive session's own commands: a file cannot take their names. */
export const BUILT_IN_COMMANDS = [
  "help",
  "?",
  "quit",
  "exit",
  "new",
  "sessions",
  "model",
  "compact",
  "audit",
  "events",
  "skills",
  "mcp",
  "mcp-resource"
]

export const customCommandsOf = Effect.fn("cli.customCommands")(function* (cwd: string) {
  const path = yield* Path.Path
  const home = process.env.HOME !== undefined && process.env.HOME !== "" ? process.env.HOME : homedir()
  const configDir = path.dirname(globalConfigPath(path, { xdgConfigHome: process.env.XDG_CONFIG_HOME, home }))
  return yield* loadCommands(commandDirs(path, { cwd, home, configDir }), BUILT_IN_COMMANDS)
})
