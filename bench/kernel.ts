/**
 * Kernel overhead: one turn of a scripted model (10,000 text deltas and 100 tool calls) driven
 * through the whole kernel (`Sessions` -> `Processor` / `Actions` -> `SessionJournal` ->
 * `EventStore`, SQLite file), over what the kernel cannot avoid (issue 13): the same model streams
 * drained alone plus the very events that run committed written through a `SessionJournal` with
 * the same calls (deltas handed over, the rest awaited), side by side in one run.
 *
 * The script (default shape): 101 steps. Steps 1–100 each stream 99 text deltas, then one call of
 * the in-process `echo` tool (input start, one input delta, the call) and a `tool-calls` finish;
 * step 101 streams the remaining 100 text deltas and a `stop` finish. In all 10,000 text deltas and
 * 100 tool calls. The stream delivers ONE event per chunk, as a provider's stream does; the kernel
 * merges the deltas of one part that have arrived by the time it looks (a batch), so the events it
 * writes depend on how fast they come: here, all at once, each step's deltas become 2 events.
 *
 * The baseline's store side replays the kernel's own store calls (recorded in an unmeasured run:
 * each `appendLater` and each awaited `append`, with the events it carried, read back from the
 * kernel's database as type + payload) through a `SessionJournal` (projection fold + snapshots,
 * as the kernel's journal); its model side drains the same streams with nothing done per event.
 * Both in the kernel's order (`runInterleaved`): per step, the calls up to its `step.started`, its
 * stream drained, then the rest of its calls — the order a kernel cannot avoid (a step's request
 * goes out after its `step.started` is committed, its events are written after they streamed).
 * The same two halves run apart (all streams, then all calls: `runModelOnly` + `runReplay`) are
 * reported too, not judged: apart, each ran warm in the caches, and with a model stream that cost
 * ≈ 10 µs an event the same work cost 1.10–1.32× as much in the kernel's order (with the pull
 * model below, 0.92–1.10×: docs/benchmarks.md, "The kernel measured against a model read as the
 * providers' are"). A side not judged replays the same calls straight to the `EventStore` (the
 * store's own part). Another, the floor, is the baseline plus the two fibers a kernel step cannot
 * drop (the reader that lets a steer stop the stream, a fiber per tool call for its timeout): over
 * the baseline it is the part of the goal's room that no kernel of this design can have for itself.
 *
 *   node --expose-gc --import tsx bench/kernel.ts [--quick]     this benchmark alone (e.g. to profile)
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Chunk, Effect, Fiber, Layer, Option, Schema, Stream } from "effect"
import * as Events from "../src/domain/Events.js"
import { type SessionId, SessionId as SessionIdSchema } from "../src/domain/Ids.js"
import { Model, type ModelError, ModelEvent } from "../src/model/Model.js"
import { defaultRetryOptions } from "../src/model/Retry.js"
import { Script, type ScriptStep } from "../src/model/Scripted.js"
import { makeAgentLayer } from "../src/session/Agent.js"
import { consumeBatched } from "../src/session/internal/modelReader.js"
import { Sessions } from "../src/session/Sessions.js"
import { EventStore, type Snapshot } from "../src/store/EventStore.js"
import { makeJournal } from "../src/store/SessionJournal.js"
import { fromPull, openPull } from "../src/stream/internal/pull.js"
import { Secrets } from "../src/tools/Secrets.js"
import { defineTool } from "../src/tools/Tools.js"
import { type OpCount, OpCounter, underCounter } from "./ops.js"
import { gc, median, now } from "./util.js"

export interface KernelShape {
  /** text deltas in the whole turn */
  readonly deltas: number
  /** tool calls in the whole turn, one per step; a last step without a call ends the turn */
  readonly calls: number
}

export const DEFAULT_SHAPE: KernelShape = { deltas: 10_000, calls: 100 }
/** `--quick`: a tenth of it, to check that everything runs */
export const QUICK_SHAPE: KernelShape = { deltas: 1_000, calls: 10 }

/** Pieces of text of the sizes a provider streams (a few tokens each). */
const PIECES = [
  "Let me",
  " look at",
  " the file",
  " that handles",
  " the commit",
  " path, then",
  " check how",
  " the writer",
  " batches",
  " deltas.\n"
]

/**
 * The turn as a script: `calls + 1` steps; each of the first `calls` streams
 * `floor(deltas / (calls + 1))` text deltas then calls `echo`, the last streams the rest of the
 * deltas and stops.
 */
export const kernelScript = (shape: KernelShape): ReadonlyArray<ScriptStep> => {
  const steps = shape.calls + 1
  const per = Math.floor(shape.deltas / steps)
  const out: Array<ScriptStep> = []
  let n = 0
  const text = (count: number) =>
    Array.from({ length: count }, () => ModelEvent.TextDelta({ id: "text-0", delta: PIECES[n++ % PIECES.length]! }))
  const usage = { input: 12_000, output: 400, cacheRead: 10_000 }
  for (let s = 0; s < shape.calls; s++) {
    out.push({
      events: [
        ...text(per),
        ...Script.toolCall({ callId: `call_${s}`, tool: "echo", input: { text: `step ${s}: look at src/a${s}.ts` } }),
        Script.finish("tool-calls", usage)
      ]
    })
  }
  out.push({ events: [...text(shape.deltas - per * shape.calls), Script.finish("stop", usage)] })
  return out
}

/** The whole text the script streams, in order. */
export const scriptText = (shape: KernelShape): string =>
  kernelScript(shape)
    .flatMap((step) => step.events)
    .map((event) => (event._tag === "TextDelta" ? event.delta : ""))
    .join("")

/** The model events the script streams (text deltas, tool chunks, finishes): what the model side produces. */
export const modelEventCount = (shape: KernelShape): number =>
  kernelScript(shape).reduce((sum, step) => sum + step.events.length, 0)

/** What the echo tool does (the floor of `runInterleaved` runs it too). */
const echoText = (text: string) => Effect.succeed({ output: text })

/** A trivial in-process tool: returns its input. */
const echo = defineTool({
  name: "echo",
  description: "returns its text",
  input: Schema.Struct({ text: Schema.String }),
  execute: (input) => echoText(input.text)
})

/**
 * The scripted model: each request streams the script's next step, one event per chunk (as a real
 * provider's stream delivers them). Its streams are pulls (`fromPull`), as the provider layers'
 * are (src/model/AiSdk.ts): the kernel reads them without a channel (`openPull`), and so does
 * `drain`. (Through `Stream.toPull`, which a stream made another way gets, each request also
 * paid a channel executor and its `Effect.provide` of a runtime at the close, ≈ 0.1 ms: a cost of
 * the benchmark's model, not of the kernel or of a provider.)
 */
const layerModel = (script: ReadonlyArray<ScriptStep>): Layer.Layer<Model> =>
  Layer.sync(Model, () => {
    let next = 0
    return {
      name: "bench/scripted",
      stream: () =>
        fromPull(
          Effect.suspend(() => {
            const step = script[next++]
            if (step === undefined) return Effect.dieMessage(`bench model: request ${next} has no step`)
            let at = 0
            return Effect.succeed(
              Effect.suspend(() =>
                at < step.events.length
                  ? Effect.succeed(Chunk.of(step.events[at++]!))
                  : Effect.fail(Option.none<ModelError>())
              )
            )
          })
        )
    }
  })

/** Reads `stream` to its end as the kernel reads a model's stream (`openPull`), doing nothing per chunk. */
const drain = <A, E>(stream: Stream.Stream<A, E>): Effect.Effect<void, E> =>
  Effect.scoped(
    Effect.flatMap(openPull(stream), (pull) => {
      const loop: Effect.Effect<void, E> = Effect.matchEffect(pull, {
        onFailure: Option.match({ onNone: () => Effect.void, onSome: Effect.fail }),
        onSuccess: () => loop
      })
      return loop
    })
  )

/** One call the kernel made to the store: how many events, awaited (`append`) or not (`appendLater`). */
interface StoreCall {
  readonly later: boolean
  readonly count: number
  /** made after `send` (inside the timed window) */
  readonly timed: boolean
}

interface Recorder {
  readonly calls: Array<StoreCall>
  timed: boolean
  /** snapshots the journal saved, and their JSON bytes */
  snapshots: number
  snapshotBytes: number
}

/**
 * `EventStore` over SQLite; with `record`, a thin wrapper that notes every `append` /
 * `appendLater` call (only in the unmeasured recording run).
 */
const layerStore = (file: string, record?: Recorder) => {
  const sqlite = EventStore.layerSqlite({ filename: file })
  if (record === undefined) return sqlite
  return Layer.effect(
    EventStore,
    Effect.map(EventStore, (store) => ({
      ...store,
      append: (sessionId: SessionId, events: ReadonlyArray<Events.NewEvent>) => {
        record.calls.push({ later: false, count: events.length, timed: record.timed })
        return store.append(sessionId, events)
      },
      appendLater: (sessionId: SessionId, events: ReadonlyArray<Events.NewEvent>) => {
        record.calls.push({ later: true, count: events.length, timed: record.timed })
        return store.appendLater(sessionId, events)
      },
      saveSnapshot: (snapshot: Snapshot) => {
        record.snapshots += 1
        record.snapshotBytes += JSON.stringify(snapshot.state).length
        return store.saveSnapshot(snapshot)
      }
    }))
  ).pipe(Layer.provide(sqlite))
}

interface KernelRun {
  readonly ms: number
  /** every event of the session, in seq order */
  readonly events: ReadonlyArray<Events.Envelope>
  /** events committed before `send` (`session.created`) */
  readonly before: number
}

/** One turn through the kernel on a fresh SQLite file; timed from `send` to the end of `wait` + `flush`. */
export const runKernel = (
  file: string,
  shape: KernelShape,
  record?: Recorder,
  counter?: OpCounter
): Promise<KernelRun & { readonly count?: OpCount }> => {
  const script = kernelScript(shape)
  const agent = makeAgentLayer({
    sessions: { maxSteps: 1000, system: () => "system" },
    tools: { tools: [echo] },
    retry: defaultRetryOptions
  }).pipe(
    Layer.provideMerge(layerModel(script)),
    Layer.provide(Secrets.layerFromEnv),
    Layer.provideMerge(layerStore(file, record))
  )
  const program = Effect.gen(function* () {
    const sessions = yield* Sessions
    const store = yield* EventStore
    const id = yield* sessions.create({ cwd: path.dirname(file) })
    const before = yield* store.lastSeq(id)
    if (record !== undefined) record.timed = true
    gc()
    const start = now()
    counter?.start()
    yield* sessions.send(id, "go")
    const outcome = yield* sessions.wait(id)
    yield* store.flush
    const count = counter?.stop()
    const ms = now() - start
    if (record !== undefined) record.timed = false
    const turn = Option.getOrThrow(outcome)
    if (turn.reason !== "stop" || turn.steps !== script.length) {
      throw new Error(`the turn ended ${turn.reason} after ${turn.steps} steps, not stop after ${script.length}`)
    }
    const events = Chunk.toReadonlyArray(yield* Stream.runCollect(store.read(id)))
    return { ms, events, before, ...(count !== undefined ? { count } : {}) }
  })
  return Effect.runPromise(program.pipe(Effect.provide(agent), underCounter(counter)))
}

/**
 * The scripted model's streams alone (the same steps, one event per chunk), drained with nothing
 * done per event: what producing the model's side of the turn costs, which the kernel cannot avoid
 * (half of the baseline; the other half is the same events written through a `SessionJournal`).
 */
export const runModelOnly = (shape: KernelShape, counter?: OpCounter): Promise<number> => {
  const script = kernelScript(shape)
  const request = { messages: [], tools: [] }
  const program = Effect.gen(function* () {
    const model = yield* Model
    gc()
    const start = now()
    counter?.start()
    for (let i = 0; i < script.length; i++) yield* drain(model.stream(request))
    counter?.stop()
    return now() - start
  })
  return Effect.runPromise(program.pipe(Effect.provide(layerModel(script)), underCounter(counter)))
}

/** One store call of the kernel: its events, handed over (`appendLater`) or awaited (`append`). */
interface ReplayCall {
  readonly later: boolean
  readonly events: ReadonlyArray<Events.NewEvent>
}

/** The kernel's store calls with the events each one carried (type + payload, as read back). */
interface Replay {
  readonly untimed: ReadonlyArray<ReadonlyArray<Events.NewEvent>>
  readonly timed: ReadonlyArray<ReplayCall>
  readonly count: number
}

/**
 * The timed calls in the kernel's order around its model requests: `before` the first step, then
 * per step the call with its `step.started` (`started`: the request goes out after that commit)
 * and the calls after it until the next step's (`rest`: the step's deltas and end, its tool
 * calls, the turn's end).
 */
interface ReplaySteps {
  readonly before: ReadonlyArray<ReplayCall>
  readonly steps: ReadonlyArray<{ readonly started: ReplayCall; readonly rest: ReadonlyArray<ReplayCall> }>
}

const replaySteps = (replay: Replay): ReplaySteps => {
  const before: Array<ReplayCall> = []
  const steps: Array<{ readonly started: ReplayCall; readonly rest: Array<ReplayCall> }> = []
  let pending = before
  for (const call of replay.timed) {
    if (call.events.some((e) => e.type === "step.started")) {
      const step = { started: call, rest: [] }
      steps.push(step)
      pending = step.rest
    } else pending.push(call)
  }
  return { before, steps }
}

const toReplay = (calls: ReadonlyArray<StoreCall>, envelopes: ReadonlyArray<Events.Envelope>): Replay => {
  const events = envelopes.map((e) => Events.make(e.type, e.payload as never) as Events.NewEvent)
  const total = calls.reduce((sum, c) => sum + c.count, 0)
  if (total !== events.length) {
    throw new Error(`the kernel handed ${total} events to the store but ${events.length} were committed`)
  }
  const untimed: Array<ReadonlyArray<Events.NewEvent>> = []
  const timed: Array<{ later: boolean; events: ReadonlyArray<Events.NewEvent> }> = []
  let at = 0
  for (const call of calls) {
    const slice = events.slice(at, at + call.count)
    at += call.count
    if (!call.timed) {
      if (call.later) throw new Error("the kernel handed events over without waiting before the turn")
      untimed.push(slice)
    } else timed.push({ later: call.later, events: slice })
  }
  return { untimed, timed, count: events.length }
}

/** Where a replay writes: the store itself or a `SessionJournal` over it. */
interface ReplaySink<E> {
  readonly append: (events: ReadonlyArray<Events.NewEvent>) => Effect.Effect<unknown, E>
  readonly appendLater: (events: ReadonlyArray<Events.NewEvent>) => Effect.Effect<void, E>
}

/** One of the kernel's recorded calls made again on `sink`: handed over or awaited, as the kernel made it. */
const callAgain = <E>(sink: ReplaySink<E>, call: ReplayCall) =>
  call.later ? sink.appendLater(call.events) : sink.append(call.events)

/** The replayed session's last seq, which must be the recording's event count (`what` names the replay). */
const checkReplayed = (store: EventStore["Type"], sessionId: SessionId, replay: Replay, what: string) =>
  Effect.flatMap(store.lastSeq(sessionId), (last) =>
    last === replay.count
      ? Effect.succeed(last)
      : Effect.dieMessage(`${what} replay: expected ${replay.count} events, found ${last}`)
  )

/**
 * The same events to a fresh `EventStore`, in the same calls as the kernel made them (its batches
 * reconstructed exactly: each `append` / `appendLater` call of the kernel is one call here with the
 * same events); timed from the first call after `session.created` to the end of `flush`.
 * - `store`: straight to the store — the baseline;
 * - `journal`: through a `SessionJournal` (the projection fold of every call, snapshots every 500
 *   events and at the turn's end, as the kernel's journal) — where the kernel's overhead splits.
 */
export const runReplay = (
  file: string,
  replay: Replay,
  via: "store" | "journal" = "store",
  counter?: OpCounter
): Promise<{ readonly ms: number; readonly events: number }> => {
  const program = Effect.gen(function* () {
    const store = yield* EventStore
    const sessionId = SessionIdSchema.make(`bench-kernel-${via}`)
    for (const events of replay.untimed) yield* store.append(sessionId, events)
    const sink =
      via === "store"
        ? {
            append: (events: ReadonlyArray<Events.NewEvent>) => store.append(sessionId, events),
            appendLater: (events: ReadonlyArray<Events.NewEvent>) => store.appendLater(sessionId, events),
            flush: store.flush
          }
        : yield* makeJournal(sessionId)
    gc()
    const start = now()
    counter?.start()
    for (const call of replay.timed) yield* callAgain(sink, call)
    yield* sink.flush
    counter?.stop()
    const ms = now() - start
    return { ms, events: yield* checkReplayed(store, sessionId, replay, via) }
  })
  return Effect.runPromise(
    program.pipe(Effect.provide(EventStore.layerSqlite({ filename: file })), underCounter(counter))
  )
}

/**
 * The baseline the kernel is judged on: the same model streams drained (nothing done per event)
 * and the same calls through a `SessionJournal`, in the kernel's order (`replaySteps`): the calls
 * before the first step, then per step its `step.started` call, its stream, the rest of its calls;
 * then `flush`. On a fresh SQLite file; checks that it holds exactly `replay.count` events.
 *
 * `floor` (reported, not judged): the same, plus only the two fibers no kernel step can drop — the
 * stream read by the kernel's reader (`consumeBatched`: a fiber of its own and a mailbox, which is
 * what lets a steered message stop a wait for the model) with nothing done per batch, and each tool
 * call run in a fiber of its own (what makes its timeout possible; the kernel's timer is left
 * out) after the call with its `tool.invoked`. What any kernel with those guarantees costs over
 * the baseline, before it does anything of its own: the room the goal leaves is what is above it.
 */
export const runInterleaved = (
  file: string,
  shape: KernelShape,
  replay: Replay,
  floor = false
): Promise<{ readonly ms: number; readonly events: number }> => {
  const script = kernelScript(shape)
  const { before, steps } = replaySteps(replay)
  if (steps.length !== script.length) {
    throw new Error(`the kernel's calls hold ${steps.length} step.started, the script ${script.length} steps`)
  }
  const request = { messages: [], tools: [] }
  const program = Effect.gen(function* () {
    const model = yield* Model
    const store = yield* EventStore
    const sessionId = SessionIdSchema.make("bench-kernel-interleaved")
    for (const events of replay.untimed) yield* store.append(sessionId, events)
    const journal = yield* makeJournal(sessionId)
    gc()
    const start = now()
    for (const c of before) yield* callAgain(journal, c)
    for (const step of steps) {
      yield* callAgain(journal, step.started)
      yield* floor ? consumeBatched(model.stream(request), () => Effect.void) : drain(model.stream(request))
      for (const c of step.rest) {
        yield* callAgain(journal, c)
        if (floor && c.events.some((e) => e.type === "tool.invoked"))
          yield* Effect.flatten(Fiber.await(yield* Effect.fork(echoText("step"))))
      }
    }
    yield* journal.flush
    const ms = now() - start
    return { ms, events: yield* checkReplayed(store, sessionId, replay, floor ? "floor" : "interleaved") }
  })
  return Effect.runPromise(
    program.pipe(Effect.provide(Layer.merge(layerModel(script), EventStore.layerSqlite({ filename: file }))))
  )
}

/** Effect operations and fibers per model step of the turn, counted in one unmeasured run of each side. */
export interface KernelOps {
  readonly kernel: OpCount
  readonly model: OpCount
  readonly journal: OpCount
}

/** One counted (unmeasured) run of the kernel, the model's streams and the journal replay: `KernelOps`. */
export const countKernelOps = async (dir: string, shape: KernelShape, replay: Replay): Promise<KernelOps> => {
  const counter = new OpCounter()
  const kernelFile = path.join(dir, "kernel-ops.db")
  const kernel = (await runKernel(kernelFile, shape, undefined, counter)).count!
  removeDb(kernelFile)
  await runModelOnly(shape, counter)
  const model = counter.stop()
  const journalFile = path.join(dir, "journal-ops.db")
  await runReplay(journalFile, replay, "journal", counter)
  const journal = counter.stop()
  removeDb(journalFile)
  return { kernel, model, journal }
}

export interface KernelResult {
  readonly shape: KernelShape
  readonly steps: number
  readonly rounds: number
  /** events in the recording run's database */
  readonly events: number
  /** events in the kernel's and the baseline's databases (asserted equal in every round) */
  readonly kernelEvents: number
  readonly baselineEvents: number
  /** events committed inside the timed window */
  readonly timedEvents: number
  readonly textDeltas: number
  readonly toolCalls: number
  /** the kernel's store calls in the timed window */
  readonly appendCalls: number
  readonly appendLaterCalls: number
  /** snapshots the journal saved during the turn (the baseline saves none), and their JSON bytes */
  readonly snapshots: number
  readonly snapshotBytes: number
  readonly kernelMs: number
  /**
   * the baseline of each round (`runInterleaved`): the model's streams drained + the same calls
   * through a `SessionJournal`, step by step in the kernel's order
   */
  readonly baselineMs: number
  readonly kernelRange: readonly [number, number]
  readonly baselineRange: readonly [number, number]
  /**
   * (not judged) the floor of each round (`runInterleaved` with `floor`): the baseline plus the
   * kernel's reader and a fiber per tool call, what no kernel step with its guarantees can drop
   */
  readonly floorMs: number
  readonly floorRange: readonly [number, number]
  /** floor / baseline of the medians: how much of the goal's room those two fibers take */
  readonly floorRatio: number
  /** (not judged) the same two halves apart: the model's streams alone + the journal replay alone, summed per round */
  readonly separateMs: number
  readonly separateRange: readonly [number, number]
  /** kernel / the halves apart, of the medians (the ratio judged before the baseline kept the kernel's order) */
  readonly separateRatio: number
  /** the same calls through a `SessionJournal` (the baseline's store side) */
  readonly journalMs: number
  readonly journalRange: readonly [number, number]
  /** the scripted model's streams alone, drained (the baseline's model side) */
  readonly modelMs: number
  readonly modelRange: readonly [number, number]
  /** (not judged) the same calls straight to the `EventStore`: the store's own part of the journal's time */
  readonly storeMs: number
  readonly storeRange: readonly [number, number]
  /** kernel / baseline of the medians */
  readonly ratio: number
  /** kernel / baseline of each round, lowest and highest */
  readonly ratioRange: readonly [number, number]
  /** the kernel's own time (kernel − baseline, medians) per model step, and per model event (deltas and tool chunks) */
  readonly overheadPerStepMs: number
  readonly overheadPerModelEventUs: number
  /** the model events of the turn (what `runModelOnly` drains) */
  readonly modelEvents: number
  /** Effect operations and fibers of each side in the turn (counted, not timed) */
  readonly ops: KernelOps
}

const removeDb = (file: string) => {
  for (const f of [file, `${file}-wal`, `${file}-shm`]) fs.rmSync(f, { force: true })
}

const int = (x: number) => x.toLocaleString("en-US")

const typesOf = (events: ReadonlyArray<{ readonly type: string }>) => events.map((e) => e.type).join(",")

/**
 * An unmeasured recording run (the kernel's store calls noted, its events read back), one
 * unmeasured run of each replay, then `rounds` rounds of the kernel, the baseline (straight to the
 * store) and the journal replay (which goes first rotates); medians.
 */
export const benchKernel = async (
  dir: string,
  options: {
    readonly shape?: KernelShape | undefined
    readonly rounds?: number | undefined
    readonly log?: ((line: string) => void) | undefined
  } = {}
): Promise<KernelResult> => {
  const shape = options.shape ?? DEFAULT_SHAPE
  const rounds = options.rounds ?? 7
  const log = options.log ?? (() => {})
  let n = 0
  const file = () => path.join(dir, `kernel-${n++}.db`)

  // warm-up + recording: the kernel's calls to the store and the events they committed
  const record: Recorder = { calls: [], timed: false, snapshots: 0, snapshotBytes: 0 }
  const recordFile = file()
  const recorded = await runKernel(recordFile, shape, record)
  removeDb(recordFile)
  const replay = toReplay(record.calls, recorded.events)
  const deltaEvents = recorded.events.filter((e) => e.type === "text.delta")
  const textDeltas = deltaEvents.length
  const toolCalls = recorded.events.filter((e) => e.type === "tool.finished").length
  // the kernel merges deltas that arrive together: the text must be whole, whatever the event count
  const committedText = deltaEvents.map((e) => (e.payload as { delta: string }).delta).join("")
  if (committedText !== scriptText(shape) || toolCalls !== shape.calls) {
    throw new Error(
      `the kernel committed ${committedText.length} characters of text in ${textDeltas} deltas and ${toolCalls} ` +
        `finished calls, not the script's ${scriptText(shape).length} characters and ${shape.calls} calls`
    )
  }
  const expectedTypes = typesOf(recorded.events)
  for (const via of ["store", "journal"] as const) {
    const warm = file()
    await runReplay(warm, replay, via)
    removeDb(warm)
  }
  log(
    `  ${int(replay.count)} events (${int(replay.count - recorded.before)} in the turn: ` +
      `${int(replay.timed.filter((c) => c.later).length)} handed over, ` +
      `${int(replay.timed.filter((c) => !c.later).length)} awaited appends), ${record.snapshots} snapshots; ` +
      `unmeasured kernel run ${recorded.ms.toFixed(0)} ms`
  )

  const times = {
    kernel: [] as Array<number>,
    store: [] as Array<number>,
    journal: [] as Array<number>,
    model: [] as Array<number>,
    baseline: [] as Array<number>,
    floor: [] as Array<number>,
    separate: [] as Array<number>
  }
  await runModelOnly(shape)
  for (const floor of [false, true]) {
    const warm = file()
    await runInterleaved(warm, shape, replay, floor)
    removeDb(warm)
  }
  const ratios: Array<number> = []
  const counts = { kernel: 0, store: 0 }
  const sides = ["kernel", "store", "journal", "baseline", "floor"] as const
  for (let r = 0; r < rounds; r++) {
    // which side goes first rotates from round to round
    for (let i = 0; i < sides.length; i++) {
      const side = sides[(i + r) % sides.length]!
      const f = file()
      try {
        if (side === "kernel") {
          const run = await runKernel(f, shape)
          if (run.events.length !== replay.count || typesOf(run.events) !== expectedTypes) {
            throw new Error(
              `kernel round ${r + 1} committed ${run.events.length} events, the recording run ${replay.count} ` +
                "(or other types): the runs are not the same work"
            )
          }
          times.kernel.push(run.ms)
          counts.kernel = run.events.length
        } else if (side === "baseline") {
          // `runInterleaved` checks that the database holds exactly `replay.count` events
          times.baseline.push((await runInterleaved(f, shape, replay)).ms)
        } else if (side === "floor") {
          times.floor.push((await runInterleaved(f, shape, replay, true)).ms)
        } else {
          // `runReplay` checks that the database holds exactly `replay.count` events
          const replayed = await runReplay(f, replay, side)
          times[side].push(replayed.ms)
          if (side === "store") counts.store = replayed.events
        }
      } finally {
        removeDb(f)
      }
    }
    times.model.push(await runModelOnly(shape))
    if (counts.kernel !== counts.store) {
      throw new Error(`round ${r + 1}: the kernel committed ${counts.kernel} events, the baseline ${counts.store}`)
    }
    const k = times.kernel[r]!
    const b = times.baseline[r]!
    const apart = times.model[r]! + times.journal[r]!
    times.separate.push(apart)
    ratios.push(k / b)
    log(
      `  round ${r + 1}: kernel ${k.toFixed(0)} ms, model + journal in the kernel's order ${b.toFixed(0)} ms, ` +
        `ratio ${(k / b).toFixed(2)}; floor ${times.floor[r]!.toFixed(0)} ms (${(times.floor[r]! / b).toFixed(2)}); apart: model ${times.model[r]!.toFixed(0)} ms + journal ` +
        `${times.journal[r]!.toFixed(0)} ms = ${apart.toFixed(0)} ms; events ${int(counts.kernel)} = ` +
        `${int(counts.store)}; straight to the store ${times.store[r]!.toFixed(0)} ms`
    )
  }
  const ops = await countKernelOps(dir, shape, replay)
  const kernelMs = median(times.kernel)
  const baselineMs = median(times.baseline)
  const separateMs = median(times.separate)
  const range = (xs: ReadonlyArray<number>) => [Math.min(...xs), Math.max(...xs)] as const
  const steps = shape.calls + 1
  const modelEvents = modelEventCount(shape)
  return {
    shape,
    steps,
    rounds,
    events: replay.count,
    kernelEvents: counts.kernel,
    baselineEvents: counts.store,
    timedEvents: replay.timed.reduce((sum, c) => sum + c.events.length, 0),
    textDeltas,
    toolCalls,
    appendCalls: replay.timed.filter((c) => !c.later).length,
    appendLaterCalls: replay.timed.filter((c) => c.later).length,
    snapshots: record.snapshots,
    snapshotBytes: record.snapshotBytes,
    kernelMs,
    baselineMs,
    journalMs: median(times.journal),
    modelMs: median(times.model),
    storeMs: median(times.store),
    modelRange: range(times.model),
    kernelRange: range(times.kernel),
    baselineRange: range(times.baseline),
    floorMs: median(times.floor),
    floorRange: range(times.floor),
    floorRatio: median(times.floor) / baselineMs,
    separateMs,
    separateRange: range(times.separate),
    separateRatio: kernelMs / separateMs,
    journalRange: range(times.journal),
    storeRange: range(times.store),
    ratio: kernelMs / baselineMs,
    ratioRange: range(ratios),
    overheadPerStepMs: (kernelMs - baselineMs) / steps,
    overheadPerModelEventUs: ((kernelMs - baselineMs) * 1000) / modelEvents,
    modelEvents,
    ops
  }
}

// `node --import tsx bench/kernel.ts [--quick]`: this benchmark alone, e.g. under `--cpu-prof`
if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === path.resolve(import.meta.filename ?? "")) {
  const quick = process.argv.includes("--quick")
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "logbook-bench-kernel-"))
  try {
    const r = await benchKernel(dir, {
      shape: quick ? QUICK_SHAPE : DEFAULT_SHAPE,
      rounds: quick ? 3 : 7,
      log: console.log
    })
    console.log(
      `events: kernel ${int(r.kernelEvents)}, baseline ${int(r.baselineEvents)}; ` +
        `kernel ${r.kernelMs.toFixed(0)} ms, baseline (model + journal in the kernel's order) ` +
        `${r.baselineMs.toFixed(0)} ms, ratio ${r.ratio.toFixed(2)}; floor ${r.floorMs.toFixed(0)} ms, ` +
        `${r.floorRatio.toFixed(2)} of the baseline; apart (model ${r.modelMs.toFixed(0)} + journal ` +
        `${r.journalMs.toFixed(0)}) ${r.separateMs.toFixed(0)} ms, ratio ${r.separateRatio.toFixed(2)} ` +
        `(rounds ${r.ratioRange[0].toFixed(2)}–${r.ratioRange[1].toFixed(2)}); ` +
        `own time ${r.overheadPerStepMs.toFixed(2)} ms a step, ${r.overheadPerModelEventUs.toFixed(1)} µs a model event; ` +
        `Effect operations per step: kernel ${int(Math.round(r.ops.kernel.ops / r.steps))}, model streams ${int(Math.round(r.ops.model.ops / r.steps))}, ` +
        `journal ${int(Math.round(r.ops.journal.ops / r.steps))}; fibers per step ${(r.ops.kernel.fibers / r.steps).toFixed(1)}`
    )
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
