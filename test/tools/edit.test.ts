import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { BLOCKING_IO_BYTES } from "../../src/tools/confine.js"
import { MAX_REPLACED_BYTES } from "../../src/tools/confinedFiles.js"
import { type EditInput, type EditMetadata, edit } from "../../src/tools/edit.js"
import { read } from "../../src/tools/read.js"
import { type TestToolContext, testContext, workspaceWith } from "../support/toolContext.js"

const workspace = (files: Record<string, string | Buffer> = {}): string => workspaceWith(files, "logbook-edit-")

/** A workspace with one file `name`, already read by the agent. */
const readFile = (name: string, content: string | Buffer) =>
  Effect.gen(function* () {
    const dir = workspace({ [name]: content })
    const context = testContext(dir)
    yield* read.execute({ path: name }, context)
    return { dir, context, file: path.join(dir, name) }
  })

const run = (context: TestToolContext, input: EditInput) =>
  edit.execute(input, context).pipe(Effect.map((out) => ({ ...out, metadata: out.metadata as EditMetadata })))

const failure = (context: TestToolContext, input: EditInput) =>
  Effect.map(Effect.flip(edit.execute(input, context)), (error) => error.message)

const numbered = (n: number) => Array.from({ length: n }, (_, i) => `line ${i + 1}`).join("\n")

describe("edit", () => {
  it.effect("replaces one occurrence, shows it with numbered context, and records the change", () =>
    Effect.gen(function* () {
      const before = `${numbered(10)}\n`
      const { context, file } = yield* readFile("a.txt", before)
      const result = yield* run(context, { path: "a.txt", oldString: "line 5\n", newString: "five\nfünf\n" })
      const after = before.replace("line 5\n", "five\nfünf\n")
      expect(fs.readFileSync(file, "utf8")).toBe(after)
      expect(result.output).toBe(
        [
          "Edited a.txt: 1 replacement",
          "     2\tline 2",
          "     3\tline 3",
          "     4\tline 4",
          "     5\tfive",
          "     6\tfünf",
          "     7\tline 6",
          "     8\tline 7",
          "     9\tline 8"
        ].join("\n")
      )
      expect(result.metadata).toEqual({ path: file, replacements: 1, linesAdded: 2, linesRemoved: 1 })
      expect(context.changes).toEqual([{ path: file, op: "update", before, after }])
    })
  )

  it.effect("counts a change inside a line as one line removed and one added, and shows the file's edges", () =>
    Effect.gen(function* () {
      const { context } = yield* readFile("a.ts", "const a = 1\nconst b = 2\n")
      const result = yield* run(context, { path: "a.ts", oldString: "a = 1", newString: "a = 10" })
      expect(result.output).toBe("Edited a.ts: 1 replacement\n     1\tconst a = 10\n     2\tconst b = 2")
      expect(result.metadata).toMatchObject({ linesAdded: 1, linesRemoved: 1 })
    })
  )

  it.effect("deletes text with an empty newString", () =>
    Effect.gen(function* () {
      const { context, file } = yield* readFile("a.txt", "keep\ndrop\nkeep too\n")
      const result = yield* run(context, { path: "a.txt", oldString: "drop\n", newString: "" })
      expect(fs.readFileSync(file, "utf8")).toBe("keep\nkeep too\n")
      expect(result.metadata).toMatchObject({ linesAdded: 0, linesRemoved: 1 })
      expect(result.output).toBe("Edited a.txt: 1 replacement\n     1\tkeep\n     2\tkeep too")
    })
  )

  it.effect("says when oldString is not found, and where its first line is", () =>
    Effect.gen(function* () {
      const { context } = yield* readFile("a.txt", "alpha\nbeta\ngamma\n")
      expect(yield* failure(context, { path: "a.txt", oldString: "delta", newString: "x" })).toBe(
        "oldString was not found in a.txt. Not even its first line occurs in the file. oldString must match the file's current content exactly, including indentation and line breaks; read the file again and copy the text from it."
      )
      expect(yield* failure(context, { path: "a.txt", oldString: "beta\ndelta", newString: "x" })).toContain(
        "Its first line appears at line 2: the text after it differs."
      )
      expect(context.changes).toEqual([])
    })
  )

  it.effect("says when only the whitespace differs, with the lines where it would match", () =>
    Effect.gen(function* () {
      const code = "function f() {\n\tif (x) {\n\t\treturn  1\n\t}\n}\n"
      const { context } = yield* readFile("f.ts", code)
      const message = yield* failure(context, {
        path: "f.ts",
        oldString: "  if (x) {\n    return 1\n  }",
        newString: "  if (y) {\n    return 2\n  }"
      })
      expect(message).toContain("oldString was not found in f.ts. It matches lines 2-4 if whitespace is ignored")
      expect(message).toContain("the whitespace differs")
      expect(yield* failure(context, { path: "f.ts", oldString: "return 1", newString: "x" })).toContain(
        "It matches line 3 if whitespace is ignored"
      )
    })
  )

  it.effect("says when oldString carries read's line numbers", () =>
    Effect.gen(function* () {
      const { context } = yield* readFile("a.txt", "alpha\nbeta\n")
      expect(
        yield* failure(context, { path: "a.txt", oldString: "     1\talpha\n     2\tbeta", newString: "x" })
      ).toContain("line numbers from read's output")
    })
  )

  it.effect("refuses several occurrences with their line numbers, and replaces them all with replaceAll", () =>
    Effect.gen(function* () {
      const before = "let x = 1\nuse(x)\n\n\n\n\n\n\n\n\nx = 2\n"
      const { context, file } = yield* readFile("a.ts", before)
      expect(yield* failure(context, { path: "a.ts", oldString: "x", newString: "count" })).toBe(
        "oldString occurs 3 times in a.ts (at lines 1, 2, 11). Add more surrounding lines to oldString so that it matches only the place you mean, or set replaceAll to true to replace every occurrence."
      )
      const result = yield* run(context, { path: "a.ts", oldString: "x", newString: "count", replaceAll: true })
      expect(fs.readFileSync(file, "utf8")).toBe(before.replaceAll("x", "count"))
      expect(result.metadata).toMatchObject({ replacements: 3, linesAdded: 3, linesRemoved: 3 })
      expect(result.output).toBe(
        [
          "Edited a.ts: 3 replacements",
          "     1\tlet count = 1",
          "     2\tuse(count)",
          "     3\t",
          "     4\t",
          "     5\t",
          "  ...",
          "     8\t",
          "     9\t",
          "    10\t",
          "    11\tcount = 2"
        ].join("\n")
      )
    })
  )

  it.effect("keeps CRLF line endings when the strings use LF", () =>
    Effect.gen(function* () {
      const { context, file } = yield* readFile("w.txt", "one\r\ntwo\r\nthree\r\n")
      const result = yield* run(context, { path: "w.txt", oldString: "one\ntwo\n", newString: "uno\ndos\nextra\n" })
      expect(fs.readFileSync(file, "utf8")).toBe("uno\r\ndos\r\nextra\r\nthree\r\n")
      expect(result.output).toBe("Edited w.txt: 1 replacement\n     1\tuno\n     2\tdos\n     3\textra\n     4\tthree")
      expect(result.metadata).toMatchObject({ linesAdded: 3, linesRemoved: 2 })
    })
  )

  it.effect("refuses a file that was not read, or changed on disk since", () =>
    Effect.gen(function* () {
      const dir = workspace({ "a.txt": "hello\n" })
      const file = path.join(dir, "a.txt")
      const context = testContext(dir)
      expect(yield* failure(context, { path: "a.txt", oldString: "hello", newString: "bye" })).toBe(
        "You have not read a.txt in this session. Read it first with the read tool, then edit it: edit replaces exact text, so it needs the file's current content."
      )
      yield* read.execute({ path: "a.txt" }, context)
      fs.writeFileSync(file, "hello there\n")
      expect(yield* failure(context, { path: "a.txt", oldString: "hello", newString: "bye" })).toContain(
        "a.txt changed on disk since you last read it"
      )
      expect(fs.readFileSync(file, "utf8")).toBe("hello there\n")
      expect(context.changes).toEqual([])
    })
  )

  it.effect("lets edits follow a read and each other, each from the content the previous one left", () =>
    Effect.gen(function* () {
      const { context, file } = yield* readFile("a.txt", "a\nb\nc\n")
      yield* run(context, { path: "a.txt", oldString: "a\n", newString: "A\n" })
      yield* run(context, { path: "a.txt", oldString: "b\n", newString: "B\n" })
      expect(fs.readFileSync(file, "utf8")).toBe("A\nB\nc\n")
      expect(context.changes.map((c) => [c.before, c.after])).toEqual([
        ["a\nb\nc\n", "A\nb\nc\n"],
        ["A\nb\nc\n", "A\nB\nc\n"]
      ])
    })
  )

  it.effect("refuses empty or unchanged strings, missing files (pointing to write), directories and binary files", () =>
    Effect.gen(function* () {
      const dir = workspace({ "src/main.ts": "x", "bin.dat": Buffer.from([1, 0, 2]) })
      const context = testContext(dir)
      expect(yield* failure(context, { path: "src/main.ts", oldString: "", newString: "y" })).toContain(
        "oldString is empty."
      )
      expect(yield* failure(context, { path: "src/main.ts", oldString: "x", newString: "x" })).toContain(
        "oldString and newString are the same"
      )
      expect(yield* failure(context, { path: "src/mian.ts", oldString: "x", newString: "y" })).toBe(
        "File not found: src/mian.ts\nDid you mean: src/main.ts?\nTo create a new file, use the write tool."
      )
      expect(yield* failure(context, { path: "src", oldString: "x", newString: "y" })).toBe(
        "src is a directory; edit needs the path of a file."
      )
      const bin = path.join(dir, "bin.dat")
      const stat = fs.statSync(bin)
      yield* context.reads.record(bin, { mtimeMs: stat.mtimeMs, size: stat.size })
      expect(yield* failure(context, { path: "bin.dat", oldString: "\u0001", newString: "y" })).toContain(
        "Cannot edit bin.dat: it is a binary file"
      )
      expect(yield* failure(context, { path: "../x", oldString: "x", newString: "y" })).toMatch(
        /is outside the workspace/
      )
    })
  )

  it.effect("keeps the file's mode and shows the start and end of a long change", () =>
    Effect.gen(function* () {
      const { context, file } = yield* readFile("run.sh", "#!/bin/sh\necho hi\n")
      fs.chmodSync(file, 0o700)
      const long = Array.from({ length: 40 }, (_, i) => `echo ${i}`).join("\n")
      const result = yield* run(context, { path: "run.sh", oldString: "echo hi", newString: long })
      expect(fs.statSync(file).mode & 0o7777).toBe(0o700)
      const shown = result.output.split("\n")
      expect(shown[1]).toBe("     1\t#!/bin/sh")
      expect(shown).toContain("     …\t(20 more changed lines)")
      expect(shown.at(-1)).toBe("    41\techo 39")
      expect(result.metadata).toMatchObject({ linesAdded: 40, linesRemoved: 1 })
    })
  )

  it.effect("announces the change before anything is written (file.intent), then records it", () =>
    Effect.gen(function* () {
      const dir = workspaceWith({ "a.txt": "alpha\nbeta\n" }, "logbook-edit-")
      const file = path.join(dir, "a.txt")
      const context = testContext(dir)
      yield* read.execute({ path: "a.txt" }, context)
      yield* run(context, { path: "a.txt", oldString: "beta", newString: "BETA" })
      expect(context.intents.map(({ temp: _, ...intent }) => intent)).toEqual([
        { path: file, op: "update", before: "alpha\nbeta\n", after: "alpha\nBETA\n", tempExisted: false }
      ])
      expect(path.basename(context.intents[0]!.temp)).toMatch(/^\.a\.txt\.[0-9a-z]+\.logbook-tmp$/)
      expect(fs.readdirSync(dir)).toEqual(["a.txt"])
    })
  )

  it.effect("refuses a file over the bound of what write and edit replace, and leaves it as it was", () =>
    Effect.gen(function* () {
      const { context, file } = yield* readFile("huge.log", "the start\n")
      // sparse: 17 MiB on paper, a few bytes on the disk
      fs.truncateSync(file, MAX_REPLACED_BYTES + 1024 * 1024)
      const message = yield* failure(context, { path: "huge.log", oldString: "the start", newString: "x" })
      expect(message).toBe(
        "Cannot change huge.log: it is 17 MB, and write and edit change files of up to 16 MB (the file is kept in the session's log before and after). Use bash to change a larger file."
      )
      expect(fs.statSync(file).size).toBe(MAX_REPLACED_BYTES + 1024 * 1024)
      expect(context.intents).toEqual([])
      expect(context.changes).toEqual([])
    })
  )

  it.effect("edits a file larger than what is read without the thread pool, at its end", () =>
    Effect.gen(function* () {
      const body = `${"x".repeat(99)}\n`.repeat(Math.ceil((2.5 * BLOCKING_IO_BYTES) / 100))
      const { context, file } = yield* readFile("big.txt", `${body}the end\n`)
      yield* run(context, { path: "big.txt", oldString: "the end", newString: "the new end" })
      expect(fs.readFileSync(file, "utf8")).toBe(`${body}the new end\n`)
    })
  )
})
