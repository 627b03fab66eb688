/**
 * The interaction session (DESIGN §4): prompt, steer, queue, interrupt, and the turn loop.
 *
 * A session is opened once per process (`open`, SessionOpen.ts): its lease is taken and kept (no
 * other process drives it meanwhile), what a dead process left open is swept, and a `SessionJournal`
 * appends its events. A turn runs as a fiber in a `FiberMap` keyed by session id; what it does
 * (`turn.started`, the steps and tool batches, the closing events, the turns after it) is
 * TurnLoop.ts.
 *
 * Messages (`send`), by what the session is doing:
 * - idle: the message starts a turn (mode `prompt`; messages an interrupt left waiting go first).
 * - a turn runs, mode `steer` (`prompt` is taken as `steer`): recorded at once; while the model
 *   streams, the stream is stopped (`chat.state interrupted`), its partial text kept, the calls that
 *   fully arrived run; the next step delivers the message with the tool results.
 * - a turn runs, mode `queue`: recorded, delivered when the turn ends, as a new turn (all queued
 *   messages together).
 *
 * Until a turn or step delivers it, a steered or queued message can be taken back (`withdraw`,
 * `user.withdrawn`) to be edited and sent again: a step decides what it delivers when its
 * `step.started` is appended (`SessionJournal.appendWith`), and a withdrawal decides under the same
 * journal lock, so a message is either withdrawn or delivered, never both. `sendPending` starts a
 * turn with the messages an interrupt left waiting (queued, or steered too late), without a new one.
 *
 * When a turn ends, the messages it left undelivered (a steer that came during its last step,
 * queued ones unless it failed) start the next turn, decided under the same lock `send` takes, so no
 * message is ever stranded.
 *
 * `interrupt` stops the turn: the model request is aborted, running tools are interrupted (a
 * command's process group killed), and every open part, action, step and the turn are ended
 * (`Recovery.sweepEvents` with the reason), then idle. It holds the lock `send` takes, so a message
 * sent meanwhile waits and then starts a new turn. Queued messages stay queued. Whatever way a turn
 * ends — finished, failed (a model error, a store error, a bug), interrupted — the session ends
 * `idle` and `wait` returns.
 */

import {
  Context,
  Effect,
  ExecutionStrategy,
  Exit,
  FiberMap,
  Layer,
  Option,
  Ref,
  Schema,
  Scope,
  Stream,
  SubscriptionRef
} from "effect"
import { make, type NewEvent } from "../domain/Events.js"
import { type MessageId, makeMessageId, makeSessionId, type SessionId, type TurnId, uuidV7 } from "../domain/Ids.js"
import type { UserMode } from "../domain/Message.js"
import { Model } from "../model/Model.js"
import type { Price } from "../model/Price.js"
import { Retry } from "../model/Retry.js"
import { EventStore } from "../store/EventStore.js"
import type { SessionState } from "../store/Projection.js"
import type { RestoreError } from "../store/Snapshots.js"
import { Secrets } from "../tools/Secrets.js"
import { Tools } from "../tools/Tools.js"
import { Actions } from "./Actions.js"
import {
  type CompactionFailed,
  type CompactionOptions,
  type CompactionResult,
  defaultCompactionOptions,
  makeCompactor
} from "./Compaction.js"
import { Instructions } from "./Instructions.js"
import { Processor, signalSteer } from "./Processor.js"
import {
  type Driver,
  type LeftoverCommandsNotice,
  leaseLostError,
  openDriver,
  ownerId,
  repairDeadOwners,
  SessionUnavailable
} from "./SessionOpen.js"
import type { StepLimits } from "./StepLimits.js"
import { lastTurnFigures, makeTurnLoop, type TurnOutcome } from "./TurnLoop.js"

export { ownerId, ownerIsDead, SessionUnavailable } from "./SessionOpen.js"
export type { TurnOutcome } from "./TurnLoop.js"

export interface SessionsOptions {
  /** the most model steps in one turn */
  readonly maxSteps: number
  /** snapshot every this many events */
  readonly snapshotEvery?: number | undefined
  /** prices of the model, for the cost of each step */
  readonly price?: Price | undefined
  /** the most output tokens per step */
  readonly maxOutputTokens?: number | undefined
  /** the bounds of one step: its output bytes and its tool calls (`StepLimits.ts`; defaults `defaultStepLimits`) */
  readonly step?: Partial<StepLimits> | undefined
  /** keeping the context bounded: pruning and compaction (`Compaction.ts`; defaults `defaultCompactionOptions`) */
  readonly compaction?: Partial<CompactionOptions> | undefined
  /**
   * the system prompt for a session working in `cwd` (default `systemPrompt`); the project's
   * instructions (`Instructions`, read at the start of each turn) follow it
   */
  readonly system?: ((cwd: string) => string) | undefined
  /**
   * Asked before each model request (a step's, a summary's): a string replaces the turn's system
   * prompt for that request (`logbook rerun` sends the prompt the log recorded, or the one it forks
   * with); undefined keeps it
   */
  readonly systemOverride?: (() => string | undefined) | undefined
  /** the session lease's time to live (ms, default 30000; renewed every third of it) */
  readonly leaseTtlMs?: number | undefined
  /** the lease owner id of this process (default: host, pid and a random id) */
  readonly owner?: string | undefined
  /**
   * Called once per session when commands a dead process left running are found (its recorded
   * process groups, still alive), before they are stopped — which can take a few seconds (SIGTERM,
   * a grace period, SIGKILL): when the session is opened (`open`), or by the repair when this
   * layer is built (`start`, `repairDeadOwners`). `logbook run` says so on stderr.
   */
  readonly onLeftoverCommands?: LeftoverCommandsNotice | undefined
}

export interface CreateOptions {
  /** the workspace directory (absolute) */
  readonly cwd: string
  readonly title?: string | undefined
  /** the session re-runs another (`session.created` `rerunOf`) */
  readonly rerunOf?: { readonly sessionId: string; readonly fromRequest?: number | undefined } | undefined
}

export interface SendOptions {
  /** default `prompt` (taken as `steer` while a turn runs) */
  readonly mode?: UserMode | undefined
}

/** Why a user message cannot be withdrawn: no such message waiting, or a turn or step delivered it. */
export class WithdrawRefused extends Schema.TaggedError<WithdrawRefused>()("WithdrawRefused", {
  sessionId: Schema.String,
  messageId: Schema.String,
  reason: Schema.Literal("unknown", "delivered"),
  message: Schema.String
}) {}

/** User messages recorded and not delivered yet, in log order. */
const undelivered = (state: SessionState): ReadonlyArray<MessageId> =>
  state.messages.flatMap((m) => (m.role === "user" && !m.delivered ? [m.id] : []))

export interface SessionsService {
  /** Creates a session working in `cwd` and opens it. */
  readonly create: (options: CreateOptions) => Effect.Effect<SessionId, RestoreError | SessionUnavailable>
  /** Opens an existing session (lease, crash sweep); a no-op when this process has it open. */
  readonly open: (sessionId: SessionId) => Effect.Effect<SessionState, RestoreError | SessionUnavailable>
  /** Records a user message and starts, steers or queues a turn (see the module doc). */
  readonly send: (
    sessionId: SessionId,
    text: string,
    options?: SendOptions
  ) => Effect.Effect<MessageId, RestoreError | SessionUnavailable>
  /**
   * Takes back a user message no turn or step has delivered yet (steered and waiting, or queued):
   * `user.withdrawn`, decided under the lock deliveries take, so it is either withdrawn or
   * delivered, never both. Returns the message, to edit and send again.
   */
  readonly withdraw: (
    sessionId: SessionId,
    messageId: MessageId
  ) => Effect.Effect<
    { readonly text: string; readonly mode: UserMode },
    RestoreError | SessionUnavailable | WithdrawRefused
  >
  /**
   * Starts a turn with the messages waiting for delivery alone (queued, or steered when an interrupt
   * came) when no turn runs; returns whether one started (false: nothing waits, or a turn runs,
   * which delivers them itself).
   */
  readonly sendPending: (sessionId: SessionId) => Effect.Effect<boolean, RestoreError | SessionUnavailable>
  /** Interrupts the running turn (if any) and waits until the session is idle. */
  readonly interrupt: (sessionId: SessionId, reason?: string) => Effect.Effect<void, SessionUnavailable>
  /** Waits until no turn runs (queued turns included) and returns how the last one ended. */
  readonly wait: (sessionId: SessionId) => Effect.Effect<Option.Option<TurnOutcome>, SessionUnavailable>
  /** The session's current state (what this process appended included). */
  readonly state: (sessionId: SessionId) => Effect.Effect<SessionState, SessionUnavailable>
  /**
   * Compacts the session now (no turn may run): the whole conversation so far is summarised
   * (`compaction.done {trigger: "manual"}`); the next turn is sent the summary and what follows.
   */
  readonly compact: (
    sessionId: SessionId
  ) => Effect.Effect<CompactionResult, RestoreError | SessionUnavailable | CompactionFailed>
  /** Interrupts its turn (reason `shutdown`) and releases the session. */
  readonly close: (sessionId: SessionId) => Effect.Effect<void>
}

export const makeSessions = (options: SessionsOptions) =>
  Effect.gen(function* () {
    const store = yield* EventStore
    const processor = yield* Processor
    const actions = yield* Actions
    const tools = yield* Tools
    const model = yield* Model
    const retry = yield* Retry
    const secrets = yield* Secrets
    const instructions = yield* Instructions
    const layerScope = yield* Effect.scope
    const fibers = yield* FiberMap.make<SessionId>()
    const drivers = yield* Ref.make(new Map<SessionId, Driver>())
    const openLock = yield* Effect.makeSemaphore(1)
    const owner = options.owner ?? ownerId(yield* uuidV7)
    const leaseTtlMs = options.leaseTtlMs ?? 30_000
    const repairedAtStart = yield* Ref.make(false)
    const compactor = makeCompactor(model, retry, {
      compaction: { ...defaultCompactionOptions, ...options.compaction },
      price: options.price,
      maxOutputTokens: options.maxOutputTokens
    })
    const turns = makeTurnLoop({ processor, actions, compactor, model, tools, instructions, secrets, options })

    const unavailable = (sessionId: SessionId) =>
      new SessionUnavailable({
        sessionId,
        reason: "not-open",
        message: `session ${sessionId} is not open in this process`
      })

    const driverOf = (sessionId: SessionId) =>
      Effect.flatMap(Ref.get(drivers), (map) => {
        const driver = map.get(sessionId)
        return driver === undefined ? Effect.fail(unavailable(sessionId)) : Effect.succeed(driver)
      })

    // the scope is forked and the driver registered without an interrupt in between (that would leak
    // the lease); the opening itself stays interruptible, and closes the scope when it is interrupted
    const open = (sessionId: SessionId) =>
      openLock.withPermits(1)(
        Effect.uninterruptibleMask((restore) =>
          Effect.gen(function* () {
            const existing = (yield* Ref.get(drivers)).get(sessionId)
            if (existing !== undefined) return yield* existing.journal.state
            // at the first opening: what processes of this machine left running when they died is
            // stopped and recorded in their sessions (this one is repaired by its own opening)
            if (!(yield* Ref.getAndSet(repairedAtStart, true)))
              yield* restore(
                repairDeadOwners({
                  owner,
                  leaseTtlMs,
                  except: sessionId,
                  onLeftoverCommands: options.onLeftoverCommands
                }).pipe(Effect.provideService(EventStore, store))
              )
            const scope = yield* Scope.fork(layerScope, ExecutionStrategy.sequential)
            const opened = yield* openDriver(sessionId, scope, {
              owner,
              leaseTtlMs,
              snapshotEvery: options.snapshotEvery,
              secrets,
              onLeftoverCommands: options.onLeftoverCommands
            }).pipe(
              Scope.extend(scope),
              Effect.provideService(EventStore, store),
              restore,
              Effect.onError(() => Scope.close(scope, Exit.void))
            )
            yield* Ref.update(drivers, (map) => new Map(map).set(sessionId, opened.driver))
            return opened.state
          })
        )
      )

    const create = (createOptions: CreateOptions) =>
      Effect.gen(function* () {
        const sessionId = yield* makeSessionId
        yield* store.append(sessionId, [
          make("session.created", {
            cwd: createOptions.cwd,
            model: model.name,
            ...(createOptions.rerunOf !== undefined ? { rerunOf: createOptions.rerunOf } : {}),
            // not through the journal: masked here (a title cut from a message should be masked before the cut)
            ...(createOptions.title !== undefined ? { title: secrets.redactText(createOptions.title) } : {})
          })
        ])
        yield* open(sessionId)
        return sessionId
      })

    /** Starts a turn delivering `messageIds` (after `before`) and its fiber; no turn runs; under the lock. */
    const begin = (driver: Driver, messageIds: ReadonlyArray<MessageId>, before: ReadonlyArray<NewEvent> = []) =>
      Effect.gen(function* () {
        const turnId = yield* turns.startTurn(driver, messageIds, before)
        yield* Ref.set(driver.running, true)
        yield* Ref.set(driver.interruptReason, "user")
        yield* SubscriptionRef.update(driver.status, (s) => ({ ...s, running: true }))
        yield* FiberMap.run(fibers, driver.id, turns.run(driver, turnId))
      })

    /**
     * `f` with the session's driver, under its lock (which `send` and every decision about delivering
     * a message take), once it is sure the driver can take a message (not closed, its lease held).
     */
    const locked = <A, E>(sessionId: SessionId, f: (driver: Driver) => Effect.Effect<A, E>) =>
      Effect.flatMap(driverOf(sessionId), (driver) =>
        driver.lock.withPermits(1)(
          Effect.gen(function* () {
            if (yield* Ref.get(driver.closed)) return yield* Effect.fail(unavailable(sessionId))
            if (yield* driver.leaseLost) return yield* Effect.fail(leaseLostError(sessionId))
            return yield* f(driver)
          })
        )
      )

    const send = (sessionId: SessionId, text: string, sendOptions: SendOptions = {}) =>
      locked(sessionId, (driver) =>
        Effect.gen(function* () {
          const messageId = yield* makeMessageId
          const running = yield* Ref.get(driver.running)
          const asked = sendOptions.mode ?? "prompt"
          if (!running) {
            const state = yield* driver.journal.state
            // messages an interrupt left waiting (queued, steered) go first, in the same turn
            yield* begin(
              driver,
              [...undelivered(state), messageId],
              [make("user.message", { messageId, text, mode: "prompt" })]
            )
            return messageId
          }
          const mode: UserMode = asked === "queue" ? "queue" : "steer"
          yield* driver.journal.append([make("user.message", { messageId, text, mode })])
          if (mode === "steer") {
            const steer = yield* Ref.get(driver.steer)
            if (steer !== undefined) yield* signalSteer(steer)
          }
          return messageId
        })
      )

    const withdraw = (sessionId: SessionId, messageId: MessageId) =>
      locked(sessionId, (driver) =>
        Effect.gen(function* () {
          const state = yield* driver.journal.state
          const message = state.messages.find((m) => m.id === messageId)
          if (message === undefined || message.role !== "user")
            return yield* new WithdrawRefused({
              sessionId,
              messageId,
              reason: "unknown",
              message: `no user message ${messageId} in session ${sessionId}`
            })
          if (message.delivered)
            return yield* new WithdrawRefused({
              sessionId,
              messageId,
              reason: "delivered",
              message: `message ${messageId} was already delivered to the model`
            })
          // the step that would deliver it decides under the journal's lock (`appendWith`): a step
          // that started meanwhile delivered it, and the projection refuses this event then
          const appended = yield* driver.journal.appendWith((now) =>
            now.messages.some((m) => m.id === messageId && m.role === "user" && !m.delivered)
              ? [make("user.withdrawn", { messageId })]
              : []
          )
          if (appended.length === 0)
            return yield* new WithdrawRefused({
              sessionId,
              messageId,
              reason: "delivered",
              message: `message ${messageId} was delivered to the model as it was withdrawn`
            })
          return { text: message.text, mode: message.mode }
        })
      )

    const sendPending = (sessionId: SessionId) =>
      locked(sessionId, (driver) =>
        Effect.gen(function* () {
          if (yield* Ref.get(driver.running)) return false
          const waiting = undelivered(yield* driver.journal.state)
          if (waiting.length === 0) return false
          yield* begin(driver, waiting)
          return true
        })
      )

    /**
     * Stops the turn (if one runs) under the lock `send` takes: a message sent meanwhile waits and
     * then starts a new turn. The turn's own cleanup runs as its fiber ends; it runs here again (it is
     * idempotent) for a turn whose fiber was interrupted before it started.
     */
    const stop = (driver: Driver, reason: string) =>
      Effect.gen(function* () {
        if (!(yield* Ref.get(driver.running))) return
        yield* Ref.set(driver.interruptReason, reason)
        yield* FiberMap.remove(fibers, driver.id)
        yield* turns.cleanup(driver, reason)
        const state = yield* driver.journal.state
        const last: TurnOutcome = {
          turnId: state.lastTurn?.turnId ?? ("" as TurnId),
          reason: "interrupted",
          message: `interrupted (${reason})`,
          ...lastTurnFigures(state)
        }
        yield* Ref.set(driver.running, false)
        yield* SubscriptionRef.set(driver.status, { running: false, last })
      })

    const interrupt = (sessionId: SessionId, reason = "user") =>
      Effect.flatMap(driverOf(sessionId), (driver) => driver.lock.withPermits(1)(stop(driver, reason)))

    const wait = (sessionId: SessionId) =>
      Effect.gen(function* () {
        const driver = yield* driverOf(sessionId)
        const status = yield* driver.status.changes.pipe(
          Stream.filter((s) => !s.running),
          Stream.runHead
        )
        return Option.flatMap(status, (s) => Option.fromNullable(s.last))
      })

    const close = (sessionId: SessionId) =>
      Effect.gen(function* () {
        const driver = (yield* Ref.get(drivers)).get(sessionId)
        if (driver === undefined) return
        yield* driver.lock.withPermits(1)(
          Effect.gen(function* () {
            yield* Ref.set(driver.closed, true)
            yield* stop(driver, "shutdown")
          })
        )
        yield* Ref.update(drivers, (map) => {
          const copy = new Map(map)
          copy.delete(sessionId)
          return copy
        })
        yield* Scope.close(driver.scope, Exit.void)
      })

    // at shutdown: every turn is interrupted with reason `shutdown` before the leases go
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        for (const id of (yield* Ref.get(drivers)).keys()) yield* close(id)
      })
    )

    const compact = (sessionId: SessionId) =>
      Effect.gen(function* () {
        const driver = yield* driverOf(sessionId)
        return yield* driver.lock.withPermits(1)(
          Effect.gen(function* () {
            if (yield* Ref.get(driver.running)) {
              return yield* new SessionUnavailable({
                sessionId,
                reason: "busy",
                message: `session ${sessionId} is running a turn; compact it when the turn is over`
              })
            }
            if (yield* driver.leaseLost) return yield* leaseLostError(sessionId)
            // busy while the summary is written, idle after it whatever happens (an interrupt included)
            return yield* Effect.acquireUseRelease(
              driver.journal.append([make("session.status", { status: { _tag: "busy" } })]),
              () =>
                Effect.flatMap(turns.systemPrompt(driver), (system) =>
                  compactor.compact(driver.journal, turns.request(driver, system), "manual")
                ),
              () => driver.journal.append([make("session.status", { status: { _tag: "idle" } })]).pipe(Effect.ignore)
            )
          })
        )
      })

    // a span per call (`Sessions.send` …); a turn started by `send` runs under its span
    const service: SessionsService = {
      create: Effect.fn("Sessions.create")(create),
      open: Effect.fn("Sessions.open")(open),
      send: Effect.fn("Sessions.send")(send),
      withdraw: Effect.fn("Sessions.withdraw")(withdraw),
      sendPending: Effect.fn("Sessions.sendPending")(sendPending),
      interrupt: Effect.fn("Sessions.interrupt")(interrupt),
      wait: Effect.fn("Sessions.wait")(wait),
      compact: Effect.fn("Sessions.compact")(compact),
      state: Effect.fn("Sessions.state")((sessionId: SessionId) =>
        Effect.flatMap(driverOf(sessionId), (driver) => driver.journal.state)
      ),
      close: Effect.fn("Sessions.close")(close)
    }
    return service
  })

export class Sessions extends Context.Tag("logbook/Sessions")<Sessions, SessionsService>() {
  static readonly layer = (
    options: SessionsOptions
  ): Layer.Layer<Sessions, never, EventStore | Processor | Actions | Tools | Model | Retry | Secrets> =>
    Layer.scoped(Sessions, makeSessions(options))
}
