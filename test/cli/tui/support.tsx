/**
 * The screen's tests: the scripted logs of `scripted.ts`, and the screen rendered with
 * ink-testing-library from a fake `UiStore` with spy `Actions`; keys, waits, colours, the clock.
 */
import chalk from "chalk"
import { render as inkRender } from "ink"
import { render } from "ink-testing-library"
import { vi } from "vitest"
import { type Actions, App, type UiState } from "../../../src/cli/tui/App.js"
import { makeTheme } from "../../../src/cli/tui/theme.js"
import { FakeStdin, FakeStdout, makeStore, type TestStore } from "./scripted.js"

export * from "./scripted.js"

export const spyActions = () => ({
  submit: vi.fn<Actions["submit"]>(),
  editPending: vi.fn<Actions["editPending"]>(),
  sendPending: vi.fn<Actions["sendPending"]>(),
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

/**
 * Lets the screen settle after a write: React renders what a key did in a microtask, runs the
 * effects that subscribe the new handler later (its scheduler), and Ink flushes a lone ESC (the
 * Esc key) on `setImmediate`. Three turns of the event loop; the tests then wait for the frame to
 * show the key's effect (`untilFrame`), so this is only a courtesy to the next key, not a sleep.
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
