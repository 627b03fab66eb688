/**
 * The message of `logbook run` (src/cli/runInput.ts): piped stdin is context for the arguments or
 * the message itself, bounded, and a terminal is never read. Through the built binary:
 * test/integration/run.test.ts ("the message and the flags").
 */
import { PassThrough } from "node:stream"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { CliError } from "../../src/cli/errors.js"
import { MAX_STDIN_BYTES, readAll, readMessage, withStdin } from "../../src/cli/runInput.js"

/** A stdin that is a pipe holding `text` (ended), or a terminal (`isTTY`) nobody types into. */
const stdin = (text: string | undefined, options: { readonly isTTY?: boolean } = {}) => {
  const stream = new PassThrough() as PassThrough & { isTTY?: boolean }
  if (options.isTTY === true) stream.isTTY = true
  if (text !== undefined) stream.end(text)
  return stream as unknown as NodeJS.ReadStream
}

const message = (words: ReadonlyArray<string>, input: NodeJS.ReadStream) =>
  readMessage(words, { argv: ["node", "logbook", "run", ...words], stdin: input })

const failure = <A>(effect: Effect.Effect<A, CliError>) =>
  Effect.map(Effect.exit(effect), (exit) => {
    if (Exit.isSuccess(exit)) throw new Error("expected a failure")
    const error = exit.cause._tag === "Fail" ? exit.cause.error : undefined
    expect(error).toBeInstanceOf(CliError)
    return error as CliError
  })

describe("the message of logbook run", () => {
  it("puts piped input after the message, between <stdin> tags", () => {
    expect(withStdin("review this", "diff --git a/x b/x\n+added\n\n")).toBe(
      "review this\n\n<stdin>\ndiff --git a/x b/x\n+added\n</stdin>"
    )
  })

  it.effect("the arguments with piped stdin: the stdin is context, its blank lines around it dropped", () =>
    Effect.gen(function* () {
      expect(yield* message(["review", "this"], stdin("\n\n    indented first line\nsecond\n\n"))).toBe(
        "review this\n\n<stdin>\n    indented first line\nsecond\n</stdin>"
      )
      // an empty or blank stdin adds nothing
      expect(yield* message(["hi"], stdin(""))).toBe("hi")
      expect(yield* message(["hi"], stdin(" \n\t\n"))).toBe("hi")
    })
  )

  it.effect("no arguments: stdin is the message; empty it is a usage error", () =>
    Effect.gen(function* () {
      expect(yield* message([], stdin("  summarise\nthe project \n"))).toBe("summarise\nthe project")
      const error = yield* failure(message([], stdin("  \n")))
      expect(error.message).toBe("no message: the arguments and stdin are empty")
      expect(error.exitCode).toBe(2)
    })
  )

  it.effect("a terminal is never read: the arguments alone, or a usage error without them", () =>
    Effect.gen(function* () {
      // nobody types into it and it never ends: reading it would hang the test
      expect(yield* message(["hi"], stdin(undefined, { isTTY: true }))).toBe("hi")
      const error = yield* failure(message([], stdin(undefined, { isTTY: true })))
      expect(error.message).toMatch(/^no message: pass it as arguments/)
    })
  )

  it.effect("more than 1 MiB on stdin is a usage error that says what to do; exactly 1 MiB is read", () =>
    Effect.gen(function* () {
      const error = yield* failure(message(["review"], stdin("x".repeat(MAX_STDIN_BYTES + 1))))
      expect(error.exitCode).toBe(2)
      expect(error.message).toMatch(/^stdin holds more than 1,048,576 bytes \(1 MiB\), the most logbook run reads: /)
      expect(yield* readAll(stdin("y".repeat(MAX_STDIN_BYTES)))).toHaveLength(MAX_STDIN_BYTES)
      // the bound holds on bytes, not characters
      const wide = "é".repeat(MAX_STDIN_BYTES / 2 + 1)
      expect((yield* failure(readAll(stdin(wide)))).exitCode).toBe(2)
    })
  )

  it.effect("binary data on stdin is a usage error", () =>
    Effect.gen(function* () {
      const error = yield* failure(message(["look"], stdin("PK\u0003\u0004\u0000\u0000")))
      expect(error.message).toBe("stdin holds binary data (a NUL byte): logbook run reads text")
    })
  )
})
