/**
 * Arguments and flags that several commands share, so they read and behave the same everywhere.
 */
import * as Args from "@effect/cli/Args"
import * as Options from "@effect/cli/Options"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Effect, Option } from "effect"
import { CliError } from "./errors.js"

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
