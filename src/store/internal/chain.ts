/**
 * The hash chain of a session's events (docs/event-log.md "The hash chain"): each row carries the
 * SHA-256 of its canonical bytes, which include the previous row's hash (seq 1: the session's
 * genesis value). Pure functions: the SQLite and memory backends compute hashes with them inside
 * their commit, `Verify` recomputes them, and a third party can do the same with sqlite3 and
 * sha256sum.
 *
 * Canonical bytes of an event (UTF-8, every line ending in LF, the payload last):
 *
 * ```
 * logbook-event-v1
 * <prev hash: 64 lowercase hex digits>
 * <session id>
 * <seq, decimal>
 * <event id>
 * <type>
 * <at, decimal UTC ms>
 * <parent id, or nothing>
 * <v, decimal>
 * <payload: the stored JSON text>
 * ```
 *
 * Genesis of a session: the SHA-256 of `logbook-genesis-v1\n<session id>\n`.
 */
import { hash } from "node:crypto"

/** The fields of a row the hash covers. */
export interface ChainedFields {
  readonly sessionId: string
  readonly seq: number
  readonly id: string
  readonly type: string
  readonly at: number
  readonly parentId: string | null
  readonly v: number
  /** the payload as stored (JSON text) */
  readonly json: string
}

/** The `prev_hash` of a session's seq 1: the SHA-256 of `logbook-genesis-v1\n<session id>\n`. */
export const genesisHash = (sessionId: string): string => hash("sha256", `logbook-genesis-v1\n${sessionId}\n`, "hex")

/** The canonical bytes of a row (as text), chained to `prev`. */
export const canonicalText = (prev: string, row: ChainedFields): string =>
  `logbook-event-v1\n${prev}\n${row.sessionId}\n${row.seq}\n${row.id}\n${row.type}\n${row.at}\n${row.parentId ?? ""}\n${row.v}\n${row.json}\n`

/** The hash of a row chained to `prev`: lowercase hex SHA-256 of its canonical bytes. */
export const eventHash = (prev: string, row: ChainedFields): string => hash("sha256", canonicalText(prev, row), "hex")
