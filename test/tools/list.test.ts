import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { type ListInput, type ListMetadata, list, MAX_ENTRIES } from "../../src/tools/list.js"
import type { ToolContext } from "../../src/tools/Tools.js"
import { tempDir } from "../support/tmp.js"
import { testContext } from "../support/toolContext.js"

const context = (cwd: string): ToolContext => testContext(cwd)

/** A temp dir holding `files` (paths ending with "/" are empty directories). */
const workspace = (files: ReadonlyArray<string>): string => {
  const dir = tempDir("logbook-list-")
  for (const name of files) {
    const file = path.join(dir, name)
    if (name.endsWith("/")) {
      fs.mkdirSync(file, { recursive: true })
    } else {
      fs.mkdirSync(path.dirname(file), { recursive: true })
      fs.writeFileSync(file, "")
    }
  }
  return dir
}

const run = (dir: string, input: ListInput = {}) =>
  list.execute(input, context(dir)).pipe(Effect.map((out) => ({ ...out, metadata: out.metadata as ListMetadata })))

const failure = (dir: string, input: ListInput) =>
  Effect.map(Effect.flip(list.execute(input, context(dir))), (error) => error.message)

const tree = ["README.md", "src/index.ts", "src/a/b/c/deep.ts", "src/a/one.ts", "test/x.test.ts", "empty/"]

describe("list", () => {
  it.effect("lists two levels by default, sorted, directories with a trailing slash", () =>
    Effect.gen(function* () {
      const dir = workspace(tree)
      const result = yield* run(dir)
      expect(result.output).toBe(
        ["./", "  README.md", "  empty/", "  src/", "    a/", "    index.ts", "  test/", "    x.test.ts"].join("\n")
      )
      expect(result.metadata).toEqual({ path: dir, count: 7, truncated: false })
    })
  )

  it.effect("goes as deep as asked", () =>
    Effect.gen(function* () {
      const dir = workspace(tree)
      const one = yield* run(dir, { depth: 1 })
      expect(one.output).toBe(["./", "  README.md", "  empty/", "  src/", "  test/"].join("\n"))
      const deep = yield* run(dir, { path: "src", depth: 10 })
      expect(deep.output).toBe(
        ["src/", "  a/", "    b/", "      c/", "        deep.ts", "    one.ts", "  index.ts"].join("\n")
      )
      expect(deep.metadata).toEqual({ path: path.join(dir, "src"), count: 6, truncated: false })
    })
  )

  it.effect("skips .git and node_modules, unless listed directly", () =>
    Effect.gen(function* () {
      const dir = workspace([".git/HEAD", "node_modules/pkg/index.js", "src/node_modules/x.js", "src/a.ts", ".env"])
      const result = yield* run(dir, { depth: 5 })
      expect(result.output).toBe(["./", "  .env", "  src/", "    a.ts"].join("\n"))
      const inside = yield* run(dir, { path: "node_modules" })
      expect(inside.output).toBe(["node_modules/", "  pkg/", "    index.js"].join("\n"))
    })
  )

  it.effect("caps the listing and says so, keeping the upper levels whole", () =>
    Effect.gen(function* () {
      const many = Array.from({ length: MAX_ENTRIES + 100 }, (_, i) => `big/f${String(i).padStart(4, "0")}.txt`)
      const dir = workspace([...many, "a.txt", "z.txt"])
      const result = yield* run(dir, { depth: 3 })
      expect(result.metadata).toEqual({ path: dir, count: MAX_ENTRIES, truncated: true })
      const shown = result.output.split("\n")
      // the top level is complete even though big/ comes first
      expect(shown.slice(0, 3)).toEqual(["./", "  a.txt", "  big/"])
      expect(shown).toContain("  z.txt")
      expect(shown.filter((l) => l.startsWith("    f"))).toHaveLength(MAX_ENTRIES - 3)
      expect(shown.at(-1)).toBe(
        `(listing capped at ${MAX_ENTRIES} entries; list a subdirectory, or use a smaller depth, to see the rest)`
      )
    })
  )

  it.effect("shows symlinks with their target and does not follow them", () =>
    Effect.gen(function* () {
      const dir = workspace(["real/file.txt"])
      fs.symlinkSync("real", path.join(dir, "link"))
      fs.symlinkSync(".", path.join(dir, "real", "loop"))
      const result = yield* run(dir, { depth: 4 })
      expect(result.output).toBe(["./", "  link/ -> real", "  real/", "    file.txt", "    loop/ -> ."].join("\n"))
    })
  )

  it.effect("marks an empty directory", () =>
    Effect.gen(function* () {
      const dir = workspace(["empty/"])
      expect((yield* run(dir, { path: "empty" })).output).toBe("empty/\n  (empty directory)")
    })
  )

  it.effect("fails on a file or a missing directory", () =>
    Effect.gen(function* () {
      const dir = workspace(["src/a.ts"])
      expect(yield* failure(dir, { path: "src/a.ts" })).toBe(
        "src/a.ts is a file, not a directory. Use the read tool to see its content, or list its directory."
      )
      expect(yield* failure(dir, { path: "sr" })).toBe("Directory not found: sr\nDid you mean: src/?")
    })
  )
})
