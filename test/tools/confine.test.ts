/**
 * Confinement without races (issue 12 §4, src/tools/confine.ts): a directory swapped for a symlink
 * to outside the workspace *after* the path was checked and *before* it is opened is refused, not
 * followed — by read, write, edit, list, grep and glob. The swap is made at a chosen point through
 * the test seam (`CONFINE_TEST_HANDSHAKE`, test/support/handshake.ts): deterministic, no timing.
 * Every test also asserts that the swap happened, so it fails where the tools have no such point.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Cause, Effect, Either, Exit, Fiber, Option, Runtime } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import {
  BLOCKING_IO_BYTES,
  openCheckedScoped,
  PathMoved,
  readdirChecked,
  readFdAll,
  readFdAt,
  syncFd,
  writeFdAll
} from "../../src/tools/confine.js"
import { edit } from "../../src/tools/edit.js"
import { FsError } from "../../src/tools/FsError.js"
import { describeFsError } from "../../src/tools/fsErrors.js"
import { glob } from "../../src/tools/glob.js"
import { grep } from "../../src/tools/grep.js"
import { list } from "../../src/tools/list.js"
import { read } from "../../src/tools/read.js"
import type { ToolFailure, ToolOutput } from "../../src/tools/Tools.js"
import { resolveInWorkspace } from "../../src/tools/Workspace.js"
import { write } from "../../src/tools/write.js"
import { makeHandshakes, swapForSymlink } from "../support/handshake.js"
import { type TestToolContext, testContext, workspaceWith } from "../support/toolContext.js"

const onLinux = process.platform === "linux"
const SECRET = "root:x:0:0:the secret outside"

/** A workspace with `sub/` inside, and a directory outside holding a `sub/` of its own with the secret. */
const setup = (files: Record<string, string> = { "sub/notes.txt": "inside\n" }) => {
  const ws = workspaceWith(files, "logbook-confine-ws-")
  const outside = workspaceWith(
    { "sub/notes.txt": `${SECRET}\n`, "sub/passwd": `${SECRET}\n`, "sub/secret-name.txt": SECRET },
    "logbook-confine-out-"
  )
  return { ws, sub: path.join(ws, "sub"), outsideSub: path.join(outside, "sub"), outside }
}

const cleanups: Array<() => void> = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

/**
 * Runs `tool` with the seam on, calling `onCheck` at each handshake; resolves with the tool's result
 * (or its failure) and the paths the handshakes were about to open.
 */
const withSeam = async (
  run: () => Effect.Effect<ToolOutput, ToolFailure>,
  onCheck: (opening: string, n: number) => void
) => {
  const seam = makeHandshakes()
  process.env[Object.keys(seam.env)[0]!] = seam.prefix
  cleanups.push(() => {
    delete process.env[Object.keys(seam.env)[0]!]
  })
  let settled = false
  const result = Effect.runPromise(Effect.either(run())).finally(() => {
    settled = true
  })
  await seam.serve(() => settled, onCheck)
  const outcome = await result
  delete process.env[Object.keys(seam.env)[0]!]
  return { outcome, seen: seam.seen }
}

const failureOf = (outcome: Either.Either<ToolOutput, ToolFailure>): string => {
  if (Either.isRight(outcome)) throw new Error(`expected a failure, got: ${outcome.right.output}`)
  return outcome.left.message
}

describe.skipIf(!onLinux)("confinement without races", () => {
  it("the primitive: a path checked inside, then swapped for a symlink outside, is refused on the descriptor", async () => {
    const { ws, sub, outsideSub } = setup()
    const checked = await Effect.runPromise(resolveInWorkspace(ws, "sub/notes.txt"))
    expect(checked.inside).toBe(true)
    swapForSymlink(sub, outsideSub)
    // an open by name would now read the secret; the checked open refuses
    expect(fs.readFileSync(checked.real, "utf8")).toContain(SECRET)
    const opened = await Effect.runPromise(Effect.either(Effect.scoped(openCheckedScoped(checked.real))))
    expect(Either.isLeft(opened) && opened.left instanceof PathMoved).toBe(true)
    const listed = await Effect.runPromise(Effect.either(readdirChecked(sub)))
    expect(Either.isLeft(listed) && listed.left instanceof PathMoved).toBe(true)
  })

  it("read: a parent swapped between the check and the open is refused with the outside sentence", async () => {
    const { ws, sub, outsideSub } = setup()
    const context = testContext(ws)
    const { outcome, seen } = await withSeam(
      () => read.execute({ path: "sub/notes.txt" }, context),
      (opening, n) => {
        if (n === 1) swapForSymlink(sub, outsideSub)
        expect(opening).toBe(path.join(ws, "sub", "notes.txt"))
      }
    )
    expect(seen).toHaveLength(1)
    const message = failureOf(outcome)
    expect(message).toBe(
      `sub/notes.txt is outside the workspace ${ws} (it leads to ${path.join(outsideSub, "notes.txt")}). ` +
        "Tools may only touch files inside the workspace (access outside it needs the external_directory permission, " +
        "which this call was not granted); use a path inside it."
    )
    expect(message).not.toContain(SECRET)
  })

  it("read: a directory swapped before it is listed is not followed", async () => {
    const { ws, sub, outsideSub } = setup()
    const { outcome, seen } = await withSeam(
      () => read.execute({ path: "sub" }, testContext(ws)),
      (_opening, n) => {
        if (n === 1) swapForSymlink(sub, outsideSub)
      }
    )
    expect(seen.length).toBeGreaterThanOrEqual(1)
    const message = failureOf(outcome)
    expect(message).toContain("is outside the workspace")
    expect(message).not.toContain("secret-name")
  })

  it("write: a new file's directory swapped before the write lands nothing outside", async () => {
    const { ws, sub, outsideSub } = setup({ "sub/keep.txt": "keep\n" })
    // swapped at the first open (the look at what is there) …
    const early = await withSeam(
      () => write.execute({ path: "sub/new.txt", content: "planted" }, testContext(ws)),
      (_opening, n) => {
        if (n === 1) swapForSymlink(sub, outsideSub)
      }
    )
    expect(early.seen.length).toBeGreaterThanOrEqual(2)
    expect(failureOf(early.outcome)).toContain("sub/new.txt is outside the workspace")
    expect(fs.existsSync(path.join(outsideSub, "new.txt"))).toBe(false)
  })

  it("write: the directory swapped right before the temporary file and the rename: nothing is written", async () => {
    const { ws, sub, outsideSub } = setup({ "sub/keep.txt": "keep\n" })
    // the last handshake is writeFileAtomic's opening of the directory
    const dirOpens: Array<number> = []
    const probe = await withSeam(
      () => write.execute({ path: "sub/probe.txt", content: "x" }, testContext(ws)),
      (opening, n) => {
        if (opening === sub) dirOpens.push(n)
      }
    )
    expect(Either.isRight(probe.outcome)).toBe(true)
    const last = probe.seen.length
    expect(dirOpens.at(-1)).toBe(last)
    const { outcome, seen } = await withSeam(
      () => write.execute({ path: "sub/new.txt", content: "planted" }, testContext(ws)),
      (_opening, n) => {
        if (n === last) swapForSymlink(sub, outsideSub)
      }
    )
    expect(seen).toHaveLength(last)
    expect(failureOf(outcome)).toMatch(
      /^Cannot write sub\/new\.txt: its directory changed while it was being written .*nothing was written/
    )
    expect(fs.readdirSync(outsideSub).sort()).toEqual(["notes.txt", "passwd", "secret-name.txt"])
  })

  it("write: missing parent directories are not created through a swapped directory", async () => {
    const { ws, sub, outsideSub } = setup({ "sub/keep.txt": "keep\n" })
    const { outcome, seen } = await withSeam(
      () => write.execute({ path: "sub/a/b/new.txt", content: "planted" }, testContext(ws)),
      (_opening, n) => {
        if (n === 1) swapForSymlink(sub, outsideSub)
      }
    )
    expect(seen.length).toBeGreaterThanOrEqual(2)
    expect(failureOf(outcome)).toContain("is outside the workspace")
    expect(fs.existsSync(path.join(outsideSub, "a"))).toBe(false)
  })

  const readFirst = async (ws: string): Promise<TestToolContext> => {
    const context = testContext(ws)
    await Effect.runPromise(read.execute({ path: "sub/notes.txt" }, context))
    return context
  }

  it("edit: swapped before the file is read: refused with the outside sentence", async () => {
    const { ws, sub, outsideSub } = setup()
    // the file outside has the same content: only the check can tell them apart
    fs.writeFileSync(path.join(outsideSub, "notes.txt"), "inside\n")
    const context = await readFirst(ws)
    const { outcome, seen } = await withSeam(
      () => edit.execute({ path: "sub/notes.txt", oldString: "inside", newString: "edited" }, context),
      (_opening, n) => {
        if (n === 1) swapForSymlink(sub, outsideSub)
      }
    )
    expect(seen.length).toBeGreaterThanOrEqual(1)
    expect(failureOf(outcome)).toContain("sub/notes.txt is outside the workspace")
    expect(fs.readFileSync(path.join(outsideSub, "notes.txt"), "utf8")).toBe("inside\n")
  })

  it("edit: swapped between the read and the rename: nothing is written outside", async () => {
    const { ws, sub, outsideSub } = setup()
    fs.writeFileSync(path.join(outsideSub, "notes.txt"), "inside\n")
    const context = await readFirst(ws)
    const { outcome, seen } = await withSeam(
      () => edit.execute({ path: "sub/notes.txt", oldString: "inside", newString: "edited" }, context),
      (opening, n) => {
        // the second handshake is the directory writeFileAtomic writes in
        if (n === 2) {
          expect(opening).toBe(sub)
          swapForSymlink(sub, outsideSub)
        }
      }
    )
    expect(seen).toHaveLength(2)
    expect(failureOf(outcome)).toContain("its directory changed while it was being written")
    expect(fs.readFileSync(path.join(outsideSub, "notes.txt"), "utf8")).toBe("inside\n")
    expect(fs.readdirSync(outsideSub).sort()).toEqual(["notes.txt", "passwd", "secret-name.txt"])
    // and the file inside is unchanged too
    expect(fs.readFileSync(path.join(`${sub}.orig`, "notes.txt"), "utf8")).toBe("inside\n")
  })

  it("list: a subdirectory swapped while the tree is read is marked, not followed", async () => {
    const { ws, sub, outsideSub } = setup()
    const { outcome, seen } = await withSeam(
      () => list.execute({ path: ".", depth: 2 }, testContext(ws)),
      (opening) => {
        if (opening === sub) swapForSymlink(sub, outsideSub)
      }
    )
    expect(seen).toContain(sub)
    if (Either.isLeft(outcome)) throw outcome.left
    expect(outcome.right.output).toContain(`sub/ (changed while listed: it led to ${outsideSub}; not followed)`)
    expect(outcome.right.output).not.toContain("secret-name")
  })

  it("grep: a directory swapped after the walk: the file it now leads to is not searched", async () => {
    const { ws, sub, outsideSub } = setup({ "sub/passwd": "nothing to see\n" })
    const { outcome, seen } = await withSeam(
      () => grep.execute({ pattern: "secret|nothing", path: "." }, testContext(ws)),
      (opening) => {
        if (opening === path.join(sub, "passwd")) swapForSymlink(sub, outsideSub)
      }
    )
    expect(seen).toContain(path.join(sub, "passwd"))
    if (Either.isLeft(outcome)) throw outcome.left
    expect(outcome.right.output).not.toContain(SECRET)
    expect(outcome.right.output).toMatch(/^No matches/)
  })

  it("glob: a directory swapped before it is walked: names from outside are not listed", async () => {
    const { ws, sub, outsideSub } = setup()
    const { outcome, seen } = await withSeam(
      () => glob.execute({ pattern: "**/*" }, testContext(ws)),
      (opening) => {
        if (opening === sub) swapForSymlink(sub, outsideSub)
      }
    )
    expect(seen).toContain(sub)
    if (Either.isLeft(outcome)) throw outcome.left
    expect(outcome.right.output).not.toContain("secret-name")
  })
})

describe("the errors of checked opens are typed", () => {
  it("a missing file is an FsError with its errno code, a swapped path a PathMoved, never a bare Node error", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "logbook-fserror-"))
    const missing = await Effect.runPromise(Effect.either(Effect.scoped(openCheckedScoped(path.join(dir, "nope.txt")))))
    expect(Either.isLeft(missing)).toBe(true)
    const error = Either.getLeft(missing).pipe(Option.getOrThrow)
    expect(error).toBeInstanceOf(FsError)
    expect(error).toMatchObject({ _tag: "FsError", code: "ENOENT" })
    // the sentence the model reads is the same as from the Node error itself
    expect(describeFsError(error, "nope.txt")).toBe("File not found: nope.txt")
    const listed = await Effect.runPromise(Effect.either(readdirChecked(dir)))
    expect(Either.isRight(listed)).toBe(true)
    fs.writeFileSync(path.join(dir, "file"), "x")
    const readFile = await Effect.runPromise(Effect.either(readdirChecked(path.join(dir, "file"))))
    expect(Either.getLeft(readFile).pipe(Option.getOrThrow)).toMatchObject({ _tag: "FsError", code: "ENOTDIR" })
  })
})

/**
 * Runs `effect` synchronously: `sync` when it completed without waiting, else the fiber it left
 * waiting (an asynchronous call), to be awaited before the descriptor is closed.
 */
const runBlocking = <A, E>(
  effect: Effect.Effect<A, E>
): { readonly sync: A } | { readonly waiting: Fiber.RuntimeFiber<A, E> } => {
  const exit = Effect.runSyncExit(effect)
  if (Exit.isSuccess(exit)) return { sync: exit.value }
  const error = Cause.squash(exit.cause)
  if (Runtime.isAsyncFiberException(error)) return { waiting: error.fiber as Fiber.RuntimeFiber<A, E> }
  throw error
}

describe("reading a checked descriptor", () => {
  it("reads the first mebibyte with blocking calls and the rest through the thread pool", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "logbook-readfd-"))
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }))
    const file = path.join(dir, "big.bin")
    const content = Buffer.alloc(BLOCKING_IO_BYTES + 4096, 0)
    for (let i = 0; i < content.length; i++) content[i] = i % 251
    fs.writeFileSync(file, content)
    const fd = await Effect.runPromise(Effect.scoped(openCheckedScoped(file)))
    // the scope closed the descriptor
    expect(() => fs.fstatSync(fd)).toThrow()
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const open = yield* openCheckedScoped(file)
          const head = Buffer.alloc(8192)
          // below the mark: no thread-pool round trip, so it completes synchronously
          expect(runBlocking(readFdAt(open, head, BLOCKING_IO_BYTES - 4096))).toEqual({ sync: 8192 })
          expect(head.equals(content.subarray(BLOCKING_IO_BYTES - 4096, BLOCKING_IO_BYTES + 4096))).toBe(true)
          // from the mark on: asynchronous
          const tail = Buffer.alloc(8192)
          const read = runBlocking(readFdAt(open, tail, BLOCKING_IO_BYTES))
          if (!("waiting" in read)) throw new Error("a read past the mark completed synchronously")
          expect(yield* Fiber.join(read.waiting)).toBe(4096)
          expect(tail.subarray(0, 4096).equals(content.subarray(BLOCKING_IO_BYTES))).toBe(true)
          expect(yield* readFdAt(open, tail, content.length)).toBe(0)
        })
      )
    )
  })

  it("reads all of a descriptor, or up to a limit however large the file has grown", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "logbook-readall-"))
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }))
    const file = path.join(dir, "grown.bin")
    const content = Buffer.alloc(BLOCKING_IO_BYTES + 70_000)
    for (let i = 0; i < content.length; i++) content[i] = i % 253
    fs.writeFileSync(file, content)
    const read = (size: number, limit?: number) =>
      Effect.runPromise(Effect.scoped(Effect.flatMap(openCheckedScoped(file), (fd) => readFdAll(fd, size, limit))))
    // the size its fstat gave is only where to start: a file that grew is read to its end
    expect((await read(10)).equals(content)).toBe(true)
    expect((await read(content.length)).equals(content)).toBe(true)
    // a limit stops it, within the first buffer and past the blocking mark
    expect((await read(10, 5000)).equals(content.subarray(0, 5000))).toBe(true)
    expect((await read(0, BLOCKING_IO_BYTES + 1)).equals(content.subarray(0, BLOCKING_IO_BYTES + 1))).toBe(true)
    expect((await read(content.length, content.length + 1)).equals(content)).toBe(true)
    expect((await read(100, 0)).length).toBe(0)
  })

  it("writes up to a mebibyte with blocking calls and more through the thread pool", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "logbook-writefd-"))
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }))
    const small = "x".repeat(BLOCKING_IO_BYTES)
    const large = Buffer.alloc(BLOCKING_IO_BYTES + 1, 7)
    const write = async (name: string, content: string | Buffer) => {
      const file = path.join(dir, name)
      const fd = fs.openSync(file, "wx")
      try {
        const written = runBlocking(writeFdAll(fd, content))
        if ("waiting" in written) await Effect.runPromise(Fiber.join(written.waiting))
        await Effect.runPromise(syncFd(fd))
        return { file, sync: "sync" in written }
      } finally {
        fs.closeSync(fd)
      }
    }
    const one = await write("small", small)
    expect(one.sync).toBe(true)
    expect(fs.readFileSync(one.file, "utf8") === small).toBe(true)
    const two = await write("large", large)
    expect(two.sync).toBe(false)
    expect(fs.readFileSync(two.file).equals(large)).toBe(true)
  })

  it("reads a directory's entries without a thread-pool round trip (the walks of list, glob and grep)", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "logbook-readdir-"))
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }))
    fs.writeFileSync(path.join(dir, "a.txt"), "a")
    fs.mkdirSync(path.join(dir, "sub"))
    const read = runBlocking(readdirChecked(dir))
    if (!("sync" in read)) throw new Error("readdirChecked waited for the thread pool")
    expect(read.sync.map((d) => d.name).sort()).toEqual(["a.txt", "sub"])
  })
})
