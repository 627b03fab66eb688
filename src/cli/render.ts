/**
 * Plain-text rendering helpers for the CLI: local time, durations, truncation, tables and ANSI
 * styles. Storage is UTC epoch ms (DESIGN §2); only this module turns times into local time.
 *
 * Color is used only when stdout is a TTY and `NO_COLOR` is not set (https://no-color.org);
 * `FORCE_COLOR` (non-empty, not `0`) turns it on for pipes. `NO_COLOR` wins over `FORCE_COLOR`.
 */
import { Config, Console, Effect, Option } from "effect"

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

const ansiPattern = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, "g")

/** The text without ANSI styles. */
export const stripAnsi = (text: string): string => text.replace(ansiPattern, "")

/** Display width: code points without ANSI styles (wide characters count as one). */
export const visibleWidth = (text: string): number => Array.from(stripAnsi(text)).length

// ---------------------------------------------------------------------------------------------
// time

const pad2 = (n: number): string => String(n).padStart(2, "0")
const pad3 = (n: number): string => String(n).padStart(3, "0")

/** `YYYY-MM-DD HH:MM:SS` in the local time zone (TZ). */
export const formatLocalTime = (epochMs: number): string => {
  const d = new Date(epochMs)
  return (
    `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())} ` +
    `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`
  )
}

/** `HH:MM:SS.mmm` in the local time zone, for event lines. */
export const formatLocalClock = (epochMs: number): string => {
  const d = new Date(epochMs)
  return `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}.${pad3(d.getMilliseconds())}`
}

/** `YYYY-MM-DD HH:MM:SS.mmm` in the local time zone. */
export const formatLocalTimestamp = (epochMs: number): string => {
  const d = new Date(epochMs)
  return `${formatLocalTime(epochMs)}.${pad3(d.getMilliseconds())}`
}

/**
 * A duration for people: `850ms`, `1.2s`, `12.3s`, `2m05s`, `1h02m`. Negative or non-finite
 * values (a clock that went back) are shown as `0ms`.
 */
export const formatDuration = (ms: number): string => {
  if (!Number.isFinite(ms) || ms < 0) return "0ms"
  if (ms < 1000) return `${Math.round(ms)}ms`
  if (ms < 60_000) {
    const s = ms / 1000
    return `${s < 10 ? s.toFixed(1) : Math.round(s).toString()}s`
  }
  const totalSeconds = Math.round(ms / 1000)
  if (totalSeconds < 3600) return `${Math.floor(totalSeconds / 60)}m${pad2(totalSeconds % 60)}s`
  const totalMinutes = Math.round(ms / 60_000)
  return `${Math.floor(totalMinutes / 60)}h${pad2(totalMinutes % 60)}m`
}

// ---------------------------------------------------------------------------------------------
// text

/** Newlines and tabs shown as `⏎` and spaces, so the text fits on one line. */
export const oneLine = (text: string): string => text.replace(/\r?\n/g, "⏎").replace(/[\t\r]/g, " ")

/**
 * At most `max` code points; a cut text ends with `…` and the number of characters left out.
 */
export const truncate = (text: string, max: number): string => {
  const chars = Array.from(text)
  if (chars.length <= max) return text
  const omitted = chars.length - max
  return `${chars.slice(0, max).join("")}… (+${omitted} chars)`
}

/** At most `maxLines` lines, each cut to `maxWidth`; says how many lines were left out. */
export const truncateLines = (text: string, maxLines: number, maxWidth: number): Array<string> => {
  const lines = text.replace(/\r\n/g, "\n").replace(/\n$/, "").split("\n")
  const shown = lines.slice(0, maxLines).map((line) => truncate(line.replace(/\t/g, "  "), maxWidth))
  if (lines.length > maxLines) shown.push(`… (+${lines.length - maxLines} more lines)`)
  return shown
}

/** A compact JSON rendering of any value, cut to `max` characters. */
export const compactJson = (value: unknown, max: number): string => {
  let text: string
  try {
    text = JSON.stringify(value) ?? String(value)
  } catch {
    text = String(value)
  }
  return truncate(text, max)
}

/** A string shown in double quotes on one line, cut to `max` characters. */
export const quoted = (text: string, max: number): string => JSON.stringify(truncate(text, max))

/** Whole numbers with thousands separators (`12,345`). */
export const formatCount = (n: number): string => Math.round(n).toLocaleString("en-US")

/** US dollars: `$0`, `$0.0123`, `$1.25`. */
export const formatCost = (usd: number): string =>
  usd === 0 ? "$0" : usd >= 1 ? `$${usd.toFixed(2)}` : `$${usd.toFixed(4)}`

/**
 * The cost of a usage (`Usage.cost`, `Usage.costKnown`): `$0.0123` when it is known (`$0` too: a
 * free model), `unknown` when nothing of it was priced, `≥ $0.0123 (partly unpriced)` when only
 * some of it was (then the figure is a lower bound).
 */
export const formatUsageCost = (usage: { readonly cost: number; readonly costKnown?: boolean | undefined }): string =>
  usage.costKnown !== false
    ? formatCost(usage.cost)
    : usage.cost > 0
      ? `≥ ${formatCost(usage.cost)} (partly unpriced)`
      : "unknown"

/** Pads to a display width (ANSI styles do not count). */
export const padEnd = (text: string, width: number): string =>
  text + " ".repeat(Math.max(0, width - visibleWidth(text)))

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
