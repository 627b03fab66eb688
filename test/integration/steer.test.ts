/**
 * Steering and queueing through the `Sessions` API, in process, against the scripted
 * OpenAI-compatible server over real HTTP: the agent layer of `logbook run` (`makeAgentLayer`,
 * `layerAiSdk`, the built-in tools, a SQLite file).
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer, Option } from "effect"
import type { SessionId } from "../../src/domain/Ids.js"
import { layerAiSdk } from "../../src/model/AiSdk.js"
import { makeAgentLayer } from "../../src/session/Agent.js"
import { Sessions } from "../../src/session/Sessions.js"
import { EventStore } from "../../src/store/EventStore.js"
import type { SessionState } from "../../src/store/Projection.js"
import { builtinTools } from "../../src/tools/builtins.js"
import { Secrets } from "../../src/tools/Secrets.js"
import { Reply, type ScriptedServer, startScriptedServer } from "../support/scriptedServer.js"
import { tempDb, tempDir } from "../support/tmp.js"
import { messagesOf, ofType, readLog, types } from "./support.js"

const agentLayer = (server: ScriptedServer, filename: string) =>
  makeAgentLayer({
    sessions: { maxSteps: 10, system: () => "You are a test agent." },
    tools: { tools: builtinTools({ bash: { timeoutMs: 30_000, maxTimeoutMs: 60_000 } }) },
    retry: { maxAttempts: 3, initialDelayMs: 1, maxDelayMs: 5, maxRetryAfterMs: 1_000, budgetMs: 30_000 }
  }).pipe(
    Layer.provide(
      layerAiSdk({
        name: "local/scripted",
        type: "openai-compatible",
        baseURL: `${server.url}/v1`,
        modelId: "scripted"
      })
    ),
    Layer.provide(Secrets.layerFromEnv),
    Layer.provideMerge(EventStore.layerSqlite({ filename }))
  )

const scriptedServer = Effect.acquireRelease(
  Effect.promise(() => startScriptedServer()),
  (server) => Effect.promise(() => server.close())
)

/** A promise the test resolves; resolved at the end of the scope whatever happens. */
const gate = Effect.acquireRelease(
  Effect.sync(() => {
    let open!: () => void
    const promise = new Promise<void>((resolve) => {
      open = resolve
    })
    return { promise, open }
  }),
  (g) => Effect.sync(() => g.open())
)

/** Polls the session's state every 20 ms until `ready` holds (bounded: a broken test fails, it does not hang). */
const waitForState = (sessionId: SessionId, what: string, ready: (state: SessionState) => boolean) =>
  Effect.gen(function* () {
    const sessions = yield* Sessions
    while (true) {
      const state = yield* sessions.state(sessionId)
      if (ready(state)) return state
      yield* Effect.sleep(Duration.millis(20))
    }
  }).pipe(Effect.timeoutFail({ duration: Duration.seconds(20), onTimeout: () => new Error(`waited 20 s for ${what}`) }))

const assistantText = (state: SessionState): string =>
  state.messages
    .flatMap((m) => (m.role === "assistant" ? m.parts : []))
    .map((p) => (p.type === "text" ? p.text : ""))
    .join("")

describe("Sessions over HTTP: steer and queue", () => {
  it.scopedLive("a steered message stops the stream; the next request has the partial text, then the message", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      const hold = yield* gate
      const db = tempDb()
      server.enqueue(
        // role + "Partial ", "answer ", then the stream waits (for good: the steer must stop it)
        Reply.waitAfter(2, hold.promise, Reply.stream({ text: ["Partial ", "answer ", "that is never sent"] })),
        Reply.text("Steered answer.")
      )
      const { id, steerId } = yield* Effect.gen(function* () {
        const sessions = yield* Sessions
        const id = yield* sessions.create({ cwd: tempDir(), title: "steer" })
        yield* sessions.send(id, "first question")
        yield* waitForState(id, "the partial text", (s) => assistantText(s) === "Partial answer ")
        const steerId = yield* sessions.send(id, "actually, answer this instead", { mode: "steer" })
        const outcome = yield* sessions.wait(id)
        expect(Option.getOrThrow(outcome)).toMatchObject({ reason: "stop", steps: 2 })
        const state = yield* sessions.state(id)
        expect(state.status._tag).toBe("idle")
        expect(assistantText(state)).toBe("Partial answer Steered answer.")
        return { id, steerId }
      }).pipe(Effect.provide(agentLayer(server, db)))

      // the first request's stream was stopped: the client went away before it ended
      yield* Effect.promise(() => server.requests[0]!.aborted)
      expect(server.requests).toHaveLength(2)
      expect(messagesOf(server.requests[0]!)).toEqual([{ role: "user", content: "first question" }])
      expect(messagesOf(server.requests[1]!)).toEqual([
        { role: "user", content: "first question" },
        { role: "assistant", content: "Partial answer " },
        { role: "user", content: "actually, answer this instead" }
      ])

      const log = yield* Effect.promise(() => readLog(db, id))
      expect(ofType(log, "user.message").map((e) => e.payload.mode)).toEqual(["prompt", "steer"])
      expect(ofType(log, "chat.state").map((e) => e.payload.state)).toContain("interrupted")
      expect(
        ofType(log, "step.finished").map((e) => [e.payload.step, e.payload.finishReason, e.payload.aborted])
      ).toEqual([
        [0, "steered", undefined],
        [1, "stop", undefined]
      ])
      expect(ofType(log, "step.started").map((e) => e.payload.deliveredMessageIds)).toEqual([undefined, [steerId]])
      expect(types(log).filter((t) => t === "turn.started")).toHaveLength(1)
      expect(ofType(log, "turn.finished").map((e) => e.payload.reason)).toEqual(["stop"])
      expect(log.at(-1)).toMatchObject({ type: "session.status", payload: { status: { _tag: "idle" } } })
    })
  )

  it.scopedLive("a queued message waits for the end of the turn and starts a second one", () =>
    Effect.gen(function* () {
      const server = yield* scriptedServer
      const hold = yield* gate
      const db = tempDb()
      const queued = "and then list the files"
      server.enqueue(
        // the first step streams a tool call, then holds before its finish until the test lets go
        Reply.waitAfter(
          1,
          hold.promise,
          Reply.stream({ toolCalls: [{ id: "call_echo", name: "bash", arguments: '{"command":"echo one"}' }] })
        ),
        Reply.text("First turn done."),
        Reply.text("Queued message handled.")
      )
      const { id, queuedId } = yield* Effect.gen(function* () {
        const sessions = yield* Sessions
        const id = yield* sessions.create({ cwd: tempDir(), title: "queue" })
        yield* sessions.send(id, "run echo")
        yield* Effect.promise(() => server.request(0))
        const queuedId = yield* sessions.send(id, queued, { mode: "queue" })
        const during = yield* sessions.state(id)
        expect(during.queued).toEqual([queuedId])
        hold.open()
        const outcome = yield* sessions.wait(id)
        expect(Option.getOrThrow(outcome)).toMatchObject({ reason: "stop", steps: 1 })
        const state = yield* sessions.state(id)
        expect(state.queued).toEqual([])
        expect(state.status._tag).toBe("idle")
        return { id, queuedId }
      }).pipe(Effect.provide(agentLayer(server, db)))

      expect(server.requests).toHaveLength(3)
      // the first turn's two requests do not carry the queued message
      for (const request of server.requests.slice(0, 2)) {
        expect(JSON.stringify(request.body.messages)).not.toContain(queued)
      }
      expect(messagesOf(server.requests[1]!).map((m) => m.role)).toEqual(["user", "assistant", "tool"])
      // the second turn's request: the whole first turn, then the queued message
      const second = messagesOf(server.requests[2]!)
      expect(second.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant", "user"])
      expect(second.at(-2)).toEqual({ role: "assistant", content: "First turn done." })
      expect(second.at(-1)).toEqual({ role: "user", content: queued })

      const log = yield* Effect.promise(() => readLog(db, id))
      expect(ofType(log, "user.message").map((e) => e.payload.mode)).toEqual(["prompt", "queue"])
      const turns = ofType(log, "turn.started")
      expect(turns).toHaveLength(2)
      expect(turns[1]!.payload.messageIds).toEqual([queuedId])
      expect(ofType(log, "turn.finished").map((e) => e.payload.reason)).toEqual(["stop", "stop"])
      // the second turn starts after the first one finished
      const t = types(log)
      expect(t.indexOf("turn.finished")).toBeLessThan(t.lastIndexOf("turn.started"))
      expect(log.at(-1)).toMatchObject({ type: "session.status", payload: { status: { _tag: "idle" } } })
    })
  )
})
