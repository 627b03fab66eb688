/**
 * Crash windows around file changes (issue 12 §2), through the built binary: `logbook run` kills
 * itself (SIGKILL, as `kill -9`) at a chosen point of a `write` or an `edit` — the intent committed,
 * the temporary file written, the file renamed over before its `file.changed` — and `--continue`
 * must then find out what happened from the intent: the change recorded when it was made
 * (`file.changed {recovered: true}`), a record that it was not, no temporary file left, the model
 * told, `logbook audit` showing it — and the next write or edit of the file is not refused as a
 * change by "someone or something else".
 *
 * The crash points are `LB_TEST_CRASH_AT` (src/tools/crashPoint.ts): deterministic, no timing.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runCli } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import {
  blobText,
  contentText,
  latestSession,
  makeJanitor,
  makeWorkspace,
  ofType,
  readLog,
  restoreState,
  toolCall,
  toolResult
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const CRASH_ENV = "LB_TEST_CRASH_AT"

type Point = "file.intent" | "file.temp" | "file.renamed"

/** Whether the file was replaced before the process died at `point`. */
const applied = (point: Point) => point === "file.renamed"

/** The temporary files `write` / `edit` leave in `dir` (none may survive the next open). */
const leftovers = (dir: string): ReadonlyArray<string> =>
  fs.readdirSync(dir).filter((name) => name.endsWith(".logbook-tmp"))

interface Scenario {
  readonly name: string
  /** the file's content before the session (absent: the call creates it) */
  readonly initial: string | undefined
  /** the call the process dies in */
  readonly crashing: ReturnType<typeof toolCall>
  /** its content once the crashing call is made */
  readonly intended: string
  /** the next call, on the same file: must run */
  readonly next: ReturnType<typeof toolCall>
  /** the file's content after the next call, by whether the crashing change was made */
  readonly final: (made: boolean) => string
  readonly op: "create" | "update"
}

const scenarios: ReadonlyArray<Scenario> = [
  {
    name: "write over a file read before",
    initial: "old\n",
    crashing: toolCall("call_crash", "write", { path: "notes.txt", content: "new\n" }),
    intended: "new\n",
    next: toolCall("call_next", "write", { path: "notes.txt", content: "newer\n" }),
    final: () => "newer\n",
    op: "update"
  },
  {
    name: "write of a new file",
    initial: undefined,
    crashing: toolCall("call_crash", "write", { path: "notes.txt", content: "new\n" }),
    intended: "new\n",
    next: toolCall("call_next", "write", { path: "notes.txt", content: "newer\n" }),
    final: () => "newer\n",
    op: "create"
  },
  {
    name: "edit",
    initial: "alpha\nbeta\n",
    crashing: toolCall("call_crash", "edit", { path: "notes.txt", oldString: "beta", newString: "BETA" }),
    intended: "alpha\nBETA\n",
    next: toolCall("call_next", "edit", { path: "notes.txt", oldString: "alpha", newString: "ALPHA" }),
    final: (made) => (made ? "ALPHA\nBETA\n" : "ALPHA\nbeta\n"),
    op: "update"
  }
]

const points: ReadonlyArray<Point> = ["file.intent", "file.temp", "file.renamed"]

describe("kill -9 inside a write or an edit, then --continue", () => {
  for (const scenario of scenarios) {
    for (const point of points) {
      it(`${scenario.name}, killed at ${point}: the change is settled from its intent and the next change runs`, async () => {
        const server = await janitor.server()
        const ws = makeWorkspace(server)
        const file = path.join(ws.dir, "notes.txt")
        if (scenario.initial !== undefined) fs.writeFileSync(file, scenario.initial)
        server.enqueue(
          ...(scenario.initial !== undefined
            ? [Reply.stream({ toolCalls: [toolCall("call_read", "read", { path: "notes.txt" })] })]
            : []),
          Reply.stream({ toolCalls: [scenario.crashing] })
        )

        const crashed = await runCli([...ws.runArgs, "change the notes"], { env: { [CRASH_ENV]: point } })
        expect(crashed.signal, crashed.stderr).toBe("SIGKILL")
        const id = await latestSession(ws.db, ws.dir)
        const before = await readLog(ws.db, id)
        // the intent was committed before anything was written, with the new content as a blob
        const intents = ofType(before, "file.intent")
        expect(intents.map((e) => [e.payload.callId, e.payload.path, e.payload.op])).toEqual([
          ["call_crash", "notes.txt", scenario.op]
        ])
        const intent = intents[0]!.payload
        expect(await blobText(ws.db, intent.afterHash)).toBe(scenario.intended)
        expect(intent.temp).toMatch(/^\.notes\.txt\.[0-9a-z]+\.logbook-tmp$/)
        expect(ofType(before, "file.changed")).toEqual([])
        // what the dead process left on disk
        expect(leftovers(ws.dir)).toEqual(point === "file.temp" ? [intent.temp] : [])
        if (point === "file.temp")
          expect(fs.readFileSync(path.join(ws.dir, intent.temp), "utf8")).toBe(scenario.intended)
        expect(fs.existsSync(file) ? fs.readFileSync(file, "utf8") : undefined).toBe(
          applied(point) ? scenario.intended : scenario.initial
        )

        server.enqueue(Reply.stream({ toolCalls: [scenario.next] }), Reply.text("Done."))
        const next = await runCli([...ws.runArgs, "--continue", "go on"])
        expect(next.code, next.stderr).toBe(0)

        // the next change of the file ran: not refused as changed by someone else
        const requests = server.requests
        const afterNext = requests.at(-1)!
        const nextResult = contentText(toolResult(afterNext, "call_next"))
        expect(nextResult).not.toMatch(/changed on disk|someone or something else/)
        expect(nextResult).toMatch(/^(Wrote|Created|Edited) notes\.txt/)
        expect(fs.readFileSync(file, "utf8")).toBe(scenario.final(applied(point)))
        // no temporary file is left
        expect(leftovers(ws.dir)).toEqual([])

        // the log: what the sweep found, the crashed call ended with it
        const log = await readLog(ws.db, id)
        const swept = log.slice(before.length)
        const recovered = ofType(swept, "file.recovered")
        expect(recovered.map((e) => e.payload)).toEqual([
          {
            callId: "call_crash",
            path: "notes.txt",
            op: scenario.op,
            outcome: applied(point) ? "applied" : "not-applied",
            ...(point === "file.temp" ? { tempRemoved: true } : {})
          }
        ])
        const changes = ofType(swept, "file.changed").filter((e) => e.payload.callId === "call_crash")
        if (applied(point)) {
          expect(changes.map((e) => e.payload)).toEqual([
            {
              path: "notes.txt",
              op: scenario.op,
              ...(intent.beforeHash !== undefined ? { beforeHash: intent.beforeHash } : {}),
              afterHash: intent.afterHash,
              callId: "call_crash",
              recovered: true
            }
          ])
          expect(changes[0]!.seq).toBeLessThan(recovered[0]!.seq)
        } else {
          expect(changes).toEqual([])
        }
        const failed = ofType(swept, "tool.failed").filter((e) => e.payload.callId === "call_crash")
        expect(failed).toHaveLength(1)
        expect(failed[0]!.payload).toMatchObject({ interrupted: true, reason: "crash" })
        expect(failed[0]!.seq).toBeGreaterThan(recovered[0]!.seq)
        // the projection: the session's latest change of the file is the next call's, made on the recovered one
        const state = await restoreState(ws.db, id)
        expect(state.files["notes.txt"]?.callId).toBe("call_next")

        // the model was told what became of the crashed call
        const told = contentText(toolResult(requests[requests.length - 2]!, "call_crash"))
        expect(told).toContain("stopped before it finished (crash)")
        expect(told).not.toContain("its outcome is unknown")
        expect(told).toContain(
          applied(point)
            ? "the change is made, and recorded now (recovered after the crash)"
            : scenario.op === "create"
              ? "It had not created notes.txt yet"
              : "It had not changed notes.txt yet"
        )

        // logbook audit shows it
        const audit = await runCli(["audit", id, "--db", ws.db, "--format", "json"])
        expect(audit.code, audit.stderr).toBe(0)
        const entries = (
          JSON.parse(audit.stdout) as {
            sessions: ReadonlyArray<{ entries: ReadonlyArray<Record<string, unknown>> }>
          }
        ).sessions[0]!.entries
        const ofCrash = entries.filter((e) => e.callId === "call_crash")
        expect(ofCrash.map((e) => [e.kind, e.recovered ?? e.outcome])).toEqual([
          ...(applied(point) ? [["file", true]] : []),
          ["recovery", applied(point) ? "applied" : "not-applied"]
        ])
        const text = await runCli(["audit", id, "--db", ws.db])
        expect(text.code).toBe(0)
        expect(text.stdout).toContain(
          applied(point)
            ? `↺ crash recovered: the ${scenario.crashing.name} call call_crash had ${scenario.op === "create" ? "created" : "replaced"} notes.txt: its change was recorded from its intent`
            : `↺ crash recovered: the ${scenario.crashing.name} call call_crash had not ${scenario.op === "create" ? "created" : "changed"} notes.txt: it is as it was before`
        )
        if (applied(point))
          expect(text.stdout).toMatch(/~ (created|changed) notes\.txt \((write|edit), recovered after a crash\)/)
        if (point === "file.temp") expect(text.stdout).toContain("; its temporary file was removed")
      })
    }
  }

  it("a file something else changed after the intent is said to be so, and the next write is refused", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const file = path.join(ws.dir, "notes.txt")
    fs.writeFileSync(file, "old\n")
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_read", "read", { path: "notes.txt" })] }),
      Reply.stream({ toolCalls: [toolCall("call_crash", "write", { path: "notes.txt", content: "new\n" })] })
    )
    const crashed = await runCli([...ws.runArgs, "change the notes"], { env: { [CRASH_ENV]: "file.intent" } })
    expect(crashed.signal, crashed.stderr).toBe("SIGKILL")
    // someone else writes the file before the session goes on
    fs.writeFileSync(file, "theirs\n")

    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_next", "write", { path: "notes.txt", content: "newer\n" })] }),
      Reply.text("Done.")
    )
    const next = await runCli([...ws.runArgs, "--continue", "go on"])
    expect(next.code, next.stderr).toBe(0)
    const id = await latestSession(ws.db, ws.dir)
    const recovered = ofType(await readLog(ws.db, id), "file.recovered")
    expect(recovered.map((e) => e.payload)).toEqual([
      {
        callId: "call_crash",
        path: "notes.txt",
        op: "update",
        outcome: "changed",
        hash: expect.stringMatching(/^[0-9a-f]{64}$/)
      }
    ])
    const requests = server.requests
    expect(contentText(toolResult(requests[requests.length - 2]!, "call_crash"))).toContain(
      "holds neither its content before the call nor the new content"
    )
    // their change is kept: the next write is refused until the file is read again
    expect(contentText(toolResult(requests.at(-1)!, "call_next"))).toContain("changed on disk since you last read it")
    expect(fs.readFileSync(file, "utf8")).toBe("theirs\n")
    const text = await runCli(["audit", id, "--db", ws.db])
    expect(text.stdout).toContain(
      "↺ crash recovered: the write call call_crash had announced a change of notes.txt, which something else then changed"
    )
  })
})
