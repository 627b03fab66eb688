import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { hashContent } from "../../src/store/blobHash.js"
import { BLOCKING_IO_BYTES } from "../../src/tools/confine.js"
import { MAX_REPLACED_BYTES } from "../../src/tools/confinedFiles.js"
import { read } from "../../src/tools/read.js"
import { type WriteInput, type WriteMetadata, write } from "../../src/tools/write.js"
import { type TestToolContext, testContext, workspaceWith } from "../support/toolContext.js"

const workspace = (files: Record<string, string | Buffer> = {}): string => workspaceWith(files, "logbook-write-")

const run = (context: TestToolContext, input: WriteInput) =>
  write.execute(input, context).pipe(Effect.map((out) => ({ ...out, metadata: out.metadata as WriteMetadata })))

const failure = (context: TestToolContext, input: WriteInput) =>
  Effect.map(Effect.flip(write.execute(input, context)), (error) => error.message)

const readFirst = (context: TestToolContext, file: string) => read.execute({ path: file }, context)

describe("write", () => {
  it.effect("creates a new file without a read, records the change and remembers the new content", () =>
    Effect.gen(function* () {
      const dir = workspace()
      const context = testContext(dir)
      const result = yield* run(context, { path: "a.ts", content: "one\ntwo\n" })
      const file = path.join(dir, "a.ts")
      expect(result.output).toBe("Created a.ts (2 lines, 8 bytes)")
      expect(result.metadata).toEqual({ path: file, op: "create", bytes: 8, lines: 2 })
      expect(fs.readFileSync(file, "utf8")).toBe("one\ntwo\n")
      expect(context.changes).toEqual([{ path: file, op: "create", before: undefined, after: "one\ntwo\n" }])
      const stamp = yield* context.reads.last(file)
      expect(stamp).toEqual({ mtimeMs: fs.statSync(file).mtimeMs, size: 8, hash: hashContent("one\ntwo\n") })
      // the write counts as a read: writing again needs no read
      const again = yield* run(context, { path: "a.ts", content: "three" })
      expect(again.output).toBe("Wrote a.ts (1 line, 5 bytes)")
      expect(context.changes[1]).toEqual({ path: file, op: "update", before: "one\ntwo\n", after: "three" })
    })
  )

  it.effect("creates missing parent directories", () =>
    Effect.gen(function* () {
      const dir = workspace()
      const result = yield* run(testContext(dir), { path: "src/deep/er/b.ts", content: "" })
      expect(result.output).toBe("Created src/deep/er/b.ts (0 lines, 0 bytes)")
      expect(fs.readFileSync(path.join(dir, "src/deep/er/b.ts"), "utf8")).toBe("")
    })
  )

  it.effect("replaces a file after a read, keeping its mode and leaving no temporary file", () =>
    Effect.gen(function* () {
      const dir = workspace({ "run.sh": "echo old\n" })
      const file = path.join(dir, "run.sh")
      fs.chmodSync(file, 0o751)
      const context = testContext(dir)
      yield* readFirst(context, "run.sh")
      const result = yield* run(context, { path: "run.sh", content: "echo new\n" })
      expect(result.metadata.op).toBe("update")
      expect(fs.readFileSync(file, "utf8")).toBe("echo new\n")
      expect(fs.statSync(file).mode & 0o7777).toBe(0o751)
      expect(fs.readdirSync(dir)).toEqual(["run.sh"])
      expect(context.changes).toEqual([{ path: file, op: "update", before: "echo old\n", after: "echo new\n" }])
    })
  )

  it.effect("refuses to replace a file that was not read", () =>
    Effect.gen(function* () {
      const dir = workspace({ "a.txt": "precious" })
      const context = testContext(dir)
      const message = yield* failure(context, { path: "a.txt", content: "x" })
      expect(message).toContain("You have not read a.txt in this session. Read it first with the read tool")
      expect(message).toContain("overwriting a file you have not seen can lose work")
      expect(fs.readFileSync(path.join(dir, "a.txt"), "utf8")).toBe("precious")
      expect(context.changes).toEqual([])
    })
  )

  it.effect("refuses to replace a file over the bound of what write and edit replace", () =>
    Effect.gen(function* () {
      const dir = workspace()
      const file = path.join(dir, "huge.bin")
      fs.writeFileSync(file, "")
      // sparse: 16 MiB and one byte on paper
      fs.truncateSync(file, MAX_REPLACED_BYTES + 1)
      const context = testContext(dir)
      const message = yield* failure(context, { path: "huge.bin", content: "small now" })
      expect(message).toMatch(
        /^Cannot change huge\.bin: it is 16 MB, and write and edit change files of up to 16 MB .* Use bash/
      )
      expect(fs.statSync(file).size).toBe(MAX_REPLACED_BYTES + 1)
      expect(context.changes).toEqual([])
    })
  )

  it.effect("refuses to replace a file changed on disk since the read, even at the same size and mtime", () =>
    Effect.gen(function* () {
      const dir = workspace({ "a.txt": "version 1" })
      const file = path.join(dir, "a.txt")
      const context = testContext(dir)
      yield* readFirst(context, "a.txt")
      const { mtime } = fs.statSync(file)
      fs.writeFileSync(file, "version 2")
      fs.utimesSync(file, mtime, mtime)
      const message = yield* failure(context, { path: "a.txt", content: "mine" })
      expect(message).toBe(
        "a.txt changed on disk since you last read it (someone or something else modified it). Read it again with the read tool, then overwrite it based on its current content."
      )
      expect(fs.readFileSync(file, "utf8")).toBe("version 2")
      // reading again makes it writable
      yield* readFirst(context, "a.txt")
      yield* run(context, { path: "a.txt", content: "mine" })
      expect(fs.readFileSync(file, "utf8")).toBe("mine")
    })
  )

  it.effect("uses size and mtime when the stamp has no hash, and a touch alone is no change with one", () =>
    Effect.gen(function* () {
      const dir = workspace({ "a.txt": "same" })
      const file = path.join(dir, "a.txt")
      const context = testContext(dir)
      yield* context.reads.record(file, { mtimeMs: fs.statSync(file).mtimeMs - 5000, size: 4 })
      expect(yield* failure(context, { path: "a.txt", content: "x" })).toContain("changed on disk")

      yield* readFirst(context, "a.txt")
      const later = new Date(Date.now() + 60_000)
      fs.utimesSync(file, later, later)
      yield* run(context, { path: "a.txt", content: "x" })
      expect(fs.readFileSync(file, "utf8")).toBe("x")
    })
  )

  it.effect("refuses a directory, and paths outside the workspace", () =>
    Effect.gen(function* () {
      const outside = workspace({ "target.txt": "t" })
      const dir = workspace({ "src/a.ts": "" })
      fs.symlinkSync(outside, path.join(dir, "out"))
      const context = testContext(dir)
      expect(yield* failure(context, { path: "src", content: "x" })).toBe(
        "src is a directory; write needs the path of a file (e.g. src/name.ext)."
      )
      for (const input of ["../x.txt", path.join(outside, "new.txt"), "out/target.txt", "out/new/file.txt"]) {
        expect(yield* failure(context, { path: input, content: "x" })).toMatch(/is outside the workspace/)
      }
      expect(fs.readdirSync(outside)).toEqual(["target.txt"])
      expect(context.changes).toEqual([])
    })
  )

  it.effect("fails clearly when a part of the path is a file", () =>
    Effect.gen(function* () {
      const dir = workspace({ "a.txt": "x" })
      expect(yield* failure(testContext(dir), { path: "a.txt/b.txt", content: "y" })).toMatch(/a\.txt\/b\.txt/)
    })
  )

  it.effect("writes through a symlink inside the workspace to its target, keeping the link", () =>
    Effect.gen(function* () {
      const dir = workspace({ "real.txt": "old" })
      fs.symlinkSync("real.txt", path.join(dir, "link.txt"))
      const context = testContext(dir)
      yield* readFirst(context, "link.txt")
      const result = yield* run(context, { path: "link.txt", content: "new" })
      expect(result.metadata.path).toBe(path.join(dir, "real.txt"))
      expect(fs.lstatSync(path.join(dir, "link.txt")).isSymbolicLink()).toBe(true)
      expect(fs.readFileSync(path.join(dir, "real.txt"), "utf8")).toBe("new")
    })
  )

  it.effect(
    "announces the change before anything is written: the intent names the temp file, which is then renamed",
    () =>
      Effect.gen(function* () {
        const dir = workspace({ "a.txt": "old\n" })
        const file = path.join(dir, "a.txt")
        const context = testContext(dir)
        yield* readFirst(context, "a.txt")
        yield* run(context, { path: "a.txt", content: "new\n" })
        yield* run(context, { path: "b.txt", content: "fresh\n" })
        expect(context.intents.map(({ temp: _, ...intent }) => intent)).toEqual([
          { path: file, op: "update", before: "old\n", after: "new\n", tempExisted: false },
          { path: path.join(dir, "b.txt"), op: "create", before: undefined, after: "fresh\n", tempExisted: false }
        ])
        expect(path.dirname(context.intents[0]!.temp)).toBe(dir)
        expect(path.basename(context.intents[0]!.temp)).toMatch(/^\.a\.txt\.[0-9a-z]+\.logbook-tmp$/)
        // the temp file the intent named was the one renamed over the file: none is left
        expect(fs.existsSync(context.intents[0]!.temp)).toBe(false)
        expect(fs.readdirSync(dir).sort()).toEqual(["a.txt", "b.txt"])
      })
  )

  it.effect("a refused write announces nothing", () =>
    Effect.gen(function* () {
      const dir = workspace({ "a.txt": "old\n" })
      const context = testContext(dir)
      yield* failure(context, { path: "a.txt", content: "new\n" })
      expect(context.intents).toEqual([])
    })
  )

  it.effect("replaces a file with content larger than what is written with blocking calls, keeping its mode", () =>
    Effect.gen(function* () {
      const before = `${"a".repeat(63)}\n`.repeat(Math.ceil((1.5 * BLOCKING_IO_BYTES) / 64))
      const after = `${"é".repeat(31)}\n`.repeat(Math.ceil((2.5 * BLOCKING_IO_BYTES) / 64))
      const dir = workspace({ "big.txt": before })
      const file = path.join(dir, "big.txt")
      fs.chmodSync(file, 0o640)
      const context = testContext(dir)
      yield* readFirst(context, "big.txt")
      yield* run(context, { path: "big.txt", content: after })
      expect(fs.readFileSync(file, "utf8") === after).toBe(true)
      expect(fs.statSync(file).mode & 0o7777).toBe(0o640)
      expect(fs.readdirSync(dir)).toEqual(["big.txt"])
      expect(hashContent(fs.readFileSync(file))).toBe(hashContent(after))
    })
  )
})
