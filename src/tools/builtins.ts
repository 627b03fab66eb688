/**
 * The built-in tools, in the order the model is told about them. `write`, `edit`, `glob`, `grep`
 * and `todo` (DESIGN §6) join this list as they are written.
 */
import { type BashSettings, makeBash } from "./bash.js"
import { list } from "./list.js"
import { read } from "./read.js"
import type { AnyTool } from "./Tools.js"

export interface BuiltinSettings {
  readonly bash: BashSettings
}

/** The built-in tools, with the settings that come from config. */
export const builtinTools = (settings: BuiltinSettings): ReadonlyArray<AnyTool> => [read, list, makeBash(settings.bash)]
