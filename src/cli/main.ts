/**
 * The `logbook` command tree and how its outcome becomes an exit code. `src/bin.ts` runs it.
 *
 * Exit codes (DESIGN §9): 0 done, 1 failed, 2 usage or configuration error (bad flags, unknown
 * session, missing or unusable database), 130 interrupted (SIGINT or SIGTERM).
 */
import { Command } from "@effect/cli"
import { Console } from "effect"
import { toExitCode } from "./errors.js"
import { events } from "./events.js"
import { sessions } from "./sessions.js"
import { version } from "./version.js"

export const root = Command.make("logbook", {}, () =>
  Console.log(
    [
      `logbook ${version}: a terminal AI coding agent that writes every step to an append-only event log.`,
      "",
      "  logbook sessions list           the recorded sessions",
      "  logbook sessions show <id>      one session as a conversation",
      "  logbook events <id> [--follow]  one session's event log",
      "",
      "Run `logbook <command> --help` for the flags of a command."
    ].join("\n")
  )
).pipe(
  Command.withDescription(
    "A terminal AI coding agent whose every step is written to an append-only event log: " +
      "resumable, replayable, auditable."
  ),
  Command.withSubcommands([sessions, events])
)

export const cli = Command.run(root, { name: "logbook", version })

/** Runs the CLI on `process.argv` and yields the exit code; interruption is left to the runtime. */
export const main = (argv: ReadonlyArray<string>) => toExitCode(cli(argv))

