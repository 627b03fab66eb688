import { Args, Command } from "@effect/cli"
import { Console, Effect } from "effect"
import { dbOption } from "./db.js"

export const sessionsShow = Command.make(
  "show",
  { session: Args.text({ name: "session" }), db: dbOption },
  Effect.fn("cli.sessions.show")(function* () {
    yield* Console.log("todo")
  })
)
