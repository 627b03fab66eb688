/**
 * `Model` through the AI SDK's provider packages (`@ai-sdk/*`, DESIGN §7): `openai-compatible`
 * (any base URL), `openai` and `anthropic`.
 *
 * One `stream` call = one call of the provider's `LanguageModelV3.doStream` (the provider interface
 * `streamText` itself calls, one step of it): our history becomes the provider's prompt directly,
 * without the SDK's re-validation of the whole prompt on every step (`toSdkMessages`); tools are
 * declared with their JSON Schema (the kernel runs them); nothing retries below `Retry`; and
 * interrupting the stream aborts the HTTP request. Every part of the provider's stream is mapped to
 * a `ModelEvent`; every failure to a `ModelError` whose message, body, headers and cause never contain
 * the API key (request headers are never copied, and the key's value is redacted from every string).
 * test/model/wire.test.ts pins the bytes sent and the events read to what `streamText` sent and read.
 *
 * openai-compatible requests are made by OpenAiCompatibleWire.ts instead of the provider's package:
 * the same body and the same stream parts, without the SDK's pipeline; the parts
 * are read and mapped here as the SDK's are (`viaSdk` sends them through the package, to compare).
 *
 * The provider's package is loaded when it is first needed, not with this module (`languageModel`,
 * `loadSdk`); only type imports are at the top, so the CLI's bundle keeps it in a chunk of its own
 * that `logbook --version` and the read commands never load (scripts/build.mjs). The `ai` package
 * itself is not loaded at all.
 */
import type {
  APICallError,
  JSONSchema7,
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3FunctionTool,
  LanguageModelV3Message,
  LanguageModelV3Prompt,
  LanguageModelV3StreamPart,
  LanguageModelV3Usage,
  SharedV3ProviderOptions
} from "@ai-sdk/provider"
import { Chunk, Duration, Effect, Layer, Option, Schema, type Scope, type Stream } from "effect"
import { mergeProviderMetadata } from "../domain/Message.js"
import { fromPull } from "../stream/internal/pull.js"
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
import type { PartReader, WireError, WireHttpError } from "./OpenAiCompatibleWire.js"
import { type ReasoningSetting, reasoningGoesBack, reasoningProviderOptions } from "./Reasoning.js"

/** How to talk to a provider; config's `provider.<id>.type` (ConfigSchema's `ProviderType` annotates this one). */
export const AiSdkProviderType = Schema.Literal("openai-compatible", "openai", "anthropic")
export type AiSdkProviderType = typeof AiSdkProviderType.Type

/** The conventional key variable of a provider type, used when config's `apiKeyEnv` is not set. */
export const defaultApiKeyEnv: Readonly<Record<AiSdkProviderType, string | undefined>> = {
  openai: "OPENAI_API_KEY",
  anthropic: "ANTHROPIC_API_KEY",
  "openai-compatible": undefined
}

/**
 * The output limit a request gets when neither it nor the config names one (docs/models.md,
 * "maxOutputTokens"): sent as the request's `max_tokens`, so no step is unbounded at the provider.
 * Per API, the most that every current model of it accepts: Anthropic's SDK lowers a value above an
 * older model's maximum; OpenAI's gpt-4o takes at most 16,384; DeepSeek's deepseek-chat (and
 * other hosted servers' smaller models) 8,192.
 */
export const defaultMaxOutputTokens: Readonly<Record<AiSdkProviderType, number>> = {
  anthropic: 32_000,
  openai: 16_384,
  "openai-compatible": 8_192
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
  /**
   * openai-compatible only: requests go through the SDK's provider package instead of our own
   * client (OpenAiCompatibleWire.ts), which sends the same body and reads the same events
   * (test/model/wire.test.ts). For comparing the two (tests, benchmarks); config does not set it.
   */
  readonly viaSdk?: boolean | undefined
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

/** Builds the SDK model, or says why it cannot be built (reason `config`, before the SDK is loaded). */
export const languageModel = (options: AiSdkOptions): Effect.Effect<LanguageModelV3, ModelError> =>
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

type SdkMessage = LanguageModelV3Message
type SdkAssistantPart = Extract<SdkMessage, { role: "assistant" }>["content"][number]

/**
 * A reasoning part as the target's API takes it back, or nothing:
 * - Anthropic: a thinking block with its `signature`, or a `redacted_thinking` block's data, in its
 *   place (the API refuses a tool-use turn whose thinking is missing or altered); reasoning without
 *   either cannot be sent back and is left out.
 * - openai-compatible: `reasoning_content` of the assistant messages of a turn that made tool calls
 *   (`reasoningGoesBack`: DeepSeek's thinking mode requires it; Kimi, Qwen and others keep it); other
 *   reasoning is not sent.
 * - OpenAI Chat Completions: takes no reasoning back.
 * Only the target's own metadata key is sent (History already keeps other providers' reasoning out).
 */
const toSdkReasoning = (
  part: Extract<ModelAssistantPart, { type: "reasoning" }>,
  target: SdkTarget,
  withReasoning: boolean
): SdkAssistantPart | undefined => {
  const own = part.metadata?.[target.optionsKey]
  switch (target.type) {
    case "anthropic":
      if (own === undefined || (typeof own.signature !== "string" && typeof own.redactedData !== "string")) {
        return undefined
      }
      return { type: "reasoning", text: part.text, providerOptions: { [target.optionsKey]: { ...own } as never } }
    case "openai-compatible":
      if (!withReasoning || part.text.trim() === "") return undefined
      return {
        type: "reasoning",
        text: part.text,
        ...(own === undefined ? {} : { providerOptions: { [target.optionsKey]: { ...own } as never } })
      }
    case "openai":
      return undefined
  }
}

/** An assistant message's parts the target takes (an empty text part is never sent, as the SDK drops it). */
const toSdkAssistantParts = (
  parts: ReadonlyArray<ModelAssistantPart>,
  target: SdkTarget | undefined,
  withReasoning: boolean
): Array<SdkAssistantPart> => {
  const content: Array<SdkAssistantPart> = []
  for (const part of parts) {
    if (part.type === "tool-call") {
      // a call whose input was not JSON still needs an input object, or the provider rejects the history
      content.push({ type: "tool-call", toolCallId: part.callId, toolName: part.tool, input: part.input ?? {} })
    } else if (part.type === "text") {
      if (part.text !== "") content.push({ type: "text", text: part.text })
    } else if (target === undefined) {
      content.push({ type: "reasoning", text: part.text })
    } else {
      const reasoning = toSdkReasoning(part, target, withReasoning)
      if (reasoning !== undefined) content.push(reasoning)
    }
  }
  return content
}

/**
 * Our conversation as the provider interface takes it (`LanguageModelV3Prompt`, what `streamText`
 * makes of a prompt before it calls the provider). With a `target`, reasoning parts become what that
 * provider takes back (see `toSdkReasoning`); without one, every reasoning part is passed as text.
 * An assistant message left with nothing the target takes (only reasoning it cannot take back, e.g.
 * the unsigned thinking of a step a steered message stopped) is left out: Anthropic refuses an
 * empty message. It has no calls, so no tool message follows it. Tool messages in a row become one,
 * as the SDK joins them.
 *
 * Nothing here is validated again: the history is ours, built from the log by our own Schemas. The
 * SDK's `streamText` re-validates the whole prompt with zod on every call (its cost grew with the
 * session); calling the provider directly skips that and changes no byte on the wire
 * (test/model/wire.test.ts).
 */
export const toSdkMessages = (messages: ReadonlyArray<ModelMessage>, target?: SdkTarget): Array<SdkMessage> => {
  const out: Array<SdkMessage> = []
  for (let i = 0; i < messages.length; i++) {
    const sdk = sdkMessageOf(messages[i]!, messages[i - 1], target)
    if (sdk === undefined) continue
    const last = out.at(-1)
    // a new array: the remembered messages are shared by later requests
    if (sdk.role === "tool" && last?.role === "tool")
      out[out.length - 1] = { role: "tool", content: [...last.content, ...sdk.content] }
    else out.push(sdk)
  }
  return out
}

/**
 * What a history message became for a target, remembered by the message: the history hands back
 * the same message objects for what did not change (session/History.ts), so a request converts only
 * its new messages, not the session's (at step 1,000 of a session, 2,000 messages a request).
 */
const sdkMessages = new WeakMap<
  ModelMessage,
  {
    readonly target: SdkTarget | undefined
    readonly withReasoning: boolean
    readonly sdk: SdkMessage | undefined
  }
>()

const sdkMessageOf = (
  message: ModelMessage,
  previous: ModelMessage | undefined,
  target: SdkTarget | undefined
): SdkMessage | undefined => {
  const withReasoning = reasoningGoesBack(message, previous)
  const known = sdkMessages.get(message)
  if (known !== undefined && known.target === target && known.withReasoning === withReasoning) return known.sdk
  const sdk = toSdkMessage(message, target, withReasoning)
  sdkMessages.set(message, { target, withReasoning, sdk })
  return sdk
}

/** One history message for the provider; none for an assistant message left with nothing the target takes. */
const toSdkMessage = (
  message: ModelMessage,
  target: SdkTarget | undefined,
  withReasoning: boolean
): SdkMessage | undefined => {
  switch (message.role) {
    case "user":
      return { role: "user", content: [{ type: "text", text: message.content }] }
    case "assistant": {
      const content = toSdkAssistantParts(message.parts, target, withReasoning)
      return content.length > 0 ? { role: "assistant", content } : undefined
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

/** How many of the newest messages get an Anthropic cache breakpoint (with the system prompt's: 3 of the 4 allowed). */
export const CACHED_TAIL = 2

const ephemeral = { anthropic: { cacheControl: { type: "ephemeral" } } } as const

/**
 * The request's prompt for the provider: the system prompt (for Anthropic, with a cache breakpoint)
 * and the messages.
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
): LanguageModelV3Prompt => {
  const messages = toSdkMessages(request.messages, target)
  if (target.type !== "anthropic") {
    return request.system === undefined ? messages : [{ role: "system", content: request.system }, ...messages]
  }
  for (let i = Math.max(0, messages.length - CACHED_TAIL); i < messages.length; i++) {
    messages[i] = { ...messages[i]!, providerOptions: ephemeral }
  }
  if (request.system === undefined || request.system === "") return messages
  return [{ role: "system", content: request.system, providerOptions: ephemeral }, ...messages]
}

/** Tools as the provider declares them: JSON Schema input, no `execute` (the kernel runs tools). */
export const toSdkTools = (tools: ReadonlyArray<ModelTool>): Array<LanguageModelV3FunctionTool> =>
  tools.map((tool) => ({
    type: "function",
    name: tool.name,
    description: tool.description,
    inputSchema: tool.inputSchema as JSONSchema7
  }))

/** The provider call of a request: the prompt, the tools, the settings and the provider options. */
export const toCallOptions = (
  request: ModelRequest,
  target: SdkTarget,
  providerOptions: ProviderMetadata | undefined,
  abortSignal: AbortSignal
): LanguageModelV3CallOptions => ({
  prompt: toSdkPrompt(request, target),
  ...(request.maxOutputTokens === undefined ? {} : { maxOutputTokens: request.maxOutputTokens }),
  ...(request.tools.length === 0 ? {} : { tools: toSdkTools(request.tools), toolChoice: { type: "auto" } }),
  ...(providerOptions === undefined ? {} : { providerOptions: providerOptions as SharedV3ProviderOptions }),
  abortSignal,
  includeRawChunks: false
})

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

  if (isNamed(error, "WireHttpError")) {
    // an error answer to our own openai-compatible request (OpenAiCompatibleWire.ts)
    const answer = error as WireHttpError
    const headers = lowerCaseHeaders(answer.headers, redact)
    return make("http", `HTTP ${answer.status}: ${answer.message}`, {
      status: answer.status,
      ...(headers === undefined ? {} : { headers }),
      ...(answer.body === undefined
        ? {}
        : { body: cut(redact(answer.body)), providerMessage: providerMessage(answer.body, redact) })
    })
  }
  if (isNamed(error, "WireConnectionError")) {
    // no answer to our own request: what Node said is the cause, whose code gives the kind
    return make("network", `cannot connect: ${errorMessage(error)}`)
  }
  if (isNamed(error, "WireConfigError")) return make("config", `the request could not be made: ${errorMessage(error)}`)
  if (isNamed(error, "WireError")) {
    const wire = error as WireError
    return wire.reason === "stream-cut"
      ? make("stream-cut", wire.message)
      : make("invalid-response", `the provider sent something that cannot be understood: ${wire.message}`)
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

export const toModelUsage = (usage: LanguageModelV3Usage | undefined): ModelUsage => ({
  input: count(usage?.inputTokens.total),
  output: count(usage?.outputTokens.total),
  reasoning: count(usage?.outputTokens.reasoning),
  cacheRead: count(usage?.inputTokens.cacheRead),
  cacheWrite: count(usage?.inputTokens.cacheWrite)
})

const parseJson = (text: string): { readonly ok: true; readonly value: unknown } | { readonly ok: false } => {
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch {
    return { ok: false }
  }
}

/**
 * Per-request state of the part → event mapping. Text and reasoning part ids are made unique within
 * the step, as `streamText` makes them: a provider that starts a second part under an id it used
 * before gets `<id>-<n>` for it.
 */
interface MapState {
  /** the response had begun (its first part after `stream-start`) */
  started: boolean
  /** the provider's stream was read to its end: the response is complete, nothing is left to stop */
  ended: boolean
  /** the `finish` part, turned into the step's `Finish` event when the stream ends */
  finish: ModelEvent | undefined
  responseModel: string | undefined
  readonly inputText: Map<string, string>
  readonly partIds: Map<string, string>
  readonly usedIds: Set<string>
}

const newState = (): MapState => ({
  started: false,
  ended: false,
  finish: undefined,
  responseModel: undefined,
  inputText: new Map(),
  partIds: new Map(),
  usedIds: new Set()
})

/** The id of a text or reasoning part that starts now: the provider's, unless this step used it already. */
const startPart = (state: MapState, kind: "text" | "reasoning", id: string): string => {
  let unique = id
  for (let n = 1; state.usedIds.has(`${kind}:${unique}`); n++) unique = `${id}-${n}`
  state.usedIds.add(`${kind}:${unique}`)
  state.partIds.set(`${kind}:${id}`, unique)
  return unique
}

const partId = (state: MapState, kind: "text" | "reasoning", id: string): string =>
  state.partIds.get(`${kind}:${id}`) ?? id

type Mapped =
  | { readonly _tag: "events"; readonly events: ReadonlyArray<ModelEvent> }
  | { readonly _tag: "error"; readonly error: unknown }

const events = (...list: ReadonlyArray<ModelEvent>): Mapped => ({ _tag: "events", events: list })
const none: Mapped = events()

/** A reasoning part's metadata as a `ReasoningDelta` of its own, when there is any. */
const reasoningMetadata = (id: string, providerMetadata: unknown): Mapped => {
  // Anthropic's redacted_thinking comes as metadata on the start; other providers put item ids here
  const metadata = metadataOf(providerMetadata)
  return metadata === undefined ? none : events(ModelEvent.ReasoningDelta({ id, delta: "", metadata }))
}

/**
 * A call as the kernel takes it. The provider sends the whole input text in the `tool-call` part;
 * the text streamed before it is what the log keeps when there was any. Input that is empty is `{}`
 * (a call without arguments); input that is not JSON is `undefined`, with the text kept, and the
 * kernel answers the model with a tool error.
 */
const toolCall = (state: MapState, part: Extract<LanguageModelV3StreamPart, { type: "tool-call" }>): ModelEvent => {
  const streamed = state.inputText.get(part.toolCallId)
  const inputText = streamed !== undefined && streamed.length > 0 ? streamed : part.input
  const parsed = inputText.trim() === "" ? { ok: true as const, value: {} } : parseJson(inputText)
  return ModelEvent.ToolCall({
    callId: part.toolCallId,
    tool: part.toolName,
    input: parsed.ok ? parsed.value : undefined,
    inputText
  })
}

/** One part of the provider's stream → events (or the error it carries). */
const mapPart = (state: MapState, part: LanguageModelV3StreamPart, modelId: string): Mapped => {
  if (part.type === "stream-start") return none
  state.started = true
  switch (part.type) {
    case "text-start":
      startPart(state, "text", part.id)
      return none
    case "text-delta":
      return part.delta.length === 0
        ? none
        : events(ModelEvent.TextDelta({ id: partId(state, "text", part.id), delta: part.delta }))
    case "reasoning-start":
      return reasoningMetadata(startPart(state, "reasoning", part.id), part.providerMetadata)
    case "reasoning-end":
      return reasoningMetadata(partId(state, "reasoning", part.id), part.providerMetadata)
    case "reasoning-delta": {
      // Anthropic's signature comes as an empty delta with metadata, at the end of its thinking block
      const metadata = metadataOf(part.providerMetadata)
      if (part.delta.length === 0 && metadata === undefined) return none
      return events(
        ModelEvent.ReasoningDelta({
          id: partId(state, "reasoning", part.id),
          delta: part.delta,
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
    case "tool-call":
      return part.providerExecuted === true ? none : events(toolCall(state, part))
    case "response-metadata":
      if (part.modelId !== undefined) state.responseModel = part.modelId
      return none
    case "finish": {
      // the step's Finish goes out when the stream has ended, after everything the provider sent
      const responseModel = state.responseModel ?? modelId
      state.finish = ModelEvent.Finish({
        finishReason: part.finishReason.unified,
        usage: toModelUsage(part.usage),
        ...(responseModel ? { responseModel } : {})
      })
      return none
    }
    case "error":
      return { _tag: "error", error: part.error }
    // the end of a text part or of a call's input, raw chunks (never asked for), files, sources,
    // results of provider-executed tools, approval requests: nothing the kernel takes
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

/**
 * The idle cut of one request: a stream that stalls is cut like a broken one (and retried). One
 * watchdog fiber sleeps until the deadline the latest part set (`touch`) — the wait for the
 * response (connecting, the headers) and for its first part included — and, when it passes, marks
 * the request idle and calls `cut`, which aborts the request and cancels the reader: what waits
 * (the provider's `doStream`, a read) then ends, and fails with the idle error. The watchdog runs on
 * the Effect clock, so a test moves it with `TestClock`; it is interrupted when the scope closes.
 */
interface IdleWatch {
  /** a part came: the deadline moves */
  readonly touch: () => void
  /** the deadline passed */
  readonly idle: () => boolean
}

const watchIdle = (idleMs: number, cut: () => void): Effect.Effect<IdleWatch, never, Scope.Scope> =>
  Effect.gen(function* () {
    const clock = yield* Effect.clock
    let last = clock.unsafeCurrentTimeMillis()
    let idle = false
    yield* Effect.forkScoped(
      Effect.gen(function* () {
        while (true) {
          const left = last + idleMs - clock.unsafeCurrentTimeMillis()
          if (left <= 0) break
          yield* Effect.sleep(Duration.millis(left))
        }
        idle = true
        cut()
      })
    )
    return {
      touch: () => {
        last = clock.unsafeCurrentTimeMillis()
      },
      idle: () => idle
    }
  })

/** `readyOrLater`'s answer when the read waits for more of the response */
const LATER: unique symbol = Symbol("later")

/**
 * `read`'s result if it comes without waiting for more of the response — from what the provider's
 * stream has in hand: its transforms run in microtasks, all of which run before `setImmediate`'s
 * callback — else `LATER` (and `read` is still pending).
 */
const readyOrLater = <A>(read: Promise<A>): Promise<A | typeof LATER> =>
  Promise.race([read, new Promise<typeof LATER>((resolve) => setImmediate(resolve, LATER))])

/** The most events one pull gathers (bounds a batch when a fast server sends a long answer at once). */
const MAX_PULL_EVENTS = 256

/** One read of the provider's stream. */
type PartRead = Awaited<ReturnType<PartReader["read"]>>

/** One pull's read: its events, and the failure that ended it (given by the next pull). */
interface ReadBatch {
  readonly events: Array<ModelEvent>
  readonly failure?: ModelError
}

/**
 * The pull of the model's events. A pull waits for the provider's next part, then takes every part
 * the provider's stream gives without waiting for more of the response (`readyOrLater`): the parts
 * of one network read come as one chunk, so the kernel journals them as one batch (not each part
 * through the queue, the batch handler and the journal on its own), while a slow stream still gives each part as
 * it comes. The read that did not come in time is kept and starts the next pull. A failure (an
 * `error` part, a broken or idle stream) comes after the events of the parts before it, at the
 * next pull; at the stream's end, the step's `Finish` comes with the last events — or `stream-cut`
 * when the provider sent no finish. One stream stage for the whole read, with no fiber or stage
 * per part: a chain of `fromReadableStream` → `mapEffect` → `flattenIterables` → `concat` costs
 * more than the reading itself.
 */
const readParts = (
  reader: PartReader,
  state: MapState,
  options: AiSdkOptions,
  watch: IdleWatch,
  errors: { readonly idle: () => ModelError; readonly of: (error: unknown) => ModelError }
): Effect.Effect<Chunk.Chunk<ModelEvent>, Option.Option<ModelError>> => {
  /** a read the pull before issued and did not take (it did not come in time, or that pull was interrupted) */
  let pending: Promise<PartRead> | undefined
  /** events an interrupted pull had read: the next pull gives them first */
  let carried: Array<ModelEvent> = []
  /** the failure after the events the pull before gave */
  let failed: ModelError | undefined
  const readFailure = (error: unknown) => (watch.idle() ? errors.idle() : errors.of(error))

  /**
   * Reads a batch. An interrupted pull (`run.abandoned`) stops at its next wake-up, before it uses
   * what it woke to: it leaves that read in `pending` and its events in `carried`, so nothing is
   * lost or read twice by a later pull, and once its scope has closed it does nothing more (it does
   * not mark a response that was cancelled as read to its end, which would skip the abort).
   */
  const readBatch = async (run: { abandoned: boolean }): Promise<ReadBatch> => {
    if (run.abandoned) return { events: [] }
    if (carried.length > 0) {
      const events = carried
      carried = []
      return { events }
    }
    const events: Array<ModelEvent> = []
    /** the next pull takes `read`; until then its failure (a cancel, an abort) is not unhandled */
    const keep = (read: Promise<PartRead>) => {
      pending = read
      read.catch(() => undefined)
    }
    const abandon = (read: Promise<PartRead>): ReadBatch => {
      keep(read)
      carried = events
      return { events: [] }
    }
    const first = pending ?? reader.read()
    pending = undefined
    let result: PartRead
    try {
      result = await first
    } catch (error) {
      if (run.abandoned) return abandon(first)
      return { events, failure: readFailure(error) }
    }
    if (run.abandoned) return abandon(first)
    while (true) {
      if (watch.idle()) return { events, failure: errors.idle() }
      if (result.done) {
        state.ended = true
        if (state.finish === undefined) {
          const message = `${options.name}: the stream ended before the step finished`
          return { events, failure: new ModelError({ reason: "stream-cut", message }) }
        }
        events.push(state.finish)
        return { events }
      }
      watch.touch()
      const mapped = mapPart(state, result.value, options.modelId)
      if (mapped._tag === "error") return { events, failure: errors.of(mapped.error) }
      for (const event of mapped.events) events.push(event)
      if (events.length >= MAX_PULL_EVENTS) return { events }
      const read = reader.read()
      let next: PartRead | typeof LATER
      try {
        // nothing to give yet (most parts make no event): wait for the next part as long as it takes
        next = events.length === 0 ? await read : await readyOrLater(read)
      } catch (error) {
        if (run.abandoned) return abandon(read)
        return { events, failure: readFailure(error) }
      }
      if (run.abandoned) return abandon(read)
      if (next === LATER) {
        keep(read)
        return { events }
      }
      result = next
    }
  }

  /** the run before: a pull starts when it has settled (an abandoned one may still hold a read) */
  let previous: Promise<unknown> = Promise.resolve()
  /** `readBatch` as an effect whose interruption abandons the run */
  const batch = Effect.async<ReadBatch>((resume) => {
    const run = { abandoned: false }
    const read = previous.then(() => readBatch(run))
    previous = read.catch(() => undefined)
    read.then(
      (read) => {
        if (!run.abandoned) resume(Effect.succeed(read))
      },
      (defect) => {
        if (!run.abandoned) resume(Effect.die(defect))
      }
    )
    return Effect.sync(() => {
      run.abandoned = true
    })
  })

  const pull: Effect.Effect<Chunk.Chunk<ModelEvent>, Option.Option<ModelError>> = Effect.suspend(() => {
    if (failed !== undefined) return Effect.fail(Option.some(failed))
    if (state.ended && carried.length === 0) return Effect.fail(Option.none())
    return Effect.flatMap(batch, (read) => {
      if (read.failure !== undefined) {
        if (read.events.length === 0) return Effect.fail(Option.some(read.failure))
        failed = read.failure
      }
      return Effect.succeed(Chunk.unsafeFromArray(read.events))
    })
  })
  return pull
}

/**
 * Opens one request: resolves with the reader of the answer's parts once the answer has begun,
 * rejects with what went wrong (an HTTP error answer, the connection's error, the abort).
 */
type Open = (
  request: ModelRequest,
  providerOptions: ProviderMetadata | undefined,
  signal: AbortSignal
) => Promise<PartReader>

/**
 * The openai-compatible request made by us (OpenAiCompatibleWire.ts): the module, the SSE parser
 * and the SDK's tool call tracker are loaded at the first request, as the SDK is.
 */
const openOwnRequest = (options: AiSdkOptions & { readonly baseURL: string }): Effect.Effect<Open, ModelError> =>
  Effect.flatMap(
    loadSdk("the openai-compatible client", () =>
      Promise.all([import("./OpenAiCompatibleWire.js"), import("eventsource-parser"), import("@ai-sdk/provider-utils")])
    ),
    ([wire, { createParser }, { StreamingToolCallTracker, secureJsonParse }]) => {
      const provider = providerName(options.name)
      // config checks the URL; a program that builds the layer itself may not have
      if (!/^https?:\/\//i.test(options.baseURL) || !URL.canParse(options.baseURL)) {
        return Effect.fail(
          new ModelError({
            reason: "config",
            message: `Provider "${provider}" has a baseURL that is not an http:// or https:// URL: set provider.${provider}.baseURL (e.g. http://localhost:11434/v1).`,
            provider
          })
        )
      }
      const target = wire.endpoint(options)
      const utils = {
        createParser,
        secureJsonParse,
        newTracker: (enqueue: (part: LanguageModelV3StreamPart) => void) =>
          new StreamingToolCallTracker({ enqueue } as unknown as TransformStreamDefaultController<never>)
      }
      const reasoning = reasoningProviderOptions(options.type, optionsKeyOf(options), options.reasoning)
      const effort = reasoning?.[optionsKeyOf(options)]?.reasoningEffort
      const settings = {
        modelId: options.modelId,
        reasoningEffort: typeof effort === "string" ? effort : undefined,
        secureJsonParse
      }
      const histories = wire.historiesFor()
      const open: Open = (request, _providerOptions, signal) =>
        wire.post(target, wire.bodyParts(request, settings, histories(request.cacheKey)), utils, signal)
      return Effect.succeed(open)
    }
  )

/** The provider's `doStream` through its SDK package. */
const openSdkRequest = (options: AiSdkOptions, target: SdkTarget): Effect.Effect<Open, ModelError> =>
  Effect.map(
    languageModel(options),
    (model): Open =>
      async (request, providerOptions, signal) =>
        (await model.doStream(toCallOptions(request, target, providerOptions, signal))).stream.getReader()
  )

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
  /**
   * How a request is opened, made by the first request and kept: for the SDK, building its model
   * builds the provider's schemas for its stream chunks, which zod compiles on their first use — per
   * request, that was the most of zod's time in a step (the options are fixed, so every request
   * would build the same model). openai-compatible requests are our own (OpenAiCompatibleWire.ts).
   */
  let opened: Open | undefined
  const open = Effect.suspend(() => {
    if (opened !== undefined) return Effect.succeed(opened)
    const { baseURL } = options
    const make =
      options.type === "openai-compatible" && options.viaSdk !== true && baseURL !== undefined && baseURL !== ""
        ? openOwnRequest({ ...options, baseURL })
        : openSdkRequest(options, target)
    return Effect.tap(make, (made) => {
      opened = made
    })
  })
  const maxOutputTokens = defaultMaxOutputTokens[options.type]
  // a stream that keeps its pull: the kernel reads it without the Stream's channel (stream/internal/pull.ts)
  const stream = (given: ModelRequest): Stream.Stream<ModelEvent, ModelError> =>
    fromPull(
      Effect.gen(function* () {
        // every request is bounded at the provider: the caller's limit, else the API's default
        const request = given.maxOutputTokens === undefined ? { ...given, maxOutputTokens } : given
        const openRequest = yield* open
        const state = newState()
        // a response read to its end needs no abort (which costs an event dispatch through the
        // HTTP client's listeners)
        const controller = yield* Effect.acquireRelease(
          Effect.sync(() => new AbortController()),
          (controller) => Effect.sync(() => (state.ended ? undefined : controller.abort()))
        )
        // per provider key, as metadata merges
        const providerOptions = mergeProviderMetadata(
          reasoningOptions,
          // OpenAI routes its automatic prompt cache by this key: one conversation, one key
          options.type === "openai" && request.cacheKey !== undefined
            ? { [target.optionsKey]: { promptCacheKey: request.cacheKey } }
            : undefined
        )
        let reader: PartReader | undefined
        const watch = yield* watchIdle(idleMs, () => {
          controller.abort()
          reader?.cancel().catch(() => undefined)
        })
        const errors = {
          idle: () => idleError(options, idleMs),
          of: (error: unknown) => toModelError(error, context(state))
        }
        // the request is sent; it resolves once the response has begun (an HTTP error rejects)
        // (interruptible: an interrupt while it waits aborts the request, by the controller's release)
        const opened = yield* Effect.tryPromise({
          try: () => openRequest(request, providerOptions, controller.signal),
          catch: (error) => (watch.idle() ? errors.idle() : errors.of(error))
        })
        reader = yield* Effect.acquireRelease(
          Effect.succeed(opened),
          // a stream that failed rejects its cancel, one that ended has nothing to cancel
          (reader) => (state.ended ? Effect.void : Effect.promise(() => reader.cancel().catch(() => undefined)))
        )
        return readParts(reader, state, options, watch, errors)
      })
    )
  return { name: options.name, provider: options.type, modelId: options.modelId, stream }
}

/** `Model` from a provider through its AI SDK provider package (`@ai-sdk/*`). */
export const layerAiSdk = (options: AiSdkOptions): Layer.Layer<Model> => Layer.succeed(Model, makeAiSdkModel(options))
