/**
 * `logbook rerun <session>`: drive the kernel again over a recorded session — the model's responses
 * served from the log, the tools live in a scratch copy of the workspace as the session started —
 * and check the new log against the old one, event for event (docs/rerun.md). With `--from-step`,
 * `--model` or `--system-prompt`: a fork that goes on live from that request, as a new session.
 *
 * Exit codes: 0 the same (or the fork ran), 1 a divergence, a point a re-run cannot pass, a call it
 * refused (a command where no sandbox can run, without --unconfined-commands) or a fork whose live
 * part failed, 2 usage (unknown session, no record of its workspace, a bad flag).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as nodePath from "node:path"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Console, Context, Effect, Layer, Option } from "effect"
import type { Envelope } from "../domain/Events.js"
import { layerAiSdk } from "../model/AiSdk.js"
import { Model } from "../model/Model.js"
import { sanitize } from "../present/sanitize.js"
import {
  type RerunFork,
  type RerunReport,
  RerunUnavailable,
  rerun,
  scratchDirectoryFor,
  type ToolResultText
} from "../session/Rerun.js"
import { EventStore } from "../store/EventStore.js"
import { Approver } from "../tools/Approver.js"
import { setupAgent } from "./agentSetup.js"
import { dbOption, resolveDbPath } from "./db.js"
import { CliError } from "./errors.js"
import { formatOption, integerOption, sessionArg } from "./options.js"
import { type Style, stdoutStyle } from "./render.js"
import { resolveSession } from "./resolveSession.js"
import { modelOption, yesOption } from "./run.js"

const fromStepOption = integerOption("from-step").pipe(
  Options.optional,
  Options.withPseudoName("n"),
  Options.withDescription(
    "Fork: re-run up to the n-th model request (as `logbook replay --step` counts), then go on live from it, as a " +
      "new session."
  )
)
const systemPromptOption = Options.text("system-prompt").pipe(
  Options.optional,
  Options.withPseudoName("file"),
  Options.withDescription("Fork: the system prompt (a file) the live requests are sent with.")
)
const workspaceOption = Options.text("workspace").pipe(
  Options.optional,
  Options.withPseudoName("dir"),
  Options.withDescription(
    "The directory to re-run in (missing or empty); the session's starting workspace is restored into it. " +
      "Default: a new temporary directory, removed after a re-run that is not saved."
  )
)
const saveOption = Options.boolean("save").pipe(
  Options.withDescription("Keep the re-run as a session of the database (a fork always is).")
)
const allowLiveToolsOption = Options.boolean("allow-live-tools").pipe(
  Options.withDescription(
    "Let the tools of an imported session (from a session file) run in the re-run's scratch directory. Without " +
      "it only the tools that change nothing run (read, list, glob, grep, todo); the others are refused. No re-run " +
      "uses a path outside its scratch directory."
  )
)
const unconfinedCommandsOption = Options.boolean("unconfined-commands").pipe(
  Options.withDescription(
    "Where no sandbox can run here (no bubblewrap, or it cannot make namespaces), run the re-run's commands " +
      "without one instead of refusing them. Risky: they can then read and change everything you can, outside " +
      "the re-run's directory too (a command that wrote outside in the original writes there again). Where the " +
      "sandbox works, a re-run's commands always run in it."
  )
)
const rerunFormat = formatOption(["text", "json"], "text: the verdict for people; json: the whole report.")

const MAX_SHOWN = 2_000

const resultText = (label: string, result: ToolResultText | undefined, style: Style): Array<string> => {
  if (result === undefined) return []
  const output = sanitize(result.output)
  const shown = output.length > MAX_SHOWN ? `${output.slice(0, MAX_SHOWN)}… (${output.length} characters)` : output
  return [
    style.bold(`${label}: ${result.tool} ${result.callId} ${result.ok ? "returned" : "failed"}:`),
    ...shown.split("\n").map((line) => `  ${line}`)
  ]
}

const eventLine = (env: Envelope | undefined): string =>
  env === undefined ? "(nothing)" : sanitize(`${env.type} ${JSON.stringify(env.payload)}`).slice(0, 400)

/** How the re-run's commands ran, one line. */
const commandsLine = (commands: RerunReport["commands"], style: Style): string => {
  switch (commands._tag) {
    case "sandboxed":
      return style.dim(
        `  commands ran in the sandbox: only the re-run's directory and a private /tmp writable, network ${commands.network ? "on" : "off"}`
      )
    case "refused":
      return style.yellow(
        `  commands refused: no sandbox here (${sanitize(commands.reason)}); --unconfined-commands runs them without one`
      )
    case "unconfined":
      return style.yellow(
        `  commands ran without a sandbox (--unconfined-commands; ${sanitize(commands.reason)}): they could change anything you can`
      )
  }
}

const textOf = (report: RerunReport, style: Style, saved: boolean): string => {
  const out: Array<string> = []
  const requests =
    report.live > 0
      ? `${report.served} model responses from the log, ${report.live} from the live model`
      : `${report.served} model responses from the log, no request sent to a model`
  out.push(`re-ran session ${report.original} in ${report.workspace} (${requests})`)
  if (report.source === "directory")
    out.push(
      style.yellow(
        "  the session took no snapshot of its workspace (it ran no command): the re-run started from its directory " +
          "as it is now, with the session's own changes undone"
      )
    )
  if (report.commands.calls > 0) out.push(commandsLine(report.commands, style))
  if (report.mcpServed > 0)
    out.push(
      `  ${report.mcpServed === 1 ? "1 MCP result" : `${report.mcpServed} MCP results`} served from the log (no MCP server started)`
    )
  for (const file of report.missing) out.push(style.yellow(`  not restored: ${file.path}: ${file.reason}`))
  const outcome = report.outcome
  switch (outcome._tag) {
    case "match":
      out.push(
        style.green(
          `✓ the same: all ${report.compared} events of the original written again (ids, times and costs aside)`
        )
      )
      if (outcome.note !== undefined) out.push(style.dim(`  ${outcome.note}`))
      break
    case "divergence": {
      const d = outcome.divergence
      const at = d.expected === undefined ? "after the original's end" : `at seq ${d.expected.seq}`
      out.push(
        style.red(`✗ diverged ${at} (${report.matched} of ${report.compared} events matched): ${sanitize(d.message)}`)
      )
      out.push(`  expected: ${eventLine(d.expected)}`)
      out.push(`  re-run:   ${eventLine(d.actual)}`)
      out.push(...resultText("then", d.then, style), ...resultText("now", d.now, style))
      break
    }
    case "stopped":
      out.push(
        style.yellow(
          `! stopped at seq ${outcome.seq} (${report.matched} of ${report.compared} events matched): ${sanitize(outcome.why)}`
        )
      )
      break
    case "refused":
      out.push(
        style.red(
          `✗ refused a call at seq ${outcome.seq} (${report.matched} of ${report.compared} events matched): ` +
            "the re-run did not make it, so it cannot go on"
        )
      )
      break
    case "forked":
      if (outcome.failed !== undefined)
        out.push(
          style.red(
            `✗ the same up to request ${outcome.fromRequest} (seq ${outcome.seq}): ${report.matched} events; ` +
              `from there the live part failed: ${sanitize(outcome.failed)}`
          )
        )
      else
        out.push(
          style.green(
            `✓ the same up to request ${outcome.fromRequest} (seq ${outcome.seq}): ${report.matched} events; from there it went on live`
          )
        )
      break
  }
  for (const call of report.refused)
    out.push(style.yellow(`  refused: ${call.tool} ${sanitize(call.subject).slice(0, 200)}: ${sanitize(call.why)}`))
  if (saved && report.rerun !== undefined) out.push(`the re-run is session ${report.rerun}`)
  return out.join("\n")
}

export const rerunCommand = Command.make(
  "rerun",
  {
    session: sessionArg,
    fromStep: fromStepOption,
    model: modelOption,
    systemPrompt: systemPromptOption,
    workspace: workspaceOption,
    save: saveOption,
    allowLiveTools: allowLiveToolsOption,
    unconfinedCommands: unconfinedCommandsOption,
    yes: yesOption,
    format: rerunFormat,
    db: dbOption
  },
  Effect.fn("cli.rerun")(function* (args) {
    if (Option.isSome(args.fromStep) && args.fromStep.value < 1)
      return yield* CliError.usage("--from-step must be 1 or more (the first model request is 1)")
    const filename = yield* resolveDbPath(args.db)
    if (!fs.existsSync(filename)) return yield* CliError.usage(`no database at ${filename}`)
    const forked = Option.isSome(args.fromStep) || Option.isSome(args.model) || Option.isSome(args.systemPrompt)
    const save = args.save || forked
    const promptFile = Option.getOrUndefined(args.systemPrompt)
    const system =
      promptFile === undefined
        ? undefined
        : yield* Effect.try({
            try: () => fs.readFileSync(promptFile, "utf8"),
            catch: (error) => CliError.usage(`cannot read --system-prompt ${promptFile}: ${String(error)}`)
          })
    const store = EventStore.layerSqlite({ filename, readonly: !save })
    return yield* Effect.gen(function* () {
      const summary = yield* resolveSession(args.session)
      const cwd = summary.cwd !== null && fs.existsSync(summary.cwd) ? summary.cwd : process.cwd()
      const model = Option.getOrUndefined(args.model) ?? summary.model ?? undefined
      const setup = yield* setupAgent({
        cwd,
        flags: model === undefined ? {} : { model },
        db: Option.some(filename),
        approver: Approver.autoDeny,
        // the re-run's commands run in its own sandbox; the report says how
        sandboxNotice: false
      })
      const given = Option.getOrUndefined(args.workspace)
      // by default a new directory as long as the original's path, so what names it keeps its size
      const workspace =
        given === undefined ? scratchDirectoryFor(summary.cwd ?? cwd, os.tmpdir()) : nodePath.resolve(given)
      /** the directory made for this re-run: removed unless the re-run is kept in the database */
      const made = given === undefined ? nodePath.dirname(workspace) : undefined
      let kept = false
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          if (made !== undefined && !kept) fs.rmSync(made, { recursive: true, force: true })
        })
      )
      const fork: RerunFork | undefined = forked
        ? {
            fromRequest: Option.getOrElse(args.fromStep, () => 1),
            model: Context.get(yield* Layer.build(layerAiSdk(setup.modelOptions)), Model),
            system,
            approver: args.yes ? { ask: () => Effect.succeed("once") } : { ask: () => Effect.succeed("reject") }
          }
        : undefined
      const report = yield* rerun({
        sessionId: summary.id,
        workspace,
        agent: setup.agentOptions,
        secrets: setup.secrets,
        target: save ? EventStore.layerSqlite({ filename }) : undefined,
        allowLiveTools: args.allowLiveTools,
        sandbox: setup.sandbox,
        unconfinedCommands: args.unconfinedCommands,
        fork
      }).pipe(
        Effect.catchIf(
          (error): error is RerunUnavailable => error instanceof RerunUnavailable,
          (error) => CliError.usage(error.message)
        )
      )
      kept = save
      const style = yield* stdoutStyle
      yield* Console.log(args.format === "json" ? JSON.stringify(report, null, 2) : textOf(report, style, save))
      if (report.outcome._tag === "divergence")
        return yield* CliError.failed(`the re-run of session ${summary.id} diverged from the original`)
      if (report.outcome._tag === "stopped")
        return yield* CliError.failed(`the re-run of session ${summary.id} stopped before the original's end`)
      if (report.outcome._tag === "forked" && report.outcome.failed !== undefined)
        return yield* CliError.failed(`the live part of the re-run of session ${summary.id} failed`)
      if (report.refused.length > 0)
        return yield* CliError.failed(
          `the re-run of session ${summary.id} refused ${report.refused.length === 1 ? "a call" : `${report.refused.length} calls`}`
        )
    }).pipe(Effect.scoped, Effect.provide(store))
  })
).pipe(
  Command.withDescription(
    "Run a session again: the model's responses from the log, the tools live in a copy of the workspace as it " +
      "started; check that it writes the same events, or say where it diverges. --from-step/--model/--system-prompt " +
      "fork it live from a request."
  )
)
