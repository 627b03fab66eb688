/**
 * The span of a model request, after the OpenTelemetry GenAI semantic conventions
 * (docs/observability.md): `chat <model id>`, kind client, `gen_ai.*` attributes for the provider,
 * the model and the tokens. Never the prompt or the completion: they may hold anything (keys
 * included), and the event log already records them.
 */
import { Effect, type Tracer } from "effect"
import type { Model, ModelRequest, ModelUsage } from "./Model.js"

/** The provider of a model as the conventions name it (`openai`, `anthropic`, `openai-compatible` …). */
export const providerOf = (model: Model["Type"]): string => model.provider ?? (model.name.split("/")[0] || model.name)

/** The provider's id of the model (`gpt-4.1`): `Model.modelId`, else `name` after the first `/`. */
export const modelIdOf = (model: Model["Type"]): string => {
  if (model.modelId !== undefined) return model.modelId
  const slash = model.name.indexOf("/")
  return slash < 0 ? model.name : model.name.slice(slash + 1)
}

/** What the end of a model stream says (its `Finish` event). */
export interface ChatFinish {
  readonly finishReason: string
  readonly usage: ModelUsage
  /** the model that answered, when the provider says (`gen_ai.response.model`) */
  readonly responseModel?: string | undefined
}

/** The attributes of a finished request: finish reason, tokens (input counts the cached ones too). */
export const finishAttributes = (finish: ChatFinish): Record<string, unknown> => ({
  "gen_ai.response.finish_reasons": [finish.finishReason],
  "gen_ai.usage.input_tokens": finish.usage.input,
  "gen_ai.usage.output_tokens": finish.usage.output,
  "gen_ai.usage.cache_read.input_tokens": finish.usage.cacheRead,
  "gen_ai.usage.cache_creation.input_tokens": finish.usage.cacheWrite,
  "logbook.usage.reasoning_tokens": finish.usage.reasoning,
  ...(finish.responseModel !== undefined ? { "gen_ai.response.model": finish.responseModel } : {})
})

/**
 * The tracer Effect runs with when none was installed: it keeps its spans in memory and exports
 * none of them.
 */
const defaultTracer: Tracer.Tracer = Effect.runSync(Effect.tracer)

/**
 * `traced()` when spans go somewhere — a tracer was installed (logbook's OTLP export, an
 * embedder's own `Layer.setTracer`) — else `untraced`. A span costs the kernel even with the
 * default tracer, which exports nothing (docs/observability.md, "Cost"): the
 * spans made several times a model step are made only when they go somewhere, as an OpenTelemetry
 * API without an SDK makes none.
 */
export const ifTraced = <A, E, R>(
  traced: () => Effect.Effect<A, E, R>,
  untraced: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => Effect.tracerWith((tracer) => (tracer === defaultTracer ? untraced : traced()))

/**
 * `spanned` (the method made with `Effect.fn(name)(body)` where it is defined, so that a failed
 * span's `code.stacktrace` names that place; the call it names is this helper's, as whether to
 * trace is decided when the method runs) when traced (`ifTraced`), else `body` alone: for the
 * service methods that run several times a model step (`Processor.run`, `Actions.run`).
 */
export const tracedFn =
  <Args extends Array<unknown>, A, E, R>(
    spanned: (...args: Args) => Effect.Effect<A, E, R>,
    body: (...args: Args) => Effect.Effect<A, E, R>
  ): ((...args: Args) => Effect.Effect<A, E, R>) =>
  (...args) =>
    ifTraced(
      () => spanned(...args),
      Effect.suspend(() => body(...args))
    )

/** Records what the stream's end said on the current span (the request's `chatSpan`), when traced. */
export const annotateFinish = (finish: ChatFinish): Effect.Effect<void> =>
  ifTraced(() => Effect.annotateCurrentSpan(finishAttributes(finish)), Effect.void)

/**
 * An error as a span may show it: its tag and its `reason` (and HTTP status), never its message
 * (a provider's message or a tool's error text may quote the prompt).
 */
export const errorType = (error: unknown): string => {
  if (typeof error !== "object" || error === null) return "unknown"
  const e = error as { readonly _tag?: unknown; readonly reason?: unknown; readonly status?: unknown }
  const tag = typeof e._tag === "string" ? e._tag : "Error"
  const reason = typeof e.reason === "string" ? `.${e.reason}` : ""
  const status = typeof e.status === "number" ? `.${e.status}` : ""
  return `${tag}${reason}${status}`
}

/** What reaches a span of a failed effect: `errorType` of the failure, nothing more. */
class SpanFailure<E> extends Error {
  override readonly name = "SpanFailure"
  /** the kind, as a tracer that exports failures by their tag shows it (observability's exporter) */
  readonly _tag: string
  constructor(readonly failure: E) {
    super(errorType(failure))
    this._tag = errorType(failure)
  }
}

interface SafeSpanOptions {
  readonly kind?: "client" | "internal"
  readonly attributes: Record<string, unknown>
}

/**
 * Runs `effect` in a span whose failure is shown as `errorType` only (status error, `error.type`);
 * the effect fails as before.
 */
const safeSpan =
  (name: string, options: SafeSpanOptions) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    effect.pipe(
      Effect.tapError((error) => Effect.annotateCurrentSpan("error.type", errorType(error))),
      Effect.mapError((error) => new SpanFailure(error)),
      Effect.withSpan(name, { kind: options.kind ?? "internal", attributes: options.attributes }),
      Effect.mapError((wrapped) => wrapped.failure)
    )

/** `safeSpan` when traced (`ifTraced`), its options made only then; else `effect` alone. */
export const withSafeSpan =
  (name: string, options: () => SafeSpanOptions) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    ifTraced(() => safeSpan(name, options())(effect), effect)

/**
 * Runs one model request (`effect` streams it) in its `chat <model id>` span. `attributes` adds
 * logbook's own (`logbook.session.id`, `logbook.step`); the effect records the end with
 * `annotateFinish`.
 */
export const chatSpan = (model: Model["Type"], request: ModelRequest, attributes: Record<string, unknown>) => {
  const provider = providerOf(model)
  const modelId = modelIdOf(model)
  return withSafeSpan(`chat ${modelId}`, () => ({
    kind: "client",
    attributes: {
      "gen_ai.operation.name": "chat",
      "gen_ai.system": provider,
      "gen_ai.provider.name": provider,
      "gen_ai.request.model": modelId,
      ...(request.maxOutputTokens !== undefined ? { "gen_ai.request.max_tokens": request.maxOutputTokens } : {}),
      "logbook.model": model.name,
      ...attributes
    }
  }))
}

/** A call that ended failed (or refused), inside its span only: the span's status is then error. */
class ToolFailed<A> {
  readonly _tag = "ToolFailed"
  constructor(readonly outcome: A) {}
}

/**
 * Runs one tool call in its `execute_tool <tool>` span (GenAI conventions: `gen_ai.tool.name`,
 * `gen_ai.tool.call.id`). A call that ends not `ok` gives the span status error and `error.type`
 * `ToolFailed`, without its error text; the effect's result is unchanged.
 */
export const toolSpan =
  (call: { readonly tool: string; readonly callId: string }, attributes: Record<string, unknown>) =>
  <A extends { readonly ok: boolean }, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    ifTraced(
      () =>
        effect.pipe(
          Effect.flatMap((outcome) => (outcome.ok ? Effect.succeed(outcome) : Effect.fail(new ToolFailed(outcome)))),
          safeSpan(`execute_tool ${call.tool}`, {
            attributes: {
              "gen_ai.operation.name": "execute_tool",
              "gen_ai.tool.name": call.tool,
              "gen_ai.tool.call.id": call.callId,
              "gen_ai.tool.type": "function",
              ...attributes
            }
          }),
          Effect.catchIf(
            (error): error is ToolFailed<A> => error instanceof ToolFailed,
            (failed) => Effect.succeed(failed.outcome)
          )
        ),
      effect
    )
