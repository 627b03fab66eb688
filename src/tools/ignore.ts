/**
 * Finding files for `glob` and `grep`: glob patterns compiled to regular expressions, `.gitignore`
 * rules, and the walk of a directory tree that honours both.
 *
 * Glob patterns match a whole path with `/` separators: `*` is any run of characters but `/`,
 * `?` one character but `/`, `[abc]` / `[a-z]` / `[!abc]` a class, `{a,b}` alternatives (nested,
 * and they may contain `/`), `\x` the character `x`, and `**` as a whole path segment any number
 * of directories, none included (so `**` followed by `/*.ts` matches `a.ts` and `x/y/a.ts`;
 * `src/**` matches everything below `src`).
 * A `*` also matches a name starting with a dot.
 *
 * `.gitignore` files (git's syntax, without braces): blank lines and `#` comments are skipped, `!`
 * re-includes, a trailing `/` matches directories only, a pattern with a `/` at its start or in its
 * middle is anchored at the directory of its `.gitignore`, one without matches a name at any depth.
 * The last matching rule wins, rules of a deeper `.gitignore` after those of its parents; a file in
 * an ignored directory is ignored whatever the rules say about it (git does not look inside).
 */
import * as fs from "node:fs"
import * as nodePath from "node:path"
import { Effect } from "effect"
import { type PathMoved, READ_FLAGS, readdirChecked, readdirCheckedSync, toCheckedError } from "./confine.js"
import { compareNames, SKIPPED_DIRECTORIES } from "./directoryTree.js"
import { type FsError, toFsError } from "./FsError.js"

// ---------------------------------------------------------------------------------------------
// glob patterns

/** A glob pattern that cannot be used (too many brace alternatives). */
export class InvalidGlob extends Error {}

/** Most alternatives one pattern's braces may expand to. */
const MAX_ALTERNATIVES = 1024

/** The index of the `]` that closes the class opened at `open`, or -1 when it is not a class. */
const classEnd = (pattern: string, open: number): number => {
  let i = open + 1
  if (pattern[i] === "!" || pattern[i] === "^") i++
  if (pattern[i] === "]") i++ // a `]` first is a member
  for (; i < pattern.length; i++) {
    const c = pattern[i]
    if (c === "\\") i++
    else if (c === "/") return -1
    else if (c === "]") return i
  }
  return -1
}

/** `body` split at its top-level commas. */
const splitAlternatives = (body: string): Array<string> => {
  const parts: Array<string> = []
  let depth = 0
  let from = 0
  for (let i = 0; i < body.length; i++) {
    const c = body[i]
    if (c === "\\") i++
    else if (c === "[") {
      const close = classEnd(body, i)
      if (close > 0) i = close
    } else if (c === "{") depth++
    else if (c === "}" && depth > 0) depth--
    else if (c === "," && depth === 0) {
      parts.push(body.slice(from, i))
      from = i + 1
    }
  }
  parts.push(body.slice(from))
  return parts
}

/** `a{b,c}d` -> `abd`, `acd`; a `{…}` without a comma stays as it is (literal). */
export const expandBraces = (pattern: string): Array<string> => {
  let depth = 0
  let open = -1
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]
    if (c === "\\") i++
    else if (c === "[") {
      const close = classEnd(pattern, i)
      if (close > 0) i = close
    } else if (c === "{") {
      if (depth === 0) open = i
      depth++
    } else if (c === "}" && depth > 0) {
      depth--
      if (depth === 0) {
        const parts = splitAlternatives(pattern.slice(open + 1, i))
        if (parts.length > 1) {
          const head = pattern.slice(0, open)
          const tail = pattern.slice(i + 1)
          const out: Array<string> = []
          for (const part of parts) {
            for (const expanded of expandBraces(head + part + tail)) {
              out.push(expanded)
              if (out.length > MAX_ALTERNATIVES) {
                throw new InvalidGlob(`its braces expand to more than ${MAX_ALTERNATIVES} alternatives`)
              }
            }
          }
          return out
        }
      }
    }
  }
  return [pattern]
}

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")

/** One path segment (no `/`, no braces) as a regular expression. */
const segmentSource = (segment: string): string => {
  let out = ""
  for (let i = 0; i < segment.length; i++) {
    const c = segment[i]!
    if (c === "\\") {
      i++
      if (i < segment.length) out += escapeRegExp(segment[i]!)
      else out += "\\\\"
    } else if (c === "*") {
      while (segment[i + 1] === "*") i++
      out += "[^/]*"
    } else if (c === "?") {
      out += "[^/]"
    } else if (c === "[" && classEnd(segment, i) > 0) {
      const close = classEnd(segment, i)
      let j = i + 1
      let negate = false
      if (segment[j] === "!" || segment[j] === "^") {
        negate = true
        j++
      }
      let members = ""
      for (; j < close; j++) {
        const m = segment[j]!
        if (m === "\\" && j + 1 < close) {
          j++
          members += `\\${segment[j]}`
        } else if (m === "-") members += "-"
        else members += /[\]\\^[]/.test(m) ? `\\${m}` : m
      }
      out += negate ? `[^/${members}]` : `[${members}]`
      i = close
    } else {
      out += escapeRegExp(c)
    }
  }
  return out
}

/** A pattern without braces as a regular expression source, matching a whole path. */
const pathSource = (pattern: string): string => {
  const segments = pattern.split("/")
  let out = ""
  segments.forEach((segment, i) => {
    const last = i === segments.length - 1
    if (segment === "**") out += last ? ".*" : "(?:.*/)?"
    else out += segmentSource(segment) + (last ? "" : "/")
  })
  return out
}

/**
 * A glob pattern as a regular expression that matches a whole relative path (`/` separators).
 * `braces: false` keeps `{` and `}` literal, as git does. Throws `InvalidGlob`.
 */
export const compileGlob = (pattern: string, options: { readonly braces?: boolean } = {}): RegExp => {
  const alternatives = options.braces === false ? [pattern] : expandBraces(pattern)
  return new RegExp(`^(?:${alternatives.map(pathSource).join("|")})$`)
}

// ---------------------------------------------------------------------------------------------
// .gitignore

export interface IgnoreRule {
  /** the line it came from */
  readonly source: string
  readonly regex: RegExp
  readonly negate: boolean
  readonly directoryOnly: boolean
}

/** The rules of one `.gitignore` file; `base` is its directory relative to the root ("" for the root). */
export interface IgnoreFile {
  readonly base: string
  readonly rules: ReadonlyArray<IgnoreRule>
}

/** The rules of a `.gitignore` file's text, in order. */
export const parseGitignore = (text: string): Array<IgnoreRule> => {
  const rules: Array<IgnoreRule> = []
  for (const raw of text.split("\n")) {
    // trailing spaces are dropped unless escaped with a backslash
    let line = raw.replace(/\r$/, "").replace(/(?<!\\) +$/, "")
    if (line === "" || line.startsWith("#")) continue
    const negate = line.startsWith("!")
    if (negate) line = line.slice(1)
    const directoryOnly = line.endsWith("/")
    line = line.replace(/\/+$/, "")
    if (line === "") continue
    const anchored = line.includes("/")
    if (line.startsWith("/")) line = line.slice(1)
    const pattern = anchored ? line : `**/${line}`
    rules.push({ source: raw, regex: compileGlob(pattern, { braces: false }), negate, directoryOnly })
  }
  return rules
}

/**
 * Whether the entry `relative` (to the root, `/` separators) is ignored by `files`, judging the
 * entry itself only (the walk never enters an ignored directory): the last matching rule wins.
 */
export const isIgnoredEntry = (files: ReadonlyArray<IgnoreFile>, relative: string, isDirectory: boolean): boolean => {
  let ignored = false
  for (const file of files) {
    let path = relative
    if (file.base !== "") {
      if (!relative.startsWith(`${file.base}/`)) continue
      path = relative.slice(file.base.length + 1)
    }
    for (const rule of file.rules) {
      if (rule.directoryOnly && !isDirectory) continue
      if (rule.regex.test(path)) ignored = !rule.negate
    }
  }
  return ignored
}

/** Whether `relative` is ignored, itself or because one of its parent directories is. */
export const isIgnored = (files: ReadonlyArray<IgnoreFile>, relative: string, isDirectory: boolean): boolean => {
  const segments = relative.split("/")
  for (let i = 1; i < segments.length; i++) {
    if (isIgnoredEntry(files, segments.slice(0, i).join("/"), true)) return true
  }
  return isIgnoredEntry(files, relative, isDirectory)
}

/**
 * How a walk reads the file system: blocking calls either way (a thread-pool round trip per call
 * made a walk several times slower), with the test seam of confine.ts (the tools) or without it
 * (the workspace snapshot: see `walkFilesUpTo`).
 */
interface WalkFs {
  readonly readdir: (directory: string) => Effect.Effect<Array<fs.Dirent>, FsError | PathMoved>
  readonly readText: (file: string) => Effect.Effect<string, FsError>
}
/**
 * A `.gitignore`'s text, with blocking calls: opened non-blocking and read only when it is a regular
 * file, so a FIFO of that name cannot hang the walk (and with it the event loop); anything else
 * fails (no rules from it).
 */
const readTextSync = (file: string): Effect.Effect<string, FsError> =>
  Effect.try({
    try: () => {
      const fd = fs.openSync(file, READ_FLAGS)
      try {
        if (!fs.fstatSync(fd).isFile()) throw new Error(`${file} is not a regular file`)
        return fs.readFileSync(fd, "utf8")
      } finally {
        fs.closeSync(fd)
      }
    },
    catch: toFsError
  })
// directories are read through a descriptor checked to be the directory walked (confine.ts): one
// swapped for a symlink since its parent was read is not followed
const toolFs: WalkFs = { readdir: readdirChecked, readText: readTextSync }
const snapshotFs: WalkFs = {
  readdir: (directory) => Effect.try({ try: () => readdirCheckedSync(directory), catch: toCheckedError }),
  readText: readTextSync
}

const readIgnoreFile = (
  directory: string,
  base: string,
  io: WalkFs = toolFs
): Effect.Effect<ReadonlyArray<IgnoreFile>> =>
  io.readText(nodePath.join(directory, ".gitignore")).pipe(
    Effect.map((text) => [{ base, rules: parseGitignore(text) }]),
    // no .gitignore (or an unreadable one): no rules
    Effect.orElseSucceed(() => [])
  )

// ---------------------------------------------------------------------------------------------
// the walk

export interface WalkedFile {
  /** the absolute path */
  readonly absolute: string
  /** the path relative to the directory walked, with `/` separators */
  readonly relative: string
  /** a symlink (to anything but a directory known at walk time): the caller stats it to know */
  readonly symlink: boolean
}

/**
 * The files below the directory `start` (inside the workspace `root`, both real paths), depth
 * first with each directory's entries sorted by name. `.git`, `node_modules` and what the
 * `.gitignore` files of the root, of the directories between it and `start`, and below `start`
 * ignore are left out; symlinks to directories are not followed; unreadable subdirectories are
 * skipped. The rules never apply to `start` itself. Fails with the Node error when `start` cannot
 * be read.
 */
export const walkFiles = (root: string, start: string): Effect.Effect<Array<WalkedFile>, FsError | PathMoved> =>
  Effect.map(walkFilesUpTo(root, start, Number.POSITIVE_INFINITY), (walk) => walk.files)

/**
 * `walkFiles` that stops after `limit` files: `truncated` says files were left unvisited (the
 * workspace snapshot's file bound). Directories are read with blocking calls, each directory its
 * own step, so the walk yields between them. `snapshot`: without confine.ts's test seam (the
 * snapshot around a command, which a confinement test must not have to answer for).
 */
export const walkFilesUpTo = (
  root: string,
  start: string,
  limit: number,
  options: { readonly snapshot?: boolean } = {}
): Effect.Effect<{ readonly files: Array<WalkedFile>; readonly truncated: boolean }, FsError | PathMoved> =>
  Effect.gen(function* () {
    const io = options.snapshot === true ? snapshotFs : toolFs
    const startRelative = nodePath.relative(root, start).split(nodePath.sep).join("/")
    // the .gitignore files from the root down to `start`
    let ignores: ReadonlyArray<IgnoreFile> = yield* readIgnoreFile(root, "", io)
    if (startRelative !== "") {
      const segments = startRelative.split("/")
      for (let i = 1; i <= segments.length; i++) {
        const base = segments.slice(0, i).join("/")
        ignores = [...ignores, ...(yield* readIgnoreFile(nodePath.join(root, base), base, io))]
      }
    }
    const files: Array<WalkedFile> = []
    let truncated = false
    const join = (a: string, b: string) => (a === "" ? b : `${a}/${b}`)

    const visit = (
      directory: string,
      relative: string,
      rules: ReadonlyArray<IgnoreFile>,
      isStart: boolean
    ): Effect.Effect<void, FsError | PathMoved> =>
      Effect.gen(function* () {
        const read = yield* io.readdir(directory).pipe(Effect.either)
        if (read._tag === "Left") {
          if (isStart) return yield* Effect.fail(read.left)
          return
        }
        const fromRoot = nodePath.relative(root, directory).split(nodePath.sep).join("/")
        const here = isStart ? rules : [...rules, ...(yield* readIgnoreFile(directory, fromRoot, io))]
        const dirents = read.right.sort((a, b) => compareNames(a.name, b.name))
        for (const dirent of dirents) {
          if (truncated) return
          const absolute = nodePath.join(directory, dirent.name)
          const entryFromRoot = join(fromRoot, dirent.name)
          const entryRelative = join(relative, dirent.name)
          if (dirent.isDirectory()) {
            if (SKIPPED_DIRECTORIES.has(dirent.name)) continue
            if (isIgnoredEntry(here, entryFromRoot, true)) continue
            yield* visit(absolute, entryRelative, here, false)
          } else if (dirent.isFile() || dirent.isSymbolicLink()) {
            if (isIgnoredEntry(here, entryFromRoot, false)) continue
            if (files.length >= limit) {
              truncated = true
              return
            }
            files.push({ absolute, relative: entryRelative, symlink: dirent.isSymbolicLink() })
          }
        }
      })

    yield* visit(start, "", ignores, true)
    return { files, truncated }
  })
