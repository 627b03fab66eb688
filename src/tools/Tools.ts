/**
 * The tool registry (DESIGN §6): each tool's input Schema, its description for the model, its
 * timeout, and the `tool.execute.before` / `tool.execute.after` hooks.
 *
 * A tool is plain data: a name, a description written for the model, an input `Schema`, and an
 * `execute` that gets the decoded input and a `ToolContext`. Expected failures are `ToolFailure`s:
 * their message is what the model reads as the tool's error. Running the calls of a step (write-ahead
 * `tool.invoked`, timeouts, interruption) is `Actions`' job, not the registry's.
 */

import { Context, Effect, Either, JSONSchema, Layer, Option, ParseResult, Schema } from "effect"
import type { TodoItem } from "../domain/Events.js"
import type { CallId, SessionId } from "../domain/Ids.js"
import type { ModelTool } from "../model/Model.js"
import { DEFAULT_HOOK_TIMEOUT_MS, namedHooks, runAfterHooks, runBeforeHooks } from "./internal/hookRunner.js"
import type { ProcessGroup } from "./processGroup.js"
import type { SecretsService } from "./Secrets.js"

export { DEFAULT_HOOK_TIMEOUT_MS, HookTimeout } from "./internal/hookRunner.js"

/** A tool's expected failure; `message` is the error text the model reads. */
export class ToolFailure extends Schema.TaggedError<ToolFailure>()("ToolFailure", {
  message: Schema.String,
  metadata: Schema.optional(Schema.Unknown)
}) {}

/**
 * The message of the `ToolFailure` a record of `ToolContext` (`recordFileChange`, `storeBlob` …)
 * fails with when the session's log cannot take it: the call stops there, and the caller fails the
 * turn with the store's own error instead of telling the model the call failed.
 */
export const LOG_UNAVAILABLE = "The session's log could not record this call's work, so the call was stopped."

/** What a finished call returns: the text the model reads, and metadata for the log and the UI. */
export interface ToolOutput {
  readonly output: string
  readonly metadata?: unknown
}

/** What a running tool may know and do besides its input. */
export interface ToolContext {
  readonly sessionId: SessionId
  readonly callId: CallId
  /** the workspace root: relative paths are resolved against it */
  readonly cwd: string
  /**
   * logbook's API keys (`Secrets`): `env` is the environment a command the tool starts runs with
   * (the process's own without the key variables); what the tool returns is masked when it is
   * logged, but a tool that cuts or samples text (head and tail, progress, long lines) masks it
   * first (`redactText`, `redactStream`), so no cut leaves part of a key.
   */
  readonly secrets: SecretsService
  /** the timeout this call runs under (ms); the tool is interrupted when it passes */
  readonly timeoutMs: number
  /** reports progress (appends `tool.progress`); cheap to call often, it is throttled by the caller */
  readonly progress: (output: string) => Effect.Effect<void>
  /**
   * Records a change the tool made to a file, for audit (DESIGN §6): the contents before and after
   * are stored as content-addressed blobs and `file.changed {path, op, beforeHash, afterHash}` is
   * committed. `path` is the real absolute path; it is logged relative to the workspace when inside.
   */
  readonly recordFileChange: (change: FileChange) => Effect.Effect<void, ToolFailure>
  /**
   * Records a change the tool is about to make, before it writes anything (write-ahead): the
   * contents before and after as blobs and `file.intent {path, op, beforeHash, afterHash, temp}`,
   * committed. A process that dies before the change is recorded (`recordFileChange`) leaves the
   * intent open, and the crash sweep of the next run checks the file against it
   * (`intentRecovery.ts`). `temp` is the temporary file the tool writes first (and renames over
   * `path`): the sweep removes it when it is left.
   */
  readonly recordFileIntent: (intent: FileIntent) => Effect.Effect<void, ToolFailure>
  /** Replaces the session's task list (commits `todo.updated`). */
  readonly updateTodos: (items: ReadonlyArray<TodoItem>) => Effect.Effect<void, ToolFailure>
  /** Stores content as a content-addressed blob of the log and returns its hash (e.g. a command's whole output). */
  readonly storeBlob: (content: string | Uint8Array) => Effect.Effect<string, ToolFailure>
  /** What this session's agent last read of each file (to refuse editing a file changed on disk since). */
  readonly reads: FileReads
  /**
   * Whether this call may touch a path outside the workspace: the permission check found its path
   * outside and `external_directory` allowed it (or the user approved). File tools pass it to
   * `confinedPath`.
   */
  readonly outsideAllowed: boolean
  /**
   * The record of a call that was stopped (timed out or interrupted) before it returned, written as
   * the `metadata` of its `tool.failed` — e.g. a command's exit code, duration and output blob. A
   * tool calls it from its finalizer, once what it ran is gone; the caller waits for the finalizers
   * before it writes `tool.failed`.
   */
  readonly recordStopped: (metadata: unknown) => Effect.Effect<void>
  /**
   * Records a process group the call started (commits `tool.process`), so that a run that opens
   * the session after this process died can stop what is left of it (`processGroup.ts`).
   */
  readonly recordProcess: (group: ProcessGroup) => Effect.Effect<void, ToolFailure>
}

/** What a call asks permission for: a command (`subject`) or a path, resolved by the caller. */
export interface PermissionSubject {
  /** the pattern subject as is (the command for `bash`) */
  readonly subject?: string | undefined
  /** a path as the model wrote it: resolved in the workspace, its real path becomes the subject */
  readonly path?: string | undefined
}

/** A change of one file by a tool. */
export interface FileChange {
  readonly path: string
  readonly op: "create" | "update" | "delete"
  readonly before?: string | Uint8Array | undefined
  readonly after?: string | Uint8Array | undefined
}

/** A change a tool is about to make (`ToolContext.recordFileIntent`), with the temporary file it writes first. */
export interface FileIntent {
  readonly path: string
  readonly op: "create" | "update"
  readonly before?: string | Uint8Array | undefined
  readonly after: string | Uint8Array
  /** the real absolute path of the temporary file (in the same directory as `path`) */
  readonly temp: string
}

/** When a file was read, as its modification time and size then (and a content hash when known). */
export interface FileStamp {
  readonly mtimeMs: number
  readonly size: number
  readonly hash?: string | undefined
}

/**
 * What the agent saw of each file in this session: `record` stamps a file the tool read or wrote
 * (written with the call's end, `tool.finished` / `tool.failed` `reads`); `last` is the newest stamp,
 * also from earlier calls and earlier processes (`SessionState.reads`).
 */
export interface FileReads {
  readonly record: (path: string, stamp: FileStamp) => Effect.Effect<void>
  readonly last: (path: string) => Effect.Effect<FileStamp | undefined>
}

/** One tool. `I` is the decoded input. */
export interface ToolDefinition<I = unknown> {
  readonly name: string
  /** written for the model: what the tool does, when to use it, what the input means */
  readonly description: string
  // biome-ignore lint/suspicious/noExplicitAny: the encoded side of an input Schema is whatever the model sends
  readonly input: Schema.Schema<I, any, never>
  /**
   * The input's JSON Schema as the model is given it, when it is not generated from `input`: a
   * tool described by someone else (an MCP server's) whose schema is passed on as given.
   */
  readonly inputSchema?: Readonly<Record<string, unknown>> | undefined
  /** the timeout of a call with this input (ms); the registry's default when absent */
  readonly timeoutMs?: ((input: I) => number) | undefined
  /**
   * A tool someone else wrote (a plugin's): unless a rule names it, a call asks, as an MCP server's
   * do. Without it a registered tool the rules do not name runs (its program means it to).
   */
  readonly asksByDefault?: boolean | undefined
  /** what a call with this input asks permission for (see `Permissions`); no subject when absent */
  readonly permission?: ((input: I) => PermissionSubject) | undefined
  /**
   * The tool may change files in the workspace without recording them (`recordFileChange`) — it
   * runs a command. Each call is then surrounded by workspace snapshots, and every file it created,
   * changed or deleted is recorded as `file.changed {observed: true}` (docs/workspace.md), also when
   * it failed, timed out or was interrupted. Leave it off for a tool that cannot write, or that
   * records its own changes: the snapshot walks the workspace.
   */
  readonly snapshotWorkspace?: boolean | undefined
  /**
   * Runs the tool. Interruption (timeout, user interrupt) must stop everything it started:
   * acquire with `Effect.acquireRelease` and let the scope release it.
   */
  readonly execute: (input: I, context: ToolContext) => Effect.Effect<ToolOutput, ToolFailure>
}

/** A tool of any input type, as the registry holds it. */
// biome-ignore lint/suspicious/noExplicitAny: tools of different input types live in one registry
export type AnyTool = ToolDefinition<any>

/** Defines a tool with its input type inferred from the Schema. */
export const defineTool = <I>(tool: ToolDefinition<I>): ToolDefinition<I> => tool

/** A call as the hooks see it. */
export interface HookCall {
  readonly sessionId: SessionId
  readonly callId: CallId
  readonly tool: string
  readonly input: unknown
}

/** What a before hook returns: the input to run with, or `{ block: reason }` to refuse the call. */
export type BeforeResult =
  | { readonly input: unknown }
  | { readonly block: string }
  /**
   * the hook failed in a way that blocks nothing (a command hook's exit code other than 0 and 2):
   * recorded as failed, the call goes on as it was
   */
  | { readonly failed: string }

/**
 * `tool.execute.before`: runs after the input was decoded and the permission check, before
 * `tool.invoked`. Returns the input to run with (changed or not; nothing: unchanged), or
 * `{ block: reason }` to refuse the call: the model reads the reason.
 */
export type BeforeHook = (call: HookCall) => Effect.Effect<BeforeResult | undefined, unknown>

/**
 * `tool.execute.after`: runs after a successful execution and may change the output (nothing:
 * unchanged; a string: the text the model reads).
 */
export type AfterHook = (call: HookCall, output: ToolOutput) => Effect.Effect<ToolOutput | string | undefined, unknown>

/**
 * A hook with its name in the log (`plugin:guard`, `hook:PreToolUse[0]`) and its bound: a run
 * past `timeoutMs` counts as failed (default: the registry's `hookTimeoutMs`).
 */
export interface NamedHook<F> {
  readonly source: string
  readonly timeoutMs?: number | undefined
  readonly run: F
}

/**
 * The hooks of the registry (docs/extensions.md): plain functions (named `tool.execute.before[i]` in the
 * log) or named ones. Each run is bounded; a before hook that throws, fails, times out or returns
 * something else than it may refuses its call; an after hook that does is skipped.
 */
export interface ToolHooks {
  readonly before?: ReadonlyArray<BeforeHook | NamedHook<BeforeHook>>
  readonly after?: ReadonlyArray<AfterHook | NamedHook<AfterHook>>
}

/**
 * A hook run that changed something, blocked a call, failed or timed out (an unchanged run is not
 * reported): what the kernel records as `hook.ran`.
 */
export interface HookRun {
  readonly source: string
  /** `tool.execute.before`, `tool.execute.after`, or another hook point's name */
  readonly hook: string
  readonly callId?: CallId | undefined
  readonly tool?: string | undefined
  readonly outcome: "changed" | "blocked" | "failed" | "timeout"
  readonly changed: boolean
  /** why it failed or timed out */
  readonly error?: string | undefined
  /** the reason a blocking hook gave */
  readonly reason?: string | undefined
  /** a before hook that changed the input: the input it was given (the next run's, or `tool.invoked`, holds what it made) */
  readonly input?: unknown
  readonly ms: number
}

/** The default timeout of a tool without its own (ms). */
export const DEFAULT_TOOL_TIMEOUT_MS = 120_000

export interface ToolsOptions {
  readonly tools: ReadonlyArray<AnyTool>
  /** tools that join after the registry is built (an MCP server's, when it is ready); see `LateTools` */
  readonly late?: LateTools["Type"] | undefined
  readonly hooks?: ToolHooks | undefined
  /** the bound of a hook run without its own (ms; default `DEFAULT_HOOK_TIMEOUT_MS`) */
  readonly hookTimeoutMs?: number | undefined
  /** timeout of a tool that does not set its own (default `DEFAULT_TOOL_TIMEOUT_MS`) */
  readonly defaultTimeoutMs?: number | undefined
}

/** A call whose input was decoded (before the hooks ran); or why it cannot run. */
export type DecodedCall =
  | { readonly _tag: "Decoded"; readonly tool: AnyTool; readonly input: unknown }
  | { readonly _tag: "Refused"; readonly error: string }

/**
 * A decoded call, ready to run; or why it cannot run (the model reads `error`). `hookRuns`: the
 * before hooks' runs to record (`hook.ran`) before the call's `tool.invoked` or `tool.failed`.
 */
export type PreparedCall =
  | {
      readonly _tag: "Ready"
      readonly tool: AnyTool
      readonly input: unknown
      readonly timeoutMs: number
      readonly hookRuns: ReadonlyArray<HookRun>
    }
  | { readonly _tag: "Refused"; readonly error: string; readonly hookRuns?: ReadonlyArray<HookRun> | undefined }

/** A successful call's output after the after hooks, and their runs to record (`hook.ran`). */
export interface FinishedOutput {
  readonly output: ToolOutput
  readonly hookRuns: ReadonlyArray<HookRun>
}

/** JSON Schema of a tool's input, as providers accept it (an object schema, no `$schema`). */
// biome-ignore lint/suspicious/noExplicitAny: any input Schema
export const inputJsonSchema = (schema: Schema.Schema<any, any, never>): Record<string, unknown> => {
  const { $schema: _ignored, ...rest } = JSONSchema.make(schema) as unknown as Record<string, unknown>
  return rest
}

const describeInput = (input: unknown): string => {
  const text = JSON.stringify(input)
  if (text === undefined) return "nothing"
  return text.length > 400 ? `${text.slice(0, 399)}…` : text
}

export class Tools extends Context.Tag("logbook/Tools")<
  Tools,
  {
    /** what the model is told about every tool */
    readonly definitions: ReadonlyArray<ModelTool>
    readonly get: (name: string) => Option.Option<AnyTool>
    /** waits until a late tool of this name would be there (its MCP server started or failed); at once otherwise */
    readonly awaitTool: (name: string) => Effect.Effect<void>
    /** the tool and its decoded input, or `Refused` with an error the model can act on (unknown tool, invalid input) */
    readonly decode: (call: HookCall) => DecodedCall
    /** the before hooks on a decoded call (`Refused` when one blocks it), and its timeout */
    readonly before: (
      call: HookCall,
      decoded: { readonly tool: AnyTool; readonly input: unknown }
    ) => Effect.Effect<PreparedCall>
    /** runs the after hooks on a successful output */
    readonly finish: (call: HookCall, output: ToolOutput) => Effect.Effect<FinishedOutput>
  }
>() {
  static readonly make = (options: ToolsOptions): Context.Tag.Service<Tools> => {
    const byName = new Map<string, AnyTool>()
    for (const tool of options.tools) {
      if (byName.has(tool.name)) throw new Error(`two tools are named "${tool.name}"`)
      byName.set(tool.name, tool)
    }
    const defaultTimeoutMs = options.defaultTimeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS
    const hookTimeoutMs = options.hookTimeoutMs ?? DEFAULT_HOOK_TIMEOUT_MS
    const before = namedHooks(options.hooks?.before ?? [], "tool.execute.before", hookTimeoutMs)
    const after = namedHooks(options.hooks?.after ?? [], "tool.execute.after", hookTimeoutMs)
    const names = () =>
      allTools()
        .map((tool) => tool.name)
        .sort()
        .join(", ")
    const allTools = (): ReadonlyArray<AnyTool> => {
      const extra = options.late?.current().filter((tool) => !byName.has(tool.name)) ?? []
      return extra.length === 0 ? Array.from(byName.values()) : [...byName.values(), ...extra]
    }
    const toModelTool = (tool: AnyTool): ModelTool => ({
      name: tool.name,
      description: tool.description,
      inputSchema: tool.inputSchema ?? inputJsonSchema(tool.input)
    })
    const fixed = Array.from(byName.values()).map(toModelTool)

    const late = options.late
    const lookup = (name: string): AnyTool | undefined =>
      byName.get(name) ??
      (late?.find === undefined ? late?.current().find((tool) => tool.name === name) : late.find(name))
    const decode = (call: HookCall): DecodedCall => {
      const tool = lookup(call.tool)
      if (tool === undefined) {
        const why = late?.unavailable?.(call.tool)
        if (why !== undefined) return { _tag: "Refused", error: `The tool "${call.tool}" is not available: ${why}` }
        return { _tag: "Refused", error: `Unknown tool "${call.tool}". The available tools are: ${names()}.` }
      }
      const decoded = ParseResult.decodeUnknownEither(tool.input, { onExcessProperty: "error" })(call.input)
      if (Either.isLeft(decoded)) {
        return {
          _tag: "Refused",
          error:
            `Invalid input for tool "${call.tool}": ${ParseResult.TreeFormatter.formatIssueSync(decoded.left)}\n` +
            `The input was: ${describeInput(call.input)}. Call the tool again with input that matches its schema.`
        }
      }
      return { _tag: "Decoded", tool, input: decoded.right }
    }

    const runBefore = (
      call: HookCall,
      decoded: { readonly tool: AnyTool; readonly input: unknown }
    ): Effect.Effect<PreparedCall> =>
      Effect.gen(function* () {
        const tool = decoded.tool
        const ran = yield* runBeforeHooks(before, { ...call, input: decoded.input }, (changed) => {
          const again = ParseResult.decodeUnknownEither(tool.input)(changed)
          return Either.isLeft(again)
            ? { ok: false, error: ParseResult.TreeFormatter.formatIssueSync(again.left) }
            : { ok: true, input: again.right }
        })
        if (ran._tag === "Refused") return { _tag: "Refused", error: ran.error, hookRuns: ran.runs }
        const input = ran.input
        const timeoutMs = Math.max(1, Math.floor(tool.timeoutMs?.(input) ?? defaultTimeoutMs))
        return { _tag: "Ready", tool, input, timeoutMs, hookRuns: ran.runs }
      })

    const finish = (call: HookCall, output: ToolOutput): Effect.Effect<FinishedOutput> =>
      Effect.map(runAfterHooks(after, call, output), (ran) => ({ output: ran.output, hookRuns: ran.runs }))

    return {
      // read at each request: late tools are offered from the first request after they joined
      get definitions() {
        const extra = allTools().slice(fixed.length)
        return extra.length === 0 ? fixed : [...fixed, ...extra.map(toModelTool)]
      },
      get: (name) => Option.fromNullable(lookup(name)),
      awaitTool: (name) => (byName.has(name) || late?.awaitTool === undefined ? Effect.void : late.awaitTool(name)),
      decode,
      before: runBefore,
      finish
    }
  }

  /**
   * The registry. Hooks come from `options.hooks` and, after them, from a `Hooks` service when the
   * program provides one (`Layer.provide(Hooks.layer({ before, after }))` around the agent's layer).
   */
  static readonly layer = (options: ToolsOptions): Layer.Layer<Tools> =>
    Layer.effect(
      Tools,
      Effect.map(Effect.all([Effect.serviceOption(Hooks), Effect.serviceOption(LateTools)]), ([provided, late]) =>
        Tools.make({
          ...options,
          ...(Option.isSome(late) && options.late === undefined ? { late: late.value } : {}),
          hooks: Option.match(provided, {
            onNone: () => options.hooks,
            onSome: (hooks) => combineHooks(options.hooks ?? {}, hooks)
          })
        })
      )
    )
}

/** Both sets of hooks, `first`'s before `second`'s. */
export const combineHooks = (first: ToolHooks, second: ToolHooks): ToolHooks => ({
  before: [...(first.before ?? []), ...(second.before ?? [])],
  after: [...(first.after ?? []), ...(second.after ?? [])]
})

/**
 * `tool.execute.before` / `tool.execute.after` hooks as a service (DESIGN §6): a program that embeds
 * logbook adds its hooks by providing this layer to the agent's layer. Optional: without it, only
 * the hooks given to `Tools.layer` run.
 */
export class Hooks extends Context.Tag("logbook/Hooks")<Hooks, ToolHooks>() {
  static readonly layer = (hooks: ToolHooks): Layer.Layer<Hooks> => Layer.succeed(Hooks, hooks)
}

/**
 * Tools that join the registry after it was built — an MCP server's, once the server has started
 * — as a service a program provides around the agent's layer, like `Hooks`. `current` is read at
 * each request and each call; a name the registry already has is ignored.
 */
export class LateTools extends Context.Tag("logbook/LateTools")<
  LateTools,
  {
    readonly current: () => ReadonlyArray<AnyTool>
    /** the tool a call names, when it may be one `current` does not offer now (default: looked up in `current`) */
    readonly find?: ((name: string) => AnyTool | undefined) | undefined
    /** waits until a tool of this name would be in `current` (its source is ready or failed) */
    readonly awaitTool?: ((name: string) => Effect.Effect<void>) | undefined
    /** why a tool of this name is not there (its source failed), for the model; undefined: not known */
    readonly unavailable?: ((name: string) => string | undefined) | undefined
  }
>() {}
