/** Small helpers shared by the benchmarks. */
import * as fs from "node:fs"

export const now = (): number => performance.now()

export const median = (xs: ReadonlyArray<number>): number => {
  const sorted = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** The `p`th percentile (0–100) by the nearest-rank method: the smallest value with at least p% of them at or below it. */
export const percentile = (xs: ReadonlyArray<number>, p: number): number => {
  const sorted = [...xs].sort((a, b) => a - b)
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length))
  return sorted[rank - 1]!
}

/** A full GC before a timed run when node runs with `--expose-gc` (as `npm run bench` does). */
export const gc = (): void => {
  ;(globalThis as { gc?: () => void }).gc?.()
}

/** Bytes of a SQLite database with its WAL. */
export const fileSize = (file: string): number => {
  let total = 0
  for (const f of [file, `${file}-wal`]) {
    try {
      total += fs.statSync(f).size
    } catch {
      // no WAL
    }
  }
  return total
}
