/**
 * `logbook run [message..]`: one prompt through the agent, to the end of its turn.
 *
 * The message comes from the arguments, with piped stdin as context, else from stdin
 * (`runInput.ts`). Output: stdout is the answer, stderr everything else (`runWriter.ts`). A new
 * session is created in `--cwd` (default: the current directory) unless `--session <id>` or
 * `--continue` (the latest session of that directory) names one; opening an existing session first
 * repairs what a crashed run left open. See docs/run.md. Exit codes: 0 the model finished, 1 the
 * turn failed (a model error after retries, `--max-steps` reached, the session held by another
 * process), 2 usage or config error, 130 interrupted (Ctrl-C: the model request is aborted, running
 * commands are killed, their parts end `interrupted`, and `--continue` resumes).
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Clock, Console, Effect, Either, Fiber, FiberRef, HashSet, Layer, Logger, Option } from "effect"
import type { ConfigInput } from "../config/Config.js"
import { expandCommand, matchCommand, nearMissCommand } from "../config/CustomCommands.js"
import type { EventDecodeError } from "../domain/Events.js"
import type { CallId, SessionId } from "../domain/Ids.js"
import type { ToolPart } from "../domain/Message.js"
import {
  attachResource,
  McpServers,
  parsePromptCommand,
  parseResourceCommand,
  promptMessage
} from "../mcp/McpServers.js"
import { parseReasoning } from "../model/Reasoning.js"
import { Sessions, type TurnOutcome } from "../session/Sessions.js"
import type { EventStoreError } from "../store/Errors.js"
import { EventStore } from "../store/EventStore.js"
import { openPull } from "../stream/internal/pull.js"
import { Approver } from "../tools/Approver.js"
import { findResumed, setupAgent } from "./agentSetup.js"
import { type ApprovalDesk, canPrompt, makeApprovalDesk, nodeTerminal } from "./approvalPrompt.js"
import { customCommandsOf } from "./customCommands.js"
import { dbOption } from "./db.js"
import { CliError, cliLogger, cliLogLine, ExitCode } from "./errors.js"
import { askHookApproval } from "./hookApproval.js"
import { warnIfDamaged } from "./integrity.js"
import { askMcpApproval, askPluginApproval } from "./mcpApproval.js"
import { cwdOption, formatOption, integerOption, resolveCwd } from "./options.js"
import { type Style, streamStyle } from "./render.js"
import { readMessage } from "./runInput.js"
import { describeInput, doneLine, makeAnswer, makeTextRenderer, usageSummary } from "./runOutput.js"
import { makeEventShower } from "./runShow.js"
import { makeRunWriter } from "./runWriter.js"
import { interruptReason } from "./signals.js"

/** (moved to runInput.ts; still exported here for the commands that take it from run) */
export { unknownOption } from "./runInput.js"

const messageArgs = Args.text({ name: "message" }).pipe(
  Args.repeated,
  Args.withDescription(
    "What to ask the agent (the words are joined with spaces). Piped stdin is sent with it as context " +
      '(git diff | logbook run "review this"); with no words, stdin is the message. At most 1 MiB of stdin.'
  )
)

export const modelOption = Options.text("model").pipe(
  Options.withAlias("m"),
  Options.optional,
  Options.withPseudoName("provider/model"),
  Options.withDescription(
    'The model to use, e.g. "openai/gpt-4o" or "ollama/qwen3:8b". Default: the model a resumed session is on, ' +
      "else the config's model. On a resumed session it switches the session's model (recorded in its log)."
  )
)
export const sessionOption = Options.text("session").pipe(
  Options.withAlias("s"),
  Options.optional,
  Options.withPseudoName("id"),
  Options.withDescription("Continue this session (an id or a unique prefix) instead of starting a new one.")
)
export const continueOption = Options.boolean("continue").pipe(
  Options.withAlias("c"),
  Options.withDescription("Continue the latest session of the working directory.")
)
const maxStepsOption = integerOption("max-steps").pipe(
  Options.optional,
  Options.withPseudoName("n"),
  Options.withDescription("The most model steps in this turn (default: the config's maxSteps, 50).")
)
export const reasoningOption = Options.text("reasoning").pipe(
  Options.optional,
  Options.withPseudoName("off|minimal|low|medium|high|<tokens>"),
  Options.withDescription(
    "Thinking for this run: off, an effort, or a token budget (1024 or more); mapped to the provider's option " +
      "(default: the model's reasoning in the config, else the provider's default)."
  )
)
export const yesOption = Options.boolean("yes").pipe(
  Options.withAlias("y"),
  Options.withDescription(
    "Approve every tool call the permission rules ask about, without asking. Default: on a terminal you are " +
      "asked (once / always / reject); elsewhere (stdin or stderr not a terminal) such calls are denied. " +
      "Calls the rules deny stay denied."
  )
)
const workspaceOption = cwdOption("The workspace directory (default: the current directory).")
const runFormat = formatOption(
  ["text", "json"],
  "text: the answer as it streams, tool calls, retries and a usage line; json: one JSON line per committed event, then a final done line."
)

const write = (text: string) =>
  Effect.sync(() => {
    if (text.length > 0) process.stdout.write(text)
  })

/** A word as a POSIX shell reads it: as it is when it is safe, else in single quotes. */
const shellWord = (word: string): string => (/^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`)

/** How to go on with the session: `logbook run -s <id> "…"` (with the `--db` this run was given). */
export const continueCommand = (sessionId: string, db: string | undefined): string =>
  `logbook run -s ${sessionId}${db === undefined ? "" : ` --db ${shellWord(db)}`} "…"`

/**
 * The session line text mode ends with, the one place it names the session (once, so a script can
 * take it from stderr): `continue this session: logbook run -s 01J… "…"`.
 */
export const sessionLine = (sessionId: string, db: string | undefined): string =>
  `continue this session: ${continueCommand(sessionId, db)}`

export const titleOf = (message: string): string => {
  const first = message.split("\n")[0]!.trim()
  return first.length > 60 ? `${first.slice(0, 59)}…` : first
}

const runConfig = {
  message: messageArgs,
  model: modelOption,
  session: sessionOption,
  continue: continueOption,
  format: runFormat,
  maxSteps: maxStepsOption,
  reasoning: reasoningOption,
  yes: yesOption,
  cwd: workspaceOption,
  db: dbOption
}
type RunArgs = Command.Command.ParseConfig<typeof runConfig>

/** The run's arguments checked and read: the workspace, `--reasoning`, the message, the flags over the config. */
const readRunArgs = (args: RunArgs) =>
  Effect.gen(function* () {
    const cwd = yield* resolveCwd(args.cwd)
    if (Option.isSome(args.session) && args.continue) {
      return yield* CliError.usage("--session and --continue cannot be used together: --session names the session")
    }
    if (Option.isSome(args.maxSteps) && args.maxSteps.value < 1) {
      return yield* CliError.usage(`--max-steps must be 1 or more, got ${args.maxSteps.value}`)
    }
    const reasoning = Option.isSome(args.reasoning)
      ? yield* Either.match(parseReasoning(args.reasoning.value), {
          onLeft: (why) => CliError.usage(`--reasoning: ${why}`),
          onRight: (setting) => Effect.succeed(setting)
        })
      : undefined
    const typed = yield* readMessage(args.message, { argv: process.argv, stdin: process.stdin })
    const custom = yield* customCommandMessage(cwd, typed)
    const model = Option.isSome(args.model) ? args.model.value : custom?.model
    const flags: ConfigInput = {
      ...(model !== undefined ? { model } : {}),
      ...(Option.isSome(args.maxSteps) ? { maxSteps: args.maxSteps.value } : {})
    }
    return { cwd, reasoning, message: custom?.message ?? typed, title: typed, flags }
  })

/**
 * A message that starts with a custom command's `/name`: the prompt it expands to, and the
 * command's model (a user's file only). A `/word` near a command's name is a usage error (a typo
 * must not go to the model as a message); any other message is left alone (it may start with a path).
 */
const customCommandMessage = (cwd: string, typed: string) =>
  Effect.gen(function* () {
    if (!typed.trimStart().startsWith("/")) return undefined
    // an MCP server's prompt or resource: made into the message once the servers run (`mcpMessage`)
    if (parsePromptCommand(typed) !== undefined || parseResourceCommand(typed) !== undefined) return undefined
    // `//…` is a message that starts with a /, as at the interactive prompt
    if (typed.trimStart().startsWith("//")) return { message: typed.trimStart().slice(1), model: undefined }
    const loaded = yield* customCommandsOf(cwd)
    for (const problem of loaded.problems) yield* Console.error(`logbook: command file skipped: ${problem}`)
    const matched = matchCommand(loaded.commands, typed)
    if (matched !== undefined) {
      return { message: expandCommand(matched.command, matched.args), model: matched.command.model }
    }
    const near = nearMissCommand(loaded.commands, typed)
    if (near !== undefined) {
      return yield* CliError.usage(
        `unknown command /${near.word}: did you mean /${near.name}? (a message that starts with a / can be sent as //…)`
      )
    }
    return undefined
  })

/**
 * `/mcp__<server>__<prompt> args` (the server's prompt filled in) and `/mcp-resource <server> <uri>
 * [message]` (the message with the resource's text): the message they make, once the server has
 * started (docs/mcp.md). One that cannot be made is a usage error: nothing is sent. Any other
 * message is left as it is.
 */
const mcpMessage = (typed: string) =>
  Effect.gen(function* () {
    const prompt = parsePromptCommand(typed)
    const resource = parseResourceCommand(typed)
    if (prompt === undefined && resource === undefined) return typed
    const servers = yield* McpServers
    const made =
      prompt !== undefined
        ? promptMessage(servers, prompt)
        : attachResource(servers, resource!.server, resource!.uri).pipe(
            Effect.map((text) => (resource!.message === "" ? text : `${resource!.message}\n\n${text}`))
          )
    return yield* made.pipe(Effect.mapError((why) => CliError.usage(why)))
  })

/**
 * Who answers the calls the rules ask about: --yes, the user at the terminal (the desk), or nobody
 * (denied); and, on a terminal, who is asked whether a project's MCP server the user has not
 * approved may start (not --yes).
 */
const runApprover = (yes: boolean) =>
  Effect.gen(function* () {
    const onTerminal = canPrompt(process.stdin, process.stderr)
    // raw mode turns Ctrl-C into a key: make it the signal it would have been
    const onCtrlC = Effect.sync(() => void process.kill(process.pid, "SIGINT"))
    const desk =
      !yes && onTerminal
        ? makeApprovalDesk({
            terminal: nodeTerminal(process.stdin, process.stderr),
            style: yield* streamStyle(process.stderr),
            onCtrlC
          })
        : undefined
    const style = yield* streamStyle(process.stderr)
    const approveMcp = onTerminal
      ? askMcpApproval(nodeTerminal(process.stdin, process.stderr), style, onCtrlC)
      : undefined
    const approvePlugin = onTerminal
      ? askPluginApproval(nodeTerminal(process.stdin, process.stderr), style, onCtrlC)
      : undefined
    const approveHook = onTerminal
      ? askHookApproval(nodeTerminal(process.stdin, process.stderr), style, onCtrlC)
      : undefined
    const approver = yes
      ? Approver.autoAllow
      : desk !== undefined
        ? Layer.succeed(Approver, desk.approver)
        : Approver.autoDeny
    return { desk, approver, approveMcp, approvePlugin, approveHook }
  })

type RunWriter = Effect.Effect.Success<ReturnType<typeof makeRunWriter>>

/** For the scope: the kernel's log lines (warnings) go above the live rows, not into them. */
const logAboveLiveRows = (writer: RunWriter) =>
  Effect.locallyScopedWith(FiberRef.currentLoggers, (loggers) =>
    HashSet.has(loggers, cliLogger)
      ? HashSet.add(
          HashSet.remove(loggers, cliLogger),
          Logger.make(({ date, logLevel, message }) => writer.unsafeLine(cliLogLine(logLevel, message), date.getTime()))
        )
      : loggers
  )

/**
 * The output of the run, in a fiber of the scope: every event of the session from `from` on (text
 * or JSON lines), the approval prompt after everything written before its ask; the answer collected.
 */
const followOutput = (options: {
  readonly sessionId: SessionId
  readonly from: number
  readonly json: boolean
  readonly writer: RunWriter
  readonly style: Style
  readonly maxAttempts: number
  /** the calls a crashed run left: their crash-repair lines name the tool, not just the call id */
  readonly known: ReadonlyMap<CallId, ToolPart>
  readonly desk: ApprovalDesk | undefined
}) =>
  Effect.gen(function* () {
    const { json, writer, known, desk } = options
    const store = yield* EventStore
    const renderer = makeTextRenderer(options.style, {
      maxAttempts: options.maxAttempts,
      labelOf: (callId) => {
        const part = known.get(callId as CallId)
        return part === undefined
          ? undefined
          : `${part.tool} ${describeInput(part.tool, "input" in part.state ? part.state.input : {})}`
      }
    })
    const answer = makeAnswer()
    // the batches of events the log's pull gives, shown in one pass each up to the turn's last
    const shower = makeEventShower({
      shownBefore: options.from - 1,
      showOne: (event, now) => {
        answer.see(event)
        if (json) process.stdout.write(`${JSON.stringify(event)}\n`)
        else writer.unsafeShow(renderer.render(event), now)
      },
      // the prompt, after everything written before the ask; later output waits for the answer
      waitAfter: (event) =>
        event.type === "permission.asked" && desk !== undefined
          ? writer.hold(desk.serve(event.payload.permissionId))
          : undefined
    })
    const follower = yield* Effect.scoped(
      Effect.flatMap(openPull(store.follow(options.sessionId, options.from)), (pull) => {
        const next = pull.pipe(
          Effect.flatMap(shower.show),
          // the log's follow does not end; if it did, so would the output
          Effect.catchAll(Option.match({ onNone: () => Effect.succeed(true), onSome: Effect.fail }))
        )
        const loop: Effect.Effect<void, EventStoreError | EventDecodeError> = Effect.flatMap(next, (done) =>
          done ? Effect.void : loop
        )
        return loop
      })
    ).pipe(Effect.forkScoped)
    /** the turn is over: the output up to its last event, then the follower stopped */
    const finish = Effect.gen(function* () {
      // no ask can still be answered
      if (desk !== undefined) yield* desk.close
      if (shower.finish(yield* store.lastSeq(options.sessionId))) yield* Fiber.interrupt(follower)
      else yield* Fiber.join(follower)
    })
    return { answer, finish }
  })

/** How the run failed, from how its turn ended (nothing for `stop`). */
const turnFailure = (
  outcome: TurnOutcome | undefined,
  json: boolean,
  sessionId: SessionId,
  db: string | undefined
): Effect.Effect<void, CliError> => {
  if (outcome === undefined) return CliError.failed("the turn ended without an outcome")
  if (outcome.reason === "stop") return Effect.void
  if (outcome.reason === "max-steps") {
    const stopped = `stopped after ${outcome.steps} step${outcome.steps === 1 ? "" : "s"} (maxSteps)`
    return CliError.failed(
      json
        ? `${stopped}; to go on: ${continueCommand(sessionId, db)}`
        : `${stopped}; continue the session to go on (the line above says how)`
    )
  }
  return CliError.failed(outcome.message ?? `the turn ended: ${outcome.reason}`)
}

export const run = Command.make(
  "run",
  runConfig,
  Effect.fn("cli.run")(function* (args) {
    const { cwd, reasoning, message, title: typed, flags } = yield* readRunArgs(args)
    const { desk, approver, approveMcp, approvePlugin, approveHook } = yield* runApprover(args.yes)

    // a resumed session goes on with the model it is on, unless --model switches it
    const resumed = yield* findResumed({
      session: args.session,
      continue: args.continue,
      cwd,
      db: args.db,
      noSession: `no session in ${cwd} to continue; run without --continue to start one`
    })
    const {
      settings,
      secrets,
      layer: agent
    } = yield* setupAgent({
      cwd,
      flags,
      sessionModel: resumed?.model ?? undefined,
      reasoning,
      db: args.db,
      approver,
      approveMcp,
      approvePlugin,
      approveHook
    })

    const program = Effect.gen(function* () {
      const store = yield* EventStore
      const sessions = yield* Sessions
      const startedAt = yield* Clock.currentTimeMillis

      // an MCP prompt or resource: made before any session is created or written to
      const sent = yield* mcpMessage(message)
      const existing: SessionId | undefined = resumed?.id
      // resuming a session whose log is damaged: said on stderr before the turn (it goes on)
      if (existing !== undefined) yield* warnIfDamaged(existing)
      const from = existing === undefined ? 1 : (yield* store.lastSeq(existing)) + 1
      // the title is cut from the message: masked first, so the cut cannot leave part of a key
      const title = titleOf(secrets.redactText(typed))
      const sessionId = existing === undefined ? yield* sessions.create({ cwd, title }) : existing
      const known = existing === undefined ? new Map<CallId, ToolPart>() : (yield* sessions.open(existing)).toolParts

      // the output: every event from `from` on, until the one the turn ended with
      const json = args.format === "json"
      const db = Option.getOrUndefined(args.db)
      const writer = yield* makeRunWriter({ stdout: process.stdout, stderr: process.stderr })
      // however the run ends, the live rows are erased and the text's last line ended before any
      // last word on stderr (the error sentence)
      yield* Effect.addFinalizer(() => writer.end)
      yield* logAboveLiveRows(writer)
      const style = yield* streamStyle(process.stderr)
      const output = yield* followOutput({
        sessionId,
        from,
        json,
        writer,
        style,
        maxAttempts: settings.retry.maxAttempts,
        known,
        desk
      })

      const report = (outcome: TurnOutcome | undefined, exitCode: number) =>
        Effect.gen(function* () {
          const elapsedMs = (yield* Clock.currentTimeMillis) - startedAt
          yield* writer.end
          if (json) {
            return yield* write(
              `${doneLine({ sessionId, outcome, text: output.answer.text(), exitCode, elapsedMs })}\n`
            )
          }
          // stdout holds the answer, or nothing: what a turn that did not finish wrote last is not one
          if (outcome?.reason === "stop") yield* writer.answer(output.answer.text())
          if (outcome !== undefined) {
            yield* writer.line(style.dim(usageSummary(outcome.usage, outcome.steps, elapsedMs, outcome.abortedSteps)))
          }
          // the one place text mode names the session
          yield* writer.line(sessionLine(sessionId, db))
        })

      // Ctrl-C from here on (the message being sent included) interrupts the turn as the user's
      const outcome = yield* sessions.send(sessionId, sent).pipe(
        Effect.zipRight(sessions.wait(sessionId)),
        Effect.map(Option.getOrUndefined),
        Effect.onInterrupt(() =>
          Effect.gen(function* () {
            // stopping a command's process group can take a moment (TERM, then KILL after a grace)
            yield* writer.line("logbook: interrupting: stopping the model and any running commands…")
            // the signal's reason: Ctrl-C `user`, SIGTERM `shutdown`, SIGHUP `hangup`
            yield* sessions.interrupt(sessionId, interruptReason()).pipe(Effect.ignore)
            yield* output.finish.pipe(Effect.ignore)
            const last = yield* sessions.wait(sessionId).pipe(
              Effect.map(Option.getOrUndefined),
              Effect.orElseSucceed(() => undefined)
            )
            yield* report(last, ExitCode.interrupted)
            // text mode said how to go on in its session line
            if (json) yield* writer.line(`logbook: interrupted; resume with: ${continueCommand(sessionId, db)}`)
          })
        )
      )
      yield* output.finish
      yield* report(outcome, outcome?.reason === "stop" ? ExitCode.ok : ExitCode.failed)
      return yield* turnFailure(outcome, json, sessionId, db)
    })

    return yield* Effect.scoped(program).pipe(Effect.provide(agent))
  })
).pipe(
  Command.withDescription(
    "Send one message to the agent and run it until the model is done: it reads files, runs commands and " +
      "answers, and every step is written to the event log. stdout is the answer, stderr everything else " +
      "(tool calls, retries, the usage line, how to continue the session)."
  )
)
