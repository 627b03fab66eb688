/**
 * The projection of a session (DESIGN §2, §3, §4): current state as a pure fold of the event log.
 *
 * `apply(state, envelope)` is one fold step; `applyAll(state, envelopes)` folds many with the same
 * result. Neither mutates its input: `applyAll` copies each object it changes at most once per
 * call (copy-on-write, tracked with a `WeakSet` of the objects the call owns), so folding a
 * million text deltas is linear. The rules of every event type, and which transitions are
 * illegal, are written down in `docs/projection.md`.
 *
 * The state it folds into (`SessionState`, its Schema and its reads) is in SessionState.ts; this
 * module re-exports it, so `Projection.SessionState` and the rest stay where the library has them.
 */
import { Either } from "effect"
import type { ActionStateName, Envelope, EventOf, EventType, FileRead } from "../domain/Events.js"
import type { CallId, MessageId, PartId } from "../domain/Ids.js"
import {
  type AssistantMessage,
  type AssistantPart,
  addUsage,
  emptyUsage,
  mergeProviderMetadata,
  type ProviderMetadata,
  type StepInfo,
  type ToolPart,
  type ToolState,
  type UserMessage
} from "../domain/Message.js"
import { ProjectionError, type SessionState } from "./SessionState.js"
import * as ToolPartChanges from "./toolPartChanges.js"

export * from "./SessionState.js"

// ---------------------------------------------------------------------------------------------
// copy-on-write

type Mutable<T> = { -readonly [K in keyof T]: T[K] }
type MState = Mutable<SessionState>
type MAssistant = Mutable<AssistantMessage>

/**
 * One fold's bookkeeping. `owned` holds the objects this fold created (copies or new objects):
 * those, and only those, may be mutated in place. Everything else is shared with the input and
 * copied before its first change.
 */
interface Ctx {
  owned: WeakSet<object>
  /** messageId -> index in `messages`, built on first use in bulk folds */
  index: Map<string, number> | undefined
  readonly bulk: boolean
}

const own = <T extends object>(ctx: Ctx, value: T): Mutable<T> => {
  if (ctx.owned.has(value)) return value as Mutable<T>
  const copy = (Array.isArray(value) ? value.slice() : { ...value }) as Mutable<T>
  ctx.owned.add(copy)
  return copy
}

const ownArray = <T>(ctx: Ctx, value: ReadonlyArray<T>): Array<T> => own(ctx, value) as unknown as Array<T>

/**
 * A map of the state, owned and ready to change (copied on its first change in a fold). Copied with
 * `forEach`: `new Map(map)` goes through the iterator protocol, which is slower, and a session-long
 * map is copied several times a step.
 */
const ownMap = <K, V>(ctx: Ctx, value: ReadonlyMap<K, V>): Map<K, V> => {
  if (ctx.owned.has(value)) return value as Map<K, V>
  const copy = new Map<K, V>()
  value.forEach((v, k) => {
    copy.set(k, v)
  })
  ctx.owned.add(copy)
  return copy
}

/**
 * Where the text and reasoning parts of a message's `parts` array are, by id (the last part of an
 * id, as a scan from the end finds it), for the parts up to `synced`. A fold changes a parts array
 * only by pushing a part or putting a copy of a part (same id) in its place, so an index stays right
 * for its array: a lookup first reads the parts pushed since. A copy of the array (`ownParts`) takes
 * the index over, which leaves the array copied without one (built again if it is ever folded
 * again). Without it, the first delta of each new part scanned every part of the message, a cost that
 * grew with the turn.
 */
interface PartIndex {
  readonly at: Map<PartId, number>
  synced: number
}

const partIndexes = new WeakMap<ReadonlyArray<AssistantPart>, PartIndex>()

/** The index in `parts` of the last text or reasoning part with id `partId`; -1 when there is none. */
const lastPartWithId = (parts: ReadonlyArray<AssistantPart>, partId: PartId): number => {
  let index = partIndexes.get(parts)
  if (index === undefined) {
    index = { at: new Map(), synced: 0 }
    partIndexes.set(parts, index)
  }
  for (let i = index.synced; i < parts.length; i++) {
    const part = parts[i]!
    if (part.type !== "tool") index.at.set(part.id, i)
  }
  index.synced = parts.length
  return index.at.get(partId) ?? -1
}

/** The parts of `message` (owned), owned and ready to change; a copy takes over the index of the parts it copied. */
const ownParts = (ctx: Ctx, message: MAssistant): Array<AssistantPart> => {
  const before = message.parts
  const parts = ownArray(ctx, before)
  if (parts !== before) {
    const index = partIndexes.get(before)
    if (index !== undefined) {
      partIndexes.delete(before)
      partIndexes.set(parts, index)
    }
    message.parts = parts
  }
  return parts
}

const fresh = <T extends object>(ctx: Ctx, value: T): T => {
  ctx.owned.add(value)
  return value
}

/** Thrown inside a fold step and turned into `Either.left` at the boundary. */
function illegal(s: SessionState, env: Envelope, message: string): never {
  throw new ProjectionError({ sessionId: s.sessionId, seq: env.seq, type: env.type, message })
}

// ---------------------------------------------------------------------------------------------
// lookups

const findMessageIndex = (ctx: Ctx, s: SessionState, id: MessageId): number => {
  const messages = s.messages
  // almost every event is about the newest message: no index needed for it
  const last = messages.length - 1
  if (last >= 0 && messages[last]!.id === id) return last
  if (ctx.bulk) {
    if (ctx.index === undefined) {
      ctx.index = new Map()
      for (let i = 0; i < messages.length; i++) ctx.index.set(messages[i]!.id, i)
    }
    return ctx.index.get(id) ?? -1
  }
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]!.id === id) return i
  return -1
}

const pushMessage = (ctx: Ctx, s: MState, message: UserMessage | AssistantMessage): void => {
  const messages = ownArray(ctx, s.messages)
  s.messages = messages
  messages.push(fresh(ctx, message))
  ctx.index?.set(message.id, messages.length - 1)
}

/** The assistant message `id`, owned and ready to change; illegal when unknown or a user message. */
const assistantFor = (
  ctx: Ctx,
  s: MState,
  env: Envelope,
  id: MessageId,
  options: { readonly open: boolean }
): MAssistant => {
  const i = findMessageIndex(ctx, s, id)
  if (i < 0) return illegal(s, env, `unknown message ${id}`)
  const message = s.messages[i]!
  if (message.role !== "assistant") return illegal(s, env, `message ${id} is a user message, not an assistant message`)
  if (options.open && message.completedAt !== undefined) {
    return illegal(s, env, `assistant message ${id} is already completed`)
  }
  const messages = ownArray(ctx, s.messages)
  s.messages = messages
  const owned = own(ctx, message)
  messages[i] = owned
  return owned
}

const markDelivered = (ctx: Ctx, s: MState, env: Envelope, ids: ReadonlyArray<MessageId>): void => {
  if (ids.length === 0) return
  for (const id of ids) {
    const i = findMessageIndex(ctx, s, id)
    if (i < 0) illegal(s, env, `unknown message ${id}`)
    const message = s.messages[i]!
    if (message.role !== "user") illegal(s, env, `message ${id} is not a user message`)
    if (!(message as UserMessage).delivered) {
      const messages = ownArray(ctx, s.messages)
      s.messages = messages
      const owned = own(ctx, message as UserMessage)
      owned.delivered = true
      messages[i] = owned
    }
  }
  if (s.queued.length > 0) {
    const delivered = new Set<string>(ids)
    if (s.queued.some((id) => delivered.has(id))) {
      s.queued = fresh(
        ctx,
        s.queued.filter((id) => !delivered.has(id))
      )
    }
  }
}

/**
 * The state's tool parts, owned and ready to change. Every change goes through `setToolPart`:
 * toolPartChanges.ts keeps which calls a fold changed, for the history.
 */
const ownToolParts = (ctx: Ctx, s: MState): Map<CallId, ToolPart> => {
  const before = s.toolParts
  const parts = ownMap(ctx, before)
  if (parts !== before) {
    ToolPartChanges.copied(parts, before)
    s.toolParts = parts
  }
  return parts
}

const setToolPart = (parts: Map<CallId, ToolPart>, part: ToolPart): void => {
  parts.set(part.callId, part)
  ToolPartChanges.changed(parts, part.callId)
}

const setToolState = (ctx: Ctx, s: MState, part: ToolPart, state: ToolState): void => {
  const parts = ownToolParts(ctx, s)
  const owned = own(ctx, part)
  owned.state = fresh(ctx, state)
  setToolPart(parts, owned)
}

const newToolPart = (
  ctx: Ctx,
  s: MState,
  env: Envelope,
  messageId: MessageId,
  callId: CallId,
  tool: string,
  state: ToolState
): void => {
  const message = assistantFor(ctx, s, env, messageId, { open: true })
  const refs = ownParts(ctx, message)
  refs.push(fresh(ctx, withStep(message, { type: "tool" as const, callId })))
  setToolPart(ownToolParts(ctx, s), fresh(ctx, { type: "tool", callId, tool, messageId, state: fresh(ctx, state) }))
}

/**
 * A new part, tagged with the step that is open in its message (if any): a step that ends
 * `aborted` (cut by a retryable failure or an interrupt) can then be left out of what is sent
 * to the model again.
 */
const withStep = <P extends object>(message: AssistantMessage, part: P): P => {
  const last = message.steps[message.steps.length - 1]
  return last !== undefined && last.endedAt === undefined ? { ...part, step: last.step } : part
}

const appendDelta = (
  ctx: Ctx,
  s: MState,
  env: Envelope,
  kind: "text" | "reasoning",
  payload: {
    readonly messageId: MessageId
    readonly partId: PartId
    readonly delta: string
    readonly metadata?: ProviderMetadata | undefined
  }
): void => {
  const message = assistantFor(ctx, s, env, payload.messageId, { open: true })
  const parts = ownParts(ctx, message)
  const metadata = kind === "reasoning" ? payload.metadata : undefined
  const j = lastPartWithId(parts, payload.partId)
  if (j >= 0) {
    const part = parts[j] as Exclude<AssistantPart, { readonly type: "tool" }>
    if (part.type !== kind) {
      illegal(s, env, `part ${payload.partId} of message ${payload.messageId} is a ${part.type} part`)
    }
    const owned = own(ctx, part)
    owned.text = owned.text + payload.delta
    if (metadata !== undefined && owned.type === "reasoning") {
      owned.metadata = mergeProviderMetadata(owned.metadata, metadata)
    }
    parts[j] = owned
    return
  }
  parts.push(
    fresh(
      ctx,
      withStep(message, {
        type: kind,
        id: payload.partId,
        text: payload.delta,
        ...(metadata !== undefined ? { metadata } : {})
      })
    )
  )
}

// ---------------------------------------------------------------------------------------------
// the fold step

type Handlers = { readonly [T in EventType]: (ctx: Ctx, s: MState, env: Envelope & EventOf<T>) => void }

const handlers: Handlers = {
  "session.created": (_ctx, s, env) => {
    if (env.seq !== 1) illegal(s, env, "session.created must be the first event of a session")
    const p = env.payload
    if (p.title !== undefined) s.title = p.title
    if (p.cwd !== undefined) s.cwd = p.cwd
    if (p.model !== undefined) s.model = p.model
  },
  "session.titled": (_ctx, s, env) => {
    s.title = env.payload.title
  },
  "session.deleted": (_ctx, s) => {
    s.deleted = true
  },
  "session.status": (_ctx, s, env) => {
    s.status = env.payload.status
  },
  "user.message": (ctx, s, env) => {
    const p = env.payload
    if (findMessageIndex(ctx, s, p.messageId) >= 0) illegal(s, env, `message ${p.messageId} already exists`)
    pushMessage(ctx, s, {
      role: "user",
      id: p.messageId,
      text: p.text,
      mode: p.mode,
      ...(p.context !== undefined ? { context: p.context } : {}),
      at: env.at,
      delivered: false
    })
    if (p.mode === "queue") {
      const queued = ownArray(ctx, s.queued)
      queued.push(p.messageId)
      s.queued = queued
    }
  },
  "user.withdrawn": (ctx, s, env) => {
    const id = env.payload.messageId
    const i = findMessageIndex(ctx, s, id)
    if (i < 0) illegal(s, env, `unknown message ${id}`)
    const message = s.messages[i]!
    if (message.role !== "user") illegal(s, env, `message ${id} is not a user message`)
    if ((message as UserMessage).delivered) illegal(s, env, `message ${id} was delivered: it cannot be withdrawn`)
    s.messages = fresh(
      ctx,
      s.messages.filter((_, j) => j !== i)
    )
    // the positions after it moved (a compaction keeps the messages from an index on)
    ctx.index = undefined
    if (s.compaction !== null && i < s.compaction.keepFrom)
      s.compaction = { ...s.compaction, keepFrom: s.compaction.keepFrom - 1 }
    if (s.modelSwitches.some((change) => i < change.beforeMessage))
      s.modelSwitches = fresh(
        ctx,
        s.modelSwitches.map((change) =>
          i < change.beforeMessage ? { ...change, beforeMessage: change.beforeMessage - 1 } : change
        )
      )
    if (s.queued.includes(id))
      s.queued = fresh(
        ctx,
        s.queued.filter((queued) => queued !== id)
      )
  },
  "turn.started": (ctx, s, env) => {
    const p = env.payload
    if (s.turn !== null) illegal(s, env, `turn ${s.turn.turnId} is still open`)
    markDelivered(ctx, s, env, p.messageIds)
    s.turn = { turnId: p.turnId, startedAt: env.at, messageIds: p.messageIds }
  },
  "turn.finished": (_ctx, s, env) => {
    const p = env.payload
    if (s.turn === null) illegal(s, env, `turn ${p.turnId} is not open`)
    else if (s.turn.turnId !== p.turnId) illegal(s, env, `turn ${p.turnId} is not the open turn (${s.turn.turnId})`)
    s.turn = null
    s.lastTurn = { turnId: p.turnId, reason: p.reason, interrupted: false, at: env.at }
  },
  "turn.interrupted": (ctx, s, env) => {
    const p = env.payload
    if (p.turnId !== undefined && s.turn?.turnId !== p.turnId) {
      illegal(s, env, `turn ${p.turnId} is not the open turn (${s.turn?.turnId ?? "none"})`)
    }
    const turnId = p.turnId ?? s.turn?.turnId
    s.lastTurn = { ...(turnId !== undefined ? { turnId } : {}), reason: p.reason, interrupted: true, at: env.at }
    s.turn = null
    // the turn's assistant message says who stopped it (its `finishReason` is only the sweep's reason)
    if (turnId !== undefined) {
      for (let i = s.messages.length - 1; i >= 0; i--) {
        const message = s.messages[i]!
        if (message.role !== "assistant") continue
        if (message.turnId !== turnId) break
        assistantFor(ctx, s, env, message.id, { open: false }).interrupted = p.reason
      }
    }
  },
  "chat.state": (_ctx, s, env) => {
    s.chatState = env.payload.state
  },
  "assistant.started": (ctx, s, env) => {
    const p = env.payload
    if (findMessageIndex(ctx, s, p.messageId) >= 0) illegal(s, env, `message ${p.messageId} already exists`)
    pushMessage(ctx, s, {
      role: "assistant",
      id: p.messageId,
      ...(p.model !== undefined ? { model: p.model } : {}),
      ...(s.turn !== null ? { turnId: s.turn.turnId } : {}),
      startedAt: env.at,
      parts: [],
      steps: [],
      usage: emptyUsage
    })
    if (p.model !== undefined) s.model = p.model
  },
  "step.started": (ctx, s, env) => {
    const p = env.payload
    const message = assistantFor(ctx, s, env, p.messageId, { open: true })
    const last = message.steps[message.steps.length - 1]
    if (last !== undefined && last.endedAt === undefined) {
      illegal(s, env, `step ${last.step} of message ${p.messageId} is still open`)
    }
    const steps = ownArray(ctx, message.steps)
    steps.push(fresh(ctx, { step: p.step, startedAt: env.at, aborted: false }))
    message.steps = steps
    if (p.deliveredMessageIds !== undefined) markDelivered(ctx, s, env, p.deliveredMessageIds)
  },
  "text.delta": (ctx, s, env) => appendDelta(ctx, s, env, "text", env.payload),
  "reasoning.delta": (ctx, s, env) => appendDelta(ctx, s, env, "reasoning", env.payload),
  "step.finished": (ctx, s, env) => {
    const p = env.payload
    const message = assistantFor(ctx, s, env, p.messageId, { open: false })
    const i = message.steps.length - 1
    const last = message.steps[i]
    if (last === undefined || last.endedAt !== undefined || last.step !== p.step) {
      illegal(s, env, `step ${p.step} of message ${p.messageId} is not open`)
    }
    const steps = ownArray(ctx, message.steps)
    const step: StepInfo = {
      ...last,
      endedAt: env.at,
      finishReason: p.finishReason,
      usage: p.usage,
      aborted: p.aborted ?? false
    }
    steps[i] = fresh(ctx, step)
    message.steps = steps
    message.usage = addUsage(message.usage, p.usage)
    s.totals = addUsage(s.totals, p.usage)
  },
  "assistant.completed": (ctx, s, env) => {
    const p = env.payload
    const message = assistantFor(ctx, s, env, p.messageId, { open: true })
    message.completedAt = env.at
    if (p.finishReason !== undefined) message.finishReason = p.finishReason
  },
  "tool.pending": (ctx, s, env) => {
    const p = env.payload
    const part = s.toolParts.get(p.callId)
    if (part !== undefined) illegal(s, env, `call ${p.callId} already exists (${part.state._tag})`)
    newToolPart(ctx, s, env, p.messageId, p.callId, p.tool, { _tag: "pending", inputText: "", createdAt: env.at })
  },
  "tool.invoked": (ctx, s, env) => {
    const p = env.payload
    const running: ToolState = { _tag: "running", input: p.input, startedAt: env.at, timedOut: false }
    const part = s.toolParts.get(p.callId)
    if (part === undefined) {
      newToolPart(ctx, s, env, p.messageId, p.callId, p.tool, running)
      return
    }
    if (part.state._tag !== "pending") illegal(s, env, `call ${p.callId} is ${part.state._tag}, not pending`)
    if (part.messageId !== p.messageId) {
      illegal(s, env, `call ${p.callId} belongs to message ${part.messageId}, not ${p.messageId}`)
    }
    if (part.tool !== p.tool) illegal(s, env, `call ${p.callId} is a ${part.tool} call, not ${p.tool}`)
    setToolState(ctx, s, part, running)
  },
  "tool.progress": (ctx, s, env) => {
    const part = runningPart(s, env, env.payload.callId)
    setToolState(ctx, s, part, { ...(part.state as RunningState), progress: env.payload.output })
  },
  "tool.process": (ctx, s, env) => {
    const part = runningPart(s, env, env.payload.callId)
    const running = part.state as RunningState
    const { callId: _, ...group } = env.payload
    setToolState(ctx, s, part, { ...running, processes: [...(running.processes ?? []), group] })
  },
  "tool.timeout": (ctx, s, env) => {
    const part = runningPart(s, env, env.payload.callId)
    setToolState(ctx, s, part, { ...(part.state as RunningState), timedOut: true })
  },
  // kept on the call's part (what `sessions show` shows); a run without a known call is in the log only
  "hook.ran": (ctx, s, env) => {
    const p = env.payload
    if (p.callId === undefined) return
    const part = s.toolParts.get(p.callId)
    if (part === undefined) return
    const run = {
      source: p.source,
      hook: p.hook,
      outcome: p.outcome,
      ...(p.error !== undefined ? { error: p.error } : {}),
      ...(p.reason !== undefined ? { reason: p.reason } : {})
    }
    setToolPart(ownToolParts(ctx, s), fresh(ctx, { ...part, hooks: [...(part.hooks ?? []), run] }))
  },
  "tool.finished": (ctx, s, env) => {
    const p = env.payload
    const part = runningPart(s, env, p.callId)
    const running = part.state as RunningState
    foldReads(ctx, s, p.reads)
    setToolState(ctx, s, part, {
      _tag: "completed",
      input: running.input,
      output: p.output,
      ...(p.metadata !== undefined ? { metadata: p.metadata } : {}),
      startedAt: running.startedAt,
      endedAt: env.at
    })
  },
  "tool.failed": (ctx, s, env) => {
    const p = env.payload
    foldReads(ctx, s, p.reads)
    const part = s.toolParts.get(p.callId)
    if (part === undefined) illegal(s, env, `unknown call ${p.callId}`)
    const state = part.state
    if (state._tag !== "pending" && state._tag !== "running") {
      illegal(s, env, `call ${p.callId} is already ${state._tag}`)
    }
    setToolState(ctx, s, part, {
      _tag: "error",
      // a call refused before it ran keeps the input the model sent; one whose input never fully
      // arrived (or an older log's) is sent back to the model as `{}`
      input:
        state._tag === "running"
          ? state.input
          : p.input !== undefined
            ? p.input
            : state.input !== undefined
              ? state.input
              : {},
      error: p.error,
      interrupted: p.interrupted ?? false,
      timedOut: p.timedOut ?? (state._tag === "running" && state.timedOut),
      ...(p.reason !== undefined ? { reason: p.reason } : {}),
      ...(state._tag === "running" ? { startedAt: state.startedAt } : {}),
      endedAt: env.at
    })
  },
  "action.state": (ctx, s, env) => {
    const p = env.payload
    const current = s.actions.get(p.actionId)
    const from = current?.state ?? "none"
    if (!(legalActionTransitions[from] as ReadonlyArray<string>).includes(p.state)) {
      illegal(s, env, `action ${p.actionId} cannot go from ${from} to ${p.state}`)
    }
    const actions = ownMap(ctx, s.actions)
    actions.set(p.actionId, { state: p.state, callIds: p.callIds, updatedAt: env.at })
    s.actions = actions
  },
  "model.retry": (_ctx, s, env) => {
    const p = env.payload
    s.lastRetry = {
      attempt: p.attempt,
      delayMs: p.delayMs,
      nextAt: p.nextAt,
      message: p.message,
      ...(p.status !== undefined ? { status: p.status } : {}),
      at: env.at
    }
  },
  "model.error": (_ctx, s, env) => {
    const p = env.payload
    s.lastError = {
      message: p.message,
      ...(p.status !== undefined ? { status: p.status } : {}),
      retryable: p.retryable,
      at: env.at
    }
  },
  "model.switched": (ctx, s, env) => {
    const p = env.payload
    s.model = p.to
    const switches = ownArray(ctx, s.modelSwitches)
    switches.push({ from: p.from, to: p.to, beforeMessage: s.messages.length, seq: env.seq, at: env.at })
    s.modelSwitches = switches
  },
  "prompt.recorded": (ctx, s, env) => {
    const prompts = own(ctx, s.prompts)
    prompts[env.payload.promptVersion] = env.payload.blob
    s.prompts = prompts
  },
  "permission.asked": (ctx, s, env) => {
    const p = env.payload
    if (s.permissions[p.permissionId] !== undefined) illegal(s, env, `permission ${p.permissionId} was already asked`)
    const permissions = own(ctx, s.permissions)
    permissions[p.permissionId] = {
      permissionId: p.permissionId,
      ...(p.callId !== undefined ? { callId: p.callId } : {}),
      tool: p.tool,
      pattern: p.pattern,
      ...(p.outside === true ? { outside: true } : {}),
      askedAt: env.at,
      reply: null
    }
    s.permissions = permissions
    // the question holds the call's whole input: the pending part keeps it (a crash before the
    // answer ends the call with what the model sent, not `{}`)
    const part = p.callId === undefined || p.input === undefined ? undefined : s.toolParts.get(p.callId)
    if (part !== undefined && part.state._tag === "pending")
      setToolState(ctx, s, part, { ...part.state, input: p.input })
  },
  "permission.replied": (ctx, s, env) => {
    const p = env.payload
    const asked = s.permissions[p.permissionId]
    if (asked === undefined) illegal(s, env, `permission ${p.permissionId} was never asked`)
    if (asked.reply !== null) illegal(s, env, `permission ${p.permissionId} was already answered (${asked.reply})`)
    const permissions = own(ctx, s.permissions)
    permissions[p.permissionId] = { ...asked, reply: p.reply, repliedAt: env.at }
    s.permissions = permissions
  },
  "file.changed": (ctx, s, env) => {
    const p = env.payload
    const files = own(ctx, s.files)
    files[p.path] = {
      op: p.op,
      ...(p.beforeHash !== undefined ? { beforeHash: p.beforeHash } : {}),
      ...(p.afterHash !== undefined ? { afterHash: p.afterHash } : {}),
      ...(p.callId !== undefined ? { callId: p.callId } : {}),
      ...(p.observed === true ? { observed: true } : {}),
      ...(p.recovered === true ? { recovered: true } : {}),
      seq: env.seq,
      at: env.at
    }
    s.files = files
    if (p.callId !== undefined && p.observed !== true) settleIntent(ctx, s, p.callId, p.path, "recorded")
  },
  "file.intent": (ctx, s, env) => {
    const { callId, ...intent } = env.payload
    const part = runningPart(s, env, callId)
    const running = part.state as RunningState
    setToolState(ctx, s, part, { ...running, intents: [...(running.intents ?? []), intent] })
  },
  "file.recovered": (ctx, s, env) => {
    settleIntent(ctx, s, env.payload.callId, env.payload.path, "settled")
  },
  "workspace.snapshot": (_ctx, s, env) => {
    const p = env.payload
    if (s.workspaceBaseline !== null || p.phase !== "baseline" || p.manifest === undefined) return
    s.workspaceBaseline = {
      manifest: p.manifest,
      ...(p.callId !== undefined ? { callId: p.callId } : {}),
      seq: env.seq,
      at: env.at
    }
  },
  "todo.updated": (_ctx, s, env) => {
    s.todos = env.payload.items
  },
  "compaction.done": (ctx, s, env) => {
    const p = env.payload
    const keepFrom = p.upToMessageId === undefined ? s.messages.length : findMessageIndex(ctx, s, p.upToMessageId)
    if (keepFrom < 0) illegal(s, env, `unknown message ${p.upToMessageId}`)
    s.compaction = {
      ...(p.upToMessageId !== undefined ? { upToMessageId: p.upToMessageId } : {}),
      keepFrom,
      summary: p.summary,
      at: env.at
    }
    if (p.usage !== undefined) s.totals = addUsage(s.totals, p.usage)
  },
  "context.pruned": (ctx, s, env) => {
    const parts = ownToolParts(ctx, s)
    for (const callId of env.payload.callIds) {
      const part = parts.get(callId)
      if (part === undefined) illegal(s, env, `unknown call ${callId}`)
      else setToolPart(parts, fresh(ctx, { ...part, pruned: true }))
    }
  }
}

type RunningState = Extract<ToolState, { readonly _tag: "running" }>

/** The file stamps a call recorded (`tool.finished` / `tool.failed` `reads`) replace their paths' entries. */
const foldReads = (ctx: Ctx, s: MState, recorded: ReadonlyArray<FileRead> | undefined): void => {
  if (recorded === undefined || recorded.length === 0) return
  const reads = ownMap(ctx, s.reads)
  for (const { path, ...stamp } of recorded) reads.set(path, stamp)
  s.reads = reads
}

/**
 * A running call's open intents for `path`: `recorded` when its `file.changed` is written (the sweep
 * still gives the agent the file's stamp when the call never ended), dropped when the crash sweep
 * `settled` it (`file.recovered`). An intent ends with its call in any case.
 */
const settleIntent = (ctx: Ctx, s: MState, callId: CallId, path: string, how: "recorded" | "settled"): void => {
  const part = s.toolParts.get(callId)
  if (part === undefined || part.state._tag !== "running") return
  const intents = part.state.intents
  if (intents === undefined || !intents.some((intent) => intent.path === path && intent.recorded !== true)) return
  const left =
    how === "settled"
      ? intents.filter((intent) => intent.path !== path || intent.recorded === true)
      : intents.map((intent) => (intent.path === path ? { ...intent, recorded: true } : intent))
  const { intents: _, ...running } = part.state
  setToolState(ctx, s, part, left.length === 0 ? running : { ...running, intents: left })
}

const runningPart = (s: SessionState, env: Envelope, callId: CallId): ToolPart => {
  const part = s.toolParts.get(callId)
  if (part === undefined) return illegal(s, env, `unknown call ${callId}`)
  if (part.state._tag !== "running") return illegal(s, env, `call ${callId} is ${part.state._tag}, not running`)
  return part
}

/** The legal `action.state` transitions; `archived` and `failed` are final. */
export const legalActionTransitions: Readonly<Record<ActionStateName | "none", ReadonlyArray<ActionStateName>>> = {
  none: ["pending", "running"],
  pending: ["running", "archived", "failed"],
  running: ["archived", "failed"],
  archived: [],
  failed: []
}

const step = (ctx: Ctx, state: SessionState, env: Envelope): SessionState => {
  if (env.sessionId !== state.sessionId) {
    illegal(state, env, `event of session ${env.sessionId} applied to session ${state.sessionId}`)
  }
  if (env.seq !== state.lastSeq + 1) illegal(state, env, `expected seq ${state.lastSeq + 1}, got seq ${env.seq}`)
  const s = own(ctx, state)
  const handler = handlers[env.type] as (ctx: Ctx, s: MState, env: Envelope) => void
  handler(ctx, s, env)
  if (s.lastSeq === 0) s.createdAt = env.at
  s.lastSeq = env.seq
  s.updatedAt = env.at
  return s
}

const run = <A>(f: () => A): Either.Either<A, ProjectionError> => {
  try {
    return Either.right(f())
  } catch (e) {
    if (e instanceof ProjectionError) return Either.left(e)
    throw e
  }
}

// ---------------------------------------------------------------------------------------------
// public fold

/** One fold step. Never mutates `state`. */
export const apply = (state: SessionState, envelope: Envelope): Either.Either<SessionState, ProjectionError> =>
  run(() => step({ owned: new WeakSet(), index: undefined, bulk: false }, state, envelope))

/**
 * An incremental fold: feed envelopes one by one or in chunks, read the state at any time.
 * Objects are copied at most once between two reads of `state`, so a long fold is linear.
 * After an error the folder is spent: the failing step may have changed objects it owned, so
 * every later push returns the same error (inputs handed to `folder` are never changed).
 */
export interface Folder {
  readonly push: (envelope: Envelope) => Either.Either<void, ProjectionError>
  readonly pushAll: (envelopes: Iterable<Envelope>) => Either.Either<void, ProjectionError>
  /** The state so far. Reading it ends the folder's ownership: later pushes copy again. */
  readonly state: () => Either.Either<SessionState, ProjectionError>
  /**
   * The state so far, to read before the next push or release (which may change it in place);
   * the folder keeps its ownership.
   */
  readonly view: () => Either.Either<SessionState, ProjectionError>
  /**
   * Empties the content of the first `upTo` messages and of their tool parts — texts, reasoning,
   * tool inputs, outputs and metadata — keeping everything the fold checks later events against
   * (ids, states, steps, positions): a reader that has shown those messages folds the rest of a long
   * log without holding them. The state is no longer the session's; only a reader uses it.
   */
  readonly release: (upTo: number) => void
}

/** What a released call keeps: its state's tag, which later events are checked against. */
const releasedToolStates: { readonly [K in ToolState["_tag"]]: ToolState } = {
  pending: { _tag: "pending", inputText: "", createdAt: 0 },
  running: { _tag: "running", input: null, startedAt: 0, timedOut: false },
  completed: { _tag: "completed", input: null, output: "", startedAt: 0, endedAt: 0 },
  error: { _tag: "error", input: null, error: "", interrupted: false, timedOut: false, endedAt: 0 }
}
const noSteps: ReadonlyArray<StepInfo> = []

/**
 * `Folder.release` on `s` for the messages from `from` up to `upTo`: a user message keeps its id
 * and delivery, an assistant message its ids, times, end and the references of its calls (no text,
 * steps or usage), each of its calls its tag (`releasedToolStates`).
 */
const releaseContent = (ctx: Ctx, state: SessionState, from: number, upTo: number): SessionState => {
  const s = own(ctx, state)
  const messages = ownArray(ctx, s.messages)
  s.messages = messages
  const toolParts = ownToolParts(ctx, s)
  for (let i = from; i < upTo && i < messages.length; i++) {
    const message = messages[i]!
    if (message.role === "user") {
      messages[i] = fresh(ctx, { ...message, text: "" })
      continue
    }
    const parts: Array<AssistantPart> = []
    for (const part of message.parts) {
      if (part.type !== "tool") continue
      parts.push(part)
      const tool = toolParts.get(part.callId)
      if (tool !== undefined)
        setToolPart(toolParts, fresh(ctx, { ...tool, state: releasedToolStates[tool.state._tag] }))
    }
    messages[i] = fresh(ctx, { ...message, parts: fresh(ctx, parts), steps: noSteps, usage: emptyUsage })
  }
  return s
}

const bulkCtx = (): Ctx => ({ owned: new WeakSet(), index: undefined, bulk: true })

export const folder = (initial: SessionState): Folder => {
  let current = initial
  let ctx = bulkCtx()
  let failed: ProjectionError | undefined
  /** the messages `release` emptied: those before this index */
  let released = 0
  const pushAll = (envelopes: Iterable<Envelope>): Either.Either<void, ProjectionError> => {
    if (failed !== undefined) return Either.left(failed)
    const result = run(() => {
      for (const env of envelopes) current = step(ctx, current, env)
    })
    if (Either.isLeft(result)) failed = result.left
    return result
  }
  return {
    push: (envelope) => pushAll([envelope]),
    pushAll,
    state: () => {
      if (failed !== undefined) return Either.left(failed)
      ctx = bulkCtx()
      return Either.right(current)
    },
    view: () => (failed !== undefined ? Either.left(failed) : Either.right(current)),
    release: (upTo) => {
      if (failed !== undefined || upTo <= released) return
      current = releaseContent(ctx, current, released, upTo)
      released = upTo
    }
  }
}

/** Folds many envelopes; the same result as folding `apply`, in linear time. Never mutates `state`. */
export const applyAll = (
  state: SessionState,
  envelopes: Iterable<Envelope>
): Either.Either<SessionState, ProjectionError> => {
  const f = folder(state)
  return Either.flatMap(f.pushAll(envelopes), f.state)
}

/** The parts of an assistant message with the tool refs resolved. */
export const resolveParts = (
  state: SessionState,
  message: AssistantMessage
): ReadonlyArray<Exclude<AssistantPart, { readonly type: "tool" }> | ToolPart> =>
  message.parts.map((part) => (part.type === "tool" ? state.toolParts.get(part.callId)! : part))
