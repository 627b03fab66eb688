/**
 * The built-in tools (DESIGN §6), in the order the model is told about them.
 */
import { type BashSettings, makeBash } from "./bash.js"
import { edit } from "./edit.js"
import { glob } from "./glob.js"
import { grep } from "./grep.js"
import { list } from "./list.js"
import { read } from "./read.js"
import type { AnyTool } from "./Tools.js"
import { todo } from "./todo.js"
import { write } from "./write.js"

export interface BuiltinSettings {
  readonly bash: BashSettings
}

/** The built-in tools, with the settings that come from config. */
export const builtinTools = (settings: BuiltinSettings): ReadonlyArray<AnyTool> => [
  read,
  list,
  glob,
  grep,
  write,
  edit,
  makeBash(settings.bash),
  todo
]
