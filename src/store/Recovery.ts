/**
 * Crash recovery and the per-session lease (DESIGN §2).
 *
 * A process that drives a session holds its lease (owner id + expiry) and renews it every
 * ttl/3. When a session is opened, the lease is taken first — so no live process drives it any
 * more — and then everything the log shows as still open was left by a process that died
 * (SIGKILL skips finalizers): the sweep ends it with events, in one append.
 *
 * The sweep is a pure function of the projection (`sweepEvents`) and is idempotent: on a
 * repaired state it returns nothing.
 */
import { Clock, Deferred, Duration, Effect, Schedule } from "effect"
import { type Envelope, type FileRead, type FileRecoveryOutcome, make, type NewEvent } from "../domain/Events.js"
import type { SessionId } from "../domain/Ids.js"
import type { ToolState } from "../domain/Message.js"
import { LeaseHeld } from "./Errors.js"
import { EventStore, type Lease } from "./EventStore.js"
import { endOpenStep, endOpenToolPart } from "./openParts.js"
import type { SessionState } from "./Projection.js"
import * as Projection from "./Projection.js"
import { restoreWithBase } from "./Snapshots.js"

/** The `reason` written by the sweep. */
export const CRASH_REASON = "crash"

/**
 * The events that repair a state left by a dead process (empty when there is nothing to repair):
 * - `permission.replied {reply: "reject", interrupted: true}` for every ask nobody answered;
 * - for every file change a running call announced (`file.intent`) and did not record, what the disk
 *   holds (`findings`, checked by `RecoverOptions.checkIntent`): `file.changed {recovered: true}`
 *   when the file holds the intended content, then `file.recovered {outcome}` (see `FileRecovered`);
 * - `tool.failed {interrupted: true, reason: "crash"}` for every tool part still pending or running —
 *   its error says what became of its intents, and its `reads` carry the stamp of a file that holds
 *   what the call wrote (so the agent's next write or edit of it is not refused as changed by
 *   someone else);
 * - `action.state failed` for every action still pending or running;
 * - `step.finished {aborted: true}` for an open step and `assistant.completed` for every assistant
 *   message not completed (finish reason `crash`), so no message looks as if it were still streaming;
 * - if a turn is open, or the chat state or the session status is not idle:
 *   `turn.interrupted {reason: "crash"}`, `chat.state idle`, `session.status idle`.
 *
 * `reason` (default `crash`) is written in every event that has one; the kernel uses the same repair with
 * `user` or `shutdown` when a turn is interrupted in a live process.
 */
/** The error of a call ended by an interrupt (`reason`), or by a crash; `ran`: the tool had started. */
export const interruptedError = (reason: string, ran: boolean): string => {
  if (reason === CRASH_REASON) {
    return ran
      ? "The process running this tool stopped before it finished (crash); its outcome is unknown."
      : "The process stopped before this tool call ran (crash)."
  }
  return ran
    ? `The call was interrupted (${reason}) and stopped before it finished.`
    : `The call was interrupted (${reason}) before it ran.`
}

/** A file change a running call announced (`file.intent`), as the projection keeps it. */
export type OpenIntent = NonNullable<Extract<ToolState, { readonly _tag: "running" }>["intents"]>[number]

/** What the disk held of an open intent when the sweep checked it (`intentRecovery.checkIntent`). */
export interface IntentFinding {
  readonly outcome: FileRecoveryOutcome
  /** the SHA-256 of what the file holds (for `changed`) */
  readonly hash?: string | undefined
  /** why it could not be read (`unreadable`) */
  readonly error?: string | undefined
  /** the temporary file was there and was removed */
  readonly tempRemoved: boolean
  /** the file as it is, for the agent's reads (`applied`): real path, mtime, size, hash */
  readonly read?: FileRead | undefined
}

/** call id -> its open intents and what the disk held of each */
export type IntentFindings = ReadonlyMap<string, ReadonlyArray<readonly [OpenIntent, IntentFinding]>>

/** What the call's error says of one intent the sweep settled: what the model reads of the crash. */
const findingSentence = (intent: OpenIntent, finding: IntentFinding): string => {
  if (intent.recorded === true) return `It had written ${intent.path} and recorded the change.`
  switch (finding.outcome) {
    case "applied":
      return (
        `It had already ${intent.op === "create" ? "created" : "replaced"} ${intent.path} with the new content: ` +
        "the change is made, and recorded now (recovered after the crash)."
      )
    case "not-applied":
      return intent.op === "create"
        ? `It had not created ${intent.path} yet: the file does not exist.`
        : `It had not changed ${intent.path} yet: the file is as it was before the call.`
    case "changed":
      return finding.hash === undefined
        ? `${intent.path} is gone: something else removed it after the call began changing it. Check it before changing it again.`
        : `${intent.path} holds neither its content before the call nor the new content: something else changed it after the call began. Read it again before changing it.`
    case "unreadable":
      return `Whether it changed ${intent.path} is unknown: the file cannot be read (${finding.error ?? "unknown error"}).`
  }
}

export const sweepEvents = (
  state: SessionState,
  reason: string = CRASH_REASON,
  /** calls whose leftover processes were stopped before the sweep (their error says so) */
  stopped: ReadonlySet<string> = new Set(),
  /** the open intents of running calls, checked on disk (`RecoverOptions.checkIntent`) */
  findings: IntentFindings = new Map()
): ReadonlyArray<NewEvent> => {
  const events: Array<NewEvent> = []
  for (const asked of Object.values(state.permissions)) {
    if (asked.reply === null) {
      events.push(make("permission.replied", { permissionId: asked.permissionId, reply: "reject", interrupted: true }))
    }
  }
  for (const part of Projection.openToolParts(state)) {
    const found = findings.get(part.callId) ?? []
    const reads: Array<FileRead> = []
    for (const [intent, finding] of found) {
      if (finding.outcome === "applied" && finding.read !== undefined) reads.push(finding.read)
      if (intent.recorded === true) continue
      if (finding.outcome === "applied") {
        events.push(
          make("file.changed", {
            path: intent.path,
            op: intent.op,
            ...(intent.beforeHash !== undefined ? { beforeHash: intent.beforeHash } : {}),
            afterHash: intent.afterHash,
            callId: part.callId,
            recovered: true
          })
        )
      }
      events.push(
        make("file.recovered", {
          callId: part.callId,
          path: intent.path,
          op: intent.op,
          outcome: finding.outcome,
          ...(finding.hash !== undefined ? { hash: finding.hash } : {}),
          ...(finding.error !== undefined ? { error: finding.error } : {}),
          ...(finding.tempRemoved ? { tempRemoved: true } : {})
        })
      )
    }
    const ran = part.state._tag === "running"
    const error =
      found.length === 0
        ? interruptedError(reason, ran)
        : `The process running this tool stopped before it finished (${reason}). ${found.map(([intent, finding]) => findingSentence(intent, finding)).join(" ")}`
    events.push(
      endOpenToolPart(part, reason, {
        error: error + (stopped.has(part.callId) ? " Its command was still running and was stopped." : ""),
        timedOut: part.state._tag === "running" && part.state.timedOut === true,
        // a call that waited for an answer: the input the model sent, which no `tool.invoked` holds
        input: part.state._tag === "pending" ? part.state.input : undefined,
        reads
      })
    )
  }
  for (const [actionId, action] of Projection.openActions(state)) {
    events.push(make("action.state", { actionId, state: "failed", callIds: action.callIds }))
  }
  for (const message of state.messages) {
    if (message.role !== "assistant" || message.completedAt !== undefined) continue
    const step = endOpenStep(state, message.id, reason)
    if (step !== undefined) events.push(step)
    events.push(make("assistant.completed", { messageId: message.id, finishReason: reason }))
  }
  if (state.turn !== null || state.chatState !== "idle" || state.status._tag !== "idle") {
    events.push(
      make("turn.interrupted", {
        ...(state.turn !== null ? { turnId: state.turn.turnId } : {}),
        reason
      })
    )
    events.push(make("chat.state", { state: "idle" }))
    events.push(make("session.status", { status: { _tag: "idle" } }))
  }
  return events
}

export interface SweepResult {
  readonly state: SessionState
  /** the events the sweep appended (none when nothing was open) */
  readonly appended: ReadonlyArray<Envelope>
}

/**
 * Appends `sweepEvents(state)` in one call and returns the repaired state. The caller must hold
 * the session's lease and `state` must be the current projection.
 */
export const sweep = Effect.fn("Recovery.sweep")(function* (
  state: SessionState,
  stopped: ReadonlySet<string> = new Set(),
  /** the lease owner the repair is written for (fenced, see `AppendOptions.owner`) */
  owner?: string,
  /** the open intents of running calls, checked on disk */
  findings: IntentFindings = new Map()
) {
  const events = sweepEvents(state, CRASH_REASON, stopped, findings)
  if (events.length === 0) return { state, appended: [] } satisfies SweepResult
  const store = yield* EventStore
  const appended = yield* store.append(state.sessionId, events, { owner })
  const repaired = yield* Projection.applyAll(state, appended)
  return { state: repaired, appended } satisfies SweepResult
})

/** A process group a running call recorded (`tool.process`). */
export type RecordedGroup = NonNullable<Extract<ToolState, { readonly _tag: "running" }>["processes"]>[number]

export interface RecoverOptions {
  /**
   * Stops what is left of a process group a call of the dead process started; returns whether
   * something was stopped. The kernel passes `processGroup.stopRecordedGroup`; without it, leftover
   * processes are left alone.
   */
  readonly stopGroup?: ((group: RecordedGroup) => Effect.Effect<boolean>) | undefined
  /** the lease owner the caller holds: the repair is fenced by it */
  readonly owner?: string | undefined
  /**
   * Checks a file change a running call of the dead process announced (`file.intent`) and did not
   * settle, against the disk (paths relative to `cwd`, the session's workspace), and removes the
   * temporary file it names. The kernel passes `intentRecovery.checkIntent`; without it the call's
   * error says its outcome is unknown and nothing is recorded of the intent.
   */
  readonly checkIntent?: ((cwd: string, intent: OpenIntent) => Effect.Effect<IntentFinding>) | undefined
}

export interface RecoverResult extends SweepResult {
  /** the seq of the snapshot the state was restored from (0: none), for the journal's snapshot policy */
  readonly snapshotSeq: number
}

/**
 * Restores a session and sweeps it (the caller holds the lease). With `stopGroup`, the process
 * groups the dead process's running calls recorded are stopped first.
 */
export const recover = Effect.fn("Recovery.recover")(function* (sessionId: SessionId, options: RecoverOptions = {}) {
  const { state, snapshotSeq } = yield* restoreWithBase(sessionId)
  const stopped = new Set<string>()
  const stopGroup = options.stopGroup
  if (stopGroup !== undefined) {
    const groups = Projection.openToolParts(state).flatMap((part) =>
      part.state._tag === "running" ? (part.state.processes ?? []).map((group) => [part.callId, group] as const) : []
    )
    // at the same time: stopping one can take seconds (TERM, a grace period, KILL)
    yield* Effect.forEach(
      groups,
      ([callId, group]) =>
        Effect.map(stopGroup(group), (done) => {
          if (done) stopped.add(callId)
        }),
      { concurrency: "unbounded", discard: true }
    )
  }
  const findings = new Map<string, ReadonlyArray<readonly [OpenIntent, IntentFinding]>>()
  const checkIntent = options.checkIntent
  if (checkIntent !== undefined) {
    const cwd = state.cwd ?? process.cwd()
    for (const part of Projection.openToolParts(state)) {
      if (part.state._tag !== "running" || part.state.intents === undefined) continue
      const checked = yield* Effect.forEach(part.state.intents, (intent) =>
        Effect.map(checkIntent(cwd, intent), (finding) => [intent, finding] as const)
      )
      findings.set(part.callId, checked)
    }
  }
  const swept = yield* sweep(state, stopped, options.owner, findings)
  return { ...swept, snapshotSeq } satisfies RecoverResult
})

export interface LeaseOptions {
  /** how long the lease lives without renewal (ms); it is renewed every ttl/3 */
  readonly ttlMs: number
}

export interface LeaseHandle {
  readonly lease: Lease
  /**
   * Completes when the lease was lost: a renewal found another owner's live lease (this process
   * stalled past the ttl). The holder must stop appending.
   */
  readonly lost: Effect.Effect<LeaseHeld>
  /** Whether the lease was lost (check before driving the session further). */
  readonly isLost: Effect.Effect<boolean>
  /**
   * Marks the lease lost before a renewal finds out: an append written for it was fenced off
   * (`EventStoreError` `fenced`), so another process holds the session now.
   */
  readonly markLost: Effect.Effect<void>
}

/**
 * Takes the session's lease for the life of the scope: fails with `LeaseHeld` while another
 * owner's lease is live (an expired one is taken over), renews it every ttl/3 from a fiber of the
 * scope (on the `Clock`), and releases it when the scope closes.
 */
export const holdLease = Effect.fn("Recovery.holdLease")(function* (
  sessionId: SessionId,
  owner: string,
  options: LeaseOptions
) {
  const store = yield* EventStore
  const lease = yield* Effect.acquireRelease(store.acquireLease(sessionId, owner, options.ttlMs), () =>
    store
      .releaseLease(sessionId, owner)
      .pipe(Effect.catchAll((error) => Effect.logWarning(`could not release the lease of session ${sessionId}`, error)))
  )
  const lost = yield* Deferred.make<LeaseHeld>()
  const interval = Duration.millis(Math.max(1, Math.floor(options.ttlMs / 3)))
  // a lease that is no longer ours (taken over, or taken and released meanwhile) is lost for good:
  // renewing must not take it back, the session may have moved on without this process
  const renew = store.acquireLease(sessionId, owner, options.ttlMs, { renewOnly: true }).pipe(
    Effect.asVoid,
    // a failed write is retried at the next tick; the lease lives ttl, i.e. three ticks
    Effect.catchTag("EventStoreError", (error) =>
      Effect.logWarning(`could not renew the lease of session ${sessionId}`, error)
    )
  )
  yield* renew.pipe(
    Effect.delay(interval),
    Effect.repeat(Schedule.spaced(interval)),
    Effect.catchTag("LeaseHeld", (held) =>
      Effect.logError(`lost the lease of session ${sessionId} to ${held.owner}`).pipe(
        Effect.zipRight(Deferred.succeed(lost, held))
      )
    ),
    Effect.forkScoped
  )
  const markLost = Effect.flatMap(Clock.currentTimeMillis, (now) =>
    Effect.logError(`lost the lease of session ${sessionId}: an append was fenced off`).pipe(
      Effect.zipRight(
        Deferred.succeed(
          lost,
          new LeaseHeld({ sessionId, owner: "another process (an append was fenced off)", expiresAt: now })
        )
      ),
      Effect.asVoid
    )
  )
  const handle: LeaseHandle = {
    lease,
    lost: Deferred.await(lost),
    isLost: Deferred.isDone(lost),
    markLost: Effect.whenEffect(
      markLost,
      Effect.map(Deferred.isDone(lost), (done) => !done)
    ).pipe(Effect.asVoid)
  }
  return handle
})

/**
 * Opens a session to drive it: takes and keeps its lease for the scope (`holdLease`), restores
 * its state and sweeps what a dead process left open (`sweep`), in one append. Returns the
 * repaired state. Fails with `LeaseHeld` while another live process drives the session.
 */
export const openSession = Effect.fn("Recovery.openSession")(function* (
  sessionId: SessionId,
  owner: string,
  options: LeaseOptions
) {
  yield* holdLease(sessionId, owner, options)
  const { state } = yield* recover(sessionId)
  return state
})
