/**
 * Two sessions side by side: where they first diverge, the tool calls and the file
 * changes that differ, and how their figures differ (turns, steps, retries, tool calls and failures,
 * tokens, cost, duration). Built for comparing runs of the same task: another prompt version,
 * another model, a re-run.
 *
 * The comparison is over each session's *trace*: what the user said, what the model answered and
 * called (tool and arguments as canonical JSON), what the tools returned and which files they
 * changed (path, operation, content hash), in log order. Ids and times are not part of it.
 */
import { Effect, Stream } from "effect"
import type { Envelope } from "../domain/Events.js"
import type { SessionId } from "../domain/Ids.js"
import { EventStore } from "../store/EventStore.js"
import type { SessionState } from "../store/Projection.js"
import * as Snapshots from "../store/Snapshots.js"
import { canonicalJson } from "./PromptVersion.js"

/** One comparable thing a session did. */
export type TraceItem =
  | { readonly kind: "user"; readonly text: string }
  | { readonly kind: "text"; readonly text: string }
  | { readonly kind: "call"; readonly tool: string; readonly input: string }
  | { readonly kind: "result"; readonly tool: string; readonly ok: boolean; readonly output: string }
  | { readonly kind: "file"; readonly path: string; readonly op: string; readonly afterHash: string | null }

export interface SessionFigures {
  readonly turns: number
  readonly steps: number
  readonly retries: number
  readonly toolCalls: number
  readonly toolFailures: number
  readonly interrupts: number
  readonly input: number
  readonly output: number
  readonly reasoning: number
  readonly cacheRead: number
  readonly cost: number
  readonly costKnown: boolean
  /** from the first event to the last (ms) */
  readonly durationMs: number
}

export interface Divergence {
  /** the index in both traces of the first item that differs */
  readonly index: number
  /** the item of each side there (absent: that trace ended before) */
  readonly a: TraceItem | undefined
  readonly b: TraceItem | undefined
  /** the seq of that item in each session's log */
  readonly seqA: number | undefined
  readonly seqB: number | undefined
}

export interface SessionDiff {
  readonly a: SessionId
  readonly b: SessionId
  /** absent: the traces are the same */
  readonly divergence: Divergence | undefined
  /** tool calls (tool and canonical arguments) one session made and the other did not (as often) */
  readonly calls: { readonly onlyA: ReadonlyArray<string>; readonly onlyB: ReadonlyArray<string> }
  /** paths whose last change differs (or that only one session changed): the content hash each left */
  readonly files: ReadonlyArray<{
    readonly path: string
    readonly a: string | null | undefined
    readonly b: string | null | undefined
  }>
  readonly figures: { readonly a: SessionFigures; readonly b: SessionFigures }
}

const TRACED = new Set(["user.message", "text.delta", "tool.invoked", "tool.finished", "tool.failed", "file.changed"])

/** The trace of a session's envelopes, with the seq of each item. */
export const traceOf = (
  envelopes: ReadonlyArray<Envelope>
): Array<{ readonly item: TraceItem; readonly seq: number }> => {
  const out: Array<{ item: TraceItem; seq: number }> = []
  const tools = new Map<string, string>()
  /** the text part being written: its deltas join into one item */
  let text: { partId: string; at: number } | undefined
  for (const env of envelopes) {
    if (!TRACED.has(env.type)) continue
    if (env.type !== "text.delta") text = undefined
    switch (env.type) {
      case "user.message":
        out.push({ item: { kind: "user", text: env.payload.text }, seq: env.seq })
        break
      case "text.delta": {
        const p = env.payload
        if (text !== undefined && text.partId === p.partId) {
          const last = out[text.at]!
          last.item = { kind: "text", text: (last.item as { text: string }).text + p.delta }
        } else {
          text = { partId: p.partId, at: out.length }
          out.push({ item: { kind: "text", text: p.delta }, seq: env.seq })
        }
        break
      }
      case "tool.invoked":
        tools.set(env.payload.callId, env.payload.tool)
        out.push({
          item: { kind: "call", tool: env.payload.tool, input: canonicalJson(env.payload.input) },
          seq: env.seq
        })
        break
      case "tool.finished":
      case "tool.failed":
        out.push({
          item: {
            kind: "result",
            tool: tools.get(env.payload.callId) ?? "?",
            ok: env.type === "tool.finished",
            output: env.type === "tool.finished" ? env.payload.output : env.payload.error
          },
          seq: env.seq
        })
        break
      case "file.changed":
        out.push({
          item: { kind: "file", path: env.payload.path, op: env.payload.op, afterHash: env.payload.afterHash ?? null },
          seq: env.seq
        })
        break
    }
  }
  return out
}

const figuresOf = (envelopes: ReadonlyArray<Envelope>, state: SessionState): SessionFigures => {
  const count = (type: string) => envelopes.filter((e) => e.type === type).length
  const steps = envelopes.filter((e) => e.type === "step.finished" && e.payload.aborted !== true).length
  return {
    turns: count("turn.started"),
    steps,
    retries: count("model.retry"),
    toolCalls: count("tool.invoked"),
    toolFailures: count("tool.failed"),
    interrupts: count("turn.interrupted"),
    input: state.totals.input,
    output: state.totals.output,
    reasoning: state.totals.reasoning,
    cacheRead: state.totals.cacheRead,
    cost: state.totals.cost,
    costKnown: state.totals.costKnown !== false,
    durationMs: envelopes.length === 0 ? 0 : envelopes[envelopes.length - 1]!.at - envelopes[0]!.at
  }
}

const same = (a: TraceItem, b: TraceItem): boolean => canonicalJson(a) === canonicalJson(b)

/** What one multiset has more of than another. */
const surplus = (mine: ReadonlyArray<string>, theirs: ReadonlyArray<string>): Array<string> => {
  const left = new Map<string, number>()
  for (const key of theirs) left.set(key, (left.get(key) ?? 0) + 1)
  const out: Array<string> = []
  for (const key of mine) {
    const n = left.get(key) ?? 0
    if (n > 0) left.set(key, n - 1)
    else out.push(key)
  }
  return out
}

/** The comparison of two sessions' logs (see the module doc). */
export const diffSessions = Effect.fn("SessionDiff.diff")(function* (a: SessionId, b: SessionId) {
  const store = yield* EventStore
  const read = (id: SessionId) =>
    Effect.gen(function* () {
      const envelopes: Array<Envelope> = []
      yield* store.read(id).pipe(Stream.runForEach((env) => Effect.sync(() => envelopes.push(env))))
      const state = yield* Snapshots.foldAll(id)
      return { envelopes, state, trace: traceOf(envelopes) }
    })
  const left = yield* read(a)
  const right = yield* read(b)
  let divergence: Divergence | undefined
  const length = Math.max(left.trace.length, right.trace.length)
  for (let i = 0; i < length; i++) {
    const x = left.trace[i]
    const y = right.trace[i]
    if (x !== undefined && y !== undefined && same(x.item, y.item)) continue
    divergence = { index: i, a: x?.item, b: y?.item, seqA: x?.seq, seqB: y?.seq }
    break
  }
  const callsOf = (trace: ReadonlyArray<{ readonly item: TraceItem }>) =>
    trace.flatMap(({ item }) => (item.kind === "call" ? [`${item.tool} ${item.input}`] : []))
  const lastChange = (trace: ReadonlyArray<{ readonly item: TraceItem }>) => {
    const files = new Map<string, string | null>()
    for (const { item } of trace) if (item.kind === "file") files.set(item.path, item.afterHash)
    return files
  }
  const filesA = lastChange(left.trace)
  const filesB = lastChange(right.trace)
  const paths = [...new Set([...filesA.keys(), ...filesB.keys()])].sort()
  return {
    a,
    b,
    divergence,
    calls: {
      onlyA: surplus(callsOf(left.trace), callsOf(right.trace)),
      onlyB: surplus(callsOf(right.trace), callsOf(left.trace))
    },
    files: paths
      .filter((path) => filesA.get(path) !== filesB.get(path))
      .map((path) => ({ path, a: filesA.get(path), b: filesB.get(path) })),
    figures: { a: figuresOf(left.envelopes, left.state), b: figuresOf(right.envelopes, right.state) }
  } satisfies SessionDiff
})
