/**
 * One session as a file (`logbook export` / `logbook import`, docs/event-log.md "Session files"):
 * JSON Lines, deterministic, written and checked here.
 *
 * ```
 * {"format":"logbook-session","version":1,"sessionId":"…","events":N,"blobs":M}
 * {"id":"…","sessionId":"…","seq":1,"type":"session.created","at":…,"parentId":null,"v":1,"payload":{…}}
 * …                                              (N envelopes, seq 1..N, as `logbook events --format json`)
 * {"blob":"<sha-256>","size":123,"base64":"…"}   (M blobs: the events' references, then what their manifests name)
 * ```
 *
 * `exportSession` streams the lines of a session (up to its last seq when the export starts);
 * `sessionFileItems` checks a file line by line — the header, every envelope against its event
 * Schema and the projection, seqs gapless from 1, one session, each blob's hash and size, every
 * referenced blob present, nothing else — failing with a `SessionFileError` that names the line;
 * `importSession` writes its items as they come, in one transaction (`EventStore.importStream`). Every line and
 * blob is bounded (`SessionFileLimits`), on both sides, so what one logbook exports another imports.
 */
import { Chunk, Effect, Either, Option, ParseResult, Schema, Stream } from "effect"
import { decodeEnvelope, type Envelope, EnvelopeHeader, type RawEnvelope } from "../domain/Events.js"
import { SessionId } from "../domain/Ids.js"
import { EventStoreError } from "./Errors.js"
import { EventStore, type ImportedEvent, type ImportItem, type SessionSummary } from "./EventStore.js"
import { hashContent, repeatedEvent } from "./internal/storeService.js"
import * as Projection from "./Projection.js"

/** The `format` of a session file's header. */
export const FORMAT = "logbook-session"
/** The version of the session file format this logbook writes and reads. */
export const FORMAT_VERSION = 1

export interface SessionFileLimits {
  /** the most bytes of one envelope's line (its JSON, without the newline) */
  readonly maxEventBytes: number
  /** the most bytes of one blob (decoded); its line holds them as base64 */
  readonly maxBlobBytes: number
  /** the most bytes of a whole file one import reads */
  readonly maxFileBytes: number
  /** the deepest nesting of arrays and objects in one line's JSON (the line itself is level 1) */
  readonly maxDepth: number
}

export const DEFAULT_LIMITS: SessionFileLimits = {
  maxEventBytes: 16 * 1024 * 1024,
  // a command's whole output is kept up to 16 MiB (tools/bash.ts FULL_OUTPUT_BYTES); files may be larger
  maxBlobBytes: 64 * 1024 * 1024,
  maxFileBytes: 1024 * 1024 * 1024,
  // deep enough for any payload logbook writes; the recursive JSON and Schema code after the check is not bounded
  maxDepth: 256
}

/**
 * The first place a JSON text nests arrays and objects deeper than `max`, as the depth reached
 * there; undefined when it does not (scanned without recursion, strings skipped).
 */
export const nestingOver = (text: string, max: number): number | undefined => {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 92)
        i++ // a backslash: the next character is escaped
      else if (c === 34) inString = false
    } else if (c === 34) inString = true
    else if (c === 91 || c === 123) {
      if (++depth > max) return depth
    } else if (c === 93 || c === 125) depth--
  }
  return undefined
}

const mib = (bytes: number): string =>
  bytes >= 1024 * 1024 ? `${Math.round((bytes / 1024 / 1024) * 10) / 10} MiB` : `${bytes} bytes`

/** The longest line a blob of `maxBlobBytes` can take: base64 plus the JSON around it. */
const blobLineBytes = (maxBlobBytes: number): number => 4 * Math.ceil(maxBlobBytes / 3) + 256

/** Something wrong with a session file (or a session that cannot be written as one): where, and what. */
export class SessionFileError extends Schema.TaggedError<SessionFileError>()("SessionFileError", {
  /** the 1-based line of the file; 0 when the error is not about one line */
  line: Schema.Number,
  message: Schema.String
}) {}

const lineError = (line: number, message: string) => new SessionFileError({ line, message: `line ${line}: ${message}` })

// ---------------------------------------------------------------------------------------------
// the lines

export const FileHeader = Schema.Struct({
  format: Schema.String,
  version: Schema.Int,
  sessionId: SessionId,
  events: Schema.NonNegativeInt,
  blobs: Schema.NonNegativeInt
})
export type FileHeader = typeof FileHeader.Type

const BlobLine = Schema.Struct({ blob: Schema.String, size: Schema.NonNegativeInt, base64: Schema.String })

/** The header line (without its newline). */
export const headerJson = (header: Omit<FileHeader, "format" | "version">): string =>
  JSON.stringify({
    format: FORMAT,
    version: FORMAT_VERSION,
    sessionId: header.sessionId,
    events: header.events,
    blobs: header.blobs
  })

/** A stored envelope as one JSON line, fields in the documented order (also `logbook events --format json`). */
export const envelopeJson = (e: RawEnvelope): string =>
  JSON.stringify({
    id: e.id,
    sessionId: e.sessionId,
    seq: e.seq,
    type: e.type,
    at: e.at,
    parentId: e.parentId,
    v: e.v,
    payload: e.payload
  })

/** A blob's line (without its newline). */
export const blobJson = (hash: string, content: Uint8Array): string =>
  JSON.stringify({ blob: hash, size: content.byteLength, base64: Buffer.from(content).toString("base64") })

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * The blobs an event references, in payload order: `file.changed` and `file.intent` `beforeHash` /
 * `afterHash` (except a side marked `beforeOmitted` / `afterOmitted`: its hash names content that was
 * not stored), `prompt.recorded` `blob`, a tool record's `outputBlob` (`tool.finished` / `tool.failed`
 * `metadata`: a command's whole output) and `workspace.snapshot` `manifest` (a manifest document,
 * which names blobs of its own: `manifestReferences`). A file stamp's `hash` (`reads`) names content
 * that was read, not a blob, and is not one.
 */
export const blobReferences = (e: { readonly type: string; readonly payload: unknown }): ReadonlyArray<string> => {
  const p = e.payload
  if (!isRecord(p)) return []
  const strings = (...values: ReadonlyArray<unknown>) => values.filter((v): v is string => typeof v === "string")
  switch (e.type) {
    case "file.changed":
    case "file.intent":
      return strings(
        p.beforeOmitted === undefined ? p.beforeHash : undefined,
        p.afterOmitted === undefined ? p.afterHash : undefined
      )
    case "prompt.recorded":
      return strings(p.blob)
    case "tool.finished":
    case "tool.failed":
      return isRecord(p.metadata) ? strings(p.metadata.outputBlob) : []
    case "workspace.snapshot":
      return strings(p.manifest)
    default:
      return []
  }
}

/** The blob of the event that is a workspace manifest document (`workspace.snapshot` `manifest`), if any. */
const manifestOf = (e: { readonly type: string; readonly payload: unknown }): string | undefined =>
  e.type === "workspace.snapshot" && isRecord(e.payload) && typeof e.payload.manifest === "string"
    ? e.payload.manifest
    : undefined

/**
 * What a session file needs of a workspace manifest document (docs/workspace.md): the blobs its
 * files name (`blob`: a file's content, a symlink's target; `hash` names content not stored).
 */
const ManifestBlobs = Schema.parseJson(
  Schema.Struct({
    version: Schema.Literal(1),
    files: Schema.Array(Schema.Struct({ blob: Schema.optional(Schema.String) }))
  })
)

/** The blobs a manifest document names, in its order; a sentence when it is not one. */
export const manifestReferences = (bytes: Uint8Array): Either.Either<ReadonlyArray<string>, string> => {
  let text: string
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes)
  } catch {
    return Either.left("it is not UTF-8 text")
  }
  return Schema.decodeUnknownEither(ManifestBlobs)(text).pipe(
    Either.map((doc) => doc.files.flatMap((f) => (f.blob === undefined ? [] : [f.blob]))),
    Either.mapLeft(formatIssue)
  )
}

// ---------------------------------------------------------------------------------------------
// export

export interface ExportOptions {
  readonly limits?: Partial<SessionFileLimits> | undefined
}

/**
 * The lines of a session file (each ending in a newline) for the session's events up to its last
 * seq when the export starts: the header, the envelopes exactly as stored, then the blobs they
 * reference. Two reads of the log (the counts and references first), one blob in memory at a time.
 * Fails with `SessionFileError` for a referenced blob the database does not hold, or a line over
 * the limits (which `readSessionFile` would refuse).
 */
export const exportSession = (
  sessionId: SessionId,
  options: ExportOptions = {}
): Stream.Stream<string, SessionFileError | EventStoreError, EventStore> =>
  Stream.unwrap(
    Effect.gen(function* () {
      const limits = { ...DEFAULT_LIMITS, ...options.limits }
      const store = yield* EventStore
      const lastSeq = yield* store.lastSeq(sessionId)
      // the references, in first-reference order, and the seq that first names each; then the
      // blobs the manifests among them name, manifest by manifest
      const blobs = new Map<string, number>()
      const manifests = new Set<string>()
      yield* store.readRaw(sessionId, { to: lastSeq }).pipe(
        Stream.runForEach((e) =>
          Effect.sync(() => {
            for (const hash of blobReferences(e)) if (!blobs.has(hash)) blobs.set(hash, e.seq)
            const manifest = manifestOf(e)
            if (manifest !== undefined) manifests.add(manifest)
          })
        )
      )
      for (const manifest of manifests) {
        const seq = blobs.get(manifest)!
        const found = yield* store.getBlob(manifest)
        // a missing manifest is told when its line is written
        if (Option.isNone(found)) continue
        const named = manifestReferences(found.value)
        if (Either.isLeft(named)) {
          return yield* new SessionFileError({
            line: 0,
            message: `the workspace manifest ${manifest} that event ${seq} references cannot be read (${named.left}), so the session cannot be exported whole`
          })
        }
        for (const hash of named.right) if (!blobs.has(hash)) blobs.set(hash, seq)
      }
      const header = Stream.succeed(`${headerJson({ sessionId, events: lastSeq, blobs: blobs.size })}\n`)
      const events = store.readRaw(sessionId, { to: lastSeq }).pipe(
        Stream.mapChunksEffect((chunk) =>
          Effect.suspend(() => {
            // one string per page of rows: a write per page, not per line
            let lines = ""
            for (const e of chunk) {
              const line = envelopeJson(e)
              if (nestingOver(line, limits.maxDepth) !== undefined) {
                return Effect.fail(
                  new SessionFileError({
                    line: 0,
                    message: `event ${e.seq} (${e.type}) nests arrays and objects more than ${limits.maxDepth} levels deep, more than a session file allows`
                  })
                )
              }
              if (Buffer.byteLength(line) > limits.maxEventBytes) {
                return Effect.fail(
                  new SessionFileError({
                    line: 0,
                    message: `event ${e.seq} (${e.type}) takes ${mib(Buffer.byteLength(line))} as JSON, more than a session file's limit of ${mib(limits.maxEventBytes)} per event`
                  })
                )
              }
              lines += `${line}\n`
            }
            return Effect.succeed(lines === "" ? Chunk.empty<string>() : Chunk.of(lines))
          })
        )
      )
      const blobLines = Stream.fromIterable(blobs).pipe(
        Stream.mapEffect(([hash, seq]) =>
          Effect.flatMap(store.getBlob(hash), (found) => {
            if (Option.isNone(found)) {
              return Effect.fail(
                new SessionFileError({
                  line: 0,
                  message: `the blob ${hash} that event ${seq} references is missing from the database, so the session cannot be exported whole`
                })
              )
            }
            if (found.value.byteLength > limits.maxBlobBytes) {
              return Effect.fail(
                new SessionFileError({
                  line: 0,
                  message: `the blob ${hash} that event ${seq} references holds ${mib(found.value.byteLength)}, more than a session file's limit of ${mib(limits.maxBlobBytes)} per blob`
                })
              )
            }
            return Effect.succeed(`${blobJson(hash, found.value)}\n`)
          })
        )
      )
      return Stream.concat(header, Stream.concat(events, blobLines))
    })
  )

// ---------------------------------------------------------------------------------------------
// reading and checking

/** A checked session file: what `EventStore.importSession` writes. */
export interface SessionFile {
  readonly header: FileHeader
  readonly events: ReadonlyArray<ImportedEvent>
  readonly blobs: ReadonlyArray<Uint8Array>
}

const formatIssue = (error: ParseResult.ParseError): string =>
  ParseResult.TreeFormatter.formatErrorSync(error).replace(/\s*\n\s*/g, " ")

const ENVELOPE_KEYS = ["id", "sessionId", "seq", "type", "at", "parentId", "v", "payload"]

/** Where the check of a session file stands, and what it hands to import (`emit`). */
interface Checker {
  readonly limits: SessionFileLimits
  readonly emit: (item: ImportItem) => void
  header: FileHeader | undefined
  eventCount: number
  blobCount: number
  /** blob -> the line of the event (or of the manifest's blob) that first references it */
  readonly referenced: Map<string, { readonly line: number; readonly manifest: boolean }>
  /** the blobs events reference as workspace manifests */
  readonly manifests: Set<string>
  readonly seen: Set<string>
  folder: Projection.Folder | undefined
  /** the messages the fold has released (`Folder.release`): those before this index */
  released: number
  /** the lines checked so far */
  n: number
}

/** A line's JSON, or the failure naming the line. */
const parseLine = (line: number, text: string): Either.Either<unknown, SessionFileError> => {
  try {
    return Either.right(JSON.parse(text) as unknown)
  } catch (e) {
    return Either.left(lineError(line, `not JSON (${(e as Error).message})`))
  }
}

/** The header line: a logbook session file of a version this logbook reads; starts the session and its fold. */
const checkHeader = (c: Checker, line: number, value: unknown): SessionFileError | undefined => {
  if (!isRecord(value) || value.format !== FORMAT) {
    return lineError(
      line,
      `not the header of a logbook session file (it must say "format":"${FORMAT}"; make one with logbook export)`
    )
  }
  if (typeof value.version === "number" && value.version > FORMAT_VERSION) {
    return lineError(
      line,
      `the file is of session file version ${value.version}, written by a newer logbook; this one reads version ${FORMAT_VERSION}`
    )
  }
  const decoded = Schema.decodeUnknownEither(FileHeader)(value)
  if (Either.isLeft(decoded)) return lineError(line, `the header is malformed: ${formatIssue(decoded.left)}`)
  if (decoded.right.version !== FORMAT_VERSION) {
    return lineError(
      line,
      `unknown session file version ${decoded.right.version} (this logbook reads ${FORMAT_VERSION})`
    )
  }
  c.header = decoded.right
  c.emit({ _tag: "session", sessionId: c.header.sessionId })
  c.folder = Projection.folder(Projection.empty(c.header.sessionId))
  return undefined
}

/**
 * An event line's envelope, not yet decoded by its type: an object with exactly the envelope's
 * fields, of the header's session, at the next seq.
 */
const envelopeOf = (line: number, seq: number, value: unknown, h: FileHeader): RawEnvelope | SessionFileError => {
  if (!isRecord(value)) return lineError(line, `event ${seq} is not a JSON object`)
  const extra = Object.keys(value).filter((k) => !ENVELOPE_KEYS.includes(k))
  if (extra.length > 0) return lineError(line, `event ${seq} has fields an envelope does not have: ${extra.join(", ")}`)
  if (!("payload" in value)) return lineError(line, `event ${seq} has no payload`)
  const decoded = Schema.decodeUnknownEither(EnvelopeHeader)(value)
  if (Either.isLeft(decoded)) return lineError(line, `event ${seq} is not an envelope: ${formatIssue(decoded.left)}`)
  const e = decoded.right
  if (e.sessionId !== h.sessionId) {
    return lineError(
      line,
      `event ${seq} belongs to session ${e.sessionId}, not ${h.sessionId}: a file holds one session`
    )
  }
  if (e.seq !== seq)
    return lineError(line, `expected event seq ${seq}, found seq ${e.seq} (seqs run 1, 2, 3 … without a gap)`)
  return { ...e, payload: value.payload }
}

/**
 * Folds an event into the session's projection (it must follow from the events before it) and
 * releases the messages settled so far: the fold holds their skeleton, the file is not held.
 */
const foldEvent = (c: Checker, line: number, seq: number, e: Envelope): SessionFileError | undefined => {
  const folded = c.folder!.push(e)
  if (Either.isLeft(folded)) {
    return lineError(line, `event ${seq} (${e.type}) does not follow from the events before it: ${folded.left.message}`)
  }
  const state = c.folder!.view()
  if (Either.isRight(state)) {
    const upTo = Projection.settledUpTo(state.right, c.released)
    if (upTo > c.released) {
      c.folder!.release(upTo)
      c.released = upTo
    }
  }
  return undefined
}

/**
 * An event line: its envelope checked, decoded by its type and folded, handed to import, and the
 * blobs it references noted.
 */
const checkEvent = (c: Checker, line: number, value: unknown, h: FileHeader): SessionFileError | undefined => {
  const seq = c.eventCount + 1
  const raw = envelopeOf(line, seq, value, h)
  if (raw instanceof SessionFileError) return raw
  const typed = decodeEnvelope(raw)
  if (Either.isLeft(typed)) return lineError(line, `event ${seq} (${raw.type}): ${typed.left.message}`)
  const unfolded = foldEvent(c, line, seq, typed.right)
  if (unfolded !== undefined) return unfolded
  c.eventCount++
  c.emit({
    _tag: "event",
    event: { id: raw.id, type: raw.type, at: raw.at, parentId: raw.parentId, v: raw.v, payload: raw.payload }
  })
  for (const hash of blobReferences(raw)) if (!c.referenced.has(hash)) c.referenced.set(hash, { line, manifest: false })
  const manifest = manifestOf(raw)
  if (manifest !== undefined) c.manifests.add(manifest)
  return undefined
}

/**
 * A blob line: within the limit, referenced, not seen before, valid base64 of its size and hash;
 * a workspace manifest's blobs are noted as referenced too. Handed to import.
 */
const checkBlob = (c: Checker, line: number, value: unknown): SessionFileError | undefined => {
  const decoded = Schema.decodeUnknownEither(BlobLine)(value)
  if (Either.isLeft(decoded)) return lineError(line, `not a blob line: ${formatIssue(decoded.left)}`)
  const { base64, blob, size } = decoded.right
  if (size > c.limits.maxBlobBytes) {
    return lineError(
      line,
      `the blob ${blob} holds ${mib(size)}, more than the limit of ${mib(c.limits.maxBlobBytes)} per blob`
    )
  }
  if (!c.referenced.has(blob)) return lineError(line, `the blob ${blob} is not referenced by any event of the file`)
  if (c.seen.has(blob)) return lineError(line, `the blob ${blob} appears twice`)
  const bytes = Buffer.from(base64, "base64")
  // Node's decoder skips what is not base64: a strict check is that it encodes back the same
  if (bytes.toString("base64") !== base64) return lineError(line, `the blob ${blob} is not valid base64`)
  if (bytes.byteLength !== size) {
    return lineError(line, `the blob ${blob} holds ${bytes.byteLength} bytes, but its line says ${size}`)
  }
  if (hashContent(bytes) !== blob) {
    return lineError(line, `the blob ${blob} does not match its bytes (their SHA-256 is ${hashContent(bytes)})`)
  }
  if (c.manifests.has(blob)) {
    const named = manifestReferences(bytes)
    if (Either.isLeft(named)) {
      return lineError(line, `the blob ${blob} is a workspace manifest of an event, but not a manifest: ${named.left}`)
    }
    for (const hash of named.right) if (!c.referenced.has(hash)) c.referenced.set(hash, { line, manifest: true })
  }
  c.seen.add(blob)
  c.blobCount++
  c.emit({ _tag: "blob", content: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) })
  return undefined
}

/**
 * The next line: not empty, not past what the header announces, within the size and nesting
 * limits of its kind, JSON; then checked as the header, an event or a blob by its place.
 */
const checkLine = (c: Checker, text: string): SessionFileError | undefined => {
  const line = ++c.n
  const { header, limits } = c
  if (text === "") return lineError(line, "an empty line (a session file has none)")
  if (header !== undefined && line > 1 + header.events + header.blobs) {
    return lineError(
      line,
      `the header announces ${header.events} events and ${header.blobs} blobs (${1 + header.events + header.blobs} lines), but the file goes on`
    )
  }
  const isEvent = header !== undefined && line <= 1 + header.events
  const limit = header === undefined || isEvent ? limits.maxEventBytes : blobLineBytes(limits.maxBlobBytes)
  const bytes = Buffer.byteLength(text)
  if (bytes > limit) return lineError(line, `the line holds ${mib(bytes)}, more than the limit of ${mib(limit)}`)
  if (nestingOver(text, limits.maxDepth) !== undefined) {
    return lineError(
      line,
      `its JSON nests arrays and objects more than ${limits.maxDepth} levels deep, more than a session file allows`
    )
  }
  const value = parseLine(line, text)
  if (Either.isLeft(value)) return value.left
  if (header === undefined) return checkHeader(c, line, value.right)
  return isEvent ? checkEvent(c, line, value.right, header) : checkBlob(c, line, value.right)
}

/** What only the end can tell: a header, every announced event and blob, every referenced blob present. */
const checkEnd = (c: Checker): Either.Either<FileHeader, SessionFileError> => {
  const { header, eventCount, blobCount, n } = c
  if (header === undefined) return Either.left(new SessionFileError({ line: 0, message: "the file is empty" }))
  if (eventCount < header.events) {
    return Either.left(
      lineError(n + 1, `the file ends after ${eventCount} of the ${header.events} events its header announces`)
    )
  }
  for (const [hash, { line, manifest }] of c.referenced) {
    if (!c.seen.has(hash)) {
      return Either.left(
        lineError(
          line,
          `${manifest ? "the workspace manifest" : "the event"} references the blob ${hash}, which the file does not hold`
        )
      )
    }
  }
  if (blobCount !== header.blobs) {
    return Either.left(
      lineError(n + 1, `the file ends after ${blobCount} of the ${header.blobs} blobs its header announces`)
    )
  }
  return Either.right(header)
}

/**
 * Checks the lines of a session file one by one (a state machine: header, N envelopes, M blobs),
 * keeping what import writes. `push` fails at the first wrong line; `end` checks what only the end
 * can tell (counts, missing blobs).
 */
const makeChecker = (limits: SessionFileLimits, emit: (item: ImportItem) => void) => {
  const c: Checker = {
    limits,
    emit,
    header: undefined,
    eventCount: 0,
    blobCount: 0,
    referenced: new Map(),
    manifests: new Set(),
    seen: new Set(),
    folder: undefined,
    released: 0,
    n: 0
  }
  return { push: (text: string) => checkLine(c, text), end: () => checkEnd(c) }
}

/**
 * Splits bytes into lines (UTF-8, a final newline optional), refusing a line longer than
 * `maxLine` bytes before it is held whole, and a file longer than `maxFile`: `feed` each chunk,
 * then `finish`; each hands its complete lines to `onLine` and returns the first failure.
 */
const lineSplitter = (maxLine: number, maxFile: number, onLine: (line: string) => SessionFileError | undefined) => {
  const decoder = new TextDecoder("utf-8", { fatal: true })
  let parts: Array<Buffer> = []
  let partial = 0
  let total = 0
  let lineNo = 0
  const emit = (line: Buffer): SessionFileError | undefined => {
    lineNo++
    let text: string
    try {
      text = decoder.decode(line)
    } catch {
      return lineError(lineNo, "not UTF-8 text")
    }
    return onLine(text.endsWith("\r") ? text.slice(0, -1) : text)
  }
  const tooLong = () => lineError(lineNo + 1, `the line is longer than the limit of ${mib(maxLine)}`)
  return {
    feed: (chunk: Uint8Array): SessionFileError | undefined => {
      total += chunk.byteLength
      if (total > maxFile) {
        return new SessionFileError({
          line: 0,
          message: `the file is larger than the limit of ${mib(maxFile)} for one import`
        })
      }
      let buffer = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
      while (true) {
        const nl = buffer.indexOf(10)
        if (nl < 0) break
        if (partial + nl > maxLine) return tooLong()
        const line = parts.length === 0 ? buffer.subarray(0, nl) : Buffer.concat([...parts, buffer.subarray(0, nl)])
        parts = []
        partial = 0
        const error = emit(line)
        if (error !== undefined) return error
        buffer = buffer.subarray(nl + 1)
      }
      if (buffer.byteLength > 0) {
        partial += buffer.byteLength
        if (partial > maxLine) return tooLong()
        // copied: the stream may reuse its chunk's memory
        parts.push(Buffer.from(buffer))
      }
      return undefined
    },
    finish: (): SessionFileError | undefined => {
      if (parts.length === 0) return undefined
      const line = Buffer.concat(parts)
      parts = []
      return emit(line)
    }
  }
}

/** The checked items of a file, and its header once read. */
const checkedItems = <E, R>(
  bytes: Stream.Stream<Uint8Array, E, R>,
  options: { readonly limits?: Partial<SessionFileLimits> | undefined }
) => {
  const limits = { ...DEFAULT_LIMITS, ...options.limits }
  let pending: Array<ImportItem> = []
  const checker = makeChecker(limits, (item) => pending.push(item))
  const maxLine = Math.max(limits.maxEventBytes, blobLineBytes(limits.maxBlobBytes))
  const splitter = lineSplitter(maxLine, limits.maxFileBytes, checker.push)
  let header: FileHeader | undefined
  const take = () => {
    const out = Chunk.unsafeFromArray(pending)
    pending = []
    return out
  }
  const body = Stream.mapChunksEffect(bytes, (chunks) =>
    Effect.suspend(() => {
      for (const chunk of chunks) {
        const error = splitter.feed(chunk)
        if (error !== undefined) return Effect.fail(error)
      }
      return Effect.succeed(take())
    })
  )
  const end = Stream.suspend(() => {
    const error = splitter.finish()
    if (error !== undefined) return Stream.fail(error)
    const ended = checker.end()
    if (Either.isLeft(ended)) return Stream.fail(ended.left)
    header = ended.right
    return Stream.fromChunk(take())
  })
  return { items: Stream.concat(body, end), header: () => header }
}

/** An event id given twice in a file: the line of the second (a file's event `seq` is on line `seq + 1`). */
const repeatedIdError = (seq: number, id: string): SessionFileError =>
  lineError(seq + 1, `event ${seq} has the id ${id}, which an earlier event has`)

/**
 * The checked pieces of a session file as its bytes arrive — its session, each event, each blob —
 * for `EventStore.importStream`: nothing is held but what the checks need (the references, the
 * fold). An event id that an earlier event of the file has is the store's to find (ids are unique
 * in a database; `importSession` names its line). Fails with a `SessionFileError` naming the first wrong line, wherever it is: a writer
 * of the pieces must keep nothing unless the stream ends well.
 */
export const sessionFileItems = <E, R>(
  bytes: Stream.Stream<Uint8Array, E, R>,
  options: { readonly limits?: Partial<SessionFileLimits> | undefined } = {}
): Stream.Stream<ImportItem, E | SessionFileError, R> => Stream.suspend(() => checkedItems(bytes, options).items)

/**
 * Reads and checks a session file from its bytes; fails with a `SessionFileError` naming the
 * first wrong line. Nothing is written; the session is held in memory (`sessionFileItems` does not).
 */
export const readSessionFile = <E, R>(
  bytes: Stream.Stream<Uint8Array, E, R>,
  options: { readonly limits?: Partial<SessionFileLimits> | undefined } = {}
): Effect.Effect<SessionFile, E | SessionFileError, R> =>
  Effect.suspend(() => {
    const checked = checkedItems(bytes, options)
    const events: Array<ImportedEvent> = []
    const blobs: Array<Uint8Array> = []
    const ids = new Set<string>()
    return Effect.map(
      Stream.runForEach(checked.items, (item) => {
        if (item._tag === "event") {
          if (ids.has(item.event.id)) return Effect.fail(repeatedIdError(events.length + 1, item.event.id))
          ids.add(item.event.id)
          events.push(item.event)
        } else if (item._tag === "blob") blobs.push(item.content)
        return Effect.void
      }),
      (): SessionFile => ({ header: checked.header()!, events, blobs })
    )
  })

/**
 * Checks a session file and writes its session into the store as it reads it, in one transaction
 * (`EventStore.importStream`; nothing when anything is wrong): a `SessionFileError` for the file,
 * an `EventStoreError` (refused) for a session id, or an event id, that the database holds already.
 */
export const importSession = <E, R>(
  bytes: Stream.Stream<Uint8Array, E, R>,
  options: { readonly limits?: Partial<SessionFileLimits> | undefined } = {}
): Effect.Effect<SessionSummary, E | SessionFileError | EventStoreError, R | EventStore> =>
  Effect.flatMap(EventStore, (store) =>
    Effect.flatMap(Effect.context<R>(), (context) =>
      store.importStream(Stream.provideContext(sessionFileItems(bytes, options), context)).pipe(
        Effect.mapError((error) => {
          const repeated = error instanceof EventStoreError ? repeatedEvent(error) : undefined
          return repeated === undefined ? error : repeatedIdError(repeated.seq, repeated.id)
        })
      )
    )
  )
