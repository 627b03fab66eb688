/**
 * One openai-compatible request, our own client against the AI SDK's provider package, side by
 * side (issue 13 §2): the same `makeAiSdkModel` layer with and without `viaSdk`, the same answer
 * (text, then a `read` call) from the scripted server over real HTTP, timed from the stream's start
 * to its `Finish`. Each round sends a short series of requests through each client, alternated,
 * for a session of a few messages and for one of 2,000 (1,000 steps): every request adds the new
 * step's two messages to the same earlier message objects, as the kernel's history hands them back
 * (session/History.ts), so a client that serialises what it has seen once pays for the new
 * messages only.
 */
import { Effect, Stream } from "effect"
import { type AiSdkOptions, makeAiSdkModel } from "../src/model/AiSdk.js"
import type { ModelMessage, ModelRequest } from "../src/model/Model.js"
import { Reply, startScriptedServer } from "../test/support/scriptedServer.js"
import { median, now } from "./util.js"

export interface ProviderCase {
  /** messages in the history before the request's own step */
  readonly messages: number
  /** median ms per request: our client, the SDK's package */
  readonly ownMs: number
  readonly sdkMs: number
  /** bytes of the last request's body */
  readonly bodyBytes: number
}

export interface ProviderResult {
  readonly rounds: number
  readonly requestsPerRound: number
  readonly cases: ReadonlyArray<ProviderCase>
}

const tools = [
  {
    name: "read",
    description: "Read a file of the workspace.",
    inputSchema: {
      type: "object",
      properties: { path: { type: "string" }, offset: { type: "integer" }, limit: { type: "integer" } },
      required: ["path"]
    }
  },
  {
    name: "bash",
    description: "Run a shell command.",
    inputSchema: { type: "object", properties: { command: { type: "string" } }, required: ["command"] }
  }
]

/** Step `i`'s two messages: the model's text and `read` call, then the call's result. */
const stepMessages = (i: number): ReadonlyArray<ModelMessage> => [
  {
    role: "assistant",
    parts: [
      { type: "text", text: `Step ${i}: reading the note.` },
      { type: "tool-call", callId: `call_${i}`, tool: "read", input: { path: `notes/${i}.txt` } }
    ]
  },
  {
    role: "tool",
    results: [{ callId: `call_${i}`, tool: "read", output: `1: hello world ${i}\n`.repeat(8), isError: false }]
  }
]

const answer = (i: number) =>
  Reply.stream({
    text: [`Step ${i}: `, "reading the note."],
    toolCalls: [{ id: `call_${i}`, name: "read", arguments: ['{"path":', `"notes/${i}.txt"}`] }],
    usage: { prompt_tokens: 1000, completion_tokens: 20 }
  })

export const benchProvider = async (
  options: {
    readonly sizes?: ReadonlyArray<number>
    readonly rounds?: number
    readonly requestsPerRound?: number
    readonly log?: (line: string) => void
  } = {}
): Promise<ProviderResult> => {
  const sizes = options.sizes ?? [2, 2_000]
  const rounds = options.rounds ?? 7
  const perRound = options.requestsPerRound ?? 20
  // the server neither parses nor keeps the bodies: it runs in this process, inside the timed window
  const server = await startScriptedServer({ recordBodies: false })
  try {
    const base: Omit<AiSdkOptions, "viaSdk"> = {
      name: "local/bench",
      type: "openai-compatible",
      baseURL: `${server.url}/v1`,
      apiKey: "sk-bench",
      modelId: "bench"
    }
    const clients = { own: makeAiSdkModel(base), sdk: makeAiSdkModel({ ...base, viaSdk: true }) }
    const cases: Array<ProviderCase> = []
    for (const size of sizes) {
      // the session so far: the same objects in every request, as the history keeps them
      const history: Array<ModelMessage> = [{ role: "user", content: "Read the notes." }]
      for (let i = 1; history.length < size; i++) history.push(...stepMessages(i))
      const times = { own: [] as Array<number>, sdk: [] as Array<number> }
      let step = 100_000
      let bodyBytes = 0
      const send = async (client: "own" | "sdk") => {
        // the new step's messages are new objects; the rest of the history is not
        const request: ModelRequest = {
          system: "You are a coding agent. Be brief.",
          messages: [...history, ...stepMessages(step++)],
          tools,
          maxOutputTokens: 4096
        }
        server.enqueue(answer(step))
        const start = now()
        const events = await Effect.runPromise(Stream.runCollect(clients[client].stream(request)))
        const ms = now() - start
        bodyBytes = Number(server.requests.at(-1)?.headers["content-length"] ?? 0)
        if (![...events].some((e) => e._tag === "Finish")) throw new Error(`${client}: the answer did not finish`)
        return ms
      }
      // warm both (the first request loads the client's modules)
      for (let i = 0; i < 5; i++) {
        await send("own")
        await send("sdk")
      }
      for (let round = 0; round < rounds; round++) {
        for (const client of round % 2 === 0 ? (["own", "sdk"] as const) : (["sdk", "own"] as const)) {
          for (let i = 0; i < perRound; i++) times[client].push(await send(client))
        }
      }
      const result = { messages: history.length, ownMs: median(times.own), sdkMs: median(times.sdk), bodyBytes }
      options.log?.(
        `  ${result.messages} messages: our client ${result.ownMs.toFixed(2)} ms, the SDK's ${result.sdkMs.toFixed(2)} ms a request`
      )
      cases.push(result)
    }
    return { rounds, requestsPerRound: perRound, cases }
  } finally {
    await server.close()
  }
}
