import * as fs from "node:fs"
import * as path from "node:path"
import { beforeEach, describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import {
  type GrepInput,
  type GrepMetadata,
  grep,
  MAX_FILE_BYTES,
  MAX_LINE_CHARS,
  MAX_MATCHES,
  runGrep
} from "../../src/tools/grep.js"
import { locateRipgrep } from "../../src/tools/ripgrep.js"
import { testContext, workspaceWith } from "../support/toolContext.js"

const workspace = (files: Record<string, string | Buffer> = {}): string => workspaceWith(files, "logbook-grep-")

// every test runs through the tool, then (when rg is installed; test/tools/ripgrep.test.ts says
// whether it must be) with each search forced: they must give the same results
const hasRg = Option.isSome(await Effect.runPromise(locateRipgrep))
const searches = ["tool", "javascript", ...(hasRg ? ["ripgrep" as const] : [])] as const

let search: (typeof searches)[number] = "tool"

const run = (dir: string, input: GrepInput) =>
  search === "tool"
    ? grep
        .execute(input, testContext(dir))
        .pipe(Effect.map((out) => ({ ...out, metadata: out.metadata as GrepMetadata })))
    : runGrep(input, testContext(dir), search).pipe(
        Effect.tap((out) =>
          // a directory search forced to ripgrep must have used it
          Effect.sync(() => {
            if (search === "ripgrep" && input.path === undefined) expect(out.backend).toBe("ripgrep")
          })
        )
      )

const failure = (dir: string, input: GrepInput) =>
  Effect.map(Effect.flip(grep.execute(input, testContext(dir))), (error) => error.message)

const project = (): string => {
  const dir = workspace({
    ".git/config": "needle in git",
    ".gitignore": "dist/\n*.log\n!keep.log\n",
    "node_modules/pkg/index.js": "needle in node_modules",
    "dist/out.js": "needle in dist",
    "debug.log": "needle in a log",
    "keep.log": "needle kept\n",
    "a.ts": "const needle = 1\nother\r\nNEEDLE shouting\r\n",
    "src/b.ts": "no match here\nfunction needle() {}\n",
    "src/c.tsx": "<Needle />\n",
    "src/bin.dat": Buffer.concat([Buffer.from("needle"), Buffer.from([0, 1, 2])]),
    "real/d.ts": "needle behind a symlinked directory\n"
  })
  fs.symlinkSync("real", path.join(dir, "linked"))
  return dir
}

describe("grep outside the workspace", () => {
  it.effect("an outside directory the permission allowed: matches are shown by absolute path, not ../", () =>
    Effect.gen(function* () {
      const dir = workspace({ "in.txt": "needle inside\n" })
      const outside = fs.realpathSync(workspace({ "notes.md": "a needle outside\n" }))
      const context = { ...testContext(dir), outsideAllowed: true }
      const found = yield* grep.execute({ pattern: "needle", path: outside }, context)
      expect(found.output).toBe(`${outside}/notes.md:1: a needle outside`)
    })
  )
})

describe.each(searches)("grep (%s)", (which) => {
  beforeEach(() => {
    search = which
  })

  it.effect("shows matching lines grouped by file, skipping ignored, binary and symlinked directories", () =>
    Effect.gen(function* () {
      const dir = project()
      const result = yield* run(dir, { pattern: "needle" })
      expect(result.output).toBe(
        [
          "a.ts:1: const needle = 1",
          "",
          "keep.log:1: needle kept",
          "",
          "real/d.ts:1: needle behind a symlinked directory",
          "",
          "src/b.ts:2: function needle() {}"
        ].join("\n")
      )
      expect(result.metadata).toEqual({ matches: 4, files: 4, truncated: false })
    })
  )

  it.effect("ignores case when asked, and filters files with include", () =>
    Effect.gen(function* () {
      const dir = project()
      const loud = yield* run(dir, { pattern: "needle", ignoreCase: true, include: "*.{ts,tsx}" })
      expect(loud.output).toBe(
        [
          "a.ts:1: const needle = 1",
          "a.ts:3: NEEDLE shouting",
          "",
          "real/d.ts:1: needle behind a symlinked directory",
          "",
          "src/b.ts:2: function needle() {}",
          "",
          "src/c.tsx:1: <Needle />"
        ].join("\n")
      )
      expect(loud.metadata).toEqual({ matches: 5, files: 4, truncated: false })
      const byPath = yield* run(dir, { pattern: "needle", include: "src/**" })
      expect(byPath.output).toBe("src/b.ts:2: function needle() {}")
      const inSrc = yield* run(dir, { pattern: "needle", path: "src", include: "*.ts" })
      expect(inSrc.output).toBe("src/b.ts:2: function needle() {}")
    })
  )

  it.effect("searches one file, whatever the ignore rules say", () =>
    Effect.gen(function* () {
      const dir = project()
      expect((yield* run(dir, { pattern: "needle", path: "debug.log" })).output).toBe("debug.log:1: needle in a log")
      expect((yield* run(dir, { pattern: "^\\w+ shouting$", path: "a.ts" })).output).toBe("a.ts:3: NEEDLE shouting")
    })
  )

  it.effect("says why a single binary or large file has no matches", () =>
    Effect.gen(function* () {
      const dir = project()
      fs.writeFileSync(path.join(dir, "big.txt"), `needle ${"x".repeat(MAX_FILE_BYTES)}`)
      expect((yield* run(dir, { pattern: "needle", path: "src/bin.dat" })).output).toBe(
        "No matches for /needle/ in src/bin.dat (it is a binary file; grep searches text files only)."
      )
      expect((yield* run(dir, { pattern: "needle", path: "big.txt" })).output).toBe(
        "No matches for /needle/ in big.txt (it is larger than 1 MB; grep skips such files, use bash instead)."
      )
      const none = yield* run(dir, { pattern: "haystack" })
      expect(none.output).toBe("No matches for /haystack/ in ..")
      expect(none.metadata).toEqual({ matches: 0, files: 0, truncated: false })
    })
  )

  it.effect("caps the matching lines, counts them all, and cuts long lines", () =>
    Effect.gen(function* () {
      const many = Array.from({ length: 70 }, (_, i) => `hit ${i}`).join("\n")
      const dir = workspace({ "a.txt": many, "b.txt": many, "c.txt": `hit ${"y".repeat(500)}` })
      const result = yield* run(dir, { pattern: "hit" })
      const lines = result.output.split("\n")
      expect(lines.filter((l) => l.startsWith("a.txt:"))).toHaveLength(70)
      expect(lines.filter((l) => l.startsWith("b.txt:"))).toHaveLength(MAX_MATCHES - 70)
      expect(lines.filter((l) => l.startsWith("c.txt:"))).toHaveLength(0)
      expect(lines.at(-1)).toBe(
        `(${MAX_MATCHES} of 141 matching lines shown, in 3 files; narrow the pattern, the path or include)`
      )
      expect(result.metadata).toEqual({ matches: 141, files: 3, truncated: true })
      const long = yield* run(dir, { pattern: "y", path: "c.txt" })
      expect(long.output).toBe(`c.txt:1: ${`hit ${"y".repeat(500)}`.slice(0, MAX_LINE_CHARS)}…`)
    })
  )

  it.effect("searches a symlinked file only when it leads inside the workspace", () =>
    Effect.gen(function* () {
      const outside = workspace({ "secret.txt": "needle outside\n" })
      const dir = workspace({ "inside.txt": "needle inside\n" })
      fs.symlinkSync(path.join(outside, "secret.txt"), path.join(dir, "secret-link.txt"))
      fs.symlinkSync("inside.txt", path.join(dir, "inside-link.txt"))
      const result = yield* run(dir, { pattern: "needle" })
      expect(result.output).toBe("inside-link.txt:1: needle inside\n\ninside.txt:1: needle inside")
    })
  )

  it.effect("does not count the empty string after a final line feed as a line", () =>
    Effect.gen(function* () {
      const dir = workspace({ "a.txt": "one\n\nthree\n", "empty.txt": "", "nl.txt": "\n", "cr.txt": "x\r\n\r\n" })
      const result = yield* run(dir, { pattern: "^$" })
      expect(result.output).toBe("a.txt:2: \n\ncr.txt:2: \n\nnl.txt:1: ")
      expect(result.metadata).toEqual({ matches: 3, files: 3, truncated: false })
    })
  )

  it.effect("refuses an invalid regular expression, quoting the error, and paths outside the workspace", () =>
    Effect.gen(function* () {
      const dir = project()
      const bad = yield* failure(dir, { pattern: "foo(" })
      expect(bad).toContain("The pattern is not a valid JavaScript regular expression")
      expect(bad).toContain("Invalid regular expression: /foo(/: Unterminated group")
      expect(yield* failure(dir, { pattern: "x", path: "../.." })).toContain("outside")
      const outside = workspace({ "x.txt": "x" })
      expect(yield* failure(dir, { pattern: "x", path: path.join(outside, "x.txt") })).toContain("outside")
    })
  )
})
