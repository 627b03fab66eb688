/**
 * What the model gets wrong, through the built binary: invalid arguments, an unknown tool, a
 * command with a huge output. Each ends as a readable tool error or a capped output — never a
 * crash, never a stuck session.
 */
import { afterEach, describe, expect, it } from "vitest"
import { runCli } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import {
  blobText,
  contentText,
  idle,
  latestSession,
  makeJanitor,
  makeWorkspace,
  notices,
  ofType,
  readLog,
  toolResult,
  unanswered
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

describe("logbook run: tool calls the model gets wrong", () => {
  it("invalid arguments, an unknown tool and a huge output: readable errors, a capped output, the session idle", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(
      Reply.stream({
        toolCalls: [
          { id: "call_bad", name: "read", arguments: JSON.stringify({ file: "a.txt" }) },
          { id: "call_unknown", name: "teleport", arguments: JSON.stringify({ to: "mars" }) },
          { id: "call_big", name: "bash", arguments: JSON.stringify({ command: "seq 1 200000" }) }
        ]
      }),
      Reply.text("Done.")
    )
    const result = await runCli([...ws.runArgs, "try things"])
    expect(notices(result.stderr)).toEqual([])
    expect(result.code).toBe(0)

    const last = server.requests.at(-1)!
    expect(unanswered(last)).toEqual([])
    expect(contentText(toolResult(last, "call_bad"))).toMatch(/Invalid input for tool "read"/)
    expect(contentText(toolResult(last, "call_unknown"))).toMatch(/Unknown tool "teleport".*read/)
    const big = contentText(toolResult(last, "call_big"))
    // capped for the model (the first and the last part, a marker between), the command still ran to the end
    expect(big.length).toBeLessThan(40_000)
    expect(big).toMatch(/^1\n2\n3\n/)
    expect(big).toMatch(/200000\n[\s\S]*Exit code: 0/)

    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    // the command's record: the command, its exit code, and its whole output as a blob
    const finished = ofType(log, "tool.finished").find((e) => e.payload.callId === "call_big")!
    const record = finished.payload.metadata as { command: string; exitCode: number; outputBlob: string }
    expect(record).toMatchObject({ command: "seq 1 200000", exitCode: 0 })
    expect((await blobText(ws.db, record.outputBlob)).split("\n")).toHaveLength(200_001)
    // only the call that could run was invoked
    expect(ofType(log, "tool.invoked").map((e) => e.payload.callId)).toEqual(["call_big"])
    expect(
      ofType(log, "tool.failed")
        .map((e) => e.payload.callId)
        .sort()
    ).toEqual(["call_bad", "call_unknown"])
    expect(log.at(-1)).toMatchObject(idle)
  })
})

describe("logbook run: a command stopped by its timeout", () => {
  it("tool.timeout, then tool.failed {timedOut} with the command's record: exit code, duration, output blob", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const command = "echo started; sleep 60"
    server.enqueue(
      Reply.stream({
        toolCalls: [{ id: "call_slow", name: "bash", arguments: JSON.stringify({ command, timeoutMs: 1500 }) }]
      }),
      Reply.text("It was too slow.")
    )
    const result = await runCli([...ws.runArgs, "run the slow thing"])
    expect(result.code).toBe(0)
    expect(result.stderr).toContain("timed out after 1.5s")

    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "tool.timeout").map((e) => e.payload.timeoutMs)).toEqual([1500])
    const failed = ofType(log, "tool.failed")
    expect(failed).toHaveLength(1)
    expect(failed[0]!.payload).toMatchObject({ callId: "call_slow", timedOut: true })
    const record = failed[0]!.payload.metadata as {
      command: string
      exitCode: number
      signal: string
      durationMs: number
      outputBlob: string
    }
    // the shell was stopped by SIGTERM (128 + 15): `sleep 60` did not end by itself
    expect(record).toMatchObject({ command, exitCode: 143, signal: "SIGTERM" })
    // its duration is the command's own (from its start to its exit), so it lies within the call's
    // window: after tool.invoked was written, before tool.failed was. (Not compared with the timeout:
    // the timeout's clock starts before the tool's own set-up, so the command's time may be a little less.)
    const invoked = ofType(log, "tool.invoked").find((e) => e.payload.callId === "call_slow")!
    expect(record.durationMs).toBeGreaterThan(0)
    expect(record.durationMs).toBeLessThanOrEqual(failed[0]!.at - invoked.at)
    // the output it had written: normally all of "started\n" (a prefix of it on a very slow machine)
    expect("started\n".startsWith(await blobText(ws.db, record.outputBlob))).toBe(true)
    expect(unanswered(server.requests.at(-1)!)).toEqual([])
    expect(log.at(-1)).toMatchObject(idle)
  })
})
