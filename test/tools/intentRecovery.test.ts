/**
 * `checkIntent`: what the crash sweep finds of a file change a dead process announced and never
 * recorded — the file compared with the intent's hashes, the temporary file removed (only one named
 * as `writeFileAtomic` names them, beside the file).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { hashContent } from "../../src/store/blobHash.js"
import { checkIntent } from "../../src/tools/intentRecovery.js"
import { workspaceWith } from "../support/toolContext.js"

const update = {
  path: "a.txt",
  op: "update",
  beforeHash: hashContent("old\n"),
  afterHash: hashContent("new\n")
} as const
const create = { path: "a.txt", op: "create", afterHash: hashContent("new\n") } as const
const temp = ".a.txt.abc123.logbook-tmp"

describe("checkIntent", () => {
  it.effect("the intended content: applied, with the file's stamp; the left temp file removed", () =>
    Effect.gen(function* () {
      const dir = workspaceWith({ "a.txt": "new\n", [temp]: "new\n" })
      const found = yield* checkIntent(dir, { ...update, temp })
      const stat = fs.statSync(path.join(dir, "a.txt"))
      expect(found).toEqual({
        outcome: "applied",
        tempRemoved: true,
        read: { path: path.join(dir, "a.txt"), mtimeMs: stat.mtimeMs, size: 4, hash: hashContent("new\n") }
      })
      expect(fs.readdirSync(dir)).toEqual(["a.txt"])
    })
  )

  it.effect("the content before, or no file for a create: not applied", () =>
    Effect.gen(function* () {
      const dir = workspaceWith({ "a.txt": "old\n", [temp]: "ne" })
      expect(yield* checkIntent(dir, { ...update, temp })).toEqual({ outcome: "not-applied", tempRemoved: true })
      const empty = workspaceWith({})
      expect(yield* checkIntent(empty, { ...create, temp })).toEqual({ outcome: "not-applied", tempRemoved: false })
    })
  )

  it.effect("anything else: changed, with the hash of what is there (none when an updated file is gone)", () =>
    Effect.gen(function* () {
      const dir = workspaceWith({ "a.txt": "theirs\n" })
      expect(yield* checkIntent(dir, { ...update, temp })).toEqual({
        outcome: "changed",
        hash: hashContent("theirs\n"),
        tempRemoved: false
      })
      expect(yield* checkIntent(dir, { ...create, temp })).toMatchObject({ outcome: "changed" })
      const gone = workspaceWith({})
      expect(yield* checkIntent(gone, { ...update, temp })).toEqual({ outcome: "changed", tempRemoved: false })
    })
  )

  it.effect("a file that cannot be read: unreadable, with the reason", () =>
    Effect.gen(function* () {
      const dir = workspaceWith({})
      fs.mkdirSync(path.join(dir, "a.txt"))
      const found = yield* checkIntent(dir, { ...update, temp })
      expect(found.outcome).toBe("unreadable")
      expect(found.error).toContain("EISDIR")
    })
  )

  it.effect("removes only a temp file of that file's own directory and name", () =>
    Effect.gen(function* () {
      const dir = workspaceWith({ "a.txt": "old\n", "keep.txt": "mine", "sub/.a.txt.x.logbook-tmp": "x" })
      for (const other of ["keep.txt", "sub/.a.txt.x.logbook-tmp", ".b.txt.x.logbook-tmp"]) {
        const found = yield* checkIntent(dir, { ...update, temp: other })
        expect(found.tempRemoved).toBe(false)
      }
      expect(fs.readFileSync(path.join(dir, "keep.txt"), "utf8")).toBe("mine")
      expect(fs.existsSync(path.join(dir, "sub/.a.txt.x.logbook-tmp"))).toBe(true)
    })
  )
})
