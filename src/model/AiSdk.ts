/**
 * `Model` through the `ai` package (DESIGN §7): `openai-compatible` (any base URL), `openai` and
 * `anthropic`.
 *
 * One `stream` call = one `streamText` step: tools are declared with their JSON Schema and no
 * `execute` (the kernel runs tools), the SDK's own retries are off (`maxRetries: 0`, `Retry` owns
 * retrying), and interrupting the stream aborts the HTTP request. Every `fullStream` part is mapped to
 * a `ModelEvent`; every failure to a `ModelError` whose message, body, headers and cause never contain
 * the API key (request headers are never copied, and the key's value is redacted from every string).
 *
 * The SDK is loaded when it is first needed, not with this module: `languageModel` imports the
 * provider's package, `stream` the `ai` package (`loadSdk`). Only type imports of them are at the
 * top, so the CLI's bundle keeps them in chunks of their own that `logbook --version` and the read
 * commands never load (scripts/build.mjs).
 */
import type {
  APICallError,
  JSONSchema7,
  LanguageModel,
  LanguageModelUsage,
  ModelMessage as SdkMessage,
  SystemModelMessage,
  TextStreamPart,
  ToolSet
} from "ai"
import { Cause, Duration, Effect, Layer, Schema, Stream } from "effect"
import { mergeProviderMetadata } from "../domain/Message.js"
import { endpointOf, networkKind, providerMessage } from "./internal/providerError.js"
import {
  Model,
  type ModelAssistantPart,
  ModelError,
  ModelEvent,
  type ModelMessage,
  type ModelRequest,
  type ModelTool,
  type ModelUsage,
  type ProviderMetadata
} from "./Model.js"
import { type ReasoningSetting, reasoningProviderOptions } from "./Reasoning.js"

/** How to talk to a provider; config's `provider.<id>.type` (ConfigSchema's `ProviderType` annotates this one). */
export const AiSdkProviderType = Schema.Literal("openai-compatible", "openai", "anthropic")
export type AiSdkProviderType = typeof AiSdkProviderType.Type

/** The conventional key variable of a provider type, used when config's `apiKeyEnv` is not set. */
export const defaultApiKeyEnv: Readonly<Record<AiSdkProviderType, string | undefined>> = {
  openai: "OPENAI_API_KEY",
  anthropic: "ANTHROPIC_API_KEY",
  "openai-compatible": undefined
}

export interface AiSdkOptions {
  /** `provider/model`, as in config; the part before the first `/` names the provider */
  readonly name: string
  readonly type: AiSdkProviderType
  /** required for `openai-compatible` (e.g. `http://localhost:11434/v1`); the provider's default otherwise */
  readonly baseURL?: string | undefined
  /** read from the env var named in config by the caller; never logged, never put in an error or event */
  readonly apiKey?: string | undefined
  /** the provider's model id (`gpt-4.1`, `claude-sonnet-4-5`, `qwen3:8b` …) */
  readonly modelId: string
  /** extra request headers */
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** thinking: off, an effort or a token budget (`Reasoning.ts`); unset = the provider's default */
  readonly reasoning?: ReasoningSetting | undefined
  /**
   * cut the stream (a retryable `stream-cut`) when no part arrives for this long, the first one
   * included; default `defaultStreamIdleTimeoutMs`
   */
  readonly streamIdleTimeoutMs?: number | undefined
}

/** A stream with no part for this long is cut (`AiSdkOptions.streamIdleTimeoutMs`). */
export const defaultStreamIdleTimeoutMs = 120_000

/** Response bodies kept in a `ModelError` are cut to this many characters. */
export const maxErrorBodyLength = 4096

// -----------------------------------------------------------------------------------------------
// provider
// -----------------------------------------------------------------------------------------------

const providerName = (name: string): string => name.split("/")[0] || name

// -----------------------------------------------------------------------------------------------
// the SDK, loaded on first use
// -----------------------------------------------------------------------------------------------

/**
 * Imports a package of the SDK; a failure (a broken install) is a `config` error, which `Retry`
 * does not retry. Node's module map keeps a module once it has loaded, so only the first call of
 * each package reads and evaluates it; later calls get the same module at once (as `Catalog.ts`
 * loads its package).
 */
const loadSdk = <A>(specifier: string, load: () => Promise<A>): Effect.Effect<A, ModelError> =>
  Effect.tryPromise({
    try: load,
    catch: (cause) =>
      new ModelError({
        reason: "config",
        message: `cannot load the model SDK (${specifier}): ${errorMessage(cause)}; reinstall logbook`,
        cause: describe(cause, (text) => text)
      })
  })

const loadAi = loadSdk("ai", () => import("ai"))

/** Builds the SDK model, or says why it cannot be built (reason `config`, before the SDK is loaded). */
export const languageModel = (options: AiSdkOptions): Effect.Effect<LanguageModel, ModelError> =>
  Effect.suspend(() => {
    const provider = providerName(options.name)
    const headers = options.headers === undefined ? {} : { headers: { ...options.headers } }
    const baseURL = options.baseURL === undefined ? {} : { baseURL: options.baseURL }
    const missingKey = () =>
      Effect.fail(
        new ModelError({
          reason: "config",
          message: `No API key for provider "${provider}" (${options.type}): set the environment variable named by provider.${provider}.apiKeyEnv in the config.`
        })
      )
    switch (options.type) {
      case "openai-compatible": {
        const url = options.baseURL
        if (url === undefined || url === "") {
          return Effect.fail(
            new ModelError({
              reason: "config",
              message: `Provider "${provider}" is openai-compatible but has no baseURL: set provider.${provider}.baseURL (e.g. http://localhost:11434/v1).`
            })
          )
        }
        return Effect.map(
          loadSdk("@ai-sdk/openai-compatible", () => import("@ai-sdk/openai-compatible")),
          ({ createOpenAICompatible }) =>
            createOpenAICompatible({
              name: provider,
              baseURL: url,
              includeUsage: true,
              ...(options.apiKey === undefined ? {} : { apiKey: options.apiKey }),
              ...headers
            }).chatModel(options.modelId)
        )
      }
      case "openai": {
        // without a key the SDK would fall back to OPENAI_API_KEY; the config names the env var instead
        const { apiKey } = options
        if (apiKey === undefined || apiKey === "") return missingKey()
        return Effect.map(
          loadSdk("@ai-sdk/openai", () => import("@ai-sdk/openai")),
          // the Chat Completions API: our history carries no provider item ids (which the Responses API wants)
          ({ createOpenAI }) => createOpenAI({ name: provider, apiKey, ...baseURL, ...headers }).chat(options.modelId)
        )
      }
      case "anthropic": {
        const { apiKey } = options
        if (apiKey === undefined || apiKey === "") return missingKey()
        return Effect.map(
          loadSdk("@ai-sdk/anthropic", () => import("@ai-sdk/anthropic")),
          ({ createAnthropic }) => createAnthropic({ apiKey, ...baseURL, ...headers }).languageModel(options.modelId)
        )
      }
    }
  })

// -----------------------------------------------------------------------------------------------
// request mapping
// -----------------------------------------------------------------------------------------------

/** Where a request goes: the provider type and the SDK's key for its options and metadata. */
export interface SdkTarget {
  readonly type: AiSdkProviderType
  /** `anthropic`, `openai`, or the openai-compatible provider's id */
  readonly optionsKey: string
}

/** The SDK's key for a provider's options and metadata. */
export const optionsKeyOf = (options: Pick<AiSdkOptions, "name" | "type">): string =>
  options.type === "openai-compatible" ? providerName(options.name) : options.type

const isRecord = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** The metadata the SDK attached to a stream part, when there is any. */
const metadataOf = (providerMetadata: unknown): ProviderMetadata | undefined => {
  if (!isRecord(providerMetadata)) return undefined
  const out: Record<string, Readonly<Record<string, unknown>>> = {}
  for (const [key, value] of Object.entries(providerMetadata)) {
    if (isRecord(value) && Object.keys(value).length > 0) out[key] = value
  }
  return Object.keys(out).length > 0 ? out : undefined
}

type SdkAssistantPart = Exclude<Extract<SdkMessage, { role: "assistant" }>["content"], string>[number]

/**
 * A reasoning part as the target's API takes it back, or nothing:
 * - Anthropic: a thinking block with its `signature`, or a `redacted_thinking` block's data, in its
 *   place (the API refuses a tool-use turn whose thinking is missing or altered); reasoning without
 *   either cannot be sent back and is left out.
 * - openai-compatible: `reasoning_content` of assistant messages that made tool calls (DeepSeek's
 *   thinking mode requires it; Kimi, Qwen and others keep it); other reasoning is not sent.
 * - OpenAI Chat Completions: takes no reasoning back.
 * Only the target's own metadata key is sent (History already keeps other providers' reasoning out).
 */
const toSdkReasoning = (
  part: Extract<ModelAssistantPart, { type: "reasoning" }>,
  target: SdkTarget,
  withToolCalls: boolean
): SdkAssistantPart | undefined => {
  const own = part.metadata?.[target.optionsKey]
  switch (target.type) {
    case "anthropic":
      if (own === undefined || (typeof own.signature !== "string" && typeof own.redactedData !== "string")) {
        return undefined
      }
      return { type: "reasoning", text: part.text, providerOptions: { [target.optionsKey]: { ...own } as never } }
    case "openai-compatible":
      if (!withToolCalls || part.text.trim() === "") return undefined
      return {
        type: "reasoning",
        text: part.text,
        ...(own === undefined ? {} : { providerOptions: { [target.optionsKey]: { ...own } as never } })
      }
    case "openai":
      return undefined
  }
}

const toSdkMessage = (message: ModelMessage, target: SdkTarget | undefined): SdkMessage => {
  switch (message.role) {
    case "user":
      return { role: "user", content: message.content }
    case "assistant": {
      const withToolCalls = message.parts.some((part) => part.type === "tool-call")
      const content: Array<SdkAssistantPart> = []
      for (const part of message.parts) {
        if (part.type === "tool-call") {
          // a call whose input was not JSON still needs an input object, or the provider rejects the history
          content.push({ type: "tool-call", toolCallId: part.callId, toolName: part.tool, input: part.input ?? {} })
        } else if (part.type === "text") {
          content.push({ type: "text", text: part.text })
        } else if (target === undefined) {
          content.push({ type: "reasoning", text: part.text })
        } else {
          const reasoning = toSdkReasoning(part, target, withToolCalls)
          if (reasoning !== undefined) content.push(reasoning)
        }
      }
      return { role: "assistant", content }
    }
    case "tool":
      return {
        role: "tool",
        content: message.results.map((result) => ({
          type: "tool-result" as const,
          toolCallId: result.callId,
          toolName: result.tool,
          output: result.isError
            ? { type: "error-text" as const, value: result.output }
            : { type: "text" as const, value: result.output }
        }))
      }
  }
}

/**
 * Our conversation in the SDK's message shape. With a `target`, reasoning parts become what that
 * provider takes back (see `toSdkReasoning`); without one, every reasoning part is passed as text.
 * An assistant message left with nothing the target takes (only reasoning it cannot take back, e.g.
 * the unsigned thinking of a step a steered message stopped) is left out: Anthropic refuses an
 * empty message. It has no calls, so no tool message follows it.
 */
export const toSdkMessages = (messages: ReadonlyArray<ModelMessage>, target?: SdkTarget): Array<SdkMessage> =>
  messages.flatMap((message) => {
    const sdk = toSdkMessage(message, target)
    return sdk.role === "assistant" && sdk.content.length === 0 ? [] : [sdk]
  })

/** How many of the newest messages get an Anthropic cache breakpoint (with the system prompt's: 3 of the 4 allowed). */
export const CACHED_TAIL = 2

const ephemeral = { anthropic: { cacheControl: { type: "ephemeral" } } } as const

/**
 * The request's prompt for the SDK: `system` (for Anthropic, a system message with a cache
 * breakpoint) and `messages`.
 *
 * Anthropic prompt caching: a breakpoint (`cache_control: ephemeral`) on the system prompt — the
 * stable prefix: tools, then the system prompt, are cached up to it — and on the last
 * `CACHED_TAIL` messages, so each step of a turn reads the previous steps from the cache and writes
 * only what is new. Other providers cache a stable prefix on their own (OpenAI and most
 * openai-compatible servers); the system prompt and the tool schemas do not change between
 * requests of a session (no dates in them), so the prefix is stable.
 */
export const toSdkPrompt = (
  request: Pick<ModelRequest, "system" | "messages">,
  target: SdkTarget
): { readonly system?: string | SystemModelMessage; readonly messages: Array<SdkMessage> } => {
  const messages = toSdkMessages(request.messages, target)
  if (target.type !== "anthropic") {
    return { ...(request.system === undefined ? {} : { system: request.system }), messages }
  }
  for (let i = Math.max(0, messages.length - CACHED_TAIL); i < messages.length; i++) {
    messages[i] = { ...messages[i]!, providerOptions: ephemeral } as SdkMessage
  }
  if (request.system === undefined || request.system === "") return { messages }
  return { system: { role: "system", content: request.system, providerOptions: ephemeral }, messages }
}

/**
 * Tools as the SDK declares them: JSON Schema input, no `execute` (the kernel runs tools).
 * `jsonSchema` is the `ai` package's (loaded by the caller).
 */
export const toSdkTools = (tools: ReadonlyArray<ModelTool>, jsonSchema: typeof import("ai").jsonSchema): ToolSet =>
  Object.fromEntries(
    tools.map((tool) => [
      tool.name,
      { description: tool.description, inputSchema: jsonSchema(tool.inputSchema as JSONSchema7) }
    ])
  )

// -----------------------------------------------------------------------------------------------
// errors
// -----------------------------------------------------------------------------------------------

/** Replaces every occurrence of the secret (the API key) in a string. */
const redactor =
  (secret: string | undefined) =>
  (text: string): string =>
    secret === undefined || secret.length === 0 ? text : text.split(secret).join("[redacted]")

const errorName = (error: unknown): string =>
  error instanceof Error ? error.name : typeof error === "object" && error !== null ? "object" : typeof error

const errorMessage = (error: unknown): string => {
  if (error instanceof Error) return error.message
  if (typeof error === "object" && error !== null) {
    const message = (error as { message?: unknown }).message
    if (typeof message === "string") return message
    try {
      return JSON.stringify(error)
    } catch {
      return String(error)
    }
  }
  return String(error)
}

/** A small, key-free description of a foreign error and its causes (never the raw error: it can hold request data). */
const describe = (error: unknown, redact: (s: string) => string, depth = 0): unknown => {
  if (error === undefined || error === null) return undefined
  const code = typeof error === "object" ? (error as { code?: unknown }).code : undefined
  const cause = error instanceof Error && depth < 3 ? describe(error.cause, redact, depth + 1) : undefined
  return {
    name: errorName(error),
    message: redact(errorMessage(error)),
    ...(typeof code === "string" || typeof code === "number" ? { code: String(code) } : {}),
    ...(cause === undefined ? {} : { cause })
  }
}

const causeChain = (error: unknown): Array<unknown> => {
  const chain: Array<unknown> = []
  let current: unknown = error
  while (current !== undefined && current !== null && chain.length < 5) {
    chain.push(current)
    current = current instanceof Error ? current.cause : undefined
  }
  return chain
}

const rootCause = (error: unknown): unknown => causeChain(error).at(-1)

const networkCodes = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_SOCKET",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "UND_ERR_CLOSED"
])

/** undici's "terminated" / "fetch failed", socket errors and the like */
const isConnectionError = (error: unknown): boolean =>
  causeChain(error).some((e) => {
    const code = typeof e === "object" && e !== null ? (e as { code?: unknown }).code : undefined
    if (typeof code === "string" && networkCodes.has(code)) return true
    return e instanceof TypeError && /^(terminated|fetch failed)$/i.test(e.message)
  })

/**
 * `APICallError.isInstance` of the SDK, without loading it: the SDK marks its errors with a global
 * symbol (`Symbol.for`), which is what its own `isInstance` checks, so that copies of the package agree.
 */
const apiCallErrorMarker = Symbol.for("vercel.ai.error.AI_APICallError")
const isApiCallError = (error: unknown): error is APICallError =>
  typeof error === "object" && error !== null && (error as Record<symbol, unknown>)[apiCallErrorMarker] === true

const isNamed = (error: unknown, name: string): boolean =>
  typeof error === "object" && error !== null && (error as { name?: unknown }).name === name

const lowerCaseHeaders = (
  headers: Record<string, string> | undefined,
  redact: (s: string) => string
): Record<string, string> | undefined =>
  headers === undefined
    ? undefined
    : Object.fromEntries(Object.entries(headers).map(([key, value]) => [key.toLowerCase(), redact(String(value))]))

const cut = (text: string): string =>
  text.length <= maxErrorBodyLength ? text : `${text.slice(0, maxErrorBodyLength)}… (${text.length} characters)`

/**
 * Maps anything the SDK throws or emits as an `error` part to a `ModelError`. `started`: the response
 * had begun (a connection error then cut the stream rather than preventing the request).
 */
export const toModelError = (
  error: unknown,
  context: {
    readonly model: string
    readonly apiKey?: string | undefined
    readonly started: boolean
    /** the provider's type and base URL: where a connection failure names the host and port */
    readonly type?: AiSdkProviderType | undefined
    readonly baseURL?: string | undefined
  }
): ModelError => {
  const redact = redactor(context.apiKey)
  const cause = describe(error, redact)
  const provider = providerName(context.model)
  const make = (
    reason: ModelError["reason"],
    message: string,
    extra: {
      status?: number
      headers?: Record<string, string>
      body?: string
      providerMessage?: string | undefined
    } = {}
  ) => {
    const { providerMessage: said, ...rest } = extra
    return new ModelError({
      reason,
      message: redact(`${context.model}: ${message}`),
      ...rest,
      ...(said === undefined ? {} : { providerMessage: said }),
      ...(reason === "network" ? connection(error, context) : {}),
      provider,
      cause
    })
  }

  if (isApiCallError(error)) {
    if (error.statusCode !== undefined && error.statusCode >= 200 && error.statusCode < 300) {
      // the SDK wraps a failure while reading a successful response ("Failed to process successful response")
      return isConnectionError(error)
        ? make("stream-cut", `the connection broke before the step finished: ${errorMessage(rootCause(error))}`)
        : make("invalid-response", `the response could not be read: ${errorMessage(rootCause(error))}`)
    }
    if (error.statusCode !== undefined) {
      const headers = lowerCaseHeaders(error.responseHeaders, redact)
      return make("http", `HTTP ${error.statusCode}: ${error.message}`, {
        status: error.statusCode,
        ...(headers === undefined ? {} : { headers }),
        ...(error.responseBody === undefined ? {} : { body: cut(redact(error.responseBody)) }),
        providerMessage: providerMessage(error.responseBody ?? "", redact)
      })
    }
    return make(context.started ? "stream-cut" : "network", error.message)
  }
  if (isNamed(error, "AbortError")) return make("stream-cut", "the request was aborted")
  if (isNamed(error, "AI_InvalidResponseDataError") && /ended without a finish reason/i.test(errorMessage(error))) {
    return make("stream-cut", "the stream ended before the step finished")
  }
  if (
    isNamed(error, "AI_InvalidResponseDataError") ||
    isNamed(error, "AI_JSONParseError") ||
    isNamed(error, "AI_TypeValidationError") ||
    isNamed(error, "AI_EmptyResponseBodyError")
  ) {
    return make("invalid-response", `the provider sent something that cannot be understood: ${errorMessage(error)}`)
  }
  if (isConnectionError(error)) {
    return context.started
      ? make("stream-cut", `the connection broke before the step finished: ${errorMessage(error)}`)
      : make("network", `cannot connect: ${errorMessage(error)}`)
  }
  if (
    isNamed(error, "AI_LoadAPIKeyError") ||
    isNamed(error, "AI_InvalidPromptError") ||
    isNamed(error, "AI_InvalidArgumentError") ||
    isNamed(error, "AI_UnsupportedFunctionalityError") ||
    isNamed(error, "AI_NoSuchModelError")
  ) {
    return make("config", `the request could not be made: ${errorMessage(error)}`)
  }
  if (!(error instanceof Error) && typeof error === "object" && error !== null) {
    // an error object the provider sent inside the stream (OpenRouter `{"error": …}`, Anthropic `event: error`):
    // the step did not finish; the body keeps what the provider said (e.g. `overloaded_error`)
    let body: string
    try {
      body = JSON.stringify(error)
    } catch {
      body = String(error)
    }
    // a status it carries (OpenRouter `code: 401`, Anthropic `type: "authentication_error"`) makes it an
    // HTTP error, so `Retry` treats a bad key or a bad request as final, not as a cut stream
    const status = inStreamStatus(error)
    const said = providerMessage(error, redact)
    return status === undefined
      ? make("stream-cut", `the provider reported an error mid-stream: ${errorMessage(error)}`, {
          body: cut(redact(body)),
          providerMessage: said
        })
      : make("http", `the provider reported error ${status} mid-stream: ${errorMessage(error)}`, {
          status,
          body: cut(redact(body)),
          providerMessage: said
        })
  }
  return make("invalid-response", `unexpected error from the model SDK: ${errorName(error)}: ${errorMessage(error)}`)
}

/** For a `network` error: its kind when known, and the host and port of the provider's base URL. */
const connection = (
  error: unknown,
  context: { readonly type?: AiSdkProviderType | undefined; readonly baseURL?: string | undefined }
): { network?: "dns" | "refused" | "blocked-port"; host?: string; port?: number } => {
  const kind = networkKind(error)
  const endpoint = context.type === undefined ? undefined : endpointOf(context.baseURL, context.type)
  return {
    ...(kind === undefined ? {} : { network: kind }),
    ...(endpoint === undefined ? {} : { host: endpoint.host, port: endpoint.port })
  }
}

const anthropicStatus: Readonly<Record<string, number>> = {
  invalid_request_error: 400,
  authentication_error: 401,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  overloaded_error: 529
}

/** The HTTP status an error object sent inside a stream stands for, if it says. */
export const inStreamStatus = (error: object): number | undefined => {
  const candidates: Array<unknown> = [error]
  const inner = (error as { error?: unknown }).error
  if (typeof inner === "object" && inner !== null) candidates.push(inner)
  for (const c of candidates) {
    const { code, status, type } = c as { code?: unknown; status?: unknown; type?: unknown }
    for (const n of [status, code]) {
      const value = typeof n === "string" && /^\d{3}$/.test(n) ? Number(n) : n
      if (typeof value === "number" && Number.isInteger(value) && value >= 400 && value < 600) return value
    }
    if (typeof type === "string" && anthropicStatus[type] !== undefined) return anthropicStatus[type]
  }
  return undefined
}

// -----------------------------------------------------------------------------------------------
// event mapping
// -----------------------------------------------------------------------------------------------

const count = (n: number | undefined): number => (n === undefined || !Number.isFinite(n) ? 0 : n)

export const toModelUsage = (usage: LanguageModelUsage | undefined): ModelUsage => ({
  input: count(usage?.inputTokens),
  output: count(usage?.outputTokens),
  reasoning: count(usage?.outputTokenDetails?.reasoningTokens ?? usage?.reasoningTokens),
  cacheRead: count(usage?.inputTokenDetails?.cacheReadTokens ?? usage?.cachedInputTokens),
  cacheWrite: count(usage?.inputTokenDetails?.cacheWriteTokens)
})

const parseJson = (text: string): { readonly ok: true; readonly value: unknown } | { readonly ok: false } => {
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch {
    return { ok: false }
  }
}

/** Per-request state of the part → event mapping. */
interface MapState {
  started: boolean
  finished: boolean
  readonly inputText: Map<string, string>
}

type Mapped =
  | { readonly _tag: "events"; readonly events: ReadonlyArray<ModelEvent> }
  | { readonly _tag: "error"; readonly error: unknown }

const events = (...list: ReadonlyArray<ModelEvent>): Mapped => ({ _tag: "events", events: list })
const none: Mapped = events()

/** One `fullStream` part → events (or the error it carries). */
const mapPart = (state: MapState, part: TextStreamPart<ToolSet>): Mapped => {
  switch (part.type) {
    case "start-step":
      state.started = true
      return none
    case "text-delta":
      return part.text.length === 0 ? none : events(ModelEvent.TextDelta({ id: part.id, delta: part.text }))
    case "reasoning-start":
    case "reasoning-end": {
      // Anthropic's redacted_thinking comes as metadata on the start; other providers put item ids here
      const metadata = metadataOf(part.providerMetadata)
      return metadata === undefined ? none : events(ModelEvent.ReasoningDelta({ id: part.id, delta: "", metadata }))
    }
    case "reasoning-delta": {
      // Anthropic's signature comes as an empty delta with metadata, at the end of its thinking block
      const metadata = metadataOf(part.providerMetadata)
      if (part.text.length === 0 && metadata === undefined) return none
      return events(
        ModelEvent.ReasoningDelta({
          id: part.id,
          delta: part.text,
          ...(metadata === undefined ? {} : { metadata })
        })
      )
    }
    case "tool-input-start":
      if (part.providerExecuted === true) return none
      state.inputText.set(part.id, "")
      return events(ModelEvent.ToolInputStart({ callId: part.id, tool: part.toolName }))
    case "tool-input-delta": {
      const sofar = state.inputText.get(part.id)
      if (sofar === undefined) return none
      state.inputText.set(part.id, sofar + part.delta)
      return events(ModelEvent.ToolInputDelta({ callId: part.id, delta: part.delta }))
    }
    case "tool-call": {
      if (part.providerExecuted === true) return none
      const streamed = state.inputText.get(part.toolCallId)
      const raw: unknown = part.input
      const inputText =
        streamed !== undefined && streamed.length > 0
          ? streamed
          : part.invalid === true && typeof raw === "string"
            ? raw
            : (JSON.stringify(raw ?? {}) ?? "")
      let input: unknown = raw
      if (part.invalid === true) {
        // the SDK could not parse (or place) the call; it keeps the raw text as `input` when it is not JSON
        const parsed = inputText.trim() === "" ? { ok: true as const, value: {} } : parseJson(inputText)
        input = parsed.ok ? parsed.value : undefined
      }
      return events(ModelEvent.ToolCall({ callId: part.toolCallId, tool: part.toolName, input, inputText }))
    }
    case "finish-step":
      state.finished = true
      return events(
        ModelEvent.Finish({
          finishReason: part.finishReason,
          usage: toModelUsage(part.usage),
          ...(part.response?.modelId ? { responseModel: part.response.modelId } : {})
        })
      )
    case "error":
      return { _tag: "error", error: part.error }
    case "abort":
      return { _tag: "error", error: Object.assign(new Error("aborted"), { name: "AbortError" }) }
    // `tool-error` follows an invalid `tool-call` (no tool has `execute`, so nothing else produces it);
    // the ToolCall event above already carries what the kernel needs.
    default:
      return none
  }
}

// -----------------------------------------------------------------------------------------------
// the service
// -----------------------------------------------------------------------------------------------

const seconds = (ms: number): string => (ms < 1000 ? `${ms}ms` : `${Number((ms / 1000).toFixed(1))}s`)

/** The stream sent nothing for `idleMs`: cut, like a broken stream (`stream-cut`, retried). */
const idleError = (options: AiSdkOptions, idleMs: number): ModelError =>
  new ModelError({
    reason: "stream-cut",
    message: `${options.name}: no data from the provider for ${seconds(idleMs)} (provider.${providerName(options.name)}.streamIdleTimeoutMs)`,
    provider: providerName(options.name)
  })

export const makeAiSdkModel = (options: AiSdkOptions): Model["Type"] => {
  const target: SdkTarget = { type: options.type, optionsKey: optionsKeyOf(options) }
  const reasoningOptions = reasoningProviderOptions(options.type, target.optionsKey, options.reasoning)
  const context = (state: MapState) => ({
    model: options.name,
    apiKey: options.apiKey,
    started: state.started,
    type: options.type,
    baseURL: options.baseURL
  })
  const idleMs = options.streamIdleTimeoutMs ?? defaultStreamIdleTimeoutMs
  const stream = (request: ModelRequest): Stream.Stream<ModelEvent, ModelError> =>
    Stream.unwrapScoped(
      Effect.gen(function* () {
        const model = yield* languageModel(options)
        const { jsonSchema, streamText } = yield* loadAi
        const state: MapState = { started: false, finished: false, inputText: new Map() }
        const controller = yield* Effect.acquireRelease(
          Effect.sync(() => new AbortController()),
          (controller) => Effect.sync(() => controller.abort())
        )
        const prompt = toSdkPrompt(request, target)
        // per provider key, as metadata merges
        const providerOptions = mergeProviderMetadata(
          reasoningOptions,
          // OpenAI routes its automatic prompt cache by this key: one conversation, one key
          options.type === "openai" && request.cacheKey !== undefined
            ? { [target.optionsKey]: { promptCacheKey: request.cacheKey } }
            : undefined
        )
        const result = yield* Effect.try({
          try: () =>
            streamText({
              model,
              ...prompt,
              ...(providerOptions === undefined ? {} : { providerOptions: providerOptions as never }),
              ...(request.tools.length === 0 ? {} : { tools: toSdkTools(request.tools, jsonSchema) }),
              ...(request.maxOutputTokens === undefined ? {} : { maxOutputTokens: request.maxOutputTokens }),
              maxRetries: 0,
              abortSignal: controller.signal,
              // errors reach us as `error` parts; the default handler would print them
              onError: () => {}
            }),
          catch: (error) => toModelError(error, context(state))
        })
        // one part at a time: the events of earlier parts go out before an `error` part fails the stream
        const mapped = Stream.fromAsyncIterable(result.fullStream, (error) => toModelError(error, context(state))).pipe(
          // a stream that stalls is cut like a broken one (and retried): the wait for each part, the first included
          Stream.timeoutFailCause(() => Cause.fail(idleError(options, idleMs)), Duration.millis(idleMs)),
          Stream.mapEffect((part) => {
            const m = mapPart(state, part)
            return m._tag === "error" ? Effect.fail(toModelError(m.error, context(state))) : Effect.succeed(m.events)
          }),
          Stream.flattenIterables
        )
        const ended = Stream.suspend(() =>
          state.finished
            ? Stream.empty
            : Stream.fail(
                new ModelError({
                  reason: "stream-cut",
                  message: `${options.name}: the stream ended before the step finished`
                })
              )
        )
        return Stream.concat(mapped, ended)
      })
    )
  return { name: options.name, provider: options.type, modelId: options.modelId, stream }
}

/** `Model` from a provider through the `ai` package. */
export const layerAiSdk = (options: AiSdkOptions): Layer.Layer<Model> => Layer.succeed(Model, makeAiSdkModel(options))
