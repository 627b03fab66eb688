/**
 * The agent of a command that drives sessions (`run`, `chat`, `compact`, `rerun`): the database the
 * flags name, then `AgentLayer.layerFromConfig` (config/AgentLayer.ts), with a provider that cannot
 * be built reported as a usage error.
 */
import { Effect, type Layer, type Option } from "effect"
import { layerFromConfig } from "../config/AgentLayer.js"
import type { ConfigInput } from "../config/Config.js"
import type { ReasoningSetting } from "../model/Reasoning.js"
import * as Tracing from "../observability/Tracing.js"
import type { Approver } from "../tools/Approver.js"
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
  const filename = yield* resolveDbPath(options.db)
  return yield* layerFromConfig({
    cwd: options.cwd,
    flags: options.flags,
    reasoning: options.reasoning,
    filename,
    approver: options.approver,
    // the trace export's headers may hold keys too (bin.ts exports the spans)
    secretVariables: Tracing.secretVariables,
    secretValues: Tracing.headerSecrets(process.env)
  }).pipe(Effect.catchTag("ModelError", (error) => CliError.usage(error.message)))
})
