/**
 * Running the `tool.execute.before` / `tool.execute.after` hooks of a call (docs/extensions.md): each
 * one named and bounded by its timeout, what it returned checked, and a report of every run that
 * changed something, blocked, failed or timed out, which the kernel records as `hook.ran`. A before
 * hook that fails fails its call (a guard that crashed lets nothing through); an after hook that
 * fails is skipped, the output as it was.
 */
import { Cause, Clock, Data, Duration, Effect, Equal, Exit, Option, Utils } from "effect"
import { capText } from "../boundedOutput.js"
import type { AfterHook, BeforeHook, HookCall, HookRun, NamedHook, ToolOutput } from "../Tools.js"

/**
 * A hook that bounds its own work (a command it runs, a recorded run it replays) fails with this
 * to be reported as timed out, with `message` as its error.
 */
export class HookTimeout extends Data.TaggedError("HookTimeout")<{ readonly message: string }> {}

/** The default bound of one hook run (ms). */
export const DEFAULT_HOOK_TIMEOUT_MS = 10_000

/** The most of an output an after hook gives that the model reads: head and tail (bytes). */
const MAX_HOOK_OUTPUT_HEAD = 192 * 1024
const MAX_HOOK_OUTPUT_TAIL = 64 * 1024

/** The longest error text a hook run's report keeps. */
const MAX_ERROR = 2_000

const capError = (text: string): string => (text.length > MAX_ERROR ? `${text.slice(0, MAX_ERROR - 1)}…` : text)

/** A hook as the registry runs it: named, with its bound. */
export interface ResolvedHook<F> {
  readonly source: string
  readonly timeoutMs: number
  readonly run: F
}

const isNamed = <F>(hook: F | NamedHook<F>): hook is NamedHook<F> =>
  typeof hook === "object" && hook !== null && "run" in hook && "source" in hook

/** Every hook with its source and timeout: a plain function is `<kind>[index]`. */
export const namedHooks = <F>(
  hooks: ReadonlyArray<F | NamedHook<F>>,
  kind: string,
  defaultTimeoutMs: number
): ReadonlyArray<ResolvedHook<F>> =>
  hooks.map((hook, index) =>
    isNamed(hook)
      ? { source: hook.source, run: hook.run, timeoutMs: boundTimeout(hook.timeoutMs ?? defaultTimeoutMs) }
      : { source: `${kind}[${index}]`, run: hook, timeoutMs: boundTimeout(defaultTimeoutMs) }
  )

const boundTimeout = (ms: number): number => Math.max(1, Math.min(Math.floor(ms), 2 ** 31 - 1))

const equal = (a: unknown, b: unknown): boolean => a === b || Utils.structuralRegion(() => Equal.equals(a, b))

const describeCause = (cause: Cause.Cause<unknown>): string => {
  const squashed = Cause.squash(cause)
  if (squashed instanceof Error) return squashed.message
  if (typeof squashed === "object" && squashed !== null && "message" in squashed) return String(squashed.message)
  return String(squashed)
}

type Ran<A> =
  | { readonly _tag: "Returned"; readonly value: A; readonly ms: number }
  | { readonly _tag: "Failed"; readonly outcome: "failed" | "timeout"; readonly error: string; readonly ms: number }

/** Runs one hook within its timeout; a throw, a failure, a defect or a timeout is its `Failed`. */
const runBounded = <A>(effect: () => Effect.Effect<A, unknown>, timeoutMs: number): Effect.Effect<Ran<A>> =>
  Effect.gen(function* () {
    const start = yield* Clock.currentTimeMillis
    const exit = yield* Effect.suspend(effect).pipe(
      Effect.timeoutTo({
        duration: Duration.millis(timeoutMs),
        onSuccess: Option.some,
        onTimeout: () => Option.none()
      }),
      Effect.exit
    )
    const ms = (yield* Clock.currentTimeMillis) - start
    if (Exit.isFailure(exit)) {
      if (Cause.isInterruptedOnly(exit.cause)) return yield* Effect.interrupt
      const failure = Cause.failureOption(exit.cause)
      if (Option.isSome(failure) && failure.value instanceof HookTimeout) {
        return { _tag: "Failed", outcome: "timeout", error: capError(failure.value.message), ms }
      }
      return { _tag: "Failed", outcome: "failed", error: capError(describeCause(exit.cause)), ms }
    }
    return Option.match(exit.value, {
      onNone: (): Ran<A> => ({
        _tag: "Failed",
        outcome: "timeout",
        error: `it did not return within ${timeoutMs} ms`,
        ms
      }),
      onSome: (value): Ran<A> => ({ _tag: "Returned", value, ms })
    })
  })

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** What a before hook returned: unchanged (`undefined`), a new input, a refusal; or why it is none. */
const readBefore = (
  value: unknown
):
  | { readonly _tag: "Input"; readonly input: unknown }
  | { readonly _tag: "Block"; readonly reason: string }
  | { readonly _tag: "Unchanged" }
  | { readonly _tag: "FailedOpen"; readonly error: string }
  | { readonly _tag: "Bad"; readonly error: string } => {
  if (value === undefined || value === null) return { _tag: "Unchanged" }
  if (isRecord(value) && "failed" in value) {
    return typeof value.failed === "string" && value.failed.trim() !== ""
      ? { _tag: "FailedOpen", error: value.failed }
      : { _tag: "Bad", error: "it returned { failed } without an error (a non-empty string)" }
  }
  if (isRecord(value) && "block" in value) {
    return typeof value.block === "string" && value.block.trim() !== ""
      ? { _tag: "Block", reason: value.block }
      : { _tag: "Bad", error: "it returned { block } without a reason (a non-empty string)" }
  }
  if (isRecord(value) && "input" in value) return { _tag: "Input", input: value.input }
  return { _tag: "Bad", error: "it returned neither { input } nor { block: reason } nor nothing" }
}

/** What an after hook returned: unchanged (`undefined`), a new output; or why it is none. */
const readAfter = (
  value: unknown,
  current: ToolOutput
): { readonly _tag: "Output"; readonly output: ToolOutput } | { readonly _tag: "Bad"; readonly error: string } => {
  if (value === undefined || value === null) return { _tag: "Output", output: current }
  if (typeof value === "string") return { _tag: "Output", output: { ...current, output: value } }
  if (isRecord(value) && typeof value.output === "string") {
    return {
      _tag: "Output",
      output:
        "metadata" in value ? { output: value.output, metadata: value.metadata } : { ...current, output: value.output }
    }
  }
  return { _tag: "Bad", error: "it returned neither a string, nor { output: string }, nor nothing" }
}

/** What the before hooks made of a call. */
export type BeforeOutcome =
  | { readonly _tag: "Input"; readonly input: unknown; readonly runs: ReadonlyArray<HookRun> }
  | { readonly _tag: "Refused"; readonly error: string; readonly runs: ReadonlyArray<HookRun> }

/**
 * The before hooks in order, each on the input the one before it left. `check` decodes a changed
 * input for the tool (an input the tool cannot take fails the hook that gave it).
 */
export const runBeforeHooks = (
  hooks: ReadonlyArray<ResolvedHook<BeforeHook>>,
  call: HookCall,
  check: (
    input: unknown
  ) => { readonly ok: true; readonly input: unknown } | { readonly ok: false; readonly error: string }
): Effect.Effect<BeforeOutcome> =>
  Effect.gen(function* () {
    const runs: Array<HookRun> = []
    let input = call.input
    for (const hook of hooks) {
      const base = { source: hook.source, hook: "tool.execute.before" as const, callId: call.callId, tool: call.tool }
      const ran = yield* runBounded(() => hook.run({ ...call, input }), hook.timeoutMs)
      if (ran._tag === "Failed") {
        runs.push({ ...base, outcome: ran.outcome, changed: false, error: ran.error, ms: ran.ms })
        const what = ran.outcome === "timeout" ? "timed out" : "failed"
        return {
          _tag: "Refused",
          error: `The call was not run: the tool.execute.before hook ${hook.source} ${what}: ${ran.error}`,
          runs
        }
      }
      const result = readBefore(ran.value)
      switch (result._tag) {
        case "Unchanged":
          continue
        case "FailedOpen":
          runs.push({ ...base, outcome: "failed", changed: false, error: capError(result.error), ms: ran.ms })
          continue
        case "Bad":
          runs.push({ ...base, outcome: "failed", changed: false, error: result.error, ms: ran.ms })
          return {
            _tag: "Refused",
            error: `The call was not run: the tool.execute.before hook ${hook.source} failed: ${result.error}`,
            runs
          }
        case "Block":
          runs.push({ ...base, outcome: "blocked", changed: false, reason: capError(result.reason), ms: ran.ms })
          return { _tag: "Refused", error: `The call was blocked: ${result.reason}`, runs }
        case "Input": {
          if (equal(result.input, input)) continue
          const checked = check(result.input)
          if (!checked.ok) {
            const error = capError(`it gave input the tool cannot take: ${checked.error}`)
            runs.push({ ...base, outcome: "failed", changed: false, error, ms: ran.ms })
            return {
              _tag: "Refused",
              error: `The call was not run: the tool.execute.before hook ${hook.source} failed: ${error}`,
              runs
            }
          }
          runs.push({ ...base, outcome: "changed", changed: true, input, ms: ran.ms })
          input = checked.input
        }
      }
    }
    return { _tag: "Input", input, runs }
  })

/** The after hooks in order, each on the output the one before it left; one that fails is skipped. */
export const runAfterHooks = (
  hooks: ReadonlyArray<ResolvedHook<AfterHook>>,
  call: HookCall,
  output: ToolOutput
): Effect.Effect<{ readonly output: ToolOutput; readonly runs: ReadonlyArray<HookRun> }> =>
  Effect.gen(function* () {
    const runs: Array<HookRun> = []
    let current = output
    for (const hook of hooks) {
      const base = { source: hook.source, hook: "tool.execute.after" as const, callId: call.callId, tool: call.tool }
      const ran = yield* runBounded(() => hook.run(call, current), hook.timeoutMs)
      if (ran._tag === "Failed") {
        runs.push({ ...base, outcome: ran.outcome, changed: false, error: ran.error, ms: ran.ms })
        continue
      }
      const result = readAfter(ran.value, current)
      if (result._tag === "Bad") {
        runs.push({ ...base, outcome: "failed", changed: false, error: result.error, ms: ran.ms })
        continue
      }
      if (equal(result.output.output, current.output) && equal(result.output.metadata, current.metadata)) continue
      runs.push({ ...base, outcome: "changed", changed: true, ms: ran.ms })
      current = { ...result.output, output: capText(result.output.output, MAX_HOOK_OUTPUT_HEAD, MAX_HOOK_OUTPUT_TAIL) }
    }
    return { output: current, runs }
  })
