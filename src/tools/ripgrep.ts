/**
 * ripgrep (`rg`) as an accelerator for `grep`: it finds the candidate lines of many files fast;
 * `grep` confirms every one of them with the JavaScript regular expression, so what the model
 * reads never depends on ripgrep's regex dialect.
 *
 * Which `rg`: the `LOGBOOK_RIPGREP` environment variable. Unset, empty or `1`: `rg` on `PATH`;
 * `0`: never use ripgrep; anything else: that binary (a path, or a name looked up on `PATH`). The
 * binary must answer `--version` with `ripgrep …`. The answer is cached per process (per value of
 * the variable); no usable binary means grep searches in JavaScript, as it does without ripgrep.
 *
 * Search: rg gets the files to search as explicit paths (grep's own walk decides which files, so
 * the ignore rules, `include` and the workspace confinement stay grep's), in batches that fit on a
 * command line, with `--no-config --text --encoding none` (every file as raw bytes: binary files
 * and size limits are grep's to judge) and `--null --line-number --with-filename --no-heading`.
 * The process is acquired with `Effect.acquireRelease`: an interrupted search kills it and waits
 * for it to exit.
 *
 * The pattern is translated from JavaScript to ripgrep's (Rust) syntax by `translatePattern` so
 * that rg reports every line the JavaScript regex matches (more are fine: they are dropped by the
 * confirmation); a pattern it cannot translate that way is searched in JavaScript.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as nodePath from "node:path"
import { Deferred, Duration, Effect, Exit, Option, Schema } from "effect"
import { isExecutableFile, onPath } from "./executables.js"

/** The environment variable that picks the ripgrep binary, or turns ripgrep off (`0`). */
export const RIPGREP_ENV = "LOGBOOK_RIPGREP"

/** ripgrep could not be used for a search: why (the caller searches in JavaScript instead). */
export class RipgrepError extends Schema.TaggedError<RipgrepError>()("RipgrepError", {
  reason: Schema.String
}) {}

// ---------------------------------------------------------------------------------------------
// finding rg

/** How long `rg --version` may take. */
const PROBE_TIMEOUT_MS = 5_000

/** Whether `binary --version` says it is ripgrep. */
const answersAsRipgrep = (binary: string): Effect.Effect<boolean> =>
  Effect.async<boolean>((resume) => {
    let out = ""
    let child: ChildProcess
    try {
      child = spawn(binary, ["--version"], { stdio: ["ignore", "pipe", "ignore"], windowsHide: true })
    } catch {
      resume(Effect.succeed(false))
      return
    }
    child.stdout?.on("data", (chunk: Buffer) => {
      if (out.length < 200) out += chunk.toString("utf8")
    })
    child.once("error", () => resume(Effect.succeed(false)))
    child.once("close", (code) => resume(Effect.succeed(code === 0 && out.startsWith("ripgrep "))))
    return Effect.sync(() => void child.kill("SIGKILL"))
  }).pipe(
    Effect.timeout(Duration.millis(PROBE_TIMEOUT_MS)),
    Effect.orElseSucceed(() => false)
  )

/** setting of `LOGBOOK_RIPGREP` -> the binary found for it (`undefined`: none) */
const located = new Map<string, string | undefined>()

/**
 * The ripgrep binary to use, as `LOGBOOK_RIPGREP` says (see the module comment), or none. Looked
 * up once per process for each value of the variable.
 */
export const locateRipgrep: Effect.Effect<Option.Option<string>> = Effect.gen(function* () {
  const setting = (process.env[RIPGREP_ENV] ?? "").trim()
  if (setting === "0") return Option.none()
  if (located.has(setting)) return Option.fromNullable(located.get(setting))
  const name = setting === "" || setting === "1" ? "rg" : setting
  const candidate = name.includes("/") || name.includes("\\") ? nodePath.resolve(name) : onPath(name)
  const binary =
    candidate !== undefined && isExecutableFile(candidate) && (yield* answersAsRipgrep(candidate))
      ? candidate
      : undefined
  located.set(setting, binary)
  return Option.fromNullable(binary)
})

// ---------------------------------------------------------------------------------------------
// JavaScript pattern -> ripgrep pattern

export type Translation =
  | { readonly _tag: "Translated"; readonly pattern: string }
  | { readonly _tag: "Untranslatable"; readonly reason: string }

/** Most copies of an atom the counted repetitions of a translated pattern may ask for. */
export const MAX_TRANSLATED_SIZE = 10_000

/** Any run of non-ASCII bytes: what a JavaScript `.` or negated class may match, one UTF-16 unit or U+FFFD at a time. */
const HIGH_BYTES = "(?-u:[\\x80-\\xFF]+)"
/** JavaScript's `\s`: WhiteSpace and LineTerminator, without `\n` (a line never holds one) */
const SPACE_MEMBERS =
  "\\t\\x{0B}\\x{0C}\\x{0D} \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}"
const DIGIT_MEMBERS = "0-9"
const WORD_MEMBERS = "0-9A-Za-z_"

class Untranslatable extends Error {}

const hex = (code: number): string => `\\x{${code.toString(16).toUpperCase()}}`

const isAsciiWordChar = (c: string): boolean => /^[0-9A-Za-z_]$/.test(c)

/**
 * `source`, a JavaScript regular expression that compiles without the `u` flag (with `i` when
 * `ignoreCase`), in ripgrep's syntax, such that every line the JavaScript regex matches is a line
 * ripgrep reports; ripgrep may report more. Lines are bytes to ripgrep (UTF-8 where valid), text to
 * JavaScript (UTF-16, invalid bytes decoded as U+FFFD, one trailing `\r` dropped), so:
 *
 * - `\d`, `\w`, `\s` and their negations become JavaScript's (ASCII / JavaScript's space) classes,
 *   `\b` and `\B` ASCII word boundaries (Rust's are Unicode);
 * - `.`, negated classes, classes that hold U+FFFD or surrogates, and U+FFFD or a surrogate (half of
 *   an astral character) as a literal also match any run of non-ASCII bytes: JavaScript's match one
 *   UTF-16 unit of an astral character, or the U+FFFD of an invalid byte, where Rust's match whole
 *   characters only;
 * - `$` may follow a `\r` (JavaScript drops it from the line);
 * - a line feed is left out of classes (a line never holds one);
 * - every other character but ASCII letters, digits and `_` is written as `\x{…}`, so no character
 *   is special to one and not the other (Rust's class operators `&&`, `--`, `~~`, its escapes).
 *
 * Untranslatable (searched in JavaScript): lookaround, backreferences, octal and `\c` escapes,
 * identity escapes of letters (`\p` is `p` to JavaScript, a Unicode class to Rust), `[]` and `[^]`,
 * a class escape as a range end, a line feed outside a class, `^` after `$` (ripgrep 13 never
 * matches `$^`, which matches an empty line in JavaScript), non-ASCII characters with
 * `ignoreCase` (JavaScript's case folding is not Rust's), and counted repetitions that ask for more
 * than `MAX_TRANSLATED_SIZE` copies of an atom (ripgrep compiles them into automata that can take
 * seconds and gigabytes).
 */
export const translatePattern = (source: string, ignoreCase: boolean): Translation => {
  const p: Cursor = { source, ignoreCase, i: 0, seenEnd: false }
  try {
    const whole = alternation(p)
    if (p.i < source.length) return { _tag: "Untranslatable", reason: `it has an unexpected "${source[p.i]}"` }
    return { _tag: "Translated", pattern: whole.out }
  } catch (error) {
    if (error instanceof Untranslatable) return { _tag: "Untranslatable", reason: error.message }
    throw error
  }
}

/** Where `translatePattern` is in the pattern it reads. */
interface Cursor {
  readonly source: string
  readonly ignoreCase: boolean
  /** the index of the next code unit to read */
  i: number
  /** a `$` was read: a `^` after it is untranslatable */
  seenEnd: boolean
}

/** A translated part of the pattern. */
interface Piece {
  readonly out: string
  /** copies of atoms the piece stands for */
  readonly size: number
  readonly quantifiable: boolean
}

const peek = (p: Cursor, offset = 0): string | undefined => p.source[p.i + offset]

const fail = (reason: string): never => {
  throw new Untranslatable(reason)
}

/** A literal character of the pattern (code unit `code`). */
const literal = (p: Cursor, code: number): string => {
  if (code === 0x0a) fail("it matches a line feed")
  // half of an astral character, or what JavaScript makes of a byte that is not UTF-8
  if ((code >= 0xd800 && code <= 0xdfff) || code === 0xfffd) return HIGH_BYTES
  if (code >= 0x80 && p.ignoreCase) fail("it holds non-ASCII characters and ignores case")
  const c = String.fromCharCode(code)
  return isAsciiWordChar(c) ? c : hex(code)
}

/** `count` hex digits at the cursor as a number (read), or undefined (nothing read). */
const hexDigits = (p: Cursor, count: number): number | undefined => {
  const digits = p.source.slice(p.i, p.i + count)
  if (digits.length !== count || !/^[0-9A-Fa-f]+$/.test(digits)) return undefined
  p.i += count
  return Number.parseInt(digits, 16)
}

/** The code unit of a character escape after `\` (the cursor at the letter), or a failure. */
const characterEscape = (p: Cursor, inClass: boolean): number => {
  const e = p.source[p.i++]!
  switch (e) {
    case "t":
      return 0x09
    case "n":
      return 0x0a
    case "v":
      return 0x0b
    case "f":
      return 0x0c
    case "r":
      return 0x0d
    case "0":
      if (/[0-9]/.test(peek(p) ?? "")) return fail("it has an octal escape")
      return 0
    case "x": {
      const code = hexDigits(p, 2)
      return code ?? fail("it has an incomplete \\x escape")
    }
    case "u": {
      const code = hexDigits(p, 4)
      return code ?? fail("it has an incomplete \\u escape")
    }
    case "b":
      if (inClass) return 0x08
      return fail("unreachable")
    default:
      if (/[0-9]/.test(e)) return fail("it has a backreference or an octal escape")
      if (e === "k") return fail("it has a backreference")
      if (e === "c") return fail("it has a \\c escape")
      if (/[A-Za-z]/.test(e)) return fail(`it has the escape \\${e}, which means another thing to ripgrep`)
      return e.charCodeAt(0)
  }
}

/** The members of a class escape (`\d`, `\W` …) as ASCII ranges, and whether it is negated. */
const classEscapeMembers = (e: string): { readonly members: string; readonly negated: boolean } | undefined => {
  switch (e) {
    case "d":
      return { members: DIGIT_MEMBERS, negated: false }
    case "D":
      return { members: DIGIT_MEMBERS, negated: true }
    case "w":
      return { members: WORD_MEMBERS, negated: false }
    case "W":
      return { members: WORD_MEMBERS, negated: true }
    case "s":
      return { members: SPACE_MEMBERS, negated: false }
    case "S":
      return { members: SPACE_MEMBERS, negated: true }
    default:
      return undefined
  }
}

const withHighBytes = (cls: string): string => `(?:${cls}|${HIGH_BYTES})`

/** A class being translated: its members so far, and whether it can match a surrogate or U+FFFD. */
interface ClassMembers {
  members: string
  oddUnits: boolean
}

/** One member of a class at the cursor: a character (its code unit) or a class escape. */
const classMember = (p: Cursor): { readonly code: number } | { readonly escape: string } => {
  const c = p.source[p.i]
  if (c === undefined) return fail("it has an unterminated class")
  if (c === "\\") {
    p.i++
    const e = peek(p)
    if (e !== undefined && classEscapeMembers(e) !== undefined) {
      p.i++
      return { escape: e }
    }
    if (e === "B") return fail("it has \\B in a class")
    return { code: characterEscape(p, true) }
  }
  p.i++
  return { code: c.charCodeAt(0) }
}

/** Adds `from`-`to` without the line feed (a line never holds one) and surrogates (matched as bytes). */
const addRange = (p: Cursor, cls: ClassMembers, from: number, to: number): void => {
  if (to >= 0x80 && p.ignoreCase) fail("it holds non-ASCII characters and ignores case")
  if ((from <= 0xfffd && to >= 0xfffd) || (from <= 0xdfff && to >= 0xd800)) cls.oddUnits = true
  for (const [a, b] of [
    [from, Math.min(to, 0x09)],
    [Math.max(from, 0x0b), Math.min(to, 0xd7ff)],
    [Math.max(from, 0xe000), to]
  ] as const) {
    if (a <= b) cls.members += a === b ? hex(a) : `${hex(a)}-${hex(b)}`
  }
}

/** A character class, the cursor just after its `[`. */
const characterClass = (p: Cursor): Piece => {
  const negate = peek(p) === "^"
  if (negate) p.i++
  if (peek(p) === "]") return fail(negate ? "it has [^]" : "it has []")
  const cls: ClassMembers = { members: "", oddUnits: negate }
  while (peek(p) !== "]") {
    const from = classMember(p)
    if ("escape" in from) {
      if (peek(p) === "-" && peek(p, 1) !== "]") return fail("it has a class escape as the end of a range")
      const m = classEscapeMembers(from.escape)!
      if (m.negated) {
        cls.members += `[^${m.members}]`
        cls.oddUnits = true
      } else cls.members += m.members
      continue
    }
    if (peek(p) === "-" && peek(p, 1) !== "]" && peek(p, 1) !== undefined) {
      p.i++
      const to = classMember(p)
      if ("escape" in to) return fail("it has a class escape as the end of a range")
      addRange(p, cls, from.code, to.code)
      continue
    }
    addRange(p, cls, from.code, from.code)
  }
  p.i++ // ]
  if (cls.members === "") {
    // only line feeds and surrogates
    if (negate) return { out: withHighBytes("(?s:.)"), size: 1, quantifiable: true }
    if (cls.oddUnits) return { out: HIGH_BYTES, size: 1, quantifiable: true }
    return fail("it has a class that only matches a line feed")
  }
  const out = `[${negate ? "^" : ""}${cls.members}]`
  return { out: cls.oddUnits ? withHighBytes(out) : out, size: 1, quantifiable: true }
}

/** A quantifier at the cursor and how many copies of its atom it asks for at most, or undefined. */
const quantifier = (p: Cursor): { readonly out: string; readonly factor: number } | undefined => {
  const c = peek(p)
  let out: string
  let factor: number
  if (c === "*" || c === "+" || c === "?") {
    p.i++
    out = c
    factor = 1
  } else if (c === "{") {
    const match = /^\{(\d+)(,(\d*))?\}/.exec(p.source.slice(p.i))
    if (match === null) return undefined // a literal `{`
    p.i += match[0].length
    const min = Number(match[1])
    const max = match[2] === undefined ? min : match[3] === "" ? undefined : Number(match[3])
    out = match[0]
    factor = Math.max(1, max ?? min + 1)
  } else return undefined
  if (peek(p) === "?") {
    p.i++
    out += "?"
  }
  return { out, factor }
}

/** A group, the cursor just after its `(`: capturing or not, a named one as a plain group. */
const group = (p: Cursor): Piece => {
  let open = "("
  if (peek(p) === "?") {
    if (peek(p, 1) === ":") {
      p.i += 2
      open = "(?:"
    } else if (
      peek(p, 1) === "=" ||
      peek(p, 1) === "!" ||
      (peek(p, 1) === "<" && (peek(p, 2) === "=" || peek(p, 2) === "!"))
    ) {
      return fail("it has a lookaround")
    } else if (peek(p, 1) === "<") {
      const close = p.source.indexOf(">", p.i)
      if (close < 0) return fail("it has an unterminated group name")
      p.i = close + 1
      open = "(?:"
    } else return fail("it has an unknown group")
  }
  const inner = alternation(p)
  if (peek(p) !== ")") return fail("it has an unterminated group")
  p.i++
  return { out: `${open}${inner.out})`, size: inner.size, quantifiable: true }
}

/** An escape outside a class, the cursor just after its `\`: a word boundary, a class escape, a character. */
const escapeAtom = (p: Cursor): Piece => {
  const e = peek(p)
  if (e === "b" || e === "B") {
    p.i++
    return { out: `(?-u:\\${e})`, size: 0, quantifiable: false }
  }
  if (e !== undefined) {
    const members = classEscapeMembers(e)
    if (members !== undefined) {
      p.i++
      return members.negated
        ? { out: withHighBytes(`[^${members.members}]`), size: 1, quantifiable: true }
        : { out: `[${members.members}]`, size: 1, quantifiable: true }
    }
  }
  return { out: literal(p, characterEscape(p, false)), size: 1, quantifiable: true }
}

/** One atom at the cursor (undefined at the end of a sequence: `|`, `)` or the end). */
const atom = (p: Cursor): Piece | undefined => {
  const c = peek(p)
  if (c === undefined || c === "|" || c === ")") return undefined
  p.i++
  switch (c) {
    case "^":
      // ripgrep 13 never matches `$^` (an empty line to JavaScript)
      if (p.seenEnd) fail("it has ^ after $")
      return { out: "^", size: 0, quantifiable: false }
    case "$":
      p.seenEnd = true
      return { out: "(?:\\x{0D}?$)", size: 0, quantifiable: false }
    case ".":
      return { out: withHighBytes("."), size: 1, quantifiable: true }
    case "[":
      return characterClass(p)
    case "(":
      return group(p)
    case "*":
    case "+":
    case "?":
      return fail("it has a quantifier with nothing to repeat")
    case "\\":
      return escapeAtom(p)
    case "{":
      if (/^\d+(,\d*)?\}/.test(p.source.slice(p.i))) return fail("it has a quantifier with nothing to repeat")
      return { out: literal(p, c.charCodeAt(0)), size: 1, quantifiable: true }
    default:
      return { out: literal(p, c.charCodeAt(0)), size: 1, quantifiable: true }
  }
}

/** Atoms, each perhaps quantified, up to a `|`, a `)` or the end. */
const sequence = (p: Cursor): Piece => {
  let out = ""
  let size = 0
  for (;;) {
    const piece = atom(p)
    if (piece === undefined) return { out, size, quantifiable: false }
    const q = quantifier(p)
    if (q === undefined) {
      out += piece.out
      size += piece.size
      continue
    }
    if (!piece.quantifiable) return fail("it repeats an assertion")
    out += `(?:${piece.out})${q.out}`
    size += Math.max(1, piece.size) * q.factor
    if (size > MAX_TRANSLATED_SIZE) fail("its counted repetitions are too large")
  }
}

/** Sequences separated by `|`. */
const alternation = (p: Cursor): Piece => {
  const first = sequence(p)
  let out = first.out
  let size = first.size
  while (peek(p) === "|") {
    p.i++
    const next = sequence(p)
    out += `|${next.out}`
    size += next.size
  }
  if (size > MAX_TRANSLATED_SIZE) fail("its counted repetitions are too large")
  return { out, size, quantifiable: false }
}

// ---------------------------------------------------------------------------------------------
// running rg

/** Most bytes of paths one rg command line carries (Windows allows 32,767 characters in all). */
const ARGUMENT_BYTES = process.platform === "win32" ? 24_000 : 128 * 1024
/** How long a killed rg may take to exit. */
const EXIT_WAIT_MS = 3_000
/** Most bytes of rg's stderr kept for the error. */
const STDERR_BYTES = 2_000

export interface RipgrepSearch {
  readonly binary: string
  readonly cwd: string
  /** the files to search, relative to `cwd` or absolute; none may contain a line feed */
  readonly paths: ReadonlyArray<string>
  /** in ripgrep's syntax (`translatePattern`) */
  readonly pattern: string
  readonly ignoreCase: boolean
  /**
   * Called for each line rg reports, in no particular order across files: the index of its file
   * in `paths`, its number (1-based), its bytes without the line feed (a `\r` before it kept).
   */
  readonly onLine: (file: number, line: number, text: Buffer) => void
}

interface Running {
  readonly child: ChildProcess
  readonly closed: Deferred.Deferred<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
  stderr: string
  /** why the output could not be read */
  failure: string | undefined
}

/** Splits rg's output into `path \0 line : text \n` records as it arrives. */
const recordReader = (onRecord: (record: Buffer) => void) => {
  let carry: Array<Buffer> = []
  return (chunk: Buffer): void => {
    let from = 0
    for (;;) {
      const end = chunk.indexOf(0x0a, from)
      if (end < 0) break
      const piece = chunk.subarray(from, end)
      if (carry.length > 0) {
        carry.push(piece)
        onRecord(Buffer.concat(carry))
        carry = []
      } else onRecord(piece)
      from = end + 1
    }
    if (from < chunk.length) carry.push(chunk.subarray(from))
  }
}

const spawnRipgrep = (
  binary: string,
  args: ReadonlyArray<string>,
  cwd: string,
  onRecord: (record: Buffer) => string | undefined
): Effect.Effect<Running, RipgrepError> =>
  Effect.gen(function* () {
    const closed = yield* Deferred.make<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>()
    return yield* Effect.async<Running, RipgrepError>((resume) => {
      let child: ChildProcess
      try {
        child = spawn(binary, args, { cwd, stdio: ["ignore", "pipe", "pipe"], windowsHide: true })
      } catch (error) {
        resume(Effect.fail(new RipgrepError({ reason: `could not start ${binary}: ${String(error)}` })))
        return
      }
      const running: Running = { child, closed, stderr: "", failure: undefined }
      const read = recordReader((record) => {
        if (running.failure !== undefined) return
        const failure = onRecord(record)
        if (failure !== undefined) {
          running.failure = failure
          child.kill("SIGKILL")
        }
      })
      child.stdout?.on("data", read)
      child.stderr?.on("data", (chunk: Buffer) => {
        if (running.stderr.length < STDERR_BYTES) running.stderr += chunk.toString("utf8")
      })
      child.once("close", (code, signal) => Deferred.unsafeDone(closed, Exit.succeed({ code, signal })))
      const onSpawnError = (error: Error) => {
        child.removeAllListeners()
        child.stdout?.destroy()
        child.stderr?.destroy()
        resume(Effect.fail(new RipgrepError({ reason: `could not start ${binary}: ${error.message}` })))
      }
      child.once("error", onSpawnError)
      child.once("spawn", () => {
        child.off("error", onSpawnError)
        child.on("error", () => {}) // a failed kill: the close event still tells the end
        resume(Effect.succeed(running))
      })
    })
  })

/** Kills rg if it still runs and waits (a bounded time) for it to exit; lets go of its pipes. */
const stopRipgrep = (running: Running): Effect.Effect<void> =>
  Effect.gen(function* () {
    if (running.child.exitCode === null && running.child.signalCode === null) {
      running.child.kill("SIGKILL")
    }
    yield* Deferred.await(running.closed).pipe(Effect.timeout(Duration.millis(EXIT_WAIT_MS)), Effect.ignore)
    running.child.stdout?.destroy()
    running.child.stderr?.destroy()
  })

/** `paths` in batches of at most `ARGUMENT_BYTES` bytes. */
const batches = (paths: ReadonlyArray<string>): Array<{ readonly start: number; readonly paths: Array<string> }> => {
  const out: Array<{ readonly start: number; readonly paths: Array<string> }> = []
  let current: Array<string> = []
  let start = 0
  let bytes = 0
  paths.forEach((path, index) => {
    const size = Buffer.byteLength(path) + 1
    if (current.length > 0 && bytes + size > ARGUMENT_BYTES) {
      out.push({ start, paths: current })
      current = []
      start = index
      bytes = 0
    }
    current.push(path)
    bytes += size
  })
  if (current.length > 0) out.push({ start, paths: current })
  return out
}

/**
 * Runs rg over `search.paths` (see `RipgrepSearch`), one command line at a time. Fails with a
 * `RipgrepError` when rg cannot start, rejects the pattern, reports an error (exit code 2: a file
 * it could not read, among others) or prints what cannot be read; interrupting it kills rg.
 */
export const searchWithRipgrep = (search: RipgrepSearch): Effect.Effect<void, RipgrepError> =>
  Effect.gen(function* () {
    const index = new Map(search.paths.map((path, i) => [path, i] as const))
    const onRecord = (record: Buffer): string | undefined => {
      const nul = record.indexOf(0)
      if (nul < 0) return "a line of its output has no file name"
      const file = index.get(record.toString("utf8", 0, nul))
      if (file === undefined) return `it reported an unexpected file: ${record.toString("utf8", 0, nul)}`
      let line = 0
      let at = nul + 1
      for (; at < record.length; at++) {
        const digit = record[at]! - 48
        if (digit < 0 || digit > 9) break
        line = line * 10 + digit
      }
      if (record[at] !== 0x3a || line === 0) return "a line of its output has no line number"
      search.onLine(file, line, record.subarray(at + 1))
      return undefined
    }
    const flags = [
      "--no-config",
      "--text",
      "--encoding=none",
      "--null",
      "--line-number",
      "--with-filename",
      "--no-heading",
      "--color=never",
      search.ignoreCase ? "--ignore-case" : "--case-sensitive",
      "--regexp",
      search.pattern,
      "--"
    ]
    for (const batch of batches(search.paths)) {
      yield* Effect.scoped(
        Effect.gen(function* () {
          const running = yield* Effect.acquireRelease(
            spawnRipgrep(search.binary, [...flags, ...batch.paths], search.cwd, onRecord),
            stopRipgrep
          )
          const { code, signal } = yield* Deferred.await(running.closed)
          if (running.failure !== undefined) {
            return yield* new RipgrepError({ reason: running.failure })
          }
          // 0: lines found, 1: none
          if (code !== 0 && code !== 1) {
            const why = running.stderr.trim().split("\n")[0] ?? ""
            return yield* new RipgrepError({
              reason: `${nodePath.basename(search.binary)} ended with ${signal ?? `exit code ${code}`}${why === "" ? "" : `: ${why}`}`
            })
          }
        })
      )
    }
  })
