/**
 * The CLI's terminal rendering: ANSI styles, tables, and a console that strips styles where they
 * must not go (the text formatting itself is in src/present/text.ts).
 *
 * Color is used only when stdout is a TTY and `NO_COLOR` is not set (https://no-color.org);
 * `FORCE_COLOR` (non-empty, not `0`) turns it on for pipes. `NO_COLOR` wins over `FORCE_COLOR`.
 */
import { Config, Console, Effect, Option } from "effect"
import { padEnd, stripAnsi, visibleWidth } from "../present/text.js"

// ---------------------------------------------------------------------------------------------
// styles

export interface Style {
  readonly enabled: boolean
  readonly bold: (text: string) => string
  readonly dim: (text: string) => string
  readonly italic: (text: string) => string
  /** foreground and background swapped: a selected choice */
  readonly inverse: (text: string) => string
  readonly red: (text: string) => string
  readonly green: (text: string) => string
  readonly yellow: (text: string) => string
  readonly blue: (text: string) => string
  readonly magenta: (text: string) => string
  readonly cyan: (text: string) => string
}

const sgr =
  (open: number, close: number) =>
  (text: string): string =>
    `\u001b[${open}m${text}\u001b[${close}m`
const plainText = (text: string): string => text

export const makeStyle = (enabled: boolean): Style =>
  enabled
    ? {
        enabled,
        bold: sgr(1, 22),
        dim: sgr(2, 22),
        italic: sgr(3, 23),
        inverse: sgr(7, 27),
        red: sgr(31, 39),
        green: sgr(32, 39),
        yellow: sgr(33, 39),
        blue: sgr(34, 39),
        magenta: sgr(35, 39),
        cyan: sgr(36, 39)
      }
    : {
        enabled,
        bold: plainText,
        dim: plainText,
        italic: plainText,
        inverse: plainText,
        red: plainText,
        green: plainText,
        yellow: plainText,
        blue: plainText,
        magenta: plainText,
        cyan: plainText
      }

/** Decides whether to color, from the environment and whether `isTTY` (stdout) is a terminal. */
export const colorEnabled = (options: {
  readonly isTTY: boolean
  readonly noColor: string | undefined
  readonly forceColor: string | undefined
}): boolean => {
  if (options.noColor !== undefined && options.noColor !== "") return false
  if (options.forceColor !== undefined && options.forceColor !== "" && options.forceColor !== "0") return true
  return options.isTTY
}

const envVar = (name: string) =>
  Config.string(name).pipe(
    Config.option,
    Config.map(Option.getOrUndefined),
    Effect.orElseSucceed(() => undefined)
  )

/** The style for stdout of this process. */
/** The style of what is written to `stream`: colour on a terminal, unless `NO_COLOR` (or with `FORCE_COLOR`). */
export const streamStyle = (stream: NodeJS.WriteStream): Effect.Effect<Style> =>
  Effect.gen(function* () {
    const noColor = yield* envVar("NO_COLOR")
    const forceColor = yield* envVar("FORCE_COLOR")
    const isTTY = yield* Effect.sync(() => stream.isTTY === true)
    return makeStyle(colorEnabled({ isTTY, noColor, forceColor }))
  })

export const stdoutStyle: Effect.Effect<Style> = Effect.suspend(() => streamStyle(process.stdout))

/**
 * A plain table: one header row, columns separated by two spaces, the last column not padded.
 */
export const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>, style: Style) => {
  const widths = header.map((h, i) => Math.max(visibleWidth(h), ...rows.map((row) => visibleWidth(row[i] ?? ""))))
  const line = (cells: ReadonlyArray<string>) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : padEnd(cell, widths[i]!)))
      .join("  ")
      .trimEnd()
  return [style.bold(line(header)), ...rows.map(line)]
}

// ---------------------------------------------------------------------------------------------
// console

const stripArgs = (args: ReadonlyArray<unknown>): Array<unknown> =>
  args.map((arg) => (typeof arg === "string" ? stripAnsi(arg) : arg))

/**
 * A Console that removes ANSI styles from what goes to stdout (`log`, `info`, `debug`) and/or
 * stderr (`error`, `warn`): @effect/cli always styles its help and errors, and those must be plain
 * text in a pipe or with NO_COLOR.
 */
export const plainConsole = (
  current: Console.Console,
  options: { readonly stdout: boolean; readonly stderr: boolean }
): Console.Console => {
  const out =
    (f: (...args: ReadonlyArray<unknown>) => Effect.Effect<void>, strip: boolean) =>
    (...args: ReadonlyArray<unknown>) =>
      f(...(strip ? stripArgs(args) : args))
  const unsafeOut =
    (f: (...args: ReadonlyArray<unknown>) => void, strip: boolean) =>
    (...args: ReadonlyArray<unknown>) =>
      f(...(strip ? stripArgs(args) : args))
  return {
    ...current,
    log: out(current.log.bind(current), options.stdout),
    info: out(current.info.bind(current), options.stdout),
    debug: out(current.debug.bind(current), options.stdout),
    error: out(current.error.bind(current), options.stderr),
    warn: out(current.warn.bind(current), options.stderr),
    unsafe: {
      ...current.unsafe,
      log: unsafeOut(current.unsafe.log.bind(current.unsafe), options.stdout),
      info: unsafeOut(current.unsafe.info.bind(current.unsafe), options.stdout),
      debug: unsafeOut(current.unsafe.debug.bind(current.unsafe), options.stdout),
      error: unsafeOut(current.unsafe.error.bind(current.unsafe), options.stderr),
      warn: unsafeOut(current.unsafe.warn.bind(current.unsafe), options.stderr)
    }
  }
}

/** Runs `effect` with ANSI styles removed from stdout / stderr where those must be plain. */
export const withTerminalAwareConsole = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.gen(function* () {
    const noColor = yield* envVar("NO_COLOR")
    const forceColor = yield* envVar("FORCE_COLOR")
    const stdout = colorEnabled({ isTTY: process.stdout.isTTY === true, noColor, forceColor })
    const stderr = colorEnabled({ isTTY: process.stderr.isTTY === true, noColor, forceColor })
    if (stdout && stderr) return yield* effect
    return yield* Console.consoleWith((current) =>
      Effect.withConsole(effect, plainConsole(current, { stdout: !stdout, stderr: !stderr }))
    )
  })
