/**
 * `logbook hooks`: the command hooks of the user and of the project (docs/hooks.md). `list` shows
 * each with what it runs, where it came from and whether it runs; `approve` lets a hook a project
 * brings run in this workspace, pinned to its definition as it is now.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import { Console, Effect } from "effect"
import { Config } from "../config/Config.js"
import { approvedHooks, approveHook, describeHook, hookEntries } from "../config/HookConfig.js"
import { hooksJson } from "./config.js"
import { CliError } from "./errors.js"
import { cwdOption, formatOption, resolveCwd } from "./options.js"
import { stdoutStyle, table } from "./render.js"

const cwd = cwdOption("The workspace whose project hooks (logbook.json, .claude/settings.json) to include.")
const sourceArg = Args.text({ name: "hook" }).pipe(
  Args.withDescription("The hook as `logbook hooks list` names it: hook:PreToolUse[0].")
)

const entriesOf = (dir: string) =>
  Effect.gen(function* () {
    const config = yield* Effect.provide(Config, Config.layer({ cwd: dir }))
    const found = yield* hookEntries(config, dir, yield* approvedHooks(config, dir))
    for (const notice of found.notices) yield* Console.error(`logbook: ${notice}`)
    return { config, entries: found.entries }
  })

const hooksList = Command.make(
  "list",
  { cwd, format: formatOption(["text", "json"], "text: a table; json: one object per hook.") },
  Effect.fn("cli.hooks.list")(function* ({ cwd, format }) {
    const dir = yield* resolveCwd(cwd)
    const { entries } = yield* entriesOf(dir)
    if (format === "json") {
      yield* Console.log(JSON.stringify(hooksJson(entries), null, 2))
      return
    }
    if (entries.length === 0) {
      yield* Console.log('No hooks. Add some under "hooks" in your config (docs/hooks.md).')
      return
    }
    const style = yield* stdoutStyle
    const rows = entries.map((e) => [
      e.definition.source,
      e.scope === "user" ? "runs" : e.approved ? "approved" : "not approved",
      describeHook(e.definition),
      style.dim(e.origin)
    ])
    yield* Console.log(table(["HOOK", "STATUS", "RUNS", "FROM"], rows, style).join("\n"))
    if (entries.some((e) => !e.approved)) {
      yield* Console.log("\nA hook a project brings runs only once you approved it: `logbook hooks approve <hook>`.")
    }
  })
).pipe(
  Command.withDescription(
    "List the command hooks of your config and of the project (logbook.json, .claude/settings.json): what each " +
      "runs, whether it runs (a project's only once approved) and where it came from."
  )
)

const hooksApprove = Command.make(
  "approve",
  { hook: sourceArg, cwd },
  Effect.fn("cli.hooks.approve")(function* ({ hook, cwd }) {
    const dir = yield* resolveCwd(cwd)
    const { config, entries } = yield* entriesOf(dir)
    const entry = entries.find((e) => e.definition.source === hook)
    if (entry === undefined) {
      const known = entries.map((e) => e.definition.source)
      return yield* CliError.usage(
        `no hook "${hook}" for ${dir}` + (known.length === 0 ? "" : ` (hooks: ${known.join(", ")})`)
      )
    }
    if (entry.scope === "user") {
      yield* Console.log(`Hook ${hook} is your own (${entry.origin}): it needs no approval.`)
      return
    }
    const file = yield* approveHook(config, dir, entry).pipe(
      Effect.catchAll((error) => CliError.failed(`could not record the approval: ${error.message}`))
    )
    yield* Console.log(
      `Approved hook ${hook} of ${entry.origin} for ${dir}, as it is now: ${describeHook(entry.definition)}\n` +
        `(recorded in ${file}; if the hook changes, it must be approved again)`
    )
  })
).pipe(
  Command.withDescription(
    "Let a command hook a project brings (logbook.json, .claude/settings.json) run in this workspace: the hook " +
      "as it is now is approved; a changed one is not.\nExample: logbook hooks approve 'hook:PreToolUse[0]'"
  )
)

export const hooks = Command.make("hooks", {}, () =>
  Console.log("Usage: logbook hooks list | approve <hook>  (see `logbook hooks --help`)")
).pipe(
  Command.withDescription(
    "The command hooks run on tool calls, messages and turns: list them, approve one a project brings. See docs/hooks.md."
  ),
  Command.withSubcommands([hooksList, hooksApprove])
)
