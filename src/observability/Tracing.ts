/**
 * Trace export, from the environment (docs/observability.md). When the standard
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set, the spans of the run
 * (`Effect.fn` / `Effect.withSpan` everywhere in the kernel) go to that OTLP/HTTP receiver through
 * `@effect/opentelemetry`'s `OtlpTracer`; when neither is set, `layer` is `Layer.empty` and the
 * exporter's code is never loaded (`internal/exporter.ts` is a dynamic `import()`: a chunk of its
 * own in the bundle, so `logbook --version` does not parse it).
 *
 * The headers (`OTEL_EXPORTER_OTLP_HEADERS`, `…_TRACES_HEADERS`) may hold API keys: they are read as
 * `Redacted` values and go on the export requests only, never into a span, a log line or the event
 * log. An export that fails (receiver down, refused, an error status) is dropped quietly and never
 * fails or holds up the run; at exit the spans still pending are flushed for at most
 * `exportTimeoutMs` (1 s unless `OTEL_BSP_EXPORT_TIMEOUT` says otherwise).
 *
 * This module imports only effect; the composition root (`src/bin.ts`) provides its layer around
 * every command.
 */
import { Config, Console, Effect, Layer, Option, Redacted } from "effect"

export type OtlpProtocol = "http/json" | "http/protobuf"

/** Where and how spans are exported; `headers` are secret (API keys) and stay redacted. */
export interface TracingSettings {
  /** the traces URL, e.g. `http://127.0.0.1:4318/v1/traces` */
  readonly url: string
  readonly protocol: OtlpProtocol
  readonly headers: Redacted.Redacted<Readonly<Record<string, string>>>
  readonly serviceName: string
  readonly serviceVersion: string
  /** how often spans are sent while the command runs (`OTEL_BSP_SCHEDULE_DELAY`, default 5000) */
  readonly scheduleDelayMs: number
  /** how long the export at exit may take (`OTEL_BSP_EXPORT_TIMEOUT`, default 1000 here) */
  readonly exportTimeoutMs: number
}

/** `OTEL_BSP_SCHEDULE_DELAY`'s default (the spec's). */
export const defaultScheduleDelayMs = 5000

/**
 * `OTEL_BSP_EXPORT_TIMEOUT`'s default here: 1 s, not the spec's 30 s — a receiver that accepts
 * the connection and never answers would hold every command up for half a minute.
 */
export const defaultExportTimeoutMs = 1000

/**
 * The variables that may hold API keys (the export headers): the composition root hides them from
 * the tools' commands and masks their values in the log, like a provider's key variable.
 */
export const secretVariables: ReadonlyArray<string> = [
  "OTEL_EXPORTER_OTLP_HEADERS",
  "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
]

/**
 * The header values in `env`'s export header variables (`secretVariables`), each with the variable
 * it is in: masked in the log like the variables' whole values (a token may show up on its own).
 */
export const headerSecrets = (
  env: Readonly<Record<string, string | undefined>>
): ReadonlyArray<{ readonly name: string; readonly value: string }> =>
  secretVariables.flatMap((name) => Object.values(parseHeaders(env[name])).map((value) => ({ name, value })))

/** What the environment asks for: export (`Export`), nothing (`Off`), or a setting logbook cannot use. */
export type TracingRequest =
  | { readonly _tag: "Off" }
  | { readonly _tag: "Export"; readonly settings: TracingSettings }
  | { readonly _tag: "Unusable"; readonly message: string }

/**
 * The traces URL from the two endpoint variables (the OTLP exporter spec): the traces one is used as
 * it is; the generic one is a base URL that gets `/v1/traces` appended. Empty values count as unset.
 */
export const tracesUrl = (traces: string | undefined, generic: string | undefined): string | undefined => {
  const own = traces?.trim()
  if (own !== undefined && own !== "") return own
  const base = generic?.trim()
  if (base === undefined || base === "") return undefined
  return `${base.replace(/\/+$/, "")}/v1/traces`
}

/**
 * `OTEL_EXPORTER_OTLP_HEADERS`'s format: `key=value` pairs separated by commas, the values
 * URL-decoded (`authorization=Bearer%20token`). An entry with no `=`, no key, or a value that does
 * not decode is left out.
 */
export const parseHeaders = (text: string | undefined): Record<string, string> => {
  const headers: Record<string, string> = {}
  if (text === undefined) return headers
  for (const entry of text.split(",")) {
    const at = entry.indexOf("=")
    if (at <= 0) continue
    const key = entry.slice(0, at).trim().toLowerCase()
    if (key === "") continue
    try {
      headers[key] = decodeURIComponent(entry.slice(at + 1).trim())
    } catch {
      // a malformed escape: the entry is not sent rather than sent wrong
    }
  }
  return headers
}

/** `service.name` of `OTEL_RESOURCE_ATTRIBUTES` (`k=v,k2=v2`), if it names one. */
const resourceServiceName = (text: string | undefined): string | undefined => {
  for (const entry of (text ?? "").split(",")) {
    const at = entry.indexOf("=")
    if (at > 0 && entry.slice(0, at).trim() === "service.name") {
      const value = entry.slice(at + 1).trim()
      if (value !== "") return value
    }
  }
  return undefined
}

const optionalString = (name: string) =>
  Config.string(name).pipe(
    Config.option,
    Config.map((value) => Option.getOrUndefined(value))
  )

/** A variable of whole milliseconds (`OTEL_BSP_*`); unset, empty or not a non-negative integer: `fallback`. */
const millis = (name: string, fallback: number) =>
  Config.map(optionalString(name), (text) => {
    const value = text === undefined || !/^\s*\d+\s*$/.test(text) ? Number.NaN : Number(text)
    return Number.isSafeInteger(value) ? value : fallback
  })

const optionalSecret = (name: string) =>
  Config.redacted(name).pipe(
    Config.option,
    Config.map((value) => Option.getOrUndefined(Option.map(value, Redacted.value)))
  )

/**
 * Reads the OpenTelemetry variables: `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn
 * export off; the endpoint, protocol and headers variables (the traces ones over the generic ones),
 * `OTEL_SERVICE_NAME` (else `service.name` of `OTEL_RESOURCE_ATTRIBUTES`, else "logbook").
 */
export const tracingRequest = (serviceVersion: string): Effect.Effect<TracingRequest> =>
  Effect.gen(function* () {
    const disabled = yield* optionalString("OTEL_SDK_DISABLED")
    if (disabled?.trim().toLowerCase() === "true") return { _tag: "Off" } as const
    const exporters = yield* optionalString("OTEL_TRACES_EXPORTER")
    if (exporters?.split(",").some((name) => name.trim().toLowerCase() === "none")) {
      return { _tag: "Off" } as const
    }
    const traces = yield* optionalString("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    const url = tracesUrl(traces, yield* optionalString("OTEL_EXPORTER_OTLP_ENDPOINT"))
    if (url === undefined) return { _tag: "Off" } as const
    // messages name the variable, not its value: a URL may hold a password
    const name =
      tracesUrl(traces, undefined) === undefined ? "OTEL_EXPORTER_OTLP_ENDPOINT" : "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    if (!/^https?:\/\/[^/]/i.test(url) || !URL.canParse(url)) {
      return {
        _tag: "Unusable",
        message: `${name} is not an http(s) URL; no traces are exported`
      } as const
    }
    const parsed = new URL(url)
    if (parsed.username !== "" || parsed.password !== "") {
      // fetch refuses such a URL; a header is where a key goes
      return {
        _tag: "Unusable",
        message: `${name} holds a user name or password (credentials go in OTEL_EXPORTER_OTLP_HEADERS); no traces are exported`
      } as const
    }
    const protocolText = (
      (yield* optionalString("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")) ??
      (yield* optionalString("OTEL_EXPORTER_OTLP_PROTOCOL")) ??
      "http/json"
    )
      .trim()
      .toLowerCase()
    if (protocolText !== "http/json" && protocolText !== "http/protobuf") {
      return {
        _tag: "Unusable",
        message:
          `OTLP protocol ${JSON.stringify(protocolText)} is not supported (http/json or http/protobuf); ` +
          "no traces are exported"
      } as const
    }
    const headers = {
      ...parseHeaders(yield* optionalSecret("OTEL_EXPORTER_OTLP_HEADERS")),
      ...parseHeaders(yield* optionalSecret("OTEL_EXPORTER_OTLP_TRACES_HEADERS"))
    }
    const serviceName =
      (yield* optionalString("OTEL_SERVICE_NAME"))?.trim() ||
      resourceServiceName(yield* optionalString("OTEL_RESOURCE_ATTRIBUTES")) ||
      "logbook"
    return {
      _tag: "Export",
      settings: {
        url,
        protocol: protocolText,
        headers: Redacted.make(headers),
        serviceName,
        serviceVersion,
        scheduleDelayMs: Math.max(1, yield* millis("OTEL_BSP_SCHEDULE_DELAY", defaultScheduleDelayMs)),
        exportTimeoutMs: yield* millis("OTEL_BSP_EXPORT_TIMEOUT", defaultExportTimeoutMs)
      }
    } as const
  }).pipe(
    // a variable that cannot be read is no reason to fail a run
    Effect.catchAll(() => Effect.succeed({ _tag: "Off" } as const))
  )

/**
 * The tracer of the run from the environment (`tracingRequest`): `OtlpTracer` over an HTTP client
 * when an endpoint is set, `Layer.empty` otherwise. A setting it cannot use is said once on stderr
 * and nothing is exported; it never fails.
 */
export const layer = (options: { readonly serviceVersion: string }): Layer.Layer<never> =>
  Layer.unwrapEffect(
    Effect.gen(function* () {
      const request = yield* tracingRequest(options.serviceVersion)
      switch (request._tag) {
        case "Off":
          return Layer.empty
        case "Unusable":
          yield* Console.error(`logbook: ${request.message}`)
          return Layer.empty
        case "Export": {
          const exporter = yield* Effect.tryPromise(() => import("./internal/exporter.js"))
          return exporter.layer(request.settings)
        }
      }
    }).pipe(
      Effect.catchAll(() =>
        Console.error("logbook: the trace exporter could not be loaded; no traces are exported").pipe(
          Effect.as(Layer.empty)
        )
      )
    )
  )
