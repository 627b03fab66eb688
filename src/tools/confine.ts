/**
 * Confinement without races: what was checked is what is opened.
 *
 * `Workspace.resolveInWorkspace` checks a path (its real path, every symlink followed) and the file
 * tools then open it. Between the two, another process can swap a directory on the way for a
 * symlink (`ws/sub` -> `/etc`), and an open by name would follow it. So every open here is checked
 * *after* it happened, on the descriptor: on Linux the kernel names what a descriptor refers to
 * (`readlink /proc/self/fd/<fd>`), and that name must be the real path that was checked — otherwise
 * the descriptor is closed and the open fails with `PathMoved`. Directories are read through their
 * descriptor (`readdir /proc/self/fd/<fd>`: the magic link resolves through the descriptor, not the
 * name), and new files and renames go through the parent directory's descriptor
 * (`/proc/self/fd/<dirfd>/<name>`), so a swapped name cannot redirect them.
 *
 * Where there is no `/proc` (macOS, a container without it) the check is done after the open by
 * name: the path's real path (`realpath`) must still be the checked one and name the same file
 * (device and inode) as the descriptor. That closes the window of a swap before the open, but not
 * of a swap before the open that is undone before the check; names go through the path, not the
 * descriptor. docs/tools.md ("The workspace") records this.
 */
import type { Dirent, Stats } from "node:fs"
import * as fs from "node:fs"
import * as nodePath from "node:path"
import { Duration, Effect, Schema, type Scope } from "effect"
import { errnoCode, type FsError, toFsError } from "./FsError.js"

/** An open led somewhere else than the path that was checked: a name on the way changed. */
export class PathMoved extends Schema.TaggedError<PathMoved>()("PathMoved", {
  /** the real path that was checked */
  expected: Schema.String,
  /** what the descriptor turned out to be (its real path) */
  actual: Schema.String
}) {
  override get message(): string {
    return `${this.expected} changed while it was being opened (it led to ${this.actual})`
  }
}

/** What a checked file-system call threw: its `PathMoved`, or the Node error as an `FsError`. */
export const toCheckedError = (error: unknown): FsError | PathMoved =>
  error instanceof PathMoved ? error : toFsError(error)

const O_DIRECTORY = fs.constants.O_DIRECTORY ?? 0
const O_NONBLOCK = fs.constants.O_NONBLOCK ?? 0
/** Flags to open a file to read: non-blocking, so a FIFO swapped in cannot hang the open. */
export const READ_FLAGS = fs.constants.O_RDONLY | O_NONBLOCK
/** Flags to open a directory (and nothing else). */
export const DIRECTORY_FLAGS = fs.constants.O_RDONLY | O_DIRECTORY

/** The name of descriptor `fd` through `/proc` (also a path to open it again, or below it). */
export const descriptorLink = (fd: number): string => `/proc/self/fd/${fd}`

/**
 * The real path the kernel gives descriptor `fd` (`/proc/self/fd/<fd>`); `undefined` where there is
 * no such `/proc`.
 */
const descriptorRealPathSync = (fd: number): string | undefined => {
  try {
    return fs.readlinkSync(descriptorLink(fd))
  } catch (error) {
    if (errnoCode(error) === "ENOENT" || errnoCode(error) === "ENOTDIR") return undefined
    throw error
  }
}

const sameFile = (a: Stats, b: Stats): boolean => a.dev === b.dev && a.ino === b.ino

/**
 * Whether descriptor `fd`, opened from `expected`, is `expected` (see the module's comment). Throws
 * `PathMoved` when it is not; the Node error when the check itself fails. `viaProc` says
 * whether `/proc` answered (names below the descriptor can then go through `descriptorLink`).
 */
const verifySync = (fd: number, expected: string): { readonly viaProc: boolean } => {
  const actual = descriptorRealPathSync(fd)
  if (actual !== undefined) {
    if (actual !== expected) throw new PathMoved({ expected, actual })
    return { viaProc: true }
  }
  let real: string
  try {
    real = fs.realpathSync(expected)
  } catch {
    real = "(gone)"
  }
  if (real !== expected) throw new PathMoved({ expected, actual: real })
  if (!sameFile(fs.fstatSync(fd), fs.statSync(expected))) {
    throw new PathMoved({ expected, actual: `another file at ${expected}` })
  }
  return { viaProc: false }
}

// ---------------------------------------------------------------------------------------------
// the test seam

/**
 * The environment variable of the test seam: when it names a path prefix, every checked open (the
 * async ones: `openChecked`, `readdirChecked`, `makeDirectoryChecked`, and `writeFileAtomic`'s
 * directory), after its path was checked and before it is opened, writes `<prefix>.checked`
 * (holding the path about to be opened), waits until `<prefix>.go` exists, removes both
 * (`.checked` first) and goes on. A test swaps a directory in that window, deterministically,
 * without timing. Read here and nowhere else. Not prefixed `LOGBOOK_`: it is no setting.
 */
export const HANDSHAKE_ENV = "CONFINE_TEST_HANDSHAKE"

const HANDSHAKE_POLL_MS = 5

/** The test seam (`HANDSHAKE_ENV`); nothing when the variable is unset. */
export const betweenCheckAndOpen = (path: string): Effect.Effect<void> =>
  Effect.suspend(() => {
    const prefix = process.env[HANDSHAKE_ENV]
    if (prefix === undefined || prefix === "") return Effect.void
    return Effect.gen(function* () {
      // written whole, then renamed: the test polls for the file and must never read it half written
      // (it read "" once, in CI under Node 24)
      fs.writeFileSync(`${prefix}.checking`, path)
      fs.renameSync(`${prefix}.checking`, `${prefix}.checked`)
      while (!fs.existsSync(`${prefix}.go`)) yield* Effect.sleep(Duration.millis(HANDSHAKE_POLL_MS))
      // in this order: once `.go` is gone, the test knows a `.checked` it sees is the next one
      fs.rmSync(`${prefix}.checked`, { force: true })
      fs.rmSync(`${prefix}.go`, { force: true })
    })
  })

// ---------------------------------------------------------------------------------------------
// opening

/**
 * The entries of the directory at the real path `directory`, read through a descriptor checked to
 * be that directory (`readdir /proc/self/fd/<fd>`). Fails with `PathMoved` when the name led
 * elsewhere, with the Node error otherwise (`ENOTDIR` when it is not a directory). The test seam
 * first, then blocking calls (`readdirCheckedSync`): four thread-pool round trips a directory
 * would make a large walk several times slower.
 */
export const readdirChecked = (directory: string): Effect.Effect<Array<Dirent>, FsError | PathMoved> =>
  Effect.zipRight(
    betweenCheckAndOpen(directory),
    Effect.try({ try: () => readdirCheckedSync(directory), catch: toCheckedError })
  )

/** `readdirChecked` without the test seam, outside an Effect (the workspace snapshot's walk). */
export const readdirCheckedSync = (directory: string): Array<Dirent> => {
  const fd = fs.openSync(directory, DIRECTORY_FLAGS)
  try {
    const { viaProc } = verifySync(fd, directory)
    return fs.readdirSync(viaProc ? descriptorLink(fd) : directory, { withFileTypes: true })
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * Opens the real path `expected` to read, blocking, and checks it like `openChecked`; returns the
 * descriptor (the caller closes it). Throws `PathMoved` or the Node error.
 */
export const openCheckedSync = (expected: string, flags: number = READ_FLAGS): number =>
  openVerifiedSync(expected, flags).fd

const openVerifiedSync = (expected: string, flags: number): { readonly fd: number; readonly viaProc: boolean } => {
  const fd = fs.openSync(expected, flags)
  try {
    return { fd, viaProc: verifySync(fd, expected).viaProc }
  } catch (error) {
    fs.closeSync(fd)
    throw error
  }
}

/**
 * `openCheckedSync` for a tool call: the test seam first (`betweenCheckAndOpen`), then the open and
 * its check as blocking calls, in a scope that closes the descriptor. The calls are metadata calls
 * (open, the `/proc` link, later `fstat`) of microseconds on a local disk, where each call through
 * the thread pool waits for the event loop to come back to it (long, in a busy step). Path resolution (Workspace.ts) already blocks
 * the same way, so a hung mount stops the agent at the first of them either way.
 */
export const openCheckedScoped = (
  expected: string,
  flags: number = READ_FLAGS
): Effect.Effect<number, FsError | PathMoved, Scope.Scope> =>
  Effect.map(openVerifiedFdScoped(expected, flags), (opened) => opened.fd)

const openVerifiedFdScoped = (expected: string, flags: number) =>
  Effect.zipRight(
    betweenCheckAndOpen(expected),
    Effect.acquireRelease(
      Effect.try({ try: () => openVerifiedSync(expected, flags), catch: toCheckedError }),
      (opened) => Effect.sync(() => closeFdQuietly(opened.fd))
    )
  )

/**
 * A directory, checked to be the real path `directory`, that names below it go through: `at(name)`
 * is `/proc/self/fd/<fd>/<name>` (where there is no /proc: `<directory>/<name>`, by name).
 */
export interface CheckedDirectory {
  readonly fd: number
  readonly at: (name: string) => string
}

/** Opens the directory `directory` checked (`openCheckedScoped`: blocking calls), in a scope that closes it. */
export const openDirectoryScoped = (
  directory: string
): Effect.Effect<CheckedDirectory, FsError | PathMoved, Scope.Scope> =>
  Effect.map(openVerifiedFdScoped(directory, DIRECTORY_FLAGS), ({ fd, viaProc }) => {
    const base = viaProc ? descriptorLink(fd) : directory
    return { fd, at: (name: string) => nodePath.join(base, name) }
  })

/** Closes descriptor `fd`, ignoring a failure (already closed, or the file system refuses). */
export const closeFdQuietly = (fd: number): void => {
  try {
    fs.closeSync(fd)
  } catch {
    // already closed, or the file system refuses: nothing to keep
  }
}

/**
 * Bytes of a file read, or written, with blocking calls; a read past them, or a larger write, goes
 * through the thread pool.
 */
export const BLOCKING_IO_BYTES = 1024 * 1024

/**
 * Reads up to `buffer.length` bytes of descriptor `fd` at `position` into `buffer`; the number read
 * (0 at the end). Below `BLOCKING_IO_BYTES` a blocking `readSync` (a small file costs no thread-pool
 * round trip); from there on through the thread pool, so a huge file, or one that keeps growing,
 * does not hold the event loop for longer than its first mebibyte.
 */
export const readFdAt = (fd: number, buffer: Buffer, position: number): Effect.Effect<number, FsError> =>
  position < BLOCKING_IO_BYTES
    ? Effect.try({ try: () => fs.readSync(fd, buffer, 0, buffer.length, position), catch: toFsError })
    : throughPool<number>((done) => fs.read(fd, buffer, 0, buffer.length, position, done))

/**
 * All of descriptor `fd` from its start. `size` (its `fstat` size) sizes the first buffer, up to
 * `BLOCKING_IO_BYTES`; the file may have grown since, so it is read until a read gives nothing, or
 * until `limit` bytes are read.
 */
export const readFdAll = (fd: number, size: number, limit = Number.POSITIVE_INFINITY): Effect.Effect<Buffer, FsError> =>
  Effect.gen(function* () {
    const chunks: Array<Buffer> = []
    let position = 0
    let next = Math.min(Math.max(size, READ_ALL_CHUNK), BLOCKING_IO_BYTES, limit)
    while (next > 0) {
      const buffer = Buffer.allocUnsafe(next)
      const bytesRead = yield* readFdAt(fd, buffer, position)
      if (bytesRead === 0) break
      chunks.push(buffer.subarray(0, bytesRead))
      position += bytesRead
      next = Math.min(Math.max(READ_ALL_CHUNK, Math.min(size - position, BLOCKING_IO_BYTES)), limit - position)
    }
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, position)
  })

const READ_ALL_CHUNK = 64 * 1024

/**
 * Writes all of `content` to descriptor `fd` from its start: a blocking `writeFileSync` up to
 * `BLOCKING_IO_BYTES`, through the thread pool when larger.
 */
export const writeFdAll = (fd: number, content: string | Uint8Array): Effect.Effect<void, FsError> =>
  (typeof content === "string" ? Buffer.byteLength(content) : content.byteLength) <= BLOCKING_IO_BYTES
    ? Effect.try({ try: () => fs.writeFileSync(fd, content), catch: toFsError })
    : throughPool<void>((done) => fs.writeFile(fd, content, (error) => done(error, undefined)))

/** `fsync` of descriptor `fd`, through the thread pool (a flush to the disk can take milliseconds). */
export const syncFd = (fd: number): Effect.Effect<void, FsError> =>
  throughPool<void>((done) => fs.fsync(fd, (error) => done(error, undefined)))

/** A callback-style `fs` call (through the thread pool) as an Effect that fails with an `FsError`. */
const throughPool = <A>(
  start: (done: (error: NodeJS.ErrnoException | null, value: A) => void) => void
): Effect.Effect<A, FsError> =>
  Effect.async<A, FsError>((resume) => {
    start((error, value) => resume(error === null ? Effect.succeed(value) : Effect.fail(toFsError(error))))
  })

/**
 * Creates the directory at the real path `directory` and its missing parents, one at a time, each
 * through the checked descriptor of its parent (`mkdir /proc/self/fd/<parent>/<name>`): a parent
 * swapped for a symlink fails with `PathMoved` instead of creating directories where it leads.
 */
export const makeDirectoryChecked = (directory: string): Effect.Effect<void, FsError | PathMoved> =>
  Effect.gen(function* () {
    // the deepest ancestor that exists
    const missing: Array<string> = []
    let existing = directory
    while (true) {
      const path = existing
      const found = yield* Effect.try({
        try: () => fs.lstatSync(path, { throwIfNoEntry: false }) !== undefined,
        catch: toFsError
      })
      if (found) break
      const parent = nodePath.dirname(existing)
      if (parent === existing) break
      missing.unshift(nodePath.basename(existing))
      existing = parent
    }
    let current = existing
    for (const name of missing) {
      yield* Effect.scoped(
        Effect.gen(function* () {
          const parent = yield* openDirectoryScoped(current)
          yield* Effect.try({ try: () => fs.mkdirSync(parent.at(name)), catch: toFsError }).pipe(
            Effect.catchIf(
              (error) => errnoCode(error) === "EEXIST",
              () => Effect.void
            )
          )
        })
      )
      current = nodePath.join(current, name)
    }
    // the directory itself, as it is now, is the one asked for
    yield* Effect.scoped(openDirectoryScoped(directory))
  })
