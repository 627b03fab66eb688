/**
 * What the model sent is always kept (issue 12 §3), through the built binary: a call that never ran
 * — rejected by the permission rules, an unknown tool, invalid arguments, input that is not JSON —
 * keeps its input in its `tool.failed`, and the next request sends the call back with the arguments
 * the model wrote (not `{}`); input that is not JSON is kept as its text.
 */
import { afterEach, describe, expect, it } from "vitest"
import { runCli } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import { latestSession, makeJanitor, makeWorkspace, messagesOf, ofType, readLog, toolCall } from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

describe("a call that never ran", () => {
  it("keeps the input the model sent, and is sent back with it", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, { config: { permission: { bash: { "*": "allow", "touch *": "ask" } } } })
    server.enqueue(
      Reply.stream({
        toolCalls: [
          // asked about, and (no terminal) rejected
          toolCall("c_rejected", "bash", { command: "touch made" }),
          // no such tool
          toolCall("c_unknown", "frobnicate", { level: 11 }),
          // the wrong arguments for the tool
          toolCall("c_invalid", "read", { file: "a.txt" }),
          // not JSON at all
          { id: "c_text", name: "write", arguments: '{"path": "x.txt", "content": ' }
        ]
      }),
      Reply.text("I see.")
    )
    const run = await runCli([...ws.runArgs, "try things"])
    expect(run.code, run.stderr).toBe(0)
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "tool.invoked")).toHaveLength(0)
    const failed = new Map(ofType(log, "tool.failed").map((e) => [e.payload.callId as string, e.payload]))
    expect(failed.get("c_rejected")).toMatchObject({ input: { command: "touch made" } })
    expect(failed.get("c_unknown")).toMatchObject({ input: { level: 11 } })
    expect(failed.get("c_invalid")).toMatchObject({ input: { file: "a.txt" } })
    expect(failed.get("c_text")).toMatchObject({ inputText: '{"path": "x.txt", "content": ' })
    expect(failed.get("c_text")).not.toHaveProperty("input")
    // and who rejected the question: not the user, the policy of a run with no terminal
    expect(ofType(log, "permission.replied").map((e) => e.payload)).toEqual([
      expect.objectContaining({
        reply: "reject",
        by: "the non-interactive policy (logbook run denies what needs approval unless --yes)"
      })
    ])

    // the second request: the model's own calls, as it wrote them; the one that was not JSON as `{}`
    const assistant = messagesOf(server.requests[1]!).find((m) => m.role === "assistant") as unknown as {
      readonly tool_calls: ReadonlyArray<{ readonly id: string; readonly function: { readonly arguments: string } }>
    }
    const sent = Object.fromEntries(assistant.tool_calls.map((c) => [c.id, JSON.parse(c.function.arguments)]))
    expect(sent).toEqual({
      c_rejected: { command: "touch made" },
      c_unknown: { level: 11 },
      c_invalid: { file: "a.txt" },
      c_text: {}
    })
  })
})

describe("a tool error", () => {
  it("is capped like an output: a 1 MB path gives an error of its head and tail, not megabytes", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const huge = `${"d/".repeat(300_000)}nothing-here.txt`
    server.enqueue(Reply.stream({ toolCalls: [toolCall("c_read", "read", { path: huge })] }), Reply.text("No."))
    const run = await runCli([...ws.runArgs, "read it"])
    expect(run.code, run.stderr).toBe(0)
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    const error = ofType(log, "tool.failed")[0]!.payload.error
    expect(Buffer.byteLength(error)).toBeLessThan(13 * 1024)
    expect(error).toContain("left out; showing the first")
    // the next request holds the call (the model's own 600 KB) and the capped error, nothing more
    const body = JSON.stringify(server.requests[1]!.body)
    expect(body.length).toBeLessThan(huge.length + 64 * 1024)
  })
})
