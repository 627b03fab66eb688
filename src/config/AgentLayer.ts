/**
 * The composition root of an agent from the config (`layerFromConfig`): the config of the
 * workspace, the model it names, the API key it reads, the prices and limits (the config's, else the
 * model catalog's), the tools' secrets and sandbox, and the layers of the agent over the SQLite log —
 * built once here, so every front end (the CLI's `run`, `chat`, `compact`, `rerun`, a server) gets
 * the same agent from the same config. What the user should hear before the session starts (a
 * setting ignored, the sandbox's state) goes to `notify`.
 */
import { homedir } from "node:os"
import * as NodePath from "node:path"
import { Clock, Console, Effect, Config as EffectConfig, Layer, Option, Redacted } from "effect"
import { authFile, McpClient, serverRecordsDir, sweepOrphanServers } from "../mcp/McpClient.js"
import { McpServers } from "../mcp/McpServers.js"
import { layerMcpTools } from "../mcp/McpTools.js"
import { toolSearchBudget } from "../mcp/ToolSearch.js"
import { type AiSdkOptions, languageModel, layerAiSdk } from "../model/AiSdk.js"
import type { ReasoningSetting } from "../model/Reasoning.js"
import { type LoadedPlugin, loadPlugin } from "../plugins/Plugin.js"
import { layerPluginEvents } from "../plugins/PluginEvents.js"
import { type AgentOptions, makeAgentLayer } from "../session/Agent.js"
import { commandSessionHooks, commandToolHooks } from "../session/CommandHooks.js"
import { makeInstructions } from "../session/Instructions.js"
import { SessionHooks } from "../session/SessionHooks.js"
import { withSkills } from "../session/SystemPrompt.js"
import { EventStore } from "../store/EventStore.js"
import type { Approver } from "../tools/Approver.js"
import { builtinTools } from "../tools/builtins.js"
import { databaseFiles, probeSandbox, sandboxNotice } from "../tools/Sandbox.js"
import { makeSecrets, Secrets } from "../tools/Secrets.js"
import { makeSkillTool } from "../tools/skill.js"
import { type AnyTool, Hooks } from "../tools/Tools.js"
import {
  Config,
  ConfigError,
  type ConfigInput,
  type ConfigService,
  sandboxSettings,
  toolSecrets,
  userInstructionsFile
} from "./Config.js"
import { approvedHooks, approveHook, describeHook, type HookEntry, hookEntries } from "./HookConfig.js"
import { approveMcpServer, type McpServerEntry, mcpServerEntries } from "./McpTrust.js"
import { effectivePrice, modelInfo } from "./ModelInfo.js"
import { approvePlugin, type PluginEntry, pluginEntries } from "./PluginTrust.js"
import { workspaceSkills } from "./Skills.js"

export interface LayerFromConfigOptions {
  /** the workspace (absolute) */
  readonly cwd: string
  /** settings over the config's (the CLI's `--model`, `--max-steps`) */
  readonly flags: ConfigInput
  /**
   * The model the session being resumed is on (`SessionSummary.model`): the agent's model unless
   * `flags.model` names one, so a session never goes on with the config's default behind the user's
   * back. Its provider no longer configured is a `ConfigError` that names it.
   */
  readonly sessionModel?: string | undefined
  /** over the model's `reasoning` in the config (the CLI's `--reasoning`) */
  readonly reasoning?: ReasoningSetting | undefined
  /** the SQLite log (absolute) */
  readonly filename: string
  readonly approver: Layer.Layer<Approver>
  /**
   * Variables that hold secrets beyond the config's providers' keys (a trace exporter's headers):
   * hidden from the tools' commands and their values masked in the log, like an API key.
   */
  readonly secretVariables?: ReadonlyArray<string> | undefined
  /** secret values inside such variables (a header's token), masked as the variable's */
  readonly secretValues?: ReadonlyArray<{ readonly name: string; readonly value: string }> | undefined
  /** what the user should hear before the session starts; default: a `logbook: ` line on stderr */
  readonly notify?: ((message: string) => Effect.Effect<void>) | undefined
  /**
   * Whether the user hears, before the session, that commands will not be sandboxed (default
   * true); a re-run runs its commands in a sandbox of its own and says how in its report.
   */
  readonly sandboxNotice?: boolean | undefined
  /**
   * Asks the user whether a server the project declares and they have not approved may start (on a
   * terminal); `true` approves its definition for the workspace. Without it such a server is skipped
   * with a notice.
   */
  readonly approveMcp?: ((entry: McpServerEntry) => Effect.Effect<boolean>) | undefined
  /**
   * Asks the user whether a command hook the project declares and they have not approved may run
   * (on a terminal); `true` approves its definition for the workspace. Without it such a hook does
   * not run, with a notice.
   */
  readonly approveHook?: ((entry: HookEntry) => Effect.Effect<boolean>) | undefined
  /**
   * Asks the user whether a plugin file the project brings and they have not approved may load (on
   * a terminal); `true` approves that file as it is. Without it such a plugin is skipped with a notice.
   */
  readonly approvePlugin?: ((entry: PluginEntry) => Effect.Effect<boolean>) | undefined
}

/** The model of the agent: `--model`, else the resumed session's, else the config's. */
const resumedModel = (config: ConfigService, options: LayerFromConfigOptions) => {
  const name = options.flags.model === undefined ? options.sessionModel : undefined
  if (name === undefined) return config.resolveModel()
  const providerId = name.slice(0, Math.max(0, name.indexOf("/")))
  if (providerId !== "" && !Object.hasOwn(config.config.provider, providerId)) {
    const configured = Object.keys(config.config.provider).sort()
    return Effect.fail(
      new ConfigError({
        source: "the session",
        message:
          `this session is on the model "${name}", whose provider "${providerId}" is not configured ` +
          `(configured: ${configured.length === 0 ? "none" : configured.join(", ")}); nothing was sent. ` +
          `Configure provider "${providerId}" again to continue it there, or pass --model <provider/model> ` +
          "to switch it to another model (the switch is recorded in the session)"
      })
    )
  }
  return config.resolveModel(name)
}

const stderrNotice = (message: string): Effect.Effect<void> => Console.error(`logbook: ${message}`)

export const layerFromConfig = Effect.fn("AgentLayer.layerFromConfig")(function* (options: LayerFromConfigOptions) {
  const notify = options.notify ?? stderrNotice
  const filename = options.filename
  const config = yield* Effect.provide(Config, Config.layer({ cwd: options.cwd, flags: options.flags }))
  const resolved = yield* resumedModel(config, options)
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
  // a provider that cannot be built (no baseURL …) fails here (a `ModelError`), before anything runs
  yield* languageModel(modelOptions)
  const settings = config.config
  // the limits and prices: the config's, else the model catalog's (prices in force now)
  const info = yield* modelInfo(resolved, {
    at: new Date(yield* Clock.currentTimeMillis),
    originOf: config.originOf
  })
  if (info.catalog._tag === "Failed") {
    yield* notify(`${info.catalog.message}; only the config's prices and limits apply`)
  }

  const keys = toolSecrets(config)
  // one service for the agent and for the session's title
  const secrets = makeSecrets({
    ...keys,
    hide: [...keys.hide, ...(options.secretVariables ?? [])],
    values: options.secretValues
  })
  if (keys.ignoredPass.length > 0) {
    const project = config.files.find((file) => file.kind === "project")?.path ?? "logbook.json"
    yield* notify(
      `ignoring tools.bash.passEnv ${keys.ignoredPass.join(", ")} of ${project}: only your own ` +
        "config may let commands see API keys"
    )
  }

  // the sandbox of the commands: probed once, here, so the user hears before the session whether
  // commands will be confined, and the model's description of bash says what holds
  const home = yield* EffectConfig.string("HOME").pipe(EffectConfig.withDefault(homedir()))
  const sandbox = sandboxSettings(config, home)
  if (sandbox.ignored.length > 0) {
    const project = config.files.find((file) => file.kind === "project")?.path ?? "logbook.json"
    yield* notify(
      `ignoring ${sandbox.ignored.join("; ")} of ${project}: a project's logbook.json may make the ` +
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
  if (notice !== undefined && options.sandboxNotice !== false) yield* notify(notice)

  const workspace = NodePath.resolve(options.cwd)
  // the skills: listed in the system prompt and loaded with the `skill` tool; none, neither (docs/skills.md)
  const skills = yield* workspaceSkills(config, workspace, home)
  for (const problem of skills.problems) yield* notify(`skill skipped: ${problem}`)
  const plugins = yield* loadPlugins(config, workspace, settings.hooks.timeoutMs, notify, options.approvePlugin)
  const builtins = builtinTools({
    bash: {
      timeoutMs: settings.tools.bash.timeoutMs,
      maxTimeoutMs: settings.tools.bash.maxTimeoutMs,
      sandbox: sandboxOptions
    }
  }).concat(skills.skills.length === 0 ? [] : [makeSkillTool(skills.skills)])
  const pluginTools = yield* joinPluginTools(builtins, plugins, notify)

  const agentOptions = {
    sessions: {
      maxSteps: settings.maxSteps,
      snapshotEvery: settings.snapshotEvery,
      price: effectivePrice(info),
      // the config's, else the provider type's default (the catalog has none)
      maxOutputTokens: info.maxOutput?.value,
      compaction: { ...settings.compaction, contextWindow: info.contextWindow?.value },
      step: settings.step,
      system: skills.skills.length === 0 ? undefined : withSkills(skills.skills),
      onLeftoverCommands: (sessionId, found) =>
        notify(
          found === "open"
            ? "stopping commands the session's last run left running when it died…"
            : `stopping commands a logbook process left running in session ${sessionId} when it died…`
        )
    },
    tools: {
      tools: [...builtins, ...pluginTools],
      // the plugins' hooks, in the order they loaded (docs/plugins.md)
      hooks: { before: plugins.flatMap((plugin) => plugin.before), after: plugins.flatMap((plugin) => plugin.after) },
      hookTimeoutMs: settings.hooks.timeoutMs
    },
    // a log kept inside the workspace is not part of what its commands change
    actions: { snapshot: { exclude: [filename] } },
    retry: settings.retry,
    permissions: settings.permission,
    permissionLimit: config.trustedPermission,
    // the workspace's AGENTS.md files and the user's own, read at the start of the turn
    instructions: yield* makeInstructions({ userFile: userInstructionsFile(config) })
  } satisfies Omit<AgentOptions, "approver">
  // the MCP servers start in the background when the layer is built; their tools join when ready.
  // A project's server starts only once the user approved its definition (docs/mcp.md).
  const mcp = yield* mcpServerEntries(config, workspace)
  for (const notice of mcp.notices) yield* notify(notice)
  const approvedNow = new Set<string>()
  for (const entry of mcp.entries) {
    if (!entry.enabled || entry.approved) continue
    if (options.approveMcp !== undefined && (yield* options.approveMcp(entry))) {
      yield* approveMcpServer(config, workspace, entry.name, entry.hash).pipe(
        Effect.zipRight(Effect.sync(() => approvedNow.add(entry.name))),
        Effect.catchAll((error) =>
          notify(`the approval of MCP server "${entry.name}" could not be kept: ${error.message}`)
        )
      )
      continue
    }
    yield* notify(
      `MCP server "${entry.name}" of ${entry.source} is not approved, so it was not started: see its ` +
        `definition with \`logbook mcp list\` and approve it with \`logbook mcp approve ${entry.name}\``
    )
  }
  const mcpServers = mcp.entries.filter((entry) => entry.enabled && (entry.approved || approvedNow.has(entry.name)))
  // what a killed logbook left of its servers is stopped first (docs/mcp.md, "Processes and bounds")
  const dataEnv = {
    XDG_DATA_HOME: yield* EffectConfig.string("XDG_DATA_HOME").pipe(EffectConfig.withDefault("")),
    HOME: home
  }
  const recordsDir = serverRecordsDir(dataEnv)
  yield* sweepOrphanServers(recordsDir, notify("stopping MCP servers a logbook process left running when it died…"))
  const unconfined = mcpServers.filter(
    (entry) =>
      entry.spec.type === "stdio" && entry.spec.sandbox !== false && sandboxOptions.status?._tag !== "Available"
  )
  if (unconfined.length > 0 && sandboxOptions.mode === "auto" && sandboxOptions.status?._tag === "Unavailable") {
    yield* notify(
      `MCP servers ${unconfined.map((entry) => entry.name).join(", ")} run without a sandbox: ${sandboxOptions.status.reason}`
    )
  }
  // the servers not started, as `/mcp` lists them
  const notStarted = mcp.entries
    .filter((entry) => !mcpServers.includes(entry))
    .map((entry) => ({
      name: entry.name,
      state: entry.enabled ? ("not approved" as const) : ("disabled" as const),
      tools: [],
      prompts: []
    }))
  const mcpTools = layerMcpTools({
    servers: mcpServers,
    cwd: workspace,
    notify,
    notStarted,
    toolSearchTokens: toolSearchBudget(settings.mcp.toolSearch, info.contextWindow?.value)
  }).pipe(
    // the environment without the API key variables: a server's `${NAME}` cannot name them either
    Layer.provide(
      McpClient.layer({ env: secrets.env, sandbox: sandboxOptions, recordsDir, authFile: authFile(dataEnv) })
    )
  )
  // the command hooks: the user's, and the project's the user approved as they are (docs/hooks.md)
  const hooks = yield* hookEntries(config, workspace, yield* approvedHooks(config, workspace))
  for (const notice of hooks.notices) yield* notify(notice)
  const hooksToRun: Array<HookEntry> = []
  for (const entry of hooks.entries) {
    if (entry.approved) {
      hooksToRun.push(entry)
      continue
    }
    if (options.approveHook !== undefined && (yield* options.approveHook(entry))) {
      hooksToRun.push(entry)
      yield* approveHook(config, workspace, entry).pipe(
        Effect.catchAll((error) =>
          notify(`the approval of hook ${entry.definition.source} could not be kept: ${error.message}`)
        )
      )
      continue
    }
    yield* notify(
      `hook ${entry.definition.source} of ${entry.origin} is not approved, so it does not run (${describeHook(entry.definition)}): ` +
        `see it with \`logbook hooks list\`, and approve it with \`logbook hooks approve '${entry.definition.source}'\``
    )
  }
  const hookEnv = { cwd: workspace, secrets, sandbox: sandboxOptions }
  const hookDefinitions = hooksToRun.map((entry) => entry.definition)
  const commandHooks =
    hookDefinitions.length === 0
      ? Layer.empty
      : Layer.merge(
          Hooks.layer(commandToolHooks(hookEnv, hookDefinitions)),
          SessionHooks.layer(commandSessionHooks(hookEnv, hookDefinitions))
        )
  const layer = makeAgentLayer({ ...agentOptions, approver: options.approver }).pipe(
    Layer.provide(commandHooks),
    Layer.provideMerge(mcpServers.length === 0 ? McpServers.layerNone(notStarted) : mcpTools),
    // the plugins' event hooks, off the kernel's path, on the events the store publishes
    Layer.merge(layerPluginEvents({ plugins, timeoutMs: settings.hooks.timeoutMs })),
    Layer.provide(layerAiSdk(modelOptions)),
    // the keys of the config's providers (`toolSecrets`), not only the built-in ones
    Layer.provide(Layer.succeed(Secrets, secrets)),
    Layer.provideMerge(EventStore.layerSqlite({ filename }))
  )

  return {
    config,
    settings,
    resolved,
    info,
    secrets,
    layer,
    agentOptions,
    modelOptions,
    filename,
    sandbox: sandboxOptions,
    skills,
    hooks: hooks.entries,
    /** the plugins loaded: their names and files */
    plugins: plugins.map((plugin) => ({ name: plugin.name, file: plugin.file }))
  }
})

/**
 * The plugins that load (docs/plugins.md): the user's, and a project's the user approved (asked on a
 * terminal by `approve`); each imported and checked. One that cannot load, or whose name another
 * took, is told to the user and left out: the session starts without it.
 */
const loadPlugins = (
  config: ConfigService,
  workspace: string,
  timeoutMs: number,
  notify: (message: string) => Effect.Effect<void>,
  approve: LayerFromConfigOptions["approvePlugin"]
) =>
  Effect.gen(function* () {
    const found = yield* pluginEntries(config, workspace)
    for (const notice of found.notices) yield* notify(notice)
    const loaded: Array<LoadedPlugin> = []
    for (const entry of found.entries) {
      if (!entry.approved) {
        if (approve === undefined || !(yield* approve(entry))) {
          yield* notify(
            `plugin ${entry.key} of ${entry.source} is not approved, so it was not loaded: read it, then approve ` +
              `it with \`logbook plugins approve ${entry.key}\``
          )
          continue
        }
        yield* approvePlugin(config, workspace, entry).pipe(
          Effect.catchAll((error) => notify(`the approval of plugin ${entry.key} could not be kept: ${error.message}`))
        )
      }
      const plugin = yield* loadPlugin({ file: entry.file, workspace, timeoutMs }).pipe(
        Effect.catchAll((error) => Effect.as(notify(`${error.message}; the session starts without it`), undefined))
      )
      if (plugin === undefined) continue
      if (loaded.some((other) => other.name === plugin.name)) {
        yield* notify(`plugin ${entry.file} is named "${plugin.name}" as another plugin is; it is not loaded`)
        continue
      }
      loaded.push(plugin)
    }
    return loaded
  })

/** The plugins' tools that may join: a name a built-in or an earlier plugin's tool has is an error for that tool. */
const joinPluginTools = (
  builtins: ReadonlyArray<AnyTool>,
  plugins: ReadonlyArray<LoadedPlugin>,
  notify: (message: string) => Effect.Effect<void>
) =>
  Effect.gen(function* () {
    const taken = new Map<string, string>(builtins.map((tool) => [tool.name, "a built-in tool"]))
    const joined: Array<AnyTool> = []
    for (const plugin of plugins) {
      for (const tool of plugin.tools) {
        const owner = taken.get(tool.name)
        if (owner !== undefined) {
          yield* notify(`the tool "${tool.name}" of plugin ${plugin.name} is not offered: ${owner} has that name`)
          continue
        }
        taken.set(tool.name, `the tool of plugin ${plugin.name}`)
        joined.push(tool)
      }
    }
    return joined
  })
