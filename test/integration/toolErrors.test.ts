/**
 * What the model gets wrong, through the built binary: invalid arguments, an unknown tool, a
 * command with a huge output. Each ends as a readable tool error or a capped output — never a
 * crash, never a stuck session.
 */
import { Effect, Option } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { EventStore } from "../../src/store/EventStore.js"
import { runCli } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import {
  contentText,
  idle,
  latestSession,
  makeJanitor,
  makeWorkspace,
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
    expect(result.stderr).toBe("")
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
    const whole = await Effect.runPromise(
      Effect.flatMap(EventStore, (store) => store.getBlob(record.outputBlob)).pipe(
        Effect.provide(EventStore.layerSqlite({ filename: ws.db, readonly: true }))
      )
    )
    expect(new TextDecoder().decode(Option.getOrThrow(whole)).split("\n")).toHaveLength(200_001)
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
