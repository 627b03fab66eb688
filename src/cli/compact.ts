/**
 * `logbook compact [<session>]`: summarise a session's conversation now. The model
 * writes the summary (`compaction.done {trigger: "manual"}`); the next turn is sent the summary
 * instead of the messages before it. The messages stay in the log, and replay still shows the exact
 * requests that were sent.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Console, Effect, Option } from "effect"
import type { ConfigInput } from "../config/Config.js"
import { Sessions } from "../session/Sessions.js"
import { Approver } from "../tools/Approver.js"
import { findResumed, setupAgent } from "./agentSetup.js"
import { dbOption } from "./db.js"
import { CliError } from "./errors.js"
import { cwdOption, formatOption, resolveCwd } from "./options.js"

const sessionArg = Args.text({ name: "session" }).pipe(
  Args.withDescription("The session (an id or a unique prefix); default: the latest session of the directory."),
  Args.optional
)
const modelOption = Options.text("model").pipe(
  Options.withAlias("m"),
  Options.optional,
  Options.withPseudoName("provider/model"),
  Options.withDescription(
    "The model that writes the summary (default: the model the session is on). The session itself stays on its model."
  )
)
const compactFormat = formatOption(
  ["text", "json"],
  "text: one line saying what was summarised; json: one JSON object with the summary."
)

/** `48213` -> `48.2k`. */
const tokens = (n: number): string => (n < 1000 ? `${n}` : `${Number((n / 1000).toFixed(1))}k`)

export const compact = Command.make(
  "compact",
  {
    session: sessionArg,
    model: modelOption,
    format: compactFormat,
    cwd: cwdOption(
      "The directory whose latest session is compacted, and whose config is used (default: the current one)."
    ),
    db: dbOption
  },
  Effect.fn("cli.compact")(function* (args) {
    const cwd = yield* resolveCwd(args.cwd)
    const flags: ConfigInput = Option.isSome(args.model) ? { model: args.model.value } : {}
    // a compaction runs no tool: nothing to approve
    const found = yield* findResumed({
      session: args.session,
      continue: Option.isNone(args.session),
      cwd,
      db: args.db,
      noSession: `no session in ${cwd} to compact; name one`
    })
    // the summary is written by the model the session is on, unless --model names another
    const { layer } = yield* setupAgent({
      cwd,
      flags,
      sessionModel: found?.model ?? undefined,
      db: args.db,
      approver: Approver.autoDeny
    })
    const program = Effect.gen(function* () {
      const sessions = yield* Sessions
      const sessionId = found!.id
      yield* sessions.open(sessionId)
      const result = yield* sessions
        .compact(sessionId)
        .pipe(
          Effect.catchTag("CompactionFailed", (failed) =>
            failed.reason === "nothing-to-compact"
              ? Effect.succeed(undefined)
              : Effect.fail(CliError.failed(`could not compact session ${sessionId}: ${failed.message}`))
          )
        )
      if (result === undefined) {
        if (args.format === "json") {
          return yield* Console.log(JSON.stringify({ type: "compacted", sessionId, compacted: false }))
        }
        return yield* Console.log(`session ${sessionId}: nothing to compact`)
      }
      const state = yield* sessions.state(sessionId)
      if (args.format === "json") {
        return yield* Console.log(
          JSON.stringify({
            type: "compacted",
            sessionId,
            compacted: true,
            messages: result.messages,
            tokensBefore: result.tokensBefore,
            tokensAfter: result.tokensAfter,
            summary: state.compaction?.summary ?? ""
          })
        )
      }
      yield* Console.log(
        `session ${sessionId}: compacted ${result.messages} message${result.messages === 1 ? "" : "s"} into a ` +
          `summary (about ${tokens(result.tokensBefore)} → ${tokens(result.tokensAfter)} tokens)`
      )
    })
    return yield* Effect.scoped(program).pipe(Effect.provide(layer))
  })
).pipe(
  Command.withDescription(
    "Summarise a session's conversation now: the model writes a summary, and the next turn is sent it " +
      "instead of the messages before it (they stay in the log)."
  )
)
