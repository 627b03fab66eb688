/**
 * The trace settings from the OpenTelemetry variables (src/observability/Tracing.ts), and that the
 * exporter module is loaded only when an endpoint is set: it is replaced here by a stand-in whose
 * factory counts its loads (the real export to a receiver is test/integration/tracing.test.ts).
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Redacted } from "effect"
import { vi } from "vitest"
import {
  headerSecrets,
  layer,
  parseHeaders,
  type TracingRequest,
  tracesUrl,
  tracingRequest
} from "../../src/observability/Tracing.js"
import { makeSecrets, redactionMarker } from "../../src/tools/Secrets.js"

const loads = vi.hoisted(() => ({ count: 0, settings: [] as Array<unknown> }))

vi.mock("../../src/observability/internal/exporter.js", async () => {
  loads.count += 1
  const { Layer, Tracer } = await import("effect")
  const tracer = Tracer.make({
    span: (name, parent, context, links, startTime, kind) =>
      ({ name, parent, context, links, startTime, kind }) as never,
    context: (f) => f()
  })
  return {
    layer: (settings: unknown) => {
      loads.settings.push(settings)
      return Layer.setTracer(tracer)
    }
  }
})

const withEnv = (env: Record<string, string>) =>
  Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

const request = (env: Record<string, string>): Effect.Effect<TracingRequest> =>
  tracingRequest("1.2.3").pipe(withEnv(env))

const exported = (env: Record<string, string>) =>
  Effect.map(request(env), (r) => {
    if (r._tag !== "Export") throw new Error(`expected Export, got ${JSON.stringify(r)}`)
    return r.settings
  })

describe("tracesUrl", () => {
  it("uses the traces endpoint as it is, and appends /v1/traces to the generic one", () => {
    expect(tracesUrl("http://h:4318/custom", "http://other:4318")).toBe("http://h:4318/custom")
    expect(tracesUrl(undefined, "http://h:4318")).toBe("http://h:4318/v1/traces")
    expect(tracesUrl(undefined, "http://h:4318/")).toBe("http://h:4318/v1/traces")
    expect(tracesUrl(undefined, "https://h/otlp")).toBe("https://h/otlp/v1/traces")
    expect(tracesUrl("", " http://h:4318 ")).toBe("http://h:4318/v1/traces")
    expect(tracesUrl(undefined, undefined)).toBeUndefined()
    expect(tracesUrl(" ", "")).toBeUndefined()
  })
})

describe("parseHeaders", () => {
  it("reads k=v pairs separated by commas, URL-decoded, names in lower case", () => {
    expect(parseHeaders("Authorization=Bearer%20sk-1, x-team = a%3Db ,empty=")).toEqual({
      authorization: "Bearer sk-1",
      "x-team": "a=b",
      empty: ""
    })
  })

  it("leaves out an entry without a name or =, and one whose value does not decode", () => {
    expect(parseHeaders("novalue,=x,bad=%E0%A4%A,ok=1")).toEqual({ ok: "1" })
    expect(parseHeaders(undefined)).toEqual({})
  })
})

describe("headerSecrets", () => {
  it("gives each header value of both header variables, so a token is masked on its own too", () => {
    const env = {
      OTEL_EXPORTER_OTLP_HEADERS: "authorization=Bearer%20sk-otlp-token-1234,x-team=observability-team",
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: "api-key=trace-key-5678-abcdef-0123",
      OTHER: "k=not-a-secret-value"
    }
    const found = headerSecrets(env)
    expect(found).toEqual([
      { name: "OTEL_EXPORTER_OTLP_HEADERS", value: "Bearer sk-otlp-token-1234" },
      { name: "OTEL_EXPORTER_OTLP_HEADERS", value: "observability-team" },
      { name: "OTEL_EXPORTER_OTLP_TRACES_HEADERS", value: "trace-key-5678-abcdef-0123" }
    ])
    // with the variables hidden and their values given, a token alone in a tool's output is masked
    const secrets = makeSecrets({
      hide: ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"],
      env,
      values: found
    })
    const masked = secrets.redactText("token: trace-key-5678-abcdef-0123 and Bearer sk-otlp-token-1234")
    expect(masked).not.toContain("trace-key-5678-abcdef-0123")
    expect(masked).not.toContain("sk-otlp-token-1234")
    expect(masked).toContain(redactionMarker("OTEL_EXPORTER_OTLP_TRACES_HEADERS"))
  })
})

describe("tracingRequest", () => {
  it.effect("is Off without an endpoint", () =>
    Effect.gen(function* () {
      expect(yield* request({})).toEqual({ _tag: "Off" })
      expect(yield* request({ OTEL_EXPORTER_OTLP_ENDPOINT: "" })).toEqual({ _tag: "Off" })
      expect(yield* request({ OTEL_SERVICE_NAME: "x", OTEL_EXPORTER_OTLP_HEADERS: "a=b" })).toEqual({ _tag: "Off" })
    })
  )

  it.effect("exports to the endpoint with the headers (traces ones over generic ones), redacted", () =>
    Effect.gen(function* () {
      const settings = yield* exported({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318",
        OTEL_EXPORTER_OTLP_HEADERS: "authorization=Bearer%20sk-generic,x-a=1",
        OTEL_EXPORTER_OTLP_TRACES_HEADERS: "authorization=Bearer%20sk-traces"
      })
      expect(settings.url).toBe("http://127.0.0.1:4318/v1/traces")
      expect(settings.protocol).toBe("http/json")
      expect(Redacted.value(settings.headers)).toEqual({ authorization: "Bearer sk-traces", "x-a": "1" })
      // shown, logged or serialized, the headers say nothing
      expect(`${String(settings.headers)} ${JSON.stringify(settings)}`).not.toContain("sk-")
      expect(settings.serviceName).toBe("logbook")
      expect(settings.serviceVersion).toBe("1.2.3")
    })
  )

  it.effect("names the service OTEL_SERVICE_NAME, else service.name of OTEL_RESOURCE_ATTRIBUTES, else logbook", () =>
    Effect.gen(function* () {
      const base = { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://h:4318/v1/traces" }
      const attrs = { OTEL_RESOURCE_ATTRIBUTES: "deployment=ci,service.name=from-attrs" }
      expect((yield* exported({ ...base, ...attrs, OTEL_SERVICE_NAME: "mine" })).serviceName).toBe("mine")
      expect((yield* exported({ ...base, ...attrs })).serviceName).toBe("from-attrs")
      expect((yield* exported(base)).serviceName).toBe("logbook")
    })
  )

  it.effect("reads the export interval and the exit's export timeout from OTEL_BSP_*, 5 s and 1 s by default", () =>
    Effect.gen(function* () {
      const base = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://h:4318" }
      expect(yield* exported(base)).toMatchObject({ scheduleDelayMs: 5000, exportTimeoutMs: 1000 })
      expect(
        yield* exported({ ...base, OTEL_BSP_SCHEDULE_DELAY: "250", OTEL_BSP_EXPORT_TIMEOUT: " 10000 " })
      ).toMatchObject({ scheduleDelayMs: 250, exportTimeoutMs: 10000 })
      // not whole milliseconds: the default
      expect(yield* exported({ ...base, OTEL_BSP_SCHEDULE_DELAY: "1.5", OTEL_BSP_EXPORT_TIMEOUT: "-3" })).toMatchObject(
        {
          scheduleDelayMs: 5000,
          exportTimeoutMs: 1000
        }
      )
    })
  )

  it.effect("is Off when OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none", () =>
    Effect.gen(function* () {
      const base = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://h:4318" }
      expect(yield* request({ ...base, OTEL_SDK_DISABLED: "true" })).toEqual({ _tag: "Off" })
      expect(yield* request({ ...base, OTEL_TRACES_EXPORTER: "none" })).toEqual({ _tag: "Off" })
      expect((yield* request({ ...base, OTEL_SDK_DISABLED: "false" }))._tag).toBe("Export")
      expect((yield* request({ ...base, OTEL_TRACES_EXPORTER: "otlp" }))._tag).toBe("Export")
    })
  )

  it.effect("takes http/protobuf when asked, and calls grpc or a URL that is not http(s) unusable", () =>
    Effect.gen(function* () {
      const base = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://h:4318" }
      expect((yield* exported({ ...base, OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf" })).protocol).toBe(
        "http/protobuf"
      )
      expect(
        (yield* exported({
          ...base,
          OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
          OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/json"
        })).protocol
      ).toBe("http/json")
      expect((yield* request({ ...base, OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" }))._tag).toBe("Unusable")
      expect((yield* request({ OTEL_EXPORTER_OTLP_ENDPOINT: "localhost:4318" }))._tag).toBe("Unusable")
      // the message names the variable, not its value (a URL may hold a password)
      expect(yield* request({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "ftp://me:pw-123@h" })).toEqual({
        _tag: "Unusable",
        message: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is not an http(s) URL; no traces are exported"
      })
      const withPassword = yield* request({ OTEL_EXPORTER_OTLP_ENDPOINT: "https://me:pw-123@h:4318" })
      expect(withPassword._tag).toBe("Unusable")
      expect(JSON.stringify(withPassword)).not.toContain("pw-123")
      expect((yield* request({ OTEL_EXPORTER_OTLP_ENDPOINT: "ftp://h" }))._tag).toBe("Unusable")
    })
  )
})

describe("layer", () => {
  const tracerUnder = (env: Record<string, string>) =>
    Effect.tracerWith(Effect.succeed).pipe(
      Effect.provide(layer({ serviceVersion: "1.2.3" })),
      withEnv(env),
      Effect.scoped
    )

  it.effect(
    "without an endpoint keeps the tracer and never loads the exporter; with one, loads it and sets its tracer",
    () =>
      Effect.gen(function* () {
        const before = yield* Effect.tracerWith(Effect.succeed)
        expect(yield* tracerUnder({ OTEL_SERVICE_NAME: "x" })).toBe(before)
        expect(yield* tracerUnder({ OTEL_EXPORTER_OTLP_ENDPOINT: "ftp://h" })).toBe(before)
        expect(loads.count).toBe(0)

        const set = yield* tracerUnder({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" })
        expect(set).not.toBe(before)
        expect(loads.count).toBe(1)
        expect(loads.settings).toHaveLength(1)
        expect((loads.settings[0] as { url: string }).url).toBe("http://127.0.0.1:4318/v1/traces")
      })
  )
})
