/**
 * Session files of any size, grown from a real one: the events of a session's first turn (every
 * event after `session.created`) are written again and again with fresh ids and seqs, so a file of a
 * million events reads like a long session of the same turn (model steps, a `read`, a `bash` with
 * its workspace snapshots and output blob). `logbook import` turns it into a database.
 *
 * Every UUID of the turn (events, messages, turns, actions, process tokens) and every provider call
 * id (`"call_…"`) gets a new value per copy; the session id, the blobs and `prompt.recorded` (kept
 * once: a prompt is recorded when it changes) stay as they are.
 */
import * as fs from "node:fs"

export interface SessionTemplate {
  readonly sessionId: string
  /** `session.created` */
  readonly first: Record<string, unknown>
  /** the turn, as stored lines (without seq and id rewritten yet) */
  readonly turn: ReadonlyArray<string>
  /** the blob lines, as in the file */
  readonly blobs: ReadonlyArray<string>
}

interface FileHeader {
  readonly sessionId: string
  readonly events: number
  readonly blobs: number
}

/** Reads an exported session file (`logbook export`) as the template of a big one. */
export const readTemplate = (file: string): SessionTemplate => {
  const lines = fs.readFileSync(file, "utf8").trimEnd().split("\n")
  const header = JSON.parse(lines[0]!) as FileHeader
  const events = lines.slice(1, 1 + header.events)
  const first = JSON.parse(events[0]!) as Record<string, unknown>
  if (first.type !== "session.created") throw new Error(`${file}: the first event is ${String(first.type)}`)
  return { sessionId: header.sessionId, first, turn: events.slice(1), blobs: lines.slice(1 + header.events) }
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g
const CALL_ID = /"(call_[A-Za-z0-9_]+)"/g

/** A UUID of copy `copy` for the template's `k`-th distinct one (v7-shaped, unique per pair). */
const copyUuid = (copy: number, k: number): string => {
  const c = copy.toString(16).padStart(12, "0")
  return `0196${k.toString(16).padStart(4, "0")}-0000-7000-8000-${c}`
}

/**
 * Writes a session file of `events` events (at least the template's turn plus one) grown from
 * `template`: `session.created`, then copies of the turn (the last one cut short when `events`
 * falls inside it — its seqs are still whole and valid), then the blobs.
 */
export const writeBigSession = (
  template: SessionTemplate,
  file: string,
  events: number
): { readonly bytes: number; readonly copies: number } => {
  const fd = fs.openSync(file, "w")
  let buffer: Array<string> = []
  let buffered = 0
  const write = (line: string) => {
    buffer.push(line, "\n")
    buffered += line.length + 1
    if (buffered > 1 << 20) flush()
  }
  const flush = () => {
    fs.writeSync(fd, buffer.join(""))
    buffer = []
    buffered = 0
  }
  try {
    write(
      JSON.stringify({
        format: "logbook-session",
        version: 1,
        sessionId: template.sessionId,
        events,
        blobs: template.blobs.length
      })
    )
    write(JSON.stringify(template.first))
    const startAt = template.first.at as number
    let seq = 1
    let copy = 0
    for (; seq < events; copy++) {
      const uuids = new Map<string, string>([[template.sessionId, template.sessionId]])
      for (const line of template.turn) {
        if (seq >= events) break
        if (copy > 0 && line.includes('"type":"prompt.recorded"')) continue
        const event = JSON.parse(
          line
            .replace(UUID, (uuid) => {
              let mapped = uuids.get(uuid)
              if (mapped === undefined) {
                mapped = copyUuid(copy, uuids.size)
                uuids.set(uuid, mapped)
              }
              return mapped
            })
            .replace(CALL_ID, (_, id: string) => `"${id}_${copy}"`)
        ) as Record<string, unknown>
        seq += 1
        event.seq = seq
        event.at = startAt + seq
        write(JSON.stringify(event))
      }
    }
    for (const blob of template.blobs) write(blob)
    flush()
    return { bytes: fs.fstatSync(fd).size, copies: copy }
  } finally {
    fs.closeSync(fd)
  }
}
