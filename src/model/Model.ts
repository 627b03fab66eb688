/**
 * One streamed model request (DESIGN §7): a request in, a stream of typed events out.
 *
 * The contract between the kernel and every model layer: `layerAiSdk` (real providers through the
 * `ai` package), `layerScripted` (a script, for unit tests), later `layerCassette` (replay).
 * Aborting a request = interrupting the stream's fiber. Retrying is not the model's job (`Retry`).
 */
import { Context, Data, Schema, type Stream } from "effect"

/** What the model is told about a tool. `inputSchema` is a JSON Schema object. */
export interface ModelTool {
  readonly name: string
  readonly description: string
  readonly inputSchema: Readonly<Record<string, unknown>>
}

/**
 * What a provider attached to a part so that it can be sent back (an Anthropic thinking block's
 * `signature`, a `redacted_thinking` block's `redactedData` …), keyed by the SDK's provider name
 * (`anthropic`, or an openai-compatible provider's id). Opaque JSON: kept and sent back unchanged.
 */
export type ProviderMetadata = Readonly<Record<string, Readonly<Record<string, unknown>>>>

export type ModelAssistantPart =
  | { readonly type: "text"; readonly text: string }
  | {
      readonly type: "reasoning"
      readonly text: string
      /** the provider's metadata of this reasoning (only ever from the provider the request goes to) */
      readonly metadata?: ProviderMetadata | undefined
    }
  | { readonly type: "tool-call"; readonly callId: string; readonly tool: string; readonly input: unknown }

export interface ModelToolResult {
  readonly callId: string
  readonly tool: string
  /** the text the model reads: the tool's output, or the error (`isError`) */
  readonly output: string
  readonly isError: boolean
}

/** The conversation as the model sees it. Every tool call of an assistant message has a result after it. */
export type ModelMessage =
  | { readonly role: "user"; readonly content: string }
  | { readonly role: "assistant"; readonly parts: ReadonlyArray<ModelAssistantPart> }
  | { readonly role: "tool"; readonly results: ReadonlyArray<ModelToolResult> }

export interface ModelRequest {
  readonly system?: string | undefined
  readonly messages: ReadonlyArray<ModelMessage>
  readonly tools: ReadonlyArray<ModelTool>
  readonly maxOutputTokens?: number | undefined
  /**
   * A key that stays the same for every request of one conversation (the kernel passes the session
   * id): providers that route prompt caching by key (OpenAI `prompt_cache_key`) get it.
   */
  readonly cacheKey?: string | undefined
}

/** Token counts of one step as the provider reports them (cost is computed from config prices). */
export interface ModelUsage {
  readonly input: number
  readonly output: number
  readonly reasoning: number
  readonly cacheRead: number
  readonly cacheWrite: number
}

/** The typed events of one model step, in stream order. */
export type ModelEvent = Data.TaggedEnum<{
  /** a piece of text of the text part `id` */
  TextDelta: { readonly id: string; readonly delta: string }
  /**
   * a piece of the reasoning part `id`; `metadata` is what the provider attached to the part so it can
   * be sent back (a signature, redacted data), merged per provider key into what came before. A
   * delta may be empty when it only carries metadata (a signature at the end of a thinking block,
   * a redacted block that has no text).
   */
  ReasoningDelta: { readonly id: string; readonly delta: string; readonly metadata?: ProviderMetadata | undefined }
  /** the model started streaming the input of a tool call */
  ToolInputStart: { readonly callId: string; readonly tool: string }
  ToolInputDelta: { readonly callId: string; readonly delta: string }
  /**
   * the whole call has arrived. `input` is the parsed JSON input; when the model sent text that is
   * not JSON, `input` is undefined and `inputText` holds what it sent (the kernel turns that into
   * a tool error the model can read).
   */
  ToolCall: { readonly callId: string; readonly tool: string; readonly input: unknown; readonly inputText: string }
  /** the step ended */
  Finish: {
    readonly finishReason: string
    readonly usage: ModelUsage
    /** the model that answered, when the provider says (for traces: `gen_ai.response.model`) */
    readonly responseModel?: string | undefined
  }
}>
export const ModelEvent = Data.taggedEnum<ModelEvent>()

/**
 * A failed model request. `reason`:
 * - `http`: the provider answered with an error status (`status`, `headers`, `body` set)
 * - `network`: no answer (connection refused or reset, DNS, timeout before a response)
 * - `stream-cut`: the stream ended or broke before the step finished
 * - `invalid-response`: the provider sent something that cannot be understood (a malformed chunk)
 * - `config`: the request could not be made (unknown provider, missing API key …)
 * Whether it is worth retrying is `Retry`'s decision, from these fields (`network` picks the short
 * policy for a host that does not resolve or a refused connection).
 */
export class ModelError extends Schema.TaggedError<ModelError>()("ModelError", {
  reason: Schema.Literal("http", "network", "stream-cut", "invalid-response", "config"),
  message: Schema.String,
  status: Schema.optional(Schema.Int),
  /** response headers, lower-case names (retry-after, retry-after-ms …); never request headers */
  headers: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  /** the response body, cut to a few kB */
  body: Schema.optional(Schema.String),
  /**
   * what the provider said, from the error body or an error object sent in the stream: one line, at
   * most `maxProviderMessageLength` characters, the API key masked
   */
  providerMessage: Schema.optional(Schema.String),
  /**
   * for `network`: the kind of failure when it is known — `dns` (the host does not resolve),
   * `refused` (nothing listens at the port), `blocked-port` (fetch never connects to that port)
   */
  network: Schema.optional(Schema.Literal("dns", "refused", "blocked-port")),
  /** for `network`: the host (as in the URL: `localhost`, `[::1]`) and port the request went to */
  host: Schema.optional(Schema.String),
  port: Schema.optional(Schema.Int),
  /** the provider id (the part of the model name before the first `/`), for messages naming its config keys */
  provider: Schema.optional(Schema.String),
  cause: Schema.optional(Schema.Defect)
}) {}

/** `ModelError.providerMessage` is cut to this many characters (on one line). */
export const maxProviderMessageLength = 300

export class Model extends Context.Tag("logbook/Model")<
  Model,
  {
    /** the `provider/model` name, for events and cost */
    readonly name: string
    /**
     * how the provider is spoken to, for traces (`gen_ai.system`: `openai`, `anthropic`,
     * `openai-compatible` …); unset: the part of `name` before the first `/`
     */
    readonly provider?: string | undefined
    /** the provider's id of the model (`gpt-4.1`), for traces; unset: the part of `name` after the first `/` */
    readonly modelId?: string | undefined
    readonly stream: (request: ModelRequest) => Stream.Stream<ModelEvent, ModelError>
  }
>() {}
