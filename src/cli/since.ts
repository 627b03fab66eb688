/**
 * `--since <when>`: a date (`2026-11-30`, local midnight), a local date and time
 * (`2026-11-30T14:00`, `2026-11-30 14:00:05`), an ISO time with a zone (`…Z`, `…+01:00`), or a
 * time ago (`90m`, `12h`, `7d`, `2w`).
 */
import { Either } from "effect"

const UNITS: Readonly<Record<string, number>> = { m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }

/** The time `text` means (UTC ms), or why it means none. `now` is the time the relative forms count back from. */
export const parseSince = (text: string, now: number): Either.Either<number, string> => {
  const value = text.trim()
  const ago = /^(\d{1,6})\s*([mhdw])$/i.exec(value)
  if (ago !== null) return Either.right(now - Number(ago[1]) * UNITS[ago[2]!.toLowerCase()]!)
  const local = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}))?)?$/.exec(value)
  if (local !== null) {
    const [year, month, day, hours = "0", minutes = "0", seconds = "0"] = local.slice(1)
    const date = new Date(Number(year), Number(month) - 1, Number(day), Number(hours), Number(minutes), Number(seconds))
    // Date rolls 2026-02-31 over to March: such a date is refused
    if (date.getFullYear() === Number(year) && date.getMonth() === Number(month) - 1 && date.getDate() === Number(day))
      return Either.right(date.getTime())
    return Either.left(`${JSON.stringify(text)} is not a date of the calendar`)
  }
  if (/^\d{4}-\d{2}-\d{2}T.*(?:Z|[+-]\d{2}:?\d{2})$/.test(value)) {
    const ms = Date.parse(value)
    if (Number.isFinite(ms)) return Either.right(ms)
  }
  return Either.left(
    `${JSON.stringify(text)} is not a time; give a date (2026-11-30), a date and time (2026-11-30T14:00) ` +
      "or a time ago (90m, 12h, 7d, 2w)"
  )
}
