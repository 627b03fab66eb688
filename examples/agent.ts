import { Effect, Layer, Option } from "effect"
import { builtinTools, EventStore, layerAiSdk, makeAgentLayer, Secrets, Sessions } from "logbook"

const Agent = makeAgentLayer({
  sessions: { maxSteps: 50 },
  tools: { tools: builtinTools({ bash: { timeoutMs: 120_000, maxTimeoutMs: 600_000 } }) }
}).pipe(
  Layer.provide(
    layerAiSdk({ name: "openai/gpt-4.1", type: "openai", modelId: "gpt-4.1", apiKey: process.env.OPENAI_API_KEY })
  ),
  // OPENAI_API_KEY and ANTHROPIC_API_KEY hidden from commands and masked in the log;
  // Secrets.layer({ hide: ["MY_PROVIDER_KEY"] }) names other variables
  Layer.provide(Secrets.layerFromEnv),
  Layer.provideMerge(EventStore.layerSqlite({ filename: "logbook.db" }))
)

const program = Effect.gen(function* () {
  const sessions = yield* Sessions
  const id = yield* sessions.create({ cwd: process.cwd() })
  yield* sessions.send(id, "list the TODOs in src/") // steer or queue with { mode }
  return yield* sessions.wait(id) // how the last turn ended (None: no turn ran)
})

Effect.runPromise(program.pipe(Effect.provide(Agent))).then((outcome) =>
  console.log(
    Option.match(outcome, { onNone: () => "no turn", onSome: (turn) => `${turn.reason} after ${turn.steps} step(s)` })
  )
)
