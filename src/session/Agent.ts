/**
 * The agent's layers wired together: `Sessions` over `Processor` and `Actions`, over `Tools` and
 * `Retry`. The model and the event store are left open, so a program chooses them:
 *
 * ```ts
 * const AgentLive = makeAgentLayer({ sessions: { maxSteps: 50 }, tools: { tools: builtinTools(settings) } }).pipe(
 *   Layer.provide(layerAiSdk(modelOptions)),
 *   Layer.provideMerge(EventStore.layerSqlite({ filename: "logbook.db" }))
 * )
 * ```
 */
import { Layer } from "effect"
import type { Model } from "../model/Model.js"
import { defaultRetryOptions, Retry, type RetryOptions } from "../model/Retry.js"
import type { EventStore } from "../store/EventStore.js"
import { Approver } from "../tools/Approver.js"
import type { PermissionRules } from "../tools/Permissions.js"
import { Secrets, type SecretsOptions, type SecretsService } from "../tools/Secrets.js"
import { Tools, type ToolsOptions } from "../tools/Tools.js"
import { Actions, type ActionsOptions } from "./Actions.js"
import { Instructions, type InstructionsService } from "./Instructions.js"
import { Processor } from "./Processor.js"
import { Sessions, type SessionsOptions } from "./Sessions.js"

export interface AgentOptions {
  readonly sessions: SessionsOptions
  readonly tools: ToolsOptions
  /** the retry policy's options (default `defaultRetryOptions`), or the `Retry` service itself (a re-run replays the recorded decisions) */
  readonly retry?: RetryOptions | Retry["Type"] | undefined
  readonly actions?: ActionsOptions | undefined
  /** the user's permission rules (the config's `permission`); the built-in defaults apply below them */
  readonly permissions?: PermissionRules | undefined
  /** rules no decision may be looser than (see `ActionsOptions.permissionLimit`) */
  readonly permissionLimit?: PermissionRules | undefined
  /** who answers a call the rules ask about (default `Approver.autoDeny`) */
  readonly approver?: Layer.Layer<Approver> | undefined
  /**
   * The variables that hold API keys: hidden from the tools' commands, their values masked in the
   * log (default: `builtinSecretNames` of the process's environment; see `Secrets`) — or the
   * `SecretsService` made of them, when the program uses it too
   */
  readonly secrets?: SecretsOptions | SecretsService | undefined
  /**
   * Where the sessions' instruction files (AGENTS.md) come from: `makeInstructions(options)` reads a
   * workspace's and the user's files (default: none)
   */
  readonly instructions?: InstructionsService | undefined
}

export type AgentServices = Sessions | Processor | Actions | Tools | Retry

export const makeAgentLayer = (options: AgentOptions): Layer.Layer<AgentServices, never, EventStore | Model> => {
  const retry = options.retry ?? defaultRetryOptions
  const base = Layer.mergeAll(
    Tools.layer(options.tools),
    "withRetry" in retry ? Layer.succeed(Retry, retry) : Retry.layer(retry)
  )
  const actions = Actions.layer({
    ...options.actions,
    ...(options.permissions !== undefined ? { permissions: options.permissions } : {}),
    ...(options.permissionLimit !== undefined ? { permissionLimit: options.permissionLimit } : {})
  }).pipe(Layer.provide(options.approver ?? Approver.autoDeny))
  const kernel = Layer.mergeAll(Processor.layer, actions).pipe(Layer.provideMerge(base))
  const sessions = Sessions.layer(options.sessions).pipe(Layer.provideMerge(kernel))
  const agent =
    options.instructions === undefined
      ? sessions
      : sessions.pipe(Layer.provide(Layer.succeed(Instructions, options.instructions)))
  const secrets = options.secrets
  if (secrets === undefined) return agent
  return agent.pipe(Layer.provide("redact" in secrets ? Layer.succeed(Secrets, secrets) : Secrets.layer(secrets)))
}
