/**
 * The message `logbook run` sends (docs/run.md, "The message"): the arguments, joined with spaces;
 * piped stdin is context for them (`git diff | logbook run "review this"`), or the message itself
 * when there are no arguments. A terminal is never read. What is read from stdin is bounded
 * (`MAX_STDIN_BYTES`): more is a usage error, and nothing is sent.
 */
import { Console, Effect } from "effect"
import { formatCount } from "../present/text.js"
import { CliError } from "./errors.js"

/** The most bytes read from stdin: 1 MiB. */
export const MAX_STDIN_BYTES = 1024 * 1024

/** When stdin has not ended after this long, the user is told that logbook waits for it. */
const WAITING_NOTICE_AFTER = "1 second"

/**
 * A word of the message that is an option logbook does not know (`--modle`): the parser takes every
 * word it does not know as part of the message, so a word that looks like an option and stands
 * before `--` on the command line was meant as one. After `--` every word is the message's.
 */
export const unknownOption = (
  words: ReadonlyArray<string>,
  argv: ReadonlyArray<string>,
  command: string
): string | undefined => {
  const at = argv.indexOf(command)
  if (at < 0) return undefined
  const end = argv.indexOf("--", at + 1)
  const beforeEnd = new Set(argv.slice(at + 1, end < 0 ? undefined : end))
  return words.find((word) => /^--?[A-Za-z]/.test(word) && beforeEnd.has(word))
}

/**
 * The message with piped input as its context: the message first, then the input between
 * `<stdin>` tags, each on a line of its own (the input's trailing newlines dropped). Tags, not a
 * fenced block: a diff or a markdown file holds fences of its own.
 */
export const withStdin = (message: string, input: string): string =>
  `${message}\n\n<stdin>\n${input.replace(/\n+$/, "")}\n</stdin>`

const tooLarge = () =>
  CliError.usage(
    `stdin holds more than ${formatCount(MAX_STDIN_BYTES)} bytes (1 MiB), the most logbook run reads: ` +
      "pipe in less (e.g. through head -c 500000), or save it in a file of the workspace and name the file in the message"
  )

/**
 * Everything `input` holds, up to `maxBytes` (more: a usage error, and the rest is not read). When it
 * has not ended after a second, stderr says logbook waits for it (a pipe nobody closes).
 */
export const readAll = (input: NodeJS.ReadableStream, maxBytes = MAX_STDIN_BYTES): Effect.Effect<string, CliError> => {
  const read = Effect.async<Buffer, CliError>((resume) => {
    const chunks: Array<Buffer> = []
    let size = 0
    const cleanup = () => {
      input.off("data", onData)
      input.off("end", onEnd)
      input.off("error", onError)
    }
    const onData = (chunk: Buffer | string) => {
      const bytes = typeof chunk === "string" ? Buffer.from(chunk) : chunk
      size += bytes.length
      if (size > maxBytes) {
        cleanup()
        input.pause()
        resume(Effect.fail(tooLarge()))
        return
      }
      chunks.push(bytes)
    }
    const onEnd = () => {
      cleanup()
      resume(Effect.succeed(Buffer.concat(chunks)))
    }
    const onError = (error: Error) => {
      cleanup()
      resume(Effect.fail(CliError.usage(`cannot read stdin: ${error.message}`)))
    }
    input.on("data", onData)
    input.on("end", onEnd)
    input.on("error", onError)
    input.resume()
    return Effect.sync(cleanup)
  })
  const waiting = Console.error(
    "logbook: waiting for stdin to end (it is not a terminal: logbook run reads it as context); " +
      "end it with Ctrl-D, or run with </dev/null"
  ).pipe(Effect.delay(WAITING_NOTICE_AFTER))
  return Effect.gen(function* () {
    yield* Effect.forkScoped(waiting)
    const bytes = yield* read
    if (bytes.includes(0)) {
      return yield* CliError.usage("stdin holds binary data (a NUL byte): logbook run reads text")
    }
    return bytes.toString("utf8")
  }).pipe(Effect.scoped)
}

/**
 * The message from the arguments and stdin: the arguments with stdin's text as context, or stdin's
 * text alone when there are no arguments. Stdin is read only when it is not a terminal.
 */
export const readMessage = (
  words: ReadonlyArray<string>,
  options: { readonly argv: ReadonlyArray<string>; readonly stdin: NodeJS.ReadStream }
): Effect.Effect<string, CliError> =>
  Effect.gen(function* () {
    const unknown = unknownOption(words, options.argv, "run")
    if (unknown !== undefined) {
      const name = unknown.split("=")[0]
      return yield* CliError.usage(
        `unknown option ${name} for logbook run (see logbook run --help); to send words that start with "-" ` +
          `as the message, put them after --, as in: logbook run -- "${name} …"`
      )
    }
    const fromArgs = words.join(" ").trim()
    if (options.stdin.isTTY === true) {
      if (fromArgs !== "") return fromArgs
      return yield* CliError.usage('no message: pass it as arguments (logbook run "fix the failing test") or on stdin')
    }
    const piped = yield* readAll(options.stdin)
    if (fromArgs !== "") {
      // as it came, without the blank lines around it (a first line's indentation is kept)
      const context = piped.replace(/^(?:[ \t]*\r?\n)+/, "").trimEnd()
      return context === "" ? fromArgs : withStdin(fromArgs, context)
    }
    const message = piped.trim()
    if (message === "") return yield* CliError.usage("no message: the arguments and stdin are empty")
    return message
  })
