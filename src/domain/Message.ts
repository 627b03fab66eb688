/**
 * The message / part model that the projection builds from events (DESIGN §3).
 */
import { Schema } from "effect"
import { CallId, MessageId, PartId, TurnId } from "./Ids.js"

/** Token usage of one model step, or a sum of steps. */
export const Usage = Schema.Struct({
  input: Schema.NonNegativeInt,
  output: Schema.NonNegativeInt,
  reasoning: Schema.NonNegativeInt,
  cacheRead: Schema.NonNegativeInt,
  cacheWrite: Schema.NonNegativeInt,
  /** cost in US dollars: the whole cost, or only what the priced tokens cost when `costKnown` is false */
  cost: Schema.NonNegative.pipe(Schema.finite()),
  /**
   * `false` when tokens were used whose price is not known (the model has no price in the config or
   * the catalog): `cost` is then a lower bound. Absent means known (logs written before it existed
   * priced every step they counted). A sum is known only when every step in it is.
   */
  costKnown: Schema.optional(Schema.Boolean)
})
export type Usage = typeof Usage.Type

export const emptyUsage: Usage = { input: 0, output: 0, reasoning: 0, cacheRead: 0, cacheWrite: 0, cost: 0 }

/** Whether `usage.cost` is the whole cost (see `Usage.costKnown`). */
export const isCostKnown = (usage: Usage): boolean => usage.costKnown !== false

export const addUsage = (a: Usage, b: Usage): Usage => ({
  input: a.input + b.input,
  output: a.output + b.output,
  reasoning: a.reasoning + b.reasoning,
  cacheRead: a.cacheRead + b.cacheRead,
  cacheWrite: a.cacheWrite + b.cacheWrite,
  cost: a.cost + b.cost,
  ...(isCostKnown(a) && isCostKnown(b) ? {} : { costKnown: false })
})

export const UserMode = Schema.Literal("prompt", "steer", "queue")
export type UserMode = typeof UserMode.Type

/**
 * The ToolPart state machine (DESIGN §3):
 * `pending -> running -> completed | error`, and `pending -> error` on cleanup.
 * `completed` and `error` are final.
 */
export const ToolPending = Schema.TaggedStruct("pending", {
  /** the raw input text streamed so far */
  inputText: Schema.String,
  createdAt: Schema.Finite,
  /** the whole input, once a question about the call (`permission.asked`) recorded it */
  input: Schema.optional(Schema.Unknown)
})
export const ToolRunning = Schema.TaggedStruct("running", {
  input: Schema.Unknown,
  startedAt: Schema.Finite,
  /** the latest progress text, if any */
  progress: Schema.optional(Schema.String),
  /** set by `tool.timeout` while the tool is being stopped */
  timedOut: Schema.Boolean,
  /** the process groups it started (`tool.process`), stopped by the crash sweep of a later run */
  processes: Schema.optional(
    Schema.Array(
      Schema.Struct({
        pgid: Schema.Int,
        token: Schema.optional(Schema.String)
      })
    )
  ),
  /**
   * the file changes it announced (`file.intent`) — `recorded` once their `file.changed` is written —
   * and not settled by the crash sweep (`file.recovered`): what the sweep of a later run checks on disk
   */
  intents: Schema.optional(
    Schema.Array(
      Schema.Struct({
        path: Schema.String,
        op: Schema.Literal("create", "update"),
        beforeHash: Schema.optional(Schema.String),
        afterHash: Schema.String,
        temp: Schema.String,
        recorded: Schema.optional(Schema.Boolean)
      })
    )
  )
})
export const ToolCompleted = Schema.TaggedStruct("completed", {
  input: Schema.Unknown,
  output: Schema.String,
  metadata: Schema.optional(Schema.Unknown),
  startedAt: Schema.Finite,
  endedAt: Schema.Finite
})
export const ToolError = Schema.TaggedStruct("error", {
  input: Schema.Unknown,
  error: Schema.String,
  interrupted: Schema.Boolean,
  timedOut: Schema.Boolean,
  reason: Schema.optional(Schema.String),
  startedAt: Schema.optional(Schema.Finite),
  endedAt: Schema.Finite
})
export const ToolState = Schema.Union(ToolPending, ToolRunning, ToolCompleted, ToolError)

/**
 * The exit of a finished call's command when it failed: the non-zero `exitCode` (and `signal`) its
 * metadata names. A command that exits non-zero is a result the model reads, not a tool error, but
 * everything that shows or counts calls treats it as a failed call.
 */
export const failedExit = (metadata: unknown): { readonly code: number; readonly signal?: string } | undefined => {
  if (typeof metadata !== "object" || metadata === null) return undefined
  const { exitCode, signal } = metadata as { exitCode?: unknown; signal?: unknown }
  if (typeof exitCode !== "number" || !Number.isFinite(exitCode) || exitCode === 0) return undefined
  return typeof signal === "string" ? { code: exitCode, signal } : { code: exitCode }
}
export type ToolState = typeof ToolState.Type
export type ToolStatus = ToolState["_tag"]

/** A hook run on a call that changed, blocked or failed it (`hook.ran`), as the call shows it. */
export const ToolPartHook = Schema.Struct({
  source: Schema.String,
  hook: Schema.String,
  outcome: Schema.Literal("changed", "blocked", "failed", "timeout"),
  error: Schema.optional(Schema.String),
  reason: Schema.optional(Schema.String)
})
export type ToolPartHook = typeof ToolPartHook.Type

export const ToolPart = Schema.Struct({
  type: Schema.Literal("tool"),
  callId: CallId,
  tool: Schema.String,
  messageId: MessageId,
  state: ToolState,
  /** its output is left out of what is sent to the model (`context.pruned`); it stays in the log */
  pruned: Schema.optional(Schema.Boolean),
  /** the hook runs that changed, blocked or failed on it, in log order */
  hooks: Schema.optional(Schema.Array(ToolPartHook))
})
export type ToolPart = typeof ToolPart.Type

/** `step`: the model step that produced the part (absent when no step was open). */
export const TextPart = Schema.Struct({
  type: Schema.Literal("text"),
  id: PartId,
  text: Schema.String,
  step: Schema.optional(Schema.NonNegativeInt)
})
export type TextPart = typeof TextPart.Type

/**
 * What a provider attached to a reasoning part so it can be sent back unchanged (an Anthropic
 * thinking block's `signature`, a redacted block's `redactedData` …), keyed by the SDK's provider
 * name (`anthropic`, or an openai-compatible provider's id). Opaque JSON.
 */
export const ProviderMetadata = Schema.Record({
  key: Schema.String,
  value: Schema.Record({ key: Schema.String, value: Schema.Unknown })
})
export type ProviderMetadata = typeof ProviderMetadata.Type

/** Merges `next` into `base` per provider key (a later value of a key wins). */
export const mergeProviderMetadata = (
  base: ProviderMetadata | undefined,
  next: ProviderMetadata | undefined
): ProviderMetadata | undefined => {
  if (next === undefined) return base
  if (base === undefined) return next
  const out: Record<string, Readonly<Record<string, unknown>>> = { ...base }
  for (const [key, value] of Object.entries(next)) out[key] = { ...out[key], ...value }
  return out
}

export const ReasoningPart = Schema.Struct({
  type: Schema.Literal("reasoning"),
  id: PartId,
  text: Schema.String,
  step: Schema.optional(Schema.NonNegativeInt),
  /** the provider's metadata of the part (`reasoning.delta` `metadata`, merged), for sending it back */
  metadata: Schema.optional(ProviderMetadata)
})
export type ReasoningPart = typeof ReasoningPart.Type

/** A reference to the tool part kept in `SessionState.toolParts`, in message order. */
export const ToolPartRef = Schema.Struct({
  type: Schema.Literal("tool"),
  callId: CallId,
  step: Schema.optional(Schema.NonNegativeInt)
})
export type ToolPartRef = typeof ToolPartRef.Type

export const AssistantPart = Schema.Union(TextPart, ReasoningPart, ToolPartRef)
export type AssistantPart = typeof AssistantPart.Type

export const StepInfo = Schema.Struct({
  step: Schema.NonNegativeInt,
  startedAt: Schema.Finite,
  endedAt: Schema.optional(Schema.Finite),
  finishReason: Schema.optional(Schema.String),
  usage: Schema.optional(Usage),
  aborted: Schema.Boolean
})
export type StepInfo = typeof StepInfo.Type

export const UserMessage = Schema.Struct({
  role: Schema.Literal("user"),
  id: MessageId,
  text: Schema.String,
  mode: UserMode,
  /** what hooks added to the message, sent to the model after `text` (`user.message` `context`) */
  context: Schema.optional(Schema.String),
  at: Schema.Finite,
  /** false while a steered or queued message waits for delivery to the model */
  delivered: Schema.Boolean
})
export type UserMessage = typeof UserMessage.Type

export const AssistantMessage = Schema.Struct({
  role: Schema.Literal("assistant"),
  id: MessageId,
  model: Schema.optional(Schema.String),
  startedAt: Schema.Finite,
  completedAt: Schema.optional(Schema.Finite),
  finishReason: Schema.optional(Schema.String),
  /** the turn it answers (absent: started outside a turn) */
  turnId: Schema.optional(TurnId),
  /** its turn was interrupted, and why (`turn.interrupted`'s reason: `user`, `crash`, `shutdown` …) */
  interrupted: Schema.optional(Schema.String),
  parts: Schema.Array(AssistantPart),
  steps: Schema.Array(StepInfo),
  usage: Usage
})
export type AssistantMessage = typeof AssistantMessage.Type

export const Message = Schema.Union(UserMessage, AssistantMessage)
export type Message = typeof Message.Type
