/**
 * A context that stays bounded: the chat context carries what the model needs, the
 * log keeps everything.
 *
 * Before each model step the kernel estimates the next request. When it would pass the model's
 * context window minus a reserve:
 * 1. **prune**: the outputs of old tool calls — completed ones, outside the newest
 *    `pruneProtectTokens` of tool output and not of the latest step — are replaced, in what is
 *    sent, by a one-line note naming the call (`context.pruned`; the outputs stay in the log);
 * 2. if it still does not fit, **compact**: a summary request (the same system prompt and tools,
 *    so the provider's cache serves the prefix; the history before the open turn; an instruction to
 *    summarise) writes `compaction.done` (what it covers, the summary, the tokens before and after,
 *    the summary request's usage), and the history sent from then on is the summary plus the
 *    messages of the open turn (History).
 * A provider's context-overflow error prunes and compacts the same way and the step is retried
 * once; at most one compaction per step (the kernel keeps count), so it cannot loop.
 * `compact(…, "manual")` summarises everything (up to a message not delivered yet), for `logbook compact`.
 *
 * Estimates are characters / 4 of the request (system prompt, tool schemas, messages), or the
 * provider's own count of the previous step when that is larger.
 */
import { Effect, Schema, Stream } from "effect"
import { type CompactionTrigger, make, type NewEvent } from "../domain/Events.js"
import type { CallId, MessageId } from "../domain/Ids.js"
import { emptyUsage, type Usage } from "../domain/Message.js"
import { annotateFinish, type ChatFinish, chatSpan } from "../model/GenAi.js"
import type { Model, ModelError, ModelEvent, ModelMessage, ModelRequest, ModelUsage } from "../model/Model.js"
import { gaveUp, type Retry, type RetryGaveUp } from "../model/Retry.js"
import type { SessionState } from "../store/Projection.js"
import type { SessionJournal } from "../store/SessionJournal.js"
import type { RestoreError } from "../store/Snapshots.js"
import { providerOf, toModelMessages } from "./History.js"
import { type costOf, recordRetry, toUsage } from "./Processor.js"

export interface CompactionOptions {
  /** compact (and prune) before a request that would not fit; `false`: only on overflow errors and on demand */
  readonly auto: boolean
  /** the model's context window in tokens; unknown: nothing is estimated, only overflow errors compact */
  readonly contextWindow?: number | undefined
  /** what is kept free of the window for the answer and the estimate's error (default 20000) */
  readonly reserveTokens: number
  /** the newest tool output, in tokens, that pruning never touches (default 40000) */
  readonly pruneProtectTokens: number
}

export const defaultCompactionOptions = {
  auto: true,
  reserveTokens: 20_000,
  pruneProtectTokens: 40_000
} as const satisfies CompactionOptions

/** The summary request's instruction, the last user message of its history. */
export const SUMMARY_PROMPT = [
  "The conversation so far is about to be replaced by your summary of it, to free the context window.",
  "Write that summary now, for yourself: you will continue the work from it alone.",
  "Include the user's requests and constraints; what was done (files read, created and changed, commands " +
    "run and their results); decisions and why; what is left to do and the next step.",
  "Be specific: keep file paths, function and variable names, error messages and values.",
  "Do not call tools. Answer with the summary only."
].join("\n")

/** A tool output longer than this is cut in the summary request (its head is enough to summarise). */
export const SUMMARY_TOOL_OUTPUT_CHARS = 4_000

/** Tokens of a text, estimated: characters / 4. */
export const estimateText = (text: string): number => Math.ceil(text.length / 4)

/**
 * Characters a message adds to a request, remembered by the message: a long session's history is
 * the same objects request after request (`toModelMessages` remembers them), so each is counted once.
 */
const messageChars = (message: ModelMessage): number => {
  let chars = countedChars.get(message)
  if (chars === undefined) {
    chars = countChars(message)
    countedChars.set(message, chars)
  }
  return chars
}

const countedChars = new WeakMap<ModelMessage, number>()

/** Tool schemas as JSON, remembered by the list (the same for every request of a session). */
const toolsChars = new WeakMap<object, number>()

/** Characters a message adds to a request: its texts, call inputs and results, and a little framing. */
const countChars = (message: ModelMessage): number => {
  const framing = 16
  switch (message.role) {
    case "user":
      return framing + message.content.length
    case "assistant": {
      let n = framing
      for (const part of message.parts) {
        n +=
          part.type === "tool-call"
            ? framing + part.tool.length + (JSON.stringify(part.input)?.length ?? 2)
            : part.text.length
      }
      return n
    }
    case "tool": {
      let n = framing
      for (const result of message.results) n += framing + result.output.length
      return n
    }
  }
}

/**
 * The estimated tokens of a request: characters / 4 of its system prompt, tool schemas and messages
 * (their texts summed, not serialised: this runs before every step, on histories of megabytes).
 */
export const estimateRequest = (request: Pick<ModelRequest, "system" | "tools" | "messages">): number => {
  let tools = toolsChars.get(request.tools)
  if (tools === undefined) {
    tools = JSON.stringify(request.tools).length
    toolsChars.set(request.tools, tools)
  }
  let chars = (request.system ?? "").length + tools
  for (const message of request.messages) chars += messageChars(message)
  return Math.ceil(chars / 4)
}

/** The provider's own count of the latest step that went through (input + output), 0 when none. */
const reportedTokens = (state: SessionState): number => {
  for (let i = state.messages.length - 1; i >= 0; i--) {
    const message = state.messages[i]!
    if (message.role !== "assistant") continue
    for (let j = message.steps.length - 1; j >= 0; j--) {
      const step = message.steps[j]!
      if (!step.aborted && step.usage !== undefined) return step.usage.input + step.usage.output
    }
  }
  return 0
}

/**
 * The estimate of the next request: characters / 4, or the provider's count of the previous step
 * when larger (that count misses only what came after the step: its tool results).
 */
export const estimateNext = (state: SessionState, request: ModelRequest): number => {
  const counted = state.compaction !== null && state.compaction.at >= lastStepAt(state) ? 0 : reportedTokens(state)
  return Math.max(estimateRequest(request), counted)
}

const lastStepAt = (state: SessionState): number => {
  for (let i = state.messages.length - 1; i >= 0; i--) {
    const message = state.messages[i]!
    if (message.role === "assistant") return message.steps.at(-1)?.startedAt ?? message.startedAt
  }
  return 0
}

/** Whether a request of `tokens` fits the window (always, when the window is unknown). */
export const fits = (options: CompactionOptions, tokens: number): boolean =>
  options.contextWindow === undefined || tokens <= options.contextWindow - options.reserveTokens

/**
 * The calls whose outputs can be pruned: completed, not pruned yet, not of the latest step that went
 * through (not aborted) of the latest assistant message, and older than the newest `protectTokens` of tool output (newest
 * first, in message order).
 */
export const prunableCalls = (state: SessionState, protectTokens: number): ReadonlyArray<CallId> => {
  const refs: Array<{ readonly callId: CallId; readonly latest: boolean }> = []
  let latestMessage = true
  // the messages a compaction summarised are not sent: nothing there to prune
  const from = state.compaction?.keepFrom ?? 0
  for (let i = state.messages.length - 1; i >= from; i--) {
    const message = state.messages[i]!
    if (message.role !== "assistant") continue
    // the latest step that went through: an aborted attempt after it (the step a context overflow
    // cut, a retried one) made no call that ran, and its predecessor's outputs are what the model just asked for
    const lastStep = message.steps.filter((step) => !step.aborted).at(-1)?.step
    for (let k = message.parts.length - 1; k >= 0; k--) {
      const part = message.parts[k]!
      if (part.type === "tool") refs.push({ callId: part.callId, latest: latestMessage && part.step === lastStep })
    }
    latestMessage = false
  }
  const out: Array<CallId> = []
  let seen = 0
  for (const { callId, latest } of refs) {
    const part = state.toolParts.get(callId)
    if (part === undefined || part.state._tag !== "completed") continue
    const tokens = estimateText(part.state.output)
    if (latest || part.pruned === true) {
      if (part.pruned !== true) seen += tokens
      continue
    }
    if (seen + tokens <= protectTokens) {
      seen += tokens
      continue
    }
    seen += tokens
    out.push(callId)
  }
  return out
}

/**
 * What a compaction now would cover: the messages before the open turn (`manual`: all of them) —
 * but never a user message that is not delivered yet (queued, or steered and still waiting): the
 * summary cannot hold it (it was not sent), and a later turn delivers it, so it must stay after
 * `keepFrom`.
 */
export const compactionPoint = (
  state: SessionState,
  trigger: CompactionTrigger
): { readonly upToMessageId?: MessageId; readonly keepFrom: number; readonly covered: number } | undefined => {
  const from = state.compaction?.keepFrom ?? 0
  let end = state.messages.length
  if (trigger !== "manual") {
    const first = state.turn?.messageIds[0]
    if (first === undefined) return undefined
    end = state.messages.findIndex((message) => message.id === first)
  }
  const waiting = state.messages.findIndex(
    (message, i) => i >= from && i < end && message.role === "user" && !message.delivered
  )
  const keepFrom = waiting < 0 ? end : waiting
  if (keepFrom <= from) return undefined
  return keepFrom === state.messages.length
    ? { keepFrom, covered: keepFrom - from }
    : { upToMessageId: state.messages[keepFrom]!.id, keepFrom, covered: keepFrom - from }
}

/** Why a compaction could not be made: nothing to summarise, or the summary request failed. */
export class CompactionFailed extends Schema.TaggedError<CompactionFailed>()("CompactionFailed", {
  reason: Schema.Literal("nothing-to-compact", "model-failed", "empty-summary"),
  message: Schema.String
}) {}

/** What a compaction did: how many messages it summarised, the estimated tokens before and after. */
export interface CompactionResult {
  readonly messages: number
  readonly tokensBefore: number
  readonly tokensAfter: number
}

export interface CompactorOptions {
  readonly compaction: CompactionOptions
  readonly price?: Parameters<typeof costOf>[1] | undefined
  readonly maxOutputTokens?: number | undefined
}

/**
 * The history the summary request sends: the messages before `keepFrom`, long tool outputs cut, with
 * the reasoning `model`'s provider takes back, as a step's request has it (a history that ends with a
 * tool use — a turn cut at `maxSteps`, by an error or an interrupt — must keep its thinking for
 * Anthropic with thinking on).
 */
const summaryHistory = (state: SessionState, keepFrom: number, model: string): Array<ModelMessage> => {
  const before = toModelMessages(
    { ...state, messages: state.messages.slice(0, keepFrom) },
    { includeReasoning: providerOf(model) }
  )
  return before.map((message) =>
    message.role !== "tool"
      ? message
      : {
          role: "tool",
          results: message.results.map((result) =>
            result.output.length <= SUMMARY_TOOL_OUTPUT_CHARS
              ? result
              : {
                  ...result,
                  output: `${result.output.slice(0, SUMMARY_TOOL_OUTPUT_CHARS)}\n[… ${result.output.length - SUMMARY_TOOL_OUTPUT_CHARS} more characters]`
                }
          )
        }
  )
}

/** Appends `context.pruned` for the prunable calls; whether any were. */
const prune = (journal: SessionJournal, build: (state: SessionState) => ModelRequest, protectTokens: number) =>
  Effect.gen(function* () {
    const state = yield* journal.state
    const calls = prunableCalls(state, protectTokens)
    if (calls.length === 0) return false
    const chosen = new Set<string>(calls)
    const tokensBefore = estimateNext(state, build(state))
    const pruned: SessionState = {
      ...state,
      toolParts: new Map(
        Array.from(state.toolParts, ([id, part]) => [id, chosen.has(id) ? { ...part, pruned: true } : part])
      )
    }
    const tokensAfter = estimateRequest(build(pruned))
    yield* journal.append([make("context.pruned", { callIds: calls, tokensBefore, tokensAfter })])
    return true
  })

/** One summary request with the retry policy; its text and usage. */
const summarize = (model: Model["Type"], retry: Retry["Type"], journal: SessionJournal, request: ModelRequest) => {
  const once: Effect.Effect<{ readonly text: string; readonly usage: ModelUsage | undefined }, ModelError> =
    Stream.runFold(
      model.stream(request),
      { text: "", usage: undefined as ModelUsage | undefined, finish: undefined as ChatFinish | undefined },
      (acc, event: ModelEvent) =>
        event._tag === "TextDelta"
          ? { ...acc, text: acc.text + event.delta }
          : event._tag === "Finish"
            ? { ...acc, usage: event.usage, finish: event }
            : acc
    ).pipe(
      Effect.tap(({ finish }) => (finish === undefined ? Effect.void : annotateFinish(finish))),
      // the summary request is a model call like a step's (`chat <model>`), marked as compaction's
      chatSpan(model, request, { "logbook.session.id": journal.sessionId, "logbook.operation": "compaction" })
    )
  return Effect.flatMap(retry.driver({ onRetry: recordRetry(journal) }), (driver) =>
    Effect.retryOrElse(once, driver, gaveUp)
  ).pipe(
    Effect.catchTag("RetryGaveUp", (stopped: RetryGaveUp) =>
      Effect.fail(
        new CompactionFailed({
          reason: "model-failed",
          message: `the summary request failed: ${stopped.message}`
        })
      )
    )
  )
}

export const makeCompactor = (model: Model["Type"], retry: Retry["Type"], options: CompactorOptions) => {
  const settings = options.compaction

  /**
   * Compacts: the summary of what `compactionPoint` covers, recorded as `compaction.done`. Fails
   * with `CompactionFailed` when there is nothing to summarise or the summary request fails.
   */
  const compact = (
    journal: SessionJournal,
    build: (state: SessionState) => ModelRequest,
    trigger: CompactionTrigger
  ): Effect.Effect<CompactionResult, CompactionFailed | RestoreError> =>
    Effect.gen(function* () {
      const state = yield* journal.state
      const point = compactionPoint(state, trigger)
      if (point === undefined) {
        return yield* new CompactionFailed({
          reason: "nothing-to-compact",
          message:
            trigger === "manual"
              ? "there is nothing to compact: the session has no messages since its last compaction"
              : "there is nothing to compact: the open turn is all the session has since its last compaction"
        })
      }
      const base = build(state)
      const tokensBefore = estimateNext(state, base)
      const request: ModelRequest = {
        ...base,
        messages: [...summaryHistory(state, point.keepFrom, model.name), { role: "user", content: SUMMARY_PROMPT }],
        maxOutputTokens: options.maxOutputTokens
      }
      const { text, usage } = yield* summarize(model, retry, journal, request)
      const summary = text.trim()
      if (summary === "") {
        return yield* new CompactionFailed({ reason: "empty-summary", message: "the summary request returned no text" })
      }
      const after: SessionState = {
        ...state,
        compaction: {
          ...(point.upToMessageId !== undefined ? { upToMessageId: point.upToMessageId } : {}),
          keepFrom: point.keepFrom,
          summary,
          at: state.updatedAt
        }
      }
      const tokensAfter = estimateRequest(build(after))
      const stepUsage: Usage = usage === undefined ? emptyUsage : toUsage(usage, options.price)
      const events: Array<NewEvent> = [
        make("compaction.done", {
          ...(point.upToMessageId !== undefined ? { upToMessageId: point.upToMessageId } : {}),
          summary,
          trigger,
          messages: point.covered,
          tokensBefore,
          tokensAfter,
          usage: stepUsage,
          model: model.name
        })
      ]
      yield* journal.append(events)
      return { messages: point.covered, tokensBefore, tokensAfter }
    })

  /**
   * Before a step: when the next request would not fit, prune, then compact if it still does not.
   * Returns whether a compaction was made (the kernel allows one per step). A failed compaction is
   * not fatal here: the step goes on, and an overflow error then ends the turn with its reason.
   */
  const prepare = (journal: SessionJournal, build: (state: SessionState) => ModelRequest) =>
    Effect.gen(function* () {
      if (!settings.auto || settings.contextWindow === undefined) return false
      const state = yield* journal.state
      if (fits(settings, estimateNext(state, build(state)))) return false
      if (yield* prune(journal, build, settings.pruneProtectTokens)) {
        const pruned = yield* journal.state
        if (fits(settings, estimateRequest(build(pruned)))) return false
      }
      return yield* compact(journal, build, "auto").pipe(
        Effect.as(true),
        Effect.catchTag("CompactionFailed", (failed) =>
          // nothing to summarise yet (the open turn is all there is) is no news; a failed summary is
          (failed.reason === "nothing-to-compact"
            ? Effect.logDebug(`could not compact the session: ${failed.message}`)
            : Effect.logWarning(`could not compact the session: ${failed.message}`)
          ).pipe(Effect.as(false))
        )
      )
    })

  /**
   * After a context-overflow error: prune everything prunable (the newest output protected is the
   * latest step's), then compact. Fails when neither could free anything.
   */
  const recover = (journal: SessionJournal, build: (state: SessionState) => ModelRequest) =>
    Effect.gen(function* () {
      const pruned = yield* prune(journal, build, 0)
      return yield* compact(journal, build, "overflow").pipe(
        Effect.map(() => ({ pruned, compacted: true })),
        Effect.catchTag("CompactionFailed", (failed) =>
          pruned && failed.reason === "nothing-to-compact"
            ? Effect.succeed({ pruned, compacted: false })
            : Effect.fail(failed)
        )
      )
    })

  return { prepare, recover, compact, prune }
}

export type Compactor = ReturnType<typeof makeCompactor>
