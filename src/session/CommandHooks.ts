/**
 * Command hooks in Claude Code's shape (docs/hooks.md, which has the exit codes and JSON answers):
 * hook definitions turned into the tool hooks (`ToolHooks`) and session hooks (`SessionHooks`) the
 * kernel runs, each run by `runCommandHook` (sandboxed like `bash`, time-limited, output bounded).
 */
import { Effect } from "effect"
import type { SessionId } from "../domain/Ids.js"
import { capText } from "../tools/boundedOutput.js"
import { type CommandHookResult, runCommandHook } from "../tools/commandHook.js"
import type { SandboxOptions } from "../tools/Sandbox.js"
import type { SecretsService } from "../tools/Secrets.js"
import type { AfterHook, BeforeHook, HookCall, NamedHook, ToolHooks, ToolOutput } from "../tools/Tools.js"
import type { PromptHooksResult, SessionHookRun, SessionHooksService, StopHooksResult } from "./SessionHooks.js"

export type HookEvent = "PreToolUse" | "PostToolUse" | "UserPromptSubmit" | "SessionStart" | "Stop"

/** One command hook, as configured. */
export interface CommandHookDefinition {
  readonly event: HookEvent
  /** PreToolUse / PostToolUse: the tools it runs for (undefined, "" or "*": all) */
  readonly matcher?: string | undefined
  readonly command: string
  readonly timeoutMs: number
  /** its name in the log: `hook:PreToolUse[0]` (user) or `hook:project:PreToolUse[0]` */
  readonly source: string
}

/** Where and how the commands run. */
export interface CommandHookEnv {
  /** the workspace */
  readonly cwd: string
  readonly secrets: SecretsService
  readonly sandbox: SandboxOptions
}

/** The default timeout of a hook command (Claude Code's: 60 s). */
export const DEFAULT_COMMAND_HOOK_TIMEOUT_MS = 60_000
/** How many times `Stop` hooks may make one turn go on. */
export const MAX_STOP_CONTINUATIONS = 3
/** The most of a reason or a context text a hook gives that is kept (bytes). */
const MAX_HOOK_TEXT = 16 * 1024

/** The Claude Code names of logbook's built-in tools (what `tool_name` says and matchers name). */
const CLAUDE_NAMES: Readonly<Record<string, string>> = {
  bash: "Bash",
  edit: "Edit",
  write: "Write",
  read: "Read",
  glob: "Glob",
  grep: "Grep",
  list: "LS",
  todo: "TodoWrite"
}

/** A tool's name as Claude Code calls it (MCP tools and others keep theirs). */
export const claudeToolName = (tool: string): string => CLAUDE_NAMES[tool] ?? tool

/** Whether `matcher` selects `tool`: matched whole against the Claude Code name and logbook's. */
export const matchesTool = (matcher: string | undefined, tool: string): boolean => {
  if (matcher === undefined || matcher === "" || matcher === "*") return true
  const pattern = new RegExp(`^(?:${matcher})$`)
  return pattern.test(claudeToolName(tool)) || pattern.test(tool)
}

// ---------------------------------------------------------------------------------------------
// the answer of one run

/** What one hook run said. */
export type HookAnswer =
  /** exit 0: its stdout as JSON when it is an object, else as text */
  | { readonly _tag: "Ok"; readonly json: Record<string, unknown> | undefined; readonly text: string }
  /** exit 2: block, with stderr as the reason */
  | { readonly _tag: "Block"; readonly reason: string }
  /** any other end: an error that blocks nothing */
  | { readonly _tag: "Failed"; readonly outcome: "failed" | "timeout"; readonly error: string }

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const firstLine = (text: string): string => text.trim().split("\n")[0] ?? ""

/** Reads a run's exit code and output (docs/hooks.md, "What a hook answers"). */
export const readAnswer = (result: CommandHookResult, timeoutMs: number): HookAnswer => {
  if (result.timedOut) {
    return {
      _tag: "Failed",
      outcome: "timeout",
      error: `it did not finish within ${timeoutMs / 1000} s and was stopped`
    }
  }
  if (result.exitCode === 2) {
    const reason = result.stderr.trim()
    return { _tag: "Block", reason: reason === "" ? "blocked by a hook (it gave no reason on stderr)" : reason }
  }
  if (result.exitCode !== 0) {
    const how =
      result.exitCode === undefined ? `it was killed by ${result.signal ?? "a signal"}` : `exit code ${result.exitCode}`
    const said = firstLine(result.stderr)
    return { _tag: "Failed", outcome: "failed", error: said === "" ? how : `${how}: ${said}` }
  }
  const text = result.stdout.trim()
  if (!text.startsWith("{")) return { _tag: "Ok", json: undefined, text }
  if (result.truncated) {
    return { _tag: "Failed", outcome: "failed", error: "its JSON output is too long (it was cut, so it is not read)" }
  }
  try {
    const json: unknown = JSON.parse(text)
    if (isRecord(json)) return { _tag: "Ok", json, text }
  } catch (error) {
    return {
      _tag: "Failed",
      outcome: "failed",
      error: `its output is not valid JSON: ${error instanceof Error ? error.message : String(error)}`
    }
  }
  return { _tag: "Failed", outcome: "failed", error: "its JSON output is not an object" }
}

const stringField = (record: Record<string, unknown> | undefined, key: string): string | undefined => {
  const value = record?.[key]
  return typeof value === "string" && value.trim() !== "" ? value : undefined
}

const specific = (json: Record<string, unknown> | undefined): Record<string, unknown> | undefined =>
  isRecord(json?.hookSpecificOutput) ? json.hookSpecificOutput : undefined

/** `additionalContext` of the answer (in `hookSpecificOutput`, or at the top). */
const additionalContext = (json: Record<string, unknown> | undefined): string | undefined =>
  stringField(specific(json), "additionalContext") ?? stringField(json, "additionalContext")

/** `continue: false`: the hook says stop, with `stopReason`. */
const stopsAll = (json: Record<string, unknown> | undefined): string | undefined =>
  json?.continue === false ? (stringField(json, "stopReason") ?? "a hook said not to continue") : undefined

// ---------------------------------------------------------------------------------------------
// running

/** The event's fields every hook gets. */
const common = (event: HookEvent, sessionId: SessionId, cwd: string) => ({
  session_id: sessionId,
  transcript_path: "",
  cwd,
  hook_event_name: event,
  permission_mode: "default"
})

/** One hook run: its answer and how long it took; a hook that cannot start is `Failed`. */
const run = (env: CommandHookEnv, hook: CommandHookDefinition, input: Record<string, unknown>) =>
  runCommandHook({
    command: hook.command,
    cwd: env.cwd,
    input: JSON.stringify(input),
    timeoutMs: hook.timeoutMs,
    env: env.secrets.env,
    sandbox: env.sandbox
  }).pipe(
    Effect.map((result) => ({ answer: readAnswer(result, hook.timeoutMs), ms: result.ms })),
    Effect.catchAll((error) =>
      Effect.succeed({ answer: { _tag: "Failed", outcome: "failed", error: error.message } as HookAnswer, ms: 0 })
    )
  )

/** A text a hook gave, masked (API keys) and bounded, for the log and the model. */
const kept = (env: CommandHookEnv, text: string): string => capText(env.secrets.redactText(text), MAX_HOOK_TEXT, 0)

/** What a PreToolUse hook made of a call. */
export type PreToolUseOutcome =
  | { readonly _tag: "Unchanged" }
  | { readonly _tag: "Input"; readonly input: unknown }
  | { readonly _tag: "Block"; readonly reason: string }
  /** an error that blocks nothing: recorded, the call goes on */
  | { readonly _tag: "Failed"; readonly outcome: "failed" | "timeout"; readonly error: string }

/** Runs one PreToolUse hook on a call. */
export const preToolUse = (env: CommandHookEnv, hook: CommandHookDefinition, call: HookCall) =>
  Effect.map(
    run(env, hook, {
      ...common("PreToolUse", call.sessionId, env.cwd),
      tool_name: claudeToolName(call.tool),
      tool_input: call.input,
      tool_use_id: call.callId,
      logbook_tool: call.tool
    }),
    ({ answer, ms }): { readonly outcome: PreToolUseOutcome; readonly ms: number } => {
      if (answer._tag === "Failed") return { outcome: { ...answer, error: kept(env, answer.error) }, ms }
      if (answer._tag === "Block") return { outcome: { _tag: "Block", reason: kept(env, answer.reason) }, ms }
      const json = answer.json
      const own = specific(json)
      const decision = stringField(own, "permissionDecision") ?? stringField(json, "decision")
      const reason = stringField(own, "permissionDecisionReason") ?? stringField(json, "reason")
      const stop = stopsAll(json)
      if (stop !== undefined) return { outcome: { _tag: "Block", reason: kept(env, stop) }, ms }
      if (decision === "deny" || decision === "block") {
        return { outcome: { _tag: "Block", reason: kept(env, reason ?? "denied by a hook") }, ms }
      }
      if (decision === "ask") {
        // the permission check ran before the hooks: a hook cannot ask the user here, so it refuses
        return {
          outcome: {
            _tag: "Block",
            reason: kept(
              env,
              `a hook asked for the user's approval, which a hook cannot ask for in logbook, so the call was not run${reason === undefined ? "" : `: ${reason}`}`
            )
          },
          ms
        }
      }
      const updated = own?.updatedInput
      if (isRecord(updated)) {
        // Claude Code's updatedInput replaces the fields it names
        const input = isRecord(call.input) ? { ...call.input, ...updated } : updated
        return { outcome: { _tag: "Input", input }, ms }
      }
      return { outcome: { _tag: "Unchanged" }, ms }
    }
  )

/** What a PostToolUse hook made of an output: text added for the model, or an error that changes nothing. */
export type PostToolUseOutcome =
  | { readonly _tag: "Unchanged" }
  | { readonly _tag: "Added"; readonly text: string }
  | { readonly _tag: "Failed"; readonly outcome: "failed" | "timeout"; readonly error: string }

/** Runs one PostToolUse hook on a call's output. */
export const postToolUse = (env: CommandHookEnv, hook: CommandHookDefinition, call: HookCall, output: ToolOutput) =>
  Effect.map(
    run(env, hook, {
      ...common("PostToolUse", call.sessionId, env.cwd),
      tool_name: claudeToolName(call.tool),
      tool_input: call.input,
      tool_response: { output: output.output, ...(output.metadata !== undefined ? { metadata: output.metadata } : {}) },
      tool_use_id: call.callId,
      logbook_tool: call.tool
    }),
    ({ answer, ms }): { readonly outcome: PostToolUseOutcome; readonly ms: number } => {
      if (answer._tag === "Failed") return { outcome: { ...answer, error: kept(env, answer.error) }, ms }
      if (answer._tag === "Block") return { outcome: { _tag: "Added", text: kept(env, answer.reason) }, ms }
      const json = answer.json
      const parts = [
        stringField(json, "decision") === "block" ? (stringField(json, "reason") ?? "a hook objected") : undefined,
        additionalContext(json)
      ].filter((part): part is string => part !== undefined)
      return parts.length === 0
        ? { outcome: { _tag: "Unchanged" }, ms }
        : { outcome: { _tag: "Added", text: kept(env, parts.join("\n")) }, ms }
    }
  )

/** The output the model reads with what a PostToolUse hook added. */
export const withHookText = (output: ToolOutput, source: string, text: string): ToolOutput => ({
  ...output,
  output: `${output.output}\n\n[PostToolUse hook ${source}]\n${text}`
})

const failedRun = (
  hook: CommandHookDefinition,
  answer: { readonly outcome: "failed" | "timeout"; readonly error: string },
  ms: number
): SessionHookRun => ({
  source: hook.source,
  hook: hook.event,
  outcome: answer.outcome,
  changed: false,
  error: answer.error,
  ms
})

/** The hooks of a message's event (`UserPromptSubmit` or `SessionStart`) in order: the first block ends them. */
const promptHooks = (
  env: CommandHookEnv,
  hooks: ReadonlyArray<CommandHookDefinition>,
  input: Record<string, unknown>
): Effect.Effect<PromptHooksResult> =>
  Effect.gen(function* () {
    const context: Array<string> = []
    const runs: Array<SessionHookRun> = []
    for (const hook of hooks) {
      const { answer, ms } = yield* run(env, hook, input)
      if (answer._tag === "Failed") {
        runs.push(failedRun(hook, { outcome: answer.outcome, error: kept(env, answer.error) }, ms))
        continue
      }
      const base = { source: hook.source, hook: hook.event, ms }
      const block =
        answer._tag === "Block"
          ? answer.reason
          : (stopsAll(answer.json) ??
            (stringField(answer.json, "decision") === "block"
              ? (stringField(answer.json, "reason") ?? "blocked by a hook")
              : undefined))
      // SessionStart cannot block: its exit 2 is an error that blocks nothing
      if (block !== undefined && hook.event === "SessionStart") {
        runs.push({ ...base, outcome: "failed", changed: false, error: kept(env, block) })
        continue
      }
      if (block !== undefined) {
        const reason = kept(env, block)
        runs.push({ ...base, outcome: "blocked", changed: false, reason })
        return { block: reason, context, runs }
      }
      const added =
        answer._tag === "Ok" ? (answer.json === undefined ? answer.text : additionalContext(answer.json)) : undefined
      if (added !== undefined && added.trim() !== "") {
        context.push(kept(env, added.trim()))
        runs.push({ ...base, outcome: "changed", changed: true })
      }
    }
    return { context, runs }
  })

/** The Stop hooks in order: the first that blocks gives the reason to go on with. */
const stopHooks = (
  env: CommandHookEnv,
  hooks: ReadonlyArray<CommandHookDefinition>,
  input: Record<string, unknown>
): Effect.Effect<StopHooksResult> =>
  Effect.gen(function* () {
    const runs: Array<SessionHookRun> = []
    for (const hook of hooks) {
      const { answer, ms } = yield* run(env, hook, input)
      if (answer._tag === "Failed") {
        runs.push(failedRun(hook, { outcome: answer.outcome, error: kept(env, answer.error) }, ms))
        continue
      }
      if (answer._tag === "Ok" && stopsAll(answer.json) !== undefined) return { runs }
      const reason =
        answer._tag === "Block"
          ? answer.reason
          : stringField(answer.json, "decision") === "block"
            ? (stringField(answer.json, "reason") ?? "a Stop hook asked to go on")
            : undefined
      if (reason !== undefined) {
        const text = kept(env, reason)
        runs.push({ source: hook.source, hook: hook.event, outcome: "blocked", changed: false, reason: text, ms })
        return { continueWith: text, runs }
      }
    }
    return { runs }
  })

/** The session hooks of the definitions (`UserPromptSubmit`, `SessionStart`, `Stop`). */
export const commandSessionHooks = (
  env: CommandHookEnv,
  hooks: ReadonlyArray<CommandHookDefinition>
): SessionHooksService => {
  const of = (event: HookEvent) => hooks.filter((hook) => hook.event === event)
  const submit = of("UserPromptSubmit")
  const start = of("SessionStart")
  const stop = of("Stop")
  return {
    promptSubmit: ({ sessionId, prompt }) =>
      promptHooks(env, submit, { ...common("UserPromptSubmit", sessionId, env.cwd), prompt }),
    sessionStart: ({ sessionId }) =>
      promptHooks(env, start, { ...common("SessionStart", sessionId, env.cwd), source: "startup" }),
    stop: ({ sessionId, stopHookActive }) =>
      stopHooks(env, stop, { ...common("Stop", sessionId, env.cwd), stop_hook_active: stopHookActive }),
    maxStopContinuations: MAX_STOP_CONTINUATIONS
  }
}

/**
 * How much longer than its own timeout a tool hook's command may take before the registry's bound
 * stops it: the registry's bound is the one that fires (the run is recorded as timed out, the
 * command's group stopped as it is interrupted), this is the runner's own backstop.
 */
const BACKSTOP_MS = 5_000

/**
 * The tool hooks of the definitions (`PreToolUse`, `PostToolUse`), named (`hook:PreToolUse[0]`) and
 * bounded by their timeout in the registry (docs/extensions.md), each run only for the tools it
 * matches. A PreToolUse command past its timeout refuses its call (the registry's rule for a before
 * hook); one that fails otherwise (an exit code other than 0 and 2) is recorded and the call goes on.
 */
export const commandToolHooks = (env: CommandHookEnv, hooks: ReadonlyArray<CommandHookDefinition>): ToolHooks => {
  const backstop = (hook: CommandHookDefinition) => ({ ...hook, timeoutMs: hook.timeoutMs + BACKSTOP_MS })
  return {
    before: hooks
      .filter((hook) => hook.event === "PreToolUse")
      .map(
        (hook): NamedHook<BeforeHook> => ({
          source: hook.source,
          timeoutMs: hook.timeoutMs,
          run: (call) =>
            matchesTool(hook.matcher, call.tool)
              ? Effect.map(preToolUse(env, backstop(hook), call), ({ outcome }) => {
                  switch (outcome._tag) {
                    case "Block":
                      return { block: outcome.reason }
                    case "Input":
                      return { input: outcome.input }
                    case "Failed":
                      return { failed: outcome.error }
                    case "Unchanged":
                      return undefined
                  }
                })
              : Effect.succeed(undefined)
        })
      ),
    after: hooks
      .filter((hook) => hook.event === "PostToolUse")
      .map(
        (hook): NamedHook<AfterHook> => ({
          source: hook.source,
          timeoutMs: hook.timeoutMs,
          run: (call, output) =>
            matchesTool(hook.matcher, call.tool)
              ? Effect.flatMap(postToolUse(env, backstop(hook), call, output), ({ outcome }) => {
                  switch (outcome._tag) {
                    case "Added":
                      return Effect.succeed(withHookText(output, hook.source, outcome.text))
                    case "Failed":
                      // an after hook that fails is skipped and recorded by the registry
                      return Effect.fail(new Error(outcome.error))
                    case "Unchanged":
                      return Effect.succeed(undefined)
                  }
                })
              : Effect.succeed(undefined)
        })
      )
  }
}
