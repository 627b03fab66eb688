/**
 * Where `logbook run` writes what its renderer makes (docs/run.md, "stdout and stderr"), after the
 * conventions of `codex exec` and `claude -p`: stdout is the answer, stderr is everything else.
 *
 * - The model's text streams to stdout when stdout is a terminal; otherwise it streams to stderr
 *   (the transcript) and stdout gets only the answer, once the turn is over (`answer`). So
 *   `logbook run "…" > answer.md` leaves only the answer in answer.md.
 * - Status lines (tool calls, retries, a cut response), notices, the usage and session lines: stderr.
 * - What goes on for a while (a running call, a retry wait), when stderr is a terminal: a row of the
 *   live region at the bottom (`liveRegion.ts`), redrawn in place as it changes and every second.
 *   When stderr is not a terminal: its plain line once, and no `\r` or escape sequence at all.
 *
 * One writer serialises everything written to both streams (each operation is one synchronous
 * write sequence), so the live rows are erased before anything else is written and drawn again
 * after it, and nothing lands inside them. The screen is one when the text goes to stderr, or when
 * stdout and stderr are both terminals (assumed to be the same one): a status line after text that
 * did not end its line starts on a new line then.
 */
import { Clock, Effect, type Scope } from "effect"
import { makeLiveRegion } from "./liveRegion.js"
import type { Piece } from "./runOutput.js"

/** What the writer needs of stdout and stderr (a `NodeJS.WriteStream`, or a test's stand-in). */
export interface OutputStream {
  readonly isTTY?: boolean | undefined
  /** the terminal's width and height, read at each redraw */
  readonly columns?: number | undefined
  readonly rows?: number | undefined
  readonly write: (text: string) => unknown
}

export interface RunWriter {
  /**
   * writes what the renderer made of one event, with the time it is written at: outside an
   * Effect, as `logbook run` shows a batch of events in one pass (runShow.ts)
   */
  readonly unsafeShow: (pieces: ReadonlyArray<Piece>, now: number) => void
  /** a line on stderr (a notice such as `logbook: interrupting: …`), above the live rows */
  readonly line: (text: string) => Effect.Effect<void>
  /** the same, outside an Effect (the logger), with the time it was made */
  readonly unsafeLine: (text: string, now: number) => void
  /**
   * runs `effect` with the live rows erased and not drawn (a prompt is on the screen, written
   * by someone else), on a line of its own; draws them again after it
   */
  readonly hold: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** the turn's answer, to stdout, when the text did not stream there (stdout is not a terminal) */
  readonly answer: (text: string) => Effect.Effect<void>
  /** the end of the output: the text's last line ended, the live rows erased for good */
  readonly end: Effect.Effect<void>
}

/** How often the live rows are redrawn (elapsed times, a countdown) when nothing else happens. */
const TICK = "1 second"

export const makeRunWriter = (options: {
  readonly stdout: OutputStream
  readonly stderr: OutputStream
}): Effect.Effect<RunWriter, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { stdout, stderr } = options
    const textToStdout = stdout.isTTY === true
    const live = stderr.isTTY === true
    const sameScreen = !textToStdout || live
    const region = makeLiveRegion()
    /** the text did not end its line (on its stream; on the screen too when `sameScreen`) */
    let textMidLine = false
    /** a new step began: its text starts on a new line */
    let pendingBreak = false
    let held = false
    let ended = false

    const writeText = (text: string) => void (textToStdout ? stdout : stderr).write(text)
    const writeErr = (text: string) => {
      if (text !== "") stderr.write(text)
    }
    /** the screen's cursor is at a line's start (what is on stderr always ends its line) */
    const atLineStart = () => !(sameScreen && textMidLine)
    const endScreenLine = () => {
      if (!atLineStart()) {
        writeErr("\n")
        textMidLine = false
      }
    }
    const draw = (now: number) => {
      if (!live || held || ended || !atLineStart()) return
      writeErr(region.draw(now, stderr.columns, stderr.rows))
    }
    const statusLine = (text: string) => {
      endScreenLine()
      writeErr(`${text}\n`)
    }

    const apply = (piece: Piece) => {
      switch (piece._tag) {
        case "Text": {
          if (piece.text === "") return
          const text = pendingBreak && textMidLine ? `\n${piece.text}` : piece.text
          pendingBreak = false
          writeText(text)
          textMidLine = !text.endsWith("\n")
          return
        }
        case "Break":
          pendingBreak = true
          return
        case "Line":
          return statusLine(piece.text)
        case "Live":
          if (live) {
            region.set(piece.key, piece.row)
            // the rows start on a line of their own
            endScreenLine()
          } else if (piece.plain !== undefined) statusLine(piece.plain)
          return
        case "Touch":
          return
        case "End":
          region.delete(piece.key)
          return
      }
    }

    /** one write sequence: the rows erased, `body` written, the rows drawn again */
    const around = (now: number, body: () => void) => {
      if (ended) {
        body()
        return
      }
      writeErr(region.erase())
      body()
      draw(now)
    }

    const unsafeShow = (pieces: ReadonlyArray<Piece>, now: number) => {
      if (pieces.length > 0) around(now, () => pieces.forEach(apply))
    }

    const unsafeLine = (text: string, now: number) => around(now, () => statusLine(text))

    if (live) {
      // the elapsed times and the countdown move on even when no event comes
      yield* Effect.sleep(TICK).pipe(
        Effect.zipRight(Clock.currentTimeMillis),
        Effect.flatMap((now) =>
          Effect.sync(() => {
            if (region.size() > 0 && !held && !ended) around(now, () => {})
          })
        ),
        Effect.forever,
        Effect.forkScoped
      )
    }

    const hold = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
      Effect.acquireUseRelease(
        Effect.sync(() => {
          writeErr(region.erase())
          endScreenLine()
          held = true
        }),
        () => effect,
        () =>
          Effect.flatMap(Clock.currentTimeMillis, (now) =>
            Effect.sync(() => {
              held = false
              draw(now)
            })
          )
      )

    const answer = (text: string) =>
      Effect.sync(() => {
        if (textToStdout || text === "") return
        stdout.write(text.endsWith("\n") ? text : `${text}\n`)
      })

    const end = Effect.sync(() => {
      if (ended) return
      writeErr(region.erase())
      ended = true
      if (textMidLine) {
        writeText("\n")
        textMidLine = false
      }
    })

    return {
      unsafeShow,
      line: (text) => Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => unsafeLine(text, now))),
      unsafeLine,
      hold,
      answer,
      end
    } satisfies RunWriter
  })
