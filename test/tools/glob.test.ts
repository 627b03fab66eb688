import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { type GlobInput, type GlobMetadata, glob, MAX_RESULTS } from "../../src/tools/glob.js"
import { grep } from "../../src/tools/grep.js"
import { compileGlob, expandBraces, isIgnored, parseGitignore, walkFiles } from "../../src/tools/ignore.js"
import { inputJsonSchema } from "../../src/tools/Tools.js"
import { tempDir } from "../support/tmp.js"
import { testContext } from "../support/toolContext.js"

/** A temp dir holding `files` (name -> content; names ending with "/" are empty directories). */
const workspace = (files: Record<string, string>): string => {
  const dir = tempDir("logbook-glob-")
  for (const [name, content] of Object.entries(files)) {
    const file = path.join(dir, name)
    if (name.endsWith("/")) {
      fs.mkdirSync(file, { recursive: true })
    } else {
      fs.mkdirSync(path.dirname(file), { recursive: true })
      fs.writeFileSync(file, content)
    }
  }
  return dir
}

/** Sets the modification times of `names`, oldest first, a minute apart. */
const age = (dir: string, names: ReadonlyArray<string>) =>
  names.forEach((name, i) => {
    const when = new Date(Date.UTC(2024, 0, 1, 0, i))
    fs.utimesSync(path.join(dir, name), when, when)
  })

const run = (dir: string, input: GlobInput) =>
  glob.execute(input, testContext(dir)).pipe(Effect.map((out) => ({ ...out, metadata: out.metadata as GlobMetadata })))

const failure = (dir: string, input: GlobInput) =>
  Effect.map(Effect.flip(glob.execute(input, testContext(dir))), (error) => error.message)

const matches = (pattern: string, file: string) => compileGlob(pattern).test(file)

describe("compileGlob", () => {
  const table: ReadonlyArray<readonly [string, string, boolean]> = [
    ["*.ts", "a.ts", true],
    ["*.ts", "src/a.ts", false],
    ["*.ts", ".hidden.ts", true],
    ["*.ts", "a.tsx", false],
    ["**/*.ts", "a.ts", true],
    ["**/*.ts", "src/a/b/c.ts", true],
    ["**/*.ts", "src/a.tsx", false],
    ["src/**", "src/a.ts", true],
    ["src/**", "src/a/b.ts", true],
    ["src/**", "srcs/a.ts", false],
    ["src/**/*.ts", "src/a.ts", true],
    ["src/**/*.ts", "src/x/y/a.ts", true],
    ["src/**/*.ts", "lib/src/a.ts", false],
    ["**", "anything/at/all", true],
    ["a**b", "axxb", true],
    ["a**b", "ax/b", false],
    ["file?.txt", "file1.txt", true],
    ["file?.txt", "file10.txt", false],
    ["file?.txt", "file/.txt", false],
    ["[abc]*.md", "b-notes.md", true],
    ["[abc]*.md", "d-notes.md", false],
    ["[!abc]*.md", "d.md", true],
    ["[!abc]*.md", "a.md", false],
    ["[a-c]x", "bx", true],
    ["[a-c]x", "dx", false],
    ["*.{ts,tsx}", "a.tsx", true],
    ["*.{ts,tsx}", "a.ts", true],
    ["*.{ts,tsx}", "a.js", false],
    ["{src,test}/**/*.ts", "test/x/a.ts", true],
    ["{src,test}/**/*.ts", "lib/a.ts", false],
    ["{a/b,c}.txt", "a/b.txt", true],
    ["{a,{b,c}d}", "cd", true],
    ["{a}", "{a}", true],
    ["a.b", "axb", false],
    ["(x)+", "(x)+", true],
    ["\\*.ts", "*.ts", true],
    ["\\*.ts", "a.ts", false],
    ["[unclosed", "[unclosed", true]
  ]
  it.each(table)("%s ~ %s -> %s", (pattern, file, expected) => {
    expect(matches(pattern, file)).toBe(expected)
  })

  it("expands braces, and refuses a pattern that expands to too much", () => {
    expect(expandBraces("x{a,b}{1,2}")).toEqual(["xa1", "xa2", "xb1", "xb2"])
    expect(() => compileGlob("{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}")).toThrow(/alternatives/)
  })
})

describe(".gitignore rules", () => {
  const rules = [
    {
      base: "",
      rules: parseGitignore(
        [
          "# build output",
          "",
          "dist/",
          "*.log",
          "!keep.log",
          "/root-only.txt",
          "docs/*.html",
          "**/cache",
          "tmp/**",
          "secret?.env   ",
          "\\#hash",
          "a/**/z"
        ].join("\n")
      )
    },
    { base: "pkg", rules: parseGitignore("*.gen.ts\n!important.log\n") }
  ]
  const table: ReadonlyArray<readonly [string, boolean, boolean]> = [
    ["dist", true, true],
    ["dist", false, false], // a file named dist: the rule is for directories
    ["src/dist", true, true],
    ["dist/a.js", false, true], // inside an ignored directory
    ["x.log", false, true],
    ["deep/x.log", false, true],
    ["keep.log", false, false],
    ["deep/keep.log", false, false],
    ["root-only.txt", false, true],
    ["src/root-only.txt", false, false],
    ["docs/a.html", false, true],
    ["docs/sub/a.html", false, false],
    ["cache", true, true],
    ["x/y/cache", false, true],
    ["tmp", true, false],
    ["tmp/a", false, true],
    ["secret1.env", false, true],
    ["#hash", false, true],
    ["# build output", false, false],
    ["a/z", false, true],
    ["a/b/c/z", false, true],
    ["pkg/x.gen.ts", false, true],
    ["x.gen.ts", false, false], // pkg's rules stay in pkg
    ["pkg/important.log", false, false],
    ["src/a.ts", false, false]
  ]
  it.each(table)("%s (directory: %s) ignored -> %s", (file, directory, expected) => {
    expect(isIgnored(rules, file, directory)).toBe(expected)
  })

  it("skips comments and blank lines", () => {
    expect(parseGitignore("# a\n\n   \n\r\n").length).toBe(0)
  })
})

/** A workspace with everything the walk must skip, and a few files it must find. */
const busy = (): string => {
  const dir = workspace({
    ".git/HEAD": "ref",
    ".gitignore": "dist/\n*.log\n!keep.log\n/secret.txt\n",
    "node_modules/pkg/index.ts": "",
    "dist/out.ts": "",
    "a.ts": "",
    "debug.log": "",
    "keep.log": "",
    "secret.txt": "",
    "src/secret.txt": "",
    "src/b.ts": "",
    "src/dist/c.ts": "", // a directory named dist anywhere is ignored
    "src/deep/d.ts": "",
    "src/deep/.gitignore": "*.ts\n!keep.ts\n",
    "src/deep/keep.ts": "",
    "real/e.ts": ""
  })
  fs.symlinkSync("real", path.join(dir, "linked"))
  fs.symlinkSync("a.ts", path.join(dir, "alias.ts"))
  return dir
}

describe("walkFiles", () => {
  it.effect("skips .git, node_modules, ignored paths and symlinked directories", () =>
    Effect.gen(function* () {
      const dir = fs.realpathSync(busy())
      const files = yield* walkFiles(dir, dir)
      expect(files.map((f) => f.relative)).toEqual([
        ".gitignore",
        "a.ts",
        "alias.ts",
        "keep.log",
        "linked", // listed as a symlink; the tools stat it and drop it as a directory
        "real/e.ts",
        "src/b.ts",
        "src/deep/.gitignore",
        "src/deep/keep.ts",
        "src/secret.txt"
      ])
      const below = yield* walkFiles(dir, path.join(dir, "src", "deep"))
      expect(below.map((f) => f.relative)).toEqual([".gitignore", "keep.ts"])
    })
  )
})

describe("glob", () => {
  it.effect("matches top level with *, any depth with **, newest first", () =>
    Effect.gen(function* () {
      const dir = busy()
      age(dir, ["src/b.ts", "a.ts", "real/e.ts", "src/deep/keep.ts"])
      const top = yield* run(dir, { pattern: "*.ts" })
      expect(top.output).toBe(["a.ts", "alias.ts"].join("\n"))
      const all = yield* run(dir, { pattern: "**/*.ts" })
      // alias.ts follows a.ts: same mtime (it is a symlink to it), then by path
      expect(all.output).toBe(["src/deep/keep.ts", "real/e.ts", "a.ts", "alias.ts", "src/b.ts"].join("\n"))
      expect(all.metadata).toEqual({ count: 5, truncated: false })
    })
  )

  it.effect("searches below `path` and shows paths relative to the workspace", () =>
    Effect.gen(function* () {
      const dir = busy()
      age(dir, ["src/b.ts", "src/secret.txt"])
      expect((yield* run(dir, { pattern: "*", path: "src" })).output).toBe("src/secret.txt\nsrc/b.ts")
      expect((yield* run(dir, { pattern: "**/*.{ts,txt}", path: "./src/" })).output).toContain("src/deep/keep.ts")
      // an ignored directory given as `path` is searched
      expect((yield* run(dir, { pattern: "*", path: "dist" })).output).toBe("dist/out.ts")
    })
  )

  it.effect("an outside directory the permission allowed: its files are shown by their absolute paths, not ../", () =>
    Effect.gen(function* () {
      const dir = workspace({ "in.txt": "" })
      const outside = fs.realpathSync(workspace({ "notes/a.md": "", "b.md": "" }))
      age(outside, ["notes/a.md", "b.md"])
      const context = { ...testContext(dir), outsideAllowed: true }
      const found = yield* glob.execute({ pattern: "**/*.md", path: outside }, context)
      expect(found.output).toBe(`${outside}/b.md\n${outside}/notes/a.md`)
      // without the permission the outside path is refused
      expect(yield* failure(dir, { pattern: "**/*.md", path: outside })).toMatch(/outside the workspace/)
    })
  )

  it.effect("caps the result and says how many matched", () =>
    Effect.gen(function* () {
      const names = Array.from({ length: MAX_RESULTS + 50 }, (_, i) => `f${String(i).padStart(3, "0")}.txt`)
      const dir = workspace(Object.fromEntries(names.map((n) => [n, ""])))
      age(dir, names)
      const result = yield* run(dir, { pattern: "*.txt" })
      const lines = result.output.split("\n")
      expect(lines[0]).toBe("f149.txt")
      expect(lines[MAX_RESULTS - 1]).toBe("f050.txt")
      expect(lines.at(-1)).toBe(`(${MAX_RESULTS} of 150 matches shown; narrow the pattern or the path)`)
      expect(result.metadata).toEqual({ count: 150, truncated: true })
    })
  )

  it.effect("says so when nothing matches, with a hint for a pattern without /", () =>
    Effect.gen(function* () {
      const dir = busy()
      const result = yield* run(dir, { pattern: "*.py" })
      expect(result.output).toBe(
        'No files match *.py in .. (A pattern without "/" matches only files directly in .; use "**/*.py" to search at any depth.)'
      )
      expect(result.metadata).toEqual({ count: 0, truncated: false })
    })
  )

  it.effect("refuses a path outside the workspace, a file, and an absolute pattern", () =>
    Effect.gen(function* () {
      const dir = busy()
      expect(yield* failure(dir, { pattern: "*", path: ".." })).toContain("outside")
      expect(yield* failure(dir, { pattern: "*", path: "a.ts" })).toContain("a.ts is a file, not a directory")
      expect(yield* failure(dir, { pattern: "/etc/*" })).toContain("is absolute")
      expect(yield* failure(dir, { pattern: "*", path: "nope" })).toContain("not found: nope")
    })
  )
})

describe("glob and grep input schemas", () => {
  it("are plain JSON Schemas with a description on every property", () => {
    for (const tool of [glob, grep]) {
      const schema = inputJsonSchema(tool.input) as {
        readonly $defs?: unknown
        readonly required?: ReadonlyArray<string>
        readonly properties: Record<string, { readonly $ref?: string; readonly description?: string }>
      }
      expect(schema.$defs).toBeUndefined()
      expect(schema.required).toEqual(["pattern"])
      for (const property of Object.values(schema.properties)) {
        expect(property.$ref).toBeUndefined()
        expect(typeof property.description).toBe("string")
      }
    }
    expect(Object.keys((inputJsonSchema(grep.input) as { properties: object }).properties)).toEqual([
      "pattern",
      "path",
      "include",
      "ignoreCase"
    ])
  })
})

describe.skipIf(process.platform !== "linux")("a walk and special files", () => {
  it("a FIFO named .gitignore gives no rules and does not hang the walk (run in a child: a hang fails by timeout)", () => {
    const dir = tempDir("logbook-glob-fifo-")
    fs.mkdirSync(path.join(dir, "sub"))
    fs.writeFileSync(path.join(dir, "sub", "a.txt"), "a")
    execFileSync("mkfifo", [path.join(dir, "sub", ".gitignore")])
    const ignore = path.join(import.meta.dirname, "..", "..", "src", "tools", "ignore.ts")
    const script = [
      'import { Effect } from "effect"',
      `import { walkFiles } from ${JSON.stringify(ignore)}`,
      `const files = await Effect.runPromise(walkFiles(${JSON.stringify(dir)}, ${JSON.stringify(dir)}))`,
      "console.log(JSON.stringify(files.map((f) => f.relative)))"
    ].join("\n")
    const out = execFileSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      cwd: path.join(import.meta.dirname, "..", ".."),
      encoding: "utf8",
      timeout: 60_000
    })
    // a FIFO is not a file: only a.txt is listed
    expect(JSON.parse(out.trim().split("\n").pop()!)).toEqual(["sub/a.txt"])
  })
})
