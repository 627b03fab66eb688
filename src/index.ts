/**
 * logbook as a library: the services, layers and schemas that the CLI is built from, for programs
 * that embed the agent's event log in their own Effect programs.
 *
 * ```ts
 * import { Effect } from "effect"
 * import { EventStore, Events, SessionId, Snapshots } from "logbook"
 *
 * const program = Effect.gen(function* () {
 *   const store = yield* EventStore
 *   const id = SessionId.make("my-session")
 *   yield* store.append(id, [Events.make("session.created", { title: "hello" })])
 *   return yield* Snapshots.restore(id)
 * })
 * Effect.runPromise(program.pipe(Effect.provide(EventStore.layerSqlite({ filename: "logbook.db" }))))
 * ```
 */

export * as Config from "./config/Config.js"
export * as Events from "./domain/Events.js"
export * from "./domain/Ids.js"
export * from "./domain/Message.js"
export { layerAiSdk, makeAiSdkModel } from "./model/AiSdk.js"
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
export * as History from "./session/History.js"
export * from "./store/Errors.js"
export * as Bus from "./store/EventBus.js"
export { EventBus } from "./store/EventBus.js"
export {
  type EventQuery,
  EventStore,
  type EventStoreService,
  type Lease,
  type ListSessionsOptions,
  type SeqRange,
  type SessionSummary,
  type Snapshot
} from "./store/EventStore.js"
export type { StoreOptions } from "./store/internal/core.js"
export * as Projection from "./store/Projection.js"
export * as Recovery from "./store/Recovery.js"
export * as Snapshots from "./store/Snapshots.js"
export type { SqliteOptions } from "./store/Sqlite.js"
