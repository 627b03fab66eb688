/**
 * Running one tool call of a batch (DESIGN §3, §6): the input decoded (`Tools.decode`), the
 * permission gate (PermissionGate.ts), the `tool.execute.before` hooks; a call that cannot run ends
 * `tool.failed` with an error the model can act on and never starts. Otherwise `tool.invoked` is
 * committed first (write-ahead), then the tool runs under its timeout with its `ToolContext` (the
 * records it makes: file changes and intents, blobs, progress, processes, reads), then the
 * `tool.execute.after` hooks and `tool.finished`. Past the timeout: `tool.timeout`, the tool is
 * interrupted, then `tool.failed {timedOut: true}`; an interrupt ends it `tool.failed {interrupted:
 * true, reason}` once the tool confirmed it stopped. A record the log cannot take fails the call
 * with the store's error. Actions.ts runs the batch the calls belong to.
 */
import * as nodePath from "node:path"
import { Cause, Clock, Deferred, Duration, Effect, Either, Exit, Fiber, Option } from "effect"
import { type FileRead, make } from "../domain/Events.js"
import type { CallId, MessageId } from "../domain/Ids.js"
import { formatMs } from "../model/Retry.js"
import type { EventStore } from "../store/EventStore.js"
import type { SessionState } from "../store/Projection.js"
import { interruptedError } from "../store/Recovery.js"
import type { SessionJournal } from "../store/SessionJournal.js"
import type { RestoreError } from "../store/Snapshots.js"
import { capText } from "../tools/boundedOutput.js"
import type { SecretsService } from "../tools/Secrets.js"
import {
  type FileChange,
  type FileIntent,
  type FileReads,
  type FileStamp,
  type HookCall,
  type HookRun,
  LOG_UNAVAILABLE,
  type PreparedCall,
  type ToolContext,
  ToolFailure,
  type ToolOutput,
  type Tools
} from "../tools/Tools.js"
import { awaitWithin } from "./internal/awaitWithin.js"
import type { Permission, PermissionGate } from "./PermissionGate.js"
import type { StepCall } from "./Processor.js"
import type { WorkspaceObserver } from "./WorkspaceObserver.js"

/** Where a call runs (what it needs of the batch's `BatchInput`). */
export interface CallInput {
  readonly journal: SessionJournal
  readonly messageId: MessageId
  /** the workspace root the tools work in */
  readonly cwd: string
  /** why the call was interrupted, read when it is (default "interrupted") */
  readonly interruptReason?: Effect.Effect<string> | undefined
}

export interface CallOutcome {
  readonly callId: CallId
  readonly ok: boolean
}

const isRunning = (state: SessionState, callId: CallId): boolean =>
  state.toolParts.get(callId)?.state._tag === "running"
const isOpen = (state: SessionState, callId: CallId): boolean => {
  const tag = state.toolParts.get(callId)?.state._tag
  return tag === "running" || tag === "pending"
}

/**
 * What a stopped call's record says is still running (a command's `stillRunning`: processes that
 * could not be stopped), as a sentence for its error; empty when nothing is.
 */
const stillRunningNote = (metadata: unknown): string => {
  if (typeof metadata !== "object" || metadata === null || !("stillRunning" in metadata)) return ""
  const list = metadata.stillRunning
  if (!Array.isArray(list) || list.length === 0) return ""
  const named = list
    .slice(0, 10)
    .map((p: unknown) =>
      typeof p === "object" && p !== null && "pid" in p && "command" in p ? `${String(p.pid)} ${String(p.command)}` : ""
    )
  return ` Some of its processes could not be stopped and are still running: ${named.join("; ")}${list.length > 10 ? `; and ${list.length - 10} more` : ""}.`
}

/** How long an interrupted call waits for its tool to confirm it stopped (its finalizers ran). */
const STOP_WAIT = Duration.seconds(10)

class TimedOut {
  readonly _tag = "TimedOut"
}

const describeDefect = (cause: Cause.Cause<unknown>): string => {
  const squashed = Cause.squash(cause)
  return squashed instanceof Error ? squashed.message : String(squashed)
}

/** The most characters of a call's input text kept when it is not JSON (`tool.failed` `inputText`). */
export const MAX_INPUT_TEXT = 256 * 1024

/** What `tool.failed` keeps of the input of a call that never ran: the JSON, or the text when it is none. */
export const sentInput = (call: StepCall): { readonly input?: unknown; readonly inputText?: string } =>
  call.input !== undefined
    ? { input: call.input }
    : {
        inputText:
          call.inputText.length > MAX_INPUT_TEXT
            ? `${call.inputText.slice(0, MAX_INPUT_TEXT)}… (${call.inputText.length} characters)`
            : call.inputText
      }

/** A path as the log names it: relative to the workspace `cwd` when inside it, else absolute. */
const loggedPath = (cwd: string, absolute: string): string => {
  const relative = nodePath.relative(cwd, absolute)
  return relative !== "" && !relative.startsWith("..") && !nodePath.isAbsolute(relative) ? relative : absolute
}

/** What a call works with, taken when Actions is built. */
export interface RunCallOptions {
  readonly tools: Tools["Type"]
  /** the blobs of file changes and command output */
  readonly store: EventStore["Type"]
  readonly secrets: SecretsService
  readonly gate: PermissionGate
  /** the workspace snapshots around a `snapshotWorkspace` tool's call; none when they are off */
  readonly observer: WorkspaceObserver | undefined
  /** at most one `tool.progress` event per call per this many ms */
  readonly progressEveryMs: number
}

/**
 * A call's progress reports (`ToolContext.progress`) as `tool.progress` events: at most one per
 * `everyMs`, and the latest text of a window is recorded at its end, so the last output before a
 * quiet spell is not lost. A report of a call that is no longer running is not recorded; a log that
 * cannot take one is logged (progress is not part of the call's record).
 */
const callProgress = (journal: SessionJournal, callId: CallId, everyMs: number) => {
  /** the latest text reported */
  let latest: string | undefined
  let lastAt = Number.NEGATIVE_INFINITY
  /** the text of the last `tool.progress` written */
  let recorded: string | undefined
  /** a record is due at the end of the window */
  let flushDue = false
  const record = (output: string, at: number) =>
    Effect.gen(function* () {
      lastAt = at
      recorded = output
      const state = yield* journal.state
      if (!isRunning(state, callId)) return
      yield* journal.appendLater([make("tool.progress", { callId, output })])
    }).pipe(Effect.catchAll((error) => Effect.logWarning(`could not record progress of call ${callId}`, error)))
  const report = (output: string): Effect.Effect<void> =>
    Effect.gen(function* () {
      latest = output
      const now = yield* Clock.currentTimeMillis
      const wait = everyMs - (now - lastAt)
      if (wait <= 0) return yield* record(output, now)
      // throttled: recorded at the end of the window (a child of the tool's fiber: it ends with the tool)
      if (flushDue) return
      flushDue = true
      yield* Effect.fork(
        Effect.sleep(Duration.millis(wait)).pipe(
          Effect.zipRight(Clock.currentTimeMillis),
          Effect.flatMap((at) => {
            flushDue = false
            return latest === undefined || latest === recorded ? Effect.void : record(latest, at)
          })
        )
      )
    })
  return { report, latest: () => latest }
}

/** Runs one call to its end (`tool.finished` or `tool.failed`); fails only with the store's error. */
export type RunCall = (input: CallInput, call: StepCall) => Effect.Effect<CallOutcome, RestoreError>

/**
 * What the agent last saw of each file: the stamps this call recorded (`recorded`, written with
 * its `tool.finished`), else the session's (`SessionState.reads`, from every finished call — also
 * of an earlier process, so `--continue` can edit a file read before).
 */
const readsOf = (journal: SessionJournal, recorded: Array<FileRead>): FileReads => ({
  record: (path, stamp) => Effect.sync(() => void recorded.push({ path, ...stamp })),
  last: (path) =>
    Effect.map(journal.state, (state): FileStamp | undefined => {
      for (let i = recorded.length - 1; i >= 0; i--) if (recorded[i]!.path === path) return recorded[i]
      return state.reads.get(path)
    })
})

const blob = (store: EventStore["Type"], content: string | Uint8Array | undefined) =>
  content === undefined ? Effect.succeed(undefined) : store.putBlob(content)

/**
 * The contents as blobs, then `file.changed` (awaited). A failure here is a broken store: the
 * call stops, and the turn fails with the store's error (`recorded` in `callRecords`).
 */
const recordFileChange = (options: RunCallOptions, input: CallInput, callId: CallId, change: FileChange) =>
  Effect.gen(function* () {
    const { store, observer } = options
    const beforeHash = yield* blob(store, change.before)
    const afterHash = yield* blob(store, change.after)
    const path = loggedPath(input.cwd, change.path)
    // a command running meanwhile must not record this change as its own
    if (observer !== undefined) {
      yield* observer.noteChange(
        input.journal.sessionId,
        input.cwd,
        change.path,
        afterHash === undefined ? undefined : { hash: afterHash }
      )
    }
    yield* input.journal.append([
      make("file.changed", {
        path,
        op: change.op,
        ...(beforeHash !== undefined ? { beforeHash } : {}),
        ...(afterHash !== undefined ? { afterHash } : {}),
        callId
      })
    ])
  })

/**
 * The contents as blobs, then `file.intent` (awaited), before the tool writes anything: a crash
 * from here to the change's `file.changed` is settled by the next run's sweep. A failure here is
 * a broken store: the call stops, nothing is written, and the turn fails with the store's error.
 */
const recordFileIntent = (options: RunCallOptions, input: CallInput, callId: CallId, intent: FileIntent) =>
  Effect.gen(function* () {
    const { store, observer } = options
    const beforeHash = yield* blob(store, intent.before)
    const afterHash = yield* store.putBlob(intent.after)
    // noted before the tool writes: a command running beside it may take its snapshots around the
    // write (the one before it, or the one after it, before the tool's `file.changed`), and must
    // not record the change as its own
    if (observer !== undefined) {
      yield* observer.noteIntent(input.journal.sessionId, input.cwd, intent.path, { hash: afterHash })
    }
    yield* input.journal.append([
      make("file.intent", {
        callId,
        path: loggedPath(input.cwd, intent.path),
        op: intent.op,
        ...(beforeHash !== undefined ? { beforeHash } : {}),
        afterHash,
        temp: loggedPath(input.cwd, intent.temp)
      })
    ])
  })

/**
 * What one call keeps while it runs (its reads, intents, the first record the log could not take,
 * what the tool said when it was stopped) and the records of its end made from them: failed,
 * refused, interrupted.
 */
const callRecords = (options: RunCallOptions, input: CallInput, call: StepCall) => {
  const { observer } = options
  const { journal } = input
  const callId = call.callId
  const self = {
    /** the file stamps the call recorded (`ToolContext.reads`), written with its end, failed or not */
    reads: [] as Array<FileRead>,
    /** the paths of the call's `file.intent`s: the observer keeps them noted until the call ends */
    intentPaths: [] as Array<string>,
    /** the first record of the call the log could not take (`recorded`) */
    recordFailure: undefined as RestoreError | undefined,
    /** what the tool recorded when it was stopped (`ToolContext.recordStopped`), for its `tool.failed` */
    stoppedRecord: undefined as { readonly metadata: unknown } | undefined,
    /**
     * Completes when the tool's execution has ended, its finalizers included (a command's process
     * group is gone). An interrupt of the batch does not wait for the tool's fiber in `execute`, so the
     * interrupted call's `tool.failed` waits for this: the log never says "stopped" too early.
     */
    stopped: undefined as Deferred.Deferred<void> | undefined,
    /** the snapshot after a call of a `snapshotWorkspace` tool, set once the snapshot before it was taken */
    observed: undefined as Effect.Effect<void, RestoreError> | undefined,
    /** the tool's progress reports, throttled into `tool.progress` events */
    progress: callProgress(journal, callId, options.progressEveryMs)
  }
  const dropIntents = Effect.suspend(() =>
    observer === undefined || self.intentPaths.length === 0
      ? Effect.void
      : observer.dropIntents(journal.sessionId, input.cwd, self.intentPaths)
  )
  const readsMade = () => (self.reads.length > 0 ? { reads: self.reads } : {})
  const fail = (error: string, extra: { readonly timedOut?: boolean; readonly metadata?: unknown } = {}) =>
    journal
      .append([make("tool.failed", { callId, error: capText(error), ...extra, ...readsMade() })])
      .pipe(Effect.as({ callId, ok: false }))
  /**
   * a call refused before it ran: its input is kept as the model sent it (no tool.invoked holds
   * it), after the hook runs that refused it
   */
  const refuse = (error: string, hookRuns: ReadonlyArray<HookRun> = []) =>
    journal
      .append([...hookRan(hookRuns), make("tool.failed", { callId, error: capText(error), ...sentInput(call) })])
      .pipe(Effect.as({ callId, ok: false }))
  const stoppedMetadata = () => (self.stoppedRecord === undefined ? {} : { metadata: self.stoppedRecord.metadata })
  const withOutputSoFar = (error: string) => {
    const told = `${error}${stillRunningNote(self.stoppedRecord?.metadata)}`
    // the latest progress text the tool reported: the output so far
    const latest = self.progress.latest()
    return latest === undefined || latest.trim() === "" ? told : `${told}\nOutput before it was stopped:\n${latest}`
  }
  /**
   * Runs `observed` (once: it is idempotent) where the call ends, also in a finalizer; a log that
   * cannot take what it found is the call's record failure, as a tool's own record is (`recorded`).
   */
  const endObserved = Effect.suspend(() => self.observed ?? Effect.void).pipe(
    Effect.catchAll((error) =>
      Effect.sync(() => {
        self.recordFailure ??= error
      })
    )
  )
  const interrupted = Effect.gen(function* () {
    // bounded: a tool whose stop never ends must not hang the interrupt
    const confirmed =
      self.stopped === undefined
        ? true
        : Option.isSome(yield* Deferred.await(self.stopped).pipe(Effect.timeout(STOP_WAIT), Effect.option))
    const state = yield* journal.state
    if (!isOpen(state, callId)) return
    const reason = yield* input.interruptReason ?? Effect.succeed("interrupted")
    yield* journal.append([
      make("tool.failed", {
        callId,
        error:
          state.toolParts.get(callId)?.state._tag === "running"
            ? withOutputSoFar(
                confirmed
                  ? interruptedError(reason, true)
                  : `The call was interrupted (${reason}); it did not confirm it stopped within ${Duration.format(STOP_WAIT)}.`
              )
            : interruptedError(reason, false),
        interrupted: true,
        reason,
        ...stoppedMetadata(),
        ...readsMade()
      })
    ])
  }).pipe(Effect.catchAll((error) => Effect.logWarning(`could not end the interrupted call ${callId}`, error)))
  /**
   * A record the log could not take: the tool is stopped with a `ToolFailure`, and the call then
   * fails the batch with the store's own error (the turn ends with it; nothing is told to the
   * model that the log does not hold).
   */
  const recorded = <A>(effect: Effect.Effect<A, RestoreError>): Effect.Effect<A, ToolFailure> =>
    Effect.catchAll(effect, (error) => {
      self.recordFailure ??= error
      return Effect.fail(new ToolFailure({ message: LOG_UNAVAILABLE }))
    })
  return Object.assign(self, {
    dropIntents,
    readsMade,
    fail,
    refuse,
    stoppedMetadata,
    withOutputSoFar,
    endObserved,
    interrupted,
    recorded
  })
}
type CallRecords = ReturnType<typeof callRecords>

/** The `hook.ran` records of hook runs (docs/extensions.md). */
export const hookRan = (runs: ReadonlyArray<HookRun>) =>
  runs.map((run) =>
    make("hook.ran", {
      source: run.source,
      hook: run.hook,
      ...(run.callId !== undefined ? { callId: run.callId } : {}),
      ...(run.tool !== undefined ? { tool: run.tool } : {}),
      outcome: run.outcome,
      changed: run.changed,
      ...(run.error !== undefined ? { error: run.error } : {}),
      ...(run.reason !== undefined ? { reason: run.reason } : {}),
      ...(run.input !== undefined ? { input: run.input } : {}),
      ms: run.ms
    })
  )

/** A call admitted to run: its hooks' input and timeout, and what its permission allows. */
interface Admitted {
  readonly _tag: "Admitted"
  readonly hookCall: HookCall
  readonly prepared: Extract<PreparedCall, { readonly _tag: "Ready" }>
  readonly permission: Extract<Permission, { readonly _tag: "Run" }>
}

/**
 * The checks before a call runs, in order: its input is JSON, it decodes for a known tool, the
 * permission gate lets it run, the `tool.execute.before` hooks do not block it.
 */
const admit = (
  options: RunCallOptions,
  input: CallInput,
  call: StepCall
): Effect.Effect<
  | Admitted
  | { readonly _tag: "Refused"; readonly error: string; readonly hookRuns?: ReadonlyArray<HookRun> | undefined },
  RestoreError
> =>
  Effect.gen(function* () {
    const { tools, gate } = options
    if (call.input === undefined) {
      const shown = call.inputText.length > 400 ? `${call.inputText.slice(0, 399)}…` : call.inputText
      return {
        _tag: "Refused" as const,
        error:
          `The input of this call is not valid JSON, so the tool did not run. The input was: ${shown}\n` +
          "Call the tool again with a JSON object as input."
      }
    }
    const hookCall = { sessionId: input.journal.sessionId, callId: call.callId, tool: call.tool, input: call.input }
    // a tool of an MCP server still starting: wait until it is ready (or failed), bounded by its start
    yield* tools.awaitTool(call.tool)
    const decoded = tools.decode(hookCall)
    if (decoded._tag === "Refused") return decoded
    const permission: Permission = yield* gate.check(input, call, decoded.tool, decoded.input)
    if (permission._tag === "Denied") return { _tag: "Refused" as const, error: permission.error }
    // each hook is bounded and its failure is its call's refusal (Tools.before)
    const prepared = yield* tools.before(hookCall, decoded)
    if (prepared._tag === "Refused") return prepared
    return { _tag: "Admitted" as const, hookCall, prepared, permission }
  })

/** The `ToolContext` the tool runs with: what it records goes to the log through the call's records. */
const toolContext = (
  options: RunCallOptions,
  input: CallInput,
  callId: CallId,
  records: CallRecords,
  admitted: Admitted
): ToolContext => {
  const { store, secrets } = options
  const { journal } = input
  const { recorded } = records
  return {
    sessionId: journal.sessionId,
    callId,
    cwd: input.cwd,
    timeoutMs: admitted.prepared.timeoutMs,
    recordFileChange: (change) => recorded(recordFileChange(options, input, callId, change)),
    recordFileIntent: (intent) =>
      Effect.zipRight(
        Effect.sync(() => records.intentPaths.push(intent.path)),
        recorded(recordFileIntent(options, input, callId, intent))
      ),
    updateTodos: (items) =>
      recorded(input.journal.append([make("todo.updated", { items, callId })])).pipe(Effect.asVoid),
    secrets,
    storeBlob: (content) =>
      recorded(
        // a command's output, say: masked like everything else that is logged (Secrets)
        store.putBlob(typeof content === "string" ? secrets.redactText(content) : secrets.redactBytes(content))
      ),
    reads: readsOf(journal, records.reads),
    outsideAllowed: admitted.permission.outsideAllowed,
    recordProcess: (group) =>
      recorded(journal.append([make("tool.process", { callId, ...group })])).pipe(Effect.asVoid),
    recordStopped: (metadata) =>
      Effect.sync(() => {
        records.stoppedRecord = { metadata }
      }),
    progress: records.progress.report
  }
}

type Executed =
  | { readonly _tag: "Ok"; readonly output: ToolOutput }
  /** `metadata`: what the tool's failure carries (`ToolFailure.metadata`), kept in `tool.failed` */
  | { readonly _tag: "Failed"; readonly error: string; readonly metadata?: unknown }

/**
 * Runs the tool within its timeout: its output, its failure as the model reads it, `TimedOut`
 * (with `tool.timeout` recorded and the tool stopped), or the store's error when that record failed.
 */
const execute = (
  input: CallInput,
  callId: CallId,
  records: CallRecords,
  admitted: Admitted,
  context: ToolContext
): Effect.Effect<Either.Either<Executed, TimedOut | RestoreError>> =>
  Effect.gen(function* () {
    const { prepared } = admitted
    const done = yield* Deferred.make<void>()
    const execution = Effect.suspend(() => {
      records.stopped = done
      return prepared.tool.execute(prepared.input, context)
    }).pipe(
      // the tool's own spans are not traced: a tool's failure message (a span's status) may quote
      // the file or the output it concerns; the call's `execute_tool` span says how it ended
      Effect.withTracerEnabled(false),
      // what the call changed is recorded once it stopped (its process group gone), before it
      // counts as stopped (one finalizer on the way of the call; it confirms the stop whatever
      // happens to the record)
      Effect.ensuring(Effect.ensuring(records.endObserved, Deferred.succeed(done, undefined)))
    )
    const outcome = execution.pipe(
      Effect.map((output): Executed => ({ _tag: "Ok", output })),
      Effect.catchAllCause((cause) =>
        Cause.isInterruptedOnly(cause)
          ? Effect.failCause(cause as Cause.Cause<never>)
          : Effect.succeed(
              Option.match(Cause.failureOption(cause), {
                onSome: (failure) => ({ _tag: "Failed" as const, error: failure.message, metadata: failure.metadata }),
                onNone: () => ({ _tag: "Failed" as const, error: `The tool crashed: ${describeDefect(cause)}` })
              })
            )
      )
    )
    // the tool in a fiber of its own, awaited within its timeout; timed out, `tool.timeout` is
    // recorded while it still runs, then it is stopped (its finalizers run before this goes on).
    // An interrupt from outside reaches the tool's fiber at once (a fiber's interrupt is sent to
    // its children) and is not awaited here, as with a race: `interrupted` waits for the call
    // to confirm it stopped, within its own bound.
    const running = yield* Effect.fork(outcome)
    const ended = yield* awaitWithin(running, prepared.timeoutMs)
    if (ended !== undefined) return Either.right(yield* ended)
    const recorded = yield* input.journal
      .append([make("tool.timeout", { callId, timeoutMs: prepared.timeoutMs })])
      .pipe(Effect.either, Effect.zipLeft(Fiber.interrupt(running)))
    return Either.left(Either.isLeft(recorded) ? recorded.left : new TimedOut())
  })

/**
 * The end of a call that ran: `tool.failed` for a failure or a timeout, else the
 * `tool.execute.after` hooks and `tool.finished`; the store's error when the log failed under it.
 */
const settle = (
  options: RunCallOptions,
  input: CallInput,
  callId: CallId,
  records: CallRecords,
  admitted: Admitted,
  executed: Either.Either<Executed, TimedOut | RestoreError>
): Effect.Effect<CallOutcome, RestoreError> =>
  Effect.gen(function* () {
    const { fail } = records
    // the log failed under the tool: the turn fails with the store's error (typed, not a defect)
    if (records.recordFailure !== undefined) return yield* Effect.fail(records.recordFailure)
    if (executed._tag === "Left") {
      const error = executed.left
      if (error instanceof TimedOut) {
        return yield* fail(
          records.withOutputSoFar(
            `The call timed out after ${formatMs(admitted.prepared.timeoutMs)} and was stopped. ` +
              "If it needs longer, call it again with a longer timeout or split the work."
          ),
          { timedOut: true, ...records.stoppedMetadata() }
        )
      }
      return yield* Effect.fail(error)
    }
    const result = executed.right
    if (result._tag === "Failed") {
      return yield* fail(result.error, result.metadata !== undefined ? { metadata: result.metadata } : {})
    }
    // an after hook that fails is skipped (Tools.finish): the output as it was, the run recorded
    const finished = yield* options.tools.finish(
      { ...admitted.hookCall, input: admitted.prepared.input },
      result.output
    )
    const output = finished.output
    // handed over, not awaited: the writer commits it at once, and it goes no later than the
    // batch's next awaited append (the next step's `step.started`, before the model sees it)
    yield* input.journal.appendLater([
      ...hookRan(finished.hookRuns),
      make("tool.finished", {
        callId,
        output: output.output,
        ...(output.metadata !== undefined ? { metadata: output.metadata } : {}),
        ...records.readsMade()
      })
    ])
    return { callId, ok: true }
  })

export const makeRunCall =
  (options: RunCallOptions): RunCall =>
  (input, call) => {
    const { journal } = input
    const { observer } = options
    const callId = call.callId
    const records = callRecords(options, input, call)
    return Effect.gen(function* () {
      const admitted = yield* admit(options, input, call)
      if (admitted._tag === "Refused") return yield* records.refuse(admitted.error, admitted.hookRuns)
      // the hooks' runs first: the write-ahead record holds the input they made
      yield* journal.append([
        ...hookRan(admitted.prepared.hookRuns),
        make("tool.invoked", { messageId: input.messageId, callId, tool: call.tool, input: admitted.prepared.input })
      ])
      if (observer !== undefined && admitted.prepared.tool.snapshotWorkspace === true) {
        yield* observer.begin({ journal, cwd: input.cwd, callId }, (end) => {
          records.observed = end
        })
      }
      const context = toolContext(options, input, callId, records, admitted)
      const executed = yield* execute(input, callId, records, admitted, context)
      return yield* settle(options, input, callId, records, admitted, executed)
    }).pipe(
      // one finalizer (each `ensuring` costs its own uninterruptible region): what the call changed,
      // then an interrupted call's record, then the intents dropped — after the interrupt's record
      // too: until then the call may still be writing (`endObserved` and `interrupted` never fail)
      Effect.onExit((exit) =>
        Effect.ensuring(
          Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)
            ? Effect.zipRight(records.endObserved, records.interrupted)
            : records.endObserved,
          records.dropIntents
        )
      )
    )
  }
