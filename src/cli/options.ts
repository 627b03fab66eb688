/**
 * Arguments and flags that several commands share, so they read and behave the same everywhere.
 */
import * as Args from "@effect/cli/Args"
import * as Options from "@effect/cli/Options"

/** `<session>`: a full session id or a prefix of it that matches exactly one session. */
export const sessionArg = Args.text({ name: "session" }).pipe(
  Args.withDescription("The session id, or a prefix of it that matches one session.")
)

/** An optional `--<name> <seq>` flag. */
export const seqOption = (name: string, description: string) =>
  Options.integer(name).pipe(Options.optional, Options.withPseudoName("seq"), Options.withDescription(description))

/** `--format <choice>`, defaulting to the first choice. */
export const formatOption = <const C extends readonly [string, ...Array<string>]>(choices: C, description: string) =>
  Options.choice("format", choices).pipe(
    Options.withDefault(choices[0] as C[number]),
    Options.withDescription(description)
  )
