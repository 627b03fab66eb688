/**
 * Plain-text formatting shared by what logbook shows (the CLI, the terminal screen, the HTML
 * export): local time, durations, counts, costs, truncation, display width. Pure functions, no
 * terminal: storage is UTC epoch ms (DESIGN §2); only this module turns times into local time.
 */

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

/**
 * `3 steps`, `0 steps (2 attempts cut)`: the model steps that went through, and the attempts a
 * retry or an interrupt cut — what `run`, `sessions show` and `stats` call steps (docs/stats.md).
 */
export const formatSteps = (steps: number, cut = 0): string =>
  `${formatCount(steps)} step${steps === 1 ? "" : "s"}${cut > 0 ? ` (${formatCount(cut)} attempt${cut === 1 ? "" : "s"} cut)` : ""}`

/**
 * Whole numbers with thousands separators (`12,345`, `-1,234`). Not `toLocaleString`: its first call
 * in a process loads the ICU number data, which slows the start, and every `run` prints a count.
 */
export const formatCount = (n: number): string => {
  const whole = Math.round(n)
  // NaN, infinities and integers beyond 2^53 are rare enough for the slow path
  if (!Number.isSafeInteger(whole)) return whole.toLocaleString("en-US")
  const digits = String(Math.abs(whole))
  const groups: Array<string> = []
  for (let end = digits.length; end > 0; end -= 3) groups.unshift(digits.slice(Math.max(0, end - 3), end))
  return `${whole < 0 ? "-" : ""}${groups.join(",")}`
}

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
