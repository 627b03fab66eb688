import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { hashContent } from "../../src/store/blobHash.js"
import { BLOCKING_IO_BYTES } from "../../src/tools/confine.js"
import {
  BINARY_PROBE_BYTES,
  DEFAULT_LIMIT,
  MAX_LINE_CHARS,
  MAX_OUTPUT_BYTES,
  type ReadInput,
  type ReadMetadata,
  read
} from "../../src/tools/read.js"
import type { ToolContext } from "../../src/tools/Tools.js"
import { testContext, workspaceWith } from "../support/toolContext.js"

const context = (cwd: string): ToolContext => testContext(cwd)

const workspace = (files: Record<string, string | Buffer> = {}): string => workspaceWith(files, "logbook-read-")

const run = (dir: string, input: ReadInput) =>
  read.execute(input, context(dir)).pipe(Effect.map((out) => ({ ...out, metadata: out.metadata as ReadMetadata })))

const failure = (dir: string, input: ReadInput) =>
  Effect.map(Effect.flip(read.execute(input, context(dir))), (error) => error.message)

const lines = (n: number, make: (i: number) => string = (i) => `line ${i}`) =>
  Array.from({ length: n }, (_, i) => make(i + 1)).join("\n")

describe("read", () => {
  it.effect("numbers the lines like cat -n", () =>
    Effect.gen(function* () {
      const dir = workspace({ "a.txt": "alpha\nbeta\n\ngamma\n" })
      const result = yield* run(dir, { path: "a.txt" })
      expect(result.output).toBe("     1\talpha\n     2\tbeta\n     3\t\n     4\tgamma")
      expect(result.metadata).toMatchObject({ path: path.join(dir, "a.txt"), lines: 4, truncated: false })
    })
  )

  it.effect(
    "reads a last line without a newline, drops CR of CRLF lines, and takes absolute paths inside the workspace",
    () =>
      Effect.gen(function* () {
        const dir = workspace({ "w.txt": "one\r\ntwo\r\nthree" })
        const result = yield* run(dir, { path: path.join(dir, "w.txt") })
        expect(result.output).toBe("     1\tone\n     2\ttwo\n     3\tthree")
        expect(result.metadata.lines).toBe(3)
      })
  )

  it.effect("refuses a path outside the workspace, also through a symlink", () =>
    Effect.gen(function* () {
      const outside = workspace({ "secret.txt": "s3cret" })
      const dir = workspace({ "a.txt": "a" })
      fs.symlinkSync(path.join(outside, "secret.txt"), path.join(dir, "link.txt"))
      for (const input of [path.join(outside, "secret.txt"), "../secret.txt", "link.txt"]) {
        const error = yield* Effect.flip(read.execute({ path: input }, context(dir)))
        expect(error.message).toMatch(/is outside the workspace/)
        expect(error.message).not.toMatch(/s3cret/)
      }
    })
  )

  it.effect("shows the lines from offset, at most limit, and says how to read on", () =>
    Effect.gen(function* () {
      const dir = workspace({ "ten.txt": `${lines(10)}\n` })
      const result = yield* run(dir, { path: "ten.txt", offset: 3, limit: 2 })
      expect(result.output).toBe("     3\tline 3\n     4\tline 4\n\n(showing lines 3-4 of 10; use offset=5 to read on)")
      expect(result.metadata).toMatchObject({ lines: 10, truncated: true, from: 3, to: 4 })

      const tail = yield* run(dir, { path: "ten.txt", offset: 9 })
      expect(tail.output).toBe("     9\tline 9\n    10\tline 10")
      expect(tail.metadata.truncated).toBe(false)
    })
  )

  it.effect("fails with the line count when offset is past the end", () =>
    Effect.gen(function* () {
      const dir = workspace({ "ten.txt": lines(10) })
      expect(yield* failure(dir, { path: "ten.txt", offset: 11 })).toBe(
        "Offset 11 is past the end of ten.txt, which has 10 lines. Use an offset from 1 to 10."
      )
    })
  )

  it.effect("says so for an empty file", () =>
    Effect.gen(function* () {
      const dir = workspace({ "empty.txt": "" })
      const result = yield* run(dir, { path: "empty.txt" })
      expect(result.output).toBe("(the file is empty)")
      expect(result.metadata).toMatchObject({ lines: 0, truncated: false })
    })
  )

  it.effect("cuts long lines with a marker and a note", () =>
    Effect.gen(function* () {
      const long = "x".repeat(5000)
      const dir = workspace({ "long.txt": `short\n${long}\nend\n` })
      const result = yield* run(dir, { path: "long.txt" })
      const shown = result.output.split("\n")
      expect(shown[0]).toBe("     1\tshort")
      expect(shown[1]).toBe(
        `     2\t${"x".repeat(MAX_LINE_CHARS)} … [line cut at ${MAX_LINE_CHARS} characters; it has 5000 bytes]`
      )
      expect(shown[2]).toBe("     3\tend")
      expect(result.output).toContain(`(lines longer than ${MAX_LINE_CHARS} characters were cut;`)
      expect(result.metadata).toMatchObject({ lines: 3, truncated: true })
    })
  )

  it.effect("shows the default number of lines of a large file and says how to read on", () =>
    Effect.gen(function* () {
      const dir = workspace({ "big.txt": `${lines(5123)}\n` })
      const result = yield* run(dir, { path: "big.txt" })
      const shown = result.output.split("\n")
      expect(shown[0]).toBe("     1\tline 1")
      expect(shown[DEFAULT_LIMIT - 1]).toBe(`  2000\tline ${DEFAULT_LIMIT}`)
      expect(shown.at(-1)).toBe("(showing lines 1-2000 of 5123; use offset=2001 to read on)")
      expect(result.metadata).toMatchObject({ lines: 5123, truncated: true, from: 1, to: 2000 })

      const next = yield* run(dir, { path: "big.txt", offset: 2001 })
      expect(next.output.split("\n")[0]).toBe("  2001\tline 2001")
    })
  )

  it.effect("caps the output in bytes and reads on from the first line left out", () =>
    Effect.gen(function* () {
      // 1000 lines of ~100 bytes: about twice the byte cap
      const dir = workspace({ "wide.txt": lines(1000, (i) => `${i}:${"y".repeat(96)}`) })
      const result = yield* run(dir, { path: "wide.txt" })
      const last = result.metadata.to!
      expect(last).toBeGreaterThan(1)
      expect(last).toBeLessThan(1000)
      const [body, note] = result.output.split("\n\n")
      expect(Buffer.byteLength(body!)).toBeLessThanOrEqual(MAX_OUTPUT_BYTES)
      expect(body!.split("\n")).toHaveLength(last)
      expect(note).toBe(`(output capped at 50 KB: showing lines 1-${last} of 1000; use offset=${last + 1} to read on)`)
      expect(result.metadata.truncated).toBe(true)

      const next = yield* run(dir, { path: "wide.txt", offset: last + 1, limit: 1 })
      expect(next.output.split("\n")[0]).toBe(`${String(last + 1).padStart(6)}\t${last + 1}:${"y".repeat(96)}`)
    })
  )

  it.effect("decodes multi-byte characters across read chunks", () =>
    Effect.gen(function* () {
      // 2001-byte lines of two-byte characters: chunk boundaries fall inside characters
      const line = (i: number) => `${String(i).padStart(4, "0")}${"é".repeat(998)}`
      const dir = workspace({ "utf8.txt": lines(100, line) })
      const result = yield* run(dir, { path: "utf8.txt", offset: 30, limit: 10 })
      const shown = result.output.split("\n").map((l) => l.slice(l.indexOf("\t") + 1))
      expect(shown.slice(0, 10)).toEqual(Array.from({ length: 10 }, (_, i) => line(30 + i)))
    })
  )

  it.effect("refuses a binary file", () =>
    Effect.gen(function* () {
      const dir = workspace({
        "image.png": Buffer.concat([Buffer.from("\x89PNG\r\n"), Buffer.alloc(16), Buffer.from("text")]),
        "late-nul.txt": Buffer.concat([Buffer.alloc(BINARY_PROBE_BYTES, "a"), Buffer.from([0])])
      })
      const message = yield* failure(dir, { path: "image.png" })
      expect(message).toContain("Cannot read image.png: it is a binary file")
      expect(message).toContain("bash")
      // only the first 8 KB are probed
      const late = yield* run(dir, { path: "late-nul.txt" })
      expect(late.metadata.lines).toBe(1)
    })
  )

  it.effect("shows a directory's entries", () =>
    Effect.gen(function* () {
      const dir = workspace({ "src/b.ts": "", "src/a.ts": "", "src/lib/c.ts": "" })
      const result = yield* run(dir, { path: "src" })
      expect(result.output).toBe("src is a directory; its entries:\nsrc/\n  a.ts\n  b.ts\n  lib/")
      expect(result.metadata).toMatchObject({ path: path.join(dir, "src"), lines: 3, truncated: false })
    })
  )

  it.effect("fails on a missing file with similar names from its directory", () =>
    Effect.gen(function* () {
      const dir = workspace({ "src/main.ts": "", "src/main.test.ts": "", "src/other.ts": "" })
      expect(yield* failure(dir, { path: "src/mian.ts" })).toBe(
        "File not found: src/mian.ts\nDid you mean: src/main.ts?"
      )
      expect(yield* failure(dir, { path: "src/main.js" })).toBe(
        "File not found: src/main.js\nDid you mean: src/main.ts?"
      )
      expect(yield* failure(dir, { path: "src/zzz.md" })).toBe(
        "File not found: src/zzz.md\nUse the list tool to see what src contains."
      )
      expect(yield* failure(dir, { path: "nope/a.ts" })).toBe(
        "File not found: nope/a.ts\nIts directory does not exist either; use the list tool to find the right path."
      )
    })
  )

  it.effect("fails clearly when a part of the path is a file", () =>
    Effect.gen(function* () {
      const dir = workspace({ "a.txt": "x" })
      expect(yield* failure(dir, { path: "a.txt/b" })).toBe("Not a directory: a part of the path a.txt/b is a file")
    })
  )
  it.effect("records what was read: the mtime and size before reading, and the hash of the whole file", () =>
    Effect.gen(function* () {
      const content = `${lines(3000)}\n`
      const dir = workspace({ "big.txt": content, "empty.txt": "" })
      const file = path.join(dir, "big.txt")
      const ctx = testContext(dir)
      yield* read.execute({ path: "big.txt", offset: 10, limit: 5 }, ctx)
      const stat = fs.statSync(file)
      expect(yield* ctx.reads.last(file)).toEqual({
        mtimeMs: stat.mtimeMs,
        size: stat.size,
        hash: hashContent(content)
      })
      yield* read.execute({ path: "empty.txt" }, ctx)
      expect((yield* ctx.reads.last(path.join(dir, "empty.txt")))?.hash).toBe(hashContent(""))
      // a failed read records nothing
      const fresh = testContext(dir)
      yield* Effect.flip(read.execute({ path: "big.txt", offset: 5000 }, fresh))
      expect(yield* fresh.reads.last(file)).toBeUndefined()
    })
  )

  it.effect("reads a file past its first mebibyte (read without the thread pool) the same way as before it", () =>
    Effect.gen(function* () {
      // 100-byte lines: line 10,486 is cut by the mebibyte boundary (and by a 64 KiB chunk's end)
      const line = (i: number) => `${String(i).padStart(8, "0")}:${"z".repeat(90)}`
      const total = Math.ceil((2.5 * BLOCKING_IO_BYTES) / 100)
      const content = `${lines(total, line)}\n`
      const dir = workspace({ "big.txt": content })
      const ctx = testContext(dir)
      const across = Math.floor(BLOCKING_IO_BYTES / 100) + 1
      expect((across - 1) * 100 < BLOCKING_IO_BYTES && across * 100 > BLOCKING_IO_BYTES).toBe(true)
      const result = yield* read.execute({ path: "big.txt", offset: across - 1, limit: 3 }, ctx)
      expect(result.output.split("\n\n")[0]).toBe(
        [across - 1, across, across + 1].map((i) => `${String(i).padStart(6)}\t${line(i)}`).join("\n")
      )
      expect(result.metadata).toMatchObject({ lines: total, truncated: true, from: across - 1, to: across + 1 })
      const last = yield* read.execute({ path: "big.txt", offset: total }, ctx)
      expect(last.output).toBe(`${String(total).padStart(6)}\t${line(total)}`)
      expect((yield* ctx.reads.last(path.join(dir, "big.txt")))?.hash).toBe(hashContent(content))
    })
  )
})
