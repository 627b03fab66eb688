/**
 * Where `logbook run` writes its output (src/cli/runWriter.ts), with stand-in streams: the text to
 * stdout on a terminal and to stderr elsewhere, status lines to stderr, and live rows redrawn in
 * place only when stderr is a terminal. Through the built binary: test/integration/output.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Fiber, TestClock } from "effect"
import type { LiveRow } from "../../src/cli/liveRegion.js"
import type { Piece } from "../../src/cli/runOutput.js"
import { makeRunWriter, type RunWriter } from "../../src/cli/runWriter.js"
import { fakeStream } from "../support/fakeStream.js"

const ERASE = "\r\u001b[2K"
const UP = "\u001b[1A\u001b[2K"

const text = (value: string): Piece => ({ _tag: "Text", text: value })
const line = (value: string): Piece => ({ _tag: "Line", text: value })
const row = (label: string): LiveRow => ({ text: (now) => `${label} at ${now}`, style: (t) => t })
const live = (key: string, label: string): Piece => ({ _tag: "Live", key, row: row(label), plain: `⋯ ${label}` })
const end = (key: string): Piece => ({ _tag: "End", key })

/** What the renderer made of one event, written at the clock's time (as `logbook run` writes a batch). */
const show = (writer: RunWriter, pieces: ReadonlyArray<Piece>) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => writer.unsafeShow(pieces, now)))

const setup = (stdoutTTY: boolean, stderrTTY: boolean, columns = 80) =>
  Effect.gen(function* () {
    const stdout = fakeStream(stdoutTTY, columns)
    const stderr = fakeStream(stderrTTY, columns)
    const writer = yield* makeRunWriter({ stdout, stderr })
    return { stdout, stderr, writer }
  })

describe("the run's writer", () => {
  it.scoped("stdout and stderr terminals: the text on stdout, status lines on stderr on a line of their own", () =>
    Effect.gen(function* () {
      const { stdout, stderr, writer } = yield* setup(true, true)
      yield* show(writer, [{ _tag: "Break" }, text("Let me look")])
      yield* show(writer, [line("✓ read a.txt  4ms")])
      yield* show(writer, [{ _tag: "Break" }, text("Done.")])
      yield* writer.end
      yield* writer.answer("Done.")
      // the text streamed there: the answer is not written again
      expect(stdout.text()).toBe("Let me lookDone.\n")
      expect(stderr.text()).toBe("\n✓ read a.txt  4ms\n")
    })
  )

  it.scoped("a live row is drawn below, redrawn every second, and replaced in place by the final line", () =>
    Effect.gen(function* () {
      const { stderr, writer } = yield* setup(true, true)
      yield* show(writer, [live("c1", "bash make")])
      expect(stderr.text()).toBe("bash make at 0")
      stderr.clear()
      yield* TestClock.adjust("1 second")
      expect(stderr.text()).toBe(`${ERASE}bash make at 1000`)
      stderr.clear()
      yield* TestClock.adjust("1 second")
      expect(stderr.text()).toBe(`${ERASE}bash make at 2000`)
      stderr.clear()
      yield* show(writer, [end("c1"), line("✓ bash make  2.1s")])
      expect(stderr.text()).toBe(`${ERASE}✓ bash make  2.1s\n`)
      stderr.clear()
      // nothing is live any more: the ticker draws nothing
      yield* TestClock.adjust("3 seconds")
      expect(stderr.text()).toBe("")
    })
  )

  it.scoped("several live rows: erased together, a status line above them, the others drawn again", () =>
    Effect.gen(function* () {
      const { stderr, writer } = yield* setup(true, true)
      yield* show(writer, [live("a", "bash one")])
      yield* show(writer, [live("b", "bash two")])
      expect(stderr.text()).toBe(`bash one at 0${ERASE}bash one at 0\nbash two at 0`)
      stderr.clear()
      yield* show(writer, [end("a"), line("✓ bash one  1ms")])
      expect(stderr.text()).toBe(`${ERASE}${UP}✓ bash one  1ms\nbash two at 0`)
      stderr.clear()
      yield* writer.line("logbook: warn: something")
      expect(stderr.text()).toBe(`${ERASE}logbook: warn: something\nbash two at 0`)
      stderr.clear()
      yield* writer.end
      expect(stderr.text()).toBe(ERASE)
    })
  )

  it.scoped("a live row after text that did not end its line starts on a new line", () =>
    Effect.gen(function* () {
      const { stdout, stderr, writer } = yield* setup(true, true)
      yield* show(writer, [text("I will build it.")])
      yield* show(writer, [live("c1", "bash make")])
      expect(stdout.text()).toBe("I will build it.")
      expect(stderr.text()).toBe("\nbash make at 0")
    })
  )

  it.scoped("hold: the rows are erased while a prompt is on the screen and drawn after it", () =>
    Effect.gen(function* () {
      const { stderr, writer } = yield* setup(true, true)
      yield* show(writer, [live("c1", "bash make")])
      stderr.clear()
      const prompt = yield* Effect.fork(
        writer.hold(
          Effect.zipRight(
            Effect.sync(() => stderr.write("? allow › once\n")),
            Effect.sleep("5 seconds")
          )
        )
      )
      yield* TestClock.adjust("3 seconds")
      // the ticker does not draw over the prompt
      expect(stderr.text()).toBe(`${ERASE}? allow › once\n`)
      yield* TestClock.adjust("2 seconds")
      yield* Fiber.join(prompt)
      expect(stderr.text()).toBe(`${ERASE}? allow › once\nbash make at 5000`)
    })
  )

  it.scoped("a row never wraps: it is cut to the terminal's width", () =>
    Effect.gen(function* () {
      const { stderr, writer } = yield* setup(true, true, 20)
      yield* show(writer, [live("c1", "bash a-very-long-command-line")])
      expect(stderr.text()).toBe("bash a-very-long-c…")
    })
  )

  it.scoped("stdout not a terminal: the text goes to stderr, stdout gets only the answer", () =>
    Effect.gen(function* () {
      const { stdout, stderr, writer } = yield* setup(false, true)
      yield* show(writer, [{ _tag: "Break" }, text("Let me look.")])
      yield* show(writer, [live("c1", "bash ls")])
      yield* show(writer, [end("c1"), line("✓ bash ls  3ms")])
      yield* show(writer, [{ _tag: "Break" }, text("It is 42.")])
      yield* writer.end
      yield* writer.answer("It is 42.")
      expect(stdout.text()).toBe("It is 42.\n")
      expect(stderr.text()).toBe(`Let me look.\nbash ls at 0${ERASE}✓ bash ls  3ms\nIt is 42.\n`)
    })
  )

  it.scoped("neither a terminal: plain lines once, no carriage return and no escape sequence at all", () =>
    Effect.gen(function* () {
      const { stdout, stderr, writer } = yield* setup(false, false)
      yield* show(writer, [{ _tag: "Break" }, text("Working")])
      yield* show(writer, [live("c1", "bash make")])
      yield* TestClock.adjust("5 seconds")
      yield* show(writer, [{ _tag: "Touch", key: "c1" }])
      yield* show(writer, [end("c1"), line("✓ bash make  5s")])
      yield* show(writer, [live("retry", "retry"), end("retry")])
      yield* writer.line("logbook: interrupting")
      yield* writer.end
      yield* writer.answer("")
      expect(stderr.text()).toBe("Working\n⋯ bash make\n✓ bash make  5s\n⋯ retry\nlogbook: interrupting\n")
      expect(stdout.text()).toBe("")
    })
  )

  it.scoped("stdout a terminal, stderr not: the text on stdout, a new step's text on a new line", () =>
    Effect.gen(function* () {
      const { stdout, stderr, writer } = yield* setup(true, false)
      yield* show(writer, [{ _tag: "Break" }, text("one")])
      yield* show(writer, [line("✓ bash ls  3ms")])
      yield* show(writer, [{ _tag: "Break" }, text("two")])
      yield* writer.end
      expect(stdout.text()).toBe("one\ntwo\n")
      expect(stderr.text()).toBe("✓ bash ls  3ms\n")
    })
  )
})
