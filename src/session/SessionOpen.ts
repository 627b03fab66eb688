/**
 * Opening a session to drive it (DESIGN §4): the session lease (taken over at once from a process of
 * this machine that is gone), the refusal of a deleted session, the crash sweep (`Recovery.recover`:
 * the commands a dead process left running are stopped, the file changes it announced are checked
 * on disk), the journal every event of the driver goes through (fenced by the lease), and the
 * `Driver` the turns work with. Sessions.ts keeps the open drivers; TurnLoop.ts runs their turns.
 */
import { hostname } from "node:os"
import { Effect, Option, Ref, Schema, type Scope, SubscriptionRef } from "effect"
import type { SessionId } from "../domain/Ids.js"
import { EventStore } from "../store/EventStore.js"
import * as Projection from "../store/Projection.js"
import type { RecoverOptions } from "../store/Recovery.js"
import * as Recovery from "../store/Recovery.js"
import { makeJournal, type SessionJournal } from "../store/SessionJournal.js"
import type { SessionState } from "../store/SessionState.js"
import { restore } from "../store/Snapshots.js"
import { checkIntent } from "../tools/intentRecovery.js"
import { isRecordedGroup, isZombie, stopRecordedGroup } from "../tools/processGroup.js"
import { removeStaleSandboxDirs } from "../tools/Sandbox.js"
import type { SecretsService } from "../tools/Secrets.js"
import type { Steer } from "./Processor.js"
import type { TurnOutcome } from "./TurnLoop.js"

/** Why the session cannot be driven: not open here, unknown, deleted, or held by another process. */
export class SessionUnavailable extends Schema.TaggedError<SessionUnavailable>()("SessionUnavailable", {
  sessionId: Schema.String,
  reason: Schema.Literal("not-open", "unknown", "deleted", "held", "lease-lost", "busy"),
  message: Schema.String
}) {}

/** A session open for driving in this process: what its turns work with. */
export interface Driver {
  readonly id: SessionId
  readonly cwd: string
  readonly journal: SessionJournal
  readonly lock: Effect.Semaphore
  /** a turn fiber runs (or is about to) */
  readonly running: Ref.Ref<boolean>
  /** completes the current stream's steer signal */
  readonly steer: Ref.Ref<Steer | undefined>
  readonly interruptReason: Ref.Ref<string>
  /** `running` and the latest outcome, for `wait` */
  readonly status: SubscriptionRef.SubscriptionRef<{
    readonly running: boolean
    readonly last: TurnOutcome | undefined
  }>
  readonly leaseLost: Effect.Effect<boolean>
  /** set by `close`: no further turn starts */
  readonly closed: Ref.Ref<boolean>
  readonly scope: Scope.CloseableScope
}

/** The lease owner id of a process: `host:pid:random`. */
export const ownerId = (random: string): string => `${hostname()}:${process.pid}:${random}`

/**
 * Whether a lease owner is a process of this machine that no longer runs (its lease can be taken
 * over without waiting for it to expire): `host:pid:…` with this host name and a pid that is gone.
 */
export const ownerIsDead = (owner: string): boolean => {
  const [host, pidText] = owner.split(":")
  const pid = Number(pidText)
  if (host !== hostname() || !Number.isInteger(pid) || pid <= 0 || pid === process.pid) return false
  try {
    process.kill(pid, 0)
    // a killed process whose parent died too stays a zombie where nothing reaps orphans: it is gone
    return isZombie(pid)
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH"
  }
}

/**
 * Told once, before they are stopped, that a dead process left commands of `sessionId` running:
 * found when the session is opened (`open`), or by the repair at start-up (`start`).
 */
export type LeftoverCommandsNotice = (sessionId: SessionId, found: "open" | "start") => Effect.Effect<void>

/** `stopRecordedGroup` for the groups of one opening, telling `onLeftoverCommands` first */
const stopLeftovers = (
  sessionId: SessionId,
  notify: LeftoverCommandsNotice | undefined,
  found: "open" | "start"
): NonNullable<RecoverOptions["stopGroup"]> => {
  if (notify === undefined) return stopRecordedGroup
  let told = false
  return (group) =>
    Effect.gen(function* () {
      if (!isRecordedGroup(group)) return false
      // the groups are stopped at the same time: the first one found alive tells for all
      if (!told) {
        told = true
        yield* notify(sessionId, found)
      }
      return yield* stopRecordedGroup(group)
    })
}

/** The process groups the running calls of `state` recorded (`tool.process`). */
const recordedGroups = (state: SessionState): ReadonlyArray<Recovery.RecordedGroup> =>
  Projection.openToolParts(state).flatMap((part) => (part.state._tag === "running" ? (part.state.processes ?? []) : []))

/**
 * The repair at start-up (docs/tools.md, "After a crash"), run by `Sessions` at its first opening:
 * each other session whose lease a dead process of this machine holds and whose recorded command
 * group is still alive is repaired as opening it would (lease taken, group stopped, crash sweep
 * appended, lease released); a live or remote owner's session is left alone. Then dead processes'
 * sandbox directories are removed. Returns the sessions repaired.
 */
export const repairDeadOwners = Effect.fn("SessionOpen.repairDeadOwners")(function* (options: {
  /** the lease owner id of this process */
  readonly owner: string
  readonly leaseTtlMs: number
  /** the session the caller is opening: its own opening repairs it */
  readonly except?: SessionId | undefined
  readonly onLeftoverCommands?: LeftoverCommandsNotice | undefined
}) {
  const store = yield* EventStore
  const repaired: Array<SessionId> = []
  const leases = yield* store.leases.pipe(
    Effect.catchAll((error) =>
      Effect.as(Effect.logWarning("could not read the session leases to repair what dead processes left", error), [])
    )
  )
  for (const lease of leases) {
    if (lease.sessionId === options.except || lease.owner === options.owner || !ownerIsDead(lease.owner)) continue
    const sessionId = lease.sessionId
    const repair = Effect.gen(function* () {
      const left = recordedGroups(yield* restore(sessionId))
      if (!left.some(isRecordedGroup)) return
      // taken over as an open takes it; a process that took it meanwhile repairs it itself
      yield* store.releaseLease(sessionId, lease.owner)
      const held = yield* Recovery.holdLease(sessionId, options.owner, { ttlMs: options.leaseTtlMs }).pipe(
        Effect.as(true),
        Effect.catchTag("LeaseHeld", () => Effect.succeed(false))
      )
      if (!held) return
      const stopGroup = stopLeftovers(sessionId, options.onLeftoverCommands, "start")
      const indexed = yield* store.session(sessionId)
      if (Option.isSome(indexed) && indexed.value.deleted) {
        // a deleted session is not appended to: its commands are stopped all the same
        yield* Effect.forEach(recordedGroups(yield* restore(sessionId)), stopGroup, {
          concurrency: "unbounded",
          discard: true
        })
      } else yield* Recovery.recover(sessionId, { stopGroup, checkIntent, owner: options.owner })
      repaired.push(sessionId)
    }).pipe(Effect.scoped)
    yield* repair.pipe(
      Effect.catchAll((error) =>
        Effect.logWarning(`could not stop the commands session ${sessionId} left running when its process died`, error)
      )
    )
  }
  removeStaleSandboxDirs()
  return repaired
})

/** The error of a driver whose lease another process took. */
export const leaseLostError = (sessionId: SessionId) =>
  new SessionUnavailable({
    sessionId,
    reason: "lease-lost",
    message:
      `lost the lease of session ${sessionId} to another process (this one stalled past it); ` +
      "it writes nothing more to the session: close it and open it again to go on"
  })

const deletedError = (sessionId: SessionId) =>
  new SessionUnavailable({
    sessionId,
    reason: "deleted",
    message:
      `session ${sessionId} was deleted (logbook sessions delete), so it cannot be continued; ` +
      "its events are kept (logbook sessions show reads them): start a new session instead"
  })

export interface OpenOptions {
  /** the lease owner id of this process */
  readonly owner: string
  /** the session lease's time to live (ms) */
  readonly leaseTtlMs: number
  /** snapshot every this many events (the journal's default when unset) */
  readonly snapshotEvery?: number | undefined
  /** masks what the journal writes */
  readonly secrets: SecretsService
  /** told once, before they are stopped, that a dead process left commands running (`SessionsOptions`) */
  readonly onLeftoverCommands?: LeftoverCommandsNotice | undefined
}

/**
 * Opens `sessionId` to drive it: its lease, its crash sweep, its journal and its driver, whose
 * resources live in `scope` (the caller closes it when the opening fails). Also the state the sweep
 * left.
 */
export const openDriver = (sessionId: SessionId, scope: Scope.CloseableScope, options: OpenOptions) =>
  Effect.gen(function* () {
    const store = yield* EventStore
    const { owner, leaseTtlMs } = options
    const take = Recovery.holdLease(sessionId, owner, { ttlMs: leaseTtlMs })
    const lease = yield* take.pipe(
      Effect.catchTag("LeaseHeld", (held) =>
        // a lease left by a process of this machine that is gone (killed) is taken over at once
        ownerIsDead(held.owner)
          ? store.releaseLease(sessionId, held.owner).pipe(Effect.zipRight(take))
          : Effect.fail(held)
      ),
      Effect.catchTag("LeaseHeld", (held) =>
        Effect.fail(
          new SessionUnavailable({
            sessionId,
            reason: "held",
            message:
              `session ${sessionId} is being driven by another logbook process (${held.owner}); ` +
              "wait for it to finish or stop it (if it is gone, its lease runs out within " +
              `${Math.max(1, Math.ceil(leaseTtlMs / 1000))}s)`
          })
        )
      )
    )
    // deleted (`sessions delete`, which holds the lease while it writes): refused before the
    // crash sweep could append to it
    const indexed = yield* store.session(sessionId)
    if (Option.isSome(indexed) && indexed.value.deleted) return yield* Effect.fail(deletedError(sessionId))
    // a command the dead process started may still run: stop it before the sweep ends its call;
    // a file change it announced and never recorded is checked on disk
    const { state, snapshotSeq } = yield* Recovery.recover(sessionId, {
      stopGroup: stopLeftovers(sessionId, options.onLeftoverCommands, "open"),
      checkIntent,
      owner
    })
    if (state.lastSeq === 0)
      return yield* Effect.fail(
        new SessionUnavailable({ sessionId, reason: "unknown", message: `no session ${sessionId}` })
      )
    if (state.deleted) return yield* Effect.fail(deletedError(sessionId))
    // every event of this driver is fenced by the lease: after losing it, nothing more is written
    const journal = yield* makeJournal(sessionId, {
      initial: state,
      snapshotSeq,
      every: options.snapshotEvery,
      owner,
      redact: options.secrets.redact,
      // a refused write means another process took the session: stop as a lost lease does
      onFenced: lease.markLost
    })
    const driver: Driver = {
      id: sessionId,
      cwd: state.cwd ?? process.cwd(),
      journal,
      lock: yield* Effect.makeSemaphore(1),
      running: yield* Ref.make(false),
      steer: yield* Ref.make<Steer | undefined>(undefined),
      interruptReason: yield* Ref.make("user"),
      status: yield* SubscriptionRef.make<{ running: boolean; last: TurnOutcome | undefined }>({
        running: false,
        last: undefined
      }),
      leaseLost: lease.isLost,
      closed: yield* Ref.make(false),
      scope
    }
    return { driver, state }
  })
