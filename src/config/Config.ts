/**
 * The `Config` service (DESIGN §9): settings from, lowest to highest precedence,
 *
 * 1. the built-in `defaults`,
 * 2. the global file `$XDG_CONFIG_HOME/logbook/config.json` (`~/.config/logbook/config.json` when
 *    XDG_CONFIG_HOME is unset, empty or relative),
 * 3. the project file `logbook.json` in the working directory,
 * 4. `LOGBOOK_*` environment variables (`envVars`),
 * 5. flags (a partial config from the CLI).
 *
 * Files are JSON with comments and trailing commas (`Jsonc.ts`). Objects merge deeply; arrays and
 * other values replace. Each source is validated on its own against `ConfigInput` before the merge,
 * so an error names the source that holds the bad value (`file …`, `environment variable …`,
 * `flag …`), the key path and what was expected. The merged result is decoded as `ResolvedConfig`
 * and checked across keys (a timeout above its maximum, a model whose provider is not configured);
 * each resolved value remembers the source it came from (`originOf`).
 *
 * API keys are never part of the config: a provider names the environment variable that holds its
 * key (`apiKeyEnv`), a key-like field such as `apiKey` is refused, and the key is read only when
 * a model is resolved (`resolveModel(...).apiKey`), as a `Redacted` value.
 *
 * Environment variables are read through Effect's `ConfigProvider` (or an `env` record given to
 * `load` / `layer`), so tests never touch `process.env`.
 *
 * This module is the service and the models' keys; the sources and their merge are in
 * ConfigSources.ts, what a project file may not decide in ConfigTrust.ts, the display in
 * ConfigDisplay.ts (all re-exported here, as the library's `Config` has them).
 */

import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import { type ConfigProvider, Context, Effect, Config as EffectConfig, Layer, Option, Redacted } from "effect"
import type { MaskedConfig } from "./ConfigDisplay.js"
import { maskConfig } from "./ConfigDisplay.js"
import {
  type ConfigInput,
  type ModelSettings,
  type ProviderSettings,
  type ResolvedConfig,
  showValue
} from "./ConfigSchema.js"
import type { LoadedConfig, LoadOptions } from "./ConfigSources.js"
import { ConfigError, load, providerFor, readVar, resolveSources } from "./ConfigSources.js"
import { checkDestination } from "./ConfigTrust.js"

// the config's parts, as the library's `Config` has them (helpers of the service stay internal)
export * from "./ConfigDisplay.js"
export * from "./ConfigSchema.js"
export {
  ConfigError,
  type ConfigFile,
  type ConfigSource,
  describeSource,
  envSources,
  envVars,
  findSecretField,
  flagName,
  flagSources,
  formatPath,
  globalConfigPath,
  type LoadedConfig,
  type LoadOptions,
  load,
  type RawSource,
  resolveSources,
  userInstructionsFile,
  validateSource
} from "./ConfigSources.js"
export { isLoopbackUrl, sandboxSettings, type TrustedSandbox, toolSecrets } from "./ConfigTrust.js"

// ---------------------------------------------------------------------------------------------
// models and keys

/** A model of the config, ready for `Model.layerAiSdk`. */
export interface ResolvedModel {
  /** `provider/model` */
  readonly ref: string
  readonly providerId: string
  readonly modelId: string
  /** the provider's settings (`apiKeyEnv` filled in for openai and anthropic) */
  readonly provider: ProviderSettings
  /** `provider.<id>.models.<modelId>`, or `{}` when the config says nothing about the model */
  readonly model: ModelSettings
  /**
   * The API key, read from the variable named by `apiKeyEnv` when this runs; `None` when the
   * provider has no `apiKeyEnv` (a local server). A missing or empty variable is a ConfigError that
   * names the variable. The value is `Redacted`: it prints as `<redacted>`.
   */
  readonly apiKey: Effect.Effect<Option.Option<Redacted.Redacted<string>>, ConfigError>
}

/** Reads the key variable through `provider` (the current ConfigProvider when absent). */
const readApiKey = (
  providerId: string,
  name: string,
  provider: ConfigProvider.ConfigProvider | undefined
): Effect.Effect<Option.Option<Redacted.Redacted<string>>, ConfigError> => {
  const read = EffectConfig.redacted(name).pipe(
    EffectConfig.option,
    Effect.orElseSucceed(() => Option.none<Redacted.Redacted<string>>())
  )
  return (provider === undefined ? read : Effect.withConfigProvider(read, provider)).pipe(
    Effect.flatMap((value) =>
      // the only place a key is looked at: to refuse an empty variable
      Option.isSome(value) && Redacted.value(value.value).trim() !== ""
        ? Effect.succeed(value)
        : Effect.fail(
            new ConfigError({
              source: `environment variable ${name}`,
              path: `provider.${providerId}.apiKeyEnv`,
              message:
                `the environment variable ${name} is not set: provider "${providerId}" reads its API key from it ` +
                `(provider.${providerId}.apiKeyEnv); set it to your API key`
            })
          )
    )
  )
}

/**
 * Resolves `name` (default: the config's `model`) to its provider and settings. Fails when no
 * model is configured, when `name` is not `provider/model`, or when its provider is not configured.
 */
export const resolveModel = (
  config: ResolvedConfig,
  name?: string,
  options: { readonly provider?: ConfigProvider.ConfigProvider } = {}
): Effect.Effect<ResolvedModel, ConfigError> =>
  Effect.gen(function* () {
    const ref = name ?? config.model
    const source = name === undefined ? "the config" : "the requested model"
    if (ref === undefined) {
      return yield* new ConfigError({
        source,
        message:
          'no model is configured: set "model" (as "provider/model", e.g. "openai/gpt-4o") in logbook.json or ' +
          "~/.config/logbook/config.json, or set LOGBOOK_MODEL, or pass --model"
      })
    }
    const slash = ref.indexOf("/")
    if (slash <= 0 || slash === ref.length - 1) {
      return yield* new ConfigError({
        source,
        message: `the model ${showValue(ref)} must be written as "provider/model", e.g. "openai/gpt-4o"`
      })
    }
    const providerId = ref.slice(0, slash)
    const modelId = ref.slice(slash + 1)
    const provider = Object.hasOwn(config.provider, providerId) ? config.provider[providerId] : undefined
    if (provider === undefined) {
      return yield* new ConfigError({
        source,
        message:
          `the model "${ref}" names provider "${providerId}", which is not configured; configured providers: ` +
          Object.keys(config.provider).sort().join(", ")
      })
    }
    const model = Object.hasOwn(provider.models, modelId) ? provider.models[modelId]! : {}
    const apiKeyEnv = provider.apiKeyEnv
    return {
      ref,
      providerId,
      modelId,
      provider,
      model,
      apiKey:
        apiKeyEnv === undefined ? Effect.succeed(Option.none()) : readApiKey(providerId, apiKeyEnv, options.provider)
    }
  })

// ---------------------------------------------------------------------------------------------
// the service

export interface ConfigService extends LoadedConfig {
  /** `resolveModel` with the key read from the environment the layer was built in */
  readonly resolveModel: (name?: string) => Effect.Effect<ResolvedModel, ConfigError>
  /** `maskConfig` with each key variable looked up (set or not) */
  readonly masked: Effect.Effect<MaskedConfig>
}

/**
 * What the agent must keep from its tools (`Secrets`): the key variable of every provider the user's
 * config defines (with the built-in ones; not the project file's), hidden from commands unless `tools.bash.passEnv`
 * passes it — as the user's own config says (`trustedPassEnv`): the project file may pass fewer, not
 * more. `ignoredPass`: what the project file asked to pass and may not.
 */
/** The sandbox settings of the user's own sources (see `LoadedConfig.trustedSandbox`). */
/** `~` and `~/…` under `home`; other paths as they are. */
/**
 * The sandbox of the agent's commands, as the user's own config allows (`trustedSandbox`): the
 * project file may make it stricter — `"on"` over `"auto"` over `"off"`, the network off, fewer
 * writable paths, more hidden ones — never looser. `ignored`: what the project file asked for and
 * may not (for a notice). Paths under `~` are expanded with `home`.
 */
/** Whether a base URL is on this machine: `localhost`, `127.0.0.0/8` or `[::1]`. */
/**
 * Refuses a model whose requests would go where only the project file says (see
 * `LoadedConfig.trustedProviders`). A repository's `logbook.json` must not be able to send the
 * user's key to a server of its choosing, nor pick which variable is read as the key — and whoever
 * serves the model drives the agent (its tool calls run here), so without a key too it may only
 * point a provider at this machine (a local server: Ollama, LM Studio, a test server).
 */
const makeService = (loaded: LoadedConfig, provider: ConfigProvider.ConfigProvider): ConfigService => ({
  ...loaded,
  resolveModel: (name) =>
    resolveModel(loaded.config, name, { provider }).pipe(
      Effect.tap((resolved) => checkDestination(loaded, resolved)),
      Effect.withSpan("Config.resolveModel")
    ),
  masked: Effect.gen(function* () {
    const set = new Set<string>()
    for (const settings of Object.values(loaded.config.provider)) {
      if (settings.apiKeyEnv === undefined) continue
      const value = yield* readVar(provider, settings.apiKeyEnv)
      if (value !== undefined && value.trim() !== "") set.add(settings.apiKeyEnv)
    }
    for (const server of Object.values(loaded.config.mcpServers)) {
      if (server.bearerTokenEnv === undefined) continue
      const value = yield* readVar(provider, server.bearerTokenEnv)
      if (value !== undefined && value.trim() !== "") set.add(server.bearerTokenEnv)
    }
    return maskConfig(loaded.config, (name) => set.has(name))
  })
})

export class Config extends Context.Tag("logbook/Config")<Config, ConfigService>() {
  /** Reads the global and project files, `LOGBOOK_*` and `flags`. */
  static readonly layer = (
    options: LoadOptions = {}
  ): Layer.Layer<Config, ConfigError, FileSystem.FileSystem | Path.Path> =>
    Layer.effect(
      Config,
      Effect.gen(function* () {
        const loaded = yield* load(options)
        return makeService(loaded, yield* providerFor(options.env))
      })
    )

  /**
   * The defaults with `partial` on top (no files, no `LOGBOOK_*`); key variables are read from
   * `env` when given. An invalid `partial` is a defect: tests should not need to handle it.
   */
  static readonly layerTest = (
    partial: ConfigInput = {},
    options: { readonly env?: Readonly<Record<string, string | undefined>> } = {}
  ): Layer.Layer<Config> =>
    Layer.effect(
      Config,
      Effect.gen(function* () {
        const loaded = yield* resolveSources([
          { source: { _tag: "Argument", name: "the test config" }, value: partial }
        ])
        return makeService(loaded, yield* providerFor(options.env))
      }).pipe(Effect.orDie)
    )
}
