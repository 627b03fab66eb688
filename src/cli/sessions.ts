/**
 * `logbook sessions`: the session index (`list`) and one session's conversation (`show`).
 */
import * as Command from "@effect/cli/Command"
import { Console } from "effect"
import { sessionsList } from "./sessionsList.js"
import { sessionsShow } from "./sessionsShow.js"

export const sessions = Command.make("sessions", {}, () =>
  Console.log("Usage: logbook sessions list | logbook sessions show <session>  (see `logbook sessions --help`)")
).pipe(
  Command.withDescription("List the recorded sessions, or show one as a conversation."),
  Command.withSubcommands([sessionsList, sessionsShow])
)
