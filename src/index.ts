/**
 * logbook as a library: the services, layers and schemas that the CLI is built from, for programs
 * that embed the agent (or only its event log) in their own Effect programs.
 *
 * Two examples, shown in the README ("Using it as a library") and type-checked and run against the
 * packed package by test/package/packed.test.ts: examples/agent.ts (`makeAgentLayer` with a model,
 * `Secrets` and a store, then `Sessions.create` / `send` / `wait`) and examples/event-log.ts (the
 * `EventStore` alone: append events, fold them with `Snapshots.restore`).
 *
 * `effect` and the `@effect/*` packages this API is made of (`@effect/platform`, `@effect/sql`,
 * `@effect/sql-sqlite-node`, `@effect/experimental`) are peer dependencies: the program brings them,
 * and dist/index.js imports them (one copy of the Effect runtime in the process).
 */

export * as AgentLayer from "./config/AgentLayer.js"
export * as Config from "./config/Config.js"
export * as Events from "./domain/Events.js"
export * from "./domain/Ids.js"
export * from "./domain/Message.js"
export {
  type McpCallResult,
  McpClient,
  type McpConnection,
  type McpContent,
  McpError,
  type McpPromptInfo,
  type McpPromptResult,
  type McpResourceResult,
  type McpToolInfo
} from "./mcp/McpClient.js"
export { type McpServerState, type McpServerStatus, McpServers } from "./mcp/McpServers.js"
export type { McpHttpServer, McpServerSpec, McpStdioServer } from "./mcp/McpSettings.js"
export { layerMcpTools, type McpToolsOptions, mcpToolName } from "./mcp/McpTools.js"
export { layerAiSdk, makeAiSdkModel } from "./model/AiSdk.js"
export * as Catalog from "./model/Catalog.js"
export {
  Model,
  ModelError,
  type ModelEvent,
  type ModelMessage,
  type ModelRequest,
  type ModelTool
} from "./model/Model.js"
export * as Retry from "./model/Retry.js"
export { layerScripted, Script, ScriptedModel } from "./model/Scripted.js"
export { escapeHtml, exportSessionHtml, renderMarkdown, renderSessionHtml } from "./present/exportHtml.js"
export { Actions, type ActionsOptions, type BatchInput, type BatchResult } from "./session/Actions.js"
export { type AgentOptions, type AgentServices, makeAgentLayer } from "./session/Agent.js"
export * as History from "./session/History.js"
export {
  findInstructions,
  type InstructionFile,
  Instructions,
  type InstructionsOptions,
  type InstructionsService,
  instructionsSection,
  type LoadedInstructions,
  makeInstructions
} from "./session/Instructions.js"
export { makeSteer, Processor, type Steer, type StepInput, type StepResult, signalSteer } from "./session/Processor.js"
export { canonicalJson, type PromptVersion, promptDocument, promptVersionOf } from "./session/PromptVersion.js"
export * as Replay from "./session/Replay.js"
export * as Rerun from "./session/Rerun.js"
export * as SessionDiff from "./session/SessionDiff.js"
export {
  PromptBlocked,
  type PromptHooksResult,
  type SessionHookRun,
  SessionHooks,
  type SessionHooksService,
  type StopHooksResult
} from "./session/SessionHooks.js"
export {
  type CreateOptions,
  type SendOptions,
  Sessions,
  type SessionsOptions,
  type SessionsService,
  SessionUnavailable,
  type TurnOutcome,
  WithdrawRefused
} from "./session/Sessions.js"
export { fullSystemPrompt, systemPrompt, withSkills } from "./session/SystemPrompt.js"
export type { WorkspaceSnapshotOptions } from "./session/WorkspaceObserver.js"
export * as Audit from "./store/Audit.js"
export * from "./store/Errors.js"
export * as Bus from "./store/EventBus.js"
export { EventBus } from "./store/EventBus.js"
export {
  type EventQuery,
  EventStore,
  type EventStoreService,
  type ImportedEvent,
  type ImportedSession,
  type ImportItem,
  type Lease,
  type ListSessionsOptions,
  type SeqRange,
  type SessionSummary,
  type Snapshot
} from "./store/EventStore.js"
export type { StoreOptions } from "./store/internal/storeService.js"
export * as Projection from "./store/Projection.js"
export * as Recovery from "./store/Recovery.js"
export * as SessionFile from "./store/SessionFile.js"
export * as SessionJournal from "./store/SessionJournal.js"
export * as Snapshots from "./store/Snapshots.js"
export { layerClient as layerSqliteClient, type SqliteOptions } from "./store/Sqlite.js"
export * as Stats from "./store/Stats.js"
export {
  type ApprovalAnswer,
  type ApprovalReply,
  type ApprovalRequest,
  Approver,
  answerParts
} from "./tools/Approver.js"
export { builtinTools } from "./tools/builtins.js"
export * as Permissions from "./tools/Permissions.js"
export {
  databaseFiles,
  defaultHiddenPaths,
  defaultSandboxSettings,
  probeSandbox,
  type SandboxMode,
  type SandboxOptions,
  type SandboxSettings,
  type SandboxStatus
} from "./tools/Sandbox.js"
export {
  builtinSecretNames,
  makeSecrets,
  redactionMarker,
  Secrets,
  type SecretsOptions,
  type SecretsService
} from "./tools/Secrets.js"
export { makeSkillTool, type Skill, skillsSection } from "./tools/skill.js"
export {
  type AfterHook,
  type AnyTool,
  type BeforeHook,
  type BeforeResult,
  combineHooks,
  DEFAULT_HOOK_TIMEOUT_MS,
  defineTool,
  type FinishedOutput,
  type HookCall,
  type HookRun,
  Hooks,
  HookTimeout,
  LateTools,
  type NamedHook,
  type PermissionSubject,
  type ToolContext,
  type ToolDefinition,
  ToolFailure,
  type ToolHooks,
  type ToolOutput,
  Tools,
  type ToolsOptions
} from "./tools/Tools.js"
export * as Workspace from "./tools/Workspace.js"
export * as WorkspaceSnapshot from "./tools/WorkspaceSnapshot.js"
export {
  defaultSnapshotLimits,
  diffManifests,
  type Manifest,
  type RestoreResult,
  restoreManifest,
  type SnapshotLimits,
  scanWorkspace
} from "./tools/WorkspaceSnapshot.js"
