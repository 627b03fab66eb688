/**
 * The execution session (DESIGN §4, §6): runs the batch of tool calls one model step made.
 *
 * One action per batch: `action.state running` with the call ids, then the calls in parallel (at
 * most `concurrency` at a time), then `archived` when every call completed or `failed` when one did
 * not (the errors go back to the model as tool results either way). A call that fails with the
 * store's error interrupts its siblings (their reason is then `error`) and fails the batch.
 *
 * Each call is run by RunCall.ts: the input decoded (`Tools.decode`), the permission gate
 * (PermissionGate.ts), the `tool.execute.before` hooks; a call that cannot run (not JSON, unknown
 * tool, invalid input, denied, blocked) ends `tool.failed` with an error the model can act on and
 * never starts. Otherwise `tool.invoked` is committed first (write-ahead), then the tool runs under
 * its timeout. Past the timeout: `tool.timeout`, the tool is interrupted (a command's whole process
 * group is killed), then `tool.failed {timedOut: true}`. An interrupt ends the call `tool.failed
 * {interrupted: true, reason}` after the tool has been stopped. A tool that crashes (a defect) ends
 * `tool.failed` with the crash's message; the kernel goes on.
 */
import { Context, Effect, Layer, Ref } from "effect"
import { make, type NewEvent } from "../domain/Events.js"
import { type ActionId, type MessageId, makeActionId } from "../domain/Ids.js"
import { toolSpan, tracedFn } from "../model/GenAi.js"
import { EventStore } from "../store/EventStore.js"
import type { SessionJournal } from "../store/SessionJournal.js"
import type { RestoreError } from "../store/Snapshots.js"
import { Approver } from "../tools/Approver.js"
import type { PermissionRules } from "../tools/Permissions.js"
import { Secrets, type SecretsService } from "../tools/Secrets.js"
import { Tools } from "../tools/Tools.js"
import { makePermissionGate, type RefusalRequest } from "./PermissionGate.js"
import type { StepCall } from "./Processor.js"
import { type CallOutcome, makeRunCall } from "./RunCall.js"
import { makeWorkspaceObserver, type WorkspaceSnapshotOptions } from "./WorkspaceObserver.js"

export interface BatchInput {
  readonly journal: SessionJournal
  readonly messageId: MessageId
  readonly calls: ReadonlyArray<StepCall>
  /** the workspace root the tools work in */
  readonly cwd: string
  /** events committed with the batch's `action.state running` (e.g. the chat state) */
  readonly opening?: ReadonlyArray<NewEvent> | undefined
  /** why the batch was interrupted, read when it is (default "interrupted") */
  readonly interruptReason?: Effect.Effect<string> | undefined
}

export { type CallOutcome, MAX_INPUT_TEXT, sentInput } from "./RunCall.js"

export interface BatchResult {
  readonly actionId: ActionId | undefined
  readonly failed: boolean
  readonly outcomes: ReadonlyArray<CallOutcome>
}

export interface ActionsOptions {
  /** calls of one batch run at the same time (default 8) */
  readonly concurrency?: number | undefined
  /** at most one `tool.progress` event per call per this many ms (default 250) */
  readonly progressEveryMs?: number | undefined
  /** the user's permission rules (the config's `permission`); the built-in `defaultRules` apply below them */
  readonly permissions?: PermissionRules | undefined
  /**
   * Rules no decision may be looser than (deny > ask > allow): `logbook run` passes the rules of the
   * user's own config (`LoadedConfig.trustedPermission`), so the project's `logbook.json` can tighten
   * `permissions` but not loosen them.
   */
  readonly permissionLimit?: PermissionRules | undefined
  /**
   * A check above the rules: a call it gives a reason for is refused with it (`tool.failed`, never
   * asked about or run), whatever the rules, the `Approver` or an earlier answer say. A re-run
   * confines its calls with it (docs/rerun.md).
   */
  readonly refuse?: ((request: RefusalRequest) => Effect.Effect<string | undefined>) | undefined
  /**
   * The workspace snapshots around calls of tools that may change files without recording them
   * (`ToolDefinition.snapshotWorkspace`: `bash`); on by default (docs/workspace.md)
   */
  readonly snapshot?: WorkspaceSnapshotOptions | undefined
}

const makeActions = (
  tools: Tools["Type"],
  store: EventStore["Type"],
  approver: Approver["Type"],
  secrets: SecretsService,
  options: ActionsOptions
) => {
  const concurrency = Math.max(1, Math.floor(options.concurrency ?? 8))
  const progressEveryMs = Math.max(0, options.progressEveryMs ?? 250)
  const observer =
    options.snapshot?.enabled === false ? undefined : makeWorkspaceObserver(store, secrets, options.snapshot)

  const gate = makePermissionGate({
    tools,
    approver,
    rules: options.permissions,
    limit: options.permissionLimit,
    refuse: options.refuse
  })
  const runCall = makeRunCall({ tools, store, secrets, gate, observer, progressEveryMs })

  const run = (input: BatchInput): Effect.Effect<BatchResult, RestoreError> =>
    Effect.gen(function* () {
      if (input.calls.length === 0) {
        if (input.opening !== undefined && input.opening.length > 0) yield* input.journal.appendLater(input.opening)
        return { actionId: undefined, failed: false, outcomes: [] }
      }
      const actionId = yield* makeActionId
      const callIds = input.calls.map((call) => call.callId)
      // handed over: committed with the first call's `tool.invoked` (awaited before the tool runs)
      // or whatever else a call appends first — one commit where there were two (docs/event-log.md)
      yield* input.journal.appendLater([
        ...(input.opening ?? []),
        make("action.state", { actionId, state: "running", callIds })
      ])
      // one span per call (`execute_tool <tool>`), status error when the call failed
      const runOne = (batchInput: BatchInput, call: StepCall) =>
        runCall(batchInput, call).pipe(toolSpan(call, { "logbook.session.id": input.journal.sessionId }))
      const [single] = input.calls
      const outcomes = yield* (
        input.calls.length === 1 && single !== undefined
          ? // one call (most batches), on the batch's own fiber, with no sibling to interrupt
            Effect.map(runOne(input, single), (outcome) => [outcome])
          : Effect.gen(function* () {
              // a call that fails (the store) interrupts its siblings: their reason is then `error`, not the user's
              const batchFailed = yield* Ref.make(false)
              const batchInput: BatchInput = {
                ...input,
                interruptReason: Effect.flatMap(Ref.get(batchFailed), (failed) =>
                  failed ? Effect.succeed("error") : (input.interruptReason ?? Effect.succeed("interrupted"))
                )
              }
              return yield* Effect.forEach(
                input.calls,
                (call) => runOne(batchInput, call).pipe(Effect.tapError(() => Ref.set(batchFailed, true))),
                { concurrency }
              )
            })
      ).pipe(
        Effect.onExit((exit) =>
          exit._tag === "Success"
            ? Effect.void
            : Effect.gen(function* () {
                const state = yield* input.journal.state
                const action = state.actions.get(actionId)
                if (action === undefined || action.state === "archived" || action.state === "failed") return
                yield* input.journal.append([make("action.state", { actionId, state: "failed", callIds })])
              }).pipe(Effect.catchAll((error) => Effect.logWarning(`could not end action ${actionId}`, error)))
        )
      )
      const failed = outcomes.some((outcome) => !outcome.ok)
      // handed over: committed with the next step's `step.started` (awaited before its request goes
      // out) or the turn's end
      yield* input.journal.appendLater([
        make("action.state", { actionId, state: failed ? "failed" : "archived", callIds })
      ])
      return { actionId, failed, outcomes }
    })

  // a span per batch (when traced: `tracedFn`); each call in it has its `execute_tool <tool>` span
  return { run: tracedFn(Effect.fn("Actions.run")(run), run) }
}

/** The execution session: runs the tool calls of one model step. */
export class Actions extends Context.Tag("logbook/Actions")<
  Actions,
  { readonly run: (input: BatchInput) => Effect.Effect<BatchResult, RestoreError> }
>() {
  static readonly layer = (
    options: ActionsOptions = {}
  ): Layer.Layer<Actions, never, Tools | EventStore | Approver | Secrets> =>
    Layer.effect(
      Actions,
      Effect.map(Effect.all([Tools, EventStore, Approver, Secrets]), ([tools, store, approver, secrets]) =>
        makeActions(tools, store, approver, secrets, options)
      )
    )
}
