import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { isWithin, outsideMessage, resolveInWorkspace, WorkspacePathError } from "../../src/tools/Workspace.js"
import { tempDir } from "../support/tmp.js"

/*
 * One fixture for the whole file (the temp dir resolved with realpath, /tmp may be a symlink):
 *
 *   base/ws/                 the workspace root
 *     a.txt, sub/b.txt, ..foo
 *     in-file   -> a.txt                      (relative, inside)
 *     in-dir    -> sub                        (relative, inside)
 *     out-file  -> base/outside/secret.txt    (absolute, outside)
 *     out-dir   -> base/outside               (absolute, outside)
 *     rel-out   -> ../outside                 (relative, outside)
 *     dangling-out -> base/outside/missing.txt
 *     dangling-in  -> sub/missing.txt
 *     rel-dangling -> ../outside/missing.txt  (relative, dangling, outside)
 *     nest/a/b/root-link -> base/ws           (a deep symlink back to the root)
 *     chain1 -> chain2 -> base/outside/secret.txt
 *     loop-a -> loop-b -> loop-a
 *     up -> ..
 *     trap-dir -> base/outside/deep/d         (d holds `trap -> ../nope`, dangling and relative)
 *   base/ws-evil/x           same prefix as the root, not inside it
 *   base/outside/secret.txt
 *   base/alias -> base/ws    the root through another name
 */
const base = fs.realpathSync(tempDir("logbook-workspace-"))
const ws = path.join(base, "ws")
const outside = path.join(base, "outside")
const alias = path.join(base, "alias")

const write = (file: string, content = "x") => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, content)
}
write(path.join(ws, "a.txt"), "a")
write(path.join(ws, "sub", "b.txt"), "b")
write(path.join(ws, "..foo"), "foo")
write(path.join(base, "ws-evil", "x"), "evil")
write(path.join(outside, "secret.txt"), "secret")
fs.mkdirSync(path.join(outside, "deep", "d"), { recursive: true })
fs.symlinkSync("../nope", path.join(outside, "deep", "d", "trap"))
fs.mkdirSync(path.join(ws, "nest", "a", "b"), { recursive: true })
fs.symlinkSync(ws, path.join(ws, "nest", "a", "b", "root-link"))
const links: Record<string, string> = {
  "in-file": "a.txt",
  "in-dir": "sub",
  "out-file": path.join(outside, "secret.txt"),
  "out-dir": outside,
  "rel-out": "../outside",
  "dangling-out": path.join(outside, "missing.txt"),
  "dangling-in": "sub/missing.txt",
  "rel-dangling": "../outside/missing.txt",
  chain1: "chain2",
  chain2: path.join(outside, "secret.txt"),
  "loop-a": "loop-b",
  "loop-b": "loop-a",
  up: "..",
  "trap-dir": path.join(outside, "deep", "d")
}
for (const [name, target] of Object.entries(links)) fs.symlinkSync(target, path.join(ws, name))
fs.symlinkSync(ws, alias)

type Expected =
  | {
      readonly inside: boolean
      readonly relative?: string
      readonly exists?: boolean
      readonly real?: string
    }
  | "fail"

interface Row {
  readonly name: string
  readonly input: string
  /** the root passed to resolveInWorkspace; `ws` when absent */
  readonly root?: string
  readonly expected: Expected
}

const rows: ReadonlyArray<Row> = [
  // legitimate paths
  { name: "a plain file", input: "a.txt", expected: { inside: true, relative: "a.txt", exists: true } },
  { name: "a file in a subdirectory", input: "sub/b.txt", expected: { inside: true, relative: "sub/b.txt" } },
  { name: "the root as `.`", input: ".", expected: { inside: true, relative: ".", exists: true, real: ws } },
  { name: "the root as an empty path", input: "", expected: { inside: true, relative: ".", exists: true } },
  { name: "`./` and `.` segments", input: "./sub/./b.txt", expected: { inside: true, relative: "sub/b.txt" } },
  {
    name: "a file named `..foo` (not a parent reference)",
    input: "..foo",
    expected: { inside: true, relative: "..foo", exists: true }
  },
  {
    name: "an absolute path inside the root",
    input: path.join(ws, "sub", "b.txt"),
    expected: { inside: true, relative: "sub/b.txt", exists: true }
  },
  {
    name: "`..` that comes back into the root",
    input: "sub/../a.txt",
    expected: { inside: true, relative: "a.txt", exists: true }
  },
  {
    name: "a deep path that does not exist yet",
    input: "new/dir/file.txt",
    expected: { inside: true, relative: "new/dir/file.txt", exists: false, real: path.join(ws, "new/dir/file.txt") }
  },
  {
    name: "a path through a regular file",
    input: "a.txt/x",
    expected: { inside: true, relative: "a.txt/x", exists: false }
  },
  {
    name: "a symlink to a file inside",
    input: "in-file",
    expected: { inside: true, relative: "a.txt", exists: true, real: path.join(ws, "a.txt") }
  },
  {
    name: "a new file under a symlink to a directory inside",
    input: "in-dir/new.txt",
    expected: { inside: true, relative: "sub/new.txt", exists: false }
  },
  {
    name: "a dangling symlink pointing inside",
    input: "dangling-in",
    expected: { inside: true, relative: "sub/missing.txt", exists: false }
  },
  {
    name: "`up -> ..` and back down into the root",
    input: "up/ws/a.txt",
    expected: { inside: true, relative: "a.txt", exists: true, real: path.join(ws, "a.txt") }
  },
  {
    name: "a long chain of `../` that climbs back down into the root",
    input: `${"../".repeat(64)}${base.slice(1)}/ws/sub/b.txt`,
    expected: { inside: true, relative: "sub/b.txt", exists: true }
  },
  {
    name: "the root given through an alias symlink",
    root: alias,
    input: "a.txt",
    expected: { inside: true, relative: "a.txt", exists: true, real: path.join(ws, "a.txt") }
  },
  {
    name: "an absolute input through the alias of the root",
    input: path.join(alias, "sub", "b.txt"),
    expected: { inside: true, relative: "sub/b.txt", exists: true }
  },
  { name: "the alias of the root itself", input: alias, expected: { inside: true, relative: ".", exists: true } },
  {
    name: "the root given with a trailing slash",
    root: `${ws}/`,
    input: "sub/b.txt",
    expected: { inside: true, relative: "sub/b.txt" }
  },

  // escape attempts
  {
    // as the kernel walks it: `out-dir` is base/outside, so `..` is base, not the workspace
    name: "`..` after a symlink to an outside directory leaves the link's target, not the workspace",
    input: "out-dir/../a.txt",
    expected: { inside: false, real: path.join(base, "a.txt"), exists: false }
  },
  { name: "`..`", input: "..", expected: { inside: false, real: base, exists: true } },
  {
    name: "`..` through a subdirectory",
    input: "sub/../../outside/secret.txt",
    expected: { inside: false, real: path.join(outside, "secret.txt"), exists: true }
  },
  {
    name: "a sibling with the root as prefix",
    input: "../ws-evil/x",
    expected: { inside: false, real: path.join(base, "ws-evil", "x"), exists: true }
  },
  { name: "the prefix sibling as absolute path", input: path.join(base, "ws-evil"), expected: { inside: false } },
  { name: "an absolute path outside", input: "/etc/passwd", expected: { inside: false, real: "/etc/passwd" } },
  { name: "the filesystem root", input: "/", expected: { inside: false, real: "/", exists: true } },
  {
    name: "a long chain of `../`",
    input: `${"../".repeat(200)}etc/passwd`,
    expected: { inside: false, real: "/etc/passwd" }
  },
  { name: "the home directory `~`", input: "~", expected: { inside: false } },
  { name: "a path under the home `~/x`", input: "~/x", expected: { inside: false } },
  {
    name: "a symlink to a file outside",
    input: "out-file",
    expected: { inside: false, real: path.join(outside, "secret.txt"), exists: true }
  },
  {
    name: "a file under a symlink to a directory outside",
    input: "out-dir/secret.txt",
    expected: { inside: false, real: path.join(outside, "secret.txt"), exists: true }
  },
  {
    name: "a new file under a symlink to a directory outside",
    input: "out-dir/new.txt",
    expected: { inside: false, real: path.join(outside, "new.txt"), exists: false }
  },
  {
    name: "a deep new path under a symlink to a directory outside",
    input: "out-dir/x/y/z.txt",
    expected: { inside: false, real: path.join(outside, "x/y/z.txt"), exists: false }
  },
  {
    name: "a relative symlink `../outside`",
    input: "rel-out/secret.txt",
    expected: { inside: false, real: path.join(outside, "secret.txt"), exists: true }
  },
  {
    name: "a dangling symlink pointing outside",
    input: "dangling-out",
    expected: { inside: false, real: path.join(outside, "missing.txt"), exists: false }
  },
  {
    name: "a relative dangling symlink pointing outside",
    input: "rel-dangling",
    expected: { inside: false, real: path.join(outside, "missing.txt"), exists: false }
  },
  {
    // all symlinks are inside the workspace; writing to this path creates base/outside/missing.txt
    name: "a relative dangling symlink reached through a deep symlink to the root",
    input: "nest/a/b/root-link/rel-dangling",
    expected: { inside: false, real: path.join(outside, "missing.txt"), exists: false }
  },
  {
    name: "a chain of two symlinks ending outside",
    input: "chain1",
    expected: { inside: false, real: path.join(outside, "secret.txt"), exists: true }
  },
  {
    name: "`up -> ..` into the prefix sibling",
    input: "up/ws-evil/x",
    expected: { inside: false, real: path.join(base, "ws-evil", "x"), exists: true }
  },
  {
    name: "`up -> ..` into the outside directory",
    input: "up/outside/secret.txt",
    expected: { inside: false, real: path.join(outside, "secret.txt"), exists: true }
  },
  {
    name: "`..` from the alias root",
    root: alias,
    input: "../outside/secret.txt",
    expected: { inside: false, real: path.join(outside, "secret.txt") }
  },
  {
    // the kernel resolves `../nope` against the directory the symlink really is in (outside/deep/d)
    name: "a relative dangling symlink inside a symlinked outside directory",
    input: "trap-dir/trap",
    expected: { inside: false, real: path.join(outside, "deep", "nope"), exists: false }
  },

  // paths that cannot be resolved
  { name: "a symlink loop", input: "loop-a", expected: "fail" },
  { name: "a path below a symlink loop", input: "loop-b/x/y.txt", expected: "fail" },
  { name: "a NUL byte", input: "a.txt\0/../../outside/secret.txt", expected: "fail" },
  { name: "a NUL byte alone", input: "\0", expected: "fail" }
]

describe("resolveInWorkspace", () => {
  it("has a table of at least 24 rows", () => {
    expect(rows.length).toBeGreaterThanOrEqual(24)
    expect(new Set(rows.map((row) => row.name)).size).toBe(rows.length)
  })

  for (const row of rows) {
    const root = row.root ?? ws
    const expected = row.expected
    if (expected === "fail") {
      it.effect(`${row.name}: fails with WorkspacePathError`, () =>
        Effect.gen(function* () {
          const error = yield* Effect.flip(resolveInWorkspace(root, row.input))
          expect(error).toBeInstanceOf(WorkspacePathError)
          expect(error._tag).toBe("WorkspacePathError")
          expect(error.path).toBe(row.input)
          expect(error.message.length).toBeGreaterThan(0)
        })
      )
    } else {
      it.effect(`${row.name}: ${expected.inside ? "inside" : "outside"}`, () =>
        Effect.gen(function* () {
          const result = yield* resolveInWorkspace(root, row.input)
          expect(result.input).toBe(row.input)
          expect(path.isAbsolute(result.absolute)).toBe(true)
          expect(path.isAbsolute(result.real)).toBe(true)
          expect({ real: result.real, inside: result.inside }).toEqual({
            real: expected.real ?? result.real,
            inside: expected.inside
          })
          if (expected.inside) {
            expect(result.relative).toBe(expected.relative ?? result.relative)
            expect(result.real).toBe(result.relative === "." ? ws : path.join(ws, result.relative ?? "<none>"))
          } else {
            expect(result.relative).toBeUndefined()
          }
          if (expected.exists !== undefined) expect(result.exists).toBe(expected.exists)
        })
      )
    }
  }

  it.effect("keeps the lexical absolute path apart from the real one", () =>
    Effect.gen(function* () {
      const result = yield* resolveInWorkspace(ws, "sub/../out-file")
      expect(result.absolute).toBe(path.join(ws, "out-file"))
      expect(result.real).toBe(path.join(outside, "secret.txt"))
      const home = yield* resolveInWorkspace(ws, "~/x")
      expect(home.absolute).toBe(path.join(os.homedir(), "x"))
    })
  )

  it.effect("reads nothing outside: the secret stays where it is", () =>
    Effect.gen(function* () {
      yield* resolveInWorkspace(ws, "out-dir/new.txt")
      expect(fs.existsSync(path.join(outside, "new.txt"))).toBe(false)
      expect(fs.readFileSync(path.join(outside, "secret.txt"), "utf8")).toBe("secret")
    })
  )
})

describe("isWithin", () => {
  it("compares by whole path segments", () => {
    expect(isWithin("/w/ws", "/w/ws")).toBe(true)
    expect(isWithin("/w/ws", "/w/ws/a")).toBe(true)
    expect(isWithin("/w/ws", "/w/ws/sub/deep/b.txt")).toBe(true)
    expect(isWithin("/w/ws", "/w/ws/..foo")).toBe(true)
    expect(isWithin("/w/ws", "/w/ws-evil")).toBe(false)
    expect(isWithin("/w/ws", "/w/ws-evil/x")).toBe(false)
    expect(isWithin("/w/ws", "/w/wsx")).toBe(false)
    expect(isWithin("/w/ws", "/w")).toBe(false)
    expect(isWithin("/w/ws", "/")).toBe(false)
    expect(isWithin("/w/ws", "/w/other/ws")).toBe(false)
    expect(isWithin("/", "/etc")).toBe(true)
  })
})

describe("outsideMessage", () => {
  it.effect("names the input and the root, and where a symlink leads", () =>
    Effect.gen(function* () {
      const link = yield* resolveInWorkspace(ws, "out-file")
      const message = outsideMessage(link, ws)
      expect(message).toContain("out-file")
      expect(message).toContain(ws)
      expect(message).toContain(`it leads to ${path.join(outside, "secret.txt")}`)
      expect(message).toContain("outside the workspace")
    })
  )

  it.effect("says nothing about leading elsewhere when no symlink is involved", () =>
    Effect.gen(function* () {
      const plain = yield* resolveInWorkspace(ws, "../outside/secret.txt")
      const message = outsideMessage(plain, ws)
      expect(message).toContain("../outside/secret.txt")
      expect(message).toContain(ws)
      expect(message).not.toContain("leads to")
    })
  )
})
