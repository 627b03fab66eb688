/**
 * The openai-compatible Chat Completions request, made by us: the same bytes the
 * SDK's `@ai-sdk/openai-compatible` provider sends and the same stream parts it reads, without its
 * pipeline — the whole prompt converted and serialised again on every step (its cost grew with the
 * session), its provider options parsed with zod four times a request, undici's `fetch`, and four
 * web `TransformStream`s with a zod validation of every streamed chunk.
 *
 * - The body: each history message's JSON is made once and kept by the message (the history hands
 *   back the same message objects for what did not change, session/History.ts), so a request joins
 *   strings; the fields, their order and the conversion are the provider's (`getArgs`,
 *   `convertToOpenAICompatibleChatMessages`), pinned byte for byte by test/model/wire.test.ts.
 * - The request: `node:http` / `node:https` with a keep-alive agent per model.
 * - The answer: Server-Sent Events split by `eventsource-parser` (what the SDK uses), each chunk
 *   checked by hand against the provider's chunk schema, and turned into the provider interface's
 *   stream parts (`LanguageModelV3StreamPart`) as the provider does — tool calls through the SDK's
 *   own `StreamingToolCallTracker` — so `AiSdk.ts` maps them to events as it maps the SDK's.
 *
 * What differs on the wire, on purpose: the headers (no undici defaults such as `sec-fetch-mode`,
 * our own `user-agent`); redirects are not followed (a 3xx is an HTTP error); no port is refused
 * (fetch blocks some, such as 6000); the bodies of error answers and the event buffer are bounded.
 */
import * as http from "node:http"
import * as https from "node:https"
import type { Readable } from "node:stream"
import * as zlib from "node:zlib"
import type { LanguageModelV3StreamPart, LanguageModelV3Usage } from "@ai-sdk/provider"
import { version } from "../version.js"
import type { ModelMessage, ModelRequest, ModelTool } from "./Model.js"
import { reasoningGoesBack } from "./Reasoning.js"

// -----------------------------------------------------------------------------------------------
// the body
// -----------------------------------------------------------------------------------------------

/** The parts of the body that do not change between requests of one model. */
export interface WireSettings {
  readonly modelId: string
  /** `reasoning_effort`, when reasoning is set (`Reasoning.ts`) */
  readonly reasoningEffort?: string | undefined
  /** `JSON.parse` with the SDK's guard against prototype keys (`secureJsonParse` of provider-utils) */
  readonly secureJsonParse: (text: string) => unknown
}

/** A call's `arguments` as the provider writes them (`serializeToolCallArguments`). */
const toolArguments = (input: unknown, settings: WireSettings): string => {
  if (typeof input === "string") {
    try {
      settings.secureJsonParse(input)
      return input
    } catch {
      return JSON.stringify(input)
    }
  }
  return JSON.stringify(input)
}

/**
 * A history message as the provider's messages, joined by commas: none for an assistant message
 * left with nothing to send (as `AiSdk.toSdkMessages` leaves it out). Reasoning goes back as
 * `reasoning_content` in a turn that made tool calls (`reasoningGoesBack`, as `AiSdk.toSdkReasoning`
 * decides for openai-compatible).
 */
const messageJson = (message: ModelMessage, settings: WireSettings, withReasoning: boolean): string => {
  switch (message.role) {
    case "user":
      return JSON.stringify({ role: "user", content: message.content })
    case "tool":
      return message.results
        .map((result) => JSON.stringify({ role: "tool", tool_call_id: result.callId, content: result.output }))
        .join(",")
    case "assistant": {
      let text = ""
      let reasoning = ""
      const toolCalls: Array<unknown> = []
      for (const part of message.parts) {
        if (part.type === "text") text += part.text
        else if (part.type === "reasoning") {
          if (withReasoning && part.text.trim() !== "") reasoning += part.text
        } else {
          toolCalls.push({
            id: part.callId,
            type: "function",
            // a call whose input was not JSON still needs an input object, or the provider rejects the history
            function: { name: part.tool, arguments: toolArguments(part.input ?? {}, settings) }
          })
        }
      }
      if (text === "" && reasoning === "" && toolCalls.length === 0) return ""
      return JSON.stringify({
        role: "assistant",
        content: toolCalls.length > 0 ? text || null : text,
        ...(reasoning.length > 0 ? { reasoning_content: reasoning } : {}),
        ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {})
      })
    }
  }
}

/** A message's JSON, made once: the same message object comes back in every later request of the session. */
const messageJsons = new WeakMap<ModelMessage, { readonly withReasoning: boolean; readonly json: string }>()

const messageJsonOf = (message: ModelMessage, previous: ModelMessage | undefined, settings: WireSettings): string => {
  const withReasoning = reasoningGoesBack(message, previous)
  const known = messageJsons.get(message)
  if (known !== undefined && known.withReasoning === withReasoning) return known.json
  const json = messageJson(message, settings, withReasoning)
  messageJsons.set(message, { withReasoning, json })
  return json
}

/** The tools' JSON, made once per tools array. */
const toolsJsons = new WeakMap<ReadonlyArray<ModelTool>, string>()

const toolsJsonOf = (tools: ReadonlyArray<ModelTool>): string => {
  let json = toolsJsons.get(tools)
  if (json === undefined) {
    json = JSON.stringify(
      tools.map((tool) => ({
        type: "function",
        function: { name: tool.name, description: tool.description, parameters: tool.inputSchema }
      }))
    )
    toolsJsons.set(tools, json)
  }
  return json
}

/** The body's fields before the messages: `{"model":…,"max_tokens":…,"reasoning_effort":…,"messages":[` */
const bodyHead = (request: ModelRequest, settings: WireSettings): string => {
  const head = JSON.stringify({
    model: settings.modelId,
    ...(request.maxOutputTokens === undefined ? {} : { max_tokens: request.maxOutputTokens }),
    ...(settings.reasoningEffort === undefined ? {} : { reasoning_effort: settings.reasoningEffort })
  })
  return `${head.slice(0, -1)},"messages":[`
}

/** The body's fields after the messages' array: the tools, the choice and the stream options. */
const bodyTail = (request: ModelRequest): string =>
  (request.tools.length > 0 ? `],"tools":${toolsJsonOf(request.tools)},"tool_choice":"auto"` : "]") +
  ',"stream":true,"stream_options":{"include_usage":true}}'

const systemJson = (request: ModelRequest): string | undefined =>
  request.system === undefined ? undefined : JSON.stringify({ role: "system", content: request.system })

/**
 * The request body, as the provider's `doStream` serialises it: `model`, `max_tokens`,
 * `reasoning_effort`, `messages` (the system prompt first), `tools` and `tool_choice`, `stream` and
 * `stream_options`, in that order; fields without a value left out. One string: what `bodyParts`
 * writes in pieces, byte for byte.
 */
export const requestBody = (request: ModelRequest, settings: WireSettings): string => {
  const jsons: Array<string> = []
  const system = systemJson(request)
  if (system !== undefined) jsons.push(system)
  for (let i = 0; i < request.messages.length; i++) {
    const json = messageJsonOf(request.messages[i]!, request.messages[i - 1], settings)
    if (json !== "") jsons.push(json)
  }
  return bodyHead(request, settings) + jsons.join(",") + bodyTail(request)
}

/**
 * One conversation's messages serialised, kept between its requests and extended:
 * each message's JSON behind a comma, in one buffer that grows. A request whose history begins
 * with the messages already in the buffer (the same objects: the history hands back what did not
 * change) appends only its new ones, and the body is written from the buffer as it is: no string
 * of the whole history is joined and none encoded per request (each grows with the history and
 * takes a fresh copy of it in memory every time).
 *
 * Bytes once written are never written again, as a body handed to the socket may still be being
 * sent: a history that differs from the buffer's before its end (a compaction, another branch)
 * makes a new buffer with the common part copied, and so does growing.
 */
export class HistoryBytes {
  private messages: Array<ModelMessage> = []
  /** where each message's bytes end in `bytes` */
  private ends: Array<number> = []
  private bytes: Buffer = Buffer.alloc(0)
  /** how far `bytes` has ever been written */
  private written = 0

  /** The messages, each behind a comma: bytes of the buffer, to be sent before the next call. */
  serialise(messages: ReadonlyArray<ModelMessage>, settings: WireSettings): Buffer {
    let kept = 0
    const common = Math.min(this.messages.length, messages.length)
    while (kept < common && this.messages[kept] === messages[kept]) kept++
    let end = kept === 0 ? 0 : this.ends[kept - 1]!
    this.messages.length = kept
    this.ends.length = kept
    if (end < this.written && kept < messages.length) this.replace(end, this.bytes.length)
    for (let i = kept; i < messages.length; i++) {
      const message = messages[i]!
      const json = messageJsonOf(message, messages[i - 1], settings)
      if (json !== "") {
        const length = Buffer.byteLength(json)
        const needed = end + 1 + length
        if (needed > this.bytes.length) this.replace(end, Math.max(2 * this.bytes.length, needed, 64 * 1024))
        this.bytes[end] = 0x2c
        end += 1 + this.bytes.write(json, end + 1, length, "utf8")
      }
      this.messages.push(message)
      this.ends.push(end)
    }
    if (end > this.written) this.written = end
    return this.bytes.subarray(0, end)
  }

  /** A new buffer of `capacity` bytes holding the first `end` bytes of the old one. */
  private replace(end: number, capacity: number): void {
    const bytes = Buffer.allocUnsafe(Math.max(capacity, end))
    this.bytes.copy(bytes, 0, 0, end)
    this.bytes = bytes
    this.written = end
  }
}

/**
 * The request body in pieces written one after the other: the head with the system prompt, the
 * history's bytes (without their first comma when there is no system prompt), the tail. Joined,
 * they are `requestBody`'s string.
 */
export const bodyParts = (
  request: ModelRequest,
  settings: WireSettings,
  history: HistoryBytes
): { readonly parts: ReadonlyArray<string | Buffer>; readonly length: number } => {
  const messages = history.serialise(request.messages, settings)
  const system = systemJson(request)
  const head = bodyHead(request, settings) + (system ?? "")
  const rest = system === undefined && messages.length > 0 ? messages.subarray(1) : messages
  const tail = bodyTail(request)
  return { parts: [head, rest, tail], length: Buffer.byteLength(head) + rest.length + Buffer.byteLength(tail) }
}

/**
 * The kept histories of a model's conversations by the request's `cacheKey` (the session id): a
 * few at a time, the one used longest ago dropped first.
 */
export const historiesFor = (size = 8): ((key: string | undefined) => HistoryBytes) => {
  const kept = new Map<string, HistoryBytes>()
  return (key) => {
    const name = key ?? ""
    let history = kept.get(name)
    if (history === undefined) {
      history = new HistoryBytes()
      const oldest = kept.keys().next()
      if (kept.size >= size && oldest.done !== true) kept.delete(oldest.value)
    } else kept.delete(name)
    kept.set(name, history)
    return history
  }
}

// -----------------------------------------------------------------------------------------------
// the chunks
// -----------------------------------------------------------------------------------------------

/**
 * A failure of the answer that is not the connection's: `invalid-response` (a chunk that does not
 * fit the schema, an event too large) or `stream-cut` (the stream ended without a finish reason).
 * `AiSdk.toModelError` turns it into a `ModelError` of that reason.
 */
export class WireError extends Error {
  override readonly name = "WireError"
  constructor(
    readonly reason: "invalid-response" | "stream-cut",
    message: string,
    options?: { readonly cause: unknown }
  ) {
    super(message, options)
  }
}

/** A tool call's piece as the provider streams it. */
export interface ToolCallDelta {
  readonly index?: number | null
  readonly id?: string | null
  readonly type?: string | null
  readonly function: { readonly name?: string | null; readonly arguments?: string | null }
}

interface ChunkUsage {
  readonly prompt_tokens?: number | null
  readonly completion_tokens?: number | null
  readonly prompt_tokens_details?: { readonly cached_tokens?: number | null } | null
  readonly completion_tokens_details?: { readonly reasoning_tokens?: number | null } | null
}

interface ChunkDelta {
  readonly content?: string | ReadonlyArray<Record<string, unknown>> | null
  readonly refusal?: unknown
  readonly reasoning_content?: string | null
  readonly reasoning?: string | null
  readonly tool_calls?: ReadonlyArray<ToolCallDelta> | null
}

interface Chunk {
  readonly model?: string | null
  readonly choices: ReadonlyArray<{ readonly delta?: ChunkDelta | null; readonly finish_reason?: string | null }>
  readonly usage?: ChunkUsage | null
  readonly error?: unknown
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)
const nullish = (value: unknown): value is null | undefined => value === null || value === undefined
const stringOrNullish = (value: unknown): boolean => nullish(value) || typeof value === "string"
/** zod's `number()`: a finite number (`1e400` parses to Infinity, which the schema refuses) */
const numberOrNullish = (value: unknown): boolean =>
  nullish(value) || (typeof value === "number" && Number.isFinite(value))

/** Where a chunk does not fit the provider's chunk schema (`chunkBaseSchema`), or undefined when it fits. */
const chunkProblem = (value: unknown): string | undefined => {
  if (!isObject(value)) return "a chunk is not an object"
  if (!stringOrNullish(value.id) || !numberOrNullish(value.created) || !stringOrNullish(value.model)) {
    return "id, created or model has the wrong type"
  }
  if (!Array.isArray(value.choices)) return "choices is not an array"
  for (const choice of value.choices) {
    if (!isObject(choice)) return "a choice is not an object"
    if (!stringOrNullish(choice.finish_reason)) return "finish_reason is not a string"
    const delta = choice.delta
    if (nullish(delta)) continue
    if (!isObject(delta)) return "delta is not an object"
    if (!nullish(delta.role) && delta.role !== "assistant" && delta.role !== "") return "role is not assistant"
    const content = delta.content
    if (!nullish(content) && typeof content !== "string") {
      if (!Array.isArray(content) || content.some((part) => !isObject(part) || typeof part.type !== "string")) {
        return "content is neither a string nor a list of typed parts"
      }
    }
    if (!stringOrNullish(delta.reasoning_content) || !stringOrNullish(delta.reasoning)) {
      return "reasoning is not a string"
    }
    const calls = delta.tool_calls
    if (nullish(calls)) continue
    if (!Array.isArray(calls)) return "tool_calls is not an array"
    for (const call of calls) {
      if (!isObject(call) || !numberOrNullish(call.index) || !stringOrNullish(call.id)) {
        return "a tool call's index or id has the wrong type"
      }
      const fn = call.function
      if (!isObject(fn) || !stringOrNullish(fn.name) || !stringOrNullish(fn.arguments)) {
        return "a tool call's function has the wrong type"
      }
      const extra = call.extra_content
      if (!nullish(extra)) {
        if (!isObject(extra)) return "a tool call's extra_content is not an object"
        const google = extra.google
        if (!nullish(google) && (!isObject(google) || !stringOrNullish(google.thought_signature))) {
          return "a tool call's thought signature has the wrong type"
        }
      }
    }
  }
  const usage = value.usage
  if (nullish(usage)) return undefined
  if (!isObject(usage)) return "usage is not an object"
  if (!numberOrNullish(usage.prompt_tokens) || !numberOrNullish(usage.completion_tokens)) {
    return "a token count is not a number"
  }
  if (!numberOrNullish(usage.total_tokens)) return "a token count is not a number"
  const details = [usage.prompt_tokens_details, usage.completion_tokens_details]
  for (const detail of details) {
    if (nullish(detail)) continue
    if (!isObject(detail)) return "usage details are not an object"
    for (const key of [
      "cached_tokens",
      "reasoning_tokens",
      "accepted_prediction_tokens",
      "rejected_prediction_tokens"
    ]) {
      if (!numberOrNullish(detail[key])) return "a token count is not a number"
    }
  }
  return undefined
}

/** The provider's error chunk (`openaiCompatibleErrorDataSchema`). */
const isErrorChunk = (value: unknown): value is { readonly error: Record<string, unknown> } => {
  if (!isObject(value) || !isObject(value.error)) return false
  const { message, type, code } = value.error
  return (
    typeof message === "string" &&
    stringOrNullish(type) &&
    (nullish(code) || typeof code === "string" || (typeof code === "number" && Number.isFinite(code)))
  )
}

/** An error chunk's error as the schema gives it: `message`, `type`, `param` and `code`, the other keys dropped (zod strips them). */
const schemaError = (error: Record<string, unknown>): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const key of ["message", "type", "param", "code"]) if (key in error) out[key] = error[key]
  return out
}

/** The provider's unified finish reason (`mapOpenAICompatibleFinishReason`). */
const finishReasonOf = (
  raw: string,
  refused: boolean
): "stop" | "length" | "content-filter" | "tool-calls" | "other" => {
  switch (raw) {
    case "stop":
      return refused ? "content-filter" : "stop"
    case "length":
      return "length"
    case "content_filter":
      return "content-filter"
    case "function_call":
    case "tool_calls":
      return "tool-calls"
    default:
      return "other"
  }
}

/** Token counts in the provider interface's shape (`convertOpenAICompatibleChatUsage`). */
const usageOf = (usage: ChunkUsage | undefined): LanguageModelV3Usage => {
  if (usage === undefined) {
    return {
      inputTokens: { total: undefined, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: undefined, text: undefined, reasoning: undefined }
    }
  }
  const prompt = usage.prompt_tokens ?? 0
  const completion = usage.completion_tokens ?? 0
  const cached = usage.prompt_tokens_details?.cached_tokens ?? 0
  const reasoning = usage.completion_tokens_details?.reasoning_tokens ?? 0
  return {
    inputTokens: { total: prompt, noCache: prompt - cached, cacheRead: cached, cacheWrite: undefined },
    outputTokens: { total: completion, text: Math.max(0, completion - reasoning), reasoning }
  }
}

/** The text and reasoning of a delta's `content` (`convertOpenAICompatibleContent`). */
const contentParts = (
  content: ChunkDelta["content"]
): Array<{ readonly type: "text" | "reasoning"; readonly text: string }> => {
  if (nullish(content)) return []
  if (typeof content === "string") return content.length > 0 ? [{ type: "text", text: content }] : []
  const out: Array<{ readonly type: "text" | "reasoning"; readonly text: string }> = []
  for (const part of content) {
    if (part.type === "text" && typeof part.text === "string") {
      if (part.text.length > 0) out.push({ type: "text", text: part.text })
    } else if (part.type === "thinking" && Array.isArray(part.thinking)) {
      const text = part.thinking
        .filter((c): c is { text: string } => isObject(c) && c.type === "text" && typeof c.text === "string")
        .map((c) => c.text)
        .join("")
      if (text.length > 0) out.push({ type: "reasoning", text })
    }
  }
  return out
}

/** The SDK's tool call tracker (provider-utils' `StreamingToolCallTracker`), as used here. */
export interface ToolCallTracker {
  processDelta(delta: ToolCallDelta): void
  flush(): void
}

export interface WireUtils {
  /** `JSON.parse` refusing prototype keys (`__proto__`, `constructor.prototype`), as the SDK reads chunks */
  readonly secureJsonParse: (text: string) => unknown
  readonly newTracker: (enqueue: (part: LanguageModelV3StreamPart) => void) => ToolCallTracker
  readonly createParser: typeof import("eventsource-parser").createParser
}

/**
 * The stream parts of one answer's chunks, as the provider's `doStream` transform makes them:
 * text and reasoning under `txt-0` / `reasoning-0` with their starts and ends, tool calls through
 * the tracker (a call's first pieces are held until its name has come), and at the end the calls
 * finished, then `finish` — or an error part when no finish reason came.
 */
export const makeChunkReader = (utils: WireUtils, enqueue: (part: LanguageModelV3StreamPart) => void) => {
  const tracker = utils.newTracker(enqueue)
  const pending = new Map<number, { id: string | null; args: string; extra: unknown }>()
  const forwarded = new Set<number>()
  let rawFinish: string | undefined
  let errored = false
  let usage: ChunkUsage | undefined
  let first = true
  /** the text or reasoning part that is open (at most one: a delta of the other kind ends it) */
  let open: "text" | "reasoning" | undefined
  let refused = false

  const toolCallDelta = (delta: ToolCallDelta) => {
    const index = delta.index
    if (nullish(index) || forwarded.has(index)) {
      tracker.processDelta(delta)
      return
    }
    let held = pending.get(index)
    if (held === undefined) {
      held = { id: delta.id ?? null, args: "", extra: (delta as { extra_content?: unknown }).extra_content ?? null }
      pending.set(index, held)
    } else if (held.id === null && !nullish(delta.id)) held.id = delta.id
    if (!nullish(delta.function.arguments)) held.args += delta.function.arguments
    const name = delta.function.name
    if (!nullish(name)) {
      tracker.processDelta({ index, id: held.id, function: { name, arguments: held.args } })
      pending.delete(index)
      forwarded.add(index)
    }
  }
  const close = () => {
    if (open === "text") enqueue({ type: "text-end", id: "txt-0" })
    else if (open === "reasoning") enqueue({ type: "reasoning-end", id: "reasoning-0" })
    open = undefined
  }
  const reasoningDelta = (delta: string) => {
    if (open !== "reasoning") {
      close()
      enqueue({ type: "reasoning-start", id: "reasoning-0" })
      open = "reasoning"
    }
    enqueue({ type: "reasoning-delta", id: "reasoning-0", delta })
  }
  const textDelta = (delta: string) => {
    if (open !== "text") {
      close()
      enqueue({ type: "text-start", id: "txt-0" })
      open = "text"
    }
    enqueue({ type: "text-delta", id: "txt-0", delta })
  }

  /** One event's data. */
  const chunk = (data: string): void => {
    if (data === "[DONE]") return
    let value: unknown
    try {
      value = utils.secureJsonParse(data)
    } catch (error) {
      errored = true
      enqueue({ type: "error", error: new WireError("invalid-response", `a chunk is not JSON: ${String(error)}`) })
      return
    }
    const problem = chunkProblem(value)
    if (problem !== undefined) {
      errored = true
      enqueue({
        type: "error",
        error: isErrorChunk(value)
          ? schemaError(value.error)
          : new WireError("invalid-response", `a chunk is malformed: ${problem}`)
      })
      return
    }
    const c = value as Chunk
    if ("error" in c) {
      errored = true
      enqueue({ type: "error", error: c.error })
      return
    }
    if (first) {
      first = false
      enqueue({ type: "response-metadata", ...(nullish(c.model) ? {} : { modelId: c.model }) })
    }
    if (!nullish(c.usage)) usage = c.usage
    const choice = c.choices[0]
    if (!nullish(choice?.finish_reason)) rawFinish = choice.finish_reason
    const delta = choice?.delta
    if (nullish(delta)) return
    const reasoning = delta.reasoning_content ?? delta.reasoning
    if (reasoning) reasoningDelta(reasoning)
    for (const part of contentParts(delta.content)) {
      if (part.type === "reasoning") reasoningDelta(part.text)
      else textDelta(part.text)
    }
    if (typeof delta.refusal === "string" && delta.refusal.length > 0) {
      refused = true
      textDelta(delta.refusal)
    }
    if (!nullish(delta.tool_calls) && delta.tool_calls.length > 0) {
      // a tool call ends the reasoning, not the text (as the provider does)
      if (open === "reasoning") close()
      for (const call of delta.tool_calls) toolCallDelta(call)
    }
  }

  /** The answer has ended. */
  const end = (): void => {
    close()
    for (const [index, held] of pending) {
      tracker.processDelta({ index, id: held.id, function: { arguments: held.args } })
    }
    pending.clear()
    tracker.flush()
    if (rawFinish === undefined && !errored) {
      enqueue({ type: "error", error: new WireError("stream-cut", "the stream ended before the step finished") })
      return
    }
    enqueue({
      type: "finish",
      finishReason: { unified: rawFinish === undefined ? "error" : finishReasonOf(rawFinish, refused), raw: rawFinish },
      usage: usageOf(usage ?? undefined)
    })
  }
  return { chunk, end }
}

// -----------------------------------------------------------------------------------------------
// the request
// -----------------------------------------------------------------------------------------------

/** What `read` gives, as a web stream reader's `read`. */
export type PartRead = { readonly done: false; readonly value: LanguageModelV3StreamPart } | { readonly done: true }

/** The answer's parts, read as from a web stream's reader (`AiSdk.readParts` reads both). */
export interface PartReader {
  read(): Promise<PartRead>
  cancel(): Promise<void>
}

/** The longest Server-Sent Event kept while it arrives (a bigger one is an `invalid-response`). */
export const MAX_EVENT_BYTES = 16 * 1024 * 1024

/** An error answer's body is read up to this many bytes (a `ModelError` keeps its first 4,096 characters). */
export const MAX_ERROR_BODY_BYTES = 256 * 1024

/** The reading pauses when this many parts, or parts with this many characters of text, wait to be read. */
const HIGH_WATER_PARTS = 4096
const HIGH_WATER_CHARS = 8 * 1024 * 1024

/** A kept-alive connection idle this long is closed (undici's default keep-alive timeout). */
const KEEP_ALIVE_IDLE_MS = 4_000

/** The text a part carries (what it holds in memory while it waits). */
const partChars = (part: LanguageModelV3StreamPart): number =>
  part.type === "text-delta" || part.type === "reasoning-delta" || part.type === "tool-input-delta"
    ? part.delta.length
    : 0

/**
 * An HTTP answer that is not 2xx: what `AiSdk.toModelError` makes an `http` error of. `body` is
 * undefined when it could not be read (the connection broke while it came).
 */
export class WireHttpError extends Error {
  override readonly name = "WireHttpError"
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string>,
    readonly body: string | undefined
  ) {
    super(message)
  }
}

/**
 * No answer came: the connection failed (refused, reset, a host that does not resolve, TLS, a
 * server that does not speak HTTP). `AiSdk.toModelError` makes it a `network` error; its `cause`
 * is Node's error, whose code tells the kind (`networkKind`).
 */
export class WireConnectionError extends Error {
  override readonly name = "WireConnectionError"
}

/** The request could not be made as configured (a header value Node refuses): a `config` error. */
export class WireConfigError extends Error {
  override readonly name = "WireConfigError"
}

/** The request was aborted (the idle cut, or the stream was stopped) before the answer began. */
export class WireAbortError extends Error {
  override readonly name = "AbortError"
}

/** The message of an error answer, as the provider's error handler makes it: the body's `error.message`, else the status text. */
const errorAnswerMessage = (body: string, statusText: string): string => {
  if (body.trim() === "") return statusText
  try {
    const parsed: unknown = JSON.parse(body)
    if (isErrorChunk(parsed) && isObject(parsed.error) && typeof parsed.error.message === "string") {
      return parsed.error.message
    }
  } catch {}
  return statusText
}

const headersOf = (message: http.IncomingMessage): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(message.headers)) {
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(", ") : value
  }
  return out
}

export interface WireEndpoint {
  /** `<baseURL>/chat/completions` */
  readonly url: URL
  /** lower-case names */
  readonly headers: Readonly<Record<string, string>>
  readonly agent: http.Agent
}

/** Where a model's requests go: the URL, the headers (the key as a bearer token, then config's), an agent that keeps connections. */
export const endpoint = (options: {
  readonly baseURL: string
  readonly apiKey?: string | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
}): WireEndpoint => {
  const url = new URL(`${options.baseURL.replace(/\/$/, "")}/chat/completions`)
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "user-agent": `logbook/${version}`
  }
  if (options.apiKey !== undefined && options.apiKey !== "") headers.authorization = `Bearer ${options.apiKey}`
  for (const [name, value] of Object.entries(options.headers ?? {})) headers[name.toLowerCase()] = value
  // a kept connection idle for 4 s is closed, as undici's fetch closes it: a server or a middlebox
  // may have forgotten it meanwhile (the agent's timeout closes free sockets only, not a stream that stalls)
  const keep = { keepAlive: true, timeout: KEEP_ALIVE_IDLE_MS }
  const agent = url.protocol === "https:" ? new https.Agent(keep) : new http.Agent(keep)
  return { url, headers, agent }
}

/**
 * Posts the body (its parts written one after the other) and resolves with the reader of the answer's parts once a 2xx answer has begun;
 * rejects with a `WireHttpError` for another status (its body read, bounded), the connection's
 * error, or a `WireAbortError` when `signal` aborts first. After that, aborting (or `cancel`)
 * destroys the request: a pending `read` rejects with the abort.
 */
export const post = (
  target: WireEndpoint,
  body: { readonly parts: ReadonlyArray<string | Buffer>; readonly length: number },
  utils: WireUtils,
  signal: AbortSignal
): Promise<PartReader> =>
  new Promise<PartReader>((resolve, reject) => {
    if (signal.aborted) {
      reject(new WireAbortError("the request was aborted"))
      return
    }
    const client = target.url.protocol === "https:" ? https : http
    let request: http.ClientRequest
    try {
      request = client.request(target.url, {
        method: "POST",
        agent: target.agent,
        headers: { ...target.headers, "content-length": body.length }
      })
    } catch (error) {
      // a header value Node refuses (a key or a config header with a line break, a non-Latin-1 character)
      reject(new WireConfigError(`a request header is not valid: ${messageOf(error)}`, { cause: error }))
      return
    }
    let settled = false
    /** what a connection error does once the answer has begun (its body is being read) */
    let afterAnswer: ((error: unknown) => void) | undefined
    const onAbort = () => {
      const error = new WireAbortError("the request was aborted")
      request.destroy(error)
      if (!settled) {
        settled = true
        reject(error)
      }
    }
    signal.addEventListener("abort", onAbort, { once: true })
    request.on("error", (error) => {
      signal.removeEventListener("abort", onAbort)
      if (afterAnswer !== undefined) afterAnswer(error)
      else if (!settled) {
        settled = true
        // no answer: a connection failure (refused, reset, TLS, not HTTP …), whatever Node calls it
        reject(error instanceof WireAbortError ? error : new WireConnectionError(messageOf(error), { cause: error }))
      }
    })
    request.on("response", (response) => {
      const status = response.statusCode ?? 0
      if (status === 204 || status === 205) {
        // fetch gives these no body, and the SDK refuses a response without one
        settled = true
        afterAnswer = () => undefined
        signal.removeEventListener("abort", onAbort)
        response.on("error", () => undefined)
        response.resume()
        reject(new WireError("invalid-response", `HTTP ${status}: the answer has no body`))
        return
      }
      const source = decoded(response)
      source.setEncoding("utf8")
      if (status < 200 || status >= 300) {
        let text = ""
        let cut = false
        source.on("data", (piece: string) => {
          text += text === "" ? withoutBom(piece) : piece
          if (text.length >= MAX_ERROR_BODY_BYTES) {
            text = text.slice(0, MAX_ERROR_BODY_BYTES)
            cut = true
            response.destroy()
            finish(text)
          }
        })
        const finish = (body: string | undefined) => {
          if (settled) return
          settled = true
          signal.removeEventListener("abort", onAbort)
          const message = errorAnswerMessage(body ?? "", response.statusMessage ?? "")
          reject(new WireHttpError(status, message, headersOf(response), body))
        }
        source.on("end", () => finish(text))
        // the body could not be read whole: as the SDK, no body (a cut of our own keeps what came)
        const broken = () => finish(cut ? text : undefined)
        afterAnswer = broken
        source.on("error", broken)
        response.on("aborted", broken)
        return
      }
      settled = true
      const queue = new PartQueue(source, () => request.destroy(new WireAbortError("the stream was cancelled")))
      const chunks = makeChunkReader(utils, queue.push)
      const parser = utils.createParser({
        onEvent: (event) => chunks.chunk(event.data),
        onError: (error) => {
          if (error.type === "max-buffer-size-exceeded") {
            queue.push({
              type: "error",
              error: new WireError("invalid-response", `an event is too large: ${error.message}`)
            })
            request.destroy()
          }
        },
        maxBufferSize: MAX_EVENT_BYTES
      })
      // the tracker throws on a call it cannot take (no name): the answer fails with it, as the SDK's stream errors
      const failWith = (error: unknown) => {
        queue.fail(error)
        request.destroy()
      }
      let first = true
      source.on("data", (piece: string) => {
        try {
          parser.feed(first ? withoutBom(piece) : piece)
          first = false
        } catch (error) {
          failWith(error)
        }
      })
      source.on("end", () => {
        signal.removeEventListener("abort", onAbort)
        try {
          chunks.end()
          queue.close()
        } catch (error) {
          failWith(error)
        }
      })
      // the connection broke after the answer had begun: a cut stream, whether or not a part had come
      const broke = (error: unknown) =>
        queue.fail(
          error instanceof WireAbortError
            ? error
            : new WireError("stream-cut", `the connection broke before the step finished: ${messageOf(error)}`, {
                cause: error
              })
        )
      afterAnswer = broke
      source.on("error", broke)
      response.on("error", broke)
      response.on("aborted", () => broke(Object.assign(new Error("aborted"), { code: "ECONNRESET" })))
      resolve(queue)
    })
    for (const part of body.parts) request.write(part)
    request.end()
  })

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/** A text without the byte order mark it may start with (a `TextDecoder`, which the SDK reads with, drops it). */
const withoutBom = (text: string): string => (text.charCodeAt(0) === 0xfeff ? text.slice(1) : text)

/**
 * The answer's body, decompressed when the server compressed it (we never ask for it, but a
 * config header may, or a server may do it unasked): fetch decodes these, and so do we.
 */
const decoded = (response: http.IncomingMessage): Readable => {
  const encoding = String(response.headers["content-encoding"] ?? "")
    .trim()
    .toLowerCase()
  const decoder =
    encoding === "gzip" || encoding === "x-gzip"
      ? zlib.createGunzip({ flush: zlib.constants.Z_SYNC_FLUSH, finishFlush: zlib.constants.Z_SYNC_FLUSH })
      : encoding === "deflate"
        ? zlib.createInflate({ flush: zlib.constants.Z_SYNC_FLUSH, finishFlush: zlib.constants.Z_SYNC_FLUSH })
        : encoding === "br"
          ? zlib.createBrotliDecompress({
              flush: zlib.constants.BROTLI_OPERATION_FLUSH,
              finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH
            })
          : undefined
  if (decoder === undefined) return response
  response.on("error", (error) => decoder.destroy(error))
  return response.pipe(decoder)
}

/**
 * The parts read and not yet taken, and the `read` that waits for more: one at a time (`readParts`
 * never asks again before a read has settled).
 */
class PartQueue implements PartReader {
  private parts: Array<LanguageModelV3StreamPart> = []
  private head = 0
  /** the text the waiting parts carry */
  private chars = 0
  private waiting: { resolve: (read: PartRead) => void; reject: (error: unknown) => void } | undefined
  private done = false
  private failure: { error: unknown } | undefined
  private paused = false

  constructor(
    private readonly response: Readable,
    private readonly destroy: () => void
  ) {}

  readonly push = (part: LanguageModelV3StreamPart): void => {
    if (this.done || this.failure !== undefined) return
    const waiting = this.waiting
    if (waiting !== undefined) {
      this.waiting = undefined
      waiting.resolve({ done: false, value: part })
      return
    }
    this.parts.push(part)
    this.chars += partChars(part)
    if (!this.paused && (this.parts.length - this.head >= HIGH_WATER_PARTS || this.chars >= HIGH_WATER_CHARS)) {
      this.paused = true
      this.response.pause()
    }
  }

  close(): void {
    if (this.done) return
    this.done = true
    const waiting = this.waiting
    this.waiting = undefined
    waiting?.resolve({ done: true })
  }

  fail(error: unknown): void {
    if (this.done || this.failure !== undefined) return
    this.failure = { error }
    const waiting = this.waiting
    this.waiting = undefined
    waiting?.reject(error)
  }

  read(): Promise<PartRead> {
    if (this.head < this.parts.length) {
      const value = this.parts[this.head]!
      this.head++
      this.chars -= partChars(value)
      if (this.head === this.parts.length) {
        this.parts = []
        this.head = 0
      }
      if (this.paused && this.parts.length - this.head < HIGH_WATER_PARTS / 2 && this.chars < HIGH_WATER_CHARS / 2) {
        this.paused = false
        this.response.resume()
      }
      return Promise.resolve({ done: false, value })
    }
    if (this.failure !== undefined) return Promise.reject(this.failure.error)
    if (this.done) return Promise.resolve({ done: true })
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject }
    })
  }

  cancel(): Promise<void> {
    if (!this.done) {
      this.done = true
      const waiting = this.waiting
      this.waiting = undefined
      waiting?.resolve({ done: true })
      this.destroy()
    }
    return Promise.resolve()
  }
}
