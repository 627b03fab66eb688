/**
 * The event log's vocabulary (DESIGN §2): the envelope and one Schema per v1 event type.
 *
 * An event is `{ type, payload }`; the store wraps it in an envelope (`id`, `sessionId`, `seq`,
 * `at`, `parentId`, `v`). Decoding an unknown type or a malformed payload gives an
 * `EventDecodeError`, never a crash.
 */
import { Either, ParseResult, Schema } from "effect"
import { ActionId, CallId, EventId, MessageId, PartId, SessionId, TurnId } from "./Ids.js"
import { ProviderMetadata, Usage, UserMode } from "./Message.js"

const event = <T extends string, F extends Schema.Struct.Fields>(type: T, fields: F) =>
  Schema.Struct({ type: Schema.Literal(type), payload: Schema.Struct(fields) })

// ---------------------------------------------------------------------------------------------
// session

export const SessionCreated = event("session.created", {
  title: Schema.optional(Schema.String),
  /** the workspace directory the session works in */
  cwd: Schema.optional(Schema.String),
  model: Schema.optional(Schema.String),
  /**
   * the session is a re-run of another (`logbook rerun`): its id, and — for a fork — the request
   * (1-based, as `logbook replay --step` counts) from which it went on live
   */
  rerunOf: Schema.optional(
    Schema.Struct({ sessionId: Schema.String, fromRequest: Schema.optional(Schema.Int.pipe(Schema.positive())) })
  )
})
export const SessionTitled = event("session.titled", { title: Schema.String })
export const SessionDeleted = event("session.deleted", {})

export const StatusIdle = Schema.TaggedStruct("idle", {})
export const StatusBusy = Schema.TaggedStruct("busy", {})
export const StatusRetry = Schema.TaggedStruct("retry", {
  attempt: Schema.Int,
  /** UTC epoch ms of the next attempt */
  nextAt: Schema.Finite,
  message: Schema.String
})
export const SessionStatus = Schema.Union(StatusIdle, StatusBusy, StatusRetry)
export type SessionStatus = typeof SessionStatus.Type
export const SessionStatusChanged = event("session.status", { status: SessionStatus })

// ---------------------------------------------------------------------------------------------
// turns and messages

export const UserMessageEvent = event("user.message", {
  messageId: MessageId,
  text: Schema.String,
  mode: UserMode,
  /** what hooks added to the message (UserPromptSubmit, SessionStart): sent to the model after `text` */
  context: Schema.optional(Schema.String)
})
/**
 * A user message taken back before it was delivered (to edit it and send it again, or not): it is
 * no longer part of the conversation; the log keeps both events.
 */
export const UserWithdrawn = event("user.withdrawn", { messageId: MessageId })
export const TurnStarted = event("turn.started", {
  turnId: TurnId,
  /** the user messages this turn delivers to the model */
  messageIds: Schema.Array(MessageId)
})
export const TurnFinished = event("turn.finished", {
  turnId: TurnId,
  /** why the turn ended: `stop`, `max-steps`, `error` */
  reason: Schema.String
})
export const TurnInterrupted = event("turn.interrupted", {
  turnId: Schema.optional(TurnId),
  /** `user`, `crash`, `shutdown` … */
  reason: Schema.String
})

export const ChatStateName = Schema.Literal("idle", "streaming", "awaiting_tool", "interrupted")
export type ChatStateName = typeof ChatStateName.Type
export const ChatStateChanged = event("chat.state", { state: ChatStateName })

export const AssistantStarted = event("assistant.started", {
  messageId: MessageId,
  model: Schema.optional(Schema.String)
})
export const StepStarted = event("step.started", {
  messageId: MessageId,
  step: Schema.NonNegativeInt,
  /** steered user messages delivered with this step */
  deliveredMessageIds: Schema.optional(Schema.Array(MessageId))
})
export const TextDelta = event("text.delta", { messageId: MessageId, partId: PartId, delta: Schema.String })
export const ReasoningDelta = event("reasoning.delta", {
  messageId: MessageId,
  partId: PartId,
  delta: Schema.String,
  /**
   * what the provider attached to the part so it can be sent back (a thinking block's signature,
   * redacted thinking's data), merged per provider key into the part's; a delta may be empty when
   * it carries only this
   */
  metadata: Schema.optional(ProviderMetadata)
})
export const StepFinished = event("step.finished", {
  messageId: MessageId,
  step: Schema.NonNegativeInt,
  finishReason: Schema.String,
  usage: Usage,
  /** true when the step was cut (retryable failure, interrupt); its partial output is not sent again */
  aborted: Schema.optional(Schema.Boolean),
  /**
   * the prompt version of the request the step sent (system prompt and tool schemas, see
   * `prompt.recorded`); absent in logs of older versions and in a step the crash sweep ended
   */
  promptVersion: Schema.optional(Schema.String),
  /**
   * the digest of the request the step sent (its prompt and its messages, `requestDigestOf`), so a
   * replay can prove it rebuilt that request; absent in older logs and when no request was sent
   */
  requestDigest: Schema.optional(Schema.String)
})
export const AssistantCompleted = event("assistant.completed", {
  messageId: MessageId,
  finishReason: Schema.optional(Schema.String)
})

// ---------------------------------------------------------------------------------------------
// tools

export const ToolPendingEvent = event("tool.pending", { messageId: MessageId, callId: CallId, tool: Schema.String })
/** ToolCallInvoked: committed before the tool runs (write-ahead). */
export const ToolInvoked = event("tool.invoked", {
  messageId: MessageId,
  callId: CallId,
  tool: Schema.String,
  input: Schema.Unknown
})
export const ToolProgress = event("tool.progress", { callId: CallId, output: Schema.String })
/** A process group a running call started (a command), for stopping it after a crash. */
export const ToolProcess = event("tool.process", {
  callId: CallId,
  /** the group's id: its leader's pid */
  pgid: Schema.Int,
  /** a random token in the environment of the group's processes (`LOGBOOK_PROCESS_TOKEN`): tells them from a reused id */
  token: Schema.optional(Schema.String)
})
/** What the agent saw of a file when a tool read (or wrote) it: its real path, mtime, size and hash. */
export const FileRead = Schema.Struct({
  path: Schema.String,
  mtimeMs: Schema.Finite,
  size: Schema.NonNegativeInt,
  hash: Schema.optional(Schema.String)
})
export type FileRead = typeof FileRead.Type

/** ToolCallFinished */
export const ToolFinished = event("tool.finished", {
  callId: CallId,
  output: Schema.String,
  metadata: Schema.optional(Schema.Unknown),
  /** the files the call read or wrote, as it left them (so a later edit can tell they are unchanged) */
  reads: Schema.optional(Schema.Array(FileRead))
})
export const ToolFailed = event("tool.failed", {
  callId: CallId,
  error: Schema.String,
  interrupted: Schema.optional(Schema.Boolean),
  timedOut: Schema.optional(Schema.Boolean),
  /** for interrupted calls: `user`, `crash`, `shutdown` … */
  reason: Schema.optional(Schema.String),
  /** what the tool recorded of a call stopped before it returned (a command's exit code, output blob …) */
  metadata: Schema.optional(Schema.Unknown),
  /** the files the call read or wrote before it failed (an edit that wrote, then timed out) */
  reads: Schema.optional(Schema.Array(FileRead)),
  /**
   * a call refused before it ran (denied, rejected, an unknown tool, invalid arguments): its input as
   * the model sent it, which no `tool.invoked` holds; absent in older logs
   */
  input: Schema.optional(Schema.Unknown),
  /** a refused call whose input was not JSON: the text the model sent (cut at `MAX_INPUT_TEXT`) */
  inputText: Schema.optional(Schema.String)
})
export const ToolTimeout = event("tool.timeout", { callId: CallId, timeoutMs: Schema.NonNegativeInt })
/**
 * A hook run that changed a call's input or output, blocked the call, failed or timed out (an
 * unchanged run is not recorded): committed by the kernel from what the hook returned, before the
 * call's `tool.invoked` (a before hook) or with its `tool.finished` (an after hook). docs/extensions.md.
 */
export const HookRan = event("hook.ran", {
  /** whose hook: `plugin:<name>`, `hook:PreToolUse[0]`, `tool.execute.before[0]` (a library hook) */
  source: Schema.String,
  /** the hook point: `tool.execute.before`, `tool.execute.after`, … */
  hook: Schema.String,
  callId: Schema.optional(CallId),
  /** the tool of the call */
  tool: Schema.optional(Schema.String),
  outcome: Schema.Literal("changed", "blocked", "failed", "timeout"),
  changed: Schema.Boolean,
  /** why it failed or timed out */
  error: Schema.optional(Schema.String),
  /** the reason a blocking hook gave (the model reads it) */
  reason: Schema.optional(Schema.String),
  /** a before hook that changed the input: the input it was given */
  input: Schema.optional(Schema.Unknown),
  /** how long it ran */
  ms: Schema.NonNegative.pipe(Schema.finite())
})

export const ActionStateName = Schema.Literal("pending", "running", "archived", "failed")
export type ActionStateName = typeof ActionStateName.Type
export const ActionStateChanged = event("action.state", {
  actionId: ActionId,
  state: ActionStateName,
  callIds: Schema.Array(CallId)
})

// ---------------------------------------------------------------------------------------------
// model

export const ModelRetry = event("model.retry", {
  attempt: Schema.Int,
  delayMs: Schema.NonNegative.pipe(Schema.finite()),
  nextAt: Schema.Finite,
  message: Schema.String,
  status: Schema.optional(Schema.Int)
})
export const ModelErrorEvent = event("model.error", {
  /** the sentence the user sees: what went wrong, what to check, the provider's own words */
  message: Schema.String,
  status: Schema.optional(Schema.Int),
  retryable: Schema.Boolean,
  /** what the provider said (its error body's message: one line, capped, keys masked); absent in older logs */
  providerMessage: Schema.optional(Schema.String)
})
/**
 * The session goes on with another model than the one it last used (`session.created`'s, the last
 * `model.switched`'s or `assistant.started`'s): committed before the first request sent to `to`.
 */
export const ModelSwitched = event("model.switched", {
  /** `provider/model` the session was on */
  from: Schema.String,
  /** `provider/model` it goes on with */
  to: Schema.String
})
/**
 * The prompt a session's requests were sent with, once per prompt version and session, before the
 * first request that uses it: `blob` holds the prompt document (system prompt and tool schemas, as
 * canonical JSON), whose SHA-256 begins with `promptVersion` (`session/PromptVersion.ts`).
 */
export const PromptRecorded = event("prompt.recorded", {
  /** the first 16 hex digits of the SHA-256 of the prompt document */
  promptVersion: Schema.String,
  /** the blob (its full SHA-256) of the prompt document */
  blob: Schema.String
})

// ---------------------------------------------------------------------------------------------
// permissions, files, compaction

export const PermissionAsked = event("permission.asked", {
  permissionId: Schema.String,
  callId: Schema.optional(CallId),
  tool: Schema.String,
  pattern: Schema.String,
  /** the path (`pattern`) is outside the workspace: `external_directory` was asked */
  outside: Schema.optional(Schema.Boolean),
  /**
   * the call's input as the model sent it: kept while the question waits, so a crash before the
   * answer (whose sweep ends the call) does not lose what the model tried; absent in older logs
   */
  input: Schema.optional(Schema.Unknown)
})
export const PermissionReplied = event("permission.replied", {
  permissionId: Schema.String,
  reply: Schema.Literal("once", "always", "reject"),
  /** a rejection's message from the user to the model: what to do instead */
  message: Schema.optional(Schema.String),
  /** the ask ended unanswered: the turn was interrupted (or the process crashed) while it waited */
  interrupted: Schema.optional(Schema.Boolean),
  /** who rejected it when it was not the user: a policy (`logbook run` without a terminal) */
  by: Schema.optional(Schema.String)
})
/** Why a content of a change observed by a workspace snapshot is not in the blob store (docs/workspace.md). */
export const ContentOmitted = Schema.Literal("too-large", "budget", "time", "unreadable")
export type ContentOmitted = typeof ContentOmitted.Type
/**
 * A file a call changed: recorded by the file tool that changed it (`write`, `edit`), or — with
 * `observed: true` — found by the workspace snapshots taken around a call that may change files
 * without saying which (a command, docs/workspace.md). `beforeHash` / `afterHash` name blobs,
 * except on a side marked `beforeOmitted` / `afterOmitted`: its content is not stored, and its hash
 * (when present) is the SHA-256 of the file's bytes.
 */
export const FileChanged = event("file.changed", {
  path: Schema.String,
  op: Schema.Literal("create", "update", "delete"),
  beforeHash: Schema.optional(Schema.String),
  afterHash: Schema.optional(Schema.String),
  callId: Schema.optional(CallId),
  /** found by the workspace snapshot after the call, not recorded by a file tool */
  observed: Schema.optional(Schema.Boolean),
  beforeSize: Schema.optional(Schema.NonNegativeInt),
  afterSize: Schema.optional(Schema.NonNegativeInt),
  beforeOmitted: Schema.optional(ContentOmitted),
  afterOmitted: Schema.optional(ContentOmitted),
  /**
   * recorded by the crash sweep of a later run from the call's `file.intent`: the process died after
   * it replaced the file and before it recorded the change, and the file held the intended content
   */
  recovered: Schema.optional(Schema.Boolean)
})
/**
 * A change a file tool (`write`, `edit`) is about to make, committed before it writes anything
 * (write-ahead, like `tool.invoked`): the path and op as `file.changed` will name them, the blobs of
 * the content before (absent for a create) and of the content it will write, and the temporary file
 * it will write first and rename over the path. Settled by the call's `file.changed`; by its end
 * (`tool.finished` / `tool.failed`: the write failed, its temporary file removed); or, when the
 * process died in between, by the crash sweep's `file.recovered`.
 */
export const FileIntent = event("file.intent", {
  callId: CallId,
  path: Schema.String,
  op: Schema.Literal("create", "update"),
  beforeHash: Schema.optional(Schema.String),
  afterHash: Schema.String,
  /** the temporary file, logged as `path` is (relative to the workspace when inside) */
  temp: Schema.String
})
/**
 * What the crash sweep found of a `file.intent` its call left unsettled (the process died between
 * the intent and the change's record): `applied` — the file holds the intended content (a
 * `file.changed {recovered: true}` comes just before); `not-applied` — it holds the content before
 * (or, for a create, does not exist); `changed` — neither: something else changed it after the
 * intent (`hash`: the SHA-256 of what it holds, absent when it is gone); `unreadable` — it could
 * not be read (`error`). `tempRemoved`: the intent's temporary file was there and was removed.
 */
export const FileRecoveryOutcome = Schema.Literal("applied", "not-applied", "changed", "unreadable")
export type FileRecoveryOutcome = typeof FileRecoveryOutcome.Type
export const FileRecovered = event("file.recovered", {
  callId: CallId,
  path: Schema.String,
  op: Schema.Literal("create", "update"),
  outcome: FileRecoveryOutcome,
  hash: Schema.optional(Schema.String),
  error: Schema.optional(Schema.String),
  tempRemoved: Schema.optional(Schema.Boolean)
})
/** A bound a workspace snapshot hit, and how many files it affected. */
export const SnapshotLimitHit = Schema.Struct({
  limit: Schema.Literal("fileBytes", "totalBytes", "time", "files"),
  files: Schema.NonNegativeInt
})
/**
 * A workspace snapshot around a call that may change files without recording them (docs/workspace.md).
 * `baseline`: the first snapshot of the session in this process (before the call ran); `manifest`
 * is the blob of its manifest document (path → blob, mode), from which the workspace can be
 * restored. `after`: the snapshot after the call ended (finished, failed, timed out or
 * interrupted); `changed` files were recorded as `file.changed {observed: true}` just before it.
 */
export const WorkspaceSnapshotTaken = event("workspace.snapshot", {
  callId: Schema.optional(CallId),
  phase: Schema.Literal("baseline", "after"),
  manifest: Schema.optional(Schema.String),
  /** files the snapshot tracks */
  files: Schema.NonNegativeInt,
  /** files the call created, changed or deleted (`after`) */
  changed: Schema.optional(Schema.NonNegativeInt),
  /** the bounds it hit: what it could not store or see */
  limits: Schema.optional(Schema.Array(SnapshotLimitHit)),
  /** the snapshot could not be taken (the workspace unreadable): changes of this call are unknown */
  error: Schema.optional(Schema.String)
})
export const TodoStatus = Schema.Literal("pending", "in_progress", "completed", "cancelled")
export type TodoStatus = typeof TodoStatus.Type
export const TodoItem = Schema.Struct({ content: Schema.String, status: TodoStatus })
export type TodoItem = typeof TodoItem.Type
/** The agent's task list for the session, replaced as a whole by the `todo` tool. */
export const TodoUpdated = event("todo.updated", {
  items: Schema.Array(TodoItem),
  callId: Schema.optional(CallId)
})
export const CompactionTrigger = Schema.Literal("auto", "overflow", "manual")
export type CompactionTrigger = typeof CompactionTrigger.Type
/**
 * The conversation before `upToMessageId` (all of it when absent) is replaced, in what is sent to
 * the model from now on, by `summary`; the messages themselves stay in the log.
 */
export const CompactionDone = event("compaction.done", {
  /** messages before this one are summarised; absent: every message before this event */
  upToMessageId: Schema.optional(MessageId),
  summary: Schema.String,
  /** why: the next request would not fit (`auto`), the provider said it did not (`overflow`), asked (`manual`) */
  trigger: Schema.optional(CompactionTrigger),
  /** how many messages the summary covers */
  messages: Schema.optional(Schema.NonNegativeInt),
  /** the estimated tokens of the next request before and after */
  tokensBefore: Schema.optional(Schema.NonNegativeInt),
  tokensAfter: Schema.optional(Schema.NonNegativeInt),
  /** the summary request's usage and cost (in the session's totals) */
  usage: Schema.optional(Usage),
  model: Schema.optional(Schema.String)
})
/**
 * The outputs of these calls are left out of what is sent to the model from now on (a one-line note
 * naming the call stands in); the outputs stay in the log.
 */
export const ContextPruned = event("context.pruned", {
  callIds: Schema.Array(CallId),
  /** the estimated tokens of the next request before and after */
  tokensBefore: Schema.optional(Schema.NonNegativeInt),
  tokensAfter: Schema.optional(Schema.NonNegativeInt)
})

/** Every v1 event, discriminated by `type`. */
export const Event = Schema.Union(
  SessionCreated,
  SessionTitled,
  SessionDeleted,
  SessionStatusChanged,
  UserMessageEvent,
  UserWithdrawn,
  TurnStarted,
  TurnFinished,
  TurnInterrupted,
  ChatStateChanged,
  AssistantStarted,
  StepStarted,
  TextDelta,
  ReasoningDelta,
  StepFinished,
  AssistantCompleted,
  ToolPendingEvent,
  ToolInvoked,
  ToolProgress,
  ToolFinished,
  ToolFailed,
  ToolProcess,
  ToolTimeout,
  HookRan,
  ActionStateChanged,
  ModelRetry,
  ModelErrorEvent,
  ModelSwitched,
  PromptRecorded,
  PermissionAsked,
  PermissionReplied,
  FileChanged,
  FileIntent,
  FileRecovered,
  WorkspaceSnapshotTaken,
  TodoUpdated,
  CompactionDone,
  ContextPruned
)
export type Event = typeof Event.Type
export type EventType = Event["type"]
export type EventOf<T extends EventType> = Extract<Event, { readonly type: T }>
export type PayloadOf<T extends EventType> = EventOf<T>["payload"]

const schemaByType: ReadonlyMap<string, Schema.Schema<unknown, unknown>> = new Map(
  Event.members.map((m) => [m.fields.type.literals[0] as string, m.fields.payload as Schema.Schema<unknown, unknown>])
)

/** The names of all known event types. */
export const eventTypes: ReadonlyArray<EventType> = Array.from(schemaByType.keys()) as Array<EventType>

export const isEventType = (type: string): type is EventType => schemaByType.has(type)

/** The payload schema version written with every event of this release. */
export const PAYLOAD_VERSION = 1

/** Builds a typed event with the payload type checked. */
export const make = <T extends EventType>(type: T, payload: PayloadOf<T>): EventOf<T> =>
  ({ type, payload }) as unknown as EventOf<T>

// ---------------------------------------------------------------------------------------------
// envelope

/** The envelope fields common to every stored event. */
export const EnvelopeHeader = Schema.Struct({
  id: EventId,
  sessionId: SessionId,
  seq: Schema.Int.pipe(Schema.positive()),
  type: Schema.String,
  at: Schema.Int,
  parentId: Schema.NullOr(EventId),
  v: Schema.Int
})
export type EnvelopeHeader = typeof EnvelopeHeader.Type

/** A stored event, decoded: the header plus a typed `type`/`payload`. */
export type Envelope = Omit<EnvelopeHeader, "type"> & Event
export type EnvelopeOf<T extends EventType> = Omit<EnvelopeHeader, "type"> & EventOf<T>

/** A stored event whose payload has not been decoded (JSON value). */
export interface RawEnvelope extends EnvelopeHeader {
  readonly payload: unknown
}

/** What a caller hands to `EventStore.append`: an event, optionally with its id, cause and time. */
export type NewEvent = Event & {
  readonly id?: EventId | undefined
  readonly parentId?: EventId | null | undefined
  readonly at?: number | undefined
}

export class EventDecodeError extends Schema.TaggedError<EventDecodeError>()("EventDecodeError", {
  sessionId: Schema.String,
  seq: Schema.Number,
  type: Schema.String,
  message: Schema.String
}) {}

/** Decodes a raw envelope into a typed one, failing with `EventDecodeError`. */
export const decodeEnvelope = (raw: RawEnvelope): Either.Either<Envelope, EventDecodeError> => {
  const schema = schemaByType.get(raw.type)
  if (schema === undefined) {
    return Either.left(
      new EventDecodeError({
        sessionId: raw.sessionId,
        seq: raw.seq,
        type: raw.type,
        message: `unknown event type "${raw.type}" (written by a newer logbook?)`
      })
    )
  }
  if (raw.v > PAYLOAD_VERSION) {
    return Either.left(
      new EventDecodeError({
        sessionId: raw.sessionId,
        seq: raw.seq,
        type: raw.type,
        message: `payload version ${raw.v} is newer than this logbook understands (${PAYLOAD_VERSION})`
      })
    )
  }
  const decoded = ParseResult.decodeUnknownEither(schema)(raw.payload)
  if (Either.isLeft(decoded)) {
    return Either.left(
      new EventDecodeError({
        sessionId: raw.sessionId,
        seq: raw.seq,
        type: raw.type,
        message: `malformed payload: ${ParseResult.TreeFormatter.formatIssueSync(decoded.left)}`
      })
    )
  }
  return Either.right({ ...raw, payload: decoded.right } as Envelope)
}

/** Encodes an event's payload to a JSON-ready value, validating it against its schema. */
export const encodePayload = (event: Event): Either.Either<unknown, EventDecodeError> => {
  const schema = schemaByType.get(event.type)
  if (schema === undefined) {
    return Either.left(
      new EventDecodeError({ sessionId: "", seq: 0, type: event.type, message: `unknown event type "${event.type}"` })
    )
  }
  return ParseResult.encodeUnknownEither(schema)(event.payload).pipe(
    Either.mapLeft(
      (e) =>
        new EventDecodeError({
          sessionId: "",
          seq: 0,
          type: event.type,
          message: `invalid payload: ${ParseResult.TreeFormatter.formatIssueSync(e)}`
        })
    )
  )
}
