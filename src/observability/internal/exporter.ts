/**
 * The OTLP/HTTP span exporter (`@effect/opentelemetry`'s `OtlpTracer` over `@effect/platform`'s
 * fetch client). Loaded by `Tracing.layer` with `import()` only when an endpoint is set.
 *
 * The client fails fast: a request that fails (nothing listens, a reset, an error status) is not
 * retried — `OtlpTracer` would otherwise retry for seconds, at exit too — but ends as a defect
 * that names no URL and no header, which `OtlpTracer` drops (it stops exporting for a minute). The
 * export at exit is bounded by `TracingSettings.exportTimeoutMs`.
 */

import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import { Duration, Effect, Layer, Logger, Redacted } from "effect"
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

export const layer = (settings: TracingSettings): Layer.Layer<never> =>
  OtlpTracer.layer({
    url: settings.url,
    resource: { serviceName: settings.serviceName, serviceVersion: settings.serviceVersion },
    headers: Redacted.value(settings.headers),
    exportInterval: Duration.millis(settings.scheduleDelayMs),
    shutdownTimeout: Duration.millis(settings.exportTimeoutMs)
  }).pipe(
    Layer.provide(clientLayer),
    Layer.provide(
      settings.protocol === "http/protobuf" ? OtlpSerialization.layerProtobuf : OtlpSerialization.layerJson
    ),
    // the exporter's own log lines (a failed export) are not the run's output
    Layer.provide(Logger.remove(Logger.defaultLogger))
  )
