/**
 * The agent of a command that drives sessions (`run`, `chat`, `compact`, `rerun`): the database the
 * flags name, then `AgentLayer.layerFromConfig` (config/AgentLayer.ts), with a provider that cannot
 * be built reported as a usage error; and `findResumed`, the session a command resumes, looked up
 * before the agent is built so that the agent runs on the model the session is on.
 */
import { Effect, type Layer, Option } from "effect"
import { type LayerFromConfigOptions, layerFromConfig } from "../config/AgentLayer.js"
import type { ConfigInput } from "../config/Config.js"
import type { SessionId } from "../domain/Ids.js"
import type { ReasoningSetting } from "../model/Reasoning.js"
import * as Tracing from "../observability/Tracing.js"
import { EventStore } from "../store/EventStore.js"
import type { Approver } from "../tools/Approver.js"
import { resolveDbPath } from "./db.js"
import { CliError } from "./errors.js"
import { resolveSession } from "./resolveSession.js"

export interface AgentSetupOptions {
  /** the workspace (absolute) */
  readonly cwd: string
  /** `--model`, `--max-steps`: flags over the config */
  readonly flags: ConfigInput
  /** the model of the session being resumed: used unless `flags.model` names one (`findResumed`) */
  readonly sessionModel?: string | undefined
  /** `--reasoning`: over the model's `reasoning` in the config */
  readonly reasoning?: ReasoningSetting | undefined
  /** `--db` */
  readonly db: Option.Option<string>
  readonly approver: Layer.Layer<Approver>
  /** whether the user hears that commands will not be sandboxed (`LayerFromConfigOptions.sandboxNotice`) */
  readonly sandboxNotice?: boolean | undefined
  /** asks whether a project's MCP server the user has not approved may start (on a terminal) */
  readonly approveMcp?: LayerFromConfigOptions["approveMcp"]
  /** asks whether a project's command hook the user has not approved may run (on a terminal) */
  readonly approveHook?: LayerFromConfigOptions["approveHook"]
  /** asks whether a project's plugin the user has not approved may load (on a terminal) */
  readonly approvePlugin?: LayerFromConfigOptions["approvePlugin"]
}

export const setupAgent = Effect.fn("cli.setupAgent")(function* (options: AgentSetupOptions) {
  const filename = yield* resolveDbPath(options.db)
  return yield* layerFromConfig({
    cwd: options.cwd,
    flags: options.flags,
    sessionModel: options.sessionModel,
    reasoning: options.reasoning,
    filename,
    approver: options.approver,
    sandboxNotice: options.sandboxNotice,
    approveMcp: options.approveMcp,
    approveHook: options.approveHook,
    approvePlugin: options.approvePlugin,
    // the trace export's headers may hold keys too (bin.ts exports the spans)
    secretVariables: Tracing.secretVariables,
    secretValues: Tracing.headerSecrets(process.env)
  }).pipe(Effect.catchTag("ModelError", (error) => CliError.usage(error.message)))
})

export interface ResumeOptions {
  /** `--session <id>` */
  readonly session: Option.Option<string>
  /** `--continue`: the latest session of `cwd` */
  readonly continue: boolean
  readonly cwd: string
  readonly db: Option.Option<string>
  /** the usage error when `--continue` finds no session in `cwd` */
  readonly noSession: string
}

/** A session a command resumes: its id and the model it is on (null: its log names none). */
export interface Resumed {
  readonly id: SessionId
  readonly model: string | null
}

/**
 * The session `--session` or `--continue` names (undefined when neither is given), read from the
 * session index before the agent is built: its `model` is what the agent runs on unless `--model`
 * says otherwise (docs/models.md, "Resuming a session").
 */
export const findResumed = Effect.fn("cli.findResumed")(function* (options: ResumeOptions) {
  if (Option.isNone(options.session) && !options.continue) return undefined
  const filename = yield* resolveDbPath(options.db)
  return yield* Effect.gen(function* () {
    if (Option.isSome(options.session)) {
      const summary = yield* resolveSession(options.session.value)
      return { id: summary.id, model: summary.model } satisfies Resumed
    }
    const latest = yield* (yield* EventStore).sessions({ cwd: options.cwd, limit: 1 })
    if (latest.length === 0) {
      return yield* CliError.usage(options.noSession)
    }
    return { id: latest[0]!.id, model: latest[0]!.model } satisfies Resumed
  }).pipe(Effect.provide(EventStore.layerSqlite({ filename })))
})
