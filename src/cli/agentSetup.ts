/**
 * The agent of a command that drives sessions (`run`, `compact`): the config of the workspace, the
 * model it names, the API key it reads, and the layers of the agent over the SQLite log — built once
 * here, so every command gets the same agent from the same config.
 */
import { homedir } from "node:os"
import * as NodePath from "node:path"
import { Clock, Console, Effect, Config as EffectConfig, Layer, Option, Redacted } from "effect"
import { Config, type ConfigInput, sandboxSettings, toolSecrets, userInstructionsFile } from "../config/Config.js"
import { effectivePrice, modelInfo } from "../config/ModelInfo.js"
import { type AiSdkOptions, languageModel, layerAiSdk } from "../model/AiSdk.js"
import type { ReasoningSetting } from "../model/Reasoning.js"
import * as Tracing from "../observability/Tracing.js"
import { type AgentOptions, makeAgentLayer } from "../session/Agent.js"
import { makeInstructions } from "../session/Instructions.js"
import { EventStore } from "../store/EventStore.js"
import type { Approver } from "../tools/Approver.js"
import { builtinTools } from "../tools/builtins.js"
import { databaseFiles, probeSandbox, sandboxNotice } from "../tools/Sandbox.js"
import { makeSecrets, Secrets } from "../tools/Secrets.js"
import { resolveDbPath } from "./db.js"
import { CliError } from "./errors.js"

export interface AgentSetupOptions {
  /** the workspace (absolute) */
  readonly cwd: string
  /** `--model`, `--max-steps`: flags over the config */
  readonly flags: ConfigInput
  /** `--reasoning`: over the model's `reasoning` in the config */
  readonly reasoning?: ReasoningSetting | undefined
  /** `--db` */
  readonly db: Option.Option<string>
  readonly approver: Layer.Layer<Approver>
}

export const setupAgent = Effect.fn("cli.setupAgent")(function* (options: AgentSetupOptions) {
  const config = yield* Effect.provide(Config, Config.layer({ cwd: options.cwd, flags: options.flags }))
  const resolved = yield* config.resolveModel()
  const key = yield* resolved.apiKey
  const modelOptions: AiSdkOptions = {
    name: resolved.ref,
    type: resolved.provider.type,
    baseURL: resolved.provider.baseURL,
    apiKey: Option.getOrUndefined(Option.map(key, Redacted.value)),
    modelId: resolved.modelId,
    reasoning: options.reasoning ?? resolved.model.reasoning,
    streamIdleTimeoutMs: resolved.provider.streamIdleTimeoutMs
  }
  // a provider that cannot be built (no baseURL …) is a config error, reported before anything runs
  yield* languageModel(modelOptions).pipe(Effect.mapError((error) => CliError.usage(error.message)))
  const settings = config.config
  // the limits and prices: the config's, else the model catalog's (prices in force now)
  const info = yield* modelInfo(resolved, {
    at: new Date(yield* Clock.currentTimeMillis),
    originOf: config.originOf
  })
  if (info.catalog._tag === "Failed") {
    yield* Console.error(`logbook: ${info.catalog.message}; only the config's prices and limits apply`)
  }
  const filename = yield* resolveDbPath(options.db)

  const keys = toolSecrets(config)
  // one service for the agent and for the session's title; the trace export's headers are keys too
  const secrets = makeSecrets({ ...keys, hide: [...keys.hide, ...Tracing.secretVariables] })
  if (keys.ignoredPass.length > 0) {
    const project = config.files.find((file) => file.kind === "project")?.path ?? "logbook.json"
    yield* Console.error(
      `logbook: ignoring tools.bash.passEnv ${keys.ignoredPass.join(", ")} of ${project}: only your own ` +
        "config may let commands see API keys"
    )
  }

  // the sandbox of the commands: probed once, here, so the user hears before the session whether
  // commands will be confined, and the model's description of bash says what holds
  const home = yield* EffectConfig.string("HOME").pipe(EffectConfig.withDefault(homedir()))
  const sandbox = sandboxSettings(config, home)
  if (sandbox.ignored.length > 0) {
    const project = config.files.find((file) => file.kind === "project")?.path ?? "logbook.json"
    yield* Console.error(
      `logbook: ignoring ${sandbox.ignored.join("; ")} of ${project}: a project's logbook.json may make the ` +
        "sandbox stricter, not looser"
    )
  }
  const globalFile = config.files.find((file) => file.kind === "global")?.path
  const sandboxOptions = {
    ...sandbox.settings,
    // the session's own log and the user's config directory, wherever they are
    hidden: [
      ...sandbox.settings.hidden,
      ...databaseFiles(filename),
      ...(globalFile === undefined ? [] : [NodePath.dirname(globalFile)])
    ],
    status: sandbox.settings.mode === "off" ? undefined : yield* probeSandbox({ network: sandbox.settings.network })
  }
  const notice = sandboxOptions.status === undefined ? undefined : sandboxNotice(sandboxOptions, sandboxOptions.status)
  if (notice !== undefined) yield* Console.error(`logbook: ${notice}`)

  const agentOptions = {
    sessions: {
      maxSteps: settings.maxSteps,
      snapshotEvery: settings.snapshotEvery,
      price: effectivePrice(info),
      // only the config's: the catalog has none, and the SDK's default suits the model
      maxOutputTokens: info.maxOutput?.value,
      compaction: { ...settings.compaction, contextWindow: info.contextWindow?.value },
      onLeftoverCommands: () =>
        Console.error("logbook: stopping commands the session's last run left running when it died…")
    },
    tools: {
      tools: builtinTools({
        bash: {
          timeoutMs: settings.tools.bash.timeoutMs,
          maxTimeoutMs: settings.tools.bash.maxTimeoutMs,
          sandbox: sandboxOptions
        }
      })
    },
    // a log kept inside the workspace is not part of what its commands change
    actions: { snapshot: { exclude: [filename] } },
    retry: settings.retry,
    permissions: settings.permission,
    permissionLimit: config.trustedPermission,
    // the workspace's AGENTS.md files and the user's own, read at the start of the turn
    instructions: yield* makeInstructions({ userFile: userInstructionsFile(config) })
  } satisfies Omit<AgentOptions, "approver">
  const layer = makeAgentLayer({ ...agentOptions, approver: options.approver }).pipe(
    Layer.provide(layerAiSdk(modelOptions)),
    // the keys of the config's providers (`toolSecrets`), not only the built-in ones
    Layer.provide(Layer.succeed(Secrets, secrets)),
    Layer.provideMerge(EventStore.layerSqlite({ filename }))
  )

  return { config, settings, resolved, info, secrets, layer, agentOptions, modelOptions, filename }
})
