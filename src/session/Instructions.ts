/**
 * The project's instructions: the `AGENTS.md` files a session's system prompt carries, found the
 * way OpenCode, Claude Code and Codex find theirs (docs/prompt.md).
 *
 * - The user's own file first (`userFile`: `~/.config/logbook/AGENTS.md`, beside the user config).
 * - Then, from the repository root down to the workspace directory, `AGENTS.md` of each directory,
 *   or `CLAUDE.md` where there is no `AGENTS.md` — the more specific last. The repository root is
 *   the nearest ancestor of the workspace (itself included) that holds `.git` (a directory, or a
 *   file in a worktree or submodule). Outside a repository only the workspace directory is read.
 *
 * Only regular files count (a symlink to one does; a directory or FIFO named `AGENTS.md` does not,
 * and `CLAUDE.md` is tried instead). A file reached twice (a symlink to another one of the list) is
 * read once. A blank file is left out.
 *
 * Bounded: at most `maxFileBytes` of a file are read, and `maxTotalBytes` of all of them together;
 * the budget goes to the more specific files first (the workspace's, then up to the root, then the
 * user's). A file cut short ends with a note saying so, in the prompt. A file that cannot be read is
 * skipped (`skipped`, with the reason; the session logs a warning): finding never fails.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Context, Effect, Layer, Option } from "effect"

/** The names looked for in each directory, in order: the first regular file wins. */
export const INSTRUCTION_FILE_NAMES: ReadonlyArray<string> = ["AGENTS.md", "CLAUDE.md"]
/** The most bytes read of one instructions file (32 KiB). */
export const MAX_INSTRUCTION_FILE_BYTES = 32 * 1024
/** The most bytes of all instructions files together (64 KiB). */
export const MAX_INSTRUCTIONS_BYTES = 64 * 1024

export interface InstructionsOptions {
  /** the user's own instructions file (`~/.config/logbook/AGENTS.md`); none when absent */
  readonly userFile?: string | undefined
  /** default `INSTRUCTION_FILE_NAMES` */
  readonly fileNames?: ReadonlyArray<string> | undefined
  /** default `MAX_INSTRUCTION_FILE_BYTES` */
  readonly maxFileBytes?: number | undefined
  /** default `MAX_INSTRUCTIONS_BYTES` */
  readonly maxTotalBytes?: number | undefined
}

/** One file that goes into the system prompt. */
export interface InstructionFile {
  /** the path as found (a symlink's own path, not its target's) */
  readonly path: string
  /** `user`: the user's own file; `project`: one of the repository's */
  readonly scope: "user" | "project"
  /** its size on disk, in bytes */
  readonly size: number
  /** what goes into the prompt: the whole text, or its first `includedBytes` bytes */
  readonly content: string
  readonly includedBytes: number
  /** `file`: longer than the per-file limit; `total`: the limit of all files together ran out */
  readonly cut?: { readonly limit: "file" | "total"; readonly maxBytes: number } | undefined
}

export interface SkippedInstructionFile {
  readonly path: string
  /** why it could not be read, e.g. `permission denied` */
  readonly reason: string
}

export interface LoadedInstructions {
  /** the repository root (the nearest ancestor with `.git`), if the workspace is in one */
  readonly root: string | undefined
  /** the directories looked in, from the root down to the workspace */
  readonly directories: ReadonlyArray<string>
  readonly userFile: string | undefined
  /** the files, in prompt order: the user's, then from the root down to the workspace */
  readonly files: ReadonlyArray<InstructionFile>
  readonly skipped: ReadonlyArray<SkippedInstructionFile>
}

export const noInstructions: LoadedInstructions = {
  root: undefined,
  directories: [],
  userFile: undefined,
  files: [],
  skipped: []
}

/** A platform error as a few words: `permission denied`, `EIO: i/o error` … */
const reasonOf = (error: unknown): string => {
  if (typeof error === "object" && error !== null && "reason" in error) {
    const { reason, description } = error as { reason: string; description?: unknown }
    if (reason === "PermissionDenied") return "permission denied"
    if (typeof description === "string" && description !== "") return description.split(",")[0]!
    return reason
  }
  return String(error)
}

const isNotFound = (error: unknown): boolean =>
  typeof error === "object" &&
  error !== null &&
  "reason" in error &&
  (error as { reason: string }).reason === "NotFound"

/** The length of the longest prefix of `bytes[0, max)` that does not split a UTF-8 character. */
const utf8Boundary = (bytes: Uint8Array, max: number): number => {
  if (bytes.length <= max) return bytes.length
  let end = max
  // bytes[end] is the first byte left out: while it continues a character, that character goes too
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--
  return end
}

interface Candidate {
  readonly path: string
  readonly scope: "user" | "project"
}

/** Finds and reads the instruction files of a workspace (see the module doc). Never fails. */
export const findInstructions = Effect.fn("Instructions.find")(function* (
  cwd: string,
  options: InstructionsOptions = {}
) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const names = options.fileNames ?? INSTRUCTION_FILE_NAMES
  const maxFileBytes = Math.max(0, Math.floor(options.maxFileBytes ?? MAX_INSTRUCTION_FILE_BYTES))
  const maxTotalBytes = Math.max(0, Math.floor(options.maxTotalBytes ?? MAX_INSTRUCTIONS_BYTES))
  let budget = maxTotalBytes
  const workspace = path.resolve(cwd)
  const skipped: Array<SkippedInstructionFile> = []

  // the repository root: the nearest directory (the workspace included) with a `.git`
  let root: string | undefined
  for (let dir = workspace; ; dir = path.dirname(dir)) {
    const found = yield* fs.exists(path.join(dir, ".git")).pipe(Effect.orElseSucceed(() => false))
    if (found) {
      root = dir
      break
    }
    if (path.dirname(dir) === dir) break
  }
  const directories: Array<string> = [workspace]
  if (root !== undefined) {
    for (let dir = workspace; dir !== root; ) {
      dir = path.dirname(dir)
      directories.unshift(dir)
    }
  }

  /** Whether `file` is a regular file (after symlinks); a failure other than "not found" is skipped. */
  const isFile = (file: string) =>
    fs.stat(file).pipe(
      Effect.map((info) => info.type === "File"),
      Effect.catchAll((error) =>
        Effect.sync(() => {
          if (!isNotFound(error)) skipped.push({ path: file, reason: reasonOf(error) })
          return false
        })
      )
    )

  const candidates: Array<Candidate> = []
  if (options.userFile !== undefined && (yield* isFile(options.userFile))) {
    candidates.push({ path: options.userFile, scope: "user" })
  }
  for (const dir of directories) {
    for (const name of names) {
      const file = path.join(dir, name)
      const before = skipped.length
      if (yield* isFile(file)) {
        candidates.push({ path: file, scope: "project" })
        break
      }
      // a file that exists but cannot be looked at is this directory's: no fallback to the next name
      if (skipped.length > before) break
    }
  }

  // a file reached twice (a symlink to another of the list) is read once, where it comes first
  const seen = new Set<string>()
  const unique: Array<Candidate> = []
  for (const candidate of candidates) {
    const real = yield* fs.realPath(candidate.path).pipe(Effect.orElseSucceed(() => candidate.path))
    if (seen.has(real)) continue
    seen.add(real)
    unique.push(candidate)
  }

  /** Reads at most `want + 1` bytes (one more tells a longer file) and the size on disk. */
  const readHead = (file: string, want: number) =>
    Effect.scoped(
      Effect.gen(function* () {
        const handle = yield* fs.open(file, { flag: "r" })
        const info = yield* handle.stat
        const chunks: Array<Uint8Array> = []
        let total = 0
        while (total < want + 1) {
          const chunk = yield* handle.readAlloc(want + 1 - total)
          if (Option.isNone(chunk)) break
          chunks.push(chunk.value)
          total += chunk.value.length
        }
        const bytes = new Uint8Array(total)
        let offset = 0
        for (const chunk of chunks) {
          bytes.set(chunk, offset)
          offset += chunk.length
        }
        return { bytes, size: Math.max(Number(info.size), total) }
      })
    )

  // the budget goes to the more specific files first: the workspace's, up to the root, the user's
  const decoder = new TextDecoder("utf-8")
  const read: Array<InstructionFile | undefined> = unique.map(() => undefined)
  for (let i = unique.length - 1; i >= 0; i--) {
    const candidate = unique[i]!
    const want = Math.min(maxFileBytes, budget)
    const head = yield* readHead(candidate.path, want).pipe(
      Effect.map(Option.some),
      Effect.catchAll((error) =>
        Effect.sync(() => {
          skipped.push({ path: candidate.path, reason: reasonOf(error) })
          return Option.none<{ readonly bytes: Uint8Array; readonly size: number }>()
        })
      )
    )
    if (Option.isNone(head)) continue
    const { bytes, size } = head.value
    const end = utf8Boundary(bytes, want)
    const content = decoder.decode(bytes.subarray(0, end))
    const whole = bytes.length <= want
    // a blank file says nothing; one the budget left no room for is still named (with its note)
    if (whole && content.trim() === "") continue
    budget -= end
    const cut: InstructionFile["cut"] = whole
      ? undefined
      : want < maxFileBytes
        ? { limit: "total", maxBytes: maxTotalBytes }
        : { limit: "file", maxBytes: maxFileBytes }
    read[i] = {
      path: candidate.path,
      scope: candidate.scope,
      size,
      content,
      includedBytes: end,
      ...(cut === undefined ? {} : { cut })
    }
  }

  return {
    root,
    directories,
    userFile: options.userFile,
    files: read.filter((file): file is InstructionFile => file !== undefined),
    skipped
  } satisfies LoadedInstructions
})

/** What a cut file ends with in the prompt. */
const cutNote = (file: InstructionFile): string => {
  if (file.cut === undefined) return ""
  const why =
    file.cut.limit === "file"
      ? `logbook reads at most ${file.cut.maxBytes} bytes of an instructions file`
      : `all instructions files together are limited to ${file.cut.maxBytes} bytes`
  return `\n\n[logbook: this file was cut after ${file.includedBytes} of its ${file.size} bytes: ${why}]`
}

/**
 * The instructions as a section of the system prompt: a short preface, then each file under a
 * header naming its path (the user's first, then from the root down to the workspace). Empty when
 * there are none.
 */
export const instructionsSection = (loaded: LoadedInstructions): string => {
  if (loaded.files.length === 0) return ""
  const parts = [
    "# Instructions",
    "The user and the project left the instructions below for you, the user's own first, " +
      "then from the repository root down to the working directory. Follow them. Where they disagree, the later " +
      "(more specific) ones win, and what the user asks in the conversation wins over all of them."
  ]
  for (const file of loaded.files) {
    const whose = file.scope === "user" ? " (the user's own instructions, for every project)" : ""
    parts.push(`## ${file.path}${whose}\n\n${file.content.trimEnd()}${cutNote(file)}`)
  }
  return parts.join("\n\n")
}

/** The warnings a run shows for the files it could not read. */
export const warnSkipped = (loaded: LoadedInstructions): Effect.Effect<void> =>
  Effect.forEach(
    loaded.skipped,
    (file) =>
      Effect.logWarning(
        `cannot read the instructions file ${file.path} (${file.reason}); it is left out of the system prompt`
      ),
    { discard: true }
  )

export interface InstructionsService {
  /** The instruction files of a workspace directory (see `findInstructions`). Never fails. */
  readonly load: (cwd: string) => Effect.Effect<LoadedInstructions>
}

/** Makes the service over the platform's `FileSystem` and `Path`. */
export const makeInstructions = (
  options: InstructionsOptions = {}
): Effect.Effect<InstructionsService, never, FileSystem.FileSystem | Path.Path> =>
  Effect.map(Effect.context<FileSystem.FileSystem | Path.Path>(), (context) => ({
    load: (cwd) => findInstructions(cwd, options).pipe(Effect.provide(context))
  }))

/**
 * Where a session's instructions come from. Without a layer: none (a program that embeds the agent
 * chooses to read a project's files); `logbook run` provides `Instructions.layer` with the user's file.
 */
export class Instructions extends Context.Reference<Instructions>()("logbook/Instructions", {
  defaultValue: (): InstructionsService => ({ load: () => Effect.succeed(noInstructions) })
}) {
  static readonly layer = (
    options: InstructionsOptions = {}
  ): Layer.Layer<Instructions, never, FileSystem.FileSystem | Path.Path> =>
    Layer.effect(Instructions, makeInstructions(options))
}
