import { describe, expect, it } from "@effect/vitest"
import { Cause, Clock, Effect, Exit, Fiber, Option, Random, Schema, TestClock } from "effect"
import { ModelError } from "../../src/model/Model.js"
import {
  backoffMs,
  classify,
  decide,
  defaultRetryOptions,
  describe as describeError,
  driver,
  fastFailPolicy,
  type GivenDecisions,
  policy,
  Retry,
  RetryGaveUp,
  type RetryHooks,
  type RetryInfo,
  type RetryOptions,
  retryAfterMs,
  schedule,
  gaveUp as stopRetrying
} from "../../src/model/Retry.js"

// ---------------------------------------------------------------------------------------------
// helpers

/** How the kernel retries a request: `Effect.retryOrElse` over the policy's driver, started now. */
const retrying = <A, R, E2 = never, R2 = never>(
  request: Effect.Effect<A, ModelError, R>,
  options: RetryOptions,
  hooks: RetryHooks<E2, R2> = {},
  given?: GivenDecisions
) => Effect.flatMap(driver(options, hooks, given), (d) => Effect.retryOrElse(request, d, stopRetrying))

const http = (status: number, headers: Record<string, string> = {}, body?: string) =>
  new ModelError({
    reason: "http",
    message: `HTTP ${status}`,
    status,
    headers,
    ...(body !== undefined ? { body } : {})
  })
const network = (message = "connect ECONNREFUSED 127.0.0.1:11434") => new ModelError({ reason: "network", message })
const streamCut = () => new ModelError({ reason: "stream-cut", message: "the stream ended before the step finished" })
/** a connection failure as the model layer reports it: its kind, the host and port, the provider id */
const connection = (
  network: "dns" | "refused" | "blocked-port",
  host = "localhost",
  port = 11434,
  provider: string | undefined = "ollama"
) =>
  new ModelError({
    reason: "network",
    message: `${provider ?? "x"}/m: Cannot connect to API: …`,
    network,
    host,
    port,
    ...(provider === undefined ? {} : { provider })
  })
/** an HTTP error with the provider's own words, as the model layer extracts them */
const said = (status: number, providerMessage: string, body?: string) =>
  new ModelError({
    reason: "http",
    message: `HTTP ${status}: ${providerMessage}`,
    status,
    providerMessage,
    ...(body !== undefined ? { body } : {})
  })

/** attempt n (1-based) fails with the error returned, or succeeds with "ok" when undefined */
type Script = (n: number) => ModelError | undefined
const failing =
  (...errors: ReadonlyArray<ModelError>): Script =>
  (n) =>
    errors[n - 1]
const always =
  (error: ModelError): Script =>
  () =>
    error

const options = (overrides: Partial<RetryOptions> = {}): RetryOptions => ({ ...defaultRetryOptions, ...overrides })

interface Trace {
  /** Clock time when the run began */
  readonly started: number
  /** Clock time at the start of each attempt */
  readonly calls: Array<number>
  /** each onRetry call, with the Clock time it ran at */
  readonly hooks: Array<RetryInfo & { readonly at: number }>
  /** calls and hooks in the order they happened */
  readonly order: Array<string>
  readonly exit: Exit.Exit<string, RetryGaveUp>
}

/** Runs a scripted request under the retry driver in a fiber, drives the TestClock far ahead, records everything. */
const drive = (
  script: Script,
  opts: RetryOptions,
  config: { readonly random?: Random.Random; readonly attemptMs?: number } = {}
) =>
  Effect.gen(function* () {
    const started = yield* Clock.currentTimeMillis
    const calls: Array<number> = []
    const hooks: Array<RetryInfo & { at: number }> = []
    const order: Array<string> = []
    const request = Effect.gen(function* () {
      calls.push(yield* Clock.currentTimeMillis)
      order.push(`call ${calls.length}`)
      if (config.attemptMs !== undefined) yield* Effect.sleep(config.attemptMs)
      const error = script(calls.length)
      if (error !== undefined) return yield* error
      return "ok"
    })
    const retried = retrying(request, opts, {
      onRetry: (info) =>
        Effect.map(Clock.currentTimeMillis, (at) => {
          hooks.push({ ...info, at })
          order.push(`hook ${info.attempt}`)
        })
    }).pipe(Effect.withRandom(config.random ?? Random.fixed([1])))
    const fiber = yield* Effect.fork(retried)
    yield* TestClock.adjust("2 hours")
    const exit = yield* Fiber.await(fiber)
    return { started, calls, hooks, order, exit } satisfies Trace
  })

const gaveUp = (exit: Exit.Exit<unknown, RetryGaveUp>): RetryGaveUp => {
  if (Exit.isSuccess(exit)) throw new Error("expected a failure, got a success")
  const failure = Cause.failureOption(exit.cause)
  if (Option.isNone(failure)) throw new Error(`expected a typed failure, got ${Cause.pretty(exit.cause)}`)
  expect(failure.value).toBeInstanceOf(RetryGaveUp)
  return failure.value
}

const gaps = (times: ReadonlyArray<number>) => times.slice(1).map((t, i) => t - times[i]!)

// ---------------------------------------------------------------------------------------------
// classification

describe("classify", () => {
  const retryable: Array<[string, ModelError]> = [
    ["408 request timeout", http(408)],
    ["409 conflict", http(409)],
    ["429 rate limited", http(429)],
    ["500 internal server error", http(500)],
    ["502 bad gateway", http(502)],
    ["503 service unavailable", http(503)],
    ["504 gateway timeout", http(504)],
    ["529 overloaded", http(529)],
    [
      "an Anthropic overloaded_error body",
      http(500, {}, '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}')
    ],
    [
      "an overloaded error streamed mid-response (no status)",
      new ModelError({ reason: "stream-cut", message: "Overloaded", body: '{"type":"overloaded_error"}' })
    ],
    ["connection refused", network()],
    ["connection reset", network("read ECONNRESET")],
    ["a stream cut before the step finished", streamCut()]
  ]
  const final: Array<[string, ModelError, string]> = [
    ["400 validation", http(400, {}, '{"error":{"message":"messages: field required"}}'), "invalid request"],
    ["401 unauthorized", http(401, {}, '{"error":{"message":"Incorrect API key provided"}}'), "authentication failed"],
    ["403 forbidden", http(403), "permission denied"],
    ["404 unknown model", http(404, {}, '{"error":{"message":"model not found"}}'), "not found"],
    ["422 unprocessable", http(422), "invalid request"],
    ["501 not implemented", http(501), "not supported by the server"],
    [
      "OpenAI context_length_exceeded",
      http(
        400,
        {},
        '{"error":{"message":"This model\'s maximum context length is 128000 tokens.","code":"context_length_exceeded"}}'
      ),
      "context overflow"
    ],
    [
      "Anthropic prompt is too long",
      http(
        400,
        {},
        '{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}'
      ),
      "context overflow"
    ],
    [
      "a context overflow only in the message",
      new ModelError({
        reason: "http",
        status: 400,
        message: "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens."
      }),
      "context overflow"
    ],
    [
      "a content filter",
      http(400, {}, '{"error":{"code":"content_filter","message":"The response was filtered"}}'),
      "content filter"
    ],
    ["a content policy violation", http(400, {}, '{"error":{"code":"content_policy_violation"}}'), "content filter"],
    [
      "a configuration error",
      new ModelError({ reason: "config", message: "OPENAI_API_KEY is not set" }),
      "configuration error"
    ],
    [
      "an invalid response",
      new ModelError({ reason: "invalid-response", message: "chunk is not JSON: <html>" }),
      "invalid response"
    ]
  ]

  it.each(retryable)("%s is retryable", (_, error) => {
    expect(classify(error).retryable).toBe(true)
  })

  it.each(final)("%s is not retryable", (_, error, why) => {
    expect(classify(error)).toEqual({ retryable: false, why })
  })

  it("a context overflow wins over a retryable-looking status", () => {
    expect(classify(http(413, {}, "prompt is too long")).why).toBe("context overflow")
    expect(classify(http(429)).why).toBe("rate limited")
    expect(classify(http(529)).why).toBe("provider overloaded")
  })

  it("describes errors in a few words for the user", () => {
    expect(describeError(http(429))).toBe("429 rate limited")
    expect(describeError(http(529))).toBe("529 overloaded")
    expect(describeError(http(500, {}, '{"error":{"type":"overloaded_error"}}'))).toBe("500 overloaded")
    expect(describeError(http(400, {}, "context_length_exceeded"))).toBe("400 context overflow")
    expect(describeError(http(599))).toBe("599 HTTP 599")
    expect(describeError(network("read ECONNRESET"))).toBe("connection failed: read ECONNRESET")
    expect(describeError(streamCut())).toBe("stream cut: the stream ended before the step finished")
  })
})

// ---------------------------------------------------------------------------------------------
// Retry-After

describe("retryAfterMs", () => {
  const now = Date.parse("2026-03-01T12:00:00Z")

  it("reads retry-after-ms as milliseconds, decimals rounded up", () => {
    expect(retryAfterMs({ "retry-after-ms": "1500" }, now)).toBe(1500)
    expect(retryAfterMs({ "retry-after-ms": "250.4" }, now)).toBe(251)
  })

  it("reads retry-after as seconds, decimals allowed", () => {
    expect(retryAfterMs({ "retry-after": "7" }, now)).toBe(7000)
    expect(retryAfterMs({ "retry-after": "1.5" }, now)).toBe(1500)
    expect(retryAfterMs({ "retry-after": " 0 " }, now)).toBe(0)
  })

  it("reads retry-after as an HTTP-date relative to now; a past date is 0", () => {
    expect(retryAfterMs({ "retry-after": "Sun, 01 Mar 2026 12:00:30 GMT" }, now)).toBe(30_000)
    expect(retryAfterMs({ "retry-after": "Sun, 01 Mar 2026 11:59:00 GMT" }, now)).toBe(0)
  })

  it("prefers retry-after-ms, and falls back to retry-after when it is unreadable", () => {
    expect(retryAfterMs({ "retry-after-ms": "200", "retry-after": "1" }, now)).toBe(200)
    expect(retryAfterMs({ "retry-after-ms": "soon", "retry-after": "3" }, now)).toBe(3000)
  })

  it("gives undefined for missing, negative or unreadable values", () => {
    expect(retryAfterMs(undefined, now)).toBeUndefined()
    expect(retryAfterMs({}, now)).toBeUndefined()
    expect(retryAfterMs({ "retry-after": "-5" }, now)).toBeUndefined()
    expect(retryAfterMs({ "retry-after-ms": "-5" }, now)).toBeUndefined()
    expect(retryAfterMs({ "retry-after": "soon" }, now)).toBeUndefined()
    expect(retryAfterMs({ "retry-after": "Someday, 99 Foo 20xx" }, now)).toBeUndefined()
    expect(retryAfterMs({ "retry-after": "" }, now)).toBeUndefined()
  })

  it("finds headers whatever their case", () => {
    expect(retryAfterMs({ "Retry-After": "2" }, now)).toBe(2000)
  })
})

// ---------------------------------------------------------------------------------------------
// the policy, under TestClock

describe("retrying by the policy driver", () => {
  it.effect("backs off exponentially up to maxDelayMs (jitter at its maximum)", () =>
    Effect.gen(function* () {
      const trace = yield* drive(always(http(503)), options({ maxAttempts: 8, budgetMs: 10 * 60_000 }))
      expect(trace.hooks.map((h) => h.delayMs)).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000])
      expect(gaps(trace.calls)).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000])
      // nextAt is the clock time of the next attempt
      expect(trace.hooks.map((h) => h.nextAt)).toEqual(trace.calls.slice(1))
      expect(trace.hooks.map((h) => h.message)).toEqual(Array(7).fill("503 service unavailable"))
    })
  )

  it.effect("equal jitter: the lowest random value waits half the backoff", () =>
    Effect.gen(function* () {
      const trace = yield* drive(failing(http(429), http(429), http(429)), options(), { random: Random.fixed([0]) })
      expect(trace.exit).toEqual(Exit.succeed("ok"))
      expect(trace.hooks.map((h) => h.delayMs)).toEqual([500, 1000, 2000])
    })
  )

  it.effect("a seeded random gives jittered delays within [backoff / 2, backoff]", () =>
    Effect.gen(function* () {
      const trace = yield* drive(always(streamCut()), options({ budgetMs: 10 * 60_000 }), {
        random: Random.make("a seed")
      })
      const delays = trace.hooks.map((h) => h.delayMs)
      expect(delays).toHaveLength(7)
      delays.forEach((delay, i) => {
        const base = Math.min(30_000, 1000 * 2 ** i)
        expect(delay).toBeGreaterThanOrEqual(base / 2)
        expect(delay).toBeLessThanOrEqual(base)
      })
      // the jitter is really there: not every delay is the maximum
      expect(delays.some((delay, i) => delay !== Math.min(30_000, 1000 * 2 ** i))).toBe(true)
      expect(gaps(trace.calls)).toEqual(delays)
    })
  )

  it("backoffMs is capped and jittered between half and all of the exponential delay", () => {
    const o = options({ initialDelayMs: 1000, maxDelayMs: 5000 })
    expect([1, 2, 3, 4, 5].map((n) => backoffMs(o, n, 1))).toEqual([1000, 2000, 4000, 5000, 5000])
    expect([1, 2, 3, 4].map((n) => backoffMs(o, n, 0))).toEqual([500, 1000, 2000, 2500])
    expect(backoffMs(o, 2, 0.5)).toBe(1500)
  })

  it.effect("a retry-after-ms longer than the backoff sets the wait", () =>
    Effect.gen(function* () {
      const trace = yield* drive(
        failing(http(429, { "retry-after-ms": "1500" }), http(429, { "retry-after-ms": "2750.5" })),
        options()
      )
      expect(trace.exit).toEqual(Exit.succeed("ok"))
      expect(trace.hooks.map((h) => h.delayMs)).toEqual([1500, 2751])
      expect(trace.calls).toEqual([0, 1500, 4251])
    })
  )

  it.effect("a retry-after in seconds longer than the backoff sets the wait, beyond maxDelayMs too", () =>
    Effect.gen(function* () {
      const trace = yield* drive(failing(http(503, { "retry-after": "45" })), options({ maxDelayMs: 10_000 }))
      expect(trace.exit).toEqual(Exit.succeed("ok"))
      expect(trace.hooks.map((h) => h.delayMs)).toEqual([45_000])
      expect(trace.calls).toEqual([0, 45_000])
    })
  )

  it.effect("retry-after as an HTTP-date waits until that date on the Clock", () =>
    Effect.gen(function* () {
      const start = Date.parse("2026-03-01T12:00:00Z")
      yield* TestClock.setTime(start)
      const trace = yield* drive(failing(http(429, { "retry-after": "Sun, 01 Mar 2026 12:00:12 GMT" })), options())
      expect(trace.exit).toEqual(Exit.succeed("ok"))
      expect(trace.hooks).toMatchObject([{ attempt: 2, delayMs: 12_000, nextAt: start + 12_000 }])
      expect(trace.calls).toEqual([start, start + 12_000])
    })
  )

  // Behaviour change (issue 9 §2): the provider's wait used to *replace* the backoff (raised to the
  // floor), so `Retry-After: 0` every time meant a request every 500 ms; now it can only lengthen it.
  it.effect("Retry-After: 0 every time gets growing waits (the backoff), never a constant rate", () =>
    Effect.gen(function* () {
      const errors = Array.from({ length: 6 }, () => http(429, { "retry-after": "0" }))
      const trace = yield* drive(failing(...errors), options({ maxAttempts: 10, minRetryAfterMs: 500 }))
      expect(trace.exit).toEqual(Exit.succeed("ok"))
      expect(trace.calls).toHaveLength(7)
      expect(trace.hooks.map((h) => h.delayMs)).toEqual([1000, 2000, 4000, 8000, 16000, 30000])
      expect(gaps(trace.calls)).toEqual([1000, 2000, 4000, 8000, 16000, 30000])
    })
  )

  it.effect("a provider's wait is raised to the floor when the backoff is shorter than both", () =>
    Effect.gen(function* () {
      // backoff 100, 200, 400, 800, 1600, 3200 ms; floor 500: max(0, backoff, 500)
      const errors = Array.from({ length: 6 }, () => http(429, { "retry-after": "0" }))
      const trace = yield* drive(
        failing(...errors),
        options({ maxAttempts: 10, initialDelayMs: 100, minRetryAfterMs: 500 })
      )
      expect(trace.hooks.map((h) => h.delayMs)).toEqual([500, 500, 500, 800, 1600, 3200])
      // 6 errors took at least 6 x the floor of clock time
      expect(trace.calls[6]! - trace.calls[0]!).toBeGreaterThanOrEqual(6 * 500)
      // the default floor applies when none is configured, to retry-after-ms and past dates too
      const ms = yield* drive(failing(http(429, { "retry-after-ms": "0" })), {
        ...options({ initialDelayMs: 100 }),
        minRetryAfterMs: undefined
      })
      expect(ms.hooks.map((h) => h.delayMs)).toEqual([defaultRetryOptions.minRetryAfterMs])
      const past = yield* drive(
        failing(http(429, { "retry-after": "Thu, 01 Jan 1970 00:00:00 GMT" })),
        options({ initialDelayMs: 100 })
      )
      expect(past.hooks.map((h) => h.delayMs)).toEqual([500])
      // no ask, no floor: the backoff alone
      const none = yield* drive(failing(http(429)), options({ initialDelayMs: 100 }))
      expect(none.hooks.map((h) => h.delayMs)).toEqual([100])
    })
  )

  it.effect("a Retry-After shorter than the backoff already due waits the backoff (max rule)", () =>
    Effect.gen(function* () {
      // attempts 1-3 fail without an ask (1 s, 2 s, 4 s); attempt 4 asks for 1 s while 8 s is due
      const trace = yield* drive(
        failing(http(503), http(503), http(503), http(429, { "retry-after": "1" }), http(429, { "retry-after": "20" })),
        options()
      )
      expect(trace.exit).toEqual(Exit.succeed("ok"))
      expect(trace.hooks.map((h) => h.delayMs)).toEqual([1000, 2000, 4000, 8000, 20000])
      expect(gaps(trace.calls)).toEqual([1000, 2000, 4000, 8000, 20000])
    })
  )

  it("decide: fromServer says whether the provider's wait set the delay", () => {
    const at = { attempt: 3, now: 0, startedAt: 0, random: 1 }
    // the backoff due after attempt 3 is 4 s
    const longer = decide(options(), { ...at, error: http(429, { "retry-after": "5" }) })
    expect(longer).toMatchObject({ _tag: "Retry", delayMs: 5000, fromServer: true })
    const shorter = decide(options(), { ...at, error: http(429, { "retry-after": "1" }) })
    expect(shorter).toMatchObject({ _tag: "Retry", delayMs: 4000, fromServer: false })
    const none = decide(options(), { ...at, error: http(503) })
    expect(none).toMatchObject({ _tag: "Retry", delayMs: 4000, fromServer: false })
  })

  it.effect("a wait past maxRetryAfterMs fails at once, naming the wait", () =>
    Effect.gen(function* () {
      const trace = yield* drive(always(http(429, { "retry-after": "120" })), options({ maxRetryAfterMs: 60_000 }))
      const error = gaveUp(trace.exit)
      expect(error.reason).toBe("retry-after-too-long")
      expect(error.attempts).toBe(1)
      expect(error.message).toBe(
        "the provider asked to wait 120s, more than retry.maxRetryAfterMs (60s): 429 rate limited"
      )
      expect(error.error.status).toBe(429)
      expect(trace.calls).toEqual([0])
      expect(trace.hooks).toEqual([])
    })
  )

  it.effect("makes exactly maxAttempts attempts, then gives up with the last error", () =>
    Effect.gen(function* () {
      let n = 0
      const trace = yield* drive(() => http(n++ < 3 ? 503 : 429), options({ maxAttempts: 4 }))
      expect(trace.calls).toHaveLength(4)
      expect(trace.hooks.map((h) => [h.attempt, h.maxAttempts])).toEqual([
        [2, 4],
        [3, 4],
        [4, 4]
      ])
      const error = gaveUp(trace.exit)
      expect(error).toMatchObject({ reason: "max-attempts", attempts: 4 })
      expect(error.message).toBe("gave up after 4 attempts: 429 rate limited")
      expect(error.error.status).toBe(429)
      expect(error.retryable).toBe(true)
    })
  )

  it.effect("maxAttempts 1 never retries", () =>
    Effect.gen(function* () {
      const trace = yield* drive(always(http(503)), options({ maxAttempts: 1 }))
      expect(trace.calls).toEqual([0])
      expect(gaveUp(trace.exit).message).toBe("gave up after 1 attempt: 503 service unavailable")
    })
  )

  it.effect("stops when a wait would end past the budget, counted from the first attempt's start", () =>
    Effect.gen(function* () {
      // each attempt takes 2s: 0-2s, wait 1s, 3-5s, wait 2s, 7-9s, then a 4s wait would end at 13s > 10s
      const trace = yield* drive(always(http(500)), options({ budgetMs: 10_000 }), { attemptMs: 2000 })
      expect(trace.calls).toEqual([0, 3000, 7000])
      const error = gaveUp(trace.exit)
      expect(error).toMatchObject({ reason: "budget", attempts: 3 })
      expect(error.message).toBe(
        "gave up after 3 attempts: waiting 4s more would pass retry.budgetMs (10s): 500 internal server error"
      )
    })
  )

  it.effect("a Retry-After that would pass the budget gives up too", () =>
    Effect.gen(function* () {
      const trace = yield* drive(always(http(429, { "retry-after": "30" })), options({ budgetMs: 20_000 }))
      expect(trace.calls).toEqual([0])
      expect(gaveUp(trace.exit)).toMatchObject({ reason: "budget", attempts: 1 })
    })
  )

  it.effect("non-retryable errors fail at once: one call, no hook, no time", () =>
    Effect.gen(function* () {
      for (const error of [
        http(401, {}, "invalid x-api-key"),
        http(400, {}, "context_length_exceeded"),
        http(400, {}, "content_filter"),
        new ModelError({ reason: "config", message: "no API key" })
      ]) {
        const trace = yield* drive(always(error), options())
        expect(trace.calls).toEqual([trace.started])
        expect(trace.hooks).toEqual([])
        const gave = gaveUp(trace.exit)
        expect(gave).toMatchObject({ reason: "not-retryable", attempts: 1 })
        expect(gave.error).toBe(error)
        expect(gave.retryable).toBe(false)
      }
    })
  )

  it.effect("a non-retryable error after retries ends the retrying there", () =>
    Effect.gen(function* () {
      const trace = yield* drive(failing(http(503), http(401), http(503)), options())
      expect(trace.calls).toEqual([0, 1000])
      const error = gaveUp(trace.exit)
      expect(error).toMatchObject({ reason: "not-retryable", attempts: 2 })
      expect(error.message).toBe(
        "401 unauthorized (authentication failed), not retried: check the API key (the env var named by provider.<id>.apiKeyEnv)"
      )
    })
  )

  it.effect("the hook runs before each wait, with the attempt about to be made", () =>
    Effect.gen(function* () {
      const trace = yield* drive(failing(http(429), network(), streamCut()), options())
      expect(trace.exit).toEqual(Exit.succeed("ok"))
      expect(trace.order).toEqual(["call 1", "hook 2", "call 2", "hook 3", "call 3", "hook 4", "call 4"])
      // each hook runs when the failure happens, before the clock moves on
      expect(trace.hooks.map((h) => h.at)).toEqual(trace.calls.slice(0, 3))
      expect(trace.hooks.map((h) => h.attempt)).toEqual([2, 3, 4])
      expect(trace.hooks.map((h) => h.message)).toEqual([
        "429 rate limited",
        "connection failed: connect ECONNREFUSED 127.0.0.1:11434",
        "stream cut: the stream ended before the step finished"
      ])
      expect(trace.hooks.map((h) => h.error.reason)).toEqual(["http", "network", "stream-cut"])
    })
  )

  it.effect("succeeds on the first try without hooks or waiting", () =>
    Effect.gen(function* () {
      const trace = yield* drive(() => undefined, options())
      expect(trace.exit).toEqual(Exit.succeed("ok"))
      expect(trace.calls).toEqual([0])
      expect(trace.hooks).toEqual([])
    })
  )

  it.effect("a failing hook ends the retrying with its error", () =>
    Effect.gen(function* () {
      class StoreDown extends Schema.TaggedError<StoreDown>()("StoreDown", {}) {}
      let calls = 0
      const request = Effect.suspend(() => {
        calls++
        return Effect.fail(http(503))
      })
      const exit = yield* Effect.exit(retrying(request, options(), { onRetry: () => new StoreDown() }))
      expect(exit).toEqual(Exit.fail(new StoreDown()))
      expect(calls).toBe(1)
    })
  )

  it.effect("the Retry service applies its options", () =>
    Effect.gen(function* () {
      const retry = yield* Retry
      expect(retry.options.minRetryAfterMs).toBe(500)
      let calls = 0
      const request = Effect.suspend(() => {
        calls++
        return Effect.fail(http(503))
      })
      const fiber = yield* Effect.fork(
        Effect.flatMap(retry.driver(), (d) => Effect.retryOrElse(request, d, stopRetrying))
      )
      yield* TestClock.adjust("1 hour")
      const error = gaveUp(yield* Fiber.await(fiber))
      expect(error.attempts).toBe(3)
      expect(calls).toBe(3)
    }).pipe(Effect.provide(Retry.layer({ ...defaultRetryOptions, maxAttempts: 3, minRetryAfterMs: undefined })))
  )
  it.effect("a hook that takes time does not lengthen the wait: the next attempt starts at nextAt", () =>
    Effect.gen(function* () {
      const calls: Array<number> = []
      const hooks: Array<RetryInfo> = []
      const request = Effect.gen(function* () {
        calls.push(yield* Clock.currentTimeMillis)
        return calls.length < 3 ? yield* http(503) : "ok"
      })
      const retried = retrying(request, options(), {
        // appending takes 300 ms
        onRetry: (info) => Effect.sleep(300).pipe(Effect.tap(() => hooks.push(info)))
      }).pipe(Effect.withRandom(Random.fixed([1])))
      const fiber = yield* Effect.fork(retried)
      yield* TestClock.adjust("1 hour")
      expect(yield* Fiber.await(fiber)).toEqual(Exit.succeed("ok"))
      expect(calls).toEqual([0, 1000, 3000])
      expect(hooks.map((h) => h.nextAt)).toEqual([1000, 3000])
    })
  )

  it.effect("an interrupt during the wait stops the retrying: no further attempt", () =>
    Effect.gen(function* () {
      let calls = 0
      const hooks: Array<number> = []
      const request = Effect.suspend(() => {
        calls++
        return Effect.fail(http(503))
      })
      const fiber = yield* Effect.fork(
        retrying(request, options(), { onRetry: (info) => Effect.sync(() => hooks.push(info.attempt)) }).pipe(
          Effect.withRandom(Random.fixed([1]))
        )
      )
      // the first wait is 1 s: interrupt half-way through it
      yield* TestClock.adjust(500)
      expect(calls).toBe(1)
      expect(hooks).toEqual([2])
      const exit = yield* Fiber.interrupt(fiber)
      expect(Exit.isInterrupted(exit)).toBe(true)
      yield* TestClock.adjust("1 hour")
      expect(calls).toBe(1)
      expect(hooks).toEqual([2])
    })
  )

  it.effect("given decisions take the policy's place: a given retry is taken at once, a given end ends it", () =>
    Effect.gen(function* () {
      const replayed = http(503, {}, "replayed")
      const ended = http(429, {}, "ended")
      const script = failing(replayed, replayed, http(503), ended)
      const seen: Array<{ readonly attempt: number; readonly now: number }> = []
      const calls: Array<number> = []
      const hooks: Array<RetryInfo> = []
      const request = Effect.gen(function* () {
        calls.push(yield* Clock.currentTimeMillis)
        const error = script(calls.length)
        return error === undefined ? "ok" : yield* error
      })
      const retried = retrying(
        request,
        options(),
        { onRetry: (info) => Effect.sync(() => hooks.push(info)) },
        ({ error, attempt, now }) => {
          seen.push({ attempt, now })
          if (error === replayed)
            return {
              _tag: "Retry",
              attempt: attempt + 1,
              delayMs: 7000,
              nextAt: now + 7000,
              fromServer: false,
              message: "recorded"
            }
          if (error === ended) return { _tag: "GiveUp", reason: "max-attempts", message: "recorded end" }
          return undefined
        }
      ).pipe(Effect.withRandom(Random.fixed([1])))
      const fiber = yield* Effect.fork(retried)
      yield* TestClock.adjust("1 hour")
      // two given retries without a wait, then the policy's own (attempt 3 failed: 4 s), then a given end
      expect(calls).toEqual([0, 0, 0, 4000])
      expect(seen.map((s) => s.attempt)).toEqual([1, 2, 3, 4])
      expect(hooks.map((h) => [h.attempt, h.delayMs, h.message])).toEqual([
        [2, 7000, "recorded"],
        [3, 7000, "recorded"],
        [4, 4000, "503 service unavailable"]
      ])
      const error = gaveUp(yield* Fiber.await(fiber))
      expect(error).toMatchObject({ reason: "max-attempts", attempts: 4, message: "recorded end" })
      expect(error.error).toBe(ended)
    })
  )
})

// ---------------------------------------------------------------------------------------------
// the provider's words

describe("the provider's message in what the user sees", () => {
  const thinking =
    "messages.1.content.0: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a final `assistant` message must start with a thinking block."

  it("describe puts the provider's words after the status", () => {
    expect(describeError(said(400, thinking))).toBe(`400 bad request: ${thinking}`)
    expect(describeError(said(429, "Rate limit reached for gpt-4.1 on tokens per min (TPM)"))).toBe(
      "429 rate limited: Rate limit reached for gpt-4.1 on tokens per min (TPM)"
    )
    // a status without a name: the reason in a few words, then the words
    expect(describeError(said(418, "I'm a teapot"))).toBe("418 invalid request: I'm a teapot")
  })

  it("words that only repeat the status are left out", () => {
    expect(describeError(said(529, "Overloaded"))).toBe("529 overloaded")
    expect(describeError(said(500, "Internal Server Error"))).toBe("500 internal server error")
    expect(describeError(said(429, "Too Many Requests"))).toBe("429 rate limited")
    expect(describeError(said(502, "Bad Gateway"))).toBe("502 bad gateway")
    // whole words of the status line, not parts of them
    expect(describeError(said(429, "Rate limited"))).toBe("429 rate limited")
    expect(describeError(said(429, "ted"))).toBe("429 rate limited: ted")
  })

  it("a long message is cut to one line of at most 300 characters", () => {
    const line = describeError(said(400, `${"word ".repeat(200)}\nsecond line`))
    expect(line.startsWith("400 bad request: word word")).toBe(true)
    expect(line).not.toContain("\n")
    expect(line.length).toBeLessThanOrEqual("400 bad request: ".length + 300)
    expect(line.endsWith("…")).toBe(true)
  })

  it("a final error: our sentence and hint first, then what the provider said, marked as theirs", () => {
    const at = { attempt: 1, now: 0, startedAt: 0, random: 1 }
    expect(decide(options(), { ...at, error: said(400, thinking) })).toEqual({
      _tag: "GiveUp",
      reason: "not-retryable",
      message: `400 bad request (invalid request), not retried. The provider said: ${thinking}`
    })
    expect(decide(options(), { ...at, error: said(401, "invalid x-api-key") })).toMatchObject({
      message:
        "401 unauthorized (authentication failed), not retried: check the API key (the env var named by " +
        "provider.<id>.apiKeyEnv). The provider said: invalid x-api-key"
    })
    const overflow = said(400, "prompt is too long: 210000 tokens > 200000 maximum")
    expect(decide(options(), { ...at, error: overflow })).toMatchObject({
      message:
        "400 context overflow, not retried: the conversation is longer than the model's context window; start a " +
        "new session or compact. The provider said: prompt is too long: 210000 tokens > 200000 maximum"
    })
  })

  it.effect("a 429's reason is in every model.retry message and in the final one", () =>
    Effect.gen(function* () {
      const quota = said(429, "You exceeded your current quota, please check your plan and billing details.")
      const trace = yield* drive(always(quota), options({ maxAttempts: 3 }))
      expect(trace.hooks.map((h) => h.message)).toEqual([
        "429 rate limited: You exceeded your current quota, please check your plan and billing details.",
        "429 rate limited: You exceeded your current quota, please check your plan and billing details."
      ])
      expect(gaveUp(trace.exit).message).toBe(
        "gave up after 3 attempts: 429 rate limited: You exceeded your current quota, please check your plan and billing details."
      )
    })
  )
})

// ---------------------------------------------------------------------------------------------
// connection failures

describe("connection failures by kind", () => {
  it("a host that does not resolve and a refused connection are retried; a blocked port is not", () => {
    expect(classify(connection("dns"))).toEqual({ retryable: true, why: "host not found" })
    expect(classify(connection("refused"))).toEqual({ retryable: true, why: "connection refused" })
    expect(classify(connection("blocked-port", "127.0.0.1", 1))).toEqual({ retryable: false, why: "blocked port" })
    // without a kind (a reset, a timeout): as before
    expect(classify(network("read ECONNRESET"))).toEqual({ retryable: true, why: "connection failed" })
  })

  it("describe names the host and port", () => {
    expect(describeError(connection("refused"))).toBe("cannot connect to localhost:11434 (connection refused)")
    expect(describeError(connection("refused", "[::1]", 8080))).toBe(
      "cannot connect to [::1]:8080 (connection refused)"
    )
    expect(describeError(connection("dns", "api.example.com", 443))).toBe("the host api.example.com does not resolve")
  })

  it.effect(
    "a refused connection: the fast policy (3 attempts within seconds), then a sentence naming host, port and what to check",
    () =>
      Effect.gen(function* () {
        const trace = yield* drive(always(connection("refused")), options({ budgetMs: 10 * 60_000 }))
        expect(trace.calls).toHaveLength(fastFailPolicy.maxAttempts)
        // jitter at its maximum: 0.5 s, then 1 s (capped at fastFailPolicy.maxDelayMs)
        expect(gaps(trace.calls)).toEqual([500, 1000])
        expect(trace.calls.at(-1)! - trace.calls[0]!).toBeLessThanOrEqual(fastFailPolicy.budgetMs)
        expect(trace.hooks.map((h) => [h.attempt, h.message])).toEqual([
          [2, "cannot connect to localhost:11434 (connection refused)"],
          [3, "cannot connect to localhost:11434 (connection refused)"]
        ])
        const error = gaveUp(trace.exit)
        expect(error).toMatchObject({ reason: "max-attempts", attempts: 3 })
        expect(error.message).toBe(
          "gave up after 3 attempts: cannot connect to localhost:11434 (connection refused): is the server running? check provider.ollama.baseURL"
        )
      })
  )

  it.effect("a host that does not resolve: the fast policy, then what to check", () =>
    Effect.gen(function* () {
      const trace = yield* drive(always(connection("dns", "api.example.com", 443, "x")), options())
      expect(trace.calls).toHaveLength(3)
      expect(gaveUp(trace.exit).message).toBe(
        "gave up after 3 attempts: the host api.example.com does not resolve: check provider.x.baseURL and your network"
      )
    })
  )

  it.effect("slow lookups: the fast budget (3 s from the first attempt) ends it with the same sentence", () =>
    Effect.gen(function* () {
      // each attempt takes 2 s: 0-2 s, wait 0.5 s, 2.5-4.5 s; a further wait would end past 3 s
      const trace = yield* drive(always(connection("dns", "api.example.com", 443, "x")), options(), {
        attemptMs: 2000
      })
      expect(trace.calls).toEqual([0, 2500])
      const error = gaveUp(trace.exit)
      expect(error).toMatchObject({ reason: "budget", attempts: 2 })
      expect(error.message).toBe(
        "gave up after 2 attempts: the host api.example.com does not resolve: check provider.x.baseURL and your network"
      )
    })
  )

  it.effect("the tighter limit wins: retry.maxAttempts 2 makes 2 attempts; fastFail can be set in the options", () =>
    Effect.gen(function* () {
      const two = yield* drive(always(connection("refused")), options({ maxAttempts: 2 }))
      expect(two.calls).toHaveLength(2)
      const custom = yield* drive(
        always(connection("refused")),
        options({ fastFail: { maxAttempts: 5, initialDelayMs: 100, maxDelayMs: 100, budgetMs: 10_000 } })
      )
      expect(gaps(custom.calls)).toEqual([100, 100, 100, 100])
      // the backoff of the options is used when it is the shorter one (a test config's 1 ms)
      const quick = yield* drive(always(connection("refused")), options({ initialDelayMs: 1, maxDelayMs: 5 }))
      expect(gaps(quick.calls)).toEqual([1, 2])
    })
  )

  it.effect("other connection failures keep the whole policy: a reset is retried up to maxAttempts", () =>
    Effect.gen(function* () {
      const trace = yield* drive(always(network("read ECONNRESET")), options({ budgetMs: 10 * 60_000 }))
      expect(trace.calls).toHaveLength(8)
    })
  )

  it.effect("a connection failure after other errors: the fast limits count every attempt", () =>
    Effect.gen(function* () {
      const trace = yield* drive(failing(http(503), http(503), connection("refused"), connection("refused")), options())
      expect(trace.calls).toHaveLength(3)
      expect(gaveUp(trace.exit)).toMatchObject({ reason: "max-attempts", attempts: 3 })
    })
  )

  it.effect("a blocked port is not retried: the sentence says which port and what to do", () =>
    Effect.gen(function* () {
      const trace = yield* drive(always(connection("blocked-port", "127.0.0.1", 6000, "local")), options())
      expect(trace.calls).toHaveLength(1)
      expect(gaveUp(trace.exit).message).toBe(
        "cannot connect to 127.0.0.1:6000 (blocked port), not retried: fetch never connects to port 6000 (it is on " +
          "the fetch standard's list of blocked ports); run the server on another port and change provider.local.baseURL"
      )
    })
  )

  it("without a provider id or host the hints still read", () => {
    const bare = new ModelError({ reason: "network", message: "x", network: "refused" })
    expect(describeError(bare)).toBe("cannot connect (connection refused)")
    const at = { attempt: 3, now: 0, startedAt: 0, random: 1 }
    expect(decide(options(), { ...at, error: bare })).toMatchObject({
      message:
        "gave up after 3 attempts: cannot connect (connection refused): is the server running? check the provider's baseURL"
    })
  })
})

// ---------------------------------------------------------------------------------------------
// the Schedule form

describe("schedule", () => {
  const run = (script: Script, opts: RetryOptions) =>
    Effect.gen(function* () {
      const calls: Array<number> = []
      const request = Effect.gen(function* () {
        calls.push(yield* Clock.currentTimeMillis)
        const error = script(calls.length)
        if (error !== undefined) return yield* error
        return "ok"
      })
      const fiber = yield* Effect.fork(Effect.retry(request, schedule(opts)).pipe(Effect.withRandom(Random.fixed([1]))))
      yield* TestClock.adjust("1 hour")
      return { calls, exit: yield* Fiber.await(fiber) }
    })

  it.effect("waits the same delays as the policy driver and stops at maxAttempts with the last ModelError", () =>
    Effect.gen(function* () {
      const { calls, exit } = yield* run(always(http(503)), options({ maxAttempts: 4 }))
      expect(calls).toEqual([0, 1000, 3000, 7000])
      expect(exit).toEqual(Exit.fail(http(503)))
    })
  )

  it.effect("policy: the output is the latest step, the GiveUp included, so retryOrElse gets why it stopped", () =>
    Effect.gen(function* () {
      // the first attempt started at 0; each attempt takes 2 s: the budget is counted from 0, not from the first failure
      const calls: Array<number> = []
      const request = Effect.gen(function* () {
        calls.push(yield* Clock.currentTimeMillis)
        yield* Effect.sleep(2000)
        return yield* http(500)
      })
      const fiber = yield* Effect.fork(
        Effect.retryOrElse(request, policy(options({ budgetMs: 10_000 }), { startedAt: 0 }), (error, step) =>
          Effect.succeed({ error, step })
        ).pipe(Effect.withRandom(Random.fixed([1])))
      )
      yield* TestClock.adjust("1 hour")
      const exit = yield* Fiber.await(fiber)
      expect(calls).toEqual([0, 3000, 7000])
      expect(exit).toMatchObject({
        _tag: "Success",
        value: {
          error: http(500),
          step: { _tag: "RetryStep", attempts: 3, decision: { _tag: "GiveUp", reason: "budget" } }
        }
      })
      // a first error that is final: the GiveUp is there too
      const final = yield* Effect.retryOrElse(Effect.fail(http(401)), policy(options()), (_, step) =>
        Effect.succeed(step)
      )
      expect(final).toMatchObject({ attempts: 1, decision: { _tag: "GiveUp", reason: "not-retryable" } })
    })
  )

  it.effect("honours Retry-After (never shorter than the backoff), and stops at once on a non-retryable error", () =>
    Effect.gen(function* () {
      // max(0, 1000 backoff, 500 floor) = 1000; then max(2500, 2000 backoff) = 2500
      const floor = yield* run(
        failing(http(429, { "retry-after": "0" }), http(429, { "retry-after-ms": "2500" })),
        options()
      )
      expect(floor.calls).toEqual([0, 1000, 3500])
      expect(floor.exit).toEqual(Exit.succeed("ok"))
      const started = yield* Clock.currentTimeMillis
      const final = yield* run(always(http(401)), options())
      expect(final.calls).toEqual([started])
      expect(Exit.isFailure(final.exit)).toBe(true)
    })
  )
})
