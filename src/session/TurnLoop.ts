/**
 * The turn loop (DESIGN §4): one turn of an open session from `turn.started` to its end, and the
 * turns after it for the messages it left undelivered. Sessions.ts decides when a turn starts (a
 * message, `sendPending`), keeps its fiber and stops it; this runs it:
 *
 * `turn.started` -> `assistant.started` -> steps (`Processor.run`, with retries; the context kept
 * bounded by the `Compactor` before each, and once more after a context-overflow error) -> after a
 * step with tool calls, `chat.state awaiting_tool` and the batch (`Actions.run`) -> the next step,
 * with the results and any steered message -> ... until the model answers without tool calls
 * (`stop`), `maxSteps` steps have run (`max-steps`), a step's output passed its bound
 * (`output-limit`, StepLimits.ts) or the model fails for good (`error`, with `model.error`). Then `assistant.completed`, `turn.finished`, `chat.state idle`, `session.status idle`.
 *
 * Whatever way a turn ends — finished, failed (a model error, a store error, a bug), interrupted —
 * what it left open is ended (`cleanup`: `Recovery.sweepEvents`) and the driver's `status` says how.
 */
import { Cause, Effect, Exit, Ref, SubscriptionRef } from "effect"
import { make, type NewEvent } from "../domain/Events.js"
import { type MessageId, makeMessageId, makeTurnId, type TurnId } from "../domain/Ids.js"
import { emptyUsage, type Usage } from "../domain/Message.js"
import type { Model, ModelRequest } from "../model/Model.js"
import type { Price } from "../model/Price.js"
import { classify, type RetryGaveUp } from "../model/Retry.js"
import type { SessionState } from "../store/Projection.js"
import * as Recovery from "../store/Recovery.js"
import type { RestoreError } from "../store/Snapshots.js"
import type { SecretsService } from "../tools/Secrets.js"
import type { Tools } from "../tools/Tools.js"
import type { Actions } from "./Actions.js"
import type { Compactor } from "./Compaction.js"
import { providerOf, toModelMessages } from "./History.js"
import { type InstructionsService, warnSkipped } from "./Instructions.js"
import { makeSteer, type Processor } from "./Processor.js"
import { hookRanEvents, type SessionHooksService } from "./SessionHooks.js"
import { type Driver, leaseLostError } from "./SessionOpen.js"
import { defaultStepLimits, type StepLimits as Limits, OUTPUT_LIMIT, outputLimitMessage } from "./StepLimits.js"
import { fullSystemPrompt } from "./SystemPrompt.js"

/** How a turn ended. */
export interface TurnOutcome {
  readonly turnId: TurnId
  readonly reason: "stop" | "max-steps" | "output-limit" | "error" | "interrupted"
  /** the model's finish reason of the last step (`stop`, `length` …) */
  readonly finishReason?: string | undefined
  /** for `output-limit`, `error` and `interrupted`: what happened, one sentence */
  readonly message?: string | undefined
  /** the model steps that went through (what `maxSteps` counts) */
  readonly steps: number
  /** the attempts a retry or an interrupt cut (`step.finished {aborted: true}`) */
  readonly abortedSteps?: number | undefined
  /** usage of the turn's assistant message */
  readonly usage: Usage
}

/** The step number after the last one of assistant message `messageId` (0 when it has none). */
const nextStep = (state: SessionState, messageId: MessageId): number => {
  const message = state.messages.find((m) => m.id === messageId)
  const last = message?.role === "assistant" ? message.steps.at(-1) : undefined
  return last === undefined ? 0 : last.step + 1
}

/** Undelivered user messages a running turn must deliver at its next step (everything but `queue`). */
const pendingSteer = (state: SessionState): ReadonlyArray<MessageId> =>
  state.messages.flatMap((m) => (m.role === "user" && !m.delivered && m.mode !== "queue" ? [m.id] : []))

/**
 * Steps and usage of the latest assistant message (the turn's, which is always the newest one):
 * the steps that went through, not the attempts a retry or an interrupt cut.
 */
export const lastTurnFigures = (
  state: SessionState
): { readonly steps: number; readonly abortedSteps: number; readonly usage: Usage } => {
  for (let i = state.messages.length - 1; i >= 0; i--) {
    const message = state.messages[i]!
    if (message.role === "assistant") {
      const aborted = message.steps.filter((step) => step.aborted).length
      return { steps: message.steps.length - aborted, abortedSteps: aborted, usage: message.usage }
    }
  }
  return { steps: 0, abortedSteps: 0, usage: emptyUsage }
}

/** The turn's settings (`SessionsOptions`: see there). */
export interface TurnOptions {
  readonly maxSteps: number
  readonly price?: Price | undefined
  readonly maxOutputTokens?: number | undefined
  readonly step?: Partial<Limits> | undefined
  readonly system?: ((cwd: string) => string) | undefined
  readonly systemOverride?: (() => string | undefined) | undefined
}

/** What the turns work with: the parts a step and a batch go through, taken when Sessions is built. */
export interface TurnLoopDeps {
  readonly processor: Processor["Type"]
  readonly actions: Actions["Type"]
  /** keeps each request within the model's window (built by Sessions, which compacts on demand with it too) */
  readonly compactor: Compactor
  /** the model's name (`assistant.started`) and provider (which reasoning goes back to it) */
  readonly model: Model["Type"]
  /** the tool definitions sent with each request */
  readonly tools: Tools["Type"]
  readonly instructions: InstructionsService
  /** masks the API keys in the system prompt */
  readonly secrets: SecretsService
  readonly options: TurnOptions
  /** the `Stop` hooks (and the others `Sessions` runs), when the program gives them */
  readonly hooks?: SessionHooksService | undefined
}

export interface TurnLoop {
  /**
   * The system prompt of a turn: the base prompt and the instruction files as they are when the
   * turn starts (the same for all its steps), API keys masked.
   */
  readonly systemPrompt: (driver: Driver) => Effect.Effect<string>
  /** The model request of the driver's session in a state, with the turn's system prompt. */
  readonly request: (driver: Driver, system: string) => (state: SessionState) => ModelRequest
  /** Opens a turn delivering `messageIds` (already recorded, after `before`); called under `driver.lock`. */
  readonly startTurn: (
    driver: Driver,
    messageIds: ReadonlyArray<MessageId>,
    before?: ReadonlyArray<NewEvent>
  ) => Effect.Effect<TurnId, RestoreError>
  /**
   * The turn fiber: runs the (started) turn `first`, then turns for messages left undelivered when
   * it ended (steered ones that came too late, and queued ones unless the turn failed). Whatever way
   * it ends, the session ends idle and `status` says how. An interrupt is handled by Sessions
   * (`interrupt` / `close`).
   */
  readonly run: (driver: Driver, first: TurnId) => Effect.Effect<void>
  /** Ends whatever an interrupted or failed turn left open, then idle (idempotent; never fails). */
  readonly cleanup: (driver: Driver, reason: string) => Effect.Effect<void>
}

/** What the steps of a turn work with: the loop's dependencies and the step bounds. */
interface TurnEnv extends TurnLoopDeps {
  readonly limits: Limits
}

/**
 * The system prompt of a turn: the base prompt and the instruction files as they are when the
 * turn starts (the same for all its steps), API keys masked.
 */
const turnSystemPrompt = (env: TurnEnv, driver: Driver) =>
  Effect.gen(function* () {
    const loaded = yield* env.instructions.load(driver.cwd)
    yield* warnSkipped(loaded)
    return fullSystemPrompt(driver.cwd, loaded, { base: env.options.system, redact: env.secrets.redactText })
  })

const buildRequest =
  (env: TurnEnv, driver: Driver, system: string) =>
  (state: SessionState): ModelRequest => ({
    system: env.options.systemOverride?.() ?? system,
    // reasoning goes back to the provider that produced it (never another's: a session may switch models)
    messages: toModelMessages(state, { includeReasoning: providerOf(env.model.name) }),
    tools: env.tools.definitions,
    maxOutputTokens: env.options.maxOutputTokens,
    cacheKey: driver.id
  })

/** Opens a turn delivering `messageIds` (already recorded); called under `driver.lock`. */
const startTurn = (
  env: TurnEnv,
  driver: Driver,
  messageIds: ReadonlyArray<MessageId>,
  before: ReadonlyArray<NewEvent> = []
) =>
  Effect.gen(function* () {
    const { model } = env
    const turnId = yield* makeTurnId
    yield* driver.journal.appendWith((state) => [
      // the session goes on with another model than it was on: said before anything is sent to it
      ...(state.model !== null && state.model !== model.name
        ? [make("model.switched", { from: state.model, to: model.name })]
        : []),
      ...before,
      make("turn.started", { turnId, messageIds }),
      make("session.status", { status: { _tag: "busy" } })
    ])
    return turnId
  })

/**
 * One model step with retries, a steer able to stop its stream; `GaveUp` when the model failed
 * for good.
 */
const modelStep = (env: TurnEnv, driver: Driver, messageId: MessageId, step: number, system: string) =>
  Effect.gen(function* () {
    // the signal first, then the state: a steer recorded in between is delivered by this step
    // (decided when its step.started is appended: a message withdrawn before is not)
    const steer = yield* makeSteer
    yield* Ref.set(driver.steer, steer)
    return yield* env.processor
      .run({
        journal: driver.journal,
        messageId,
        step,
        request: buildRequest(env, driver, system),
        deliver: pendingSteer,
        steer,
        price: env.options.price,
        interruptReason: Ref.get(driver.interruptReason),
        limits: env.limits
      })
      .pipe(
        Effect.ensuring(Ref.set(driver.steer, undefined)),
        Effect.catchTag("RetryGaveUp", (gaveUp) => Effect.succeed({ _tag: "GaveUp" as const, gaveUp }))
      )
  })

/** The end of a turn whose model failed for good: `model.error`, then the turn's closing events. */
const endWithModelError = (driver: Driver, turnId: TurnId, messageId: MessageId, error: RetryGaveUp) =>
  Effect.gen(function* () {
    const { journal } = driver
    yield* journal.append([
      make("model.error", {
        message: error.message,
        ...(error.error.status !== undefined ? { status: error.error.status } : {}),
        retryable: error.retryable,
        ...(error.error.providerMessage !== undefined ? { providerMessage: error.error.providerMessage } : {})
      }),
      make("assistant.completed", { messageId, finishReason: "error" }),
      make("turn.finished", { turnId, reason: "error" }),
      make("chat.state", { state: "idle" }),
      make("session.status", { status: { _tag: "idle" } })
    ])
    return {
      turnId,
      reason: "error",
      message: error.message,
      ...lastTurnFigures(yield* journal.state)
    } satisfies TurnOutcome
  })

/**
 * The turn's closing events, unless a steered message came in meanwhile (checked under the lock
 * `send` takes: it then gets one more step); whether the turn ended.
 */
const finishTurn = (
  driver: Driver,
  turnId: TurnId,
  messageId: MessageId,
  reason: TurnOutcome["reason"],
  finishReason: string | undefined
) =>
  driver.lock.withPermits(1)(
    Effect.gen(function* () {
      const { journal } = driver
      const now = yield* journal.state
      if (reason === "stop" && pendingSteer(now).length > 0) return false
      yield* journal.append([
        make("assistant.completed", { messageId, finishReason: finishReason ?? reason }),
        make("turn.finished", { turnId, reason }),
        make("chat.state", { state: "idle" }),
        make("session.status", { status: { _tag: "idle" } })
      ])
      return true
    })
  )

/**
 * The `Stop` hooks of a turn that would end (docs/hooks.md): when one blocks, its reason is
 * recorded as a steered message, and the turn goes on with it (true) — at most
 * `maxStopContinuations` times a turn; after that they are not run again in it.
 */
const stopHooks = (env: TurnEnv, driver: Driver, continuations: number) =>
  Effect.gen(function* () {
    const hooks = env.hooks
    if (hooks === undefined || continuations >= hooks.maxStopContinuations) return false
    const result = yield* hooks.stop({ sessionId: driver.id, cwd: driver.cwd, stopHookActive: continuations > 0 })
    const runs = hookRanEvents(result.runs)
    if (result.continueWith === undefined) {
      if (runs.length > 0) yield* driver.journal.append(runs)
      return false
    }
    const messageId = yield* makeMessageId
    yield* driver.journal.append([
      ...runs,
      make("user.message", { messageId, text: `Stop hook feedback:\n${result.continueWith}`, mode: "steer" })
    ])
    return true
  })

/** Runs one (started) turn to its end: the steps, the tools and the closing events. */
const runTurn = (env: TurnEnv, driver: Driver, turnId: TurnId) =>
  Effect.gen(function* () {
    const { compactor, options, limits } = env
    const { journal } = driver
    const messageId = yield* makeMessageId
    yield* journal.append([make("assistant.started", { messageId, model: env.model.name })])
    const system = yield* turnSystemPrompt(env, driver)
    let step = 0
    let steps = 0
    let finishReason: string | undefined
    /** the step number of the latest compaction of this turn: at most one per step */
    let compactedAt: number | undefined
    /** how many times the Stop hooks made this turn go on */
    let continuations = 0
    while (true) {
      // a process that stalled past its lease's ttl stops: another process may drive the session now
      if (yield* driver.leaseLost) {
        return yield* leaseLostError(driver.id)
      }
      // the next request must fit the model's window: prune old tool outputs, then compact
      if (compactedAt !== step && (yield* compactor.prepare(journal, buildRequest(env, driver, system))))
        compactedAt = step
      const result = yield* modelStep(env, driver, messageId, step, system)
      if ("_tag" in result) {
        const error = result.gaveUp
        // the provider says the request is too long: prune and compact, then try the step again —
        // once per step, so a request that still does not fit ends the turn
        if (classify(error.error).why === "context overflow" && compactedAt !== step) {
          const recovered = yield* compactor.recover(journal, buildRequest(env, driver, system)).pipe(Effect.either)
          if (recovered._tag === "Right") {
            step = nextStep(yield* journal.state, messageId)
            compactedAt = step
            continue
          }
          yield* Effect.logWarning(`could not compact the session: ${recovered.left.message}`)
        }
        return yield* endWithModelError(driver, turnId, messageId, error)
      }
      step = result.step + 1
      steps += 1
      finishReason = result.finishReason
      if (result.calls.length > 0) {
        yield* env.actions.run({
          journal,
          messageId,
          calls: result.calls,
          opening: [make("chat.state", { state: "awaiting_tool" })],
          cwd: driver.cwd,
          interruptReason: Ref.get(driver.interruptReason)
        })
      }
      // a step stopped at its output bound ends the turn (its calls did not run)
      const limited = result.finishReason === OUTPUT_LIMIT
      const more = !limited && (result.calls.length > 0 || result.steered)
      if (more && steps < options.maxSteps) continue
      const reason: TurnOutcome["reason"] = limited ? "output-limit" : more ? "max-steps" : "stop"
      if (reason === "stop" && (yield* stopHooks(env, driver, continuations))) {
        continuations += 1
        continue
      }
      if (!(yield* finishTurn(driver, turnId, messageId, reason, finishReason))) continue
      return {
        turnId,
        reason,
        finishReason,
        ...(limited ? { message: outputLimitMessage(limits) } : {}),
        ...lastTurnFigures(yield* journal.state)
      } satisfies TurnOutcome
    }
  })

/** Ends whatever an interrupted or failed turn left open, then idle (idempotent). */
const cleanup = (driver: Driver, reason: string) =>
  Effect.gen(function* () {
    // another process owns the session now: writing to it would interleave with its events
    if (yield* driver.leaseLost) return
    const state = yield* driver.journal.state
    const events = Recovery.sweepEvents(state, reason)
    if (events.length > 0) yield* driver.journal.append(events)
  }).pipe(
    Effect.catchAll((error) => Effect.logError(`could not close the turn of session ${driver.id}`, error)),
    Effect.uninterruptible
  )

/** The outcome of a turn that failed in another way than the model (a store error, a bug). */
const failedOutcome = (driver: Driver, turnId: TurnId, cause: Cause.Cause<unknown>) =>
  Effect.gen(function* () {
    const failure = Cause.squash(cause)
    const message = failure instanceof Error ? failure.message : String(failure)
    yield* Effect.logError(`the turn of session ${driver.id} failed: ${message}`)
    const state = yield* driver.journal.state
    return { turnId, reason: "error", message, ...lastTurnFigures(state) } satisfies TurnOutcome
  })

/** Runs a turn to its outcome; one that did not end normally is cleaned up first (an interrupt goes on). */
const turnOutcome = (env: TurnEnv, driver: Driver, turnId: TurnId) =>
  runTurn(env, driver, turnId).pipe(
    Effect.onExit((exit) =>
      Exit.isSuccess(exit)
        ? Effect.void
        : Effect.flatMap(Ref.get(driver.interruptReason), (reason) =>
            cleanup(driver, Exit.isInterrupted(exit) ? reason : "error")
          )
    ),
    Effect.catchAllCause((cause) =>
      Cause.isInterruptedOnly(cause)
        ? Effect.failCause(cause as Cause.Cause<never>)
        : failedOutcome(driver, turnId, cause)
    )
  )

/**
 * The turn after `outcome`, decided under the lock `send` takes: started for the messages left
 * undelivered (queued ones not after a failure), or none — the session then idle with `outcome`.
 */
const nextTurn = (env: TurnEnv, driver: Driver, outcome: TurnOutcome) =>
  driver.lock.withPermits(1)(
    Effect.gen(function* () {
      const state = yield* driver.journal.state
      const waiting = state.messages.flatMap((m) =>
        m.role === "user" && !m.delivered && (m.mode !== "queue" || outcome.reason !== "error") ? [m.id] : []
      )
      if (waiting.length === 0 || (yield* Ref.get(driver.closed)) || (yield* driver.leaseLost)) {
        yield* Ref.set(driver.running, false)
        yield* SubscriptionRef.set(driver.status, { running: false, last: outcome })
        return undefined
      }
      yield* SubscriptionRef.set(driver.status, { running: true, last: outcome })
      return yield* startTurn(env, driver, waiting)
    }).pipe(
      Effect.catchAll((error) =>
        Effect.gen(function* () {
          yield* Effect.logError(`could not start the next turn of session ${driver.id}`, error)
          yield* Ref.set(driver.running, false)
          yield* SubscriptionRef.set(driver.status, { running: false, last: outcome })
          return undefined
        })
      )
    )
  )

/**
 * The turn fiber: runs the turn, then turns for messages left undelivered when it ended (steered
 * ones that came too late, and queued ones unless the turn failed). Whatever way it ends, the
 * session ends idle and `status` says how. An interrupt is handled by `interrupt` / `close`.
 */
const turnLoop = (env: TurnEnv, driver: Driver, first: TurnId): Effect.Effect<void> =>
  Effect.gen(function* () {
    let turnId: TurnId | undefined = first
    while (turnId !== undefined) {
      const outcome: TurnOutcome = yield* turnOutcome(env, driver, turnId)
      turnId = yield* nextTurn(env, driver, outcome)
    }
  })

export const makeTurnLoop = (deps: TurnLoopDeps): TurnLoop => {
  const env: TurnEnv = { ...deps, limits: { ...defaultStepLimits, ...deps.options.step } }
  return {
    systemPrompt: (driver) => turnSystemPrompt(env, driver),
    request: (driver, system) => buildRequest(env, driver, system),
    startTurn: (driver, messageIds, before) => startTurn(env, driver, messageIds, before),
    run: (driver, first) => turnLoop(env, driver, first),
    cleanup
  }
}
