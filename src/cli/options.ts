/**
 * Arguments and flags that several commands share, so they read and behave the same everywhere.
 */
import * as Args from "@effect/cli/Args"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Effect, Option } from "effect"
import { CliError } from "./errors.js"

/** `<session>`: a full session id or a prefix of it that matches exactly one session. */
export const sessionArg = Args.text({ name: "session" }).pipe(
  Args.withDescription("The session id, or a prefix of it that matches one session.")
)

/** A bad flag value, in the words of every other usage error: `logbook: --<name>: expected …, got "…"`. */
const badValue = (name: string, expected: string, got: string) =>
  ValidationError.invalidValue(HelpDoc.p(`logbook: --${name}: expected ${expected}, got ${JSON.stringify(got)}`))

/** `a`, `a or b`, `a, b or c` */
const orList = (words: ReadonlyArray<string>): string =>
  words.length <= 1 ? words.join("") : `${words.slice(0, -1).join(", ")} or ${words.at(-1)}`

/** `--<name> <n>`: a whole number (@effect/cli's own message does not name the flag). */
export const integerOption = (name: string): Options.Options<number> =>
  Options.text(name).pipe(
    Options.withPseudoName("n"),
    Options.mapEffect((text) =>
      /^[+-]?\d+$/.test(text.trim()) && Number.isSafeInteger(Number(text))
        ? Effect.succeed(Number(text))
        : Effect.fail(badValue(name, "a whole number", text))
    )
  )

/** `--<name> <choice>`: one of `choices` (@effect/cli's own message does not name the flag). */
export const choiceOption = <const C extends readonly [string, ...Array<string>]>(
  name: string,
  choices: C
): Options.Options<C[number]> =>
  Options.text(name).pipe(
    Options.withPseudoName(choices.join(" | ")),
    Options.mapEffect((text) =>
      choices.includes(text) ? Effect.succeed(text as C[number]) : Effect.fail(badValue(name, orList(choices), text))
    )
  )

/** An optional `--<name> <seq>` flag. */
export const seqOption = (name: string, description: string) =>
  integerOption(name).pipe(Options.optional, Options.withPseudoName("seq"), Options.withDescription(description))

/** `--format <choice>`, defaulting to the first choice. */
export const formatOption = <const C extends readonly [string, ...Array<string>]>(choices: C, description: string) =>
  choiceOption("format", choices).pipe(
    Options.withDefault(choices[0] as C[number]),
    Options.withDescription(description)
  )

/** An optional `--cwd <dir>` flag; `resolveCwd` turns it into a checked absolute directory. */
export const cwdOption = (description: string) =>
  Options.text("cwd").pipe(Options.optional, Options.withPseudoName("dir"), Options.withDescription(description))

/** The absolute directory of a `--cwd` flag (default: the current directory); exit 2 when it is not one. */
export const resolveCwd = Effect.fn("cli.resolveCwd")(function* (cwd: Option.Option<string>) {
  const path = yield* Path.Path
  const fs = yield* FileSystem.FileSystem
  const dir = path.resolve(Option.getOrElse(cwd, () => process.cwd()))
  const info = yield* fs.stat(dir).pipe(Effect.option)
  if (Option.isNone(info) || info.value.type !== "Directory") {
    return yield* CliError.usage(`--cwd ${dir} is not a directory`)
  }
  return dir
})
