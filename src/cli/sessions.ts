/**
 * `logbook sessions`: the session index (`list`), one session's conversation (`show`), and
 * hiding a session (`delete`).
 */
import * as Command from "@effect/cli/Command"
import { Console } from "effect"
import { sessionsDelete } from "./sessionsDelete.js"
import { sessionsList } from "./sessionsList.js"
import { sessionsShow } from "./sessionsShow.js"

export const sessions = Command.make("sessions", {}, () =>
  Console.log(
    "Usage: logbook sessions list | logbook sessions show <session> | logbook sessions delete <session>  (see `logbook sessions --help`)"
  )
).pipe(
  Command.withDescription("List the recorded sessions, show one as a conversation, or delete one."),
  Command.withSubcommands([sessionsList, sessionsShow, sessionsDelete])
)
