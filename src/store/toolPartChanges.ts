/**
 * Which calls' tool parts a fold changed: for the history (session/History.ts), which is rebuilt
 * before every request and wants to know, without looking at each of them, that the tool parts of a
 * turn's earlier steps are still the ones it built their messages from.
 *
 * Each tool-parts map a fold makes (the copy it changes, Projection.ts) gets a serial number and a
 * record of the map it was copied from and the calls it set. `changedSince(now, then)` follows the
 * records back from `now` to the map numbered `then` and gives the calls set on the way, or
 * `undefined` when it cannot tell: `then` is not an ancestor of `now` (another branch of folds), a
 * map was not made by a fold (decoded from a snapshot, built by hand), or the way is longer than
 * the records kept. `undefined` means "check each part", never "nothing changed".
 *
 * The records hold no maps (a map's record is found by the map, weakly; the one before by its
 * serial, in a ring of the last `KEPT` records), so nothing of an old state is kept alive by them.
 */
import type { CallId } from "../domain/Ids.js"
import type { ToolPart } from "../domain/Message.js"

type ToolParts = ReadonlyMap<CallId, ToolPart>

interface Record {
  readonly serial: number
  /** the serial of the map this one was copied from (-1: not made by a fold) */
  readonly base: number
  readonly calls: Set<CallId>
}

/** About 7 maps a step, for every session of the process: a few dozen steps' worth. */
const KEPT = 1024
/** The farthest back a lookup goes (the history is rebuilt once a step). */
const MAX_HOPS = 256

const records = new WeakMap<ToolParts, Record>()
const ring: Array<Record | undefined> = new Array(KEPT)
let next = 0

/** `copy` was copied from `base` by a fold, which will change it (`changed`). */
export const copied = (copy: ToolParts, base: ToolParts): void => {
  const record: Record = { serial: next++, base: records.get(base)?.serial ?? -1, calls: new Set() }
  records.set(copy, record)
  ring[record.serial % KEPT] = record
}

/** A fold set `callId` in `map` (a copy it made: see `copied`). */
export const changed = (map: ToolParts, callId: CallId): void => {
  records.get(map)?.calls.add(callId)
}

/** The serial number of `map`, for `changedSince` (undefined: not made by a fold). */
export const serialOf = (map: ToolParts): number | undefined => records.get(map)?.serial

/** The calls set in the folds from the map numbered `then` to `now`; `undefined` when that is not known. */
export const changedSince = (now: ToolParts, then: number): ReadonlySet<CallId> | undefined => {
  let record = records.get(now)
  if (record === undefined) return undefined
  const calls = new Set<CallId>()
  for (let hops = 0; hops < MAX_HOPS; hops++) {
    if (record.serial === then) return calls
    if (record.serial < then || record.base < 0) return undefined
    for (const callId of record.calls) calls.add(callId)
    const before: Record | undefined = ring[record.base % KEPT]
    if (before === undefined || before.serial !== record.base) return undefined
    record = before
  }
  return undefined
}
