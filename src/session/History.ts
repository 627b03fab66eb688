/**
 * The conversation sent to the model, rebuilt from the projection (DESIGN §3, §4).
 *
 * `toModelMessages(state)` is a pure function of a `SessionState`: the kernel calls it before every
 * model request. What it guarantees, whatever state the log is in (a finished turn, a turn cut
 * mid-stream, a session repaired after a crash):
 *
 * - every tool call the history contains has exactly one result, in the tool message right after
 *   the assistant message that made it — an interrupted, timed-out or unfinished call gets an
 *   error result — so no provider rejects the history;
 * - the partial output of a step that ended `aborted` is not sent again (but a tool that actually
 *   ran in it is, with its result: it changed the world);
 * - user messages are sent once delivered, where they were delivered.
 *
 * `validateHistory(messages)` lists what a provider would reject; it is empty for every output of
 * `toModelMessages` (a property test checks it at every seq of random sessions), and the kernel
 * can use it as an assertion. The rules are written down in `docs/history.md`.
 */
import type { CallId, MessageId } from "../domain/Ids.js"
import type {
  AssistantMessage,
  AssistantPart,
  ReasoningPart,
  StepInfo,
  ToolPart,
  UserMessage
} from "../domain/Message.js"
import type { ModelAssistantPart, ModelMessage, ModelToolResult } from "../model/Model.js"
import type { Compaction, SessionState } from "../store/Projection.js"
import * as ToolPartChanges from "../store/toolPartChanges.js"

export interface HistoryOptions {
  /**
   * Send reasoning parts back, with the provider metadata recorded with them (signatures, redacted
   * data): `false` (the default) none; a provider id (the part of `provider/model` before the `/`)
   * only the reasoning of assistant messages made by that provider's models, so another provider's
   * reasoning and metadata are never sent; `true` all of it (tests). The kernel passes the provider
   * of the model the request goes to; the model layer decides what of it its API takes.
   */
  readonly includeReasoning?: boolean | string
}

/** The provider id of a `provider/model` name. */
export const providerOf = (model: string): string => {
  const slash = model.indexOf("/")
  return slash < 0 ? model : model.slice(0, slash)
}

const hasMetadata = (part: ReasoningPart): boolean =>
  part.metadata !== undefined && Object.values(part.metadata).some((value) => Object.keys(value).length > 0)

/** The user message that stands for the messages a compaction summarised. */
export const summaryContent = (summary: string): string =>
  `This is a summary of the earlier part of the conversation:\n\n${summary}`

/** A tool input as providers accept it: a JSON object; anything else (e.g. unparsable input) becomes `{}`. */
export const isInputObject = (input: unknown): input is Readonly<Record<string, unknown>> =>
  typeof input === "object" && input !== null && !Array.isArray(input)

/** Whether the tool actually started (so it may have changed the world), whatever its state now. */
export const wasInvoked = (part: ToolPart): boolean => {
  switch (part.state._tag) {
    case "pending":
      return false
    case "running":
    case "completed":
      return true
    case "error":
      // `tool.failed` on a pending call leaves no `startedAt`: the tool never ran
      return part.state.startedAt !== undefined
  }
}

/**
 * What stands for a pruned call's output (`context.pruned`): one line naming the call (the tool and
 * its input, cut) and how long the output was; the output itself stays in the log.
 */
export const prunedNote = (tool: string, input: unknown, output: string): string => {
  const shown = JSON.stringify(input ?? {}) ?? "{}"
  const args = shown.length > 120 ? `${shown.slice(0, 119)}…` : shown
  return `[output pruned from the context to save space: ${tool} ${args} returned ${output.length} characters; call it again if you need them]`
}

/** The result the model reads for one tool part, whatever state it is in. */
export const toolResult = (part: ToolPart): ModelToolResult => {
  const result = (output: string, isError: boolean): ModelToolResult => ({
    callId: part.callId,
    tool: part.tool,
    output,
    isError
  })
  const state = part.state
  switch (state._tag) {
    case "completed":
      return result(part.pruned === true ? prunedNote(part.tool, state.input, state.output) : state.output, false)
    case "error": {
      const detail = state.error.trim() === "" ? "" : `\n${state.error}`
      if (state.interrupted) {
        const why = state.reason !== undefined && state.reason !== "" ? ` (${state.reason})` : ""
        const timedOut = state.timedOut ? " It had timed out and was being stopped." : ""
        return result(`The call was interrupted${why} before it finished.${timedOut}${detail}`, true)
      }
      if (state.timedOut) return result(`The call timed out before it finished.${detail}`, true)
      return result(state.error.trim() === "" ? "The call failed." : state.error, true)
    }
    case "pending":
      return result("The call did not finish: its input never fully arrived, and the tool did not run.", true)
    case "running":
      return result("The call did not finish: the tool was still running when this request was made.", true)
  }
}

/**
 * The conversation for the next model request.
 *
 * - User messages are sent once `delivered` (by `turn.started` or `step.started`); steered and
 *   queued messages waiting for delivery are not sent yet.
 * - Each assistant message is split per step: an assistant message with the step's text (and
 *   reasoning, if asked) and tool calls in stream order, then one tool message with a result for
 *   every call of the step.
 * - Reasoning (when asked, see `HistoryOptions`) keeps its place and its provider metadata; a part
 *   with a signature but no text is kept too.
 * - Aborted steps: text, reasoning and calls that never ran are left out; calls that ran are kept
 *   with their results (and the signed reasoning of their step before them).
 * - With a compaction, the messages before `upToMessageId` are replaced by one user message
 *   carrying the summary.
 */
export const toModelMessages = (state: SessionState, options: HistoryOptions = {}): ReadonlyArray<ModelMessage> => {
  const includeReasoning = options.includeReasoning ?? false
  const out: Array<ModelMessage> = []
  let messages = state.messages
  if (state.compaction !== null) {
    out.push(summaryMessage(state.compaction))
    messages = messages.slice(state.compaction.keepFrom)
  }
  /** steered messages already sent inside an assistant message, between two of its steps */
  const placed = new Set<MessageId>()
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!
    if (message.role === "user") {
      if (message.delivered && !placed.has(message.id)) out.push(userMessage(message))
      continue
    }
    // the steered messages recorded while this message was streaming (they follow it in the log,
    // before the next assistant message): each goes before the step that delivered it
    const steered: Array<UserMessage> = []
    for (let j = i + 1; j < messages.length; j++) {
      const next = messages[j]!
      if (next.role === "assistant") break
      if (next.delivered && next.mode === "steer") steered.push(next)
    }
    const reasoning =
      typeof includeReasoning === "string"
        ? message.model !== undefined && providerOf(message.model) === includeReasoning
        : includeReasoning
    pushAssistant(state, message, steered, placed, reasoning, out)
  }
  return out
}

// ---------------------------------------------------------------------------------------------
// memoised pieces
//
// The kernel rebuilds the conversation before every request, and a long session's history is
// almost all the same as the request before's: the fold copies what an event changes and shares
// the rest (Projection.ts), so an unchanged message, part or tool part is the same object as
// before. The pieces below are remembered by those objects (weakly: gone with them), so a
// request costs what changed since the last one, not the session's length, and an unchanged piece
// is the same `ModelMessage` object as before (which the request digest uses in turn).

const userMessages = new WeakMap<UserMessage, ModelMessage>()

const userMessage = (message: UserMessage): ModelMessage => {
  let out = userMessages.get(message)
  if (out === undefined) {
    out = {
      role: "user",
      content:
        message.context === undefined
          ? message.text
          : `${message.text}\n\n<hook-context>\n${message.context}\n</hook-context>`
    }
    userMessages.set(message, out)
  }
  return out
}

const summaries = new WeakMap<Compaction, ModelMessage>()

const summaryMessage = (compaction: Compaction): ModelMessage => {
  let out = summaries.get(compaction)
  if (out === undefined) {
    out = { role: "user", content: summaryContent(compaction.summary) }
    summaries.set(compaction, out)
  }
  return out
}

/**
 * What one step's parts became: the assistant message and its tool message (none when nothing of
 * the step is sent), with what they were made from — the parts, the tool part of each call, whether
 * the step was aborted and whether reasoning is sent — to tell whether they still stand.
 */
interface StepGroup {
  readonly parts: ReadonlyArray<AssistantPart>
  readonly tools: ReadonlyArray<ToolPart | undefined>
  readonly aborted: boolean
  readonly reasoning: boolean
  readonly messages: ReadonlyArray<ModelMessage>
}

/**
 * One step group of an assistant message's walk: where it was (`parts[from, to)`), its step's
 * `StepInfo`, what it became, how many messages the message had given up to and with it (`end`),
 * and of the step infos of the groups up to and with it the highest index in `message.steps` plus
 * one (`stepsUsed`) and the highest step number (`maxStep`).
 */
interface WalkedGroup {
  readonly from: number
  readonly to: number
  readonly info: StepInfo | undefined
  readonly group: StepGroup
  readonly end: number
  readonly stepsUsed: number
  readonly maxStep: number
}

/** An assistant message's last walk: what it was made from and what it gave. */
interface Walk {
  readonly parts: ReadonlyArray<AssistantPart>
  readonly steps: ReadonlyArray<StepInfo>
  /** the serial of the state's tool parts (toolPartChanges.ts); undefined: not made by a fold */
  readonly toolParts: number | undefined
  readonly reasoning: boolean
  /** the message had no steered message, and every step group's step had its `StepInfo` */
  readonly keepable: boolean
  readonly groups: ReadonlyArray<WalkedGroup>
  /** the messages of its groups, in order (steered user messages not among them) */
  readonly messages: ReadonlyArray<ModelMessage>
  /** the calls of its groups but the last */
  readonly calls: Set<CallId>
}

/**
 * The last walk of each assistant message, by its first part (the same object once the message's
 * first step has ended). A turn grows by its newest step: a walk keeps the groups of the walk before
 * but its last (which may have grown) when the parts and step infos before that group are the same
 * objects (compared in place, without reading the parts) and no tool part of theirs changed since
 * (toolPartChanges.ts says which did) — so a request at step 1,000 of a turn costs what its newest
 * step costs, not a look at every step. Otherwise each group is checked (`stepGroup`).
 */
const walks = new WeakMap<AssistantPart, Walk>()

const pushAssistant = (
  state: SessionState,
  message: AssistantMessage,
  steered: ReadonlyArray<UserMessage>,
  placed: Set<MessageId>,
  includeReasoning: boolean,
  out: Array<ModelMessage>
): void => {
  const parts = message.parts
  if (parts.length === 0) return
  const before = walks.get(parts[0]!)
  const kept = before === undefined ? 0 : keptGroups(state, message, steered, includeReasoning, before)
  const stepIndex = stepLookup(message.steps)
  const groups: Array<WalkedGroup> = []
  const given: Array<ModelMessage> = []
  /** how many of `given` are in `out` already (before a steered message) */
  let flushed = 0
  let k = 0
  let stepsUsed = 0
  let maxStep = Number.NEGATIVE_INFINITY
  let keepable = steered.length === 0
  if (before !== undefined && kept > 0) {
    for (let i = 0; i < kept; i++) groups.push(before.groups[i]!)
    const last = before.groups[kept - 1]!
    for (let i = 0; i < last.end; i++) given.push(before.messages[i]!)
    k = last.to
    stepsUsed = last.stepsUsed
    maxStep = last.maxStep
  }
  let b = kept
  while (k < parts.length) {
    // a group per step (parts without a step, from older logs, form their own)
    const step = parts[k]!.step
    let end = k + 1
    while (end < parts.length && parts[end]!.step === step) end++
    let info: StepInfo | undefined
    if (step !== undefined) {
      const at = stepIndex(step)
      if (at >= 0) {
        info = message.steps[at]
        stepsUsed = Math.max(stepsUsed, at + 1)
        maxStep = Math.max(maxStep, step)
      } else keepable = false
    }
    if (info !== undefined) {
      // a steered message recorded no later than this step started was delivered by it (or earlier)
      for (const user of steered) {
        if (!placed.has(user.id) && user.at <= info.startedAt) {
          placed.add(user.id)
          for (; flushed < given.length; flushed++) out.push(given[flushed]!)
          out.push(userMessage(user))
        }
      }
    }
    while (before !== undefined && b < before.groups.length && before.groups[b]!.from < k) b++
    const last = before?.groups[b]
    const known =
      last !== undefined && last.from === k && last.to === end && last.info === info ? last.group : undefined
    const group = stepGroup(state, parts, k, end, info?.aborted === true, includeReasoning, known)
    for (const m of group.messages) given.push(m)
    groups.push({ from: k, to: end, info, group, end: given.length, stepsUsed, maxStep })
    k = end
  }
  for (; flushed < given.length; flushed++) out.push(given[flushed]!)
  // the calls of the groups but the last: those kept from the walk before (it is replaced) and the rest
  const calls = before !== undefined && kept > 0 ? before.calls : new Set<CallId>()
  for (let g = kept; g < groups.length - 1; g++) {
    for (const part of groups[g]!.group.parts) if (part.type === "tool") calls.add(part.callId)
  }
  walks.set(parts[0]!, {
    parts,
    steps: message.steps,
    toolParts: ToolPartChanges.serialOf(state.toolParts),
    reasoning: includeReasoning,
    keepable,
    groups,
    messages: given,
    calls
  })
}

/**
 * How many groups of the message's walk `before` stand as they were: all but its last (which may
 * have grown) when nothing they were made from changed; 0 when that is not known.
 */
const keptGroups = (
  state: SessionState,
  message: AssistantMessage,
  steered: ReadonlyArray<UserMessage>,
  reasoning: boolean,
  before: Walk
): number => {
  const open = before.groups.length - 1
  if (open < 1 || !before.keepable || steered.length > 0 || before.reasoning !== reasoning) return 0
  if (before.toolParts === undefined) return 0
  const from = before.groups[open]!.from
  const parts = message.parts
  if (parts !== before.parts) {
    if (parts.length <= from || parts[from]!.step === parts[from - 1]!.step) return 0
    for (let i = 0; i < from; i++) if (parts[i] !== before.parts[i]) return 0
  }
  // the kept groups' step infos: the same objects where they were, and no later one of their numbers
  const steps = message.steps
  const { stepsUsed, maxStep } = before.groups[open - 1]!
  if (steps !== before.steps) {
    if (steps.length < stepsUsed) return 0
    for (let i = 0; i < stepsUsed; i++) if (steps[i] !== before.steps[i]) return 0
  }
  for (let i = stepsUsed; i < steps.length; i++) if (steps[i]!.step <= maxStep) return 0
  const changed = ToolPartChanges.changedSince(state.toolParts, before.toolParts)
  if (changed === undefined) return 0
  for (const callId of changed) if (before.calls.has(callId)) return 0
  return open
}

/**
 * The index in `steps` of step `step`'s info, the last one of that number (-1: none). Looked for
 * from the end first (a request's new groups are the newest steps); further back through a map,
 * built on the first such lookup.
 */
const stepLookup = (steps: ReadonlyArray<StepInfo>): ((step: number) => number) => {
  let byStep: Map<number, number> | undefined
  return (step) => {
    for (let i = steps.length - 1; i >= 0 && i >= steps.length - NEAR_END; i--) if (steps[i]!.step === step) return i
    if (byStep === undefined) {
      byStep = new Map()
      for (let i = 0; i < steps.length; i++) byStep.set(steps[i]!.step, i)
    }
    return byStep.get(step) ?? -1
  }
}

/** How many step infos from the end `stepLookup` reads before it builds its map. */
const NEAR_END = 8

/** The messages of `parts[from, to)` (one step's): `known` when its inputs are still the same objects. */
const stepGroup = (
  state: SessionState,
  parts: ReadonlyArray<AssistantPart>,
  from: number,
  to: number,
  aborted: boolean,
  reasoning: boolean,
  known: StepGroup | undefined
): StepGroup => {
  if (
    known !== undefined &&
    known.aborted === aborted &&
    known.reasoning === reasoning &&
    known.parts.length === to - from
  ) {
    let same = true
    for (let i = 0; same && i < known.parts.length; i++) {
      const part = parts[from + i]!
      same = known.parts[i] === part && (part.type !== "tool" || known.tools[i] === state.toolParts.get(part.callId))
    }
    if (same) return known
  }
  const groupParts = parts.slice(from, to)
  const tools = groupParts.map((part) => (part.type === "tool" ? state.toolParts.get(part.callId) : undefined))
  return {
    parts: groupParts,
    tools,
    aborted,
    reasoning,
    messages: stepMessages(groupParts, tools, aborted, reasoning)
  }
}

/** One step's assistant message (text, reasoning and calls in stream order) and its tool message. */
const stepMessages = (
  parts: ReadonlyArray<AssistantPart>,
  tools: ReadonlyArray<ToolPart | undefined>,
  aborted: boolean,
  includeReasoning: boolean
): ReadonlyArray<ModelMessage> => {
  const group: Array<ModelAssistantPart> = []
  const results: Array<ModelToolResult> = []
  /** signed reasoning of an aborted step, sent only when a call of that step that ran is */
  let heldReasoning: Array<ModelAssistantPart> = []
  for (let k = 0; k < parts.length; k++) {
    const part = parts[k]!
    if (part.type === "tool") {
      const tool = tools[k]
      if (tool === undefined) continue
      // a call that ran changed the world: the model must see it and its result, even from an
      // aborted step; a call that never ran in an aborted step is partial output like its text
      if (aborted && !wasInvoked(tool)) continue
      if (aborted) {
        // the signed reasoning that led to it goes with it (a provider may require it before the call)
        for (const held of heldReasoning) group.push(held)
        heldReasoning = []
      }
      const input = "input" in tool.state ? tool.state.input : undefined
      group.push({ type: "tool-call", callId: tool.callId, tool: tool.tool, input: isInputObject(input) ? input : {} })
      results.push(toolResult(tool))
      continue
    }
    if (part.type === "reasoning") {
      if (!includeReasoning) continue
      // a block with only a signature (no text) is still the provider's reasoning, sent back in its place
      const signed = hasMetadata(part)
      if (!signed && part.text.trim() === "") continue
      const sent: ModelAssistantPart = {
        type: "reasoning",
        text: part.text,
        ...(signed ? { metadata: part.metadata } : {})
      }
      if (aborted) {
        if (signed) heldReasoning.push(sent)
        continue
      }
      group.push(sent)
      continue
    }
    if (aborted || part.text.trim() === "") continue
    group.push({ type: part.type, text: part.text })
  }
  if (group.length === 0) return []
  const assistant: ModelMessage = { role: "assistant", parts: group }
  return results.length > 0 ? [assistant, { role: "tool", results }] : [assistant]
}

/**
 * What a provider would reject in a history, one sentence per problem (empty: valid):
 * a tool call without a result in the tool message right after it, a result without a call,
 * a call id used twice, a tool message not preceded by an assistant message with calls, an input
 * that is not a JSON object, an empty assistant or tool message, an empty text part.
 */
export const validateHistory = (messages: ReadonlyArray<ModelMessage>): ReadonlyArray<string> => {
  const problems: Array<string> = []
  const seenCalls = new Set<string>()
  const seenResults = new Set<string>()
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!
    if (message.role === "user") continue
    if (message.role === "tool") {
      const previous = messages[i - 1]
      if (previous?.role !== "assistant" || !previous.parts.some((part) => part.type === "tool-call")) {
        problems.push(`message ${i}: a tool message that does not follow an assistant message with tool calls`)
      }
      if (message.results.length === 0) problems.push(`message ${i}: a tool message without results`)
      const calls = new Set(
        previous?.role === "assistant"
          ? previous.parts.flatMap((part) => (part.type === "tool-call" ? [part.callId] : []))
          : []
      )
      for (const result of message.results) {
        if (seenResults.has(result.callId)) problems.push(`message ${i}: a second result for call ${result.callId}`)
        seenResults.add(result.callId)
        if (!calls.has(result.callId))
          problems.push(`message ${i}: a result for call ${result.callId} without its call`)
      }
      continue
    }
    if (message.parts.length === 0) problems.push(`message ${i}: an empty assistant message`)
    const next = messages[i + 1]
    const answered = new Set(next?.role === "tool" ? next.results.map((result) => result.callId) : [])
    for (const part of message.parts) {
      if (part.type !== "tool-call") {
        const signed = part.type === "reasoning" && part.metadata !== undefined
        if (part.text.trim() === "" && !signed) problems.push(`message ${i}: an empty ${part.type} part`)
        continue
      }
      if (seenCalls.has(part.callId)) problems.push(`message ${i}: call ${part.callId} was made twice`)
      seenCalls.add(part.callId)
      if (!isInputObject(part.input)) problems.push(`message ${i}: the input of call ${part.callId} is not an object`)
      if (!answered.has(part.callId)) {
        problems.push(`message ${i}: call ${part.callId} has no result in the tool message right after it`)
      }
    }
  }
  return problems
}

/** The ids of the tool calls in `messages` with no result right after them (a subset of `validateHistory`). */
export const unansweredCalls = (messages: ReadonlyArray<ModelMessage>): ReadonlyArray<string> => {
  const calls: Array<string> = []
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!
    if (message.role !== "assistant") continue
    const next = messages[i + 1]
    const answered = new Set(next?.role === "tool" ? next.results.map((result) => result.callId) : [])
    for (const part of message.parts)
      if (part.type === "tool-call" && !answered.has(part.callId)) calls.push(part.callId)
  }
  return calls
}
