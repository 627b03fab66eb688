/**
 * The state of a session (DESIGN §2, §3, §4), as the projection folds it from the event log
 * (`Projection.ts` holds the fold's rules): its Schema (a snapshot is plain JSON and decodes with a
 * typed error), the empty state, and the reads every part makes of it (the calls and actions still
 * open). `PROJECTION_VERSION` is bumped whenever the shape or the rules change; snapshots of another
 * version are ignored and the state is rebuilt from the events.
 */
import { type Either, type ParseResult, Schema } from "effect"
import { ActionStateName, ChatStateName, SessionStatus, TodoItem } from "../domain/Events.js"
import { ActionId, CallId, MessageId, SessionId, TurnId } from "../domain/Ids.js"
import { emptyUsage, Message, ToolPart, type ToolState, Usage } from "../domain/Message.js"

/** The format version of `SessionState`; snapshots written with another version are ignored. */
export const PROJECTION_VERSION = 14

/** The open turn. */
export const Turn = Schema.Struct({
  turnId: TurnId,
  startedAt: Schema.Finite,
  /** the user messages `turn.started` delivered */
  messageIds: Schema.Array(MessageId)
})
export type Turn = typeof Turn.Type

/** How the last turn ended. */
export const TurnEnd = Schema.Struct({
  turnId: Schema.optional(TurnId),
  reason: Schema.String,
  interrupted: Schema.Boolean,
  at: Schema.Finite
})
export type TurnEnd = typeof TurnEnd.Type

/** An execution session (one batch of tool calls). */
export const ActionInfo = Schema.Struct({
  state: ActionStateName,
  callIds: Schema.Array(CallId),
  updatedAt: Schema.Finite
})
export type ActionInfo = typeof ActionInfo.Type

export const RetryInfo = Schema.Struct({
  attempt: Schema.Int,
  delayMs: Schema.Finite,
  nextAt: Schema.Finite,
  message: Schema.String,
  status: Schema.optional(Schema.Int),
  at: Schema.Finite
})
export type RetryInfo = typeof RetryInfo.Type

export const ModelErrorInfo = Schema.Struct({
  message: Schema.String,
  status: Schema.optional(Schema.Int),
  retryable: Schema.Boolean,
  at: Schema.Finite
})
export type ModelErrorInfo = typeof ModelErrorInfo.Type

export const PermissionReply = Schema.Literal("once", "always", "reject")
export type PermissionReply = typeof PermissionReply.Type

export const PermissionInfo = Schema.Struct({
  permissionId: Schema.String,
  callId: Schema.optional(CallId),
  tool: Schema.String,
  pattern: Schema.String,
  /** the path is outside the workspace (`external_directory`) */
  outside: Schema.optional(Schema.Boolean),
  askedAt: Schema.Finite,
  /** null while the ask is open */
  reply: Schema.NullOr(PermissionReply),
  repliedAt: Schema.optional(Schema.Finite)
})
export type PermissionInfo = typeof PermissionInfo.Type

/** What the agent last saw of a file: mtime, size and (when known) content hash. */
export const FileStampInfo = Schema.Struct({
  mtimeMs: Schema.Finite,
  size: Schema.NonNegativeInt,
  hash: Schema.optional(Schema.String)
})

/** The latest change of one file path. */
export const FileChange = Schema.Struct({
  op: Schema.Literal("create", "update", "delete"),
  beforeHash: Schema.optional(Schema.String),
  afterHash: Schema.optional(Schema.String),
  callId: Schema.optional(CallId),
  /** found by a workspace snapshot around a command, not recorded by a file tool */
  observed: Schema.optional(Schema.Boolean),
  /** recorded by the crash sweep from the call's `file.intent` (the process died before recording it) */
  recovered: Schema.optional(Schema.Boolean),
  seq: Schema.Int,
  at: Schema.Finite
})
export type FileChange = typeof FileChange.Type

/** The session's first workspace snapshot with a manifest (`workspace.snapshot {phase: "baseline"}`). */
export const WorkspaceBaseline = Schema.Struct({
  /** the blob of the manifest document (`WorkspaceSnapshot.restoreManifest` puts it back) */
  manifest: Schema.String,
  callId: Schema.optional(CallId),
  seq: Schema.Int,
  at: Schema.Finite
})
export type WorkspaceBaseline = typeof WorkspaceBaseline.Type

export const Compaction = Schema.Struct({
  upToMessageId: Schema.optional(MessageId),
  /** the index in `messages` of the first message sent after the summary (lowered when one before it is withdrawn) */
  keepFrom: Schema.NonNegativeInt,
  summary: Schema.String,
  at: Schema.Finite
})
export type Compaction = typeof Compaction.Type

/** A `model.switched`: where it falls among the messages, for showing it in the conversation. */
export const ModelSwitch = Schema.Struct({
  from: Schema.String,
  to: Schema.String,
  /** the index in `messages` of the first message after it (lowered when one before it is withdrawn) */
  beforeMessage: Schema.NonNegativeInt,
  seq: Schema.Int,
  at: Schema.Finite
})
export type ModelSwitch = typeof ModelSwitch.Type

export const SessionState = Schema.Struct({
  sessionId: SessionId,
  title: Schema.NullOr(Schema.String),
  cwd: Schema.NullOr(Schema.String),
  /**
   * the model the session is on: of `session.created`, then of the latest `model.switched` or
   * `assistant.started` that names one (what a resumed session continues with)
   */
  model: Schema.NullOr(Schema.String),
  /** every `model.switched`, in log order */
  modelSwitches: Schema.Array(ModelSwitch),
  /** `at` of the first event (0 before any) */
  createdAt: Schema.Finite,
  /** `at` of the latest event */
  updatedAt: Schema.Finite,
  lastSeq: Schema.Int,
  deleted: Schema.Boolean,
  /** user and assistant messages in log order */
  messages: Schema.Array(Message),
  /** the ToolPart state machine, one part per call; messages hold `{type: "tool", callId}` refs */
  toolParts: Schema.ReadonlyMapFromRecord({ key: CallId, value: ToolPart }),
  chatState: ChatStateName,
  status: SessionStatus,
  actions: Schema.ReadonlyMapFromRecord({ key: ActionId, value: ActionInfo }),
  /** usage summed over every `step.finished` */
  totals: Usage,
  turn: Schema.NullOr(Turn),
  lastTurn: Schema.NullOr(TurnEnd),
  /** mode `queue` user messages not yet delivered, oldest first */
  queued: Schema.Array(MessageId),
  lastRetry: Schema.NullOr(RetryInfo),
  lastError: Schema.NullOr(ModelErrorInfo),
  permissions: Schema.Record({ key: Schema.String, value: PermissionInfo }),
  files: Schema.Record({ key: Schema.String, value: FileChange }),
  /**
   * the first workspace baseline of the session: the workspace before its first command, as a
   * manifest (the changes of file tools before it are in `file.changed`)
   */
  workspaceBaseline: Schema.NullOr(WorkspaceBaseline),
  /** the agent's task list (the latest `todo.updated`) */
  todos: Schema.Array(TodoItem),
  /**
   * real path -> what the agent last saw of the file (`tool.finished` `reads`): `edit` and `write`
   * refuse a file changed on disk since, also in a later process
   */
  reads: Schema.ReadonlyMapFromRecord({ key: Schema.String, value: FileStampInfo }),
  compaction: Schema.NullOr(Compaction),
  /** prompt version -> the blob of its prompt document (`prompt.recorded`): what is recorded once */
  prompts: Schema.Record({ key: Schema.String, value: Schema.String })
})
export type SessionState = typeof SessionState.Type
export type SessionStateEncoded = typeof SessionState.Encoded

/** An illegal event for the state it is applied to: the log (or the caller) is inconsistent. */
export class ProjectionError extends Schema.TaggedError<ProjectionError>()("ProjectionError", {
  sessionId: Schema.String,
  seq: Schema.Finite,
  type: Schema.String,
  message: Schema.String
}) {}

/** The state of a session before its first event. */
export const empty = (sessionId: SessionId): SessionState => ({
  sessionId,
  title: null,
  cwd: null,
  model: null,
  modelSwitches: [],
  createdAt: 0,
  updatedAt: 0,
  lastSeq: 0,
  deleted: false,
  messages: [],
  toolParts: new Map(),
  chatState: "idle",
  status: { _tag: "idle" },
  actions: new Map(),
  totals: emptyUsage,
  turn: null,
  lastTurn: null,
  queued: [],
  lastRetry: null,
  lastError: null,
  permissions: {},
  files: {},
  workspaceBaseline: null,
  todos: [],
  reads: new Map(),
  compaction: null,
  prompts: {}
})

/** Decodes a snapshot's JSON state. */
export const decodeState = (json: unknown): Either.Either<SessionState, ParseResult.ParseError> =>
  Schema.decodeUnknownEither(SessionState)(json)

/** Encodes a state to a JSON-ready value (the identity on a valid state, validated). */
export const encodeState = (state: SessionState): Either.Either<SessionStateEncoded, ParseResult.ParseError> =>
  Schema.encodeEither(SessionState)(state)

/**
 * The state as JSON-ready data: the encoding of `SessionState` without running the Schema — its
 * only transformations are the per-call maps (`toolParts`, `actions`, `reads`: `ReadonlyMap`s in
 * the state, so the fold can copy one in a few microseconds where a record of thousands of keys
 * took half a millisecond, records in JSON), and those are turned into records here. Snapshots are
 * saved with it (a property test checks it equals `encodeState` on random sessions).
 */
export const toJsonState = (state: SessionState): SessionStateEncoded => ({
  ...(state as Omit<SessionState, "toolParts" | "actions" | "reads">),
  toolParts: recordOf(state.toolParts) as SessionStateEncoded["toolParts"],
  actions: recordOf(state.actions) as SessionStateEncoded["actions"],
  reads: recordOf(state.reads)
})

/** A map's entries as a record (a loop: `Object.fromEntries` is slow on its first, cold call). */
const recordOf = <V>(map: ReadonlyMap<string, V>): Record<string, V> => {
  const out: Record<string, V> = {}
  for (const [key, value] of map) out[key] = value
  return out
}

/**
 * The state from JSON-ready data `toJsonState` made (an intact snapshot: the fold made it, so
 * decoding would only repeat the fold's checks): the records of the per-call maps become maps
 * again. `undefined` when it is not such data (no per-call records).
 */
export const fromJsonState = (json: unknown): SessionState | undefined => {
  if (typeof json !== "object" || json === null) return undefined
  const { toolParts, actions, reads } = json as Partial<Record<"toolParts" | "actions" | "reads", unknown>>
  const isRecord = (value: unknown): value is object => typeof value === "object" && value !== null
  if (!isRecord(toolParts) || !isRecord(actions) || !isRecord(reads)) return undefined
  return {
    ...json,
    toolParts: new Map(Object.entries(toolParts)),
    actions: new Map(Object.entries(actions)),
    reads: new Map(Object.entries(reads))
  } as unknown as SessionState
}

/** Tool parts in `completed` or `error` never change again. */
export const isToolFinal = (state: ToolState): boolean => state._tag === "completed" || state._tag === "error"

/**
 * The end of the run of settled messages from `from` on: a user message once delivered, an
 * assistant message once it ended and every call of it has. Later events leave a settled message as
 * it is; the first one not settled ends the run (what follows it stays in order).
 */
export const settledUpTo = (state: SessionState, from: number): number => {
  let i = from
  for (; i < state.messages.length; i++) {
    const message = state.messages[i]!
    if (message.role === "user") {
      if (!message.delivered) break
      continue
    }
    if (message.completedAt === undefined && message.interrupted === undefined) break
    const open = message.parts.some((part) => {
      if (part.type !== "tool") return false
      const tool = state.toolParts.get(part.callId)
      return tool === undefined || !isToolFinal(tool.state)
    })
    if (open) break
  }
  return i
}

/** Tool parts still `pending` or `running` (what a cleanup or the crash sweep must end). */
export const openToolParts = (state: SessionState): ReadonlyArray<ToolPart> =>
  Array.from(state.toolParts.values()).filter((part) => !isToolFinal(part.state))

/** Actions still `pending` or `running`. */
export const openActions = (state: SessionState): ReadonlyArray<readonly [ActionId, ActionInfo]> =>
  Array.from(state.actions).filter(([, action]) => action.state === "pending" || action.state === "running")
