/**
 * A scripted OpenAI-compatible model server for tests (issue 3 §6).
 *
 * `POST /v1/chat/completions` on 127.0.0.1 with real HTTP and real SSE framing
 * (`data: {...}\n\n`, a final `data: [DONE]\n\n`); `POST /v1/messages` takes the same queue, for
 * Anthropic streams (named `event:` steps, built by `test/support/anthropicReplies.ts`). Each request takes the next response from a
 * per-test queue; every request's parsed body and headers are recorded so tests can assert what the
 * model was sent.
 *
 * ```ts
 * const server = await startScriptedServer()
 * server.enqueue(Reply.stream({ text: ["Hel", "lo"], usage: { prompt_tokens: 10, completion_tokens: 2 } }))
 * server.enqueue(Reply.error(429, { headers: { "retry-after": "2" } }))
 * // … point the client at `${server.url}/v1` …
 * server.requests[0].body.messages
 * await server.close()
 * ```
 *
 * A response is either an HTTP error (`{ type: "http" }`) or an SSE stream (`{ type: "sse" }`) made of
 * steps: a JSON chunk, a raw (possibly malformed) `data:` line, `[DONE]`, a wait on a promise the test
 * controls, a short delay, or a cut (the socket is destroyed mid-stream). `Reply.*` builds the usual
 * ones; `Reply.cutAfter`, `Reply.malformedAfter` and `Reply.waitAfter` insert faults into a stream.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"

/** One step of an SSE response. */
export type SseStep =
  /** a `data: <json>` event */
  | { readonly type: "chunk"; readonly chunk: unknown }
  /** a named event, `event: <name>` then `data: <json>` (Anthropic's framing) */
  | { readonly type: "event"; readonly event: string; readonly data: unknown }
  /** a `data: <text>` event written verbatim (e.g. invalid JSON) */
  | { readonly type: "raw"; readonly data: string }
  /** `data: [DONE]` */
  | { readonly type: "done" }
  /** wait for a promise the test controls before writing the next step (the connection closing ends the wait) */
  | { readonly type: "wait"; readonly until: Promise<unknown> }
  /** wait a few milliseconds (prefer `wait`: tests should not depend on wall-clock time) */
  | { readonly type: "delay"; readonly ms: number }
  /** destroy the socket: the client sees the stream break mid-way */
  | { readonly type: "cut" }
  /** a `data: <json>` event written again and again, as fast as the client reads, until the client goes away */
  | { readonly type: "repeat"; readonly chunk: unknown }

export type ScriptedResponse =
  | {
      readonly type: "sse"
      readonly steps: ReadonlyArray<SseStep>
      /** extra response headers */
      readonly headers?: Readonly<Record<string, string>>
    }
  | {
      readonly type: "http"
      readonly status: number
      readonly headers?: Readonly<Record<string, string>>
      /** written as-is when a string, as JSON otherwise */
      readonly body?: unknown
    }

export interface ScriptedToolCall {
  readonly id: string
  readonly name: string
  /** the arguments text; an array is sent as that many chunks */
  readonly arguments: string | ReadonlyArray<string>
}

/** OpenAI usage object, as sent in the last chunk (`stream_options.include_usage`). */
export interface ScriptedUsage {
  readonly prompt_tokens: number
  readonly completion_tokens: number
  readonly total_tokens?: number
  readonly prompt_tokens_details?: { readonly cached_tokens?: number }
  readonly completion_tokens_details?: { readonly reasoning_tokens?: number }
}

export interface StreamSpec {
  /** `reasoning_content` deltas (DeepSeek / vLLM style); a string is one chunk */
  readonly reasoning?: string | ReadonlyArray<string>
  /** `content` deltas; a string is one chunk */
  readonly text?: string | ReadonlyArray<string>
  /** tool calls, sent one after the other, each with its arguments split across chunks */
  readonly toolCalls?: ReadonlyArray<ScriptedToolCall>
  /** default: "tool_calls" when there are tool calls, "stop" otherwise; null: no finish_reason at all */
  readonly finishReason?: string | null
  /** sent in a last chunk with `choices: []`; omitted when undefined */
  readonly usage?: ScriptedUsage
  /** write `data: [DONE]` at the end (default true) */
  readonly done?: boolean
  readonly model?: string
}

export interface RecordedRequest {
  readonly method: string
  readonly url: string
  /** lower-case header names, as node:http gives them */
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  /** the parsed JSON body (the raw text when it is not JSON) */
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary request JSON
  readonly body: any
  /** the body as it was sent, byte for byte (empty when `recordBodies` is off) */
  readonly text: string
  /** resolves when the response has been written completely */
  readonly finished: Promise<void>
  /** resolves when the connection closed before the response was complete (the client went away or a cut) */
  readonly aborted: Promise<void>
  /** `performance.now()` when the request arrived (its headers), for benchmarks that time the client's steps */
  readonly receivedAt: number
}

export interface ScriptedServerOptions {
  /** keep each request's parsed body (default true); a benchmark of a long session keeps none */
  readonly recordBodies?: boolean
}

export interface ScriptedServer {
  /** `http://127.0.0.1:<port>`; the OpenAI base URL is `${url}/v1` */
  readonly url: string
  readonly enqueue: (...responses: ReadonlyArray<ScriptedResponse>) => void
  /** every request received, in order */
  readonly requests: ReadonlyArray<RecordedRequest>
  /** responses still queued */
  readonly pending: () => number
  /** resolves with the n-th request (0-based) once it has arrived */
  readonly request: (n: number) => Promise<RecordedRequest>
  readonly close: () => Promise<void>
}

const asChunks = (value: string | ReadonlyArray<string> | undefined): ReadonlyArray<string> =>
  value === undefined ? [] : typeof value === "string" ? [value] : value

/** Split a text into `n` pieces of about the same size (for arguments/text split across chunks). */
export const splitInto = (text: string, n: number): ReadonlyArray<string> => {
  const size = Math.max(1, Math.ceil(text.length / n))
  const out: Array<string> = []
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size))
  return out
}

const insertAfter = (response: ScriptedResponse, n: number, step: SseStep, truncate: boolean): ScriptedResponse => {
  if (response.type !== "sse") throw new Error("scripted server: faults can only be inserted into an SSE response")
  const before = response.steps.slice(0, n)
  const after = truncate ? [] : response.steps.slice(n)
  return { ...response, steps: [...before, step, ...after] }
}

export const Reply = {
  /** a chunk in the OpenAI chat.completion.chunk shape */
  chunk: (delta: Record<string, unknown>, finishReason: string | null = null, model = "scripted"): unknown => ({
    id: "chatcmpl-scripted",
    object: "chat.completion.chunk",
    created: 1_700_000_000,
    model,
    choices: [{ index: 0, delta, finish_reason: finishReason }]
  }),

  /** a complete streamed answer: reasoning, then text, then tool calls, then the finish and usage chunks */
  stream: (spec: StreamSpec): ScriptedResponse => {
    const model = spec.model ?? "scripted"
    const steps: Array<SseStep> = []
    const push = (delta: Record<string, unknown>, finish: string | null = null) =>
      steps.push({ type: "chunk", chunk: Reply.chunk(delta, finish, model) })
    let first = true
    const withRole = (delta: Record<string, unknown>) => {
      if (!first) return delta
      first = false
      return { role: "assistant", ...delta }
    }
    for (const piece of asChunks(spec.reasoning)) push(withRole({ reasoning_content: piece }))
    for (const piece of asChunks(spec.text)) push(withRole({ content: piece }))
    ;(spec.toolCalls ?? []).forEach((call, index) => {
      const args = asChunks(call.arguments)
      push(
        withRole({
          tool_calls: [
            { index, id: call.id, type: "function", function: { name: call.name, arguments: args[0] ?? "" } }
          ]
        })
      )
      for (const piece of args.slice(1)) push({ tool_calls: [{ index, function: { arguments: piece } }] })
    })
    const finishReason =
      spec.finishReason === undefined ? ((spec.toolCalls ?? []).length > 0 ? "tool_calls" : "stop") : spec.finishReason
    if (finishReason !== null) push({}, finishReason)
    if (spec.usage !== undefined) {
      const usage = { total_tokens: spec.usage.prompt_tokens + spec.usage.completion_tokens, ...spec.usage }
      steps.push({
        type: "chunk",
        chunk: {
          id: "chatcmpl-scripted",
          object: "chat.completion.chunk",
          created: 1_700_000_000,
          model,
          choices: [],
          usage
        }
      })
    }
    if (spec.done !== false) steps.push({ type: "done" })
    return { type: "sse", steps }
  },

  /** streamed text, split into `chunks` pieces */
  text: (text: string, options: { readonly chunks?: number; readonly usage?: ScriptedUsage } = {}): ScriptedResponse =>
    Reply.stream({
      text: splitInto(text, options.chunks ?? 1),
      ...(options.usage !== undefined ? { usage: options.usage } : {})
    }),

  /** an HTTP error with an OpenAI-style JSON error body */
  error: (
    status: number,
    options: {
      readonly headers?: Readonly<Record<string, string>>
      readonly message?: string
      readonly body?: unknown
    } = {}
  ): ScriptedResponse => ({
    type: "http",
    status,
    headers: options.headers ?? {},
    body: options.body ?? {
      error: { message: options.message ?? `scripted error ${status}`, type: "scripted_error", code: String(status) }
    }
  }),

  /** keep the first `n` steps, then destroy the socket */
  cutAfter: (n: number, response: ScriptedResponse): ScriptedResponse =>
    insertAfter(response, n, { type: "cut" }, true),
  /** insert a `data:` line that is not JSON after the first `n` steps */
  malformedAfter: (
    n: number,
    response: ScriptedResponse,
    data = '{"choices": [{"delta": {"content": "x"'
  ): ScriptedResponse => insertAfter(response, n, { type: "raw", data }, false),
  /** a runaway model: `delta` as `content` chunks without end, until the client disconnects */
  endless: (delta: string): ScriptedResponse => ({
    type: "sse",
    steps: [
      { type: "chunk", chunk: Reply.chunk({ role: "assistant", content: delta }) },
      { type: "repeat", chunk: Reply.chunk({ content: delta }) }
    ]
  }),
  /** write the first `n` steps, then wait for `until` before the rest */
  waitAfter: (n: number, until: Promise<unknown>, response: ScriptedResponse): ScriptedResponse =>
    insertAfter(response, n, { type: "wait", until }, false)
} as const

const readBody = (req: http.IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    req.on("error", reject)
  })

const parse = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

const deferred = () => {
  let resolve!: () => void
  const promise = new Promise<void>((r) => {
    resolve = r
  })
  return { promise, resolve }
}

export const startScriptedServer = async (options: ScriptedServerOptions = {}): Promise<ScriptedServer> => {
  const recordBodies = options.recordBodies ?? true
  const queue: Array<ScriptedResponse> = []
  const requests: Array<RecordedRequest> = []
  const waiters: Array<{ n: number; resolve: (r: RecordedRequest) => void }> = []

  const respond = async (res: http.ServerResponse, response: ScriptedResponse, closed: Promise<void>) => {
    if (response.type === "http") {
      const body =
        response.body === undefined
          ? ""
          : typeof response.body === "string"
            ? response.body
            : JSON.stringify(response.body)
      res.writeHead(response.status, {
        "content-type": typeof response.body === "string" ? "text/plain" : "application/json",
        ...response.headers
      })
      res.end(body)
      return
    }
    res.writeHead(200, {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      connection: "keep-alive",
      ...response.headers
    })
    res.flushHeaders()
    for (const step of response.steps) {
      if (res.destroyed) return
      switch (step.type) {
        case "chunk":
          res.write(`data: ${JSON.stringify(step.chunk)}\n\n`)
          break
        case "event":
          res.write(`event: ${step.event}\ndata: ${JSON.stringify(step.data)}\n\n`)
          break
        case "raw":
          res.write(`data: ${step.data}\n\n`)
          break
        case "done":
          res.write("data: [DONE]\n\n")
          break
        case "wait":
          await Promise.race([step.until, closed])
          break
        case "delay":
          await Promise.race([new Promise((r) => setTimeout(r, step.ms)), closed])
          break
        case "repeat": {
          // in writes of about 16 kB, each after the last one drained: the client's pace
          const event = `data: ${JSON.stringify(step.chunk)}\n\n`
          const batch = event.repeat(Math.max(1, Math.floor(16_384 / event.length)))
          let gone = false
          void closed.then(() => {
            gone = true
          })
          while (!gone && !res.destroyed) {
            if (!res.write(batch)) {
              await Promise.race([new Promise((r) => res.once("drain", r)), closed])
            } else {
              await new Promise((r) => setImmediate(r))
            }
          }
          return
        }
        case "cut":
          // let what was written reach the client, then break the connection without ending the chunked body
          await new Promise<void>((r) => res.write("", () => r()))
          res.socket?.destroy()
          return
      }
    }
    res.end()
  }

  const server = http.createServer((req, res) => {
    const receivedAt = performance.now()
    const finished = deferred()
    const aborted = deferred()
    res.on("finish", () => finished.resolve())
    res.on("close", () => {
      if (!res.writableFinished) aborted.resolve()
    })
    void readBody(req).then(
      async (text) => {
        const record: RecordedRequest = {
          method: req.method ?? "",
          url: req.url ?? "",
          headers: { ...req.headers },
          body: recordBodies ? parse(text) : undefined,
          text: recordBodies ? text : "",
          finished: finished.promise,
          aborted: aborted.promise,
          receivedAt
        }
        requests.push(record)
        for (const waiter of waiters.filter((w) => w.n < requests.length)) {
          waiters.splice(waiters.indexOf(waiter), 1)
          waiter.resolve(requests[waiter.n]!)
        }
        const next =
          req.method === "POST" && (req.url === "/v1/chat/completions" || req.url === "/v1/messages")
            ? queue.shift()
            : Reply.error(404, { message: `scripted server: no route ${req.method} ${req.url}` })
        const response =
          next ??
          // 400: not retryable, so a mis-scripted test fails at once instead of backing off
          Reply.error(400, { message: "scripted server: no response queued for this request (script exhausted)" })
        await respond(res, response, aborted.promise)
      },
      () => res.destroy()
    )
  })
  server.keepAliveTimeout = 1_000

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => resolve())
  })
  const { port } = server.address() as AddressInfo

  return {
    url: `http://127.0.0.1:${port}`,
    enqueue: (...responses) => {
      queue.push(...responses)
    },
    requests,
    pending: () => queue.length,
    request: (n) =>
      n < requests.length
        ? Promise.resolve(requests[n]!)
        : new Promise((resolve) => {
            waiters.push({ n, resolve })
          }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}
