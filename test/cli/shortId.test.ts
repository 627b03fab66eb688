/**
 * Short ids (`src/cli/shortId.ts`): unique prefixes, as git abbreviates hashes.
 */
import { describe, expect, it } from "@effect/vitest"
import { FastCheck } from "effect"
import { SHORT_ID_MIN, shortIds } from "../../src/cli/shortId.js"

/** How `resolveSession` finds a session by a prefix: the exact id first, else the one id that starts with it. */
const resolve = (ids: ReadonlyArray<string>, text: string): ReadonlyArray<string> =>
  ids.includes(text) ? [text] : ids.filter((id) => id.toLowerCase().startsWith(text.toLowerCase()))

describe("shortIds", () => {
  it("is the first 8 characters while they are unique", () => {
    const ids = ["0195a0b0-0000-7000-8000-000000000001", "0195a1c2-0000-7000-8000-000000000002"]
    expect(shortIds(ids)).toEqual(
      new Map([
        [ids[0], "0195a0b0"],
        [ids[1], "0195a1c2"]
      ])
    )
  })

  it("grows until no other id shares the prefix, never ending at a dash", () => {
    const a = "0195a0b0-0000-7000-8000-000000000001"
    const b = "0195a0b0-0001-7000-8000-000000000002"
    const c = "0195a0b0-1234-7000-8000-000000000003"
    const d = "0195a0b1-0000-7000-8000-000000000004"
    const short = shortIds([a, b, c, d])
    // a and b share "0195a0b0-000": 13 characters each; c differs at the 10th (after the dash)
    expect(short.get(a)).toBe("0195a0b0-0000")
    expect(short.get(b)).toBe("0195a0b0-0001")
    expect(short.get(c)).toBe("0195a0b0-1")
    // d differs from the others at the 8th character
    expect(short.get(d)).toBe("0195a0b1")
  })

  it("ignores case as resolveSession does, and shows in full an id that is a prefix of another", () => {
    const short = shortIds(["abcdefghij1", "ABCDEFGHIJ2", "abc", "abcdef"], 3)
    expect(short.get("abcdefghij1")).toBe("abcdefghij1")
    expect(short.get("ABCDEFGHIJ2")).toBe("ABCDEFGHIJ2")
    expect(short.get("abc")).toBe("abc")
    expect(short.get("abcdef")).toBe("abcdef")
    expect(shortIds(["short"]).get("short")).toBe("short")
    expect(shortIds([])).toEqual(new Map())
  })

  it("property: every short id resolves to its own session, and is as short as it can be", () => {
    const idArb = FastCheck.oneof(
      // UUIDv7-like ids made close in time, so prefixes collide often
      FastCheck.tuple(FastCheck.integer({ min: 0, max: 40 }), FastCheck.hexaString({ minLength: 4, maxLength: 4 })).map(
        ([ms, rand]) => `0195a0b0-${ms.toString(16).padStart(4, "0")}-7${rand.slice(1)}-8000-000000000000`
      ),
      FastCheck.stringMatching(/^[a-cA-C-]{1,12}$/)
    )
    FastCheck.assert(
      FastCheck.property(FastCheck.uniqueArray(idArb, { maxLength: 40 }), (ids) => {
        const short = shortIds(ids)
        for (const id of ids) {
          const s = short.get(id)!
          expect(id.startsWith(s)).toBe(true)
          expect(resolve(ids, s)).toEqual([id])
          expect(s.length >= Math.min(SHORT_ID_MIN, id.length)).toBe(true)
          if (s.length < id.length) {
            expect(s.endsWith("-")).toBe(false)
            // one character less is too short: below the minimum, or shared with another id
            const shorter = s.slice(0, -1)
            const undashed = shorter.replace(/-+$/, "")
            const minimal =
              shorter.length < SHORT_ID_MIN ||
              resolve(ids, shorter).length > 1 ||
              (undashed !== shorter && (undashed.length < SHORT_ID_MIN || resolve(ids, undashed).length > 1))
            expect(minimal).toBe(true)
          }
        }
      }),
      { numRuns: 500 }
    )
  })
})
