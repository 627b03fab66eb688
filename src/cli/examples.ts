/**
 * The EXAMPLES block at the end of a command's help (`logbook sessions list --help`, `logbook help
 * sessions list`): plain lines of `command   what it does`, the same for every command that has
 * some, within 80 columns.
 *
 * They are the help's footer, chosen from the command words of the arguments (`examplesFooter`),
 * rather than part of the command's description: @effect/cli shows a command's description also
 * as its one line in the COMMANDS list of its parent (`logbook --help`, `logbook sessions --help`),
 * and it only takes that line from a plain paragraph — a description with an EXAMPLES section
 * would leave the line empty there.
 */
import * as HelpDoc from "@effect/cli/HelpDoc"

/** `[command, what it does]` */
export type Example = readonly [string, string]

/**
 * The examples of each command, by its words (`sessions list`). Every one must work as written (a
 * test runs them: test/cli/help.test.ts the sessions ones, test/integration/examples.test.ts the others).
 */
export const examples: Readonly<Record<string, ReadonlyArray<Example>>> = {
  run: [
    ['logbook run "why does npm test fail?"', "ask in a new session here"],
    ['logbook run -c "now fix it"', "go on with the latest session"],
    ['git diff | logbook run "review this"', "piped input is sent as context"],
    ['logbook run "summarise README.md" > out.md', "out.md gets only the answer"],
    ['logbook run --format json -y "run the tests"', "JSON lines; -y approves asks"],
    ['logbook run -m ollama/qwen3:8b "add a test"', "another model for this run"]
  ],
  compact: [
    ["logbook compact", "summarise the latest session here"],
    ["logbook compact -m ollama/qwen3:8b", "the summary by another model"],
    ["logbook compact --format json", "what was summarised, as JSON"]
  ],
  events: [
    ["logbook events latest", "the log of the latest session"],
    ["logbook events latest -t tool.finished", "only the events of a type"],
    ["logbook events latest --from 5 --format json", "from seq 5, as JSON lines"],
    ["logbook events latest --follow", "watch a session as it runs"]
  ],
  audit: [
    ["logbook audit latest", "every change, command, question"],
    ["logbook audit latest --commands", "the commands with their whole output"],
    ["logbook audit latest --path 'src/**'", "the changes under src/"],
    ["logbook audit latest --format markdown", "for a review"],
    ["logbook audit --cwd . --since 7d", "every session here this week"],
    ["logbook audit latest --format json", "all of it, for programs"]
  ],
  replay: [
    ["logbook replay latest", "the last request the model got"],
    ["logbook replay latest --step 1", "the first one"],
    ["logbook replay latest --format json", "as JSON, with its proof"]
  ],
  rerun: [
    ["logbook rerun latest", "run the latest session again from its log: the same events?"],
    ["logbook rerun latest --workspace /tmp/again", "and keep the files it left there"],
    ["logbook rerun latest --from-step 3 --model openai/gpt-4o", "fork it live from request 3 with another model"],
    ["logbook rerun latest --unconfined-commands", "no bubblewrap here: run commands unconfined"]
  ],
  export: [
    ["logbook export latest -o session.jsonl", "the latest session as a session file"],
    ["logbook export latest --format html -o s.html", "as one page to read in a browser"],
    ["logbook export latest | gzip > session.jsonl.gz", "to stdout, compressed"]
  ],
  import: [
    ["logbook import session.jsonl --db other.db", "into another database (checked first)"],
    ["gunzip -c session.jsonl.gz | logbook import --db copy.db -", "from stdin"]
  ],
  verify: [
    ["logbook verify", "check every session's log and snapshots"],
    ["logbook verify latest", "only the latest session"],
    ["logbook verify --format json", "the problems, for programs"]
  ],
  stats: [
    ["logbook stats", "retries, tool failures, tokens, cost"],
    ["logbook stats --cwd . --since 7d", "this workspace, the last seven days"],
    ["logbook stats --by model", "the figures of each model side by side"],
    ["logbook stats --by tool", "each tool's failures and top errors"],
    ["logbook stats --by day --format json", "per UTC day, for scripts"]
  ],
  config: [
    ["logbook config", "the resolved config, as JSON"],
    ["logbook config --format text", "the same, for people"],
    ["logbook config --system-prompt", "the system prompt sent"],
    ["logbook config --schema > logbook.schema.json", "its JSON Schema, for editors"]
  ],
  help: [
    ["logbook help run", "the help of a command"],
    ["logbook help sessions show", "of a subcommand"],
    ["logbook help", "every command"]
  ],
  sessions: [
    ["logbook sessions list", "the sessions, most recently updated first"],
    ["logbook sessions list --all", "deleted sessions too"],
    ["logbook sessions show latest", "the latest session as a conversation"],
    ["logbook sessions show 0195a0b0", "a session by the short id list prints"],
    ["logbook sessions delete 0195a0b0", "hide a session (its events are kept)"]
  ],
  "sessions list": [
    ["logbook sessions list", "short id, outcome, cost, model, title"],
    ["logbook sessions list -n 5", "the five most recently updated"],
    ["logbook sessions list --all", "deleted sessions too, marked deleted"],
    ["logbook sessions list --format json", "full ids and every field, for scripts"],
    ["logbook sessions list --db backup.db", "a database you may only read"]
  ],
  "sessions show": [
    ["logbook sessions show latest", "the most recently updated session"],
    ["logbook sessions show 0195a0b0", "by a short id from sessions list"],
    ["logbook sessions show latest --at 12", "as it was right after event 12"],
    ["logbook sessions show latest --full", "tool inputs and outputs in full"],
    ["logbook sessions show latest --format json", "the projected state"]
  ],
  "sessions delete": [
    ["logbook sessions delete 0195a0b0", "hide this session; its events are kept"],
    ["logbook sessions delete latest", "hide the most recently updated one"],
    ["logbook sessions list --all", "deleted sessions are listed here"],
    ["logbook sessions show 0195a0b0", "and can still be read"]
  ]
}

/** The lines of an EXAMPLES block: indented 2, descriptions aligned. */
export const exampleLines = (list: ReadonlyArray<Example>): Array<string> => {
  const width = Math.max(...list.map(([command]) => command.length))
  return list.map(([command, what]) => `  ${command.padEnd(width)}   ${what}`)
}

/** The command words of `argv` (`node logbook sessions list --db x` → `sessions list`). */
const commandWords = (argv: ReadonlyArray<string>): Array<string> => {
  const words: Array<string> = []
  for (const arg of argv.slice(2)) {
    if (arg.startsWith("-")) break
    words.push(arg)
  }
  return words
}

/** The help footer for the command `argv` names: its EXAMPLES block, or nothing. */
export const examplesFooter = (argv: ReadonlyArray<string>): HelpDoc.HelpDoc => {
  const words = commandWords(argv)
  const list = examples[words.slice(0, 2).join(" ")] ?? (words.length === 1 ? examples[words[0]!] : undefined)
  if (list === undefined) return HelpDoc.empty
  return HelpDoc.blocks([HelpDoc.h1("EXAMPLES"), HelpDoc.p(exampleLines(list).join("\n"))])
}
