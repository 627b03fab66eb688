import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { Reply, type ScriptedServer, splitInto, startScriptedServer } from "./scriptedServer.js"

/** POST a chat request and return the status, headers and the `data:` payloads of the SSE body. */
const post = async (server: ScriptedServer, body: unknown = { model: "m", messages: [], stream: true }) => {
  const response = await fetch(`${server.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: "Bearer test-key" },
    body: JSON.stringify(body)
  })
  const text = await response.text()
  const sse = response.headers.get("content-type") === "text/event-stream"
  return { response, text, data: sse ? sseData(text) : [] }
}

/** Parses SSE framing strictly: events separated by a blank line, each one `data: ` line. */
const sseData = (text: string): Array<string> => {
  if (text === "") return []
  expect(text.endsWith("\n\n")).toBe(true)
  return text
    .slice(0, -2)
    .split("\n\n")
    .map((event) => {
      expect(event.startsWith("data: ")).toBe(true)
      expect(event.includes("\n")).toBe(false)
      return event.slice("data: ".length)
    })
}

describe("scripted server", () => {
  let server: ScriptedServer
  beforeEach(async () => {
    server = await startScriptedServer()
  })
  afterEach(async () => {
    await server.close()
  })

  it("streams text, reasoning, split tool calls and usage with SSE framing and a final [DONE]", async () => {
    server.enqueue(
      Reply.stream({
        reasoning: ["hm", "m"],
        text: ["Hel", "lo"],
        toolCalls: [
          { id: "c1", name: "read", arguments: ['{"pa', 'th":"a"}'] },
          { id: "c2", name: "bash", arguments: '{"command":"ls"}' }
        ],
        usage: { prompt_tokens: 7, completion_tokens: 3 }
      })
    )
    const { response, data } = await post(server)
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("text/event-stream")
    expect(data.at(-1)).toBe("[DONE]")
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d))
    const deltas = chunks.filter((c) => c.choices.length > 0).map((c) => c.choices[0].delta)
    expect(deltas.slice(0, 4)).toEqual([
      { role: "assistant", reasoning_content: "hm" },
      { reasoning_content: "m" },
      { content: "Hel" },
      { content: "lo" }
    ])
    expect(deltas[4]).toEqual({
      tool_calls: [{ index: 0, id: "c1", type: "function", function: { name: "read", arguments: '{"pa' } }]
    })
    expect(deltas[5]).toEqual({ tool_calls: [{ index: 0, function: { arguments: 'th":"a"}' } }] })
    expect(deltas[6].tool_calls[0]).toMatchObject({ index: 1, id: "c2", function: { name: "bash" } })
    expect(chunks.at(-2).choices[0].finish_reason).toBe("tool_calls")
    expect(chunks.at(-1)).toMatchObject({
      choices: [],
      usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 }
    })
  })

  it("records request bodies and headers, in order", async () => {
    server.enqueue(Reply.text("a"), Reply.text("b"))
    await post(server, { model: "m", messages: [{ role: "user", content: "one" }] })
    await post(server, { model: "m", messages: [{ role: "user", content: "two" }] })
    expect(server.requests.map((r) => r.body.messages[0].content)).toEqual(["one", "two"])
    expect(server.requests[0]!.headers.authorization).toBe("Bearer test-key")
    expect(server.requests[0]!.url).toBe("/v1/chat/completions")
    expect(server.pending()).toBe(0)
  })

  it("answers HTTP errors with their headers and a JSON error body", async () => {
    server.enqueue(
      Reply.error(429, { headers: { "retry-after": "3", "retry-after-ms": "3000" }, message: "slow down" })
    )
    const { response, text } = await post(server)
    expect(response.status).toBe(429)
    expect(response.headers.get("retry-after")).toBe("3")
    expect(response.headers.get("retry-after-ms")).toBe("3000")
    expect(JSON.parse(text)).toMatchObject({ error: { message: "slow down" } })
  })

  it("answers 400 (not retryable) when the script is exhausted", async () => {
    const { response, text } = await post(server)
    expect(response.status).toBe(400)
    expect(text).toContain("no response queued")
  })

  it("writes a malformed data line verbatim", async () => {
    server.enqueue(Reply.malformedAfter(1, Reply.text("hello", { chunks: 2 }), "{not json"))
    const { data } = await post(server)
    expect(data[1]).toBe("{not json")
    expect(() => JSON.parse(data[1]!)).toThrow()
    expect(data.at(-1)).toBe("[DONE]")
  })

  it("cuts the stream mid-way: the client sees the body break after the first chunks", async () => {
    server.enqueue(Reply.cutAfter(2, Reply.text("hello world", { chunks: 4 })))
    const response = await fetch(`${server.url}/v1/chat/completions`, { method: "POST", body: "{}" })
    expect(response.status).toBe(200)
    await expect(response.text()).rejects.toThrow()
    await server.requests[0]!.aborted
  })

  it("holds a stream at a latch the test controls, and sees the client go away", async () => {
    let release!: () => void
    const latch = new Promise<void>((r) => {
      release = r
    })
    server.enqueue(Reply.waitAfter(1, latch, Reply.text("ab", { chunks: 2 })))
    const controller = new AbortController()
    const response = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      body: "{}",
      signal: controller.signal
    })
    const reader = response.body!.getReader()
    const first = new TextDecoder().decode((await reader.read()).value)
    expect(first).toContain('"content":"a"')
    controller.abort()
    await server.requests[0]!.aborted
    release()
  })

  it("splits text into pieces", () => {
    expect(splitInto("abcdefg", 3)).toEqual(["abc", "def", "g"])
    expect(splitInto("ab", 5)).toEqual(["a", "b"])
  })
})
