/**
 * One content hash: what the store names a blob by is what the file tools stamp a read with, so a
 * stamp and the blob of the same content match.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { hashContent } from "../../src/store/blobHash.js"
import { fileStamp } from "../../src/tools/fileChanges.js"
import { tempDir } from "../support/tmp.js"

describe("hashContent", () => {
  it("is the SHA-256 of the bytes in hex, a string's being its UTF-8, and a file stamp's hash", () => {
    expect(hashContent("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    expect(hashContent("ünï")).toBe(hashContent(new TextEncoder().encode("ünï")))
    const file = path.join(tempDir(), "f.txt")
    fs.writeFileSync(file, "content\n")
    expect(fileStamp(fs.statSync(file), fs.readFileSync(file)).hash).toBe(hashContent("content\n"))
  })
})
