/**
 * Short session ids, abbreviated the way git abbreviates hashes: at least `SHORT_ID_MIN`
 * characters, and longer until no other session's id starts with the same characters. Prefixes
 * are compared as `resolveSession` matches them (ignoring case), and among every session of the
 * database, deleted ones too, so a printed short id always names exactly one session.
 *
 * logbook's ids are UUIDv7, which begin with the time: the first 8 characters are the same for
 * sessions created within about a minute of each other (2^16 ms), and the next ones tell them
 * apart. An abbreviation never ends with the `-` of the id (it takes the next character too), and
 * an id that is a prefix of another is shown in full (the full id is matched exactly first).
 */

export const SHORT_ID_MIN = 8

const commonPrefix = (a: string, b: string): number => {
  const n = Math.min(a.length, b.length)
  let i = 0
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++
  return i
}

/** The shortest unique prefix (of at least `min` characters) of every id in `ids`. */
export const shortIds = (ids: Iterable<string>, min: number = SHORT_ID_MIN): ReadonlyMap<string, string> => {
  const unique = Array.from(new Set(ids))
  const keyed = unique.map((id) => ({ id, key: id.toLowerCase() }))
  keyed.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  const out = new Map<string, string>()
  for (let i = 0; i < keyed.length; i++) {
    const { id, key } = keyed[i]!
    // in sorted order, the ids sharing the longest prefix with this one are its neighbours
    const shared = Math.max(
      i > 0 ? commonPrefix(keyed[i - 1]!.key, key) : 0,
      i + 1 < keyed.length ? commonPrefix(keyed[i + 1]!.key, key) : 0
    )
    let length = Math.max(min, shared + 1)
    while (length < id.length && id[length - 1] === "-") length++
    out.set(id, length >= id.length ? id : id.slice(0, length))
  }
  return out
}
