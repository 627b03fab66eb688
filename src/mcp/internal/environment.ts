/**
 * What an MCP server is given of logbook's environment: a minimal base (the variables a program
 * needs to run: PATH, HOME, the locale …) and what its entry names, with `${NAME}` references
 * filled from logbook's environment. Nothing else: never a provider's key or another secret.
 */

/** The variables every stdio server gets from logbook's environment (when set). */
export const BASE_VARIABLES: ReadonlyArray<string> = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "TERM",
  "LANG",
  "LC_ALL",
  "LC_CTYPE",
  "TZ",
  "TMPDIR"
]

export type Environment = Readonly<Record<string, string | undefined>>

const reference = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g

/** `text` with each `${NAME}` (or `${NAME:-default}`) filled from `env`; the names that are not set and have no default. */
export const expand = (
  text: string,
  env: Environment
): { readonly value: string; readonly missing: ReadonlyArray<string> } => {
  const missing: Array<string> = []
  const value = text.replace(reference, (_, name: string, fallback: string | undefined) => {
    const found = env[name]
    if (found !== undefined && found !== "") return found
    if (fallback !== undefined) return fallback
    missing.push(name)
    return ""
  })
  return { value, missing }
}

/** Each value of `map` expanded; the names that are not set. */
export const expandAll = (
  map: Readonly<Record<string, string>>,
  env: Environment
): { readonly values: Record<string, string>; readonly missing: ReadonlyArray<string> } => {
  const values: Record<string, string> = {}
  const missing = new Set<string>()
  for (const [key, text] of Object.entries(map)) {
    const expanded = expand(text, env)
    values[key] = expanded.value
    for (const name of expanded.missing) missing.add(name)
  }
  return { values, missing: [...missing] }
}

/** The environment of a stdio server: the base variables that are set, then its own. */
export const serverEnvironment = (own: Readonly<Record<string, string>>, env: Environment): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const name of BASE_VARIABLES) {
    const value = env[name]
    // a shell function exported in a variable is not passed on
    if (value !== undefined && !value.startsWith("()")) out[name] = value
  }
  return { ...out, ...own }
}
