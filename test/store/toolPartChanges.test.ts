import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import type { Event } from "../../src/domain/Events.js"
import { CallId } from "../../src/domain/Ids.js"
import * as Projection from "../../src/store/Projection.js"
import { changedSince, serialOf } from "../../src/store/toolPartChanges.js"
import { SESSION_ID, toEnvelopes } from "../support/arbitraries.js"
import { A1, e, prelude } from "../support/fixtures.js"

const C1 = CallId.make("c1")
const C2 = CallId.make("c2")
const C3 = CallId.make("c3")

const pending = (callId: CallId) => e("tool.pending", { messageId: A1, callId, tool: "read" })

/** Folds `tail` onto `state`, which is the fold of `head`. */
const more = (state: Projection.SessionState, head: ReadonlyArray<Event>, tail: ReadonlyArray<Event>) =>
  Either.getOrThrow(Projection.applyAll(state, toEnvelopes(SESSION_ID, [...head, ...tail]).slice(head.length)))

describe("toolPartChanges", () => {
  it("gives the calls set between a map and a later one of the same folds, and nothing it cannot tell", () => {
    const head = [...prelude, pending(C1)]
    const a = Either.getOrThrow(Projection.applyAll(Projection.empty(SESSION_ID), toEnvelopes(SESSION_ID, head)))
    const then = serialOf(a.toolParts)
    expect(then).toBeDefined()
    expect(changedSince(a.toolParts, then!)).toEqual(new Set())
    // two folds later (each copies the map): both calls set on the way
    const b = more(a, head, [pending(C2)])
    const c = more(b, [...head, pending(C2)], [e("tool.failed", { callId: C1, error: "no" })])
    expect(changedSince(c.toolParts, then!)).toEqual(new Set([C2, C1]))
    // a fold that does not touch the tool parts keeps the map
    const d = more(
      c,
      [...head, pending(C2), e("tool.failed", { callId: C1, error: "no" })],
      [e("chat.state", { state: "idle" })]
    )
    expect(d.toolParts).toBe(c.toolParts)
    // another branch from `a`: the map of `b` is not on its way back
    const other = more(a, head, [pending(C3)])
    expect(changedSince(other.toolParts, serialOf(b.toolParts)!)).toBeUndefined()
    expect(changedSince(other.toolParts, then!)).toEqual(new Set([C3]))
    // a map no fold made (a snapshot's, decoded) cannot tell
    expect(changedSince(new Map(c.toolParts), then!)).toBeUndefined()
    const decoded = Projection.fromJsonState(JSON.parse(JSON.stringify(Projection.toJsonState(c))))
    expect(decoded).toBeDefined()
    expect(changedSince(decoded!.toolParts, then!)).toBeUndefined()
  })
})
