/**
 * Permissions in the kernel, in process: scripted model, in-memory store, the built-in tools in a
 * temporary workspace. Every outcome of the rules (allow, ask, deny), the Approver's answers, the
 * `external_directory` permission and the loop guard, read back from the log.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Layer, Option, Stream } from "effect"
import type { Envelope } from "../../src/domain/Events.js"
import type { SessionId } from "../../src/domain/Ids.js"
import { layerScripted, Script, type ScriptStep } from "../../src/model/Scripted.js"
import { makeAgentLayer } from "../../src/session/Agent.js"
import { Sessions } from "../../src/session/Sessions.js"
import { EventStore } from "../../src/store/EventStore.js"
import { Approver } from "../../src/tools/Approver.js"
import { builtinTools } from "../../src/tools/builtins.js"
import type { PermissionRules } from "../../src/tools/Permissions.js"
import { Secrets } from "../../src/tools/Secrets.js"
import { tempDir } from "../support/tmp.js"
import { workspaceWith } from "../support/toolContext.js"

const layer = (
  script: ReadonlyArray<ScriptStep>,
  options: {
    readonly permissions?: PermissionRules
    readonly permissionLimit?: PermissionRules
    readonly approver?: Layer.Layer<Approver>
  } = {}
) =>
  makeAgentLayer({
    sessions: { maxSteps: 10, system: () => "system" },
    tools: { tools: builtinTools({ bash: { timeoutMs: 10_000, maxTimeoutMs: 20_000 } }) },
    ...(options.permissions !== undefined ? { permissions: options.permissions } : {}),
    ...(options.permissionLimit !== undefined ? { permissionLimit: options.permissionLimit } : {}),
    ...(options.approver !== undefined ? { approver: options.approver } : {})
  }).pipe(
    Layer.provideMerge(layerScripted(script)),
    Layer.provide(Secrets.layerFromEnv),
    Layer.provideMerge(EventStore.layerMemory)
  )

/** Runs one prompt in `cwd` to the end of its turn; returns the log. */
const prompt = (cwd: string) =>
  Effect.gen(function* () {
    const sessions = yield* Sessions
    const id: SessionId = yield* sessions.create({ cwd })
    yield* sessions.send(id, "go")
    Option.getOrThrow(yield* sessions.wait(id))
    const store = yield* EventStore
    return Array.from(yield* Stream.runCollect(store.read(id))) as Array<Envelope>
  })

const ofType = <T extends Envelope["type"]>(log: ReadonlyArray<Envelope>, type: T) =>
  log.filter((e): e is Extract<Envelope, { type: T }> => e.type === type)

const call = (callId: string, tool: string, input: unknown) => ({ callId, tool, input })

describe("Actions: permissions", () => {
  it.live("a deny rule: tool.failed with a readable error, never invoked, the command does not run", () => {
    const cwd = workspaceWith({ x: "keep" })
    return Effect.gen(function* () {
      const log = yield* prompt(cwd)
      expect(ofType(log, "tool.invoked")).toEqual([])
      expect(ofType(log, "permission.asked")).toEqual([])
      const failed = ofType(log, "tool.failed")
      expect(failed).toHaveLength(1)
      expect(failed[0]!.payload.error).toBe(
        'Denied: bash `rm -rf x` is denied by the rule "rm *". Do not retry it; do the task another way, ' +
          "or tell the user what you need and why."
      )
      expect(fs.existsSync(path.join(cwd, "x"))).toBe(true)
    }).pipe(
      Effect.provide(
        layer([Script.toolCalls([call("c1", "bash", { command: "rm -rf x" })]), Script.text("ok")], {
          permissions: { bash: { "rm *": "deny" } }
        })
      )
    )
  })

  it.live("ask with the default approver (auto-deny): asked, replied reject, not invoked, a readable error", () => {
    const cwd = workspaceWith({})
    return Effect.gen(function* () {
      const log = yield* prompt(cwd)
      const asked = ofType(log, "permission.asked")
      expect(asked.map((e) => e.payload)).toEqual([
        {
          permissionId: asked[0]!.payload.permissionId,
          callId: "c1",
          tool: "bash",
          pattern: "touch made",
          input: { command: "touch made" }
        }
      ])
      const replied = ofType(log, "permission.replied")
      // the policy, not the user, rejected it: the log says so
      expect(replied.map((e) => e.payload)).toEqual([
        {
          permissionId: asked[0]!.payload.permissionId,
          reply: "reject",
          by: "the non-interactive policy (logbook run denies what needs approval unless --yes)"
        }
      ])
      expect(ofType(log, "tool.invoked")).toEqual([])
      const error = ofType(log, "tool.failed")[0]!.payload.error
      expect(error).toContain('Denied: bash `touch made` needs approval by the rule "bash"')
      expect(error).toContain("logbook run denies what needs approval unless --yes")
      expect(error).toContain("Do not retry it")
      expect(fs.existsSync(path.join(cwd, "made"))).toBe(false)
    }).pipe(
      Effect.provide(
        layer([Script.toolCalls([call("c1", "bash", { command: "touch made" })]), Script.text("ok")], {
          permissions: { bash: "ask" }
        })
      )
    )
  })

  it.live("ask with auto-allow: asked, replied once, the command runs", () => {
    const cwd = workspaceWith({})
    return Effect.gen(function* () {
      const log = yield* prompt(cwd)
      expect(ofType(log, "permission.replied").map((e) => e.payload.reply)).toEqual(["once"])
      expect(ofType(log, "tool.finished")).toHaveLength(1)
      expect(fs.existsSync(path.join(cwd, "made"))).toBe(true)
    }).pipe(
      Effect.provide(
        layer([Script.toolCalls([call("c1", "bash", { command: "touch made" })]), Script.text("ok")], {
          permissions: { bash: "ask" },
          approver: Approver.autoAllow
        })
      )
    )
  })

  it.live(
    "an interrupt while the Approver waits: the ask is closed (reject, interrupted), the call ends interrupted",
    () => {
      const cwd = workspaceWith({})
      return Effect.gen(function* () {
        const asking = yield* Deferred.make<void>()
        const waiting = Layer.succeed(Approver, {
          ask: () => Deferred.succeed(asking, undefined).pipe(Effect.zipRight(Effect.never))
        })
        yield* Effect.gen(function* () {
          const sessions = yield* Sessions
          const id: SessionId = yield* sessions.create({ cwd })
          yield* sessions.send(id, "go")
          yield* Deferred.await(asking)
          yield* sessions.interrupt(id)
          expect(Option.getOrThrow(yield* sessions.wait(id)).reason).toBe("interrupted")
          const store = yield* EventStore
          const log = Array.from(yield* Stream.runCollect(store.read(id))) as Array<Envelope>
          const asked = ofType(log, "permission.asked")
          expect(ofType(log, "permission.replied").map((e) => e.payload)).toEqual([
            { permissionId: asked[0]!.payload.permissionId, reply: "reject", interrupted: true }
          ])
          expect(ofType(log, "tool.failed").map((e) => [e.payload.callId, e.payload.interrupted])).toEqual([
            ["c1", true]
          ])
          expect(ofType(log, "tool.invoked")).toEqual([])
          expect(fs.existsSync(path.join(cwd, "made"))).toBe(false)
          const state = yield* sessions.state(id)
          expect(Object.values(state.permissions).map((p) => p.reply)).toEqual(["reject"])
          expect(state.status._tag).toBe("idle")
        }).pipe(
          Effect.provide(
            layer([Script.toolCalls([call("c1", "bash", { command: "touch made" })]), Script.text("ok")], {
              permissions: { bash: "ask" },
              approver: waiting
            })
          )
        )
      })
    }
  )

  it.live(
    "permissionLimit: rules may tighten the limit (deny), not loosen it (allow stays ask); the error says why",
    () => {
      const cwd = workspaceWith({ x: "keep" })
      return Effect.gen(function* () {
        const log = yield* prompt(cwd)
        // c1: "echo *" allowed by the rules, but the limit asks every bash call: asked (and denied by default)
        expect(ofType(log, "permission.asked").map((e) => e.payload.callId)).toEqual(["c1"])
        const failed = ofType(log, "tool.failed")
        expect(failed.map((e) => e.payload.callId)).toEqual(["c1", "c2"])
        expect(failed[0]!.payload.error).toContain(
          'bash `echo hi` needs approval by the rule "*" (the project\'s logbook.json can tighten your rules, not loosen them)'
        )
        // c2: "rm *" denied by the rules: stricter than the limit's ask, so denied without an ask
        expect(failed[1]!.payload.error).toContain('Denied: bash `rm -rf x` is denied by the rule "rm *".')
        expect(failed[1]!.payload.error).not.toContain("tighten")
        expect(fs.existsSync(path.join(cwd, "x"))).toBe(true)
      }).pipe(
        Effect.provide(
          layer(
            [
              Script.toolCalls([
                call("c1", "bash", { command: "echo hi" }),
                call("c2", "bash", { command: "rm -rf x" })
              ]),
              Script.text("ok")
            ],
            {
              permissions: { bash: { "*": "ask", "echo *": "allow", "rm *": "deny" } },
              permissionLimit: { bash: { "*": "ask" } }
            }
          )
        )
      )
    }
  )

  it.live(
    "parallel calls of one batch are asked one at a time; an 'always' covers the same call waiting its turn",
    () => {
      const cwd = workspaceWith({})
      let asks = 0
      let concurrent = 0
      let most = 0
      const always = Layer.succeed(Approver, {
        ask: () =>
          Effect.gen(function* () {
            asks++
            concurrent++
            most = Math.max(most, concurrent)
            yield* Effect.sleep("5 millis")
            concurrent--
            return "always" as const
          })
      })
      return Effect.gen(function* () {
        const log = yield* prompt(cwd)
        // c1 and c2 are the same command: one ask answers both; c3 is another, asked after
        expect(asks).toBe(2)
        expect(most).toBe(1)
        expect(ofType(log, "permission.asked").map((e) => e.payload.pattern)).toEqual(["echo same", "echo other"])
        expect(ofType(log, "tool.finished")).toHaveLength(3)
      }).pipe(
        Effect.provide(
          layer(
            [
              Script.toolCalls([
                call("c1", "bash", { command: "echo same" }),
                call("c2", "bash", { command: "echo same" }),
                call("c3", "bash", { command: "echo other" })
              ]),
              Script.text("ok")
            ],
            { permissions: { bash: "ask" }, approver: always }
          )
        )
      )
    }
  )

  it.live("always is remembered for the session: the same call again is not asked", () => {
    const cwd = workspaceWith({})
    let asks = 0
    const always = Layer.succeed(Approver, {
      ask: () => Effect.sync(() => asks++).pipe(Effect.as("always" as const))
    })
    return Effect.gen(function* () {
      const log = yield* prompt(cwd)
      // c2 (the same command, answered always before) is not asked; c3 (another command) is
      expect(asks).toBe(2)
      expect(ofType(log, "permission.asked").map((e) => e.payload.callId)).toEqual(["c1", "c3"])
      expect(ofType(log, "permission.replied").map((e) => e.payload.reply)).toEqual(["always", "always"])
      expect(ofType(log, "tool.finished").map((e) => e.payload.callId)).toEqual(["c1", "c2", "c3"])
    }).pipe(
      Effect.provide(
        layer(
          [
            Script.toolCalls([call("c1", "bash", { command: "echo hi" })]),
            Script.toolCalls([call("c2", "bash", { command: "echo hi", timeoutMs: 5000 })]),
            // another subject is asked again
            Script.toolCalls([call("c3", "bash", { command: "echo other" })]),
            Script.text("ok")
          ],
          { permissions: { bash: "ask" }, approver: always }
        )
      )
    )
  })

  it.live("a rejection with a message: logged with the reply, and the model reads it with the denial", () => {
    const cwd = workspaceWith({})
    const tell = Layer.succeed(Approver, {
      ask: () => Effect.succeed({ reply: "reject" as const, message: "use git stash instead" })
    })
    return Effect.gen(function* () {
      const log = yield* prompt(cwd)
      const replied = ofType(log, "permission.replied").map((e) => e.payload)
      expect(replied).toEqual([expect.objectContaining({ reply: "reject", message: "use git stash instead" })])
      expect(ofType(log, "tool.invoked")).toEqual([])
      const error = ofType(log, "tool.failed")[0]!.payload.error
      expect(error).toBe(
        'Denied: bash `git reset --hard` needs approval by the rule "bash", and the user rejected it, saying: ' +
          "use git stash instead\nDo not retry it as it was; do what the message says."
      )
    }).pipe(
      Effect.provide(
        layer([Script.toolCalls([call("c1", "bash", { command: "git reset --hard" })]), Script.text("ok")], {
          permissions: { bash: "ask" },
          approver: tell
        })
      )
    )
  })

  it.live("always outlives the process: another agent over the same log runs the same call without asking", () => {
    const cwd = workspaceWith({})
    let asks = 0
    const always = Layer.succeed(Approver, {
      ask: () => Effect.sync(() => asks++).pipe(Effect.as("always" as const))
    })
    /** an agent of its own (as a new process would build it) over the store provided outside */
    const agent = (approver: Layer.Layer<Approver>, script: ReadonlyArray<ScriptStep>) =>
      makeAgentLayer({
        sessions: { maxSteps: 10, system: () => "system" },
        tools: { tools: builtinTools({ bash: { timeoutMs: 10_000, maxTimeoutMs: 20_000 } }) },
        permissions: { bash: "ask" },
        approver
      }).pipe(Layer.provideMerge(layerScripted(script)), Layer.provide(Secrets.layerFromEnv))
    const turn = (id: SessionId | undefined, text: string) =>
      Effect.gen(function* () {
        const sessions = yield* Sessions
        const session = id ?? (yield* sessions.create({ cwd }))
        if (id !== undefined) yield* sessions.open(id)
        yield* sessions.send(session, text)
        Option.getOrThrow(yield* sessions.wait(session))
        return session
      })
    return Effect.gen(function* () {
      const id = yield* turn(undefined, "first").pipe(
        Effect.provide(
          agent(always, [Script.toolCalls([call("c1", "bash", { command: "echo hi" })]), Script.text("ok")])
        )
      )
      // the second agent rejects every ask: the call runs only because the log says "always"
      yield* turn(id, "again").pipe(
        Effect.provide(
          agent(Approver.autoDeny, [
            Script.toolCalls([
              call("c2", "bash", { command: "echo hi" }),
              // another command is still asked (and rejected)
              call("c3", "bash", { command: "echo other" })
            ]),
            Script.text("ok")
          ])
        )
      )
      const store = yield* EventStore
      const log = Array.from(yield* Stream.runCollect(store.read(id))) as Array<Envelope>
      expect(asks).toBe(1)
      expect(ofType(log, "permission.asked").map((e) => e.payload.callId)).toEqual(["c1", "c3"])
      expect(ofType(log, "permission.replied").map((e) => e.payload.reply)).toEqual(["always", "reject"])
      expect(ofType(log, "tool.finished").map((e) => e.payload.callId)).toEqual(["c1", "c2"])
    }).pipe(Effect.provide(EventStore.layerMemory))
  })

  it.live("a path outside the workspace asks external_directory: denied by default", () => {
    const cwd = workspaceWith({})
    const outside = path.join(tempDir("logbook-outside-"), "secret.txt")
    fs.writeFileSync(outside, "the outside text\n")
    return Effect.gen(function* () {
      const log = yield* prompt(cwd)
      const asked = ofType(log, "permission.asked")
      expect(asked.map((e) => [e.payload.tool, e.payload.pattern])).toEqual([["read", fs.realpathSync(outside)]])
      expect(ofType(log, "tool.invoked")).toEqual([])
      const error = ofType(log, "tool.failed")[0]!.payload.error
      expect(error).toContain("(outside the workspace) needs approval")
      expect(error).toContain("external_directory")
    }).pipe(Effect.provide(layer([Script.toolCalls([call("c1", "read", { path: outside })]), Script.text("ok")])))
  })

  it.live("a path outside the workspace with auto-allow: the read really reads the outside file", () => {
    const cwd = workspaceWith({})
    const outside = path.join(tempDir("logbook-outside-"), "secret.txt")
    fs.writeFileSync(outside, "the outside text\n")
    return Effect.gen(function* () {
      const log = yield* prompt(cwd)
      expect(ofType(log, "permission.replied").map((e) => e.payload.reply)).toEqual(["once"])
      const finished = ofType(log, "tool.finished")
      expect(finished).toHaveLength(1)
      expect(finished[0]!.payload.output).toContain("the outside text")
    }).pipe(
      Effect.provide(
        layer([Script.toolCalls([call("c1", "read", { path: outside })]), Script.text("ok")], {
          approver: Approver.autoAllow
        })
      )
    )
  })

  it.live("the loop guard: the third identical call in a row is asked (and denied by default)", () => {
    const cwd = workspaceWith({ "a.txt": "hello\n" })
    return Effect.gen(function* () {
      const log = yield* prompt(cwd)
      expect(ofType(log, "tool.finished").map((e) => e.payload.callId)).toEqual(["c1", "c2"])
      const asked = ofType(log, "permission.asked")
      expect(asked.map((e) => e.payload.callId)).toEqual(["c3"])
      const failed = ofType(log, "tool.failed")
      expect(failed.map((e) => e.payload.callId)).toEqual(["c3"])
      expect(failed[0]!.payload.error).toContain("the same call a third time in a row")
    }).pipe(
      Effect.provide(
        layer([
          Script.toolCalls([call("c1", "read", { path: "a.txt" })]),
          Script.toolCalls([call("c2", "read", { path: "a.txt" })]),
          Script.toolCalls([call("c3", "read", { path: "a.txt" })]),
          Script.text("ok")
        ])
      )
    )
  })

  it.live(
    "the loop guard holds across processes: the third identical call, in another agent over the log, is asked",
    () => {
      const cwd = workspaceWith({ "a.txt": "hello\n" })
      const agent = (script: ReadonlyArray<ScriptStep>) =>
        makeAgentLayer({
          sessions: { maxSteps: 10, system: () => "system" },
          tools: { tools: builtinTools({ bash: { timeoutMs: 10_000, maxTimeoutMs: 20_000 } }) }
        }).pipe(Layer.provideMerge(layerScripted(script)), Layer.provide(Secrets.layerFromEnv))
      return Effect.gen(function* () {
        const id = yield* Effect.gen(function* () {
          const sessions = yield* Sessions
          const session = yield* sessions.create({ cwd })
          yield* sessions.send(session, "first")
          Option.getOrThrow(yield* sessions.wait(session))
          return session
        }).pipe(
          Effect.provide(
            agent([
              Script.toolCalls([call("c1", "read", { path: "a.txt" })]),
              Script.toolCalls([call("c2", "read", { path: "a.txt" })]),
              Script.text("ok")
            ])
          )
        )
        yield* Effect.gen(function* () {
          const sessions = yield* Sessions
          yield* sessions.open(id)
          yield* sessions.send(id, "again")
          Option.getOrThrow(yield* sessions.wait(id))
        }).pipe(Effect.provide(agent([Script.toolCalls([call("c3", "read", { path: "a.txt" })]), Script.text("ok")])))
        const store = yield* EventStore
        const log = Array.from(yield* Stream.runCollect(store.read(id))) as Array<Envelope>
        expect(ofType(log, "permission.asked").map((e) => e.payload.callId)).toEqual(["c3"])
        expect(ofType(log, "tool.failed")[0]!.payload.error).toContain("the same call a third time in a row")
      }).pipe(Effect.provide(EventStore.layerMemory))
    }
  )
})
