/**
 * The `logbook` command tree and how its outcome becomes an exit code. `src/bin.ts` runs it.
 *
 * Exit codes (DESIGN §9): 0 done, 1 failed, 2 usage or configuration error (bad flags, unknown
 * session, missing or unusable database), 130 interrupted (SIGINT or SIGTERM).
 */
import * as Args from "@effect/cli/Args"
import type { CliApp } from "@effect/cli/CliApp"
import * as Command from "@effect/cli/Command"
import * as Prompt from "@effect/cli/Prompt"
import { Console, Effect } from "effect"
import { editDistance } from "../domain/nearest.js"
import { version } from "../version.js"
import { audit, blob } from "./audit.js"
import { chat } from "./chat.js"
import { compact } from "./compact.js"
import { config } from "./config.js"
import { diff } from "./diff.js"
import { CliError, type CliFailure, ExitCode, toExitCode, withCliLogger } from "./errors.js"
import { events } from "./events.js"
import { examplesFooter } from "./examples.js"
import { exportCommand } from "./export.js"
import { hooks } from "./hooks.js"
import { importCommand } from "./import.js"
import { mcp } from "./mcp.js"
import { plugins } from "./plugins.js"
import { withTerminalAwareConsole } from "./render.js"
import { replay } from "./replay.js"
import { rerunCommand } from "./rerun.js"
import { run } from "./run.js"
import { sessions } from "./sessions.js"
import { statsCommand } from "./stats.js"
import { verify } from "./verify.js"

/** `logbook help [command…]`: the help of the command (`logbook help sessions show`), or of logbook. */
const help = Command.make(
  "help",
  {
    command: Args.text({ name: "command" }).pipe(
      Args.repeated,
      Args.withDescription("The command (and subcommand) to explain, e.g. run or sessions show.")
    )
  },
  ({ command }) =>
    Effect.suspend(() => {
      const first = command[0]
      if (first !== undefined && !commandNames.has(first)) {
        return Effect.fail(
          CliError.usage(
            `unknown command "${first}"; the commands are ${[...commandNames].filter((name) => name !== "help").join(", ")}`
          )
        )
      }
      return cli(["node", "logbook", ...command, "--help"])
    })
).pipe(Command.withDescription("Show the help of a command: logbook help run, logbook help sessions show."))

export const root = Command.make("logbook", {}, () =>
  Console.log(
    [
      `logbook ${version}: a terminal AI coding agent that writes every step to an append-only event log.`,
      "",
      "  logbook                         talk to the agent in this directory (-c: the latest session)",
      '  logbook run "<message>"         ask the agent to do something, for scripts (--continue to go on)',
      "  logbook sessions list           the recorded sessions",
      "  logbook sessions show <id>      one session as a conversation",
      "  logbook sessions delete <id>    hide a session (its events are kept)",
      "  logbook events <id> [--follow]  one session's event log",
      "  logbook audit <id>              every file change, command and question, from the log",
      "  logbook replay <id> --at <seq>  the exact request the model got then, proved from the log",
      "  logbook rerun <id>              run a session again from its log, check it writes the same",
      "  logbook diff <a> <b>            two sessions side by side: where they diverge, what differs",
      "  logbook blob <hash>             a blob of the log (a file's content, a whole output)",
      "  logbook verify [<id>]           check the log's hash chain, seqs and snapshots",
      "  logbook stats [--by model|day]  retries, tool failures, tokens, cost across sessions",
      "  logbook compact [<id>]          summarise a session's conversation now",
      "  logbook export <id> [-o file]   one session as a file (--format html: a page)",
      "  logbook import <file>           a session file into this database",
      "  logbook config                  the resolved config, secrets masked",
      "  logbook mcp list                the MCP servers (add, remove, test, approve)",
      "  logbook plugins list            the plugins (approve one a project brings)",
      "  logbook hooks list              the command hooks (approve one a project brings)",
      "",
      "Run `logbook help <command>` (or `logbook <command> --help`) for the flags of a command."
    ].join("\n")
  )
).pipe(
  Command.withDescription(
    "A terminal AI coding agent whose every step is written to an append-only event log: " +
      "resumable, replayable, auditable."
  ),
  Command.withSubcommands([
    chat,
    run,
    sessions,
    events,
    statsCommand,
    audit,
    replay,
    rerunCommand,
    diff,
    blob,
    verify,
    compact,
    exportCommand,
    importCommand,
    config,
    mcp,
    plugins,
    hooks,
    help
  ])
)

/**
 * The command tree on a command line. It fails only with a `CliFailure` (errors.ts: the commands'
 * errors and @effect/cli's `ValidationError`), which `main` turns into an exit code.
 */
export const cli = (argv: ReadonlyArray<string>): Effect.Effect<void, CliFailure, CliApp.Environment> =>
  Command.run(root, { name: "logbook", version, footer: examplesFooter(argv) })(argv)

/**
 * `--db` belongs to each command that opens the database, so @effect/cli expects it after the
 * command name. Users also write it first (`logbook --db x.db sessions list`), as a global flag:
 * leading `--db <file>` / `--db=<file>` arguments are moved after the command (and dropped when no
 * command follows, as in `logbook --db x.db --help`).
 */
export const hoistDbOption = (argv: ReadonlyArray<string>): ReadonlyArray<string> => {
  const head = argv.slice(0, 2)
  const rest = argv.slice(2)
  const moved: Array<string> = []
  while (rest.length > 0) {
    const arg = rest[0]!
    if (arg === "--db" && rest.length > 1) moved.push(...rest.splice(0, 2))
    else if (arg.startsWith("--db=")) moved.push(...rest.splice(0, 1))
    else break
  }
  if (moved.length === 0) return argv
  // no command after it (`logbook --db x.db --help`): the root command reads no database
  if (rest.length === 0 || rest[0]!.startsWith("-")) return [...head, ...rest]
  return [...head, ...rest, ...moved]
}

/** The flags of `logbook` itself (they never open the interactive session). */
const rootFlags = new Set(["--help", "-h", "--version", "--wizard", "--completions", "--log-level"])

/**
 * `logbook` with no command is the interactive session (`logbook chat`): a first word that is no
 * command and no flag of logbook itself (a message, `-c`, `-s <id>`, `--db <file>` …) means chat.
 * `logbook` alone means chat on a terminal; elsewhere it prints the overview.
 */
export const routeDefault = (
  argv: ReadonlyArray<string>,
  commands: ReadonlySet<string>,
  terminal: boolean
): ReadonlyArray<string> => {
  const rest = argv.slice(2)
  // leading --db <file> belongs to whatever command follows (hoistDbOption)
  const first = argv[firstWordIndex(argv)]
  if (first === undefined) return rest.length === 0 && !terminal ? argv : [...argv.slice(0, 2), "chat", ...rest]
  if (commands.has(first) || rootFlags.has(first.split("=")[0]!)) return argv
  return [...argv.slice(0, 2), "chat", ...rest]
}

/** The index in `argv` of its first word after leading `--db <file>` flags (which `hoistDbOption` moves). */
const firstWordIndex = (argv: ReadonlyArray<string>): number => {
  let i = 2
  while (i < argv.length && (argv[i] === "--db" || argv[i]!.startsWith("--db="))) i += argv[i] === "--db" ? 2 : 1
  return i
}

/** The flags of the interactive session that take a value (`logbook -m <model> …`). */
const chatValueFlags = new Set(["--db", "--cwd", "--model", "-m", "--session", "-s", "--reasoning"])

/**
 * The index of the first word of the interactive session's message on a command line routed to it:
 * the first word that is no flag and no flag's value; none after `--` (what follows is the message
 * as typed, never taken for a command).
 */
const firstMessageIndex = (argv: ReadonlyArray<string>): number | undefined => {
  let i = 2
  while (i < argv.length) {
    const arg = argv[i]!
    if (arg === "--") return undefined
    if (chatValueFlags.has(arg)) i += 2
    else if (arg.startsWith("-")) i += 1
    else return i
  }
  return undefined
}

/** Two strings of one length that differ only by two neighbouring characters swapped. */
const isSwap = (a: string, b: string): boolean => {
  if (a.length !== b.length) return false
  const at = [...a].findIndex((char, i) => char !== b[i])
  return at >= 0 && a[at] === b[at + 1] && a[at + 1] === b[at] && a.slice(at + 2) === b.slice(at + 2)
}

/**
 * A first word that is one typo from a command (`sesions`, `sessoins`, `Stats`): a command line that
 * would otherwise open the interactive session with it as a message for the model, which may run
 * commands. A word with a space is a quoted message, never a typo. For the short commands (five letters or fewer:
 * `run`, `stats`, `audit` …) a changed letter is not a typo but another word (`fun`, `what`, `state`):
 * only a letter missing, doubled or swapped is. See docs/cli.md.
 */
export const nearMissCommand = (
  argv: ReadonlyArray<string>,
  commands: ReadonlySet<string>
): { readonly index: number; readonly typed: string; readonly meant: string } | undefined => {
  const first = argv[firstWordIndex(argv)]
  // an explicit `logbook chat …` takes its words as a message
  if (first === undefined || commands.has(first) || rootFlags.has(first.split("=")[0]!)) return undefined
  const index = firstMessageIndex(argv)
  const typed = index === undefined ? undefined : argv[index]
  if (index === undefined || typed === undefined || commands.has(typed) || /\s/.test(typed)) return undefined
  for (const name of commands) {
    if (editDistance(typed, name) > 1) continue
    const word = typed.toLowerCase()
    if (name.length <= 5 && word.length === name.length && word !== name && !isSwap(word, name)) continue
    return { index, typed, meant: name }
  }
  return undefined
}

/**
 * A near-miss of a command is never sent to the model: on a terminal the user is asked whether they
 * meant the command (yes runs it); elsewhere, or on no, it is a usage error (exit 2) that says how to
 * send those words as a message.
 */
const confirmNearMiss = (
  argv: ReadonlyArray<string>,
  miss: { readonly index: number; readonly typed: string; readonly meant: string },
  terminal: boolean
) =>
  Effect.gen(function* () {
    const words = argv.slice(miss.index)
    const notCommand = `"${miss.typed}" is not a logbook command`
    const asMessage = terminal
      ? `to send it to the agent as a message, put it after --: logbook -- ${words.join(" ")}`
      : `to send it to the agent as a message: logbook run ${JSON.stringify(words.join(" "))}`
    const meant = terminal
      ? yield* Prompt.confirm({
          message: `${notCommand}. Did you mean \`logbook ${miss.meant}\`?`,
          initial: false
        }).pipe(Effect.catchTag("QuitException", () => Effect.interrupt))
      : false
    if (!meant) {
      return yield* CliError.usage(
        terminal ? `${notCommand}; ${asMessage}` : `${notCommand}: did you mean \`${miss.meant}\`? (${asMessage})`
      )
    }
    // the command first, its words next, then the flags typed before the typo (`--db x`)
    const corrected = [...argv.slice(0, 2), miss.meant, ...argv.slice(miss.index + 1), ...argv.slice(2, miss.index)]
    return yield* cli(corrected)
  })

const commandNames = new Set(
  [
    Command.getNames(chat),
    Command.getNames(run),
    Command.getNames(sessions),
    Command.getNames(events),
    Command.getNames(audit),
    Command.getNames(replay),
    Command.getNames(rerunCommand),
    Command.getNames(diff),
    Command.getNames(blob),
    Command.getNames(verify),
    Command.getNames(statsCommand),
    Command.getNames(compact),
    Command.getNames(exportCommand),
    Command.getNames(importCommand),
    Command.getNames(config),
    Command.getNames(mcp),
    Command.getNames(plugins),
    Command.getNames(hooks)
  ]
    .flatMap((names) => Array.from(names))
    .concat("help")
)

/**
 * The command a (routed) command line runs, for the name of its span: its first word when that is a
 * command, else `logbook` (`--version`, `--help`). Never an argument: a message may hold anything.
 */
export const commandOf = (argv: ReadonlyArray<string>): string => {
  const first = argv[2]
  return first !== undefined && commandNames.has(first) ? first : "logbook"
}

/**
 * Runs the CLI on `process.argv` and yields the exit code; interruption is left to the runtime. The
 * whole command is one span (`logbook run`, `logbook events` …), the root of the run's trace.
 */
export const main = (argv: ReadonlyArray<string>) => {
  const terminal = process.stdin.isTTY === true && process.stdout.isTTY === true
  const routed = hoistDbOption(routeDefault(argv, commandNames, terminal))
  const command = commandOf(routed)
  const miss = nearMissCommand(argv, commandNames)
  return toExitCode(miss === undefined ? cli(routed) : confirmNearMiss(argv, miss, terminal)).pipe(
    Effect.tap((code) => Effect.annotateCurrentSpan("process.exit.code", code)),
    Effect.onInterrupt(() => Effect.annotateCurrentSpan("process.exit.code", ExitCode.interrupted)),
    Effect.withSpan(command === "logbook" ? "logbook" : `logbook ${command}`, {
      attributes: { "logbook.command": command }
    }),
    withCliLogger,
    withTerminalAwareConsole
  )
}
