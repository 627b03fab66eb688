/**
 * The SDK model is built once per model, not per request: building it builds the provider's
 * schemas for its stream chunks, which zod compiles on first use (most of zod's time in a step,
 * when it was built for every request). Counted on the real provider package, over real HTTP.
 */
import type * as OpenAICompatible from "@ai-sdk/openai-compatible"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { vi } from "vitest"
import { makeAiSdkModel } from "../../src/model/AiSdk.js"
import type { ModelRequest } from "../../src/model/Model.js"
import { Reply, startScriptedServer } from "../support/scriptedServer.js"

const built = vi.hoisted(() => ({ count: 0 }))

vi.mock("@ai-sdk/openai-compatible", async (importOriginal) => {
  const real = await importOriginal<typeof OpenAICompatible>()
  return {
    ...real,
    createOpenAICompatible: (...args: Parameters<typeof real.createOpenAICompatible>) => {
      built.count++
      return real.createOpenAICompatible(...args)
    }
  }
})

const request: ModelRequest = { system: "You are a test.", messages: [{ role: "user", content: "hi" }], tools: [] }

describe("the SDK model", () => {
  it.live("is built by the first request and used by the ones after it", () =>
    Effect.acquireUseRelease(
      Effect.promise(() => startScriptedServer()),
      (server) =>
        Effect.gen(function* () {
          const model = makeAiSdkModel({
            name: "local/test-model",
            type: "openai-compatible",
            baseURL: `${server.url}/v1`,
            modelId: "test-model",
            // openai-compatible requests are our own unless asked to go through the SDK
            viaSdk: true
          })
          for (const text of ["one", "two", "three"]) {
            server.enqueue(Reply.text(text))
            const events = yield* Stream.runCollect(model.stream(request))
            expect(Array.from(events).some((e) => e._tag === "TextDelta" && e.delta === text)).toBe(true)
          }
          expect(server.requests.length).toBe(3)
          expect(built.count).toBe(1)
        }),
      (server) => Effect.promise(() => server.close())
    )
  )
})
