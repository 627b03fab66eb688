/**
 * `logbook replay <session> [--at <seq> | --step <n>]`: the exact request the model received at that
 * point — system prompt, tool schemas, messages and tool results — rebuilt from the log, with the
 * proof that it is the one sent (its digest against the one its step recorded). `sessions show
 * --at` is the state view; this is what the model saw.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Console, Effect, Option } from "effect"
import type { ModelMessage } from "../model/Model.js"
import { sanitize } from "../present/sanitize.js"
import { formatLocalTimestamp } from "../present/text.js"
import { type ReplayedRequest, ReplayUnavailable, replayRequest } from "../session/Replay.js"
import { dbOption, existingStore } from "./db.js"
import { CliError } from "./errors.js"
import { warnIfDamaged } from "./integrity.js"
import { formatOption, integerOption, seqOption, sessionArg } from "./options.js"
import { type Style, stdoutStyle } from "./render.js"
import { resolveSession } from "./resolveSession.js"

const atOption = seqOption("at", "The request of the step running at this seq (the last one started at or before it).")
const stepOption = integerOption("step").pipe(
  Options.optional,
  Options.withPseudoName("n"),
  Options.withDescription("The n-th model request of the session (1 is the first; retried attempts count).")
)
const replayFormat = formatOption(
  ["text", "json"],
  "text: the request for people; json: {system, tools, messages, cacheKey} as the kernel built it, with where " +
    "it is and the proof."
)

const proofLine = (r: ReplayedRequest, style: Style): string => {
  switch (r.proof._tag) {
    case "same":
      return style.green(`✓ rebuilt byte for byte: its digest is the one the step recorded (${r.proof.digest})`)
    case "different":
      return style.red(
        `✗ the rebuilt request is not the one sent: digest ${r.proof.digest}, the step recorded ${r.proof.recorded}`
      )
    case "unknown":
      return style.yellow(`? not proved: ${r.proof.why}`)
  }
}

const messageText = (m: ModelMessage, style: Style): Array<string> => {
  switch (m.role) {
    case "user":
      return [
        style.bold("[user]"),
        ...sanitize(m.content)
          .split("\n")
          .map((l) => `  ${l}`)
      ]
    case "assistant":
      return [
        style.bold("[assistant]"),
        ...m.parts.flatMap((part) =>
          part.type === "tool-call"
            ? [`  → ${part.tool} ${part.callId} ${sanitize(JSON.stringify(part.input))}`]
            : part.type === "reasoning"
              ? sanitize(part.text)
                  .split("\n")
                  .map((l) => `  ${style.dim(`(thinking) ${l}`)}`)
              : sanitize(part.text)
                  .split("\n")
                  .map((l) => `  ${l}`)
        )
      ]
    case "tool":
      return m.results.flatMap((result) => [
        style.bold(`[tool ${result.tool} ${result.callId}${result.isError ? " error" : ""}]`),
        ...sanitize(result.output)
          .split("\n")
          .map((l) => `  ${l}`)
      ])
  }
}

const textOf = (r: ReplayedRequest, style: Style): string => {
  const head = [
    `request ${r.index} of ${r.count}`,
    `session ${r.sessionId}`,
    `seq ${r.seq}`,
    `step ${r.step} of message ${r.messageId}`,
    formatLocalTimestamp(r.at),
    r.model === undefined ? undefined : `model ${r.model}`,
    r.promptVersion === undefined ? undefined : `prompt ${r.promptVersion}`
  ].filter((part) => part !== undefined)
  const out = [style.bold(head.join(" · ")), proofLine(r, style), ""]
  out.push(style.cyan("── system ──"))
  out.push(r.system === undefined ? style.yellow("(not in the log)") : sanitize(r.system ?? "(none)"))
  out.push("", style.cyan(`── tools (${r.tools?.length ?? "not in the log"}) ──`))
  for (const tool of r.tools ?? []) out.push(`${tool.name}: ${sanitize(tool.description.split("\n")[0] ?? "")}`)
  out.push("", style.cyan(`── messages (${r.messages.length}) ──`))
  for (const m of r.messages) out.push(...messageText(m, style))
  return out.join("\n")
}

const jsonOf = (r: ReplayedRequest): string =>
  JSON.stringify(
    {
      sessionId: r.sessionId,
      index: r.index,
      count: r.count,
      seq: r.seq,
      messageId: r.messageId,
      step: r.step,
      at: r.at,
      model: r.model ?? null,
      promptVersion: r.promptVersion ?? null,
      proof: r.proof,
      request: { system: r.system ?? null, tools: r.tools ?? null, messages: r.messages, cacheKey: r.cacheKey }
    },
    null,
    2
  )

export const replay = Command.make(
  "replay",
  { session: sessionArg, at: atOption, step: stepOption, format: replayFormat, db: dbOption },
  Effect.fn("cli.replay")(
    function* ({ at, format, session, step }) {
      if (Option.isSome(at) && Option.isSome(step))
        return yield* CliError.usage("give --at or --step, not both: both say which request")
      if (Option.isSome(at) && at.value < 1) return yield* CliError.usage("--at must be 1 or more (seqs start at 1)")
      const summary = yield* resolveSession(session)
      yield* warnIfDamaged(summary.id)
      const point = Option.isSome(at)
        ? { _tag: "at" as const, seq: at.value }
        : Option.isSome(step)
          ? { _tag: "index" as const, index: step.value }
          : { _tag: "last" as const }
      const request = yield* replayRequest(summary.id, point).pipe(
        Effect.catchIf(
          (error): error is ReplayUnavailable => error instanceof ReplayUnavailable,
          (error) => CliError.usage(error.message)
        )
      )
      const style = yield* stdoutStyle
      yield* Console.log(format === "json" ? jsonOf(request) : textOf(request, style))
      if (request.proof._tag === "different")
        return yield* CliError.failed(
          `the request rebuilt from the log differs from the one request ${request.index} sent (its digest); ` +
            "the history code changed since, or the log was altered"
        )
    },
    (effect, { db }) => Effect.provide(effect, existingStore(db))
  )
).pipe(
  Command.withDescription(
    "Print the exact request the model received at a point of a session (system prompt, tool schemas, messages, " +
      "tool results), rebuilt from the log, and prove it is the one sent."
  )
)
