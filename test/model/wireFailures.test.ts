/**
 * How our openai-compatible client (src/model/OpenAiCompatibleWire.ts) fails when the connection
 * does, against raw TCP servers that write exact bytes: each failure is a typed `ModelError` of the
 * reason `Retry` needs (a bad key stays `http`, a cut stream `stream-cut`, no answer `network`, a
 * header Node refuses `config`) and nothing is thrown outside the stream. A reset is sent only
 * once the client has parsed the answer's headers (Node's `http.client.response.finish`
 * diagnostics channel says so), so no test depends on timing. Found by a review of the client.
 */
import * as diagnostics from "node:diagnostics_channel"
import * as net from "node:net"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Option, Stream } from "effect"
import { makeAiSdkModel } from "../../src/model/AiSdk.js"
import type { ModelError, ModelRequest } from "../../src/model/Model.js"
import { endpoint } from "../../src/model/OpenAiCompatibleWire.js"

const apiKey = "sk-wire-failures-0123456789abcdef"
const request: ModelRequest = { system: "s", messages: [{ role: "user", content: "hi" }], tools: [] }

/**
 * A TCP server answering each connection with `answer` (given the socket and a promise that
 * resolves once the client has parsed an answer's headers).
 */
const rawServer = (answer: (socket: net.Socket, headersParsed: Promise<void>) => void) =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly server: net.Server }>((resume) => {
      const server = net.createServer((socket) => {
        socket.on("error", () => undefined)
        let parsed!: () => void
        const headersParsed = new Promise<void>((resolve) => {
          parsed = resolve
        })
        const onResponse = () => {
          diagnostics.unsubscribe("http.client.response.finish", onResponse)
          parsed()
        }
        diagnostics.subscribe("http.client.response.finish", onResponse)
        socket.once("data", () => answer(socket, headersParsed))
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as net.AddressInfo
        resume(Effect.succeed({ url: `http://127.0.0.1:${port}/v1`, server }))
      })
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.close(() => resume(Effect.void))
      })
  )

const failureOf = (url: string, extra: { readonly apiKey?: string } = {}) =>
  Effect.gen(function* () {
    const model = makeAiSdkModel({
      name: "local/m",
      type: "openai-compatible",
      baseURL: url,
      apiKey,
      modelId: "m",
      ...extra
    })
    const exit = yield* Effect.exit(Stream.runCollect(model.stream(request)))
    expect(Exit.isFailure(exit)).toBe(true)
    const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
    expect(error).toBeDefined()
    const e = error as ModelError
    for (const text of [e.message, e.body ?? "", JSON.stringify(e.headers ?? {}), JSON.stringify(e.cause ?? {})]) {
      expect(text).not.toContain(apiKey)
    }
    return e
  })

const head = (status: string, headers: Record<string, string | number> = {}) =>
  `HTTP/1.1 ${status}\r\n${Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join("")}\r\n`

describe("our openai-compatible client when the connection fails", () => {
  it.scopedLive(
    "an error answer whose body is cut by a reset: still http 401 (a bad key is not retried as a network error)",
    () =>
      Effect.gen(function* () {
        const { url } = yield* rawServer((socket, parsed) => {
          socket.write(
            `${head("401 Unauthorized", { "content-type": "application/json", "content-length": 200 })}{"error":{"mess`
          )
          void parsed.then(() => socket.resetAndDestroy())
        })
        const error = yield* failureOf(url)
        expect(error).toMatchObject({ reason: "http", status: 401 })
        // the body could not be read whole: none is kept (as the SDK)
        expect(error.body).toBeUndefined()
      })
  )

  it.scopedLive("a reset right after a 200's headers, before any chunk: stream-cut, not network", () =>
    Effect.gen(function* () {
      const { url } = yield* rawServer((socket, parsed) => {
        socket.write(head("200 OK", { "content-type": "text/event-stream", "transfer-encoding": "chunked" }))
        void parsed.then(() => socket.resetAndDestroy())
      })
      const error = yield* failureOf(url)
      expect(error.reason).toBe("stream-cut")
    })
  )

  it.scopedLive("a server that does not speak HTTP: network (no answer), with Node's parse error as the cause", () =>
    Effect.gen(function* () {
      const { url } = yield* rawServer((socket) => {
        socket.end("SSH-2.0-OpenSSH_9.6\r\n\r\n")
      })
      const error = yield* failureOf(url)
      expect(error).toMatchObject({ reason: "network", host: "127.0.0.1" })
      expect(JSON.stringify(error.cause)).toMatch(/HPE_/)
    })
  )

  it.scopedLive(
    "a 205 that carries a body it says is gzip but is not: invalid-response, and nothing thrown outside the stream",
    () =>
      Effect.gen(function* () {
        const { url } = yield* rawServer((socket) => {
          socket.end(`${head("205 Reset Content", { "content-encoding": "gzip", "content-length": 5 })}hello`)
        })
        const error = yield* failureOf(url)
        expect(error.reason).toBe("invalid-response")
        expect(error.message).toContain("HTTP 205")
      })
  )

  it.scopedLive("a key with a line break (a header value Node refuses): config, without the key", () =>
    Effect.gen(function* () {
      const { url } = yield* rawServer((socket) => socket.end())
      const error = yield* failureOf(url, { apiKey: `${apiKey}\n` })
      expect(error.reason).toBe("config")
      expect(error.message).toContain("authorization")
    })
  )

  it("a kept-alive connection idle for 4 s is closed (undici's fetch closes it too: a middlebox may have forgotten it)", () => {
    const { agent } = endpoint({ baseURL: "http://127.0.0.1:1/v1" })
    // the agent's options, as Node keeps them (not in its type)
    expect((agent as unknown as { readonly options: unknown }).options).toMatchObject({
      keepAlive: true,
      timeout: 4_000
    })
  })
})
