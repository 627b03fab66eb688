/**
 * The kept, extended serialisation of a conversation's history (`HistoryBytes`, `bodyParts`): for
 * any sequence of requests — a step's messages appended, a history cut short (compaction), a
 * message replaced by another object, the same again, with and without a system prompt — the parts
 * joined are `requestBody`'s string (itself the SDK's body: wireDifferential.test.ts), and the bytes
 * an earlier request was given are never written again (a socket may still be sending them).
 */
import { describe, expect, it } from "@effect/vitest"
import { FastCheck } from "effect"
import type { ModelMessage, ModelRequest } from "../../src/model/Model.js"
import { bodyParts, HistoryBytes, historiesFor, requestBody } from "../../src/model/OpenAiCompatibleWire.js"

const settings = {
  modelId: "m",
  reasoningEffort: "low",
  secureJsonParse: (text: string) => JSON.parse(text) as unknown
}

let serial = 0
/** A new message object (an assistant message with only reasoning serialises to nothing: kept out of the body). */
const newMessage = (kind: number): ModelMessage => {
  const n = serial++
  switch (kind % 4) {
    case 0:
      return { role: "user", content: `question ${n} ✓ ${"é".repeat(n % 5)}` }
    case 1:
      return {
        role: "assistant",
        parts: [
          { type: "text", text: `answer ${n}` },
          { type: "tool-call", callId: `call_${n}`, tool: "read", input: { path: `f${n}` } }
        ]
      }
    case 2:
      return {
        role: "tool",
        results: [{ callId: `call_${n}`, tool: "read", output: `out ${n}\n`, isError: n % 2 === 0 }]
      }
    default:
      return { role: "assistant", parts: [{ type: "reasoning", text: `thinking ${n}` }] }
  }
}

type Op =
  | { readonly _tag: "append"; readonly kinds: ReadonlyArray<number> }
  | { readonly _tag: "cut"; readonly keep: number }
  | { readonly _tag: "replace"; readonly at: number; readonly kind: number }
  | { readonly _tag: "same" }
  | { readonly _tag: "system"; readonly on: boolean }

const op: FastCheck.Arbitrary<Op> = FastCheck.oneof(
  FastCheck.record({
    _tag: FastCheck.constant("append" as const),
    kinds: FastCheck.array(FastCheck.nat(3), { maxLength: 6 })
  }),
  FastCheck.record({ _tag: FastCheck.constant("cut" as const), keep: FastCheck.nat(40) }),
  FastCheck.record({ _tag: FastCheck.constant("replace" as const), at: FastCheck.nat(40), kind: FastCheck.nat(3) }),
  FastCheck.constant({ _tag: "same" as const }),
  FastCheck.record({ _tag: FastCheck.constant("system" as const), on: FastCheck.boolean() })
)

const joined = (parts: ReadonlyArray<string | Buffer>): string =>
  Buffer.concat(parts.map((part) => (typeof part === "string" ? Buffer.from(part) : part))).toString("utf8")

describe("HistoryBytes", () => {
  it.prop(
    "any sequence of requests: the parts joined are requestBody's, and bytes given out never change",
    [FastCheck.array(op, { minLength: 1, maxLength: 40 })],
    ([ops]) => {
      const history = new HistoryBytes()
      let messages: Array<ModelMessage> = []
      let system: string | undefined = "be brief"
      /** every history buffer handed out so far, with the bytes it had then */
      const given: Array<{ readonly buffer: Buffer; readonly bytes: Buffer }> = []
      for (const o of ops) {
        switch (o._tag) {
          case "append":
            messages = [...messages, ...o.kinds.map(newMessage)]
            break
          case "cut":
            messages = messages.slice(0, Math.min(o.keep, messages.length))
            break
          case "replace":
            if (messages.length > 0) {
              messages = [...messages]
              messages[o.at % messages.length] = newMessage(o.kind)
            }
            break
          case "system":
            system = o.on ? "be brief" : undefined
            break
          case "same":
            break
        }
        const request: ModelRequest = { system, messages, tools: [], maxOutputTokens: 100 }
        const body = bodyParts(request, settings, history)
        const text = joined(body.parts)
        expect(text).toBe(requestBody(request, settings))
        expect(body.length).toBe(Buffer.byteLength(text))
        JSON.parse(text)
        const buffer = body.parts.find((part): part is Buffer => typeof part !== "string")!
        given.push({ buffer, bytes: Buffer.from(buffer) })
        for (const earlier of given) expect(earlier.buffer.equals(earlier.bytes)).toBe(true)
      }
    }
  )

  it("a step appends only its messages: the earlier ones are not serialised again", () => {
    const history = new HistoryBytes()
    const messages: Array<ModelMessage> = [newMessage(0)]
    bodyParts({ messages, tools: [] }, settings, history)
    const before = messages.map((m) => m)
    // an accessor counts reads of the earlier messages' fields: none when they are kept
    let reads = 0
    const watched = before.map(
      (m) =>
        new Proxy(m, {
          get: (target, key, receiver) => {
            reads++
            return Reflect.get(target, key, receiver)
          }
        })
    )
    const next = [...watched, newMessage(1), newMessage(2)]
    // the proxies are other objects: the buffer starts again from them (read once each)
    bodyParts({ messages: next, tools: [] }, settings, history)
    const afterFirst = reads
    expect(afterFirst).toBeGreaterThan(0)
    bodyParts({ messages: [...next, newMessage(1)], tools: [] }, settings, history)
    expect(reads).toBe(afterFirst)
  })

  it("historiesFor keeps one history per conversation key, the least recently used dropped past its size", () => {
    const histories = historiesFor(2)
    const a = histories("a")
    const b = histories("b")
    expect(histories("a")).toBe(a)
    histories("c") // drops b, used longest ago
    expect(histories("a")).toBe(a)
    expect(histories("b")).not.toBe(b)
  })
})
