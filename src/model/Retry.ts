/**
 * Retrying model requests (DESIGN §5): which `ModelError`s are worth another try, how long to wait,
 * and when to give up.
 *
 * The policy: exponential backoff with equal jitter, each delay capped at `maxDelayMs`; a
 * `retry-after-ms` / `Retry-After` header makes a wait longer, never shorter: the wait is the largest
 * of the provider's, the backoff and `minRetryAfterMs` (so `Retry-After: 0` cannot start a storm), and
 * an ask past `maxRetryAfterMs` fails the request at once, naming the wait; at most `maxAttempts`
 * attempts in all, the first included; and a total budget `budgetMs`, measured with `Clock` from the
 * start of the first attempt. A host that does not resolve or a refused connection gets the short
 * `fastFail` policy (a few attempts within seconds), then a sentence naming the host and port.
 *
 * The one driver is the policy's `Schedule` (`policy`): a request is retried by
 * `Effect.retryOrElse(request, driver, gaveUp)`, where `driver` is the policy started now with
 * `onRetry` run from the schedule before every wait (to append `model.retry` and set
 * `session.status retry`), and `gaveUp` fails with a `RetryGaveUp` that says why retrying stopped,
 * built from the schedule's last output. `schedule` is the policy's decisions alone, for a plain `Effect.retry`.
 * Both use `Clock` and `Random`, so `TestClock` and `Random.fixed` drive them in tests.
 * See docs/retry.md.
 */
import {
  Clock,
  Context,
  Effect,
  Layer,
  Random,
  Schedule,
  ScheduleDecision,
  ScheduleInterval,
  ScheduleIntervals,
  Schema
} from "effect"
import { capLine } from "./internal/providerError.js"
import { ModelError, maxProviderMessageLength } from "./Model.js"

// ---------------------------------------------------------------------------------------------
// options

export interface RetryOptions {
  /** attempts in all, the first one included (1 = never retry) */
  readonly maxAttempts: number
  /** the base delay before the first retry; doubles for each further retry */
  readonly initialDelayMs: number
  /** cap of each computed (backoff) delay */
  readonly maxDelayMs: number
  /** the longest server-requested wait (Retry-After) we accept; longer ones fail at once */
  readonly maxRetryAfterMs: number
  /** total time from the start of the first attempt after which no further wait is started */
  readonly budgetMs: number
  /** the shortest wait a server can ask for (Retry-After is raised to it); default 500 */
  readonly minRetryAfterMs?: number | undefined
  /**
   * the tighter limits for a host that does not resolve or a refused connection (each the smaller
   * of this and the option above); default `fastFailPolicy`
   */
  readonly fastFail?: FastFailOptions | undefined
}

/** Limits for connection failures that waiting minutes will not fix (DNS, connection refused). */
export interface FastFailOptions {
  readonly maxAttempts: number
  readonly initialDelayMs: number
  readonly maxDelayMs: number
  readonly budgetMs: number
}

/**
 * A host that does not resolve or a refused connection: 3 attempts in all, waits of 0.25–0.5 s and
 * 0.5–1 s between them, and no wait that ends more than 3 s after the first attempt started.
 */
export const fastFailPolicy = {
  maxAttempts: 3,
  initialDelayMs: 500,
  maxDelayMs: 1_000,
  budgetMs: 3_000
} as const satisfies FastFailOptions

/** options with every field set (the floor included) */
export type ResolvedRetryOptions = { readonly [K in keyof RetryOptions]-?: Exclude<RetryOptions[K], undefined> }

export const defaultRetryOptions = {
  maxAttempts: 8,
  initialDelayMs: 1_000,
  maxDelayMs: 30_000,
  maxRetryAfterMs: 60_000,
  budgetMs: 300_000,
  minRetryAfterMs: 500,
  fastFail: fastFailPolicy
} as const satisfies ResolvedRetryOptions

const resolve = (options: RetryOptions): ResolvedRetryOptions => ({
  maxAttempts: Math.max(1, Math.floor(options.maxAttempts)),
  initialDelayMs: Math.max(0, options.initialDelayMs),
  maxDelayMs: Math.max(0, options.maxDelayMs),
  maxRetryAfterMs: Math.max(0, options.maxRetryAfterMs),
  budgetMs: Math.max(0, options.budgetMs),
  minRetryAfterMs: Math.max(0, options.minRetryAfterMs ?? defaultRetryOptions.minRetryAfterMs),
  fastFail: options.fastFail ?? fastFailPolicy
})

/** The limits for an error the fast policy applies to: each the tighter of the two. */
const tightened = (o: ResolvedRetryOptions): ResolvedRetryOptions => ({
  ...o,
  maxAttempts: Math.max(1, Math.min(o.maxAttempts, Math.floor(o.fastFail.maxAttempts))),
  initialDelayMs: Math.max(0, Math.min(o.initialDelayMs, o.fastFail.initialDelayMs)),
  maxDelayMs: Math.max(0, Math.min(o.maxDelayMs, o.fastFail.maxDelayMs)),
  budgetMs: Math.max(0, Math.min(o.budgetMs, o.fastFail.budgetMs))
})

/** A host that does not resolve or a refused connection: the fast policy applies. */
const isFastFail = (error: ModelError): boolean =>
  error.reason === "network" && (error.network === "dns" || error.network === "refused")

// ---------------------------------------------------------------------------------------------
// classification

export interface Classification {
  readonly retryable: boolean
  /** a few words: "rate limited", "context overflow", "authentication failed" … */
  readonly why: string
}

const CONTEXT_OVERFLOW =
  /context_length_exceeded|context length|context window|maximum context|prompt is too long|input is too long|too many (input )?tokens|exceeds? the (model's )?(maximum|max) (number of )?tokens/i
const CONTENT_FILTER =
  /content[_ ]filter|content[_ ]policy|content management policy|responsible ?ai policy|safety system|invalid_prompt/i
const OVERLOADED = /overloaded/i
const RATE_LIMITED = /rate[_ ]limit/i

const STATUS_NAMES: Readonly<Record<number, string>> = {
  400: "bad request",
  401: "unauthorized",
  402: "payment required",
  403: "forbidden",
  404: "not found",
  405: "method not allowed",
  408: "request timeout",
  409: "conflict",
  413: "request too large",
  422: "unprocessable request",
  425: "too early",
  429: "rate limited",
  500: "internal server error",
  501: "not implemented",
  502: "bad gateway",
  503: "service unavailable",
  504: "gateway timeout",
  505: "HTTP version not supported",
  529: "overloaded"
}

const text = (error: ModelError) => `${error.message}\n${error.body ?? ""}`

/**
 * Whether a failed request is worth another try (DESIGN §5), and why in a few words.
 * Context overflow and content filtering are recognised by their bodies/messages whatever the status;
 * then the status decides; `config` and `invalid-response` are final (see docs/retry.md).
 */
export const classify = (error: ModelError): Classification => {
  if (error.reason === "config") return { retryable: false, why: "configuration error" }
  if (error.reason === "network" && error.network !== undefined) {
    switch (error.network) {
      case "dns":
        return { retryable: true, why: "host not found" }
      case "refused":
        return { retryable: true, why: "connection refused" }
      case "blocked-port":
        return { retryable: false, why: "blocked port" }
    }
  }
  const haystack = text(error)
  if (CONTEXT_OVERFLOW.test(haystack)) return { retryable: false, why: "context overflow" }
  if (CONTENT_FILTER.test(haystack)) return { retryable: false, why: "content filter" }
  if (error.status === 529 || OVERLOADED.test(haystack)) return { retryable: true, why: "provider overloaded" }
  const status = error.status
  if (status !== undefined) {
    if (status === 408) return { retryable: true, why: "request timeout" }
    if (status === 409) return { retryable: true, why: "conflict" }
    if (status === 429) return { retryable: true, why: "rate limited" }
    if (status === 501 || status === 505) return { retryable: false, why: "not supported by the server" }
    if (status >= 500 && status <= 599) return { retryable: true, why: "server error" }
    if (status === 401) return { retryable: false, why: "authentication failed" }
    if (status === 403) return { retryable: false, why: "permission denied" }
    if (status === 404) return { retryable: false, why: "not found" }
    if (status >= 400 && status <= 499) return { retryable: false, why: "invalid request" }
  }
  if (RATE_LIMITED.test(haystack)) return { retryable: true, why: "rate limited" }
  switch (error.reason) {
    case "network":
      return { retryable: true, why: "connection failed" }
    case "stream-cut":
      return { retryable: true, why: "stream cut" }
    case "invalid-response":
      return { retryable: false, why: "invalid response" }
    case "http":
      // an error status outside 4xx/5xx, or none at all: nothing says it will fail again
      return { retryable: true, why: "unexpected response" }
  }
}

const shorten = (s: string, max = 160) => {
  const line = s.replace(/\s+/g, " ").trim()
  return line.length > max ? `${line.slice(0, max - 1)}…` : line
}

/** Bare HTTP reason phrases: a provider message that only says one of these adds nothing to the status. */
const REASON_PHRASES = new Set([
  "error",
  "unknown error",
  "bad request",
  "unauthorized",
  "payment required",
  "forbidden",
  "not found",
  "method not allowed",
  "request timeout",
  "conflict",
  "payload too large",
  "unprocessable entity",
  "too many requests",
  "internal server error",
  "not implemented",
  "bad gateway",
  "service unavailable",
  "gateway timeout",
  "overloaded"
])

const words = (s: string) =>
  s
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, " ")
    .trim()

/** The provider's message when it says more than `head` ("529 overloaded" + "Overloaded" says nothing new). */
const providerWords = (error: ModelError, head: string): string | undefined => {
  if (error.providerMessage === undefined) return undefined
  const said = capLine(error.providerMessage, maxProviderMessageLength)
  const w = words(said)
  return w === "" || REASON_PHRASES.has(w) || ` ${words(head)} `.includes(` ${w} `) ? undefined : said
}

/** `localhost:11434`, or the host alone when the port is not known. */
const address = (error: ModelError): string | undefined =>
  error.host === undefined ? undefined : error.port === undefined ? error.host : `${error.host}:${error.port}`

/** The config key of the provider's base URL, for hints. */
const baseUrlKey = (error: ModelError): string =>
  error.provider === undefined ? "the provider's baseURL" : `provider.${error.provider}.baseURL`

/**
 * A short line in two parts: `head` ("429 rate limited") and, for an error with a status, the
 * provider's own words when they add something (`said`).
 */
const parts = (error: ModelError): { readonly head: string; readonly said?: string | undefined } => {
  const { why } = classify(error)
  if (error.reason === "network" && error.network !== undefined) {
    const at = address(error)
    if (error.network === "dns") {
      return {
        head: error.host === undefined ? "the host does not resolve" : `the host ${error.host} does not resolve`
      }
    }
    return { head: at === undefined ? `cannot connect (${why})` : `cannot connect to ${at} (${why})` }
  }
  if (error.status !== undefined) {
    const name = STATUS_NAMES[error.status]
    const head =
      why === "context overflow" || why === "content filter" || why === "provider overloaded"
        ? `${error.status} ${why === "provider overloaded" ? "overloaded" : why}`
        : name !== undefined
          ? `${error.status} ${name}`
          : error.providerMessage !== undefined
            ? `${error.status} ${why}`
            : `${error.status} ${shorten(error.message, 80)}`
    return { head, said: providerWords(error, head) }
  }
  const detail = shorten(error.message, 120)
  return { head: detail.length > 0 && detail !== why ? `${why}: ${detail}` : why }
}

/**
 * A short line for the user: "429 rate limited", "400 bad request: messages.1.content.0: Expected …"
 * (the provider's words after the status), "cannot connect to localhost:11434 (connection refused)",
 * "connection failed: ECONNRESET" …
 */
export const describe = (error: ModelError): string => {
  const { head, said } = parts(error)
  return said === undefined ? head : `${head}: ${said}`
}

// ---------------------------------------------------------------------------------------------
// Retry-After

const DECIMAL = /^\d+(\.\d+)?$/

const header = (headers: Readonly<Record<string, string>>, name: string): string | undefined => {
  const direct = headers[name]
  if (direct !== undefined) return direct
  for (const [key, value] of Object.entries(headers)) if (key.toLowerCase() === name) return value
  return undefined
}

/**
 * The wait a provider asks for, in ms: `retry-after-ms` (milliseconds, decimals allowed) first, then
 * `retry-after` as seconds (decimals allowed) or as an HTTP-date, taken relative to `now` (UTC ms).
 * A date in the past gives 0 (the caller's floor applies); a missing, negative or unreadable value
 * gives undefined.
 */
export const retryAfterMs = (
  headers: Readonly<Record<string, string>> | undefined,
  now: number
): number | undefined => {
  if (headers === undefined) return undefined
  const ms = header(headers, "retry-after-ms")?.trim()
  if (ms !== undefined && DECIMAL.test(ms)) return Math.ceil(Number(ms))
  const after = header(headers, "retry-after")?.trim()
  if (after === undefined || after === "") return undefined
  if (DECIMAL.test(after)) return Math.ceil(Number(after) * 1000)
  // an HTTP-date always names a weekday or month; this keeps "-5" or "soon" from being read as a date
  if (!/[a-z]{3}/i.test(after)) return undefined
  const at = Date.parse(after)
  if (Number.isNaN(at)) return undefined
  return Math.max(0, at - now)
}

// ---------------------------------------------------------------------------------------------
// the decision

export type GiveUpReason = "not-retryable" | "max-attempts" | "budget" | "retry-after-too-long"

export type RetryDecision =
  | {
      readonly _tag: "Retry"
      /** the attempt the wait leads to: 2, 3 … */
      readonly attempt: number
      readonly delayMs: number
      /** UTC ms of the next attempt */
      readonly nextAt: number
      /** whether the delay is the provider's (Retry-After) rather than the backoff's */
      readonly fromServer: boolean
      /** what went wrong: "429 rate limited" */
      readonly message: string
    }
  | {
      readonly _tag: "GiveUp"
      readonly reason: GiveUpReason
      /** a sentence for the user */
      readonly message: string
    }

/** what the user can do about a final error */
const HINTS: Readonly<Record<string, string>> = {
  "configuration error": "fix the configuration",
  "context overflow": "the conversation is longer than the model's context window; start a new session or compact",
  "content filter": "the provider's content filter refused the request",
  "authentication failed": "check the API key (the env var named by provider.<id>.apiKeyEnv)",
  "permission denied": "check that the API key may use this model",
  "not found": "check the model name and the provider's baseURL",
  "not supported by the server": "check the provider's baseURL and type",
  "invalid response": "the provider sent something that is not a valid response; check its baseURL and type"
}

/** What to check when a connection failure outlasts the fast policy, or a port cannot be used at all. */
const connectionHint = (error: ModelError): string | undefined => {
  switch (error.network) {
    case "dns":
      return `check ${baseUrlKey(error)} and your network`
    case "refused":
      return `is the server running? check ${baseUrlKey(error)}`
    case "blocked-port":
      return (
        `fetch never connects to port ${error.port ?? "?"} (it is on the fetch standard's list of blocked ports); ` +
        `run the server on another port and change ${baseUrlKey(error)}`
      )
    default:
      return undefined
  }
}

/** seconds for messages: 120000 -> "120s", 1500 -> "1.5s", 400 -> "0.4s"; under 0.1 s in ms: 20 -> "20ms" */
export const formatMs = (ms: number): string => {
  if (ms > 0 && ms < 100) return `${Math.round(ms)}ms`
  const s = ms / 1000
  return `${Number.isInteger(s) ? s : Number(s.toFixed(1))}s`
}

/** The computed (backoff) delay before attempt `attempt + 1`: equal jitter over a capped exponential. */
export const backoffMs = (options: RetryOptions, attempt: number, random: number): number => {
  const o = resolve(options)
  const base = Math.min(o.maxDelayMs, o.initialDelayMs * 2 ** Math.max(0, attempt - 1))
  return Math.round(base / 2 + (base / 2) * Math.min(1, Math.max(0, random)))
}

/**
 * The whole policy as a pure function: after attempt number `attempt` (1 = the first) failed with
 * `error` at `now`, with the first attempt started at `startedAt`, retry (after how long) or give up
 * (why). `random` in [0, 1) is the jitter.
 */
export const decide = (
  options: RetryOptions,
  input: {
    readonly attempt: number
    readonly error: ModelError
    readonly now: number
    readonly startedAt: number
    readonly random: number
  }
): RetryDecision => {
  const { attempt, error, now } = input
  const resolved = resolve(options)
  const fast = isFastFail(error)
  // a host that does not resolve, a refused connection: a few attempts within seconds, not minutes
  const o = fast ? tightened(resolved) : resolved
  const what = describe(error)
  const { retryable, why } = classify(error)
  const plural = attempt === 1 ? "1 attempt" : `${attempt} attempts`
  if (!retryable) {
    const { head, said } = parts(error)
    const hint = HINTS[why] ?? connectionHint(error)
    const because = head.includes(why) ? "" : ` (${why})`
    const sentence = `${head}${because}, not retried${hint !== undefined ? `: ${hint}` : ""}`
    return {
      _tag: "GiveUp",
      reason: "not-retryable",
      // the provider's own words last, marked as theirs
      message: said === undefined ? sentence : `${sentence}. The provider said: ${said}`
    }
  }
  // the fast policy ends with what to check, whichever of its limits was reached
  const fastEnd = fast ? `gave up after ${plural}: ${what}: ${connectionHint(error)}` : undefined
  if (attempt >= o.maxAttempts) {
    return { _tag: "GiveUp", reason: "max-attempts", message: fastEnd ?? `gave up after ${plural}: ${what}` }
  }
  const asked = retryAfterMs(error.headers, now)
  if (asked !== undefined && asked > o.maxRetryAfterMs) {
    return {
      _tag: "GiveUp",
      reason: "retry-after-too-long",
      message: `the provider asked to wait ${formatMs(asked)}, more than retry.maxRetryAfterMs (${formatMs(o.maxRetryAfterMs)}): ${what}`
    }
  }
  // a provider's wait makes the wait longer, never shorter than the backoff already due
  const backoff = backoffMs(o, attempt, input.random)
  const server = asked === undefined ? undefined : Math.max(asked, o.minRetryAfterMs)
  const delayMs = server === undefined ? backoff : Math.max(server, backoff)
  const nextAt = now + delayMs
  if (nextAt - input.startedAt > o.budgetMs) {
    return {
      _tag: "GiveUp",
      reason: "budget",
      message:
        fastEnd ??
        `gave up after ${plural}: waiting ${formatMs(delayMs)} more would pass retry.budgetMs (${formatMs(o.budgetMs)}): ${what}`
    }
  }
  return {
    _tag: "Retry",
    attempt: attempt + 1,
    delayMs,
    nextAt,
    fromServer: server !== undefined && server >= backoff,
    message: what
  }
}

// ---------------------------------------------------------------------------------------------
// the final failure

/** Retrying stopped: the last error, how many attempts were made and why there is no further one. */
export class RetryGaveUp extends Schema.TaggedError<RetryGaveUp>()("RetryGaveUp", {
  /** attempts made, the first included */
  attempts: Schema.Int,
  reason: Schema.Literal("not-retryable", "max-attempts", "budget", "retry-after-too-long"),
  /** a sentence for the user: "gave up after 8 attempts: 429 rate limited" */
  message: Schema.String,
  /** the last attempt's error */
  error: ModelError
}) {
  /** whether the last error was retryable (for `model.error`): false only for `not-retryable` */
  get retryable(): boolean {
    return this.reason !== "not-retryable"
  }
}

// ---------------------------------------------------------------------------------------------
// the Schedule: the one retry driver

export interface RetryInfo {
  /** the attempt about to be made: 2, 3 … */
  readonly attempt: number
  readonly maxAttempts: number
  readonly delayMs: number
  /** UTC ms (Clock) of the next attempt */
  readonly nextAt: number
  /** the error of the attempt that just failed */
  readonly error: ModelError
  /** what went wrong, for the user: "429 rate limited" */
  readonly message: string
}

export interface RetryHooks<E = never, R = never> {
  /** runs before each wait (append `model.retry`, set `session.status retry`); its failure ends the retrying */
  readonly onRetry?: ((info: RetryInfo) => Effect.Effect<void, E, R>) | undefined
}

/** What the policy outputs after each failed attempt: which attempt it was, and the decision. */
export interface RetryStep {
  readonly _tag: "RetryStep"
  /** the attempt that just failed (1 = the first): the attempts made so far */
  readonly attempts: number
  readonly decision: RetryDecision
}

/**
 * Decisions given from outside instead of the policy's (a re-run replays the ones its log records):
 * the decision for attempt `attempt`'s `error` at `now`, or `undefined` to let the policy decide. A given
 * `Retry` is taken at once, without waiting.
 */
export type GivenDecisions = (input: {
  readonly error: ModelError
  readonly attempt: number
  /** Clock ms of the failure */
  readonly now: number
}) => RetryDecision | undefined

export interface PolicyOptions {
  /**
   * Clock ms the first attempt started at, from which the budget runs; without it, the first
   * failure (the first time a Schedule sees the clock)
   */
  readonly startedAt?: number | undefined
  readonly given?: GivenDecisions | undefined
}

/**
 * The policy as a `Schedule` over the failures of a request: each step is `decide` (the backoff with
 * jitter from `Random`, `Retry-After` with the floor, the ceiling, the attempts, the budget) on the
 * error that just ended an attempt; a `Retry` continues at `nextAt`, a `GiveUp` is done. The output is
 * the latest `RetryStep`, the `GiveUp` included: `Effect.retryOrElse` hands it over with the last error.
 */
export const policy = (
  options: RetryOptions,
  policyOptions: PolicyOptions = {}
): Schedule.Schedule<RetryStep, ModelError> => {
  const o = resolve(options)
  return Schedule.makeWithState<
    { readonly attempt: number; readonly startedAt: number | undefined },
    ModelError,
    RetryStep
  >({ attempt: 1, startedAt: policyOptions.startedAt }, (now, error, state) =>
    Effect.map(Random.next, (random) => {
      const startedAt = state.startedAt ?? now
      const given = policyOptions.given?.({ error, attempt: state.attempt, now })
      const decision = given ?? decide(o, { attempt: state.attempt, error, now, startedAt, random })
      const step: RetryStep = { _tag: "RetryStep", attempts: state.attempt, decision }
      return decision._tag === "Retry"
        ? ([
            { attempt: decision.attempt, startedAt },
            step,
            ScheduleDecision.continueWith(ScheduleInterval.after(given === undefined ? decision.nextAt : now))
          ] as const)
        : ([{ attempt: state.attempt, startedAt }, step, ScheduleDecision.done] as const)
    })
  )
}

/** The kernel's schedule stopped because its `onRetry` hook failed: the hook's error. */
interface HookFailed<E> {
  readonly _tag: "HookFailed"
  readonly error: E
}

/**
 * The policy with the `onRetry` hook run before each wait, from the schedule's step: `model.retry`
 * is written from the decision the Schedule took. The wait still ends at `nextAt` (the time the hook
 * took is taken off it), and a failing hook stops the schedule with its error.
 */
const withHook = <E, R>(
  self: Schedule.Schedule<RetryStep, ModelError>,
  maxAttempts: number,
  onRetry: (info: RetryInfo) => Effect.Effect<void, E, R>
): Schedule.Schedule<RetryStep | HookFailed<E>, ModelError, R> =>
  Schedule.makeWithState<unknown, ModelError, RetryStep | HookFailed<E>, R>(self.initial, (now, error, state) =>
    Effect.flatMap(self.step(now, error, state), ([next, step, decision]) => {
      const d = step.decision
      if (d._tag !== "Retry" || ScheduleDecision.isDone(decision))
        return Effect.succeed([next, step, decision] as const)
      const info: RetryInfo = {
        attempt: d.attempt,
        maxAttempts,
        delayMs: d.delayMs,
        nextAt: d.nextAt,
        error,
        message: d.message
      }
      return Effect.matchEffect(onRetry(info), {
        onFailure: (e) =>
          Effect.succeed([next, { _tag: "HookFailed", error: e } as HookFailed<E>, ScheduleDecision.done] as const),
        onSuccess: () =>
          Effect.map(Clock.currentTimeMillis, (after) => {
            const start = ScheduleIntervals.start(decision.intervals) - (after - now)
            return [next, step, ScheduleDecision.continueWith(ScheduleInterval.after(start))] as const
          })
      })
    })
  )

/** The schedule a request is retried under: the policy's steps, or the hook's failure that stopped it. */
export type RetryDriver<E2 = never, R2 = never> = Schedule.Schedule<RetryStep | HookFailed<E2>, ModelError, R2>

/**
 * The schedule for `Effect.retryOrElse(request, driver, gaveUp)`: the policy with its budget counted
 * from now (the start of the first attempt), and `onRetry` run from the schedule before each wait.
 */
export const driver = <E2 = never, R2 = never>(
  options: RetryOptions,
  hooks: RetryHooks<E2, R2> = {},
  given?: GivenDecisions
): Effect.Effect<RetryDriver<E2, R2>> =>
  Effect.map(Clock.currentTimeMillis, (startedAt) => {
    const o = resolve(options)
    const steps = policy(o, { startedAt, given })
    return hooks.onRetry === undefined ? steps : withHook(steps, o.maxAttempts, hooks.onRetry)
  })

/**
 * `Effect.retryOrElse`'s fallback once the driver stops: the hook's error, or a `RetryGaveUp` that
 * says why retrying stopped, built from the schedule's last output, carrying the last `ModelError`.
 */
export const gaveUp = <E2>(
  error: ModelError,
  out: RetryStep | HookFailed<E2>
): Effect.Effect<never, RetryGaveUp | E2> => {
  if (out._tag === "HookFailed") return Effect.fail(out.error)
  const decision = out.decision
  return decision._tag === "GiveUp"
    ? Effect.fail(
        new RetryGaveUp({ attempts: out.attempts, reason: decision.reason, message: decision.message, error })
      )
    : Effect.dieMessage("the retry policy stopped without giving up")
}

/**
 * The policy's decisions as a plain `Schedule` over `ModelError`s, for `Effect.retry(request,
 * Retry.schedule(o))`: the budget runs from the first failure, and when it stops, `Effect.retry`
 * fails with the bare last `ModelError` (`driver` with `gaveUp` gives the `RetryGaveUp` that says why).
 */
export const schedule = (options: RetryOptions): Schedule.Schedule<RetryDecision, ModelError> =>
  Schedule.map(policy(options), (step) => step.decision)

// ---------------------------------------------------------------------------------------------
// the service

/** The retry policy of this process, built from config (`retry.*`). */
export class Retry extends Context.Tag("logbook/Retry")<
  Retry,
  {
    readonly options: ResolvedRetryOptions
    /** the schedule to retry one request under (`Effect.retryOrElse(request, driver, gaveUp)`), its budget counted from now */
    readonly driver: <E2 = never, R2 = never>(hooks?: RetryHooks<E2, R2>) => Effect.Effect<RetryDriver<E2, R2>>
    readonly schedule: Schedule.Schedule<RetryDecision, ModelError>
  }
>() {
  /** the service of `options`; `given` decisions (a re-run's recorded ones) take the policy's place where they are known */
  static readonly make = (options: RetryOptions, given?: GivenDecisions): Context.Tag.Service<Retry> => {
    const resolved = resolve(options)
    return {
      options: resolved,
      driver: (hooks) => driver(resolved, hooks, given),
      schedule: schedule(resolved)
    }
  }
  static readonly layer = (options: RetryOptions): Layer.Layer<Retry> => Layer.succeed(Retry, Retry.make(options))
  static readonly layerDefault: Layer.Layer<Retry> = Retry.layer(defaultRetryOptions)
}
