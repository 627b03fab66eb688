/**
 * The cost of a step (`costOf`) and of sums of steps: a step without a price is `costKnown: false`,
 * never a silent $0; a price of 0 is a price.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option, Stream } from "effect"
import type { Envelope } from "../../src/domain/Events.js"
import { addUsage, emptyUsage, isCostKnown, type Usage } from "../../src/domain/Message.js"
import type { Price } from "../../src/model/Price.js"
import { layerScripted, Script } from "../../src/model/Scripted.js"
import { makeAgentLayer } from "../../src/session/Agent.js"
import { costOf } from "../../src/session/Processor.js"
import { Sessions } from "../../src/session/Sessions.js"
import { EventStore } from "../../src/store/EventStore.js"
import { Secrets } from "../../src/tools/Secrets.js"

const tokens = { input: 1_000_000, output: 100_000, reasoning: 0, cacheRead: 0, cacheWrite: 0 }

describe("costOf", () => {
  it("prices every kind of token: uncached input, output, cache reads and writes", () => {
    const price = { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 }
    const usage = { input: 1_000_000, output: 100_000, reasoning: 50_000, cacheRead: 400_000, cacheWrite: 100_000 }
    // 500k uncached × 3 + 100k × 15 (reasoning is part of the output) + 400k × 0.3 + 100k × 3.75
    const { cost, known } = costOf(usage, price)
    expect(known).toBe(true)
    expect(cost).toBeCloseTo(1.5 + 1.5 + 0.12 + 0.375, 10)
  })

  it("cached tokens fall back to the input price", () => {
    const usage = { ...tokens, input: 1_000_000, cacheRead: 1_000_000 }
    expect(costOf(usage, { input: 2, output: 8 })).toEqual({ cost: 2 + 0.8, known: true })
  })

  it("no price: unknown, and nothing is counted as $0", () => {
    expect(costOf(tokens, undefined)).toEqual({ cost: 0, known: false })
    expect(costOf(tokens, {})).toEqual({ cost: 0, known: false })
  })

  it("a price for some kinds of token only: unknown, and the cost is what the priced ones cost", () => {
    expect(costOf(tokens, { input: 2 })).toEqual({ cost: 2, known: false })
    expect(costOf(tokens, { output: 10 })).toEqual({ cost: 1, known: false })
    // tokens that were not used need no price
    expect(costOf({ ...tokens, output: 0 }, { input: 2 })).toEqual({ cost: 2, known: true })
  })

  it("a price of 0 (a free local model) is known: $0", () => {
    expect(costOf(tokens, { input: 0, output: 0 })).toEqual({ cost: 0, known: true })
  })

  it("no tokens cost nothing with a price; without one the cost stays unknown (usage may be unreported)", () => {
    const none = { ...tokens, input: 0, output: 0 }
    expect(costOf(none, { input: 2, output: 8 })).toEqual({ cost: 0, known: true })
    expect(costOf(none, undefined)).toEqual({ cost: 0, known: false })
  })
})

describe("sums of usages", () => {
  const priced: Usage = { ...emptyUsage, input: 10, cost: 0.25 }
  const unpriced: Usage = { ...emptyUsage, input: 20, cost: 0, costKnown: false }
  const partly: Usage = { ...emptyUsage, input: 30, cost: 0.5, costKnown: false }

  it("known + known is known; any unknown step makes the sum partly unknown; the known costs add up", () => {
    expect(addUsage(priced, priced)).toEqual({ ...emptyUsage, input: 20, cost: 0.5 })
    expect(addUsage(priced, unpriced)).toEqual({ ...emptyUsage, input: 30, cost: 0.25, costKnown: false })
    expect(addUsage(unpriced, priced)).toEqual({ ...emptyUsage, input: 30, cost: 0.25, costKnown: false })
    expect(addUsage(unpriced, unpriced)).toEqual({ ...emptyUsage, input: 40, cost: 0, costKnown: false })
    expect(addUsage(addUsage(priced, partly), priced)).toEqual({
      ...emptyUsage,
      input: 50,
      cost: 1,
      costKnown: false
    })
  })

  it("a usage without costKnown (an older log) is known", () => {
    expect(isCostKnown({ ...emptyUsage, cost: 0 })).toBe(true)
    expect(isCostKnown(emptyUsage)).toBe(true)
    expect(isCostKnown(unpriced)).toBe(false)
    expect(isCostKnown(addUsage(emptyUsage, emptyUsage))).toBe(true)
  })
})

/** One turn of two steps (a tool call, then the answer) through the kernel with `price`. */
const turn = (price: Price | undefined) =>
  Effect.gen(function* () {
    const sessions = yield* Sessions
    const id = yield* sessions.create({ cwd: "/tmp" })
    yield* sessions.send(id, "go")
    const outcome = Option.getOrThrow(yield* sessions.wait(id))
    const log = Array.from(yield* Stream.runCollect((yield* EventStore).read(id))) as Array<Envelope>
    const steps = log.flatMap((e) => (e.type === "step.finished" ? [e.payload.usage] : []))
    return { outcome, steps, totals: (yield* sessions.state(id)).totals }
  }).pipe(
    Effect.provide(
      makeAgentLayer({ sessions: { maxSteps: 5, system: () => "system", price }, tools: { tools: [] } }).pipe(
        Layer.provideMerge(
          layerScripted([
            Script.toolCalls([{ callId: "c1", tool: "nope", input: {} }], {
              usage: { input: 1000, output: 100 }
            }),
            Script.text("done", { usage: { input: 2000, output: 200 } })
          ])
        ),
        Layer.provide(Secrets.layerFromEnv),
        Layer.provideMerge(EventStore.layerMemory)
      )
    )
  )

describe("the kernel records what it knows of the cost", () => {
  it.live("without a price: every step.finished says costKnown false, and so does the turn", () =>
    Effect.gen(function* () {
      const { outcome, steps, totals } = yield* turn(undefined)
      expect(steps.map((u) => [u.input, u.cost, u.costKnown])).toEqual([
        [1000, 0, false],
        [2000, 0, false]
      ])
      expect(outcome.usage).toMatchObject({ input: 3000, output: 300, cost: 0, costKnown: false })
      expect(totals).toMatchObject({ cost: 0, costKnown: false })
    })
  )

  it.live("with a price: costs are known and summed", () =>
    Effect.gen(function* () {
      const { outcome, steps } = yield* turn({ input: 1, output: 2 })
      expect(steps.map((u) => u.costKnown)).toEqual([undefined, undefined])
      expect(outcome.usage.costKnown).toBeUndefined()
      // 3000 in at $1, 300 out at $2 per million
      expect(outcome.usage.cost).toBeCloseTo(0.0036, 10)
    })
  )

  it.live("with a price of 0: known, $0", () =>
    Effect.gen(function* () {
      const { outcome } = yield* turn({ input: 0, output: 0 })
      expect(outcome.usage).toMatchObject({ cost: 0 })
      expect(isCostKnown(outcome.usage)).toBe(true)
    })
  )
})
