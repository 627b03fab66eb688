/**
 * The config's sources and how they become one config (the `Config` service is in Config.ts):
 * the built-in defaults, the global file, the project file, `LOGBOOK_*` environment variables and
 * flags; each source validated on its own (an error names the source, the key path and what was
 * expected), merged deeply with the origin of every value kept, resolved as `ResolvedConfig` and
 * checked across keys; and loading the files and the environment (`load`).
 */

import { homedir } from "node:os"
import * as NodePath from "node:path"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { ConfigProvider, Effect, Config as EffectConfig, Either, Option, ParseResult, Schema } from "effect"
import { editDistance } from "../domain/nearest.js"
import { PermissionRules } from "../tools/Permissions.js"
import type { SandboxMode } from "../tools/Sandbox.js"
import {
  type CommandHooks,
  ConfigInput,
  defaultApiKeyEnv,
  defaults,
  looksLikeSecret,
  type McpServerInput,
  type ProviderSettings,
  ResolvedConfig,
  showValue
} from "./ConfigSchema.js"
import type { TrustedSandbox } from "./ConfigTrust.js"
import { parseJsonc } from "./Jsonc.js"
import { isMcpEntryProblem, mcpServerSpec } from "./McpConfig.js"

/** Where a setting came from. */
export type ConfigSource =
  | { readonly _tag: "Defaults" }
  | { readonly _tag: "File"; readonly path: string }
  | { readonly _tag: "Env"; readonly name: string }
  | { readonly _tag: "Flag"; readonly name: string }
  /** a value given to the API directly (`resolveModel(config, name)`, `layerTest`) */
  | { readonly _tag: "Argument"; readonly name: string }

/** `the built-in defaults`, `file /p/logbook.json`, `environment variable LOGBOOK_MODEL`, `flag --model`. */
export const describeSource = (source: ConfigSource): string => {
  switch (source._tag) {
    case "Defaults":
      return "the built-in defaults"
    case "File":
      return `file ${source.path}`
    case "Env":
      return `environment variable ${source.name}`
    case "Flag":
      return `flag ${source.name}`
    case "Argument":
      return source.name
  }
}

/** One source's raw content, before validation. */
export interface RawSource {
  readonly source: ConfigSource
  readonly value: unknown
}

/** A config file that was looked for, and whether it exists. */
export interface ConfigFile {
  readonly kind: "global" | "project"
  readonly path: string
  readonly found: boolean
}

/**
 * The `LOGBOOK_*` environment variables and the keys they set. Empty variables are ignored.
 * Numbers are written as decimal digits (`LOGBOOK_MAX_STEPS=100`).
 */
export const envVars: ReadonlyArray<{ readonly name: string; readonly path: ReadonlyArray<string> }> = [
  { name: "LOGBOOK_MODEL", path: ["model"] },
  { name: "LOGBOOK_MAX_STEPS", path: ["maxSteps"] },
  { name: "LOGBOOK_SNAPSHOT_EVERY", path: ["snapshotEvery"] },
  { name: "LOGBOOK_RETRY_MAX_ATTEMPTS", path: ["retry", "maxAttempts"] },
  { name: "LOGBOOK_RETRY_INITIAL_DELAY_MS", path: ["retry", "initialDelayMs"] },
  { name: "LOGBOOK_RETRY_MAX_DELAY_MS", path: ["retry", "maxDelayMs"] },
  { name: "LOGBOOK_RETRY_MAX_RETRY_AFTER_MS", path: ["retry", "maxRetryAfterMs"] },
  { name: "LOGBOOK_RETRY_BUDGET_MS", path: ["retry", "budgetMs"] },
  { name: "LOGBOOK_BASH_TIMEOUT_MS", path: ["tools", "bash", "timeoutMs"] },
  { name: "LOGBOOK_BASH_MAX_TIMEOUT_MS", path: ["tools", "bash", "maxTimeoutMs"] },
  { name: "LOGBOOK_BASH_SANDBOX", path: ["tools", "bash", "sandbox"] }
]

// ---------------------------------------------------------------------------------------------
// errors

/**
 * A config that cannot be used. `message` is one sentence naming the source, the key path and
 * what was expected, e.g. `invalid config in file /p/logbook.json at provider.local.baseURL:
 * expected a URL starting with http:// or https://, got "localhost:11434"`.
 */
export class ConfigError extends Schema.TaggedError<ConfigError>()("ConfigError", {
  /** `describeSource` of the source at fault */
  source: Schema.String,
  /** the key path, e.g. `provider.local.baseURL`; absent for whole-file errors */
  path: Schema.optionalWith(Schema.String, { exact: true }),
  message: Schema.String
}) {}

const identifierKey = /^[A-Za-z_$][A-Za-z0-9_$-]*$/

/** `provider.local.baseURL`; keys that are not plain names in brackets: `models["gpt-4.1"]`. */
export const formatPath = (path: ReadonlyArray<PropertyKey>): string =>
  path
    .map((key, i) => {
      if (typeof key === "number") return `[${key}]`
      const text = String(key)
      if (identifierKey.test(text)) return i === 0 ? text : `.${text}`
      return `[${JSON.stringify(text)}]`
    })
    .join("")

const invalid = (source: ConfigSource, path: ReadonlyArray<PropertyKey>, reason: string): ConfigError => {
  const label = describeSource(source)
  const where = path.length === 0 ? "" : ` at ${formatPath(path)}`
  return new ConfigError({
    source: label,
    ...(path.length === 0 ? {} : { path: formatPath(path) }),
    message: `invalid config in ${label}${where}: ${reason}`
  })
}

// ---------------------------------------------------------------------------------------------
// validation of one source

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** Field names that would hold a secret itself rather than the name of a variable. */
const secretFieldNames = new Set([
  "apikey",
  "key",
  "secret",
  "secretkey",
  "token",
  "accesstoken",
  "authtoken",
  "bearertoken",
  "password",
  "authorization"
])

/** `mcpServers.<name>.env` and `.headers`: maps whose keys are names, not secrets. */
const isMcpMap = (path: ReadonlyArray<string>): boolean =>
  path.length === 3 && path[0] === "mcpServers" && (path[2] === "env" || path[2] === "headers")

/**
 * The path of the first key-like field (`apiKey`, `api_key`, `token` …) in a raw source; in an MCP
 * server's `env` and `headers`, of the first value that looks like a key itself (a `${NAME}`
 * reference is how such a value is given).
 */
export const findSecretField = (
  value: unknown,
  path: ReadonlyArray<string> = []
): ReadonlyArray<string> | undefined => {
  if (!isPlainObject(value)) return undefined
  if (isMcpMap(path)) {
    for (const [key, child] of Object.entries(value)) {
      if (typeof child !== "string" || child.includes("${")) continue
      if (looksLikeSecret(child) || looksLikeSecret(child.replace(/^(Bearer|Basic|token)\s+/i, "")))
        return [...path, key]
    }
    return undefined
  }
  for (const [key, child] of Object.entries(value)) {
    const here = [...path, key]
    if (secretFieldNames.has(key.toLowerCase().replace(/[-_]/g, ""))) return here
    const inner = findSecretField(child, here)
    if (inner !== undefined) return inner
  }
  return undefined
}

/** The reason for an `Unexpected` issue: an unknown key (with a suggestion) or an invalid record key. */
const unexpectedReason = (key: string, effectMessage: string): string => {
  const expectedText = effectMessage.replace(/^is unexpected, expected: /, "")
  const known = Array.from(expectedText.matchAll(/"((?:[^"\\]|\\.)*)"/g), (m) => m[1]!)
  if (!expectedText.startsWith('"') || known.length === 0) return `invalid key, expected ${expectedText}`
  const closest = known
    .map((name) => ({ name, distance: editDistance(key, name) }))
    .sort((x, y) => x.distance - y.distance)[0]
  if (closest !== undefined && closest.distance <= Math.max(2, Math.floor(key.length / 4))) {
    return `unknown key (did you mean "${closest.name}"?)`
  }
  return `unknown key; the known keys here are ${known.map((name) => `"${name}"`).join(", ")}`
}

const issueReason = (issue: ParseResult.ArrayFormatterIssue): string => {
  switch (issue._tag) {
    case "Unexpected":
      return unexpectedReason(String(issue.path[issue.path.length - 1] ?? ""), issue.message)
    case "Missing":
      return issue.message === "is missing" ? "is required" : issue.message
    default: {
      // a message without our annotation: "Expected <what>, actual <json>"; the value goes through showValue
      const match = /^Expected (.*), actual (.*)$/s.exec(issue.message)
      if (match === null) return issue.message
      let actual: unknown = match[2]
      try {
        actual = JSON.parse(match[2]!)
      } catch {}
      return `expected ${match[1]}, got ${showValue(actual)}`
    }
  }
}

/** The first problem of a parse error as a ConfigError, blaming `sourceOf(path)`. */
const fromParseError = (
  error: ParseResult.ParseError,
  sourceOf: (path: ReadonlyArray<PropertyKey>) => ConfigSource
): ConfigError => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const paths = new Set(issues.map((issue) => JSON.stringify(issue.path.map(String))))
  const first = issues[0]!
  const more = paths.size - 1
  const base = invalid(sourceOf(first.path), first.path, issueReason(first))
  if (more === 0) return base
  return new ConfigError({
    source: base.source,
    ...(base.path === undefined ? {} : { path: base.path }),
    message: `${base.message} (and ${more} more ${more === 1 ? "problem" : "problems"})`
  })
}

const parseOptions = { errors: "all", onExcessProperty: "error" } as const

/** Validates one source on its own: a JSON object of known keys, no literal secrets. */
export const validateSource = (raw: RawSource): Either.Either<ConfigInput, ConfigError> => {
  if (!isPlainObject(raw.value)) {
    return Either.left(invalid(raw.source, [], `expected a JSON object at the top level, got ${showValue(raw.value)}`))
  }
  const secret = findSecretField(raw.value)
  if (secret !== undefined) {
    return Either.left(
      invalid(
        raw.source,
        secret,
        secret[0] === "mcpServers"
          ? "API keys and other secrets must not be written in config; put the value in an environment variable " +
              // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${NAME} reference, as config files write it
              'and name it as "${NAME}" here, or give a bearer token\'s variable as "bearerTokenEnv"'
          : "API keys and other secrets must not be written in config; put the key in an environment variable " +
              'and name that variable with "apiKeyEnv" (e.g. "apiKeyEnv": "OPENAI_API_KEY")'
      )
    )
  }
  return Schema.decodeUnknownEither(ConfigInput)(raw.value, parseOptions).pipe(
    Either.mapLeft((error) => fromParseError(error, () => raw.source))
  )
}

// ---------------------------------------------------------------------------------------------
// merging with provenance

const pathKey = (path: ReadonlyArray<PropertyKey>): string => JSON.stringify(path.map(String))

const setOwn = (target: Record<string, unknown>, key: string, value: unknown): void => {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })
}

/** Deep-merges `source` into `target` (mutating it); records the source index of every path it sets. */
const mergeInto = (
  target: Record<string, unknown>,
  source: Record<string, unknown>,
  index: number,
  path: ReadonlyArray<string>,
  origins: Map<string, number>
): void => {
  for (const [key, value] of Object.entries(source)) {
    if (value === undefined) continue
    const here = [...path, key]
    origins.set(pathKey(here), index)
    let current = Object.hasOwn(target, key) ? target[key] : undefined
    // a provider given another `type` is another provider: it inherits nothing (no baseURL or
    // apiKeyEnv of the built-in or lower-precedence one it replaces)
    if (
      here.length === 2 &&
      here[0] === "provider" &&
      isPlainObject(value) &&
      isPlainObject(current) &&
      typeof value.type === "string" &&
      value.type !== current.type
    ) {
      const prefix = `${pathKey(here).slice(0, -1)},`
      for (const k of [...origins.keys()]) if (k.startsWith(prefix)) origins.delete(k)
      current = undefined
    }
    if (isPlainObject(value)) {
      const next: Record<string, unknown> = isPlainObject(current) ? current : {}
      if (next !== current) setOwn(target, key, next)
      mergeInto(next, value, index, here, origins)
    } else {
      setOwn(target, key, value)
      // a replaced object: its old leaves no longer exist
      if (isPlainObject(current)) {
        const prefix = pathKey(here).slice(0, -1)
        for (const k of [...origins.keys()]) if (k.startsWith(`${prefix},`)) origins.delete(k)
      }
    }
  }
}

/** Every leaf path of a plain JSON value (objects are walked, everything else is a leaf). */
const leaves = (value: unknown, path: ReadonlyArray<string> = []): Array<[ReadonlyArray<string>, unknown]> =>
  isPlainObject(value)
    ? Object.entries(value).flatMap(([key, child]) => leaves(child, [...path, key]))
    : [[path, value]]

/** `maxSteps` -> `--max-steps`, `retry.maxAttempts` -> `--retry-max-attempts`. */
export const flagName = (path: ReadonlyArray<string>): string =>
  `--${path.map((key) => key.replace(/([a-z0-9])([A-Z])/g, "$1-$2").toLowerCase()).join("-")}`

/** One source per set leaf of a flags object, each labelled with its flag name. */
export const flagSources = (flags: ConfigInput | undefined): ReadonlyArray<RawSource> =>
  flags === undefined
    ? []
    : leaves(flags)
        .filter(([path, value]) => value !== undefined && path.length > 0)
        .map(([path, value]) => ({ source: { _tag: "Flag", name: flagName(path) }, value: nest(path, value) }))

const nest = (path: ReadonlyArray<string>, value: unknown): unknown =>
  path.reduceRight<unknown>((inner, key) => {
    const out: Record<string, unknown> = {}
    setOwn(out, key, inner)
    return out
  }, value)

/** One source per set `LOGBOOK_*` variable; digits become numbers. */
export const envSources = (env: (name: string) => string | undefined): ReadonlyArray<RawSource> =>
  envVars.flatMap(({ name, path }) => {
    const text = env(name)
    if (text === undefined || text.trim() === "") return []
    const trimmed = text.trim()
    const value = path[0] === "model" || !/^-?\d+(\.\d+)?$/.test(trimmed) ? trimmed : Number(trimmed)
    return [{ source: { _tag: "Env", name } satisfies ConfigSource, value: nest(path, value) }]
  })

// ---------------------------------------------------------------------------------------------
// resolving

/** A resolved config and where each of its values came from. */
export interface LoadedConfig {
  readonly config: ResolvedConfig
  /**
   * The `permission` rules of every source but the project file (`logbook.json` of the workspace,
   * which comes with the repository, from whoever wrote it): the rules the user set. The agent never
   * decides looser than these (`ActionsOptions.permissionLimit`), so a project file can tighten the
   * rules but not loosen them. `{}` when no such source sets any.
   */
  readonly trustedPermission: PermissionRules
  /**
   * The providers as every source but the project file defines them (with the built-in ones). An
   * API key is only sent where these say: a provider whose `type`, `baseURL` or `apiKeyEnv` the
   * project file changed (or defined) may be used without a key, never with one
   * (`ConfigService.resolveModel` refuses it).
   */
  readonly trustedProviders: Readonly<Record<string, ProviderSettings>>
  /**
   * `tools.bash.passEnv` as every source but the project file sets it: the API key variables the
   * agent's commands may see. A project file cannot hand your keys to the commands a model runs.
   */
  readonly trustedPassEnv: ReadonlyArray<string>
  /**
   * The sandbox settings (`tools.bash.sandbox`, `network`, `writablePaths`, `hiddenPaths`) as every
   * source but the project file sets them (the defaults where none does): a project file may make
   * the sandbox stricter, never looser (`sandboxSettings`).
   */
  readonly trustedSandbox: TrustedSandbox
  /**
   * The MCP servers the project file declares (its `mcpServers`), kept out of `config.mcpServers`:
   * a server a repository brings is not started from here (docs/mcp.md).
   */
  readonly projectMcpServers: Readonly<Record<string, McpServerInput>>
  /**
   * The command hooks the project file declares (its `hooks`), kept out of `config.hooks`: a hook
   * a repository brings runs only once the user approved it (docs/hooks.md).
   */
  readonly projectHooks: CommandHooks
  /**
   * The plugins the project file names (its `plugins`), kept out of `config.plugins`: a plugin a
   * repository brings loads only once approved (docs/plugins.md).
   */
  readonly projectPlugins: ReadonlyArray<string>
  /** the config files that were looked for, lowest precedence first */
  readonly files: ReadonlyArray<ConfigFile>
  /** the source of the value at `path` (of the nearest enclosing object for a path not set) */
  readonly originOf: (path: ReadonlyArray<string>) => ConfigSource
}

const originLookup =
  (sources: ReadonlyArray<ConfigSource>, origins: ReadonlyMap<string, number>) =>
  (path: ReadonlyArray<PropertyKey>): ConfigSource => {
    for (let n = path.length; n > 0; n--) {
      const index = origins.get(pathKey(path.slice(0, n)))
      if (index !== undefined) return sources[index]!
    }
    return sources[0]!
  }

/** The source index of a path (for comparing precedence). */
const rankOf = (origins: ReadonlyMap<string, number>, path: ReadonlyArray<string>): number => {
  for (let n = path.length; n > 0; n--) {
    const index = origins.get(pathKey(path.slice(0, n)))
    if (index !== undefined) return index
  }
  return 0
}

/** `a ≤ b` across two keys: blames whichever was set by the higher-precedence source. */
const checkOrder = (
  config: Record<string, unknown>,
  sources: ReadonlyArray<ConfigSource>,
  origins: ReadonlyMap<string, number>,
  small: ReadonlyArray<string>,
  large: ReadonlyArray<string>
): ConfigError | undefined => {
  const get = (path: ReadonlyArray<string>) =>
    path.reduce<unknown>((value, key) => (isPlainObject(value) ? value[key] : undefined), config) as number
  const a = get(small)
  const b = get(large)
  if (a <= b) return undefined
  const note = (path: ReadonlyArray<string>, value: number) => {
    const source = sources[rankOf(origins, path)]!
    return `${formatPath(path)} (${value}${source._tag === "Defaults" ? ", the default" : `, from ${describeSource(source)}`})`
  }
  return rankOf(origins, small) >= rankOf(origins, large)
    ? invalid(sources[rankOf(origins, small)]!, small, `expected at most ${note(large, b)}, got ${a}`)
    : invalid(sources[rankOf(origins, large)]!, large, `expected at least ${note(small, a)}, got ${b}`)
}

/**
 * Validates and merges sources given lowest precedence first (the built-in defaults are added
 * below them). Pure: the files and variables are read by `load`.
 */
export const resolveSources = (
  raw: ReadonlyArray<RawSource>,
  files: ReadonlyArray<ConfigFile> = []
): Either.Either<LoadedConfig, ConfigError> => {
  const sources: Array<ConfigSource> = [{ _tag: "Defaults" }]
  const merged: Record<string, unknown> = {}
  const origins = new Map<string, number>()
  mergeInto(merged, structuredClone(defaults) as Record<string, unknown>, 0, [], origins)
  const projectFile = files.find((file) => file.kind === "project")?.path
  const trusted: Record<string, unknown> = {}
  let trustedPassEnv: ReadonlyArray<string> = []
  const trustedSandbox: {
    sandbox: SandboxMode
    network: boolean
    writablePaths: ReadonlyArray<string>
    hiddenPaths: ReadonlyArray<string>
  } = { ...defaults.tools.bash }
  let projectMcpServers: Readonly<Record<string, McpServerInput>> = {}
  let projectHooks: CommandHooks = {}
  let projectPlugins: ReadonlyArray<string> = []
  for (const item of raw) {
    const valid = validateSource(item)
    if (Either.isLeft(valid)) return Either.left(valid.left)
    const { $schema: _, ...all } = valid.right
    const fromProject = item.source._tag === "File" && item.source.path === projectFile
    const { mcpServers: projectServers, plugins: projectPluginList, hooks: hooksOfProject, ...withoutMcp } = all
    if (fromProject && projectServers !== undefined) projectMcpServers = projectServers
    if (fromProject && projectPluginList !== undefined) projectPlugins = projectPluginList
    // a project's command hooks are kept apart; its hook settings merge like any other
    const { timeoutMs: hookTimeoutMs, ...projectEvents } = hooksOfProject ?? {}
    if (fromProject && hooksOfProject !== undefined) projectHooks = projectEvents
    const projectRest =
      hookTimeoutMs === undefined ? withoutMcp : { ...withoutMcp, hooks: { timeoutMs: hookTimeoutMs } }
    const rest = fromProject ? projectRest : all
    sources.push(item.source)
    mergeInto(merged, rest as Record<string, unknown>, sources.length - 1, [], origins)
    if (!fromProject && rest.permission !== undefined) {
      mergeInto(trusted, { permission: structuredClone(rest.permission) }, 0, [], new Map())
    }
    if (!fromProject && rest.tools?.bash?.passEnv !== undefined) trustedPassEnv = rest.tools.bash.passEnv
    const bash = fromProject ? undefined : rest.tools?.bash
    if (bash?.sandbox !== undefined) trustedSandbox.sandbox = bash.sandbox
    if (bash?.network !== undefined) trustedSandbox.network = bash.network
    if (bash?.writablePaths !== undefined) trustedSandbox.writablePaths = bash.writablePaths
    if (bash?.hiddenPaths !== undefined) trustedSandbox.hiddenPaths = bash.hiddenPaths
  }
  const originOf = originLookup(sources, origins)
  const decoded = Schema.decodeUnknownEither(ResolvedConfig)(merged, parseOptions)
  if (Either.isLeft(decoded)) return Either.left(fromParseError(decoded.left, originOf))
  const config = fillApiKeyEnv(decoded.right)

  // checks across keys
  if (config.model !== undefined) {
    const providerId = config.model.slice(0, config.model.indexOf("/"))
    if (!Object.hasOwn(config.provider, providerId)) {
      return Either.left(
        invalid(
          originOf(["model"]),
          ["model"],
          `provider "${providerId}" is not configured; add "provider": { "${providerId}": { … } } or use one of ` +
            `${Object.keys(config.provider)
              .sort()
              .map((id) => `"${id}/…"`)
              .join(", ")}`
        )
      )
    }
  }
  for (const [id, provider] of Object.entries(config.provider)) {
    if (provider.type === "openai-compatible" && provider.baseURL === undefined) {
      return Either.left(
        invalid(
          originOf(["provider", id]),
          ["provider", id, "baseURL"],
          'is required for an openai-compatible provider: the server\'s URL, e.g. "http://localhost:11434/v1"'
        )
      )
    }
  }
  for (const [name, entry] of Object.entries(config.mcpServers)) {
    const spec = mcpServerSpec(entry)
    if (isMcpEntryProblem(spec)) {
      const path = ["mcpServers", name, ...spec.key]
      return Either.left(invalid(originOf(path), path, spec.reason))
    }
  }
  const order =
    checkOrder(merged, sources, origins, ["tools", "bash", "timeoutMs"], ["tools", "bash", "maxTimeoutMs"]) ??
    checkOrder(merged, sources, origins, ["retry", "initialDelayMs"], ["retry", "maxDelayMs"])
  if (order !== undefined) return Either.left(order)

  const trustedPermission = Schema.decodeUnknownSync(PermissionRules)(trusted.permission ?? {})
  return Either.right({
    config,
    trustedPermission,
    trustedProviders: trustedProvidersOf(raw, projectFile, config),
    trustedPassEnv,
    trustedSandbox: {
      sandbox: trustedSandbox.sandbox,
      network: trustedSandbox.network,
      writablePaths: trustedSandbox.writablePaths,
      hiddenPaths: trustedSandbox.hiddenPaths
    },
    projectMcpServers,
    projectHooks,
    projectPlugins,
    files,
    originOf: (path) => originOf(path)
  })
}

/**
 * The providers without the project file's say (see `LoadedConfig.trustedProviders`): `config`'s
 * own when the project file sets no `provider`.
 */
const trustedProvidersOf = (
  raw: ReadonlyArray<RawSource>,
  projectFile: string | undefined,
  config: ResolvedConfig
): Readonly<Record<string, ProviderSettings>> => {
  const fromProject = (item: RawSource) => item.source._tag === "File" && item.source.path === projectFile
  const project = raw.find(fromProject)
  if (project === undefined || !isPlainObject(project.value) || project.value.provider === undefined) {
    return config.provider
  }
  const others = raw.flatMap((item) =>
    !fromProject(item) && isPlainObject(item.value) && item.value.provider !== undefined
      ? [{ source: item.source, value: { provider: item.value.provider } }]
      : []
  )
  const resolved = resolveSources(others)
  if (Either.isRight(resolved)) return resolved.right.config.provider
  // what the other sources say cannot stand on its own (a provider the project file completes):
  // only the built-in providers are trusted then
  const builtIn = resolveSources([])
  return Either.isRight(builtIn) ? builtIn.right.config.provider : {}
}

/** `apiKeyEnv` defaults to OPENAI_API_KEY for type openai and ANTHROPIC_API_KEY for anthropic. */
const fillApiKeyEnv = (config: ResolvedConfig): ResolvedConfig => {
  const provider: Record<string, ProviderSettings> = {}
  for (const [id, settings] of Object.entries(config.provider)) {
    const fallback = defaultApiKeyEnv[settings.type]
    setOwn(
      provider,
      id,
      settings.apiKeyEnv === undefined && fallback !== undefined ? { ...settings, apiKeyEnv: fallback } : settings
    )
  }
  return { ...config, provider }
}

// ---------------------------------------------------------------------------------------------
// loading files and the environment

/** Options of `load` and `Config.layer`. */
export interface LoadOptions {
  /** the directory whose `logbook.json` is the project config; default: the process's cwd */
  readonly cwd?: string
  /** settings from flags: the highest precedence */
  readonly flags?: ConfigInput
  /** environment variables to read instead of the current `ConfigProvider` (tests) */
  readonly env?: Readonly<Record<string, string | undefined>>
}

/** The current ConfigProvider, or one over `env` when given. */
export const providerFor = (env: LoadOptions["env"]): Effect.Effect<ConfigProvider.ConfigProvider> =>
  env === undefined
    ? Effect.configProviderWith(Effect.succeed)
    : Effect.succeed(
        ConfigProvider.fromMap(
          new Map(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined))
        )
      )

export const readVar = (provider: ConfigProvider.ConfigProvider, name: string): Effect.Effect<string | undefined> =>
  EffectConfig.string(name).pipe(
    EffectConfig.option,
    Effect.map(Option.getOrUndefined),
    Effect.withConfigProvider(provider),
    Effect.orElseSucceed(() => undefined)
  )

/** The global config file: `$XDG_CONFIG_HOME/logbook/config.json`, else `~/.config/logbook/config.json`. */
export const globalConfigPath = (
  path: Path.Path,
  env: { readonly xdgConfigHome?: string | undefined; readonly home: string }
): string => {
  const xdg = env.xdgConfigHome
  const base = xdg !== undefined && xdg !== "" && path.isAbsolute(xdg) ? xdg : path.join(env.home, ".config")
  return path.join(base, "logbook", "config.json")
}

/**
 * The user's own instructions file (AGENTS.md, docs/prompt.md): beside the global config file, so
 * `$XDG_CONFIG_HOME/logbook/AGENTS.md`, else `~/.config/logbook/AGENTS.md`. Undefined when no
 * global file was looked for (`Config.layerTest`).
 */
export const userInstructionsFile = (loaded: Pick<LoadedConfig, "files">): string | undefined => {
  const global = loaded.files.find((file) => file.kind === "global")
  return global === undefined ? undefined : NodePath.join(NodePath.dirname(global.path), "AGENTS.md")
}

const readReason = (error: unknown): string => {
  if (typeof error === "object" && error !== null && "reason" in error) {
    const reason = (error as { reason: string }).reason
    if (reason === "PermissionDenied") return "permission denied"
    if (reason === "BadResource") return "it is not a regular file"
  }
  const message = error instanceof Error ? error.message : String(error)
  return /EISDIR/.test(message) ? "it is a directory, not a file" : message
}

/** Reads one config file: `undefined` when it does not exist. */
const readFile = (fs: FileSystem.FileSystem, file: string): Effect.Effect<RawSource | undefined, ConfigError> => {
  const source: ConfigSource = { _tag: "File", path: file }
  const unreadable = (reason: string) =>
    new ConfigError({ source: describeSource(source), message: `cannot read the config file ${file}: ${reason}` })
  return fs.readFileString(file).pipe(
    Effect.map(Option.some),
    Effect.catchTags({
      SystemError: (error) =>
        error.reason === "NotFound"
          ? Effect.succeed(Option.none<string>())
          : Effect.fail(unreadable(readReason(error))),
      BadArgument: (error) => Effect.fail(unreadable(error.message))
    }),
    Effect.flatMap(
      Option.match({
        onNone: () => Effect.succeed(undefined),
        onSome: (text: string): Effect.Effect<RawSource | undefined, ConfigError> => {
          const parsed = parseJsonc(text)
          if (Either.isRight(parsed)) return Effect.succeed<RawSource>({ source, value: parsed.right })
          const { column, line, message } = parsed.left
          return Effect.fail(
            new ConfigError({
              source: describeSource(source),
              message: `invalid config: ${describeSource(source)} is not valid JSON: ${message} at line ${line}, column ${column}`
            })
          )
        }
      })
    )
  )
}

/** Reads the files and variables and resolves the config. */
export const load = Effect.fn("Config.load")(function* (options: LoadOptions = {}) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const provider = yield* providerFor(options.env)
  const home = (yield* readVar(provider, "HOME")) ?? homedir()
  const xdgConfigHome = yield* readVar(provider, "XDG_CONFIG_HOME")
  const globalFile = globalConfigPath(path, { xdgConfigHome, home })
  const projectFile = path.join(path.resolve(options.cwd ?? "."), "logbook.json")
  const globalRaw = yield* readFile(fs, globalFile)
  const projectRaw = projectFile === globalFile ? undefined : yield* readFile(fs, projectFile)
  const envValues = new Map<string, string | undefined>()
  for (const { name } of envVars) envValues.set(name, yield* readVar(provider, name))
  const raw: Array<RawSource> = [
    ...(globalRaw === undefined ? [] : [globalRaw]),
    ...(projectRaw === undefined ? [] : [projectRaw]),
    ...envSources((name) => envValues.get(name)),
    ...flagSources(options.flags)
  ]
  const files: ReadonlyArray<ConfigFile> = [
    { kind: "global", path: globalFile, found: globalRaw !== undefined },
    { kind: "project", path: projectFile, found: projectRaw !== undefined }
  ]
  return yield* resolveSources(raw, files)
})
