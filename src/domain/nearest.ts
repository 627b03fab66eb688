/**
 * How far apart two short names are, for "did you mean" suggestions (a mistyped command, config key
 * or file name). Pure functions over strings.
 */

/**
 * Edit distance between two short strings, case-insensitive: insertions, deletions, substitutions
 * and swaps of two neighbouring characters each count one (the optimal string alignment distance),
 * so `sessoins` is one edit from `sessions`, as `sesions` is.
 */
export const editDistance = (a: string, b: string): number => {
  const x = a.toLowerCase()
  const y = b.toLowerCase()
  // three rows: the one before the previous is needed for a swap
  let before: Array<number> = []
  let previous = Array.from({ length: y.length + 1 }, (_, j) => j)
  for (let i = 1; i <= x.length; i++) {
    const current = [i]
    for (let j = 1; j <= y.length; j++) {
      const cost = x[i - 1] === y[j - 1] ? 0 : 1
      let best = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost)
      if (i > 1 && j > 1 && x[i - 1] === y[j - 2] && x[i - 2] === y[j - 1]) best = Math.min(best, before[j - 2]! + 1)
      current.push(best)
    }
    before = previous
    previous = current
  }
  return previous[y.length]!
}

/**
 * The candidate nearest to `word` when it is at most `maxDistance` edits away (and not `word`
 * itself), else `undefined`; ties go to the first candidate.
 */
export const nearest = (
  word: string,
  candidates: Iterable<string>,
  maxDistance: number
): { readonly name: string; readonly distance: number } | undefined => {
  let best: { readonly name: string; readonly distance: number } | undefined
  for (const name of candidates) {
    const distance = editDistance(word, name)
    if (distance <= maxDistance && (best === undefined || distance < best.distance)) best = { name, distance }
  }
  return best
}
