/**
 * The system prompt and its version through the kernel (Sessions -> Processor -> scripted Model,
 * in-memory store): the instruction files go in after the base prompt, masked; every step.finished
 * carries the version of the request it sent; each version's prompt is recorded once per session.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option, Ref, Schema, Stream } from "effect"
import type { Envelope, EnvelopeOf } from "../../src/domain/Events.js"
import type { SessionId } from "../../src/domain/Ids.js"
import { ModelError, ModelEvent } from "../../src/model/Model.js"
import { layerScripted, Script, ScriptedModel, type ScriptStep } from "../../src/model/Scripted.js"
import { makeAgentLayer } from "../../src/session/Agent.js"
import type { InstructionsService, LoadedInstructions } from "../../src/session/Instructions.js"
import { promptVersionOf } from "../../src/session/PromptVersion.js"
import { Sessions } from "../../src/session/Sessions.js"
import { EventStore } from "../../src/store/EventStore.js"
import { redactionMarker, Secrets, type SecretsOptions } from "../../src/tools/Secrets.js"
import { defineTool } from "../../src/tools/Tools.js"

const echo = defineTool({
  name: "echo",
  description: "echoes its text",
  input: Schema.Struct({ text: Schema.String }),
  execute: (input) => Effect.succeed({ output: `echo: ${input.text}` })
})

/** One AGENTS.md at /repo holding `content`. */
const loadedWith = (content: string): LoadedInstructions => ({
  root: "/repo",
  directories: ["/repo"],
  userFile: undefined,
  files: [{ path: "/repo/AGENTS.md", scope: "project", size: content.length, content, includedBytes: content.length }],
  skipped: []
})

/** Instructions whose file holds what `content` holds when a turn starts; counts the loads. */
const stubInstructions = (content: Ref.Ref<string>, loads: Ref.Ref<number>): InstructionsService => ({
  load: () =>
    Effect.zipRight(
      Ref.update(loads, (n) => n + 1),
      Effect.map(Ref.get(content), loadedWith)
    )
})

const layer = (
  script: ReadonlyArray<ScriptStep>,
  options: { readonly instructions?: InstructionsService; readonly secrets?: SecretsOptions } = {}
) =>
  makeAgentLayer({
    sessions: { maxSteps: 10, system: (cwd) => `BASE PROMPT for ${cwd}` },
    tools: { tools: [echo] },
    retry: { maxAttempts: 3, initialDelayMs: 1, maxDelayMs: 2, maxRetryAfterMs: 1000, budgetMs: 60_000 },
    instructions: options.instructions
  }).pipe(
    Layer.provideMerge(layerScripted(script)),
    Layer.provide(options.secrets === undefined ? Secrets.layerFromEnv : Secrets.layer(options.secrets)),
    Layer.provideMerge(EventStore.layerMemory)
  )

const events = (sessionId: SessionId) =>
  Effect.flatMap(EventStore, (store) => Stream.runCollect(store.read(sessionId))).pipe(
    Effect.map((chunk) => Array.from(chunk) as Array<Envelope>)
  )

const ofType = <T extends Envelope["type"]>(log: ReadonlyArray<Envelope>, type: T) =>
  log.filter((e): e is EnvelopeOf<T> => e.type === type)

const blobText = (hash: string) =>
  Effect.flatMap(EventStore, (store) => store.getBlob(hash)).pipe(
    Effect.map((blob) => new TextDecoder().decode(Option.getOrThrow(blob)))
  )

const requests = Effect.flatMap(ScriptedModel, (m) => m.requests)

/** Sends `text` and waits for the turn to end. */
const turn = (id: SessionId, text: string) =>
  Effect.gen(function* () {
    const sessions = yield* Sessions
    yield* sessions.send(id, text)
    return Option.getOrThrow(yield* sessions.wait(id))
  })

const rateLimited = new ModelError({
  reason: "http",
  message: "rate limited",
  status: 429,
  headers: { "retry-after-ms": "1" }
})

describe("Sessions: the prompt version", () => {
  it.live(
    "every step.finished carries the version of its request; the prompt is recorded once, before it is sent",
    () =>
      Effect.gen(function* () {
        const sessions = yield* Sessions
        const id = yield* sessions.create({ cwd: "/repo" })
        const outcome = yield* turn(id, "use echo")
        expect(outcome.steps).toBe(2)
        const sent = yield* requests
        expect(sent).toHaveLength(2)
        const log = yield* events(id)
        const steps = ofType(log, "step.finished")
        expect(steps).toHaveLength(2)
        // what went out, hashed: the same for both steps (same system prompt, same tools)
        const expected = promptVersionOf(sent[0]!)
        expect(steps.map((e) => e.payload.promptVersion)).toEqual([expected.version, expected.version])
        expect(promptVersionOf(sent[1]!).version).toBe(expected.version)
        // recorded once, right after the first step.started and before its output
        const recorded = ofType(log, "prompt.recorded")
        expect(recorded.map((e) => e.payload)).toEqual([{ promptVersion: expected.version, blob: expected.hash }])
        const types = log.map((e) => e.type)
        expect(types.indexOf("prompt.recorded")).toBe(types.indexOf("step.started") + 1)
        // the blob is the prompt document: the exact system prompt and tool schemas that were sent
        const document = JSON.parse(yield* blobText(recorded[0]!.payload.blob))
        expect(document).toEqual({
          system: sent[0]!.system,
          tools: sent[0]!.tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema }))
        })
        expect((yield* sessions.state(id)).prompts).toEqual({ [expected.version]: expected.hash })
      }).pipe(
        Effect.provide(
          layer([Script.toolCalls([{ callId: "c1", tool: "echo", input: { text: "x" } }]), Script.text("done")])
        )
      )
  )

  it.live("a step cut by a retryable failure carries the version of the request it sent too", () =>
    Effect.gen(function* () {
      const sessions = yield* Sessions
      const id = yield* sessions.create({ cwd: "/repo" })
      yield* turn(id, "hi")
      const log = yield* events(id)
      const steps = ofType(log, "step.finished")
      expect(steps.map((e) => e.payload.aborted === true)).toEqual([true, false])
      const version = promptVersionOf((yield* requests)[0]!).version
      expect(steps.map((e) => e.payload.promptVersion)).toEqual([version, version])
      expect(ofType(log, "prompt.recorded")).toHaveLength(1)
    }).pipe(
      Effect.provide(
        layer([Script.fail(rateLimited, [ModelEvent.TextDelta({ id: "t", delta: "partial " })]), Script.text("ok")])
      )
    )
  )
})

describe("Sessions: the instructions in the system prompt", () => {
  it.live(
    "read once per turn; an unchanged prompt is not recorded again (also after reopening), a changed one is",
    () => {
      const script = [
        Script.toolCalls([{ callId: "c1", tool: "echo", input: { text: "x" } }]),
        Script.text("one"),
        Script.text("two"),
        Script.text("three"),
        Script.text("four")
      ]
      return Effect.gen(function* () {
        const content = yield* Ref.make("Run npm test before you answer.")
        const loads = yield* Ref.make(0)
        return yield* Effect.gen(function* () {
          const sessions = yield* Sessions
          const id = yield* sessions.create({ cwd: "/repo" })
          yield* turn(id, "first")
          // one load for the turn, though it had two steps
          expect(yield* Ref.get(loads)).toBe(1)
          yield* turn(id, "second")
          // opened again: what was recorded is known from the log
          yield* sessions.close(id)
          yield* sessions.open(id)
          yield* turn(id, "third")
          yield* Ref.set(content, "Run npm run lint too.")
          yield* turn(id, "fourth")
          expect(yield* Ref.get(loads)).toBe(4)

          const sent = yield* requests
          expect(sent).toHaveLength(5)
          expect(sent[0]!.system).toBe(
            "BASE PROMPT for /repo\n\n# Instructions\n\n" +
              "The user and the project left the instructions below for you, the user's own first, " +
              "then from the repository root down to the working directory. Follow them. Where they disagree, the later " +
              "(more specific) ones win, and what the user asks in the conversation wins over all of them.\n\n" +
              "## /repo/AGENTS.md\n\nRun npm test before you answer."
          )
          expect(sent[4]!.system).toContain("## /repo/AGENTS.md\n\nRun npm run lint too.")
          const first = promptVersionOf(sent[0]!).version
          const changed = promptVersionOf(sent[4]!).version
          expect(changed).not.toBe(first)

          const log = yield* events(id)
          expect(ofType(log, "prompt.recorded").map((e) => e.payload.promptVersion)).toEqual([first, changed])
          expect(ofType(log, "step.finished").map((e) => e.payload.promptVersion)).toEqual([
            first,
            first,
            first,
            first,
            changed
          ])
        }).pipe(Effect.provide(layer(script, { instructions: stubInstructions(content, loads) })))
      })
    }
  )

  it.live("logbook's API keys in an AGENTS.md are masked: in the request and in the recorded prompt", () => {
    const KEY = "sk-test-SECRET-0123456789abcdef"
    return Effect.gen(function* () {
      const sessions = yield* Sessions
      const id = yield* sessions.create({ cwd: "/repo" })
      yield* turn(id, "hi")
      const sent = yield* requests
      expect(sent[0]!.system).toContain(`Use the key ${redactionMarker("MY_KEY")} for the staging API.`)
      expect(sent[0]!.system).not.toContain(KEY)
      const recorded = ofType(yield* events(id), "prompt.recorded")
      const blob = yield* blobText(recorded[0]!.payload.blob)
      expect(blob).not.toContain(KEY)
      expect(JSON.parse(blob).system).toBe(sent[0]!.system)
    }).pipe(
      Effect.provide(
        layer([Script.text("ok")], {
          instructions: { load: () => Effect.succeed(loadedWith(`Use the key ${KEY} for the staging API.`)) },
          secrets: { hide: ["MY_KEY"], env: { MY_KEY: KEY } }
        })
      )
    )
  })

  it.live("without an Instructions service the system prompt is the base prompt alone", () =>
    Effect.gen(function* () {
      const sessions = yield* Sessions
      const id = yield* sessions.create({ cwd: "/w" })
      yield* turn(id, "hi")
      expect((yield* requests)[0]!.system).toBe("BASE PROMPT for /w")
    }).pipe(Effect.provide(layer([Script.text("ok")])))
  )
})
