/**
 * Scripted event logs for the interactive screen's tests: envelopes as the store would hold them
 * (one session, gapless seqs, increasing times), folded through `makeScreenFolder` — which folds
 * them through the projection, so an illegal sequence fails the test instead of drawing something
 * — and the screen rendered with ink-testing-library from a fake `UiStore` with spy `Actions`.
 */
import { EventEmitter } from "node:events"
import chalk from "chalk"
import { render as inkRender } from "ink"
import { render } from "ink-testing-library"
import { vi } from "vitest"
import { type Actions, App, type UiState, type UiStore } from "../../../src/cli/tui/App.js"
import { makeScreenFolder, type Screen, type ScreenFolder } from "../../../src/cli/tui/screen.js"
import { makeTheme } from "../../../src/cli/tui/theme.js"
import type { Envelope, EventType, PayloadOf } from "../../../src/domain/Events.js"
import { CallId, EventId, MessageId, PartId, SessionId, TurnId } from "../../../src/domain/Ids.js"
import type { Usage } from "../../../src/domain/Message.js"

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

export const spyActions = () => ({
  submit: vi.fn<Actions["submit"]>(),
  interrupt: vi.fn<Actions["interrupt"]>(),
  quit: vi.fn<Actions["quit"]>(),
  answer: vi.fn<Actions["answer"]>(),
  openSession: vi.fn<Actions["openSession"]>(),
  closeOverlay: vi.fn<Actions["closeOverlay"]>(),
  redraw: vi.fn<Actions["redraw"]>()
})
export type SpyActions = ReturnType<typeof spyActions>

/** What the tests drive: the last frame (plain text), the keys, the store, the spies. */
export interface Mounted {
  readonly store: TestStore
  readonly actions: SpyActions
  /** the last frame as written (Ink's styles included when colours are on) */
  readonly raw: () => string
  /** the last frame without styles */
  readonly frame: () => string
  readonly frames: () => number
  readonly write: (data: string) => void
  readonly unmount: () => void
}

/** Styles (SGR) only: what Ink itself writes. Anything else that is left is a leak. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching escape sequences is the point
const SGR = /\u001b\[[0-9;]*m/g
export const plain = (text: string): string => text.replace(SGR, "")

/** What a terminal would act on: every C0 control but the newline, DEL, every C1 control. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding them is the point
export const CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/

/**
 * Renders the screen for `ui` (or a store). With `columns`, through Ink's own `render` with the same
 * fake streams as ink-testing-library (whose stdout always reports 100 columns).
 */
export const mount = (
  ui: UiState | TestStore,
  options: { readonly colors?: boolean; readonly columns?: number } = {}
): Mounted => {
  const store = "set" in ui ? ui : makeStore(ui)
  const actions = spyActions()
  const tree = <App store={store} actions={actions} theme={makeTheme(options.colors ?? false)} />
  if (options.columns === undefined) {
    const r = render(tree)
    return {
      store,
      actions,
      raw: () => r.lastFrame() ?? "",
      frame: () => plain(r.lastFrame() ?? ""),
      frames: () => r.frames.length,
      write: (data) => r.stdin.write(data),
      unmount: () => {
        r.unmount()
        r.cleanup()
      }
    }
  }
  const stdout = new FakeStdout(options.columns)
  const stdin = new FakeStdin()
  const instance = inkRender(tree, {
    stdout: stdout as unknown as NodeJS.WriteStream,
    stderr: new FakeStdout(options.columns) as unknown as NodeJS.WriteStream,
    stdin: stdin as unknown as NodeJS.ReadStream,
    debug: true,
    exitOnCtrlC: false,
    patchConsole: false
  })
  return {
    store,
    actions,
    raw: () => stdout.last,
    frame: () => plain(stdout.last),
    frames: () => stdout.count,
    write: (data) => stdin.write(data),
    unmount: () => {
      instance.unmount()
      instance.cleanup()
    }
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

/**
 * Lets the screen settle after a key: Ink hands a key to the handler of the last committed render,
 * and re-subscribes the handler in an effect, so the next key must wait for it. A turn of the
 * event loop (`setImmediate`, twice: the scheduler's effects, then Ink's pending-escape flush).
 */
export const settle = async (): Promise<void> => {
  for (let i = 0; i < 3; i++) await new Promise<void>((resolve) => setImmediate(resolve))
}

/** Writes keys, one write each, letting the screen settle after each. */
export const press = async (m: Mounted, ...keys: ReadonlyArray<string>): Promise<void> => {
  for (const key of keys) {
    m.write(key)
    await settle()
  }
}

/** Waits (polling, bounded by vitest's timeout) until the frame satisfies `check`. */
export const untilFrame = async (m: Mounted, check: (frame: string) => boolean, what: string): Promise<string> => {
  await vi.waitFor(
    () => {
      if (!check(m.frame())) throw new Error(`the frame never showed ${what}:\n${m.frame()}`)
    },
    { timeout: 10_000, interval: 5 }
  )
  return m.frame()
}

export const untilShown = (m: Mounted, text: string): Promise<string> =>
  untilFrame(m, (frame) => frame.includes(text), JSON.stringify(text))

/**
 * The screen's clock (elapsed times, countdowns: `Date.now()`), fixed at `at` until `set` moves it.
 * Only `Date.now` is replaced: vitest's fake timers would also move it on every `vi.waitFor` poll.
 */
export const fixClock = (at: number): { readonly set: (ms: number) => void } => {
  let now = at
  vi.spyOn(Date, "now").mockImplementation(() => now)
  return {
    set: (ms) => {
      now = ms
    }
  }
}

/** Runs `f` with chalk at `level` (Ink colours through chalk, which sees no terminal under vitest). */
export const withChalkLevel = async <A,>(level: 0 | 1 | 2 | 3, f: () => A | Promise<A>): Promise<A> => {
  const before = chalk.level
  chalk.level = level
  try {
    return await f()
  } finally {
    chalk.level = before
  }
}

export const keys = {
  enter: "\r",
  altEnter: "\u001b\r",
  tab: "\t",
  ctrlJ: "\n",
  ctrlC: "\u0003",
  ctrlD: "\u0004",
  ctrlO: "\u000f",
  ctrlU: "\u0015",
  ctrlW: "\u0017",
  escape: "\u001b",
  up: "\u001b[A",
  down: "\u001b[B",
  right: "\u001b[C",
  left: "\u001b[D",
  backspace: "\u007f",
  paste: (text: string) => `\u001b[200~${text}\u001b[201~`
} as const
