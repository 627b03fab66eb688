/**
 * The workspace snapshot (docs/workspace.md): scanning with a stat cache, the difference of two
 * manifests, the bounds, and restoring a manifest into a directory. Real files in temp dirs; the
 * blobs in the memory event store. `it.live`: the racy-file rule compares modification times with
 * the clock, which must be the real one.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { EventStore } from "../../src/store/EventStore.js"
import {
  defaultSnapshotLimits,
  diffManifests,
  type Manifest,
  manifestDocument,
  restoreManifest,
  type ScanResult,
  type SnapshotLimits,
  scanWorkspace
} from "../../src/tools/WorkspaceSnapshot.js"
import { tempDir } from "../support/tmp.js"

const workspace = (files: Record<string, string | Buffer>): string => {
  const dir = fs.realpathSync(tempDir("logbook-snapshot-"))
  for (const [name, content] of Object.entries(files)) put(dir, name, content)
  return dir
}
const put = (dir: string, name: string, content: string | Buffer) => {
  fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true })
  fs.writeFileSync(path.join(dir, name), content)
}
/**
 * Sets the modification time of `name` a minute ahead: "racy" at the next scan however long the
 * machine takes to get there (written just now, the file is racy only when the scan starts within
 * `RACY_MS`, which a loaded machine does not promise).
 */
const heat = (dir: string, name: string) => {
  const when = new Date(Date.now() + 60_000)
  fs.utimesSync(path.join(dir, name), when, when)
}
/** Sets the modification time of `name` well in the past, so it is not "racy". */
const settle = (dir: string, ...names: ReadonlyArray<string>) => {
  const when = new Date(Date.now() - 60_000)
  for (const name of names) fs.utimesSync(path.join(dir, name), when, when)
}

const scan = (root: string, previous?: Manifest, limits: Partial<SnapshotLimits> = {}, exclude?: ReadonlySet<string>) =>
  Effect.flatMap(EventStore, (store) =>
    scanWorkspace({
      root,
      previous,
      limits: { ...defaultSnapshotLimits, ...limits },
      exclude,
      store: (content) => Effect.orDie(store.putBlob(content))
    })
  )

const blobText = (hash: string | undefined) =>
  Effect.flatMap(EventStore, (store) => store.getBlob(hash ?? "none")).pipe(
    Effect.map((blob) => (Option.isSome(blob) ? new TextDecoder().decode(blob.value) : undefined))
  )

const paths = (result: ScanResult) => Array.from(result.manifest.keys()).sort()

describe("scanWorkspace", () => {
  it.live("tracks the files glob sees: .gitignore rules, .git and node_modules left out, excluded paths", () =>
    Effect.gen(function* () {
      const dir = workspace({
        ".gitignore": "dist/\n*.log\n",
        "a.ts": "a",
        "src/b.ts": "b",
        "dist/out.js": "x",
        "debug.log": "x",
        ".git/HEAD": "ref",
        "node_modules/m/index.js": "m",
        "log.db": "db",
        // a write's temporary file, caught before its rename (a parallel write): logbook's own
        "src/.c.ts.k3j9x.logbook-tmp": "half"
      })
      const result = yield* scan(dir, undefined, {}, new Set([path.join(dir, "log.db")]))
      expect(paths(result)).toEqual([".gitignore", "a.ts", "src/b.ts"])
      expect(yield* blobText(result.manifest.get("src/b.ts")!.hash)).toBe("b")
      expect(result.limits).toEqual([])
    }).pipe(Effect.provide(EventStore.layerMemory))
  )

  it.live("reads nothing again when nothing changed, and only what changed otherwise", () =>
    Effect.gen(function* () {
      const dir = workspace({ "a.txt": "a", "b.txt": "b", "c.txt": "c" })
      settle(dir, "a.txt", "b.txt", "c.txt")
      const first = yield* scan(dir)
      expect(first.filesRead).toBe(3)
      const again = yield* scan(dir, first.manifest)
      expect(again.filesRead).toBe(0)
      expect(again.bytesRead).toBe(0)
      expect(diffManifests(first.manifest, again.manifest)).toEqual([])

      put(dir, "b.txt", "B!")
      put(dir, "d.txt", "d")
      fs.rmSync(path.join(dir, "c.txt"))
      const changed = yield* scan(dir, again.manifest)
      expect(changed.filesRead).toBe(2)
      const diff = diffManifests(again.manifest, changed.manifest)
      expect(diff.map((c) => [c.path, c.op])).toEqual([
        ["b.txt", "update"],
        ["c.txt", "delete"],
        ["d.txt", "create"]
      ])
      expect(yield* blobText(diff[0]!.before!.hash)).toBe("b")
      expect(yield* blobText(diff[0]!.after!.hash)).toBe("B!")
      expect(yield* blobText(diff[1]!.before!.hash)).toBe("c")
    }).pipe(Effect.provide(EventStore.layerMemory))
  )

  it.live("a touch or a chmod is no content change; a file turned into a link is", () =>
    Effect.gen(function* () {
      const dir = workspace({ "a.txt": "a", "b.txt": "b" })
      settle(dir, "a.txt", "b.txt")
      const first = yield* scan(dir)
      fs.utimesSync(path.join(dir, "a.txt"), new Date(), new Date())
      fs.chmodSync(path.join(dir, "a.txt"), 0o755)
      fs.rmSync(path.join(dir, "b.txt"))
      fs.symlinkSync("a.txt", path.join(dir, "b.txt"))
      const second = yield* scan(dir, first.manifest)
      expect(second.filesRead).toBe(2) // a.txt re-read (its stat changed), b.txt is new as a link
      expect(second.manifest.get("a.txt")!.mode).toBe(0o755)
      const diff = diffManifests(first.manifest, second.manifest)
      expect(diff.map((c) => [c.path, c.op, c.after?.kind])).toEqual([["b.txt", "update", "symlink"]])
      expect(yield* blobText(diff[0]!.after!.hash)).toBe("a.txt")
    }).pipe(Effect.provide(EventStore.layerMemory))
  )

  it.live("a file modified just before a scan is read again by the next one, whatever its stat says", () =>
    Effect.gen(function* () {
      const dir = workspace({ "hot.txt": "one" })
      heat(dir, "hot.txt")
      const first = yield* scan(dir)
      expect(first.manifest.get("hot.txt")!.racy).toBe(true)
      // same size and, on a coarse clock, the same mtime: only reading tells
      put(dir, "hot.txt", "two")
      const when = new Date(first.manifest.get("hot.txt")!.mtimeMs)
      fs.utimesSync(path.join(dir, "hot.txt"), when, when)
      const second = yield* scan(dir, first.manifest)
      expect(second.filesRead).toBe(1)
      expect(diffManifests(first.manifest, second.manifest).map((c) => c.path)).toEqual(["hot.txt"])
    }).pipe(Effect.provide(EventStore.layerMemory))
  )

  it.live("bounds: a large file is hashed, not stored; past the byte budget and the file count it says so", () =>
    Effect.gen(function* () {
      const dir = workspace({ "big.bin": Buffer.alloc(2000, 1), "a.txt": "aaaa", "b.txt": "bbbb", "c.txt": "cccc" })
      settle(dir, "big.bin", "a.txt", "b.txt", "c.txt")
      const large = yield* scan(dir, undefined, { maxFileBytes: 1000 })
      const big = large.manifest.get("big.bin")!
      expect(big).toMatchObject({ stored: false, omitted: "too-large", size: 2000 })
      expect(big.hash).toMatch(/^[0-9a-f]{64}$/)
      expect(yield* blobText(big.hash)).toBeUndefined()
      expect(large.limits).toEqual([{ limit: "fileBytes", files: 1 }])

      // files in name order: a.txt fits in 6 bytes, the rest do not and are tracked by their stat only
      const budget = yield* scan(dir, undefined, { maxFileBytes: 1000, maxTotalBytes: 6 })
      expect(budget.limits).toEqual([{ limit: "totalBytes", files: 3 }])
      expect(budget.manifest.get("b.txt")).toMatchObject({ stored: false, omitted: "budget" })
      expect(budget.manifest.get("b.txt")!.hash).toBeUndefined()
      // a file without content is read on the next scan that has the budget, and is a change only if its stat changed
      const full = yield* scan(dir, budget.manifest)
      expect(full.manifest.get("b.txt")).toMatchObject({ stored: true })
      expect(diffManifests(budget.manifest, full.manifest)).toEqual([])

      // past the file count the walk stops; files it did not reach are kept as they were, not deleted
      const few = yield* scan(dir, full.manifest, { maxFiles: 2 })
      expect(few.limits).toEqual([{ limit: "files", files: 2 }])
      expect(paths(few)).toEqual(paths(full))
      expect(diffManifests(full.manifest, few.manifest)).toEqual([])
    }).pipe(Effect.provide(EventStore.layerMemory))
  )

  it.live("fails with a sentence when the workspace cannot be read", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(scan(path.join(tempDir(), "missing")))
      expect(error._tag).toBe("SnapshotError")
      expect(error.message).toMatch(/cannot read the workspace/)
    }).pipe(Effect.provide(EventStore.layerMemory))
  )
})

describe("restoreManifest", () => {
  it.live("puts the files of a manifest back into a directory, with their modes and links", () =>
    Effect.gen(function* () {
      const dir = workspace({ "a.txt": "a\n", "bin/run.sh": "#!/bin/sh\necho hi\n", "big.bin": Buffer.alloc(3000, 7) })
      fs.chmodSync(path.join(dir, "bin/run.sh"), 0o755)
      fs.symlinkSync("a.txt", path.join(dir, "link"))
      const result = yield* scan(dir, undefined, { maxFileBytes: 1000 })
      const store = yield* EventStore
      const manifest = yield* store.putBlob(JSON.stringify(manifestDocument(result.manifest)))
      const target = path.join(tempDir(), "restored")
      const restored = yield* restoreManifest(store, manifest, target)
      expect(restored.restored).toBe(3)
      expect(restored.missing).toEqual([{ path: "big.bin", reason: "its content was not stored (too-large)" }])
      expect(fs.readFileSync(path.join(target, "a.txt"), "utf8")).toBe("a\n")
      expect(fs.readFileSync(path.join(target, "bin/run.sh"), "utf8")).toBe("#!/bin/sh\necho hi\n")
      expect(fs.statSync(path.join(target, "bin/run.sh")).mode & 0o777).toBe(0o755)
      expect(fs.readlinkSync(path.join(target, "link"))).toBe("a.txt")
      // and what is restored scans to the same contents
      const again = yield* scan(target, undefined, { maxFileBytes: 1000 })
      expect(diffManifests(result.manifest, again.manifest).map((c) => c.path)).toEqual(["big.bin"])
    }).pipe(Effect.provide(EventStore.layerMemory))
  )

  it.live("never writes outside the directory; a missing blob or a bad manifest is named", () =>
    Effect.gen(function* () {
      const store = yield* EventStore
      const content = yield* store.putBlob("evil")
      const outside = tempDir()
      const manifest = yield* store.putBlob(
        JSON.stringify({
          version: 1,
          files: [
            { path: "../escape.txt", mode: 0o644, size: 4, blob: content },
            { path: "/etc/x", mode: 0o644, size: 4, blob: content },
            { path: "out", kind: "symlink", mode: 0o777, size: outside.length, blob: yield* store.putBlob(outside) },
            { path: "out/through-link.txt", mode: 0o644, size: 4, blob: content },
            { path: "gone.txt", mode: 0o644, size: 4, blob: "0".repeat(64) }
          ]
        })
      )
      const target = path.join(tempDir(), "r")
      const result = yield* restoreManifest(store, manifest, target).pipe(Effect.either)
      expect(result._tag).toBe("Right")
      if (result._tag !== "Right") return
      // the file below the link is written first, into a directory: the link then finds it in the way
      expect(result.right.missing.map((m) => m.path)).toEqual(["../escape.txt", "/etc/x", "gone.txt", "out"])
      expect(fs.readFileSync(path.join(target, "out/through-link.txt"), "utf8")).toBe("evil")
      expect(fs.readdirSync(outside)).toEqual([])
      expect(fs.existsSync(path.join(path.dirname(target), "escape.txt"))).toBe(false)

      const bad = yield* store.putBlob("not json")
      const error = yield* Effect.flip(restoreManifest(store, bad, target))
      expect(error.message).toMatch(/not JSON/)
      const missing = yield* Effect.flip(restoreManifest(store, "f".repeat(64), target))
      expect(missing.message).toMatch(/not in the log/)
    }).pipe(Effect.provide(EventStore.layerMemory))
  )
})
