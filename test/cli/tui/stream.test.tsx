/**
 * A long answer streamed into the screen as the controller feeds it (interactive.ts: what arrives
 * together is folded together, then one `ui.set` per batch): 10,000 `text.delta` envelopes in
 * batches through `makeScreenFolder` and a store that rerenders the App. What is checked is what
 * the last frame holds — the whole text, its end, the status line — not how long it took
 * (bench/render.ts measures that).
 */
import { afterEach, describe, expect, it } from "vitest"
import { makeScreenFolder } from "../../../src/present/screen.js"
import { checked, Log, type Mounted, makeStore, mount, SID, settle, uiState, untilShown, usage } from "./support.js"

const DELTAS = 10_000
/**
 * What the controller hands over when drawing takes longer than the deltas take to come (its
 * `groupedWithin(1000, …)` cap): each frame of this answer draws all of it, so one frame per 100
 * deltas would take a minute here (bench/render.ts has the figures).
 */
const BATCH = 1000

/** Delta `i`: a word; every tenth ends a line, so the text has 1,000 short lines. */
const delta = (i: number) => `w${i}${i % 10 === 9 ? "\n" : " "}`

let mounted: Mounted | undefined
afterEach(() => {
  mounted?.unmount()
  mounted = undefined
})

describe("10,000 streamed deltas", () => {
  it("in batches, one store update each: the last frame holds the whole text and the status line", {
    timeout: 180_000
  }, async () => {
    const log = new Log().created().startTurn("write a long answer")
    const folder = makeScreenFolder(SID)
    folder.push(log.take())
    const store = makeStore(uiState(checked(folder)))
    const m = mount(store)
    mounted = m
    await untilShown(m, "busy · streaming")
    const framesBefore = m.frames()

    for (let i = 0; i < DELTAS; i++) {
      log.text(delta(i))
      if ((i + 1) % BATCH === 0) {
        folder.push(log.take())
        store.set((s) => ({ ...s, screen: folder.snapshot() }))
        // the controller's next batch comes from the event loop, after the screen has drawn this one
        await settle()
      }
    }
    log.finishStep(0, usage(5_000, 25_000, 0.3125)).endTurn()
    folder.push(log.take())
    store.set((s) => ({ ...s, screen: checked(folder) }))

    const frame = await untilShown(m, "idle │")
    // every batch was drawn (one frame each, at least), none was skipped
    expect(m.frames() - framesBefore).toBeGreaterThanOrEqual(DELTAS / BATCH)
    const expected = Array.from({ length: DELTAS / 10 }, (_, line) =>
      Array.from({ length: 10 }, (_, j) => `w${line * 10 + j}`).join(" ")
    )
    const shown = frame.split("\n").map((l) => l.trimEnd())
    const first = shown.indexOf(expected[0]!)
    expect(first).toBeGreaterThan(0)
    expect(shown.slice(first, first + expected.length)).toEqual(expected)
    expect(frame).toContain("w9990 w9991 w9992 w9993 w9994 w9995 w9996 w9997 w9998 w9999")
    expect(frame.split("\n").at(-1)).toBe(`idle │ openai/gpt-4o │ 30,000 tokens │ $0.3125 │ ctx 4% │ ${SID}`)
    // the whole text is in the log's fold too
    const item = checked(folder).items[1]!
    expect(item.kind === "text" && item.text.length).toBe(
      Array.from({ length: DELTAS }, (_, i) => delta(i)).join("").length
    )
  })
})
