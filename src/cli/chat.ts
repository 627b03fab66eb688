/**
 * `logbook [message..]` (also `logbook chat`): the interactive session in the working directory —
 * a new one, the latest one (`-c`), or a given one (`-s <id>`); a message as arguments is sent
 * first. Needs a terminal (stdin and stdout); elsewhere `logbook run` is the way (see docs/tui.md).
 * The screen (Ink, React) is loaded only here, with a dynamic import.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import { Config, Effect, Either, Option } from "effect"
import type { ConfigInput } from "../config/Config.js"
import { parseReasoning } from "../model/Reasoning.js"
import { dbOption } from "./db.js"
import { CliError } from "./errors.js"
import { cwdOption, resolveCwd } from "./options.js"
import { colorEnabled } from "./render.js"
import { continueOption, modelOption, reasoningOption, sessionOption, unknownOption, yesOption } from "./run.js"

const messageArgs = Args.text({ name: "message" }).pipe(
  Args.repeated,
  Args.withDescription("A first message to send (the words are joined with spaces).")
)

const envVar = (name: string) =>
  Config.string(name).pipe(
    Config.option,
    Config.map(Option.getOrUndefined),
    Effect.orElseSucceed(() => undefined)
  )

/** the variables by which Ink (its `is-in-ci` dependency) decides it runs in CI */
const CI_VARIABLES = ["CI", "CONTINUOUS_INTEGRATION"] as const

/**
 * Loads the screen. Ink decides once, when its module is evaluated, that a `CI` variable means "no
 * terminal here" and then draws nothing until it exits — a blank screen for a developer whose shell
 * sets `CI` (a CI job's debug shell, some dev containers). This command has checked that stdin and
 * stdout are terminals, so Ink is loaded with those variables hidden; they are back before anything
 * runs, so the agent's commands still see them.
 */
const loadScreen = Effect.acquireUseRelease(
  Effect.sync(() => {
    const saved = CI_VARIABLES.map((name) => [name, process.env[name]] as const)
    for (const name of CI_VARIABLES) delete process.env[name]
    return saved
  }),
  () => Effect.promise(() => import("./tui/interactive.js")),
  (saved) =>
    Effect.sync(() => {
      for (const [name, value] of saved) if (value !== undefined) process.env[name] = value
    })
)

export const chat = Command.make(
  "chat",
  {
    message: messageArgs,
    model: modelOption,
    session: sessionOption,
    continue: continueOption,
    reasoning: reasoningOption,
    yes: yesOption,
    cwd: cwdOption("The workspace directory (default: the current directory)."),
    db: dbOption
  },
  Effect.fn("cli.chat")(function* (args) {
    const unknown = unknownOption(args.message, process.argv.slice(1), process.argv[1] ?? "")
    if (unknown !== undefined) {
      const name = unknown.split("=")[0]
      return yield* CliError.usage(
        `unknown option ${name} (see logbook --help); to send words that start with "-" as the message, put them ` +
          `after --, as in: logbook -- "${name} …"`
      )
    }
    if (Option.isSome(args.session) && args.continue) {
      return yield* CliError.usage("--session and --continue cannot be used together: --session names the session")
    }
    const message = args.message.join(" ").trim()
    if (process.stdin.isTTY !== true || process.stdout.isTTY !== true) {
      return yield* CliError.usage(
        `the interactive session needs a terminal (stdin and stdout); in a script or a pipe use: logbook run ${
          message === "" ? '"<message>"' : JSON.stringify(message.slice(0, 60))
        } (the commands are run, sessions, events, compact, config, help)`
      )
    }
    const reasoning = Option.isSome(args.reasoning)
      ? yield* Either.match(parseReasoning(args.reasoning.value), {
          onLeft: (why) => CliError.usage(`--reasoning: ${why}`),
          onRight: (setting) => Effect.succeed(setting)
        })
      : undefined
    const cwd = yield* resolveCwd(args.cwd)
    const flags: ConfigInput = Option.isSome(args.model) ? { model: args.model.value } : {}
    const noColor = yield* envVar("NO_COLOR")
    const forceColor = yield* envVar("FORCE_COLOR")
    const term = yield* envVar("TERM")
    const colors = term !== "dumb" && colorEnabled({ isTTY: true, noColor, forceColor })
    const { interactive } = yield* loadScreen
    return yield* Effect.scoped(
      interactive({
        cwd,
        flags,
        reasoning,
        db: args.db,
        session: args.session,
        continue: args.continue,
        message: message === "" ? undefined : message,
        yes: args.yes,
        colors,
        stdin: process.stdin,
        stdout: process.stdout
      })
    )
  })
).pipe(
  Command.withDescription(
    "The interactive session (what `logbook` with no command opens): talk to the agent while it works — Enter " +
      "steers, Alt+Enter queues, Esc interrupts, /help lists the keys and commands."
  )
)
