/**
 * The prompt version: a hash of the system prompt and the tool schemas, stable for the same
 * prompt, changed by any change to either, blind to key order.
 */
import { createHash } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import type { ModelMessage, ModelTool } from "../../src/model/Model.js"
import {
  canonicalJson,
  PROMPT_VERSION_LENGTH,
  promptVersionOf,
  requestDigestOf
} from "../../src/session/PromptVersion.js"

const read: ModelTool = {
  name: "read",
  description: "Reads a file.",
  inputSchema: {
    type: "object",
    properties: { path: { type: "string", description: "the file" }, offset: { type: "integer", minimum: 1 } },
    required: ["path"],
    additionalProperties: false
  }
}
const bash: ModelTool = {
  name: "bash",
  description: "Runs a command.",
  inputSchema: { type: "object", properties: { command: { type: "string" } }, required: ["command"] }
}
const request = { system: "You are logbook.", tools: [read, bash] }

describe("canonicalJson", () => {
  it("sorts object keys at every depth, keeps array order, writes no whitespace", () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: true, y: null }], c: "x" } })).toBe(
      '{"a":{"c":"x","d":[3,{"y":null,"z":true}]},"b":1}'
    )
  })

  it("leaves undefined members out, as JSON.stringify does; strings are escaped as JSON", () => {
    expect(canonicalJson({ a: undefined, b: [undefined], c: 'q"\n' })).toBe('{"b":[null],"c":"q\\"\\n"}')
    const value = { list: [1, "two", { three: 3 }], text: "ünïcödé 🙂" }
    expect(JSON.parse(canonicalJson(value))).toEqual(value)
  })
})

describe("promptVersionOf", () => {
  it("is the first 16 hex digits of the SHA-256 of the canonical prompt document", () => {
    const version = promptVersionOf(request)
    expect(version.version).toMatch(/^[0-9a-f]{16}$/)
    expect(PROMPT_VERSION_LENGTH).toBe(16)
    expect(version.hash).toBe(createHash("sha256").update(version.json).digest("hex"))
    expect(version.hash.startsWith(version.version)).toBe(true)
    expect(JSON.parse(version.json)).toEqual({
      system: "You are logbook.",
      tools: [
        { name: "read", description: "Reads a file.", inputSchema: read.inputSchema },
        { name: "bash", description: "Runs a command.", inputSchema: bash.inputSchema }
      ]
    })
  })

  it("is the same for the same prompt and tools (new objects, extra request fields ignored)", () => {
    const again = structuredClone(request)
    expect(promptVersionOf(again).version).toBe(promptVersionOf(request).version)
    const withMessages = { ...request, messages: [{ role: "user", content: "hi" }], maxOutputTokens: 100 }
    expect(promptVersionOf(withMessages).version).toBe(promptVersionOf(request).version)
  })

  it("does not depend on the order of keys, in the tools or in their schemas", () => {
    const reordered = {
      tools: [
        {
          inputSchema: {
            additionalProperties: false,
            required: ["path"],
            properties: { offset: { minimum: 1, type: "integer" }, path: { description: "the file", type: "string" } },
            type: "object"
          },
          description: "Reads a file.",
          name: "read"
        },
        {
          inputSchema: { required: ["command"], properties: { command: { type: "string" } }, type: "object" },
          description: "Runs a command.",
          name: "bash"
        }
      ],
      system: "You are logbook."
    }
    expect(promptVersionOf(reordered).version).toBe(promptVersionOf(request).version)
  })

  it("changes when the system prompt changes", () => {
    const base = promptVersionOf(request).version
    expect(promptVersionOf({ ...request, system: "You are logbook. " }).version).not.toBe(base)
    expect(promptVersionOf({ ...request, system: undefined }).version).not.toBe(base)
    // no system prompt and an empty one are different requests
    expect(promptVersionOf({ ...request, system: undefined }).version).not.toBe(
      promptVersionOf({ ...request, system: "" }).version
    )
  })

  it("changes when a tool changes: its schema, its description, its name, the set or the order of tools", () => {
    const base = promptVersionOf(request).version
    const variants = [
      [{ ...read, inputSchema: { ...read.inputSchema, required: ["path", "offset"] } }, bash],
      [{ ...read, description: "Reads a file!" }, bash],
      [{ ...read, name: "view" }, bash],
      [read],
      [bash, read],
      []
    ]
    const versions = variants.map((tools) => promptVersionOf({ ...request, tools }).version)
    for (const version of versions) expect(version).not.toBe(base)
    expect(new Set(versions).size).toBe(variants.length)
  })
})

/** The digest as docs/prompt.md defines it, computed in one go. */
const digestOf = (promptHash: string, messages: ReadonlyArray<ModelMessage>) =>
  createHash("sha256")
    .update(`${promptHash}\n${JSON.stringify(messages)}`, "utf8")
    .digest("hex")

describe("requestDigestOf", () => {
  const user = (content: string): ModelMessage => ({ role: "user", content })
  const answer = (text: string): ModelMessage => ({ role: "assistant", parts: [{ type: "text", text }] })

  it("is the SHA-256 of the prompt hash, a newline and the messages' JSON, however the requests before it went", () => {
    const a = user("fix the test")
    const b = answer("Looking.")
    const c = user("and the docs")
    const requests: ReadonlyArray<ReadonlyArray<ModelMessage>> = [
      [],
      [a],
      [a, b],
      [a, b, c],
      // a shorter list after a longer one, the same objects
      [a, b],
      // an equal message that is another object, in the middle
      [a, answer("Looking."), c],
      // another message in the middle
      [a, answer("Looked."), c],
      [a, b, c, answer('Done, \u2028 and "quoted"')]
    ]
    // each prompt hash goes through the whole sequence (a request after one of another prompt starts over)
    for (const promptHash of ["p1", "p2"]) {
      for (const messages of requests)
        expect(requestDigestOf(promptHash, messages)).toBe(digestOf(promptHash, messages))
    }
  })
})
