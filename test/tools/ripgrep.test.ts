/**
 * grep's ripgrep search against its JavaScript one: the same inputs through both over fixture trees
 * must give the same output and metadata. The tests that need a real `rg` are skipped when there is
 * none, and fail instead when `LOGBOOK_REQUIRE_RG=1` (CI sets it when it installed ripgrep).
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Exit, FastCheck, Fiber, Option } from "effect"
import {
  type GrepBackendChoice,
  type GrepInput,
  grep,
  MAX_FILE_BYTES,
  MAX_MATCHES,
  RIPGREP_MIN_FILES,
  runGrep
} from "../../src/tools/grep.js"
import { locateRipgrep, RIPGREP_ENV, searchWithRipgrep, translatePattern } from "../../src/tools/ripgrep.js"
import { testContext, workspaceWith } from "../support/toolContext.js"

const setting = process.env[RIPGREP_ENV]
const withSetting = (value: string | undefined) => {
  if (value === undefined) delete process.env[RIPGREP_ENV]
  else process.env[RIPGREP_ENV] = value
}
afterEach(() => withSetting(setting))

const rgBinary = await Effect.runPromise(locateRipgrep)
const hasRg = Option.isSome(rgBinary)
const posix = process.platform !== "win32"

const run = (dir: string, input: GrepInput, choice: GrepBackendChoice) => runGrep(input, testContext(dir), choice)

/** Runs `input` through both searches and expects the same result, the ripgrep one from ripgrep. */
const both = (dir: string, input: GrepInput, expected: "ripgrep" | "javascript" = "ripgrep") =>
  Effect.gen(function* () {
    const js = yield* run(dir, input, "javascript")
    const viaRg = yield* run(dir, input, "ripgrep")
    expect(viaRg.backend, `${JSON.stringify(input)}: ${viaRg.reason}`).toBe(expected)
    expect({ input, output: viaRg.output, metadata: viaRg.metadata }).toEqual({
      input,
      output: js.output,
      metadata: js.metadata
    })
    return { js, viaRg }
  })

const LATIN1 = Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a, 0x78, 0xff, 0xfe, 0x79, 0x0a]) // "caf\xe9\nx\xff\xfey\n"

/** A tree with what tells the two searches apart, if anything does. */
const fixture = (): string => {
  const dir = workspaceWith(
    {
      ".git/config": "needle in git\n",
      "node_modules/pkg/index.js": "needle in node_modules\n",
      ".gitignore": "dist/\n*.log\n!keep.log\n/root-only.txt\n",
      "root-only.txt": "needle ignored at the root\n",
      "sub/root-only.txt": "needle not ignored below\n",
      "sub/.gitignore": "*.tmp\n!important.tmp\n",
      "sub/x.tmp": "needle tmp\n",
      "sub/important.tmp": "needle important\n",
      "sub/deeper/y.tmp": "needle deeper tmp\n",
      "dist/out.js": "needle in dist\n",
      "debug.log": "needle in a log\n",
      "keep.log": "needle kept\n",
      ".env": "NEEDLE=hidden\n",
      ".config/settings.json": '{ "needle": true }\n',
      "a.ts": "const needle = 1\nother\r\nNEEDLE shouting\r\nneedle at the end\r",
      "src/b.ts": "no match here\nfunction needle() {}\n",
      "src/c.tsx": "<Needle />\n",
      "src/deep/d.ts": "export const needleDeep = 2\n\n\nlast line without newline",
      "src/bin.dat": Buffer.concat([Buffer.from("needle\n"), Buffer.from([0, 1, 2]), Buffer.from("\nneedle\n")]),
      "src/late-nul.txt": Buffer.concat([
        Buffer.from(`${"x".repeat(9000)}\n`),
        Buffer.from([0]),
        Buffer.from("needle after a late NUL\nneedle\0inside\n")
      ]),
      "big.txt": `needle ${"x".repeat(MAX_FILE_BYTES)}\n`,
      "latin1.txt": LATIN1,
      "unicode.txt": [
        "emoji 😀 here",
        "kelvin \u212A and k",
        "long s \u017F",
        "arabic digits \u0663\u0664",
        "nbsp\u00A0x",
        "bom\uFEFFinside",
        "sep\u2028line",
        "caf\u00E9 CAF\u00C9",
        "tab\there",
        "\u00E9t\u00E9",
        "vt\u000Bff\u000C",
        "replacement \uFFFD",
        ""
      ].join("\n"),
      "\uFEFFbom-name.txt": "\uFEFFneedle after a BOM\n",
      "cr.txt": "x\r\ry\nab\r\nq\rz\nneedle\r\r\n\r\n",
      "empty.txt": "",
      "newline-only.txt": "\n",
      "with space.txt": "needle with space\n",
      "-dash.txt": "needle dash\n",
      "ünïcödé.txt": "needle ünïcödé\n",
      "many/m1.txt": Array.from({ length: 70 }, (_, i) => `hit ${i}`).join("\n"),
      "many/m2.txt": Array.from({ length: 70 }, (_, i) => `hit ${i}`).join("\n"),
      "many/m3.txt": `hit ${"y".repeat(500)}\n`,
      "real/e.ts": "needle behind a symlinked directory\n"
    },
    "logbook-rg-"
  )
  if (posix) {
    const outside = workspaceWith({ "secret.txt": "needle outside\n" }, "logbook-rg-outside-")
    fs.symlinkSync("real", path.join(dir, "linked")) // a directory: not followed
    fs.symlinkSync(path.join(outside, "secret.txt"), path.join(dir, "secret-link.txt")) // outside: not searched
    fs.symlinkSync("a.ts", path.join(dir, "a-link.ts")) // inside: searched
    fs.symlinkSync("nowhere.txt", path.join(dir, "dangling.txt"))
    fs.symlinkSync("src", path.join(dir, "src-link")) // a directory the walk sees as a symlink
  }
  return dir
}

const PATTERNS: ReadonlyArray<string> = [
  "needle",
  "^needle$",
  "needle$",
  "end$",
  "\\bneedle\\b",
  "\\Bedle",
  "\\bt\\b",
  "\\bt",
  "[a-z]\\B",
  "\\d+",
  "\\D",
  "^\\d*$",
  "\\w+",
  "^\\W+$",
  "\\s",
  "\\S+$",
  "^\\s*$",
  ".",
  "^.$",
  "^..$",
  "caf.",
  "caf\\W",
  "caf[^a-z]",
  "x..y",
  "x.y",
  "[^a-z ]",
  "[\\u0080-\\uFFFF]",
  "[\\u00E0-\\u00FF]",
  "\\uFFFD",
  "[\\uFFFD]",
  "\\u00E9",
  "é",
  "😀",
  "emoji .. here",
  "emoji . here",
  "\\u212A",
  "K",
  "x{3}",
  "x{2,}y?",
  "(?:hit|needle) \\d{1,2}$",
  "(a|b){2,}",
  "(?<name>nee)dle",
  "(?:)",
  "needle|",
  "[\\]\\-]",
  "[\\w-]+\\.txt",
  "\\/|\\.",
  "a\\x20b|\\x41",
  "\\t",
  "\\v|\\f",
  "\\r",
  "x\\r",
  "[^\\n]",
  "[\\s\\d]",
  "[^\\S]",
  "[^\\W\\d]",
  "^$",
  "^",
  "$",
  "\\x00",
  "\\0",
  "{",
  "a{,2}",
  "}",
  "]",
  "hit \\d+$",
  "y{200}",
  "^hit",
  "q.z",
  "q\\sz",
  "sep.line",
  "bom.inside",
  "nbsp\\sx"
]

// about 150 rg processes in some tests: seconds on a quiet machine, far more on a busy one
describe("grep with ripgrep", { timeout: 180_000 }, () => {
  it.skipIf(process.env.LOGBOOK_REQUIRE_RG !== "1")("finds ripgrep (LOGBOOK_REQUIRE_RG=1)", () => {
    expect(hasRg).toBe(true)
  })

  it.effect.skipIf(!hasRg)("gives the JavaScript search's output for every pattern, case-sensitive or not", () =>
    Effect.gen(function* () {
      const dir = fixture()
      for (const pattern of PATTERNS) {
        yield* both(dir, { pattern })
        // non-ASCII letters with ignoreCase are searched in JavaScript
        const translated = translatePattern(pattern, true)._tag === "Translated"
        yield* both(dir, { pattern, ignoreCase: true }, translated ? "ripgrep" : "javascript")
      }
    })
  )

  it.effect.skipIf(!hasRg)("skips what the JavaScript search skips, and counts and caps the same", () =>
    Effect.gen(function* () {
      const dir = fixture()
      const { viaRg } = yield* both(dir, { pattern: "needle" })
      // ignored, hidden, binary, large, symlinked files and directories
      expect(viaRg.output).not.toContain("NEEDLE=hidden") // case-sensitive
      expect(viaRg.output).toContain("keep.log:1:")
      expect(viaRg.output).not.toContain("debug.log")
      expect(viaRg.output).not.toContain("dist/")
      expect(viaRg.output).not.toContain("node_modules")
      expect(viaRg.output).not.toContain(".git/")
      expect(viaRg.output).not.toContain("root-only.txt:1: needle ignored")
      expect(viaRg.output).toContain("sub/root-only.txt:1:")
      expect(viaRg.output).toContain("sub/important.tmp:1:")
      expect(viaRg.output).not.toContain("x.tmp")
      expect(viaRg.output).not.toContain("y.tmp")
      expect(viaRg.output).not.toContain("bin.dat")
      expect(viaRg.output).not.toContain("big.txt")
      expect(viaRg.output).toContain("src/late-nul.txt:2: \0needle after a late NUL") // a NUL after the first 8 KB
      if (posix) {
        expect(viaRg.output).toContain("a-link.ts:1:")
        expect(viaRg.output).not.toContain("secret")
        expect(viaRg.output).not.toContain("linked/")
        expect(viaRg.output).not.toContain("src-link")
      }
      const ignoring = yield* both(dir, { pattern: "needle", ignoreCase: true })
      expect(ignoring.viaRg.output).toContain(".env:1: NEEDLE=hidden")
      const capped = yield* both(dir, { pattern: "hit" })
      expect(capped.viaRg.metadata).toEqual({ matches: 141, files: 3, truncated: true })
      expect(capped.viaRg.output.split("\n").filter((l) => l.includes(": hit")).length).toBe(MAX_MATCHES)
      const none = yield* both(dir, { pattern: "haystack" })
      expect(none.viaRg.output).toBe("No matches for /haystack/ in ..")
    })
  )

  it.effect.skipIf(!hasRg)("filters with include the same way", () =>
    Effect.gen(function* () {
      const dir = fixture()
      for (const include of ["*.ts", "*.{ts,tsx}", "src/**/*.ts", "**/*.log", "*.tmp", ".*", "nothing-matches"]) {
        yield* both(dir, { pattern: "needle", include })
        yield* both(dir, { pattern: "e", include, ignoreCase: true })
      }
      yield* both(dir, { pattern: "needle", path: "src", include: "*.ts" })
      yield* both(dir, { pattern: "needle", path: "sub" })
    })
  )

  it.effect.skipIf(!hasRg || !posix)("searches in JavaScript when a file name holds a line feed", () =>
    Effect.gen(function* () {
      const dir = workspaceWith({ "line\nfeed.txt": "needle\n", "plain.txt": "needle\n" }, "logbook-rg-")
      const { viaRg } = yield* both(dir, { pattern: "needle" }, "javascript")
      expect(viaRg.reason).toContain("line feed")
    })
  )

  it.effect.skipIf(!hasRg)("matches what the JavaScript search matches on random patterns and lines", () =>
    Effect.gen(function* () {
      const dir = workspaceWith({}, "logbook-rg-random-")
      const pieces = [
        "a",
        "b",
        "k",
        "K",
        "x",
        "1",
        " ",
        "-",
        "_",
        ".",
        "\\.",
        "\\d",
        "\\D",
        "\\w",
        "\\W",
        "\\s",
        "\\S",
        "\\b",
        "\\B",
        "[ab]",
        "[^ab]",
        "[\\w-]",
        "[^\\s]",
        "[a-z]",
        "[^\\x00-\\x7F]",
        "^",
        "$",
        "\\r",
        "(a|b)",
        "(?:x|)"
      ]
      const quantifiers = ["", "", "", "*", "+", "?", "{1,2}", "{2}"]
      const pattern = FastCheck.array(
        FastCheck.tuple(FastCheck.constantFrom(...pieces), FastCheck.constantFrom(...quantifiers)),
        { minLength: 1, maxLength: 5 }
      ).map((parts) =>
        parts.map(([p, q]) => (p === "^" || p === "$" || p === "\\b" || p === "\\B" ? p : p + q)).join("")
      )
      const chars = [
        "a",
        "b",
        "B",
        "k",
        "K",
        "\u212A",
        "\u017F",
        "x",
        "1",
        "\u0663",
        " ",
        "\u00A0",
        "\uFEFF",
        "\t",
        "\r",
        "_",
        "-",
        ".",
        "é",
        "É",
        "😀",
        "\u2028"
      ]
      const line = FastCheck.array(FastCheck.constantFrom(...chars), { maxLength: 8 }).map((cs) => cs.join(""))
      const content = FastCheck.tuple(FastCheck.array(line, { maxLength: 6 }), FastCheck.boolean()).map(
        ([lines, latin1]) =>
          Buffer.concat([
            Buffer.from(lines.join("\n")),
            latin1 ? Buffer.from([0x0a, 0x61, 0xe9, 0xff, 0x62]) : Buffer.alloc(0)
          ])
      )
      const samples = FastCheck.sample(FastCheck.tuple(pattern, content, FastCheck.boolean()), {
        numRuns: 150,
        seed: 20261130
      })
      for (const [source, bytes, ignoreCase] of samples) {
        fs.writeFileSync(path.join(dir, "f.txt"), bytes)
        fs.writeFileSync(path.join(dir, "g.txt"), Buffer.concat([Buffer.from("a\r\n"), bytes]))
        const js = yield* run(dir, { pattern: source, ignoreCase }, "javascript")
        const viaRg = yield* run(dir, { pattern: source, ignoreCase }, "ripgrep")
        expect({ source, ignoreCase, content: bytes.toString("hex"), output: viaRg.output }).toEqual({
          source,
          ignoreCase,
          content: bytes.toString("hex"),
          output: js.output
        })
        expect(viaRg.backend).toBe("ripgrep")
      }
    })
  )

  it.effect.skipIf(!hasRg)("searches in JavaScript a pattern ripgrep would read differently or cannot take", () =>
    Effect.gen(function* () {
      const dir = fixture()
      for (const pattern of [
        "(?<=nee)dle",
        "(?<!x)needle",
        "need(?=le)",
        "(e)\\1",
        "\\k<x>(?<x>a)",
        "\\cA",
        "\\8",
        "\\p",
        "(?:a{1000}){1000}",
        "[]",
        "[^]",
        "\\n|needle",
        "$^",
        "(?:b|$)^"
      ]) {
        const { viaRg } = yield* both(dir, { pattern }, "javascript")
        expect(viaRg.reason).toContain("ripgrep would read the pattern differently")
      }
      yield* both(dir, { pattern: "é", ignoreCase: true }, "javascript")
      // what rg does with such a pattern: exit code 2, a RipgrepError (grep then searches in JavaScript)
      const rejected = yield* Effect.flip(
        searchWithRipgrep({
          binary: Option.getOrThrow(rgBinary),
          cwd: dir,
          paths: ["a.ts"],
          pattern: "(?<=nee)dle",
          ignoreCase: false,
          onLine: () => {}
        })
      )
      expect(rejected.reason).toMatch(/ended with exit code 2: regex parse error/)
    })
  )

  it.effect.skipIf(!hasRg)("uses ripgrep for a directory of RIPGREP_MIN_FILES files or more, never for one file", () =>
    Effect.gen(function* () {
      const files = (n: number) =>
        Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}.txt`, `needle ${i}\n`]))
      const enough = workspaceWith(files(RIPGREP_MIN_FILES), "logbook-rg-")
      const few = workspaceWith(files(RIPGREP_MIN_FILES - 1), "logbook-rg-")
      expect((yield* run(enough, { pattern: "needle" }, "auto")).backend).toBe("ripgrep")
      expect((yield* run(few, { pattern: "needle" }, "auto")).backend).toBe("javascript")
      const one = yield* run(enough, { pattern: "needle", path: "f1.txt" }, "ripgrep")
      expect(one.backend).toBe("javascript")
      expect(one.output).toBe("f1.txt:1: needle 1")
      // the tool itself
      const tool = yield* grep.execute({ pattern: "needle \\d+$" }, testContext(enough))
      expect(tool.metadata).toEqual({ matches: RIPGREP_MIN_FILES, files: RIPGREP_MIN_FILES, truncated: false })
    })
  )

  it.live.skipIf(!hasRg || process.platform !== "linux")("kills rg when the search is interrupted", () =>
    Effect.gen(function* () {
      const dir = workspaceWith({ "a.txt": "needle\n" }, "logbook-rg-fifo-")
      const fifo = path.join(dir, "blocking-fifo")
      execFileSync("mkfifo", [fifo])
      const search = yield* Effect.fork(
        searchWithRipgrep({
          binary: Option.getOrThrow(rgBinary),
          cwd: dir,
          paths: ["a.txt", fifo],
          pattern: "needle",
          ignoreCase: false,
          onLine: () => {}
        })
      )
      // rg blocks on the FIFO, which nobody writes
      let pids: Array<number> = []
      for (let i = 0; i < 1200 && pids.length === 0; i++) {
        yield* Effect.sleep(Duration.millis(25))
        pids = processesWith(fifo)
      }
      expect(pids.length).toBe(1)
      yield* Fiber.interrupt(search)
      expect(processesWith(fifo)).toEqual([])
      expect(alive(pids[0]!)).toBe(false)
    })
  )
})

/** Live (not zombie) processes whose command line contains `text` (Linux). */
const processesWith = (text: string): Array<number> =>
  fs
    .readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .flatMap((pid) => {
      try {
        const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8")
        const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
        const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3)
        return cmdline.includes(text) && state !== "Z" ? [Number(pid)] : []
      } catch {
        return []
      }
    })

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe("grep without ripgrep", () => {
  const tree = () =>
    workspaceWith(
      Object.fromEntries(Array.from({ length: RIPGREP_MIN_FILES + 5 }, (_, i) => [`d/f${i}.txt`, `needle ${i}\n`])),
      "logbook-rg-"
    )

  it.effect("searches in JavaScript when LOGBOOK_RIPGREP=0 or names no usable binary", () =>
    Effect.gen(function* () {
      const dir = tree()
      const expected = yield* run(dir, { pattern: "needle" }, "javascript")
      for (const value of ["0", path.join(dir, "no-such-rg"), path.join(dir, "d", "f1.txt"), "no-such-command-rg"]) {
        withSetting(value)
        const result = yield* run(dir, { pattern: "needle" }, "auto")
        expect(result.backend).toBe("javascript")
        expect(result.reason).toContain("no ripgrep")
        expect(result.output).toBe(expected.output)
        expect(result.metadata).toEqual(expected.metadata)
      }
    })
  )

  /** A fake `rg`: answers --version like ripgrep, then does what FAKE_RG_MODE says. */
  const fakeRg = (dir: string): string => {
    const file = path.join(dir, "fake-rg")
    fs.writeFileSync(
      file,
      [
        "#!/bin/sh",
        'if [ "$1" = "--version" ]; then echo "ripgrep 99.0.0 (fake)"; exit 0; fi',
        'case "$FAKE_RG_MODE" in',
        '  fail) echo "rg: something broke" >&2; exit 2 ;;',
        '  garbage) echo "not a record"; exit 0 ;;',
        '  stranger) printf "elsewhere.txt\\0001:needle\\n"; exit 0 ;;',
        "  signal) kill -9 $$ ;;",
        '  hang) echo $$ > "$FAKE_RG_PIDFILE"; exec sleep 600 ;;',
        "esac",
        "exit 1",
        ""
      ].join("\n"),
      { mode: 0o755 }
    )
    return file
  }

  it.effect.skipIf(!posix)("falls back to JavaScript on any ripgrep failure", () =>
    Effect.gen(function* () {
      const dir = tree()
      const expected = yield* run(dir, { pattern: "needle" }, "javascript")
      withSetting(fakeRg(workspaceWith({}, "logbook-fake-rg-")))
      for (const [mode, reason] of [
        ["fail", "ripgrep failed: fake-rg ended with exit code 2: rg: something broke"],
        ["garbage", "ripgrep failed: a line of its output has no file name"],
        ["stranger", "ripgrep failed: it reported an unexpected file: elsewhere.txt"],
        ["signal", "ripgrep failed: fake-rg ended with SIGKILL"]
      ] as const) {
        process.env.FAKE_RG_MODE = mode
        const result = yield* run(dir, { pattern: "needle" }, "auto")
        expect({ mode, backend: result.backend, reason: result.reason }).toEqual({
          mode,
          backend: "javascript",
          reason
        })
        expect(result.output).toBe(expected.output)
        expect(result.metadata).toEqual(expected.metadata)
      }
    }).pipe(Effect.ensuring(Effect.sync(() => delete process.env.FAKE_RG_MODE)))
  )

  it.live.skipIf(!posix)("leaves no ripgrep process behind when the call is interrupted", () =>
    Effect.gen(function* () {
      const dir = tree()
      const fakeDir = workspaceWith({}, "logbook-fake-rg-")
      const pidFile = path.join(fakeDir, "pid")
      withSetting(fakeRg(fakeDir))
      process.env.FAKE_RG_MODE = "hang"
      process.env.FAKE_RG_PIDFILE = pidFile
      const call = yield* Effect.fork(grep.execute({ pattern: "needle" }, testContext(dir)))
      let pid: number | undefined
      for (let i = 0; i < 1200 && pid === undefined; i++) {
        yield* Effect.sleep(Duration.millis(25))
        const text = fs.existsSync(pidFile) ? fs.readFileSync(pidFile, "utf8").trim() : ""
        if (text !== "") pid = Number(text)
      }
      expect(pid).toBeDefined()
      expect(alive(pid!)).toBe(true)
      const exit = yield* Fiber.interrupt(call)
      expect(Exit.isInterrupted(exit)).toBe(true)
      expect(alive(pid!)).toBe(false)
    }).pipe(
      Effect.ensuring(
        Effect.sync(() => {
          delete process.env.FAKE_RG_MODE
          delete process.env.FAKE_RG_PIDFILE
        })
      )
    )
  )
})

describe("translatePattern", () => {
  const translated = (source: string, ignoreCase = false) => {
    const t = translatePattern(source, ignoreCase)
    return t._tag === "Translated" ? t.pattern : `untranslatable: ${t.reason}`
  }

  it("writes JavaScript's classes, boundaries, dot and end of line in ripgrep's terms", () => {
    expect(translated("foo_1")).toBe("foo_1")
    expect(translated("a.b")).toBe("a(?:.|(?-u:[\\x80-\\xFF]+))b")
    expect(translated("\\d\\w")).toBe("[0-9][0-9A-Za-z_]")
    expect(translated("\\bx\\B")).toBe("(?-u:\\b)x(?-u:\\B)")
    expect(translated("x$")).toBe("x(?:\\x{0D}?$)")
    expect(translated("[^a-c]+")).toBe("(?:(?:[^\\x{61}-\\x{63}]|(?-u:[\\x80-\\xFF]+)))+")
    expect(translated("a/b-c")).toBe("a\\x{2F}b\\x{2D}c")
    expect(translated("x{2,3}?")).toBe("(?:x){2,3}?")
    expect(translated("(?<name>a)|(?:b)")).toBe("(?:a)|(?:b)")
    expect(translated("é")).toBe("\\x{E9}")
  })

  it("refuses what ripgrep would read differently or cannot take", () => {
    expect(translated("(?<=a)b")).toBe("untranslatable: it has a lookaround")
    expect(translated("(a)\\1")).toBe("untranslatable: it has a backreference or an octal escape")
    expect(translated("a\\nb")).toBe("untranslatable: it matches a line feed")
    expect(translated("é", true)).toBe("untranslatable: it holds non-ASCII characters and ignores case")
    expect(translated("(?:a{1000}){1000}")).toBe("untranslatable: its counted repetitions are too large")
    expect(translated("(?:x|$)^")).toBe("untranslatable: it has ^ after $")
    expect(translated("\\p{L}")).toBe("untranslatable: it has the escape \\p, which means another thing to ripgrep")
  })
})
