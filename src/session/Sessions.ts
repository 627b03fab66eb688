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
import { Secrets, type SecretsService } from "../tools/Secrets.js"
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
import { hookRanEvents, PromptBlocked, SessionHooks, type SessionHooksService } from "./SessionHooks.js"
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

export { PromptBlocked } from "./SessionHooks.js"
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
  /**
   * context to record with the message as it is given (a re-run gives what was recorded); with it,
   * the message's hooks (`SessionHooks`) do not run
   */
  readonly context?: string | undefined
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
  /**
   * Records a user message and starts, steers or queues a turn (see the module doc). With
   * `SessionHooks`, its hooks run first: one may block the message (`PromptBlocked`: nothing is
   * recorded but the hook's run) or add context that goes with it.
   */
  readonly send: (
    sessionId: SessionId,
    text: string,
    options?: SendOptions
  ) => Effect.Effect<MessageId, RestoreError | SessionUnavailable | PromptBlocked>
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

/** What the methods of `Sessions` share: the services they use and the sessions this process has open. */
interface SessionsEnv {
  readonly options: SessionsOptions
  readonly store: EventStore["Type"]
  readonly model: Model["Type"]
  readonly secrets: SecretsService
  /** the layer's scope: each open session's scope is forked from it */
  readonly layerScope: Scope.Scope
  /** the running turns, by session */
  readonly fibers: FiberMap.FiberMap<SessionId>
  /** the sessions this process has open */
  readonly drivers: Ref.Ref<Map<SessionId, Driver>>
  /** one session opened at a time */
  readonly openLock: Effect.Semaphore
  /** this process's lease owner id */
  readonly owner: string
  readonly leaseTtlMs: number
  /** the repair of what dead processes left running was done (at the first opening) */
  readonly repairedAtStart: Ref.Ref<boolean>
  readonly compactor: Compactor
  readonly turns: TurnLoop
  /** the hooks on messages and turns, when the program gives them */
  readonly hooks: SessionHooksService | undefined
}
type Compactor = ReturnType<typeof makeCompactor>
type TurnLoop = ReturnType<typeof makeTurnLoop>

/** The services, the compactor and the turn loop, and empty registries of open sessions and turns. */
const makeSessionsEnv = (options: SessionsOptions) =>
  Effect.gen(function* () {
    const store = yield* EventStore
    const processor = yield* Processor
    const actions = yield* Actions
    const tools = yield* Tools
    const model = yield* Model
    const retry = yield* Retry
    const secrets = yield* Secrets
    const instructions = yield* Instructions
    const hooks = Option.getOrUndefined(yield* Effect.serviceOption(SessionHooks))
    const compactor = makeCompactor(model, retry, {
      compaction: { ...defaultCompactionOptions, ...options.compaction },
      price: options.price,
      maxOutputTokens: options.maxOutputTokens
    })
    const env: SessionsEnv = {
      options,
      store,
      model,
      secrets,
      layerScope: yield* Effect.scope,
      fibers: yield* FiberMap.make<SessionId>(),
      drivers: yield* Ref.make(new Map<SessionId, Driver>()),
      openLock: yield* Effect.makeSemaphore(1),
      owner: options.owner ?? ownerId(yield* uuidV7),
      leaseTtlMs: options.leaseTtlMs ?? 30_000,
      repairedAtStart: yield* Ref.make(false),
      compactor,
      turns: makeTurnLoop({ processor, actions, compactor, model, tools, instructions, secrets, options, hooks }),
      hooks
    }
    return env
  })

const unavailable = (sessionId: SessionId) =>
  new SessionUnavailable({
    sessionId,
    reason: "not-open",
    message: `session ${sessionId} is not open in this process`
  })

const driverOf = (env: SessionsEnv, sessionId: SessionId) =>
  Effect.flatMap(Ref.get(env.drivers), (map) => {
    const driver = map.get(sessionId)
    return driver === undefined ? Effect.fail(unavailable(sessionId)) : Effect.succeed(driver)
  })

/**
 * Opens a session once per process (a no-op when it is open). The scope is forked and the driver
 * registered without an interrupt in between (that would leak the lease); the opening itself stays
 * interruptible, and closes the scope when it is interrupted.
 */
const open = (env: SessionsEnv, sessionId: SessionId) =>
  env.openLock.withPermits(1)(
    Effect.uninterruptibleMask((restore) =>
      Effect.gen(function* () {
        const { options, store, owner, leaseTtlMs } = env
        const existing = (yield* Ref.get(env.drivers)).get(sessionId)
        if (existing !== undefined) return yield* existing.journal.state
        // at the first opening: what processes of this machine left running when they died is
        // stopped and recorded in their sessions (this one is repaired by its own opening)
        if (!(yield* Ref.getAndSet(env.repairedAtStart, true)))
          yield* restore(
            repairDeadOwners({
              owner,
              leaseTtlMs,
              except: sessionId,
              onLeftoverCommands: options.onLeftoverCommands
            }).pipe(Effect.provideService(EventStore, store))
          )
        const scope = yield* Scope.fork(env.layerScope, ExecutionStrategy.sequential)
        const opened = yield* openDriver(sessionId, scope, {
          owner,
          leaseTtlMs,
          snapshotEvery: options.snapshotEvery,
          secrets: env.secrets,
          onLeftoverCommands: options.onLeftoverCommands
        }).pipe(
          Scope.extend(scope),
          Effect.provideService(EventStore, store),
          restore,
          Effect.onError(() => Scope.close(scope, Exit.void))
        )
        yield* Ref.update(env.drivers, (map) => new Map(map).set(sessionId, opened.driver))
        return opened.state
      })
    )
  )

/** `session.created` (its title masked), then the session opened. */
const create = (env: SessionsEnv, createOptions: CreateOptions) =>
  Effect.gen(function* () {
    const sessionId = yield* makeSessionId
    yield* env.store.append(sessionId, [
      make("session.created", {
        cwd: createOptions.cwd,
        model: env.model.name,
        ...(createOptions.rerunOf !== undefined ? { rerunOf: createOptions.rerunOf } : {}),
        // not through the journal: masked here (a title cut from a message should be masked before the cut)
        ...(createOptions.title !== undefined ? { title: env.secrets.redactText(createOptions.title) } : {})
      })
    ])
    yield* open(env, sessionId)
    return sessionId
  })

/** Starts a turn delivering `messageIds` (after `before`) and its fiber; no turn runs; under the lock. */
const begin = (
  env: SessionsEnv,
  driver: Driver,
  messageIds: ReadonlyArray<MessageId>,
  before: ReadonlyArray<NewEvent> = []
) =>
  Effect.gen(function* () {
    const turnId = yield* env.turns.startTurn(driver, messageIds, before)
    yield* Ref.set(driver.running, true)
    yield* Ref.set(driver.interruptReason, "user")
    yield* SubscriptionRef.update(driver.status, (s) => ({ ...s, running: true }))
    yield* FiberMap.run(env.fibers, driver.id, env.turns.run(driver, turnId))
  })

/**
 * `f` with the session's driver, under its lock (which `send` and every decision about delivering
 * a message take), once it is sure the driver can take a message (not closed, its lease held).
 */
const locked = <A, E>(env: SessionsEnv, sessionId: SessionId, f: (driver: Driver) => Effect.Effect<A, E>) =>
  Effect.flatMap(driverOf(env, sessionId), (driver) =>
    driver.lock.withPermits(1)(
      Effect.gen(function* () {
        if (yield* Ref.get(driver.closed)) return yield* Effect.fail(unavailable(sessionId))
        if (yield* driver.leaseLost) return yield* Effect.fail(leaseLostError(sessionId))
        return yield* f(driver)
      })
    )
  )

/**
 * The session hooks on a message (docs/hooks.md): `SessionStart` at the session's first message,
 * then `UserPromptSubmit`; the runs to record, and the context they add or the block.
 */
const messageHooks = (env: SessionsEnv, sessionId: SessionId, text: string) =>
  Effect.gen(function* () {
    const hooks = env.hooks
    if (hooks === undefined) return { runs: [], context: undefined, block: undefined }
    const driver = yield* driverOf(env, sessionId)
    const first = !(yield* driver.journal.state).messages.some((m) => m.role === "user")
    const context = { sessionId, cwd: driver.cwd }
    const start = first ? yield* hooks.sessionStart(context) : { context: [], runs: [] }
    const submit = yield* hooks.promptSubmit({ ...context, prompt: text })
    const added = [...start.context, ...submit.context]
    return {
      runs: hookRanEvents([...start.runs, ...submit.runs]),
      context: added.length === 0 ? undefined : added.join("\n\n"),
      block: submit.block
    }
  })

/** A user message: a new turn when none runs, else recorded as a steer (signalled) or queued. */
const send = (env: SessionsEnv, sessionId: SessionId, text: string, sendOptions: SendOptions = {}) =>
  Effect.flatMap(
    sendOptions.context !== undefined
      ? Effect.succeed({ runs: [], context: sendOptions.context, block: undefined })
      : messageHooks(env, sessionId, text),
    (hooked) =>
      hooked.block !== undefined
        ? locked(env, sessionId, (driver) =>
            Effect.zipRight(
              driver.journal.append(hooked.runs),
              new PromptBlocked({
                sessionId,
                reason: hooked.block!,
                message: `a UserPromptSubmit hook blocked the message, so nothing was sent: ${hooked.block}`
              })
            )
          )
        : sendMessage(env, sessionId, text, sendOptions, hooked)
  )

const sendMessage = (
  env: SessionsEnv,
  sessionId: SessionId,
  text: string,
  sendOptions: SendOptions,
  hooked: { readonly runs: ReadonlyArray<NewEvent>; readonly context: string | undefined }
) =>
  locked(env, sessionId, (driver) =>
    Effect.gen(function* () {
      const messageId = yield* makeMessageId
      const running = yield* Ref.get(driver.running)
      const asked = sendOptions.mode ?? "prompt"
      const context = hooked.context === undefined ? {} : { context: hooked.context }
      if (!running) {
        const state = yield* driver.journal.state
        // messages an interrupt left waiting (queued, steered) go first, in the same turn
        yield* begin(
          env,
          driver,
          [...undelivered(state), messageId],
          [...hooked.runs, make("user.message", { messageId, text, mode: "prompt", ...context })]
        )
        return messageId
      }
      const mode: UserMode = asked === "queue" ? "queue" : "steer"
      yield* driver.journal.append([...hooked.runs, make("user.message", { messageId, text, mode, ...context })])
      if (mode === "steer") {
        const steer = yield* Ref.get(driver.steer)
        if (steer !== undefined) yield* signalSteer(steer)
      }
      return messageId
    })
  )

/** `user.withdrawn` for a message no turn or step has delivered, decided under the journal's lock. */
const withdraw = (env: SessionsEnv, sessionId: SessionId, messageId: MessageId) =>
  locked(env, sessionId, (driver) =>
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

/** A turn with the messages waiting for delivery, when no turn runs and some wait. */
const sendPending = (env: SessionsEnv, sessionId: SessionId) =>
  locked(env, sessionId, (driver) =>
    Effect.gen(function* () {
      if (yield* Ref.get(driver.running)) return false
      const waiting = undelivered(yield* driver.journal.state)
      if (waiting.length === 0) return false
      yield* begin(env, driver, waiting)
      return true
    })
  )

/**
 * Stops the turn (if one runs) under the lock `send` takes: a message sent meanwhile waits and
 * then starts a new turn. The turn's own cleanup runs as its fiber ends; it runs here again (it is
 * idempotent) for a turn whose fiber was interrupted before it started.
 */
const stop = (env: SessionsEnv, driver: Driver, reason: string) =>
  Effect.gen(function* () {
    if (!(yield* Ref.get(driver.running))) return
    yield* Ref.set(driver.interruptReason, reason)
    yield* FiberMap.remove(env.fibers, driver.id)
    yield* env.turns.cleanup(driver, reason)
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

const interrupt = (env: SessionsEnv, sessionId: SessionId, reason = "user") =>
  Effect.flatMap(driverOf(env, sessionId), (driver) => driver.lock.withPermits(1)(stop(env, driver, reason)))

/** Waits until no turn runs, and returns how the last one ended. */
const wait = (env: SessionsEnv, sessionId: SessionId) =>
  Effect.gen(function* () {
    const driver = yield* driverOf(env, sessionId)
    const status = yield* driver.status.changes.pipe(
      Stream.filter((s) => !s.running),
      Stream.runHead
    )
    return Option.flatMap(status, (s) => Option.fromNullable(s.last))
  })

/** Interrupts the session's turn (reason `shutdown`), forgets its driver and releases it (its scope closed). */
const close = (env: SessionsEnv, sessionId: SessionId) =>
  Effect.gen(function* () {
    const driver = (yield* Ref.get(env.drivers)).get(sessionId)
    if (driver === undefined) return
    yield* driver.lock.withPermits(1)(
      Effect.gen(function* () {
        yield* Ref.set(driver.closed, true)
        yield* stop(env, driver, "shutdown")
      })
    )
    yield* Ref.update(env.drivers, (map) => {
      const copy = new Map(map)
      copy.delete(sessionId)
      return copy
    })
    yield* Scope.close(driver.scope, Exit.void)
  })

/** The whole conversation summarised now, when no turn runs: busy while the summary is written, idle after. */
const compact = (env: SessionsEnv, sessionId: SessionId) =>
  Effect.gen(function* () {
    const { turns, compactor } = env
    const driver = yield* driverOf(env, sessionId)
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

export const makeSessions = (options: SessionsOptions) =>
  Effect.gen(function* () {
    const env = yield* makeSessionsEnv(options)

    // at shutdown: every turn is interrupted with reason `shutdown` before the leases go
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        for (const id of (yield* Ref.get(env.drivers)).keys()) yield* close(env, id)
      })
    )

    // a span per call (`Sessions.send` …); a turn started by `send` runs under its span
    const service: SessionsService = {
      create: Effect.fn("Sessions.create")((createOptions: CreateOptions) => create(env, createOptions)),
      open: Effect.fn("Sessions.open")((sessionId: SessionId) => open(env, sessionId)),
      send: Effect.fn("Sessions.send")((sessionId: SessionId, text: string, sendOptions?: SendOptions) =>
        send(env, sessionId, text, sendOptions)
      ),
      withdraw: Effect.fn("Sessions.withdraw")((sessionId: SessionId, messageId: MessageId) =>
        withdraw(env, sessionId, messageId)
      ),
      sendPending: Effect.fn("Sessions.sendPending")((sessionId: SessionId) => sendPending(env, sessionId)),
      interrupt: Effect.fn("Sessions.interrupt")((sessionId: SessionId, reason?: string) =>
        interrupt(env, sessionId, reason)
      ),
      wait: Effect.fn("Sessions.wait")((sessionId: SessionId) => wait(env, sessionId)),
      compact: Effect.fn("Sessions.compact")((sessionId: SessionId) => compact(env, sessionId)),
      state: Effect.fn("Sessions.state")((sessionId: SessionId) =>
        Effect.flatMap(driverOf(env, sessionId), (driver) => driver.journal.state)
      ),
      close: Effect.fn("Sessions.close")((sessionId: SessionId) => close(env, sessionId))
    }
    return service
  })

export class Sessions extends Context.Tag("logbook/Sessions")<Sessions, SessionsService>() {
  static readonly layer = (
    options: SessionsOptions
  ): Layer.Layer<Sessions, never, EventStore | Processor | Actions | Tools | Model | Retry | Secrets> =>
    Layer.scoped(Sessions, makeSessions(options))
}
