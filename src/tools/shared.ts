/**
 * What the built-in tools share: resolving a path against the call's `cwd`, turning file-system
 * errors into `ToolFailure`s the model can act on, suggesting names for a path that does not exist,
 * listing a directory tree, and capping output for the model.
 *
 * Confinement to the workspace root is decided by `Workspace` and `Permissions` before the tool runs;
 * these helpers apply it (`confinedPath`) and open what was checked, checking the descriptor after
 * the open (`openConfined`, `writeFileAtomic`, `readTree`; see confine.ts), so a swap between the
 * check and the open is refused.
 */
import { createHash } from "node:crypto"
import type { Stats } from "node:fs"
import * as fs from "node:fs"
import type { FileHandle } from "node:fs/promises"
import * as fsp from "node:fs/promises"
import * as nodePath from "node:path"
import { Effect, Random, Schema, type Scope } from "effect"
import { openCheckedScoped, openDirectoryScoped, PathMoved, readdirChecked } from "./confine.js"
import { crashPoint } from "./crashPoint.js"
import { type FileReads, type FileStamp, ToolFailure } from "./Tools.js"
import { absoluteIn, outsideMessage, resolveInWorkspace } from "./Workspace.js"

// ---------------------------------------------------------------------------------------------
// input schemas: plain JSON Schemas for the model (no `$defs`, no generated titles), and decoding
// errors the model can act on

const showActual = (actual: unknown): string => {
  const text = JSON.stringify(actual)
  return text === undefined ? String(actual) : text.length > 60 ? `${text.slice(0, 59)}…` : text
}

/** A whole number of at least `min`. */
export const intAtLeast = (min: number, description: string) =>
  Schema.Int.pipe(
    Schema.greaterThanOrEqualTo(min),
    Schema.annotations({
      description,
      message: (issue) => ({
        message: `expected a whole number of ${min} or more, got ${showActual(issue.actual)}`,
        override: true
      }),
      jsonSchema: { type: "integer", minimum: min, description }
    })
  )

/** A string that is not empty. */
export const nonEmptyString = (description: string) =>
  Schema.String.pipe(
    Schema.minLength(1),
    Schema.annotations({
      description,
      message: (issue) => ({ message: `expected a non-empty string, got ${showActual(issue.actual)}`, override: true }),
      jsonSchema: { type: "string", minLength: 1, description }
    })
  )

// ---------------------------------------------------------------------------------------------
// paths

/**
 * The path a file tool may use for `input`: resolved against the workspace root (`cwd`) with real
 * paths (`Workspace.resolveInWorkspace`), refused with an error the model can read when it cannot be
 * resolved, or when it leads outside the workspace and `outsideAllowed` is false (the call's
 * `ToolContext.outsideAllowed`: the `external_directory` permission allowed this call).
 * Returns the real path (symlinks followed), so what is checked is what is opened.
 */
export const confinedPath = (cwd: string, input: string, outsideAllowed = false): Effect.Effect<string, ToolFailure> =>
  resolveInWorkspace(cwd, input).pipe(
    Effect.mapError((error) => new ToolFailure({ message: `Cannot use the path ${input}: ${error.message}.` })),
    Effect.flatMap((path) =>
      path.inside || outsideAllowed
        ? Effect.succeed(path.real)
        : Effect.fail(new ToolFailure({ message: outsideMessage(path, cwd) }))
    )
  )

/**
 * Why an open of a checked path failed, as the model reads it: a missing file with similar names
 * (`notFoundFailure`), a path that led elsewhere since it was checked (`PathMoved`: the sentence for
 * a path outside the workspace when it now leads outside and outside was not allowed, the same as
 * `confinedPath`'s; else that it changed), any other error as `fsFailure`.
 */
export const openFailure = (
  error: unknown,
  where: { readonly cwd: string; readonly input: string; readonly absolute: string; readonly shown: string },
  outsideAllowed: boolean,
  what = "File"
): Effect.Effect<ToolFailure> =>
  Effect.gen(function* () {
    if (errnoCode(error) === "ENOENT") return yield* notFoundFailure(where.absolute, where.shown, what)
    if (!(error instanceof PathMoved)) return fsFailure(error, where.shown)
    const now = yield* resolveInWorkspace(where.cwd, error.actual).pipe(Effect.option)
    if (!outsideAllowed && (now._tag === "None" || !now.value.inside)) {
      const led = { input: where.input, absolute: absoluteIn(where.cwd, where.input), real: error.actual }
      return new ToolFailure({ message: outsideMessage(led, where.cwd) })
    }
    return fsFailure(error, where.shown)
  })

/**
 * Opens (to read) the real path `absolute` that `confinedPath` gave for `input`, then checks what
 * was opened (`confine.openChecked`: the descriptor must be that path), so a directory on the way
 * swapped for a symlink between the check and the open is refused, not followed. In a scope (the
 * handle is closed when it ends); returns the handle and its `fstat`. Fails as `openFailure` says.
 */
export const openConfined = (
  where: { readonly cwd: string; readonly input: string; readonly absolute: string; readonly shown: string },
  outsideAllowed: boolean,
  what = "File"
): Effect.Effect<{ readonly handle: FileHandle; readonly stat: Stats }, ToolFailure, Scope.Scope> =>
  Effect.gen(function* () {
    const handle = yield* openCheckedScoped(where.absolute).pipe(
      Effect.catchAll((error) => Effect.flatMap(openFailure(error, where, outsideAllowed, what), Effect.fail))
    )
    const stat = yield* tryFs(() => handle.stat()).pipe(Effect.mapError((error) => fsFailure(error, where.shown)))
    return { handle, stat }
  })

/**
 * The file at the checked real path `absolute` as it is now, opened and checked like
 * `openConfined`: its `fstat`, and its content when it is a regular file; `undefined` when nothing
 * is there. For `write` and `edit`, which read a file before they replace it.
 */
export const readExisting = (
  where: { readonly cwd: string; readonly input: string; readonly absolute: string; readonly shown: string },
  outsideAllowed: boolean
): Effect.Effect<{ readonly stat: Stats; readonly content: Buffer | undefined } | undefined, ToolFailure> =>
  Effect.scoped(
    Effect.gen(function* () {
      const handle = yield* openCheckedScoped(where.absolute).pipe(
        Effect.map((h) => h as FileHandle | undefined),
        Effect.catchAll((error) =>
          errnoCode(error) === "ENOENT"
            ? Effect.succeed(undefined)
            : Effect.flatMap(openFailure(error, where, outsideAllowed), Effect.fail)
        )
      )
      if (handle === undefined) return undefined
      return yield* tryFs(async () => {
        const stat = await handle.stat()
        return { stat, content: stat.isFile() ? await handle.readFile() : undefined }
      }).pipe(Effect.mapError((error) => fsFailure(error, where.shown)))
    })
  )

/** How a path is shown to the model: relative to `cwd` when it is inside, else absolute. */
export const displayPath = (cwd: string, absolute: string): string => {
  const relative = nodePath.relative(cwd, absolute)
  if (relative === "") return "."
  if (relative.startsWith("..") || nodePath.isAbsolute(relative)) return absolute
  return relative
}

// ---------------------------------------------------------------------------------------------
// file-system errors

/** The errno code of a Node error (`ENOENT`, `EACCES` …), if it has one. */
export const errnoCode = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string"
    ? error.code
    : undefined

/** A file-system call as an Effect that fails with the raw Node error (to be mapped by the caller). */
export const tryFs = <A>(run: () => Promise<A>): Effect.Effect<A, unknown> =>
  Effect.tryPromise({ try: run, catch: (error) => error })

/** A sentence for a file-system error on `shown` (the path as the model wrote it). */
export const describeFsError = (error: unknown, shown: string): string => {
  if (error instanceof PathMoved) {
    return `${shown} changed while it was being opened (it was checked as ${error.expected}, it then led to ${error.actual}); nothing was read. Try again.`
  }
  switch (errnoCode(error)) {
    case "ENOENT":
      return `File not found: ${shown}`
    case "EACCES":
    case "EPERM":
      return `Permission denied: ${shown}`
    case "ENOTDIR":
      return `Not a directory: a part of the path ${shown} is a file`
    case "EISDIR":
      return `${shown} is a directory`
    case "ELOOP":
      return `Too many levels of symbolic links: ${shown}`
    case "ENAMETOOLONG":
      return `The path is too long: ${shown}`
    default: {
      const message = error instanceof Error ? error.message : String(error)
      return `Could not access ${shown}: ${message}`
    }
  }
}

/** A few words for a file-system error, for a mark next to an entry (`permission denied`). */
export const shortFsReason = (error: unknown): string => {
  if (error instanceof PathMoved) return `changed while listed: it led to ${error.actual}; not followed`
  switch (errnoCode(error)) {
    case "ENOENT":
      return "gone"
    case "EACCES":
    case "EPERM":
      return "permission denied"
    default:
      return `unreadable: ${errnoCode(error) ?? (error instanceof Error ? error.message : String(error))}`
  }
}

/** A `ToolFailure` for a file-system error on `shown`. */
export const fsFailure = (error: unknown, shown: string): ToolFailure =>
  new ToolFailure({ message: describeFsError(error, shown) })

/** Edit distance between two short strings (names), for suggestions. */
const editDistance = (a: string, b: string): number => {
  const previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    let diagonal = previous[0]!
    previous[0] = i
    for (let j = 1; j <= b.length; j++) {
      const above = previous[j]!
      previous[j] = Math.min(above + 1, previous[j - 1]! + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1))
      diagonal = above
    }
  }
  return previous[b.length]!
}

const stem = (name: string): string => {
  const dot = name.lastIndexOf(".")
  return (dot > 0 ? name.slice(0, dot) : name).toLowerCase()
}

/**
 * Up to `max` names in the directory of `absolute` that look like its last segment (same name in
 * another case, same stem with another extension, one contains the other, or a few typos away),
 * best first, as paths shown the way the model wrote `shown`. Empty when the directory cannot be read.
 */
export const similarNames = (absolute: string, shown: string, max = 5): Effect.Effect<ReadonlyArray<string>> =>
  Effect.gen(function* () {
    const dir = nodePath.dirname(absolute)
    const base = nodePath.basename(absolute)
    const entries = yield* tryFs(() => fsp.readdir(dir, { withFileTypes: true })).pipe(Effect.orElseSucceed(() => []))
    const wanted = base.toLowerCase()
    const scored: Array<{ readonly name: string; readonly score: number }> = []
    for (const entry of entries) {
      const name = entry.name
      const lower = name.toLowerCase()
      let score: number | undefined
      if (lower === wanted) score = 0
      else if (stem(name) === stem(base)) score = 1
      else if (wanted.length >= 3 && (lower.includes(wanted) || wanted.includes(lower))) score = 2
      else {
        const distance = editDistance(lower, wanted)
        if (distance <= Math.max(1, Math.floor(wanted.length / 3))) score = 2 + distance
      }
      if (score !== undefined) scored.push({ name: entry.isDirectory() ? `${name}/` : name, score })
    }
    scored.sort((a, b) => a.score - b.score || compareNames(a.name, b.name))
    const trimmed = shown.replace(/\/+$/, "")
    const shownDir = trimmed.includes("/") ? trimmed.slice(0, trimmed.lastIndexOf("/") + 1) : ""
    return scored.slice(0, max).map((s) => `${shownDir}${s.name}`)
  })

/**
 * `File not found: <shown>`, with similar names in the same directory when there are some, or a
 * word that the directory itself is missing.
 */
export const notFoundFailure = (absolute: string, shown: string, what = "File"): Effect.Effect<ToolFailure> =>
  Effect.gen(function* () {
    const suggestions = yield* similarNames(absolute, shown)
    let message = `${what} not found: ${shown}`
    if (suggestions.length > 0) {
      message += `\nDid you mean: ${suggestions.join(", ")}?`
    } else {
      const parent = nodePath.dirname(absolute)
      const parentExists = yield* tryFs(() => fsp.stat(parent)).pipe(
        Effect.map((s) => s.isDirectory()),
        Effect.orElseSucceed(() => false)
      )
      message += parentExists
        ? `\nUse the list tool to see what ${displayParent(shown)} contains.`
        : `\nIts directory does not exist either; use the list tool to find the right path.`
    }
    return new ToolFailure({ message })
  })

/**
 * `fs.stat` of the path a tool was given: a missing path fails with `notFoundFailure` (with
 * suggestions), any other error with `fsFailure`.
 */
export const statPath = (absolute: string, shown: string, what = "File"): Effect.Effect<Stats, ToolFailure> =>
  tryFs(() => fsp.stat(absolute)).pipe(
    Effect.catchAll((error) =>
      errnoCode(error) === "ENOENT"
        ? Effect.flatMap(notFoundFailure(absolute, shown, what), Effect.fail)
        : Effect.fail(fsFailure(error, shown))
    )
  )

const displayParent = (shown: string): string => {
  const slash = shown.replace(/\/+$/, "").lastIndexOf("/")
  return slash > 0 ? shown.slice(0, slash) : slash === 0 ? "/" : "the directory"
}

// ---------------------------------------------------------------------------------------------
// directory trees

/** Directories that are never descended into or listed (unless listed directly). */
export const SKIPPED_DIRECTORIES: ReadonlySet<string> = new Set([".git", "node_modules"])

/** Sorts names by code unit, so listings are the same on every machine and locale. */
export const compareNames = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)

export interface TreeEntry {
  /** the name of the entry within its directory; directories (and links to them) end with `/` */
  readonly name: string
  /** 1 for the entries of the root, 2 for theirs … */
  readonly depth: number
  readonly kind: "directory" | "file" | "symlink"
  /** where a symlink points */
  readonly target?: string | undefined
  /** why the directory's entries could not be read */
  readonly error?: string | undefined
  readonly children: ReadonlyArray<TreeEntry>
}

export interface Tree {
  readonly entries: ReadonlyArray<TreeEntry>
  /** how many entries the tree holds */
  readonly count: number
  /** true when the listing stopped at `maxEntries` */
  readonly truncated: boolean
}

interface Building {
  name: string
  depth: number
  kind: TreeEntry["kind"]
  target?: string | undefined
  error?: string | undefined
  children: Array<Building>
}

interface Pending {
  readonly dir: string
  readonly depth: number
  /** the entry of `dir`, `undefined` for the root */
  readonly owner: Building | undefined
  readonly into: Array<Building>
}

/**
 * The tree under the directory `root`, `depth` levels deep (1 = its entries only), breadth first so
 * that the cap of `maxEntries` cuts the deepest levels, not the top ones. Each directory's entries
 * are sorted by name; `SKIPPED_DIRECTORIES` are left out; symlinks are shown but never followed.
 * Fails with the Node error when `root` itself cannot be read.
 */
export const readTree = (
  root: string,
  options: { readonly depth: number; readonly maxEntries: number }
): Effect.Effect<Tree, unknown> =>
  Effect.gen(function* () {
    const top: Array<Building> = []
    let count = 0
    let truncated = false
    let level: Array<Pending> = [{ dir: root, depth: 1, owner: undefined, into: top }]
    while (level.length > 0 && !truncated) {
      const next: Array<Pending> = []
      for (const pending of level) {
        if (count >= options.maxEntries) {
          truncated = true
          break
        }
        // read through a descriptor checked to be this directory: one swapped for a symlink since
        // it was listed in its parent is not followed (confine.ts)
        const read = yield* readdirChecked(pending.dir).pipe(Effect.either)
        if (read._tag === "Left") {
          if (pending.owner === undefined) return yield* Effect.fail(read.left)
          pending.owner.error = shortFsReason(read.left)
          continue
        }
        const dirents = read.right
          .filter((d) => !(d.isDirectory() && SKIPPED_DIRECTORIES.has(d.name)))
          .sort((a, b) => compareNames(a.name, b.name))
        for (const dirent of dirents) {
          if (count >= options.maxEntries) {
            truncated = true
            break
          }
          const full = nodePath.join(pending.dir, dirent.name)
          const entry: Building = { name: dirent.name, depth: pending.depth, kind: "file", children: [] }
          if (dirent.isSymbolicLink()) {
            entry.kind = "symlink"
            entry.target = yield* tryFs(() => fsp.readlink(full)).pipe(Effect.orElseSucceed(() => undefined))
            const pointsToDirectory = yield* tryFs(() => fsp.stat(full)).pipe(
              Effect.map((s) => s.isDirectory()),
              Effect.orElseSucceed(() => false)
            )
            if (pointsToDirectory) entry.name += "/"
          } else if (dirent.isDirectory()) {
            entry.kind = "directory"
            entry.name += "/"
            if (pending.depth < options.depth) {
              next.push({ dir: full, depth: pending.depth + 1, owner: entry, into: entry.children })
            }
          }
          pending.into.push(entry)
          count++
        }
      }
      level = next
    }
    return { entries: top, count, truncated }
  })

/**
 * A tree as indented lines (after `indent`): two spaces per level, directories with a trailing `/`, symlinks as
 * `name -> target`, unreadable directories with the reason in parentheses.
 */
export const renderTree = (entries: ReadonlyArray<TreeEntry>, indent = ""): Array<string> => {
  const lines: Array<string> = []
  const walk = (list: ReadonlyArray<TreeEntry>) => {
    for (const entry of list) {
      let line = `${indent}${"  ".repeat(entry.depth - 1)}${entry.name}`
      if (entry.kind === "symlink" && entry.target !== undefined) line += ` -> ${entry.target}`
      if (entry.error !== undefined) line += ` (${entry.error})`
      lines.push(line)
      walk(entry.children)
    }
  }
  walk(entries)
  return lines
}

// ---------------------------------------------------------------------------------------------
// output capping

/** `1234` -> `"1.2 KB"`, for notes to the model. */
export const formatBytes = (bytes: number): string => {
  if (bytes < 1024) return `${bytes} bytes`
  const round = (n: number) => n.toFixed(1).replace(/\.0$/, "")
  if (bytes < 1024 * 1024) return `${round(bytes / 1024)} KB`
  return `${round(bytes / (1024 * 1024))} MB`
}

/** Drops the bytes of a UTF-8 character cut at the end of `bytes`. */
const trimIncompleteEnd = (bytes: Buffer): Buffer => {
  let end = bytes.length
  // step back over continuation bytes to the lead byte of the last character
  let i = end - 1
  while (i >= 0 && i >= end - 4 && (bytes[i]! & 0xc0) === 0x80) i--
  if (i < 0) return bytes
  const lead = bytes[i]!
  const width = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1
  if (i + width > end) end = i
  return bytes.subarray(0, end)
}

/** Drops the continuation bytes of a UTF-8 character cut at the start of `bytes`. */
const trimIncompleteStart = (bytes: Buffer): Buffer => {
  let start = 0
  while (start < bytes.length && start < 4 && (bytes[start]! & 0xc0) === 0x80) start++
  return bytes.subarray(start)
}

/**
 * Collects a stream of output bytes in bounded memory: the first `headBytes` and the last
 * `tailBytes`, and the total count. `text()` joins them with a marker saying how much was left out.
 */
export class HeadTailBuffer {
  private readonly head: Array<Buffer> = []
  private headLength = 0
  private tail: Array<Buffer> = []
  private tailLength = 0
  /** all bytes seen so far */
  bytes = 0

  constructor(
    readonly headBytes: number,
    readonly tailBytes: number
  ) {}

  /** every chunk, while the whole output is within `keepAll`'s limit */
  private all: Array<Buffer> | undefined
  private allLimit = 0

  /** Also keeps the whole output, up to `maxBytes` (beyond that only head and tail are kept). */
  keepAll(maxBytes: number): this {
    this.all = []
    this.allLimit = maxBytes
    return this
  }

  /** The whole output when `keepAll` was asked for and it stayed within the limit. */
  whole(): Buffer | undefined {
    return this.all === undefined ? undefined : Buffer.concat(this.all)
  }

  append(chunk: Buffer): void {
    this.bytes += chunk.length
    if (this.all !== undefined) {
      if (this.bytes <= this.allLimit) this.all.push(chunk)
      else this.all = undefined
    }
    let rest = chunk
    if (this.headLength < this.headBytes) {
      const take = Math.min(this.headBytes - this.headLength, rest.length)
      this.head.push(rest.subarray(0, take))
      this.headLength += take
      rest = rest.subarray(take)
    }
    if (rest.length === 0) return
    this.tail.push(rest)
    this.tailLength += rest.length
    // drop whole chunks from the front while the rest still covers the tail
    while (this.tail.length > 1 && this.tailLength - this.tail[0]!.length >= this.tailBytes) {
      this.tailLength -= this.tail.shift()!.length
    }
  }

  /** true when some bytes were left out */
  get truncated(): boolean {
    return this.bytes > this.headBytes + this.tailBytes
  }

  /** the last `n` bytes seen, as text (for progress reports) */
  last(n: number): string {
    const all = Buffer.concat([...(this.tailLength >= n ? [] : this.head), ...this.tail])
    const slice = all.length > n ? trimIncompleteStart(all.subarray(all.length - n)) : all
    return slice.toString("utf8")
  }

  /** everything, or the head and the tail around a marker saying how many bytes were left out */
  text(): string {
    const head = Buffer.concat(this.head)
    const tailAll = Buffer.concat(this.tail)
    if (!this.truncated) return Buffer.concat([head, tailAll]).toString("utf8")
    const tail = tailAll.subarray(tailAll.length - this.tailBytes)
    const omitted = this.bytes - head.length - tail.length
    const headText = trimIncompleteEnd(head).toString("utf8")
    const tailText = trimIncompleteStart(tail).toString("utf8")
    return `${headText}\n\n… [${omitted} bytes (${formatBytes(omitted)}) of output left out; showing the first ${formatBytes(head.length)} and the last ${formatBytes(tail.length)}] …\n\n${tailText}`
  }
}

/** A tool call's error is cut to its first and last bytes beyond this size (issue 12 §7). */
export const MAX_ERROR_BYTES = 16 * 1024

/**
 * A text bounded like a command's output: beyond `headBytes + tailBytes` bytes, its head and its
 * tail around a marker saying how much was left out (a tool error naming a 1 MB path is not 3 MB).
 */
export const capText = (text: string, headBytes = MAX_ERROR_BYTES / 2, tailBytes = MAX_ERROR_BYTES / 4): string => {
  if (text.length <= headBytes + tailBytes && Buffer.byteLength(text) <= headBytes + tailBytes) return text
  const buffer = new HeadTailBuffer(headBytes, tailBytes)
  buffer.append(Buffer.from(text))
  return buffer.text()
}

// ---------------------------------------------------------------------------------------------
// changing files: what the agent read, and atomic writes (write, edit; read records the stamps)

/** The SHA-256 of some content, in hex. */
export const sha256Hex = (content: string | Uint8Array): string => createHash("sha256").update(content).digest("hex")

/** The stamp of a file as it is now: its `stat` and the hash of its whole content. */
export const fileStamp = (stat: Stats, content: string | Uint8Array): FileStamp => ({
  mtimeMs: stat.mtimeMs,
  size: stat.size,
  hash: sha256Hex(content)
})

/**
 * Fails unless the agent read the file `absolute` in this session and it has not changed on disk
 * since (its last read, write or edit). `stat` and `content` are the file as it is now. With a
 * content hash in the stamp the hash decides (a `touch` is no change, a same-size rewrite in the same
 * millisecond is one); without it, the size and the modification time do.
 */
export const requireFreshRead = (
  reads: FileReads,
  absolute: string,
  shown: string,
  current: { readonly stat: Stats; readonly content: Uint8Array },
  action: "overwrite" | "edit"
): Effect.Effect<void, ToolFailure> =>
  Effect.gen(function* () {
    const stamp = yield* reads.last(absolute)
    if (stamp === undefined) {
      return yield* new ToolFailure({
        message:
          `You have not read ${shown} in this session. Read it first with the read tool, then ${action} it` +
          (action === "overwrite"
            ? ": overwriting a file you have not seen can lose work (to change part of it, prefer edit)."
            : ": edit replaces exact text, so it needs the file's current content.")
      })
    }
    const changed =
      stamp.size !== current.stat.size ||
      (stamp.hash !== undefined ? stamp.hash !== sha256Hex(current.content) : stamp.mtimeMs !== current.stat.mtimeMs)
    if (changed) {
      return yield* new ToolFailure({
        message:
          `${shown} changed on disk since you last read it (someone or something else modified it). ` +
          `Read it again with the read tool, then ${action} it based on its current content.`
      })
    }
  })

/** The suffix of every temporary file `writeFileAtomic` writes (and renames over its target). */
export const TEMP_SUFFIX = ".logbook-tmp"

/** Whether `path` names a temporary file of `writeFileAtomic`: logbook's own, never a change of the workspace. */
export const isOwnTempFile = (path: string): boolean => path.endsWith(TEMP_SUFFIX)

/**
 * A new name for the temporary file `writeFileAtomic` writes before it renames it over `absolute`:
 * `.<name>.<random>.logbook-tmp`, in the same directory. A tool takes it first to name it in the
 * change's `file.intent`, then passes it to `writeFileAtomic`.
 */
export const tempPathFor = (absolute: string): Effect.Effect<string> =>
  Effect.map(Random.nextIntBetween(0, 2 ** 31), (n) =>
    nodePath.join(nodePath.dirname(absolute), `.${nodePath.basename(absolute)}.${n.toString(36)}${TEMP_SUFFIX}`)
  )

/**
 * Writes `content` to `absolute` atomically: into a temporary file in the same directory (flushed
 * to disk; `tempPath`, from `tempPathFor`, or a new name), then renamed over the target, so a crash
 * leaves the old file or the new one, never half of one. `mode` (the permission bits of the file
 * being replaced) is kept; a new file gets the default mode. The temporary file is removed when
 * anything fails. Returns the new file's `stat`.
 *
 * `absolute` is a real path that was checked (`confinedPath`). The directory is opened and checked
 * to be the one the path was checked in (`confine.openDirectoryScoped`), and the temporary file and
 * the rename go through its descriptor (`/proc/self/fd/<dirfd>/<name>`): a directory on the way
 * swapped for a symlink since the check fails the write (nothing is written) instead of sending the
 * file where the link leads.
 */
export const writeFileAtomic = (
  absolute: string,
  content: string | Uint8Array,
  shown: string,
  mode?: number,
  tempPath?: string
): Effect.Effect<Stats, ToolFailure> =>
  Effect.gen(function* () {
    const name = nodePath.basename(absolute)
    // the temporary file is in the target's directory: its name is taken through the checked descriptor
    const tempName = nodePath.basename(tempPath ?? (yield* tempPathFor(absolute)))
    return yield* Effect.scoped(
      Effect.gen(function* () {
        const directory = yield* openDirectoryScoped(nodePath.dirname(absolute))
        const temp = directory.at(tempName)
        const write = Effect.acquireUseRelease(
          tryFs(() => fsp.open(temp, "wx", mode ?? 0o666)),
          (handle) =>
            tryFs(async () => {
              if (mode !== undefined) await handle.chmod(mode) // `open` applies the umask; the old mode wins
              await handle.writeFile(content)
              await handle.sync()
              // the stat of what is renamed into place (a rename changes neither its size nor its mtime)
              return handle.stat()
            }),
          (handle) => tryFs(() => handle.close()).pipe(Effect.ignore)
        )
        return yield* write.pipe(
          Effect.tap(() => crashPoint("file.temp")),
          Effect.tap(() => tryFs(() => fsp.rename(temp, directory.at(name)))),
          Effect.tapError(() => tryFs(() => fsp.rm(temp, { force: true })).pipe(Effect.ignore))
        )
      })
    ).pipe(
      Effect.mapError((error) =>
        error instanceof PathMoved
          ? new ToolFailure({
              message:
                `Cannot write ${shown}: its directory changed while it was being written ` +
                `(it was checked as ${nodePath.dirname(absolute)}, it then led to ${error.actual}); nothing was written. ` +
                "Check the path (with list) and try again."
            })
          : fsFailure(error, shown)
      )
    )
  })

/** The number of lines of a text (a last line without a newline counts; `""` has none). */
export const countLines = (text: string): number => {
  if (text === "") return 0
  let count = 0
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) count++
  return text.endsWith("\n") ? count : count + 1
}

/** Whether `file` is a regular file this process may execute. */
export const isExecutableFile = (file: string): boolean => {
  try {
    if (!fs.statSync(file).isFile()) return false
    fs.accessSync(file, fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** `name` looked up on `path` (a `PATH` value; with the Windows extensions there), as a shell would find it. */
export const onPath = (name: string, path: string | undefined = process.env.PATH): string | undefined => {
  const extensions = process.platform === "win32" ? ["", ".exe", ".cmd", ".bat"] : [""]
  for (const dir of (path ?? "").split(nodePath.delimiter)) {
    if (dir === "") continue
    for (const ext of extensions) {
      const candidate = nodePath.join(dir, name + ext)
      if (isExecutableFile(candidate)) return candidate
    }
  }
  return undefined
}
