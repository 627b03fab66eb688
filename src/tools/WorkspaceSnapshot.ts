/**
 * Workspace snapshots (DESIGN §6, docs/workspace.md): what the files a command could change looked
 * like before and after it, so that every change a command made is recorded with its contents,
 * and the workspace of any point of a session can be put back together.
 *
 * A snapshot is a manifest — workspace-relative path (`/` separators) → kind, size, permission bits,
 * the stat fields that tell a change (mtime, ctime, inode) and the SHA-256 of the content — whose
 * contents live in the log's content-addressed blob store. The files are those `glob` and `grep`
 * see (`walkFilesUpTo`: `.gitignore` rules, `.git` and `node_modules` left out); symlinks are
 * recorded as links (their target is the content), never followed.
 *
 * `scanWorkspace(previous)` is cheap when nothing changed: a file whose stat fields equal its
 * previous entry's is not read again (git's index does the same); only new and changed files are
 * read, hashed and stored. A file modified within a few milliseconds of the scan that looked at it
 * ("racy", as git calls it) is read again next time whatever its stat says.
 *
 * Every scan is bounded (`SnapshotLimits`) and says which bound it hit (`ScanResult.limits`):
 * - `fileBytes`: a file larger than `maxFileBytes` is hashed but its content is not stored;
 * - `totalBytes`: past `maxTotalBytes` read in one scan, files are tracked by their stat only;
 * - `time`: past `maxScanMs`, the same;
 * - `files`: past `maxFiles`, the walk stops; entries of the previous manifest that were not seen
 *   are kept as they were (a deletion beyond the bound is not noticed).
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as fsp from "node:fs/promises"
import * as nodePath from "node:path"
import { Clock, Effect, Either, Option, ParseResult, Schema } from "effect"
import { ContentOmitted, type SnapshotLimitHit } from "../domain/Events.js"
import { makeDirectoryChecked, openDirectoryScoped, PathMoved, toCheckedError } from "./confine.js"
import { isOwnTempFile } from "./fileChanges.js"
import { statQuietly, tryFs } from "./fsErrors.js"
import { walkFilesUpTo } from "./ignore.js"

export interface SnapshotLimits {
  /** a file larger than this is hashed but its content not stored (bytes) */
  readonly maxFileBytes: number
  /** at most this many bytes are read by one scan; past it, files are tracked by stat only */
  readonly maxTotalBytes: number
  /** at most this many files are tracked */
  readonly maxFiles: number
  /** past this long (ms), a scan reads no more contents (files are tracked by stat only) */
  readonly maxScanMs: number
}

export const defaultSnapshotLimits: SnapshotLimits = {
  maxFileBytes: 4 * 1024 * 1024,
  maxTotalBytes: 64 * 1024 * 1024,
  maxFiles: 50_000,
  maxScanMs: 5_000
}

/** Why an entry's content is not in the blob store. */
export type Omitted = ContentOmitted
const Omitted = ContentOmitted
export type SnapshotLimit = typeof SnapshotLimitHit.Type

export interface SnapshotEntry {
  readonly kind: "file" | "symlink"
  readonly size: number
  /** permission bits */
  readonly mode: number
  readonly mtimeMs: number
  readonly ctimeMs: number
  readonly ino: number
  /**
   * SHA-256 (hex): the blob's when `stored` (the content as the log keeps it, API keys masked),
   * else of the file's bytes; absent when the content was not read
   */
  readonly hash?: string | undefined
  /** the content is in the blob store under `hash` */
  readonly stored: boolean
  readonly omitted?: Omitted | undefined
  /** modified so close to the scan that an equal stat does not prove it unchanged: read again next time */
  readonly racy?: boolean | undefined
}

/** path (relative to the workspace, `/` separators) → entry */
export type Manifest = ReadonlyMap<string, SnapshotEntry>

export interface ScanOptions<E = never> {
  /** the workspace root (a real path) */
  readonly root: string
  /** the manifest of the last scan: files whose stat is unchanged are not read again */
  readonly previous?: Manifest | undefined
  readonly limits?: SnapshotLimits | undefined
  /** absolute paths never looked at (the log's own database files) */
  readonly exclude?: ReadonlySet<string> | undefined
  /** stores a content in the blob store and returns its hash; its failure fails the scan as it is */
  readonly store: (content: Uint8Array) => Effect.Effect<string, E>
}

export interface ScanResult {
  readonly manifest: Map<string, SnapshotEntry>
  readonly limits: ReadonlyArray<SnapshotLimit>
  /** bytes this scan read */
  readonly bytesRead: number
  /** files this scan read or hashed (the rest were known by their stat) */
  readonly filesRead: number
}

/** A scan that could not run at all (the root unreadable), or a manifest that cannot be restored. */
export class SnapshotError extends Schema.TaggedError<SnapshotError>()("SnapshotError", {
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

/** A modification this close (ms) to the scan does not prove a later equal stat means an equal file. */
const RACY_MS = 5
/** files stat'ed between two yields */
const STAT_BATCH = 256

const sameStat = (a: SnapshotEntry, b: Omit<SnapshotEntry, "stored">): boolean =>
  a.kind === b.kind &&
  a.size === b.size &&
  a.mode === b.mode &&
  a.mtimeMs === b.mtimeMs &&
  a.ctimeMs === b.ctimeMs &&
  a.ino === b.ino

const hashFile = (path: string): Promise<string> =>
  new Promise((resolve, reject) => {
    const hash = createHash("sha256")
    fs.createReadStream(path)
      .on("data", (chunk) => hash.update(chunk))
      .on("error", reject)
      .on("end", () => resolve(hash.digest("hex")))
  })

/**
 * A manifest of the workspace, reusing `previous` for files whose stat did not change. Fails only
 * when the root cannot be read.
 */
export const scanWorkspace = <E = never>(options: ScanOptions<E>): Effect.Effect<ScanResult, SnapshotError | E> =>
  Effect.gen(function* () {
    const limits = options.limits ?? defaultSnapshotLimits
    const previous = options.previous
    const started = yield* Clock.currentTimeMillis
    const walk = yield* walkFilesUpTo(options.root, options.root, limits.maxFiles, { snapshot: true }).pipe(
      Effect.mapError(
        (cause) => new SnapshotError({ message: `cannot read the workspace ${options.root}: ${String(cause)}`, cause })
      )
    )
    // a write's temporary file (renamed over its target a moment later) is logbook's own, not a change
    const files = walk.files.filter(
      (f) => !isOwnTempFile(f.absolute) && (options.exclude === undefined || !options.exclude.has(f.absolute))
    )
    const manifest = new Map<string, SnapshotEntry>()
    const hits = { fileBytes: 0, totalBytes: 0, time: 0 }
    let bytesRead = 0
    let filesRead = 0
    let timeUp = false

    for (let from = 0; from < files.length; from += STAT_BATCH) {
      // the blocking calls: on a busy machine several times faster than the thread pool's
      // (docs/workspace.md); a batch at a time, with a yield between, so other fibers go on
      if (from > 0) yield* Effect.yieldNow()
      const batch = files.slice(from, from + STAT_BATCH)
      // a file that cannot be stat'ed now (gone, unreadable directory) is simply not there
      const stats = batch.map((f) => statQuietly(f.absolute, false))
      for (let i = 0; i < batch.length; i++) {
        const file = batch[i]!
        const stat = stats[i]
        if (stat === undefined || !(stat.isFile() || stat.isSymbolicLink())) continue
        const base = {
          kind: stat.isSymbolicLink() ? ("symlink" as const) : ("file" as const),
          size: stat.size,
          mode: stat.mode & 0o7777,
          mtimeMs: stat.mtimeMs,
          ctimeMs: stat.ctimeMs,
          ino: stat.ino
        }
        const racy = stat.mtimeMs >= started - RACY_MS
        const known = previous?.get(file.relative)
        if (
          known !== undefined &&
          known.racy !== true &&
          sameStat(known, base) &&
          (known.omitted === undefined || known.omitted === "too-large")
        ) {
          manifest.set(file.relative, known)
          continue
        }
        if (!timeUp && (yield* Clock.currentTimeMillis) - started > limits.maxScanMs) timeUp = true
        const omit = (omitted: Omitted, hash?: string) =>
          manifest.set(file.relative, {
            ...base,
            stored: false,
            omitted,
            ...(hash !== undefined ? { hash } : {}),
            ...(racy ? { racy } : {})
          })
        if (timeUp) {
          hits.time++
          omit("time")
          continue
        }
        if (bytesRead + stat.size > limits.maxTotalBytes) {
          hits.totalBytes++
          omit("budget")
          continue
        }
        if (base.kind === "file" && stat.size > limits.maxFileBytes) {
          const hash = yield* tryFs(() => hashFile(file.absolute)).pipe(Effect.option)
          bytesRead += stat.size
          filesRead++
          hits.fileBytes++
          if (Option.isSome(hash)) omit("too-large", hash.value)
          else omit("unreadable")
          continue
        }
        const content = yield* Effect.try(() =>
          base.kind === "symlink" ? Buffer.from(fs.readlinkSync(file.absolute), "utf8") : fs.readFileSync(file.absolute)
        ).pipe(Effect.option)
        if (Option.isNone(content)) {
          omit("unreadable")
          continue
        }
        bytesRead += content.value.byteLength
        filesRead++
        const hash = yield* options.store(content.value)
        manifest.set(file.relative, { ...base, hash, stored: true, ...(racy ? { racy } : {}) })
      }
    }

    const limitHits: Array<SnapshotLimit> = []
    if (hits.fileBytes > 0) limitHits.push({ limit: "fileBytes", files: hits.fileBytes })
    if (hits.totalBytes > 0) limitHits.push({ limit: "totalBytes", files: hits.totalBytes })
    if (hits.time > 0) limitHits.push({ limit: "time", files: hits.time })
    if (walk.truncated) {
      // what the walk did not reach is kept as it was: neither seen nor known to be gone
      let kept = 0
      for (const [path, entry] of previous ?? []) {
        if (!manifest.has(path)) {
          manifest.set(path, entry)
          kept++
        }
      }
      limitHits.push({ limit: "files", files: kept })
    }
    return { manifest, limits: limitHits, bytesRead, filesRead }
  })

// ---------------------------------------------------------------------------------------------
// the difference of two manifests

export interface ObservedChange {
  readonly path: string
  readonly op: "create" | "update" | "delete"
  readonly before?: SnapshotEntry | undefined
  readonly after?: SnapshotEntry | undefined
}

const contentDiffers = (a: SnapshotEntry, b: SnapshotEntry): boolean => {
  if (a.kind !== b.kind) return true
  if (a.hash !== undefined && b.hash !== undefined && a.stored === b.stored) return a.hash !== b.hash
  // a content not read on one side: only the stat can tell (a mode change alone is not a content change)
  return !sameStat(a, { ...b, mode: a.mode })
}

/** The files created, changed (in content or kind) and deleted from `before` to `after`, by path. */
export const diffManifests = (before: Manifest, after: Manifest): Array<ObservedChange> => {
  const changes: Array<ObservedChange> = []
  for (const [path, entry] of after) {
    const old = before.get(path)
    if (old === undefined) changes.push({ path, op: "create", after: entry })
    else if (contentDiffers(old, entry)) changes.push({ path, op: "update", before: old, after: entry })
  }
  for (const [path, entry] of before) {
    if (!after.has(path)) changes.push({ path, op: "delete", before: entry })
  }
  return changes.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
}

// ---------------------------------------------------------------------------------------------
// the manifest as a blob, and restoring it

/** One file of a manifest document. */
export const ManifestFile = Schema.Struct({
  path: Schema.String,
  /** absent for a regular file */
  kind: Schema.optional(Schema.Literal("symlink")),
  mode: Schema.NonNegativeInt,
  size: Schema.NonNegativeInt,
  /** the blob holding the content (for a symlink: its target) */
  blob: Schema.optional(Schema.String),
  /** the SHA-256 of a content that is not stored */
  hash: Schema.optional(Schema.String),
  omitted: Schema.optional(Omitted)
})
export type ManifestFile = typeof ManifestFile.Type

/** What `workspace.snapshot` `manifest` names: the workspace's files, sorted by path. */
export const ManifestDocument = Schema.Struct({
  version: Schema.Literal(1),
  files: Schema.Array(ManifestFile)
})
export type ManifestDocument = typeof ManifestDocument.Type

/** A manifest as the document stored in the blob store (canonical: sorted by path). */
export const manifestDocument = (manifest: Manifest): ManifestDocument => ({
  version: 1,
  files: Array.from(manifest.entries())
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([path, entry]) => ({
      path,
      ...(entry.kind === "symlink" ? { kind: "symlink" as const } : {}),
      mode: entry.mode,
      size: entry.size,
      ...(entry.stored && entry.hash !== undefined ? { blob: entry.hash } : {}),
      ...(!entry.stored && entry.hash !== undefined ? { hash: entry.hash } : {}),
      ...(entry.omitted !== undefined ? { omitted: entry.omitted } : {})
    }))
})

export const decodeManifestDocument = (bytes: Uint8Array): Either.Either<ManifestDocument, string> => {
  let json: unknown
  try {
    json = JSON.parse(new TextDecoder().decode(bytes))
  } catch (error) {
    return Either.left(`the manifest is not JSON: ${error instanceof Error ? error.message : String(error)}`)
  }
  return Schema.decodeUnknownEither(ManifestDocument)(json).pipe(
    Either.mapLeft((e) => `the manifest is malformed: ${ParseResult.TreeFormatter.formatErrorSync(e)}`)
  )
}

/** What `restoreManifest` did: files written, and the ones it could not (no content stored, blob missing). */
export interface RestoreResult {
  readonly restored: number
  readonly missing: ReadonlyArray<{ readonly path: string; readonly reason: string }>
}

/** A manifest path that stays below the directory it is restored into (no `..`, not absolute). */
const safeRelative = (path: string): boolean =>
  path !== "" &&
  !path.startsWith("/") &&
  !path.includes("\0") &&
  !path.includes("\\") &&
  path.split("/").every((segment) => segment !== "" && segment !== "." && segment !== "..")

/** What `restoreEntry` puts at a path: a file (its content, and mode), a symbolic link, or nothing. */
export type RestoredEntry =
  | { readonly kind: "file"; readonly content: Uint8Array; readonly mode?: number | undefined }
  | { readonly kind: "symlink"; readonly target: string }
  | { readonly kind: "remove" }

/**
 * Puts `entry` at the `/`-separated relative `path` below the real directory `root`, confined as
 * the file tools' writes are (confine.ts): the parent directories are created and opened through
 * checked descriptors, so a symbolic link on the way — one a restore made, one copied from a
 * session's directory, one swapped in meanwhile — fails it instead of leading outside `root`; what
 * is at the path itself is replaced (a link there is removed, never followed: the new file is
 * created exclusively). Fails with the reason, as a sentence.
 */
export const restoreEntry = (root: string, path: string, entry: RestoredEntry): Effect.Effect<void, string> => {
  if (!safeRelative(path)) return Effect.fail("the path leads outside the directory")
  const segments = path.split("/")
  const name = segments.pop()!
  const parent = nodePath.join(root, ...segments)
  return makeDirectoryChecked(parent).pipe(
    Effect.zipRight(
      Effect.scoped(
        Effect.flatMap(openDirectoryScoped(parent), (directory) =>
          Effect.try({ try: () => putEntry(directory.at(name), entry), catch: toCheckedError })
        )
      )
    ),
    Effect.mapError((error) =>
      error instanceof PathMoved ? "it leads outside the directory through a symbolic link" : error.message
    )
  )
}

/** `restoreEntry`'s write at `at` (a name below a checked directory descriptor). */
const putEntry = (at: string, entry: RestoredEntry): void => {
  fs.rmSync(at, { force: true })
  if (entry.kind === "symlink") fs.symlinkSync(entry.target, at)
  else if (entry.kind === "file") {
    const fd = fs.openSync(at, "wx", entry.mode ?? 0o666)
    try {
      // `open` applies the umask: the recorded bits win
      if (entry.mode !== undefined) fs.fchmodSync(fd, entry.mode)
      fs.writeFileSync(fd, entry.content)
    } finally {
      fs.closeSync(fd)
    }
  }
}

/**
 * Writes the files of the manifest blob `manifestHash` into `directory` (created when missing;
 * existing files of the same paths are replaced), with their permission bits; symlinks are made as
 * links, after every file. Every write goes through `restoreEntry`, so nothing is written through a
 * link. Files whose content the snapshot did not store (over a bound), whose blob is missing, whose
 * path would lead outside `directory` or that cannot be written are listed in `missing`; the
 * restore fails only when the manifest itself cannot be read.
 * The contents are the log's: API keys in them are masked.
 */
export const restoreManifest = <E>(
  blobs: { readonly getBlob: (hash: string) => Effect.Effect<Option.Option<Uint8Array>, E> },
  manifestHash: string,
  directory: string
): Effect.Effect<RestoreResult, SnapshotError> =>
  Effect.gen(function* () {
    const fail = (message: string) => (cause: unknown) => new SnapshotError({ message, cause })
    const raw = yield* blobs
      .getBlob(manifestHash)
      .pipe(Effect.mapError(fail(`cannot read the manifest ${manifestHash}`)))
    if (Option.isNone(raw))
      return yield* new SnapshotError({ message: `the manifest blob ${manifestHash} is not in the log` })
    const document = decodeManifestDocument(raw.value)
    if (Either.isLeft(document)) return yield* new SnapshotError({ message: document.left })
    yield* tryFs(() => fsp.mkdir(directory, { recursive: true })).pipe(
      Effect.mapError(fail(`cannot create ${directory}`))
    )
    const root = yield* tryFs(() => fsp.realpath(directory)).pipe(Effect.mapError(fail(`cannot read ${directory}`)))
    let restored = 0
    const missing: Array<{ path: string; reason: string }> = []
    // links last: no file is written below a link this restore made
    const ordered = [
      ...document.right.files.filter((f) => f.kind !== "symlink"),
      ...document.right.files.filter((f) => f.kind === "symlink")
    ]
    for (const file of ordered) {
      if (!safeRelative(file.path)) {
        missing.push({ path: file.path, reason: "the path leads outside the directory" })
        continue
      }
      if (file.blob === undefined) {
        missing.push({ path: file.path, reason: `its content was not stored (${file.omitted ?? "not read"})` })
        continue
      }
      const content = yield* blobs
        .getBlob(file.blob)
        .pipe(Effect.mapError(fail(`cannot read the blob of ${file.path}`)))
      if (Option.isNone(content)) {
        missing.push({ path: file.path, reason: `its blob ${file.blob} is not in the log` })
        continue
      }
      const entry: RestoredEntry =
        file.kind === "symlink"
          ? { kind: "symlink", target: new TextDecoder().decode(content.value) }
          : { kind: "file", content: content.value, mode: file.mode }
      const written = yield* Effect.either(restoreEntry(root, file.path, entry))
      if (Either.isLeft(written)) {
        missing.push({ path: file.path, reason: written.left })
        continue
      }
      restored++
    }
    return { restored, missing }
  })
