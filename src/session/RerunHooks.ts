/**
 * The hooks of a re-run (docs/rerun.md, "Hooks"): no plugin or command hook runs; what each hook
 * did to a call is served from the log instead. For every `hook.ran` of the original a hook of the
 * same source gives the same outcome on the same call — the input it made (the next run's input, or
 * the call's `tool.invoked`), its refusal, its failure or its timeout, the output it made (the call's
 * `tool.finished`) — so the re-run writes the same `hook.ran` and the same call, without the plugin.
 */
import { Effect } from "effect"
import type { Envelope, EnvelopeOf } from "../domain/Events.js"
import {
  type AfterHook,
  type BeforeHook,
  type HookCall,
  HookTimeout,
  type NamedHook,
  type ToolHooks,
  type ToolOutput
} from "../tools/Tools.js"

type Ran = EnvelopeOf<"hook.ran">["payload"]

const BEFORE = "tool.execute.before"
const AFTER = "tool.execute.after"

/** A recorded run as the hook's result: its failure, its refusal, or what it made (`made`). */
const replay = <A>(
  run: Ran,
  made: () => A | undefined
): Effect.Effect<A | { readonly block: string } | undefined, Error | HookTimeout> => {
  switch (run.outcome) {
    case "blocked":
      return Effect.succeed({ block: run.reason ?? "blocked" })
    case "failed":
      return Effect.fail(new Error(run.error ?? "failed"))
    case "timeout":
      return Effect.fail(new HookTimeout({ message: run.error ?? "timed out" }))
    case "changed":
      return Effect.succeed(made())
  }
}

/** The replayed hooks of a recorded session's envelopes. */
export const replayedHooks = (envelopes: ReadonlyArray<Envelope>): ToolHooks => {
  /** per call, the runs of each hook point in log order */
  const runs = new Map<string, { before: Array<Ran>; after: Array<Ran> }>()
  const invoked = new Map<string, unknown>()
  const finished = new Map<string, ToolOutput>()
  const beforeSources: Array<string> = []
  const afterSources: Array<string> = []
  for (const env of envelopes) {
    if (env.type === "hook.ran") {
      const p = env.payload
      const callId = p.callId
      if (callId === undefined) continue
      const point = p.hook === BEFORE ? "before" : p.hook === AFTER ? "after" : undefined
      if (point === undefined) continue
      const ofCall = runs.get(callId) ?? { before: [], after: [] }
      runs.set(callId, ofCall)
      ofCall[point].push(p)
      const sources = point === "before" ? beforeSources : afterSources
      if (!sources.includes(p.source)) sources.push(p.source)
    } else if (env.type === "tool.invoked") invoked.set(env.payload.callId, env.payload.input)
    else if (env.type === "tool.finished")
      finished.set(env.payload.callId, {
        output: env.payload.output,
        ...(env.payload.metadata !== undefined ? { metadata: env.payload.metadata } : {})
      })
  }
  /** the next recorded run of `source` on the call (each is served once) */
  const served = new Set<Ran>()
  const next = (call: HookCall, point: "before" | "after", source: string) => {
    const list = runs.get(call.callId)?.[point] ?? []
    const index = list.findIndex((run) => run.source === source && !served.has(run))
    if (index < 0) return undefined
    served.add(list[index]!)
    return { run: list[index]!, after: list.slice(index + 1) }
  }
  return {
    before: beforeSources.map(
      (source): NamedHook<BeforeHook> => ({
        source,
        run: (call) => {
          const found = next(call, "before", source)
          if (found === undefined) return Effect.succeed(undefined)
          // a failure that blocked nothing (a command hook's exit 1): the hooks after it ran, or the call did
          if (found.run.outcome === "failed" && (found.after.length > 0 || invoked.has(call.callId)))
            return Effect.succeed({ failed: found.run.error ?? "failed" })
          // what it made: the input the next run got, else the one the call ran with
          const made = () => {
            const later = found.after.find((run) => run.input !== undefined)
            const input = later !== undefined ? later.input : invoked.get(call.callId)
            return input === undefined ? undefined : { input }
          }
          return replay(found.run, made)
        }
      })
    ),
    after: afterSources.map(
      (source): NamedHook<AfterHook> => ({
        source,
        run: (call) => {
          const found = next(call, "after", source)
          if (found === undefined) return Effect.succeed(undefined)
          return replay(found.run, () => finished.get(call.callId)) as Effect.Effect<ToolOutput | undefined, Error>
        }
      })
    )
  }
}
