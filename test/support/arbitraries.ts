/**
 * Generators of random VALID event sequences, for property tests and benchmarks.
 *
 * A small simulator of the agent kernel plays a session from a list of random choices: at each
 * choice it lists the moves that are legal in its current state (prompt, stream a delta, start or
 * run a tool call, steer, queue, retry, interrupt, crash and sweep …) and plays one of them, which
 * emits one or more events. Any prefix of a generated sequence is itself valid — the log of a
 * process that died at that point — so sequences end anywhere, mid-turn included.
 *
 * `simulate(choices)` is deterministic; `eventsArb` / `envelopesArb` wrap it in FastCheck
 * arbitraries (shrinking works on the choices, and every shrunk list is still a valid session).
 */
import { FastCheck } from "effect"
import { type Envelope, type Event, type EventType, make, type PayloadOf } from "../../src/domain/Events.js"
import { ActionId, CallId, EventId, MessageId, PartId, SessionId, TurnId } from "../../src/domain/Ids.js"
import type { Usage } from "../../src/domain/Message.js"

export interface SimulateOptions {
  /** emit `session.created` first (default true) */
  readonly created?: boolean
  /** how many of the moves offered while streaming are text deltas (default 4; raise for delta-heavy logs) */
  readonly deltaWeight?: number
}

/** open calls only: a call is removed when it ends */
type CallState = "pending" | "running" | "timedOut"

interface Sim {
  readonly events: Array<Event>
  n: number
  turnId: TurnId | null
  messageId: MessageId | null
  step: number
  stepOpen: boolean
  partId: PartId | null
  partKind: "text" | "reasoning" | null
  calls: Map<CallId, CallState>
  pendingTools: Map<CallId, string>
  /** calls of the current step (in order) */
  stepCalls: Array<CallId>
  /** every call made so far */
  allCalls: Array<CallId>
  action: { id: ActionId; state: "pending" | "running"; callIds: Array<CallId> } | null
  chat: "idle" | "streaming" | "awaiting_tool" | "interrupted"
  status: "idle" | "busy" | "retry"
  undeliveredSteer: Array<MessageId>
  queued: Array<MessageId>
  openPermissions: Array<string>
  messages: Array<MessageId>
  failedInAction: boolean
  /** the prompt version of the turn's requests, and the versions `prompt.recorded` so far */
  prompt: string | null
  recordedPrompts: Set<string>
  /** the model the session is on; now and then a turn switches it (`model.switched`) */
  model: string
}

const words = ["the ", "quick ", "brown ", "fox ", "jumps ", "over ", "a lazy ", "dog. ", "\n", "ünïcödé ", "🙂 "]

const usageOf = (x: number): Usage => ({
  input: (x % 97) + 1,
  output: x % 53,
  reasoning: x % 7,
  cacheRead: x % 11,
  cacheWrite: x % 5,
  cost: (x % 13) / 1000,
  // now and then a step without a price: sums (and snapshots of them) carry `costKnown: false`
  ...(x % 17 === 0 ? { costKnown: false } : {})
})

const emit = <T extends EventType>(sim: Sim, type: T, payload: PayloadOf<T>): void => {
  sim.events.push(make(type, payload))
}

const nextId = (sim: Sim, prefix: string): string => `${prefix}-${++sim.n}`

const userMessage = (sim: Sim, mode: "prompt" | "steer" | "queue", x: number): MessageId => {
  const messageId = MessageId.make(nextId(sim, "u"))
  emit(sim, "user.message", { messageId, text: `${mode} ${words[x % words.length]}`, mode })
  sim.messages.push(messageId)
  return messageId
}

const startStep = (sim: Sim): void => {
  const delivered = sim.undeliveredSteer
  sim.undeliveredSteer = []
  emit(sim, "step.started", {
    messageId: sim.messageId!,
    step: sim.step,
    ...(delivered.length > 0 ? { deliveredMessageIds: delivered } : {})
  })
  sim.stepOpen = true
  sim.stepCalls = []
  sim.partId = null
  sim.partKind = null
  if (sim.chat !== "streaming") {
    emit(sim, "chat.state", { state: "streaming" })
    sim.chat = "streaming"
  }
}

const startTurn = (sim: Sim, messageIds: ReadonlyArray<MessageId>): void => {
  const turnId = TurnId.make(nextId(sim, "turn"))
  const model = sim.n % 4 === 0 ? "test/other" : "test/model"
  if (model !== sim.model) {
    emit(sim, "model.switched", { from: sim.model, to: model })
    sim.model = model
  }
  emit(sim, "turn.started", { turnId, messageIds })
  sim.queued = sim.queued.filter((id) => !messageIds.includes(id))
  sim.turnId = turnId
  emit(sim, "session.status", { status: { _tag: "busy" } })
  sim.status = "busy"
  const messageId = MessageId.make(nextId(sim, "a"))
  emit(sim, "assistant.started", { messageId, model: sim.model })
  sim.messages.push(messageId)
  sim.messageId = messageId
  sim.step = 0
  startStep(sim)
  // the turn's prompt (one of a few versions), recorded before the first request that uses it
  sim.prompt = `pv-${sim.n % 3}`
  if (!sim.recordedPrompts.has(sim.prompt)) {
    emit(sim, "prompt.recorded", { promptVersion: sim.prompt, blob: `blob-${sim.prompt}` })
    sim.recordedPrompts.add(sim.prompt)
  }
}

const finishStep = (sim: Sim, x: number, finishReason: string, aborted: boolean): void => {
  emit(sim, "step.finished", {
    messageId: sim.messageId!,
    step: sim.step,
    finishReason,
    usage: usageOf(x),
    ...(aborted ? { aborted } : {}),
    ...(sim.prompt !== null ? { promptVersion: sim.prompt } : {})
  })
  sim.stepOpen = false
}

const endCall = (sim: Sim, callId: CallId): void => {
  sim.calls.delete(callId)
  sim.pendingTools.delete(callId)
}

const openCalls = (sim: Sim): Array<CallId> => [...sim.calls.keys()]

/** Ends every open call, the open action, the step and the turn (interrupt / crash / fatal error). */
const cleanup = (sim: Sim, x: number, reason: "user" | "crash"): void => {
  const crash = reason === "crash"
  for (const callId of openCalls(sim)) {
    emit(sim, "tool.failed", {
      callId,
      error: crash ? "the process stopped before the tool finished" : "interrupted by the user",
      interrupted: true,
      reason,
      ...(sim.calls.get(callId) === "timedOut" ? { timedOut: true } : {})
    })
    endCall(sim, callId)
  }
  if (sim.action !== null) {
    emit(sim, "action.state", { actionId: sim.action.id, state: "failed", callIds: sim.action.callIds })
    sim.action = null
  }
  if (!crash && sim.stepOpen) finishStep(sim, x, "interrupted", true)
  if (!crash && sim.messageId !== null) {
    emit(sim, "assistant.completed", { messageId: sim.messageId, finishReason: "interrupted" })
  }
  sim.stepOpen = false
  sim.messageId = null
  emit(sim, "turn.interrupted", { ...(sim.turnId !== null ? { turnId: sim.turnId } : {}), reason })
  sim.turnId = null
  emit(sim, "chat.state", { state: "idle" })
  sim.chat = "idle"
  emit(sim, "session.status", { status: { _tag: "idle" } })
  sim.status = "idle"
}

const endTurn = (sim: Sim, reason: string): void => {
  emit(sim, "assistant.completed", { messageId: sim.messageId!, finishReason: reason })
  sim.messageId = null
  emit(sim, "turn.finished", { turnId: sim.turnId!, reason })
  sim.turnId = null
  emit(sim, "chat.state", { state: "idle" })
  sim.chat = "idle"
  emit(sim, "session.status", { status: { _tag: "idle" } })
  sim.status = "idle"
}

const newCall = (sim: Sim): CallId => {
  const callId = CallId.make(nextId(sim, "call"))
  sim.stepCalls.push(callId)
  sim.allCalls.push(callId)
  return callId
}

const tools = ["read", "write", "edit", "bash", "grep"] as const

type Move = (sim: Sim, x: number) => void

const delta =
  (kind: "text" | "reasoning"): Move =>
  (sim, x) => {
    if (sim.partKind !== kind || sim.partId === null || x % 5 === 0) {
      sim.partId = PartId.make(nextId(sim, kind === "text" ? "t" : "r"))
      sim.partKind = kind
    }
    if (kind === "reasoning" && x % 4 === 1) {
      // provider metadata: a signature closing the part (an empty delta), or a redacted block's data
      const metadata =
        x % 3 === 0 ? { anthropic: { redactedData: `data${x}` } } : { anthropic: { signature: `sig${x}` } }
      emit(sim, "reasoning.delta", { messageId: sim.messageId!, partId: sim.partId, delta: "", metadata })
      return
    }
    emit(sim, `${kind}.delta`, { messageId: sim.messageId!, partId: sim.partId, delta: words[x % words.length]! })
  }

/** The moves legal in the simulator's current state, with their weights. */
const moves = (sim: Sim, options: Required<SimulateOptions>): Array<readonly [number, Move]> => {
  const list: Array<readonly [number, Move]> = []
  const add = (weight: number, move: Move) => {
    list.push([weight, move])
  }
  const running = [...sim.calls].filter(([, s]) => s === "running" || s === "timedOut").map(([c]) => c)
  const pendingInStep = sim.stepCalls.filter((c) => sim.calls.get(c) === "pending")

  // anywhere
  add(sim.turnId === null ? 2 : 1, (sim, x) => {
    sim.queued.push(userMessage(sim, "queue", x))
  })
  if (sim.undeliveredSteer.length + sim.queued.length > 0) {
    // a message taken back before a turn or step delivered it
    add(1, (sim, x) => {
      const waiting = [...sim.undeliveredSteer, ...sim.queued]
      const messageId = waiting[x % waiting.length]!
      emit(sim, "user.withdrawn", { messageId })
      sim.undeliveredSteer = sim.undeliveredSteer.filter((id) => id !== messageId)
      sim.queued = sim.queued.filter((id) => id !== messageId)
      sim.messages = sim.messages.filter((id) => id !== messageId)
    })
  }
  if (sim.openPermissions.length > 0) {
    add(6, (sim, x) => {
      const permissionId = sim.openPermissions.shift()!
      emit(sim, "permission.replied", { permissionId, reply: (["once", "always", "reject"] as const)[x % 3]! })
    })
  }

  if (sim.turnId === null) {
    add(4, (sim, x) => startTurn(sim, [userMessage(sim, "prompt", x), ...sim.queued]))
    add(4, (sim, x) => startTurn(sim, [userMessage(sim, "prompt", x)]))
    add(1, (sim, x) => emit(sim, "session.titled", { title: `title ${x % 10}` }))
    if (sim.queued.length > 0) add(3, (sim) => startTurn(sim, [...sim.queued]))
    if (sim.messages.length > 0) {
      add(1, (sim, x) =>
        emit(
          sim,
          "compaction.done",
          x % 3 === 0
            ? // everything so far, with the summary step's usage
              { summary: "summary of all", trigger: "manual", usage: usageOf(x) }
            : { upToMessageId: sim.messages[x % sim.messages.length]!, summary: "summary", trigger: "auto" }
        )
      )
    }
    if (sim.allCalls.length > 0) {
      add(1, (sim, x) => {
        const calls = sim.allCalls.filter((_, i) => (i + x) % 2 === 0)
        if (calls.length > 0) emit(sim, "context.pruned", { callIds: calls })
      })
    }
    return list
  }

  // in a turn
  add(1, (sim, x) => cleanup(sim, x, "user"))
  add(1, (sim, x) => cleanup(sim, x, "crash"))
  for (const callId of running) {
    add(3, (sim, x) => emit(sim, "tool.progress", { callId, output: `line ${x % 100}\n` }))
    add(1, (sim, x) => emit(sim, "tool.process", { callId, pgid: 1000 + (x % 5000), token: `token-${x % 1000}` }))
    if (sim.calls.get(callId) === "running") {
      add(1, (sim, x) => {
        emit(sim, "tool.timeout", { callId, timeoutMs: 1000 + (x % 5) * 1000 })
        sim.calls.set(callId, "timedOut")
      })
    }
    add(6, (sim, x) => {
      if (sim.calls.get(callId) === "timedOut") {
        emit(sim, "tool.failed", { callId, error: "timed out", timedOut: true })
        sim.failedInAction = true
      } else if (x % 4 === 0) {
        emit(sim, "tool.failed", { callId, error: `exit code ${1 + (x % 3)}` })
        sim.failedInAction = true
      } else {
        emit(sim, "tool.finished", {
          callId,
          output: `output ${x % 1000}`,
          ...(x % 3 === 0 ? { metadata: { exitCode: 0, truncated: x % 2 === 0 } } : {})
        })
      }
      endCall(sim, callId)
    })
    add(2, (sim, x) =>
      emit(sim, "file.changed", {
        path: `src/file${x % 4}.ts`,
        op: (["create", "update", "delete"] as const)[x % 3]!,
        ...(x % 3 !== 0 ? { beforeHash: `b${x % 17}` } : {}),
        ...(x % 3 !== 2 ? { afterHash: `a${x % 19}` } : {}),
        callId
      })
    )
    add(2, (sim, x) => {
      const permissionId = nextId(sim, "perm")
      emit(sim, "permission.asked", { permissionId, callId, tool: "bash", pattern: `cmd ${x % 3}` })
      // answered at once half of the time (an ask is often answered before anything else happens)
      if (x % 2 === 0)
        emit(sim, "permission.replied", { permissionId, reply: (["once", "always", "reject"] as const)[x % 3]! })
      else sim.openPermissions.push(permissionId)
    })
  }

  if (sim.stepOpen) {
    // streaming
    add(3 * options.deltaWeight, delta("text"))
    add(3, delta("reasoning"))
    add(2, (sim, x) => {
      const callId = newCall(sim)
      const tool = tools[x % tools.length]!
      emit(sim, "tool.pending", { messageId: sim.messageId!, callId, tool })
      sim.calls.set(callId, "pending")
      sim.pendingTools.set(callId, tool)
    })
    add(2, (sim, x) => {
      const callId = newCall(sim)
      emit(sim, "tool.invoked", {
        messageId: sim.messageId!,
        callId,
        tool: tools[x % tools.length]!,
        input: { path: `src/file${x % 4}.ts`, n: x % 10 }
      })
      sim.calls.set(callId, "running")
    })
    for (const callId of pendingInStep) {
      add(4, (sim, x) => {
        emit(sim, "tool.invoked", {
          messageId: sim.messageId!,
          callId,
          tool: sim.pendingTools.get(callId)!,
          input: { command: `echo ${x % 10}` }
        })
        sim.calls.set(callId, "running")
        sim.pendingTools.delete(callId)
      })
    }
    add(1, (sim, x) => {
      emit(sim, "model.retry", {
        attempt: 1 + (x % 4),
        delayMs: 100 * (1 + (x % 4)),
        nextAt: 1_700_000_000_000 + x,
        message: "overloaded",
        ...(x % 2 === 0 ? { status: 529 } : {})
      })
      emit(sim, "session.status", {
        status: { _tag: "retry", attempt: 1 + (x % 4), nextAt: 1_700_000_000_000 + x, message: "overloaded" }
      })
      sim.status = "retry"
    })
    if (sim.status === "retry") {
      add(4, (sim) => {
        emit(sim, "session.status", { status: { _tag: "busy" } })
        sim.status = "busy"
      })
    }
    // steer while streaming: stop the stream, keep the partial text, deliver with the next step
    add(1, (sim, x) => {
      sim.undeliveredSteer.push(userMessage(sim, "steer", x))
      emit(sim, "chat.state", { state: "interrupted" })
      sim.chat = "interrupted"
      closeStep(sim, x, "interrupted", true)
    })
    // the step ends normally
    add(4, (sim, x) => closeStep(sim, x, sim.stepCalls.length > 0 ? "tool-calls" : "stop", false))
    // a fatal model error ends the turn
    add(1, (sim, x) => {
      emit(sim, "model.error", { message: "invalid request", status: 400, retryable: false })
      for (const callId of sim.stepCalls) {
        if (sim.calls.has(callId)) {
          emit(sim, "tool.failed", { callId, error: "model error", interrupted: true, reason: "error" })
          endCall(sim, callId)
        }
      }
      if (sim.action !== null) {
        emit(sim, "action.state", { actionId: sim.action.id, state: "failed", callIds: sim.action.callIds })
        sim.action = null
      }
      finishStep(sim, x, "error", true)
      endTurn(sim, "error")
    })
    return list
  }

  // between steps: tools run (awaiting_tool), or the stream was interrupted by a steer
  add(1, (sim, x) => {
    sim.undeliveredSteer.push(userMessage(sim, "steer", x))
  })
  if (running.length === 0) {
    add(6, (sim) => {
      if (sim.action !== null) {
        emit(sim, "action.state", {
          actionId: sim.action.id,
          state: sim.failedInAction ? "failed" : "archived",
          callIds: sim.action.callIds
        })
        sim.action = null
      }
      sim.step += 1
      startStep(sim)
    })
  }
  return list
}

/** Closes the open step: pending calls are cut, calls still running become an action. */
const closeStep = (sim: Sim, x: number, finishReason: string, aborted: boolean): void => {
  for (const callId of sim.stepCalls) {
    if (sim.calls.get(callId) === "pending") {
      emit(sim, "tool.failed", { callId, error: "the call's input was cut off", interrupted: true, reason: "step" })
      endCall(sim, callId)
    }
  }
  finishStep(sim, x, finishReason, aborted)
  if (sim.stepCalls.length > 0) {
    const actionId = ActionId.make(nextId(sim, "action"))
    const callIds = [...sim.stepCalls]
    emit(sim, "action.state", { actionId, state: "pending", callIds })
    emit(sim, "action.state", { actionId, state: "running", callIds })
    sim.action = { id: actionId, state: "running", callIds }
    sim.failedInAction = false
    if (!aborted) {
      emit(sim, "chat.state", { state: "awaiting_tool" })
      sim.chat = "awaiting_tool"
    }
    return
  }
  if (!aborted) {
    endTurn(sim, sim.step >= 6 ? "max-steps" : "stop")
  }
}

/** Plays a session from a list of choices; deterministic. */
export const simulate = (choices: ReadonlyArray<number>, options: SimulateOptions = {}): Array<Event> => {
  const opts: Required<SimulateOptions> = { created: options.created ?? true, deltaWeight: options.deltaWeight ?? 4 }
  const sim: Sim = {
    events: [],
    n: 0,
    turnId: null,
    messageId: null,
    step: 0,
    stepOpen: false,
    partId: null,
    partKind: null,
    calls: new Map(),
    pendingTools: new Map(),
    stepCalls: [],
    allCalls: [],
    action: null,
    chat: "idle",
    status: "idle",
    undeliveredSteer: [],
    queued: [],
    openPermissions: [],
    messages: [],
    failedInAction: false,
    prompt: null,
    recordedPrompts: new Set(),
    model: "test/model"
  }
  if (opts.created) emit(sim, "session.created", { title: "a session", cwd: "/work/project", model: "test/model" })
  for (const choice of choices) {
    const list = moves(sim, opts)
    const total = list.reduce((sum, [weight]) => sum + weight, 0)
    let r = choice % total
    const x = Math.floor(choice / total)
    for (const [weight, move] of list) {
      if (r < weight) {
        move(sim, x)
        break
      }
      r -= weight
    }
  }
  return sim.events
}

export const START_AT = 1_700_000_000_000

/** Wraps events in envelopes with seqs from `fromSeq` (default 1) and increasing times. */
export const toEnvelopes = (
  sessionId: SessionId,
  events: ReadonlyArray<Event>,
  options: { readonly fromSeq?: number; readonly startAt?: number } = {}
): Array<Envelope> => {
  const fromSeq = options.fromSeq ?? 1
  const startAt = options.startAt ?? START_AT
  return events.map((event, i) => {
    const seq = fromSeq + i
    return {
      id: EventId.make(`${sessionId}-e${seq}`),
      sessionId,
      seq,
      at: startAt + seq * 7,
      parentId: null,
      v: 1,
      ...event
    } as Envelope
  })
}

export const SESSION_ID = SessionId.make("session-1")

const choicesArb = (maxLength: number) => FastCheck.array(FastCheck.nat({ max: 1_000_000 }), { maxLength })

/** Valid event sequences (for `EventStore.append`). */
export const eventsArb = (
  options: SimulateOptions & { readonly maxLength?: number } = {}
): FastCheck.Arbitrary<Array<Event>> => choicesArb(options.maxLength ?? 80).map((choices) => simulate(choices, options))

/** Valid envelope sequences of one session, seqs 1..n. */
export const envelopesArb = (
  options: SimulateOptions & { readonly maxLength?: number; readonly sessionId?: SessionId } = {}
): FastCheck.Arbitrary<Array<Envelope>> =>
  eventsArb(options).map((events) => toEnvelopes(options.sessionId ?? SESSION_ID, events))

/** A deterministic pseudo-random sequence (no FastCheck), e.g. for benchmarks: `count` choices from `seed`. */
export const choicesFromSeed = (seed: number, count: number): Array<number> => {
  let x = seed >>> 0 || 1
  const out: Array<number> = new Array(count)
  for (let i = 0; i < count; i++) {
    // xorshift32
    x ^= x << 13
    x >>>= 0
    x ^= x >>> 17
    x ^= x << 5
    x >>>= 0
    out[i] = x % 1_000_001
  }
  return out
}
