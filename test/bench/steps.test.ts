/**
 * bench/steps.ts on a tiny script, logbook only (pi is not installed by tests): it runs the built
 * binary against the scripted server, times each step from the requests' arrivals, reads the tool
 * times and the event count from the log, resumes the long session, and reads the peak RSS the
 * preloaded module wrote. The figures themselves are the benchmark's, not asserted here; that
 * each was measured (and that a run which does not answer fails the benchmark) is.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { benchSteps } from "../../bench/steps.js"
import { tempDir } from "../support/tmp.js"

describe("benchSteps", () => {
  it("measures cycles, overheads, resume and peak RSS of logbook through the built binary", async () => {
    const dir = tempDir("logbook-bench-steps-")
    const result = await benchSteps(dir, { shortSteps: 4, longSteps: 9, rounds: 1, toolSteps: 4, withPi: false })
    fs.rmSync(dir, { recursive: true, force: true })
    expect(result._tag).toBe("Done")
    if (result._tag !== "Done") return
    expect(result.piSkipped).toBe("not asked for")
    expect(result.agents.map((a) => a.agent)).toEqual(["logbook"])
    const logbook = result.agents[0]!
    for (const window of [logbook.short, logbook.longStart, logbook.longEnd]) {
      expect(window.medianMs).toBeGreaterThan(0)
      expect(window.p90Ms).toBeGreaterThanOrEqual(window.medianMs)
    }
    // the overhead is the cycle minus the tool's own time: never more than the cycle
    expect(logbook.shortOverhead!.medianMs).toBeLessThanOrEqual(logbook.short.medianMs)
    expect(logbook.longEndOverhead!.medianMs).toBeLessThanOrEqual(logbook.longEnd.medianMs)
    // 9 steps, each with its events (and the session's opening ones)
    expect(logbook.longEvents).toBeGreaterThan(9 * 5)
    // the preload counted the binary's SQLite transactions: at least one a step, fewer than its events
    expect(logbook.longCommits).toBeGreaterThanOrEqual(9)
    expect(logbook.longCommits).toBeLessThan(logbook.longEvents!)
    expect(logbook.resumeMs).toBeGreaterThan(0)
    expect(logbook.freshMs).toBeGreaterThan(0)
    expect(logbook.peakRssBytes).toBeGreaterThan(10 * 2 ** 20)
    // the steps of the other tools: each session answered (a failed call fails the run) and was timed
    for (const tool of ["write", "bash"] as const) expect(logbook.byTool?.[tool].medianMs).toBeGreaterThan(0)
  })

  it("with a baseline build, runs it as a second logbook in the same rounds and measures it the same way", async () => {
    const dir = tempDir("logbook-bench-steps-")
    // the built binary stands in for a baseline built from a git ref (building one takes a while)
    const bin = path.join(import.meta.dirname, "..", "..", "dist", "bin.js")
    const result = await benchSteps(dir, {
      shortSteps: 4,
      longSteps: 6,
      rounds: 1,
      withPi: false,
      baseline: { ref: "HEAD", commit: "0123456789abcdef", bin }
    })
    fs.rmSync(dir, { recursive: true, force: true })
    expect(result._tag).toBe("Done")
    if (result._tag !== "Done") return
    expect(result.baseline).toEqual({ ref: "HEAD", commit: "0123456789abcdef" })
    expect(result.agents.map((a) => a.agent)).toEqual(["logbook", "before"])
    const before = result.agents[1]!
    expect(before.shortOverhead!.medianMs).toBeGreaterThan(0)
    expect(before.shortOverhead!.medianMs).toBeLessThanOrEqual(before.short.medianMs)
    expect(before.longEvents).toBeGreaterThan(6 * 5)
    expect(before.resumeMs).toBeGreaterThan(0)
  })
})
