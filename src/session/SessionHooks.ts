/**
 * Hooks at the session's own points (docs/hooks.md): before a user message is recorded
 * (`promptSubmit`: block it, or add context that goes with it), at a session's first message
 * (`sessionStart`: add context) and when a turn ends (`stop`: go on with a reason as the next input,
 * at most `maxStopContinuations` times a turn). Optional: `Sessions` runs them when the program
 * provides this service. A hook never writes to the log: what it reports (`runs`) the kernel records
 * as `hook.ran`.
 */
import { Context, type Effect, Layer, Schema } from "effect"
import { make, type NewEvent } from "../domain/Events.js"
import type { SessionId } from "../domain/Ids.js"

/** A hook run to record (`hook.ran`): one that changed something, blocked, failed or timed out. */
export interface SessionHookRun {
  readonly source: string
  /** the hook point: `UserPromptSubmit`, `SessionStart`, `Stop` */
  readonly hook: string
  readonly outcome: "changed" | "blocked" | "failed" | "timeout"
  readonly changed: boolean
  readonly error?: string | undefined
  readonly reason?: string | undefined
  readonly ms: number
}

export interface SessionHookContext {
  readonly sessionId: SessionId
  /** the workspace */
  readonly cwd: string
}

/** What the hooks on a message said: blocked (with the reason the user is shown), or context to send with it. */
export interface PromptHooksResult {
  readonly block?: string | undefined
  /** text the hooks add to the message for the model (recorded with it) */
  readonly context: ReadonlyArray<string>
  readonly runs: ReadonlyArray<SessionHookRun>
}

export interface StopHooksResult {
  /** the reason to go on with, as the next input; none: the turn ends */
  readonly continueWith?: string | undefined
  readonly runs: ReadonlyArray<SessionHookRun>
}

export interface SessionHooksService {
  readonly promptSubmit: (context: SessionHookContext & { readonly prompt: string }) => Effect.Effect<PromptHooksResult>
  readonly sessionStart: (context: SessionHookContext) => Effect.Effect<PromptHooksResult>
  readonly stop: (context: SessionHookContext & { readonly stopHookActive: boolean }) => Effect.Effect<StopHooksResult>
  /** how many times the stop hooks may make one turn go on */
  readonly maxStopContinuations: number
}

export class SessionHooks extends Context.Tag("logbook/SessionHooks")<SessionHooks, SessionHooksService>() {
  static readonly layer = (hooks: SessionHooksService): Layer.Layer<SessionHooks> => Layer.succeed(SessionHooks, hooks)
}

/** A message a `UserPromptSubmit` hook blocked: nothing was recorded as a message or sent. */
export class PromptBlocked extends Schema.TaggedError<PromptBlocked>()("PromptBlocked", {
  sessionId: Schema.String,
  /** the hook's reason, shown to the user */
  reason: Schema.String,
  message: Schema.String
}) {}

/** The `hook.ran` events of session hook runs. */
export const hookRanEvents = (runs: ReadonlyArray<SessionHookRun>): Array<NewEvent> =>
  runs.map((run) =>
    make("hook.ran", {
      source: run.source,
      hook: run.hook,
      outcome: run.outcome,
      changed: run.changed,
      ...(run.error !== undefined ? { error: run.error } : {}),
      ...(run.reason !== undefined ? { reason: run.reason } : {}),
      ms: run.ms
    })
  )
