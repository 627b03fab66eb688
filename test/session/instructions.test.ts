/**
 * The instruction files (AGENTS.md) of a workspace, over real directories: which files, in which
 * order, within which limits, and what happens to the ones that cannot be read.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import {
  findInstructions,
  type InstructionsOptions,
  instructionsSection,
  type LoadedInstructions
} from "../../src/session/Instructions.js"
import { tempDir } from "../support/tmp.js"

/** Writes `files` (relative path -> content; `null`: a directory) under a new temporary directory. */
const tree = (files: Readonly<Record<string, string | null>>): string => {
  const base = fs.realpathSync(tempDir("logbook-instructions-"))
  for (const [name, content] of Object.entries(files)) {
    const file = path.join(base, name)
    if (content === null) fs.mkdirSync(file, { recursive: true })
    else {
      fs.mkdirSync(path.dirname(file), { recursive: true })
      fs.writeFileSync(file, content)
    }
  }
  return base
}

const find = (cwd: string, options?: InstructionsOptions): Effect.Effect<LoadedInstructions> =>
  findInstructions(cwd, options).pipe(Effect.provide(NodeContext.layer))

const paths = (loaded: LoadedInstructions) => loaded.files.map((file) => file.path)

describe("findInstructions: which files", () => {
  it.effect("inside a repository: from the root down to the workspace, CLAUDE.md where there is no AGENTS.md", () =>
    Effect.gen(function* () {
      const base = tree({
        "AGENTS.md": "ABOVE THE ROOT",
        "repo/.git/HEAD": "ref: refs/heads/main\n",
        "repo/AGENTS.md": "ROOT RULES",
        "repo/a/CLAUDE.md": "A RULES (claude)",
        "repo/a/b/AGENTS.md": "B RULES",
        "repo/a/b/CLAUDE.md": "B CLAUDE (not read: there is an AGENTS.md)"
      })
      const repo = path.join(base, "repo")
      const loaded = yield* find(path.join(repo, "a", "b"))
      expect(loaded.root).toBe(repo)
      expect(loaded.directories).toEqual([repo, path.join(repo, "a"), path.join(repo, "a", "b")])
      expect(paths(loaded)).toEqual([
        path.join(repo, "AGENTS.md"),
        path.join(repo, "a", "CLAUDE.md"),
        path.join(repo, "a", "b", "AGENTS.md")
      ])
      expect(loaded.files.map((file) => [file.scope, file.content, file.size])).toEqual([
        ["project", "ROOT RULES", 10],
        ["project", "A RULES (claude)", 16],
        ["project", "B RULES", 7]
      ])
      expect(loaded.skipped).toEqual([])
      // the prompt section: each under a header naming its path, the root first, the workspace last
      const section = instructionsSection(loaded)
      const at = (text: string) => section.indexOf(text)
      expect(at(`## ${path.join(repo, "AGENTS.md")}\n\nROOT RULES`)).toBeGreaterThan(0)
      expect(at("ROOT RULES")).toBeLessThan(at("A RULES (claude)"))
      expect(at("A RULES (claude)")).toBeLessThan(at("B RULES"))
      expect(section).not.toContain("ABOVE THE ROOT")
      expect(section).not.toContain("B CLAUDE")
    })
  )

  it.effect("a .git file (a worktree or submodule) marks the root too; the root may be the workspace itself", () =>
    Effect.gen(function* () {
      const base = tree({
        "AGENTS.md": "ABOVE",
        "wt/.git": "gitdir: /elsewhere/.git/worktrees/wt\n",
        "wt/AGENTS.md": "WORKTREE RULES",
        "wt/sub/AGENTS.md": "SUB RULES"
      })
      const worktree = path.join(base, "wt")
      const fromSub = yield* find(path.join(worktree, "sub"))
      expect(fromSub.root).toBe(worktree)
      expect(fromSub.files.map((file) => file.content)).toEqual(["WORKTREE RULES", "SUB RULES"])
      const fromRoot = yield* find(worktree)
      expect(fromRoot.root).toBe(worktree)
      expect(fromRoot.directories).toEqual([worktree])
      expect(fromRoot.files.map((file) => file.content)).toEqual(["WORKTREE RULES"])
    })
  )

  it.effect("outside a repository only the workspace directory is read", () =>
    Effect.gen(function* () {
      const base = tree({ "AGENTS.md": "PARENT RULES", "ws/AGENTS.md": "WORKSPACE RULES" })
      const loaded = yield* find(path.join(base, "ws"))
      expect(loaded.root).toBeUndefined()
      expect(loaded.directories).toEqual([path.join(base, "ws")])
      expect(loaded.files.map((file) => file.content)).toEqual(["WORKSPACE RULES"])
      const parent = yield* find(base)
      expect(parent.files.map((file) => file.content)).toEqual(["PARENT RULES"])
    })
  )

  it.effect("the user's own file comes first (scope user); a missing one is no error", () =>
    Effect.gen(function* () {
      const base = tree({
        "config/logbook/AGENTS.md": "USER RULES",
        "repo/.git": null,
        "repo/AGENTS.md": "REPO RULES"
      })
      const userFile = path.join(base, "config", "logbook", "AGENTS.md")
      const loaded = yield* find(path.join(base, "repo"), { userFile })
      expect(loaded.userFile).toBe(userFile)
      expect(loaded.files.map((file) => [file.scope, file.path, file.content])).toEqual([
        ["user", userFile, "USER RULES"],
        ["project", path.join(base, "repo", "AGENTS.md"), "REPO RULES"]
      ])
      const section = instructionsSection(loaded)
      expect(section.indexOf("USER RULES")).toBeLessThan(section.indexOf("REPO RULES"))
      expect(section).toContain(`## ${userFile} (the user's own instructions, for every project)`)

      const missing = yield* find(path.join(base, "repo"), { userFile: path.join(base, "none", "AGENTS.md") })
      expect(missing.files.map((file) => file.content)).toEqual(["REPO RULES"])
      expect(missing.skipped).toEqual([])
    })
  )

  it.effect("no files: an empty list and no prompt section; blank files are left out", () =>
    Effect.gen(function* () {
      const base = tree({ "ws/AGENTS.md": "  \n\n" })
      const loaded = yield* find(path.join(base, "ws"))
      expect(loaded.files).toEqual([])
      expect(instructionsSection(loaded)).toBe("")
    })
  )
})

describe("findInstructions: what counts as a file", () => {
  it.effect("a directory named AGENTS.md is not a file: the CLAUDE.md beside it is read", () =>
    Effect.gen(function* () {
      const base = tree({ "ws/AGENTS.md/inside.md": "NOT THIS", "ws/CLAUDE.md": "CLAUDE RULES" })
      const loaded = yield* find(path.join(base, "ws"))
      expect(paths(loaded)).toEqual([path.join(base, "ws", "CLAUDE.md")])
      expect(loaded.skipped).toEqual([])
    })
  )

  it.effect.runIf(process.platform !== "win32")("a FIFO named AGENTS.md is never opened (it would block)", () =>
    Effect.gen(function* () {
      const base = tree({ "ws/CLAUDE.md": "CLAUDE RULES" })
      execFileSync("mkfifo", [path.join(base, "ws", "AGENTS.md")])
      const loaded = yield* find(path.join(base, "ws"))
      expect(loaded.files.map((file) => file.content)).toEqual(["CLAUDE RULES"])
    })
  )

  it.effect("a symlinked AGENTS.md is read under its own path; a link to a file already read is read once", () =>
    Effect.gen(function* () {
      const base = tree({
        "shared/rules.md": "SHARED RULES",
        "repo/.git": null,
        "repo/AGENTS.md": "ROOT RULES",
        "repo/pkg/sub/x.txt": "x"
      })
      const repo = path.join(base, "repo")
      fs.symlinkSync(path.join(base, "shared", "rules.md"), path.join(repo, "pkg", "AGENTS.md"))
      fs.symlinkSync(path.join("..", "..", "AGENTS.md"), path.join(repo, "pkg", "sub", "AGENTS.md"))
      const loaded = yield* find(path.join(repo, "pkg", "sub"))
      expect(loaded.files.map((file) => [file.path, file.content])).toEqual([
        [path.join(repo, "AGENTS.md"), "ROOT RULES"],
        [path.join(repo, "pkg", "AGENTS.md"), "SHARED RULES"]
      ])
      expect(loaded.skipped).toEqual([])
    })
  )

  it.effect("a dangling symlink is no file and no error", () =>
    Effect.gen(function* () {
      const base = tree({ "ws/CLAUDE.md": "CLAUDE RULES" })
      fs.symlinkSync(path.join(base, "gone.md"), path.join(base, "ws", "AGENTS.md"))
      const loaded = yield* find(path.join(base, "ws"))
      expect(loaded.files.map((file) => file.content)).toEqual(["CLAUDE RULES"])
      expect(loaded.skipped).toEqual([])
    })
  )
})

describe("findInstructions: files that cannot be read", () => {
  it.effect("a file that cannot be looked at (a symlink loop) is skipped with its reason; the others are read", () =>
    Effect.gen(function* () {
      const base = tree({ "repo/.git": null, "repo/AGENTS.md": "ROOT RULES", "repo/ws/CLAUDE.md": "NOT A FALLBACK" })
      const ws = path.join(base, "repo", "ws")
      fs.symlinkSync(path.join(ws, "loop-b"), path.join(ws, "AGENTS.md"))
      fs.symlinkSync(path.join(ws, "AGENTS.md"), path.join(ws, "loop-b"))
      const loaded = yield* find(ws)
      expect(loaded.files.map((file) => file.content)).toEqual(["ROOT RULES"])
      expect(loaded.skipped).toHaveLength(1)
      expect(loaded.skipped[0]!.path).toBe(path.join(ws, "AGENTS.md"))
      expect(loaded.skipped[0]!.reason).toMatch(/ELOOP/)
    })
  )

  it.effect.runIf(process.platform === "linux")("a file whose read fails (EIO) is skipped with its reason", () =>
    Effect.gen(function* () {
      const base = tree({ "repo/.git": null, "repo/AGENTS.md": "ROOT RULES" })
      const ws = path.join(base, "repo", "ws")
      fs.mkdirSync(ws)
      // a regular file by stat whose first bytes cannot be read: the unmapped start of a process's memory
      fs.symlinkSync("/proc/self/mem", path.join(ws, "AGENTS.md"))
      const loaded = yield* find(ws)
      expect(loaded.files.map((file) => file.content)).toEqual(["ROOT RULES"])
      expect(loaded.skipped).toEqual([{ path: path.join(ws, "AGENTS.md"), reason: expect.stringMatching(/EIO/) }])
    })
  )

  // root reads a file whatever its mode: only an unprivileged user sees EACCES
  it.effect.runIf(process.getuid?.() !== 0)("a file without read permission is skipped: permission denied", () =>
    Effect.gen(function* () {
      const base = tree({ "ws/AGENTS.md": "SECRET RULES" })
      const file = path.join(base, "ws", "AGENTS.md")
      fs.chmodSync(file, 0o000)
      const loaded = yield* find(path.join(base, "ws"))
      expect(loaded.files).toEqual([])
      expect(loaded.skipped).toEqual([{ path: file, reason: "permission denied" }])
    })
  )
})

describe("findInstructions: limits", () => {
  it.effect("a file over the per-file limit is cut at a UTF-8 boundary, and the prompt says so", () =>
    Effect.gen(function* () {
      // 1 + 6 × 2 = 13 bytes; a cut at 10 would split the fifth é: it goes, 9 bytes stay
      const base = tree({ "ws/AGENTS.md": "aéééééé" })
      const loaded = yield* find(path.join(base, "ws"), { maxFileBytes: 10 })
      expect(loaded.files).toHaveLength(1)
      const file = loaded.files[0]!
      expect(file.content).toBe("aéééé")
      expect(file.includedBytes).toBe(9)
      expect(file.size).toBe(13)
      expect(file.cut).toEqual({ limit: "file", maxBytes: 10 })
      expect(instructionsSection(loaded)).toContain(
        "aéééé\n\n[logbook: this file was cut after 9 of its 13 bytes: logbook reads at most 10 bytes of an instructions file]"
      )
    })
  )

  it.effect("a large file: only the first 32 KiB go in", () =>
    Effect.gen(function* () {
      const base = tree({ "ws/AGENTS.md": `${"x".repeat(1024 * 1024 - 3)}END` })
      const loaded = yield* find(path.join(base, "ws"))
      const file = loaded.files[0]!
      expect(file.size).toBe(1024 * 1024)
      expect(file.includedBytes).toBe(32 * 1024)
      expect(file.content).toBe("x".repeat(32 * 1024))
      expect(file.cut).toEqual({ limit: "file", maxBytes: 32 * 1024 })
    })
  )

  it.effect("the total limit goes to the more specific files first; a file left no room is still named", () =>
    Effect.gen(function* () {
      const base = tree({
        "user/AGENTS.md": "U".repeat(5),
        "repo/.git": null,
        "repo/AGENTS.md": "R".repeat(10),
        "repo/ws/AGENTS.md": "W".repeat(8)
      })
      const loaded = yield* find(path.join(base, "repo", "ws"), {
        userFile: path.join(base, "user", "AGENTS.md"),
        maxFileBytes: 10,
        maxTotalBytes: 15
      })
      expect(loaded.files.map((file) => [file.scope, file.content, file.cut?.limit])).toEqual([
        ["user", "", "total"],
        ["project", "R".repeat(7), "total"],
        ["project", "W".repeat(8), undefined]
      ])
      const section = instructionsSection(loaded)
      expect(section).toContain(
        "[logbook: this file was cut after 7 of its 10 bytes: all instructions files together are limited to 15 bytes]"
      )
      expect(section).toContain(
        "[logbook: this file was cut after 0 of its 5 bytes: all instructions files together are limited to 15 bytes]"
      )
    })
  )

  it.effect("the defaults: 32 KiB a file, 64 KiB in all", () =>
    Effect.gen(function* () {
      const big = "y".repeat(40 * 1024)
      const base = tree({
        "repo/.git": null,
        "repo/AGENTS.md": big,
        "repo/a/AGENTS.md": big,
        "repo/a/b/AGENTS.md": big
      })
      const loaded = yield* find(path.join(base, "repo", "a", "b"))
      expect(loaded.files.map((file) => file.includedBytes)).toEqual([0, 32 * 1024, 32 * 1024])
      expect(loaded.files.map((file) => file.cut?.limit)).toEqual(["total", "file", "file"])
    })
  )
})
