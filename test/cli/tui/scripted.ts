/**
 * Scripted event logs for the interactive screen, without vitest (the benchmarks use them too):
 * envelopes as the store would hold them (one session, gapless seqs, increasing times), folded
 * through `makeScreenFolder` — which folds them through the projection, so an illegal sequence
 * fails instead of drawing something — a `UiState` around them, the controller's store, and fake
 * terminal streams of any width.
 */
import { EventEmitter } from "node:events"
import type { UiState, UiStore } from "../../../src/cli/tui/App.js"
import type { Envelope, EventType, PayloadOf } from "../../../src/domain/Events.js"
import { CallId, EventId, MessageId, PartId, SessionId, TurnId } from "../../../src/domain/Ids.js"
import type { Usage } from "../../../src/domain/Message.js"
import { makeScreenFolder, type Screen, type ScreenFolder } from "../../../src/present/screen.js"

export const SID = SessionId.make("01JTESTSESSION")
/** The scripted log's clock starts here (UTC ms). */
export const T0 = 1_750_000_000_000

export const mid = (id: string) => MessageId.make(id)
export const pid = (id: string) => PartId.make(id)
export const cid = (id: string) => CallId.make(id)
export const tid = (id: string) => TurnId.make(id)

export const usage = (input: number, output: number, cost: number, more: Partial<Usage> = {}): Usage => ({
  input,
  output,
  reasoning: 0,
  cacheRead: 0,
  cacheWrite: 0,
  cost,
  ...more
})

/**
 * One session's log, written as the kernel would: each `add` stamps the next seq and the clock's
 * time (`tick` moves the clock); `take` hands over what was added since the last `take` (a batch
 * of the bus), `all` everything.
 */
export class Log {
  private seq = 0
  private taken = 0
  now: number
  readonly envelopes: Array<Envelope> = []

  constructor(
    readonly sessionId: SessionId = SID,
    startAt: number = T0
  ) {
    this.now = startAt
  }

  add<T extends EventType>(type: T, payload: PayloadOf<T>): Envelope {
    this.seq += 1
    const envelope = {
      id: EventId.make(`${this.sessionId}-e${this.seq}`),
      sessionId: this.sessionId,
      seq: this.seq,
      type,
      at: this.now,
      parentId: null,
      v: 1,
      payload
    } as unknown as Envelope
    this.envelopes.push(envelope)
    return envelope
  }

  tick(ms: number): this {
    this.now += ms
    return this
  }

  take(): ReadonlyArray<Envelope> {
    const batch = this.envelopes.slice(this.taken)
    this.taken = this.envelopes.length
    return batch
  }

  all(): ReadonlyArray<Envelope> {
    return this.envelopes.slice()
  }

  // --- the usual pieces of a turn -------------------------------------------------------------

  created(model = "openai/gpt-4o"): this {
    this.add("session.created", { title: "test", cwd: "/work/project", model })
    return this
  }

  /** user.message (prompt), turn.started delivering it, busy, streaming, assistant.started, step 0. */
  startTurn(text: string, n = 1, options: { readonly model?: string } = {}): this {
    this.add("user.message", { messageId: mid(`u${n}`), text, mode: "prompt" })
    this.add("turn.started", { turnId: tid(`t${n}`), messageIds: [mid(`u${n}`)] })
    this.add("session.status", { status: { _tag: "busy" } })
    this.add("chat.state", { state: "streaming" })
    this.add("assistant.started", { messageId: mid(`a${n}`), model: options.model ?? "openai/gpt-4o" })
    this.add("step.started", { messageId: mid(`a${n}`), step: 0 })
    return this
  }

  text(delta: string, n = 1, part = `p${n}`): this {
    this.add("text.delta", { messageId: mid(`a${n}`), partId: pid(part), delta })
    return this
  }

  reasoning(delta: string, n = 1, part = `r${n}`): this {
    this.add("reasoning.delta", { messageId: mid(`a${n}`), partId: pid(part), delta })
    return this
  }

  finishStep(step: number, used: Usage, n = 1, finishReason = "stop"): this {
    this.add("step.finished", { messageId: mid(`a${n}`), step, finishReason, usage: used })
    return this
  }

  /** assistant.completed, turn.finished, chat.state idle, session.status idle. */
  endTurn(n = 1, reason = "stop"): this {
    this.add("assistant.completed", { messageId: mid(`a${n}`), finishReason: reason })
    this.add("turn.finished", { turnId: tid(`t${n}`), reason })
    this.add("chat.state", { state: "idle" })
    this.add("session.status", { status: { _tag: "idle" } })
    return this
  }
}

/** Folds envelopes into a screen; a log the projection rejects fails here, loudly. */
export const fold = (envelopes: ReadonlyArray<Envelope>, sessionId: SessionId = SID): Screen => {
  const folder = makeScreenFolder(sessionId)
  folder.push(envelopes)
  return checked(folder)
}

/** The folder's snapshot, failing when the log could not be folded. */
export const checked = (folder: ScreenFolder): Screen => {
  const screen = folder.snapshot()
  if (screen.error !== undefined) throw new Error(`the scripted log is invalid: ${screen.error}`)
  return screen
}

export const uiState = (screen: Screen, more: Partial<UiState> = {}): UiState => ({
  screen,
  blobs: new Map(),
  model: "openai/gpt-4o",
  contextWindow: 128_000,
  maxAttempts: 8,
  approval: undefined,
  interrupting: false,
  flash: undefined,
  overlay: undefined,
  epoch: 0,
  history: [],
  ...more
})

/** The controller's store (interactive.ts `makeUiStore`): `set` notifies the screen. */
export interface TestStore extends UiStore {
  readonly set: (update: (state: UiState) => UiState) => void
  readonly listeners: () => number
}

export const makeStore = (initial: UiState): TestStore => {
  let state = initial
  const listeners = new Set<() => void>()
  return {
    get: () => state,
    subscribe: (listener) => {
      listeners.add(listener)
      return () => listeners.delete(listener)
    },
    set: (update) => {
      state = update(state)
      for (const listener of listeners) listener()
    },
    listeners: () => listeners.size
  }
}

/** A terminal's stdout of a given width that keeps the last frame (as ink-testing-library's). */
export class FakeStdout extends EventEmitter {
  last = ""
  count = 0
  constructor(public columns: number) {
    super()
  }
  readonly rows = 40
  write = (frame: string): boolean => {
    this.last = frame
    this.count += 1
    return true
  }
}

/** A terminal's stdin in raw mode (as ink-testing-library's). */
export class FakeStdin extends EventEmitter {
  readonly isTTY = true
  private data: string | null = null
  write = (data: string): void => {
    this.data = data
    this.emit("readable")
    this.emit("data", data)
  }
  read = (): string | null => {
    const data = this.data
    this.data = null
    return data
  }
  setEncoding(): void {}
  setRawMode(): void {}
  resume(): void {}
  pause(): void {}
  ref(): void {}
  unref(): void {}
}
