/**
 * The OTLP/HTTP span exporter (`@effect/opentelemetry`'s `OtlpTracer` over `@effect/platform`'s
 * fetch client). Loaded by `Tracing.layer` with `import()` only when an endpoint is set.
 *
 * The client fails fast: a request that fails (nothing listens, a reset, an error status) is not
 * retried — `OtlpTracer` would otherwise retry for seconds, at exit too — but ends as a defect
 * that names no URL and no header, which `OtlpTracer` drops (it stops exporting for a minute). The
 * export at exit is bounded by `TracingSettings.exportTimeoutMs`.
 *
 * No error text leaves the process: a span that ends failed is exported with its failure's kind
 * only (`_tag` and `reason`, e.g. `RetryGaveUp`, `EventStoreError.failed`), never its message — a
 * provider's message, a tool's error or a path may quote the prompt, a file or a key.
 */

import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import { Cause, Duration, Effect, Exit, Layer, Logger, Option, Redacted, type Tracer } from "effect"
import type { TracingSettings } from "../Tracing.js"

/** An export request that failed; it says nothing of the request (its headers may hold a key). */
class ExportFailed extends Error {
  override readonly name = "ExportFailed"
}

const failFast = (client: HttpClient.HttpClient): HttpClient.HttpClient =>
  client.pipe(
    HttpClient.filterStatusOk,
    HttpClient.transformResponse(
      Effect.catchAll((error) =>
        Effect.die(
          new ExportFailed(
            error._tag === "ResponseError"
              ? `the OTLP receiver answered ${error.response.status}`
              : "the OTLP receiver could not be reached"
          )
        )
      )
    )
  )

const clientLayer = Layer.effect(HttpClient.HttpClient, Effect.map(HttpClient.HttpClient, failFast)).pipe(
  Layer.provide(FetchHttpClient.layer)
)

/** A failure as exported: its kind only. */
class SpanError extends Error {
  override readonly name = "SpanError"
}

const kindOf = (error: unknown): string => {
  if (typeof error !== "object" || error === null) return "unknown"
  const e = error as { readonly _tag?: unknown; readonly reason?: unknown }
  const tag = typeof e._tag === "string" ? e._tag : "Error"
  return typeof e.reason === "string" ? `${tag}.${e.reason}` : tag
}

/** The exit a span is exported with: a failure or a defect as its kind, an interrupt as it is. */
export const scrubExit = (exit: Exit.Exit<unknown, unknown>): Exit.Exit<unknown, unknown> => {
  if (Exit.isSuccess(exit) || Cause.isInterruptedOnly(exit.cause)) return exit
  const failure = Cause.failureOption(exit.cause)
  if (Option.isSome(failure)) return Exit.fail(new SpanError(kindOf(failure.value)))
  const defect = Cause.dieOption(exit.cause)
  return Exit.die(new SpanError(Option.isSome(defect) ? `defect: ${kindOf(defect.value)}` : "failed"))
}

/** `tracer`, its spans ending with `scrubExit` of their exit. */
const scrubbing = (tracer: Tracer.Tracer): Tracer.Tracer => ({
  ...tracer,
  span: (...args) => {
    const span = tracer.span(...args)
    const end = span.end.bind(span)
    Object.defineProperty(span, "end", {
      value: (endTime: bigint, exit: Exit.Exit<unknown, unknown>) => end(endTime, scrubExit(exit))
    })
    return span
  },
  context: (f, fiber) => tracer.context(f, fiber)
})

export const layer = (settings: TracingSettings): Layer.Layer<never> =>
  Layer.unwrapScoped(
    Effect.map(
      OtlpTracer.make({
        url: settings.url,
        resource: { serviceName: settings.serviceName, serviceVersion: settings.serviceVersion },
        headers: Redacted.value(settings.headers),
        exportInterval: Duration.millis(settings.scheduleDelayMs),
        shutdownTimeout: Duration.millis(settings.exportTimeoutMs)
      }),
      (tracer) => Layer.setTracer(scrubbing(tracer))
    )
  ).pipe(
    Layer.provide(clientLayer),
    Layer.provide(
      settings.protocol === "http/protobuf" ? OtlpSerialization.layerProtobuf : OtlpSerialization.layerJson
    ),
    // the exporter's own log lines (a failed export) are not the run's output
    Layer.provide(Logger.remove(Logger.defaultLogger))
  )
