/**
 * What the CLI tells the user when a command cannot do its job, and the exit code that goes with it
 * (DESIGN §9: 0 done, 1 failed, 2 usage or config error, 130 interrupted).
 *
 * Every expected failure becomes one sentence on stderr, prefixed with `logbook:`; stack traces are
 * shown only for defects, and only when `LOGBOOK_DEBUG` is set.
 */
import { ValidationError } from "@effect/cli"
import { Cause, Console, Effect, Option, Schema } from "effect"
import { EventDecodeError } from "../domain/Events.js"
import { DatabaseError, EventStoreError } from "../store/Errors.js"

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

const databaseSentence = (error: DatabaseError): string => {
  switch (error.reason) {
    case "missing":
      return `no logbook database at ${error.file}; run \`logbook run\` first or pass --db`
    case "not-logbook":
      return `${error.file} is not a logbook database; pass --db <file> to choose another file`
    case "corrupt":
      return `${error.file} is a damaged SQLite database and cannot be read; restore it from a backup or pass --db`
    case "newer-schema":
      return `${error.file} was written by a newer version of logbook; upgrade logbook to read it`
    case "unreadable":
      return `cannot open the logbook database ${error.file}: ${error.message}`
  }
}

/** The sentence and exit code for an expected failure. */
export const describe = (error: unknown): { readonly message: string; readonly exitCode: number } => {
  if (error instanceof CliError) return { message: error.message, exitCode: error.exitCode }
  if (error instanceof DatabaseError) return { message: databaseSentence(error), exitCode: ExitCode.usage }
  if (error instanceof EventStoreError) {
    return { message: `the event store failed (${error.method}): ${error.message}`, exitCode: ExitCode.failed }
  }
  if (error instanceof EventDecodeError) {
    return {
      message: `cannot read event ${error.seq} (${error.type}) of session ${error.sessionId}: ${error.message}`,
      exitCode: ExitCode.failed
    }
  }
  if (error instanceof Error) return { message: error.message, exitCode: ExitCode.failed }
  return { message: String(error), exitCode: ExitCode.failed }
}

const oneLine = (text: string): string => text.replace(/\s*\n\s*/g, " ").trim()

/**
 * Runs a CLI program and turns its outcome into an exit code: failures are printed as one line on
 * stderr. Interruption is left alone, so the runtime's teardown reports it as 130.
 */
export const toExitCode = <R>(program: Effect.Effect<void, unknown, R>): Effect.Effect<number, never, R> =>
  program.pipe(
    Effect.as(ExitCode.ok as number),
    Effect.catchAllCause((cause) => {
      if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
      const failure = Cause.failureOption(cause)
      if (Option.isSome(failure)) {
        // @effect/cli has already printed its own message (and help for --help) for these
        if (ValidationError.isValidationError(failure.value)) return Effect.succeed(ExitCode.usage as number)
        const { exitCode, message } = describe(failure.value)
        return Console.error(`logbook: ${oneLine(message)}`).pipe(Effect.as(exitCode))
      }
      const defect = Cause.squash(cause)
      const message = defect instanceof Error ? defect.message : String(defect)
      return Effect.gen(function* () {
        yield* Console.error(`logbook: unexpected error: ${oneLine(message)}`)
        if (process.env.LOGBOOK_DEBUG) yield* Console.error(Cause.pretty(cause))
        else yield* Console.error("logbook: set LOGBOOK_DEBUG=1 to see the details")
        return ExitCode.failed as number
      })
    })
  )
