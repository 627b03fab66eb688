/**
 * The prompt version of a model request (docs/prompt.md): what the model was told before the
 * conversation — the system prompt and the tool schemas — as one short hash, so steps can be
 * grouped and compared by the prompt they were sent with.
 *
 * The prompt document is `{"system": <the system prompt, or null>, "tools": [{"name", "description",
 * "inputSchema"}, …]}` (tools in the order they were sent) written as canonical JSON: object keys
 * sorted by UTF-16 code units (as RFC 8785 does), no whitespace, members whose value is undefined
 * left out (as `JSON.stringify` does). Key order therefore cannot change the hash; anything else
 * does. The version is the first `PROMPT_VERSION_LENGTH` (16) hex digits of the SHA-256 of that
 * text (UTF-8); the whole text is kept as a blob of the log, whose hash is the full SHA-256, so the
 * version is a prefix of its blob's hash.
 */
import { createHash, type Hash } from "node:crypto"
import type { ModelMessage, ModelRequest } from "../model/Model.js"

/** Hex digits of the SHA-256 a prompt version keeps (64 bits). */
export const PROMPT_VERSION_LENGTH = 16

/**
 * `value` as canonical JSON: object keys sorted, no whitespace. `undefined` (and functions) are left
 * out of objects and written as `null` in arrays, as `JSON.stringify` does; `toJSON` is honoured.
 */
export const canonicalJson = (value: unknown): string => {
  const write = (v: unknown): string | undefined => {
    if (v !== null && typeof v === "object" && typeof (v as { toJSON?: unknown }).toJSON === "function") {
      return write((v as { toJSON: () => unknown }).toJSON())
    }
    if (v === undefined || typeof v === "function" || typeof v === "symbol") return undefined
    if (v === null || typeof v !== "object") return JSON.stringify(v)
    if (Array.isArray(v)) return `[${v.map((item) => write(item) ?? "null").join(",")}]`
    const members: Array<string> = []
    for (const key of Object.keys(v).sort()) {
      const text = write((v as Record<string, unknown>)[key])
      if (text !== undefined) members.push(`${JSON.stringify(key)}:${text}`)
    }
    return `{${members.join(",")}}`
  }
  return write(value) ?? "null"
}

/** The part of a request a prompt version covers. */
export type PromptRequest = Pick<ModelRequest, "system" | "tools">

/** The prompt document of a request (see the module doc): a plain JSON value. */
export const promptDocument = (request: PromptRequest) => ({
  system: request.system ?? null,
  tools: request.tools.map((tool) => ({
    name: tool.name,
    description: tool.description,
    inputSchema: tool.inputSchema
  }))
})

export interface PromptVersion {
  /** the first `PROMPT_VERSION_LENGTH` hex digits of `hash` */
  readonly version: string
  /** the SHA-256 (hex) of `json`: the hash of its blob */
  readonly hash: string
  /** the prompt document as canonical JSON */
  readonly json: string
}

/** The prompt version of a request, with the text it is the hash of. */
export const promptVersionOf = (request: PromptRequest): PromptVersion => {
  const json = canonicalJson(promptDocument(request))
  const hash = createHash("sha256").update(json, "utf8").digest("hex")
  return { version: hash.slice(0, PROMPT_VERSION_LENGTH), hash, json }
}

/**
 * The digest of a request's content (docs/prompt.md, "Request digests"): the SHA-256 (hex) of its
 * prompt document's hash, a newline, and its messages as JSON (`JSON.stringify`, in the order
 * they were built). Recorded on each step (`step.finished` `requestDigest`), so `logbook replay`
 * can prove it rebuilt the messages the model got, byte for byte.
 *
 * The bytes are hashed as they go: `[`, each message's JSON with `,` between them, `]` — the bytes
 * of `JSON.stringify(messages)`. A session's next request repeats the messages of the one before
 * (the same objects: `toModelMessages` remembers them) and adds some, so the hash of the messages
 * seen so far is kept (by the first message, weakly) and only the new ones are hashed: a step
 * costs what it adds, not the session's length. Any other list is hashed from the start.
 */
export const requestDigestOf = (promptHash: string, messages: ReadonlyArray<ModelMessage>): string => {
  const first = messages[0]
  if (first === undefined) return createHash("sha256").update(`${promptHash}\n[]`, "utf8").digest("hex")
  let running = runningDigests.get(first)
  if (running === undefined || running.promptHash !== promptHash || !continues(running.hashed, messages)) {
    running = { promptHash, hashed: [], hash: createHash("sha256").update(`${promptHash}\n[`, "utf8") }
    runningDigests.set(first, running)
  }
  const { hashed, hash } = running
  for (let i = hashed.length; i < messages.length; i++) {
    const message = messages[i]!
    hash.update(i === 0 ? JSON.stringify(message) : `,${JSON.stringify(message)}`, "utf8")
    hashed.push(message)
  }
  return hash.copy().update("]", "utf8").digest("hex")
}

interface RunningDigest {
  readonly promptHash: string
  /** the messages hashed so far, in order */
  readonly hashed: Array<ModelMessage>
  /** SHA-256 of the prompt hash, `\n[` and the JSON of `hashed` with `,` between them */
  readonly hash: Hash
}

const runningDigests = new WeakMap<ModelMessage, RunningDigest>()

/** Whether `messages` starts with exactly the objects of `hashed`. */
const continues = (hashed: ReadonlyArray<ModelMessage>, messages: ReadonlyArray<ModelMessage>): boolean => {
  if (hashed.length > messages.length) return false
  for (let i = hashed.length - 1; i >= 0; i--) if (hashed[i] !== messages[i]) return false
  return true
}
