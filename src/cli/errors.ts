/**
 * What the CLI tells the user when a command cannot do its job, and the exit code that goes with it
 * (DESIGN §9: 0 done, 1 failed, 2 usage or config error, 130 interrupted).
 *
 * Every expected failure becomes one sentence on stderr, prefixed with `logbook:`; stack traces are
 * shown only for defects, and only when `LOGBOOK_DEBUG` is set.
 */
import * as ValidationError from "@effect/cli/ValidationError"
import { isPlatformError, type PlatformError } from "@effect/platform/Error"
import {
  Cause,
  Config,
  Console,
  Effect,
  ConfigError as EffectConfigError,
  Logger,
  type LogLevel,
  Option,
  Schema
} from "effect"
import { ConfigError } from "../config/Config.js"
import { EventDecodeError } from "../domain/Events.js"
import { PromptBlocked, SessionUnavailable } from "../session/Sessions.js"
import { DatabaseError, EventStoreError } from "../store/Errors.js"
import { ProjectionError } from "../store/Projection.js"
import { SessionFileError } from "../store/SessionFile.js"

export const ExitCode = {
  ok: 0,
  failed: 1,
  usage: 2,
  interrupted: 130
} as const

/** A failure the CLI itself detects (unknown session, missing database, bad flag values). */
export class CliError extends Schema.TaggedError<CliError>()("CliError", {
  message: Schema.String,
  exitCode: Schema.Int
}) {
  /** A usage or configuration error: exit code 2. */
  static usage(message: string): CliError {
    return new CliError({ message, exitCode: ExitCode.usage })
  }
  /** The command ran and failed: exit code 1. */
  static failed(message: string): CliError {
    return new CliError({ message, exitCode: ExitCode.failed })
  }
}

/**
 * Every way a command can fail (the union of the commands' error channels, and @effect/cli's own
 * `ValidationError` for bad flags): the closed set `toExitCode` turns into a sentence and an exit
 * code. A command whose effect fails with anything else does not compile into the command tree
 * (`main.ts`'s `cli`).
 */
export type CliFailure =
  | CliError
  | ConfigError
  | EffectConfigError.ConfigError
  | SessionUnavailable
  | PromptBlocked
  | DatabaseError
  | EventStoreError
  | EventDecodeError
  | ProjectionError
  | SessionFileError
  | PlatformError
  | ValidationError.ValidationError

const databaseSentence = (error: DatabaseError): string => {
  switch (error.reason) {
    case "missing":
      return `no logbook database at ${error.file}; pass --db <file> or set LOGBOOK_DB to read another one`
    case "not-logbook":
      return `${error.file} is not a logbook database; pass --db <file> to choose another file`
    case "corrupt":
      return `${error.file} is a damaged SQLite database and cannot be read; restore it from a backup or pass --db`
    case "newer-schema":
      return `${error.file} was written by a newer version of logbook; upgrade logbook to read it`
    case "older-schema":
      return `${error.file} was written by an older version of logbook and must be upgraded by a command that writes to it (logbook run) before it can be read`
    case "read-only":
      return error.message
    case "unreadable":
      return error.message.includes(error.file) ? error.message : `cannot open ${error.file}: ${error.message}`
  }
}

/** The sentence and exit code for an expected failure (`ValidationError`: printed by @effect/cli). */
export const describeFailure = (
  error: Exclude<CliFailure, ValidationError.ValidationError>
): { readonly message: string; readonly exitCode: number } => {
  if (error instanceof CliError) return { message: error.message, exitCode: error.exitCode }
  if (error instanceof ConfigError) return { message: error.message, exitCode: ExitCode.usage }
  if (error instanceof SessionUnavailable) {
    // naming a session that does not exist (or was deleted) is a usage error; one held elsewhere is not
    const usage = error.reason === "unknown" || error.reason === "deleted"
    return { message: error.message, exitCode: usage ? ExitCode.usage : ExitCode.failed }
  }
  if (error instanceof DatabaseError) return { message: databaseSentence(error), exitCode: ExitCode.usage }
  if (error instanceof EventStoreError) {
    // a bad page found deep in the file: the same sentence (and exit code) as a damaged file's
    if (error.damagedFile !== undefined)
      return {
        message: databaseSentence(
          new DatabaseError({ file: error.damagedFile, reason: "corrupt", message: error.message })
        ),
        exitCode: ExitCode.usage
      }
    return { message: `the event store failed (${error.method}): ${error.message}`, exitCode: ExitCode.failed }
  }
  if (error instanceof EventDecodeError) {
    return {
      message: `cannot read event ${error.seq} (${error.type}) of session ${error.sessionId}: ${error.message}`,
      exitCode: ExitCode.failed
    }
  }
  if (error instanceof ProjectionError) {
    return {
      message: `cannot replay session ${error.sessionId}: event ${error.seq} (${error.type}) does not fit the state before it: ${error.message}`,
      exitCode: ExitCode.failed
    }
  }
  if (error instanceof SessionFileError) return { message: error.message, exitCode: ExitCode.failed }
  if (error instanceof PromptBlocked) return { message: error.message, exitCode: ExitCode.failed }
  if (isPlatformError(error)) return { message: error.message, exitCode: ExitCode.failed }
  // an environment variable effect's `Config` could not read (`HOME`, `XDG_DATA_HOME` …)
  if (EffectConfigError.isConfigError(error)) return { message: String(error), exitCode: ExitCode.failed }
  return absurdFailure(error)
}

/** No failure is left: the compiler checks that every member of `CliFailure` has its sentence above. */
const absurdFailure = (error: never): { readonly message: string; readonly exitCode: number } => ({
  message: String(error),
  exitCode: ExitCode.failed
})

const oneLine = (text: string): string => text.replace(/\s*\n\s*/g, " ").trim()

/**
 * Runs a CLI program and turns its outcome into an exit code: failures are printed as one line on
 * stderr. Interruption is left alone, so the runtime's teardown reports it as 130.
 */
export const toExitCode = <R>(program: Effect.Effect<void, CliFailure, R>): Effect.Effect<number, never, R> =>
  program.pipe(
    Effect.as(ExitCode.ok as number),
    Effect.catchAllCause((cause) => {
      if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
      const failure = Cause.failureOption(cause)
      if (Option.isSome(failure)) {
        // @effect/cli has already printed its own message (and help for --help) for these
        if (ValidationError.isValidationError(failure.value)) return Effect.succeed(ExitCode.usage as number)
        const { exitCode, message } = describeFailure(failure.value)
        return Console.error(`logbook: ${oneLine(message)}`).pipe(Effect.as(exitCode))
      }
      const defect = Cause.squash(cause)
      const message = defect instanceof Error ? defect.message : String(defect)
      return Effect.gen(function* () {
        const debug = yield* Config.boolean("LOGBOOK_DEBUG").pipe(
          Config.withDefault(false),
          Effect.orElseSucceed(() => true)
        )
        const details = debug ? `\n${Cause.pretty(cause)}` : " (set LOGBOOK_DEBUG=1 for the details)"
        yield* Console.error(`logbook: unexpected error: ${oneLine(message)}${details}`)
        return ExitCode.failed as number
      })
    })
  )

const logText = (message: unknown): string => {
  const parts = Array.isArray(message) ? message : [message]
  return parts
    .map((part) =>
      typeof part === "string"
        ? part
        : part instanceof Error || (typeof part === "object" && part !== null && "message" in part)
          ? String((part as { message: unknown }).message)
          : String(part)
    )
    .join(": ")
}

/**
 * Log lines go to stderr as `logbook: warning: …`, one line each, so they never mix with the
 * output of a command (JSON on stdout stays valid).
 */
export const cliLogger = Logger.make(({ logLevel, message }) => {
  globalThis.console.error(cliLogLine(logLevel, message))
})

/** A log line as `cliLogger` writes it (`logbook: warn: …`), for a logger that writes elsewhere. */
export const cliLogLine = (logLevel: LogLevel.LogLevel, message: unknown): string =>
  `logbook: ${logLevel.label.toLowerCase()}: ${oneLine(logText(message))}`

/** Runs `effect` with `cliLogger` in place of the default logger. */
export const withCliLogger = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.provide(effect, Logger.replace(Logger.defaultLogger, cliLogger))
