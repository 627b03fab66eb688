/**
 * The agent's layers wired together: `Sessions` over `Processor` and `Actions`, over `Tools` and
 * `Retry`. The model, the event store and the secrets (the API key variables hidden from the
 * tools' commands and masked in the log) are left open, so a program chooses them:
 *
 * ```ts
 * const AgentLive = makeAgentLayer({ sessions: { maxSteps: 50 }, tools: { tools: builtinTools(settings) } }).pipe(
 *   Layer.provide(layerAiSdk(modelOptions)),
 *   Layer.provide(Secrets.layerFromEnv), // or Secrets.layer({ hide: [...] }), or Layer.succeed(Secrets, service)
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
import type { Secrets } from "../tools/Secrets.js"
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
   * Where the sessions' instruction files (AGENTS.md) come from: `makeInstructions(options)` reads a
   * workspace's and the user's files (default: none)
   */
  readonly instructions?: InstructionsService | undefined
}

export type AgentServices = Sessions | Processor | Actions | Tools | Retry

/**
 * The agent's layers. `Secrets` has no default: the program states which variables hold keys
 * (`Secrets.layerFromEnv`, `Secrets.layer(options)`), and forgetting it is a type error rather than
 * a silent guess from `process.env` that would miss a provider's key under another name.
 */
export const makeAgentLayer = (
  options: AgentOptions
): Layer.Layer<AgentServices, never, EventStore | Model | Secrets> => {
  const retry = options.retry ?? defaultRetryOptions
  const base = Layer.mergeAll(
    Tools.layer(options.tools),
    "driver" in retry ? Layer.succeed(Retry, retry) : Retry.layer(retry)
  )
  const actions = Actions.layer({
    ...options.actions,
    ...(options.permissions !== undefined ? { permissions: options.permissions } : {}),
    ...(options.permissionLimit !== undefined ? { permissionLimit: options.permissionLimit } : {})
  }).pipe(Layer.provide(options.approver ?? Approver.autoDeny))
  const kernel = Layer.mergeAll(Processor.layer, actions).pipe(Layer.provideMerge(base))
  const sessions = Sessions.layer(options.sessions).pipe(Layer.provideMerge(kernel))
  return options.instructions === undefined
    ? sessions
    : sessions.pipe(Layer.provide(Layer.succeed(Instructions, options.instructions)))
}
