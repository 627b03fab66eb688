/**
 * `ActionsOptions.refuse`, the check above the permission rules a re-run confines its calls with:
 * in process, scripted model, in-memory store, the built-in tools in a temporary workspace.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option, Stream } from "effect"
import type { Envelope } from "../../src/domain/Events.js"
import { layerScripted, Script } from "../../src/model/Scripted.js"
import { makeAgentLayer } from "../../src/session/Agent.js"
import type { RefusalRequest } from "../../src/session/PermissionGate.js"
import { Sessions } from "../../src/session/Sessions.js"
import { EventStore } from "../../src/store/EventStore.js"
import { Approver } from "../../src/tools/Approver.js"
import { builtinTools } from "../../src/tools/builtins.js"
import { Secrets } from "../../src/tools/Secrets.js"
import { tempDir } from "../support/tmp.js"
import { workspaceWith } from "../support/toolContext.js"

describe("Actions: refuse", () => {
  it.live("refuses what it names, above allow rules and an approver that allows everything; the rest runs", () => {
    const cwd = workspaceWith({ "a.txt": "a\n" })
    const outside = path.join(tempDir("logbook-refuse-"), "out.txt")
    const seen: Array<RefusalRequest> = []
    const refuse = (request: RefusalRequest) =>
      Effect.sync(() => {
        seen.push(request)
        return request.outside ? "it is outside" : undefined
      })
    const script = [
      Script.toolCalls([{ callId: "c1", tool: "write", input: { path: outside, content: "x\n" } }]),
      Script.toolCalls([{ callId: "c2", tool: "write", input: { path: "b.txt", content: "b\n" } }]),
      Script.text("ok")
    ]
    const layer = makeAgentLayer({
      sessions: { maxSteps: 10, system: () => "system" },
      tools: { tools: builtinTools({ bash: { timeoutMs: 10_000, maxTimeoutMs: 20_000 } }) },
      permissions: { "*": "allow", external_directory: "allow" },
      actions: { refuse },
      approver: Approver.autoAllow
    }).pipe(
      Layer.provideMerge(layerScripted(script)),
      Layer.provide(Secrets.layerFromEnv),
      Layer.provideMerge(EventStore.layerMemory)
    )
    return Effect.gen(function* () {
      const sessions = yield* Sessions
      const id = yield* sessions.create({ cwd })
      yield* sessions.send(id, "go")
      Option.getOrThrow(yield* sessions.wait(id))
      const log = Array.from(yield* Stream.runCollect((yield* EventStore).read(id))) as Array<Envelope>
      const failed = log.filter((e) => e.type === "tool.failed").map((e) => e.payload)
      expect(failed).toEqual([
        expect.objectContaining({ callId: "c1", error: "Refused: it is outside. Do not retry it." })
      ])
      expect(log.some((e) => e.type === "permission.asked")).toBe(false)
      expect(log.filter((e) => e.type === "tool.invoked").map((e) => e.payload.callId)).toEqual(["c2"])
      expect(fs.existsSync(outside)).toBe(false)
      expect(fs.readFileSync(path.join(cwd, "b.txt"), "utf8")).toBe("b\n")
      expect(seen.map((r) => ({ callId: r.callId, tool: r.tool, outside: r.outside }))).toEqual([
        { callId: "c1", tool: "write", outside: true },
        { callId: "c2", tool: "write", outside: false }
      ])
      expect(seen[1]!.subject).toBe("b.txt")
    }).pipe(Effect.provide(layer))
  })
})
