/**
 * The name of a blob: the SHA-256 of its bytes (a string's are its UTF-8), in lowercase hex. The
 * store names blobs and snapshots by it, and the tools stamp what they read with it, so that a
 * stamp and a blob of the same content have the same hash.
 */
import { createHash } from "node:crypto"

export const hashContent = (content: Uint8Array | string): string => createHash("sha256").update(content).digest("hex")
