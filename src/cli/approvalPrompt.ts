/**
 * The interactive Approver of `logbook run` on a terminal: a call the
 * permission rules `ask` about is shown to the user, who picks an answer and confirms it with Enter
 * — `o` once, `a` always (this exact call for the rest of the session), `r` reject, `t` reject and
 * tell the model why (a line typed after it, sent with Enter: the model reads it with the denial).
 * The letters and the arrow keys only move the highlighted choice; nothing is answered before Enter,
 * so a word typed into the wrong window (`clear`: its `a`, its `r`) never answers.
 *
 * The prompt is written by the run's output follower, not by the kernel's fiber: the follower is the
 * only writer of the output, so the prompt comes after everything the agent printed before the ask,
 * and nothing the agent prints (a parallel call's progress) lands inside it. The two meet here:
 *
 * - `approver.ask` (the kernel, after `permission.asked` is committed) hands its request over and
 *   waits for the reply;
 * - `serve(permissionId)` (the follower, when it reaches that `permission.asked`) takes the request,
 *   prompts, and hands the reply back.
 *
 * An ask that is interrupted (Ctrl-C, the turn interrupted) ends its prompt; `close` ends every
 * prompt still waiting (the turn is over). Ctrl-C at the prompt (the terminal is in raw mode, so it
 * arrives as a key) is turned back into SIGINT: the run is interrupted as anywhere else.
 */
import { type Context, Deferred, Effect } from "effect"
import { oneLine, truncate, visibleWidth } from "../present/text.js"
import type { ApprovalAnswer, ApprovalReply, ApprovalRequest, Approver } from "../tools/Approver.js"
import { eraseRows, rowsOf } from "./liveRegion.js"
import type { Style } from "./render.js"

/** Where the prompt is shown and read: a terminal in raw mode, or a script in tests. */
export interface PromptTerminal {
  readonly write: (text: string) => Effect.Effect<void>
  /**
   * Shows `text`, then reads keys until `choose` returns an answer (`undefined`: not an answer, keep
   * reading). The terminal is in raw mode meanwhile and restored after, also when interrupted, when
   * `interrupted` (or what it returns then) is written if the question had been shown. Keys typed
   * before the question was shown are dropped (typeahead must not answer it), but a Ctrl-C among them
   * is still passed on.
   */
  readonly question: <A>(
    text: string,
    choose: (key: string) => A | undefined,
    interrupted: string | (() => string)
  ) => Effect.Effect<A>
  /** writes at once, from inside `choose` (the echo of a typed line, the redrawn choices) */
  readonly echo: (text: string) => void
  /** the terminal's width, when it is known (to redraw a line that wrapped) */
  readonly columns: () => number | undefined
}

/** The answers, in the order they are shown (and the arrow keys move through). */
export type Choice = ApprovalReply | "tell"
export const CHOICES: ReadonlyArray<Choice> = ["once", "always", "reject", "tell"]

/** What one key means at the prompt. */
export type PromptKey =
  | { readonly select: Choice }
  | "next"
  | "previous"
  | "confirm"
  /** Ctrl-D: the end of input, a rejection at once */
  | "eof"
  | "interrupt"
  | undefined

/**
 * `o`/`y` select once, `a` always, `r`/`n` reject, `t` reject with a message; the arrow keys (and
 * Tab, Shift-Tab) move the selection; Enter confirms it. Ctrl-D rejects at once, Ctrl-C interrupts.
 * Anything else means nothing — Esc too (a terminal may deliver an arrow key's escape sequence in two
 * reads, whose first is a lone Esc), and capitals: an escape sequence's last byte is often one
 * (`ESC [ A` is the up arrow), and a piece of a sequence must not count.
 */
export const keyMeaning = (key: string): PromptKey => {
  switch (key) {
    case "o":
    case "y":
      return { select: "once" }
    case "a":
      return { select: "always" }
    case "r":
    case "n":
      return { select: "reject" }
    case "t":
      return { select: "tell" }
    case "\r":
    case "\n":
      return "confirm"
    case "\u001b[C":
    case "\u001bOC":
    case "\u001b[B":
    case "\u001bOB":
    case "\t":
      return "next"
    case "\u001b[D":
    case "\u001bOD":
    case "\u001b[A":
    case "\u001bOA":
    case "\u001b[Z":
      return "previous"
    case "\u0004":
      return "eof"
    case "\u0003":
      return "interrupt"
    default:
      return undefined
  }
}

/** The choice after `selected` (`step` 1) or before it (-1), round; from none, the first or the last. */
export const moveChoice = (selected: Choice | undefined, step: 1 | -1): Choice => {
  if (selected === undefined) return step === 1 ? CHOICES[0]! : CHOICES[CHOICES.length - 1]!
  const at = CHOICES.indexOf(selected)
  return CHOICES[(at + step + CHOICES.length) % CHOICES.length]!
}

const answered: Record<ApprovalReply, string> = {
  once: "allowed once",
  always: "allowed for the rest of this session",
  reject: "rejected"
}

const choiceText: Record<Choice, readonly [key: string, label: string]> = {
  once: ["o", "once"],
  always: ["a", "always (this exact call, this session)"],
  reject: ["r", "reject"],
  tell: ["t", "reject and tell the model why"]
}

/**
 * The line of choices, the selected one in brackets (and inverted where there is colour), then
 * where the answer goes: `  o once · [a always (…)] · r reject · t reject and tell the model why —
 * choose, then Enter › `.
 */
export const choicesLine = (style: Style, selected: Choice | undefined): string => {
  const choices = CHOICES.map((choice) => {
    const [key, label] = choiceText[choice]
    return choice === selected ? style.inverse(`[${key} ${label}]`) : `${style.bold(key)} ${label}`
  })
  return `  ${choices.join(" · ")} ${style.dim("— choose, then Enter")} › `
}

/** The lines shown for a request (without the answer). */
export const promptText = (style: Style, request: ApprovalRequest): string => {
  const subject = request.subject === "" ? "" : ` ${truncate(oneLine(request.subject), 200)}`
  return (
    `${style.yellow("?")} ${style.bold(`${request.tool}${subject}`)}\n` +
    `  ${request.reason}\n` +
    choicesLine(style, undefined)
  )
}

/** The longest message to the model typed at the prompt (characters beyond it are not taken). */
export const MAX_MESSAGE_CHARS = 2000

/**
 * A line editor over keys (`splitKeys`' keys), for the message after `t`: printable characters are
 * added and echoed, Backspace takes the last one back, Enter gives the line (an empty one: a
 * rejection without a message), Ctrl-C is `onCtrlC` (the line goes on); other control keys, Esc and
 * escape sequences (arrow keys) are ignored — over a slow link an arrow key arrives as a lone Esc
 * first, and it must not throw the message away.
 */
export const lineEditor = (echo: (text: string) => void, onCtrlC: () => void) => {
  const chars: Array<string> = []
  return (key: string): string | undefined => {
    if (key === "\r" || key === "\n") return chars.join("")
    if (key === "\u0003") {
      onCtrlC()
      return undefined
    }
    if (key === "\u007f" || key === "\b") {
      if (chars.pop() !== undefined) echo("\b \b")
      return undefined
    }
    if (key.length === 0 || key.startsWith("\u001b") || /^\p{Cc}$/u.test(key)) return undefined
    if (chars.length >= MAX_MESSAGE_CHARS) return undefined
    chars.push(key)
    echo(key)
    return undefined
  }
}

interface Pending {
  readonly request: Deferred.Deferred<ApprovalRequest>
  readonly reply: Deferred.Deferred<ApprovalAnswer>
  /** the ask is over without an answer (interrupted, or the turn ended) */
  readonly cancelled: Deferred.Deferred<void>
}

export interface ApprovalDesk {
  /** the Approver the kernel asks */
  readonly approver: Context.Tag.Service<Approver>
  /**
   * Prompts for the ask `permissionId` once its request arrives; returns when it is answered or
   * over (the ask was interrupted, or `close` ran — before or after this was called).
   */
  readonly serve: (permissionId: string) => Effect.Effect<void>
  /** ends every ask still waiting, and every later `serve` at once: nobody will answer any more */
  readonly close: Effect.Effect<void>
}

export const makeApprovalDesk = (options: {
  readonly terminal: PromptTerminal
  readonly style: Style
  /** what a Ctrl-C at the prompt does (the run's own SIGINT handling) */
  readonly onCtrlC: Effect.Effect<void>
}): ApprovalDesk => {
  const { terminal, style } = options
  /**
   * permissionId -> the meeting of its ask and its prompt, made by whichever comes first. An ended
   * ask keeps its entry (cancelled) until the prompt side has seen it, so a late `serve` returns.
   */
  const entries = new Map<string, Pending>()
  let closed = false
  const entry = (permissionId: string): Effect.Effect<Pending> =>
    Effect.gen(function* () {
      const found = entries.get(permissionId)
      if (found !== undefined) return found
      const made: Pending = {
        request: yield* Deferred.make<ApprovalRequest>(),
        reply: yield* Deferred.make<ApprovalAnswer>(),
        cancelled: yield* Deferred.make<void>()
      }
      if (closed) yield* Deferred.succeed(made.cancelled, undefined)
      entries.set(permissionId, made)
      return made
    })

  const ask = (request: ApprovalRequest): Effect.Effect<ApprovalAnswer> =>
    Effect.gen(function* () {
      const e = yield* entry(request.permissionId)
      yield* Deferred.succeed(e.request, request)
      // the turn is over (cannot happen while the kernel asks, but nobody would answer)
      return yield* Effect.raceFirst(Deferred.await(e.reply), Effect.as(Deferred.await(e.cancelled), "reject" as const))
    }).pipe(
      Effect.onInterrupt(() =>
        Effect.flatMap(entry(request.permissionId), (e) => Deferred.succeed(e.cancelled, undefined))
      )
    )

  const ctrlC = () => void Effect.runFork(options.onCtrlC)
  const notAnswered = `${style.dim("(not answered: interrupted)")}\n`

  /**
   * The prompt: keys move the selection (the choices' line redrawn in place) until Enter confirms
   * one; Ctrl-C interrupts the run and keeps waiting. After `t` and Enter the same question goes on
   * as a line editor (no typeahead window in between: what is typed right after the Enter, in the
   * same read or not, is the message's start).
   */
  const prompt = (request: ApprovalRequest): Effect.Effect<ApprovalAnswer> =>
    Effect.gen(function* () {
      let line: ((key: string) => string | undefined) | undefined
      let selected: Choice | undefined
      /** the choices' line as it is on the screen (the cursor at its end) */
      let shown = choicesLine(style, undefined)
      const select = (choice: Choice) => {
        if (choice === selected) return
        selected = choice
        const next = choicesLine(style, choice)
        terminal.echo(eraseRows(rowsOf(visibleWidth(shown), terminal.columns())) + next)
        shown = next
      }
      const answer = yield* terminal.question<ApprovalReply | { readonly message: string }>(
        promptText(style, request),
        (key) => {
          if (line !== undefined) {
            const message = line(key)
            return message === undefined ? undefined : { message }
          }
          const meaning = keyMeaning(key)
          if (meaning === undefined) return undefined
          if (meaning === "interrupt") {
            ctrlC()
            return undefined
          }
          if (meaning === "eof") return "reject"
          if (meaning === "next" || meaning === "previous") {
            select(moveChoice(selected, meaning === "next" ? 1 : -1))
            return undefined
          }
          if (meaning !== "confirm") {
            select(meaning.select)
            return undefined
          }
          // Enter: nothing is chosen yet, or the choice is the answer
          if (selected === undefined) return undefined
          if (selected === "tell") {
            terminal.echo(`${style.red("rejected")}; ${style.dim("tell the model why (Enter sends it)")}\n  › `)
            line = lineEditor(terminal.echo, ctrlC)
            return undefined
          }
          return selected
        },
        () => (line === undefined ? notAnswered : `\n${notAnswered}`)
      )
      if (typeof answer !== "string") {
        yield* terminal.write("\n")
        const message = answer.message.trim()
        return message === "" ? "reject" : { reply: "reject", message }
      }
      const text = answered[answer]
      yield* terminal.write(`${answer === "reject" ? style.red(text) : style.green(text)}\n`)
      return answer
    })

  const serve = (permissionId: string): Effect.Effect<void> =>
    Effect.gen(function* () {
      const e = yield* entry(permissionId)
      // an ask that is over already is not shown
      if (yield* Deferred.isDone(e.cancelled)) return
      const answer = Effect.gen(function* () {
        const request = yield* Deferred.await(e.request)
        const reply = yield* prompt(request)
        yield* Deferred.succeed(e.reply, reply)
      })
      yield* Effect.raceFirst(answer, Deferred.await(e.cancelled))
    }).pipe(Effect.ensuring(Effect.sync(() => entries.delete(permissionId))))

  const close = Effect.suspend(() => {
    closed = true
    return Effect.forEach(Array.from(entries.values()), (e) => Deferred.succeed(e.cancelled, undefined), {
      discard: true
    })
  })

  return { approver: { ask }, serve, close }
}

/**
 * The keys of one chunk read from a raw terminal, in order: each character is a key, and an escape
 * sequence is one: `ESC [ … final` (CSI: arrow keys, Delete …), `ESC O x` (SS3: arrow and function
 * keys in application mode), `ESC x` (Alt+x), or a lone `ESC` at the chunk's end.
 */
export const splitKeys = (chunk: string): ReadonlyArray<string> => {
  const chars = Array.from(chunk)
  const keys: Array<string> = []
  let i = 0
  while (i < chars.length) {
    if (chars[i] !== "\u001b") {
      keys.push(chars[i++]!)
      continue
    }
    // ESCs in a row belong together (Alt+arrow is ESC ESC [ A)
    let end = i + 1
    while (end < chars.length && chars[end] === "\u001b") end++
    if (chars[end] === "[") {
      end++
      // `ESC [ [ x`: the Linux console's function keys
      if (chars[end] === "[") end += 2
      else {
        // parameters and intermediates (0x20-0x3f), then one final character (0x40-0x7e)
        while (end < chars.length && /[\x20-\x3f]/.test(chars[end]!)) end++
        end++
      }
    } else if (chars[end] === "O") end += 2
    else end++
    end = Math.min(end, chars.length)
    keys.push(chars.slice(i, end).join(""))
    i = end
  }
  return keys
}

/**
 * Whether a key from `splitKeys` is an escape sequence cut short by the end of its read (its rest
 * may come in the next read): a lone ESC, `ESC [` with parameters but no final character, `ESC O`.
 */
export const isUnfinishedSequence = (key: string): boolean => {
  if (!key.startsWith("\u001b")) return false
  let escapes = 0
  while (key[escapes] === "\u001b") escapes++
  const rest = key.slice(escapes)
  return rest === "" || rest === "O" || rest === "[[" || /^\[[\x20-\x3f]*$/.test(rest)
}

/** How long the start of an escape sequence at the end of a read waits for its rest. */
const SEQUENCE_WAIT_MS = 50

/** How long keys typed before a question are dropped, once the terminal is in raw mode. */
const TYPEAHEAD_MS = 30

/**
 * The process's terminal: the prompt is written to `output` (stderr), keys are read from `input`
 * (stdin) in raw mode; a chunk holds one key press or several (`splitKeys`: typed quickly, they
 * count in order; an escape sequence — an arrow key — is one key, and no answer, also when it is
 * split over two reads). Raw mode is set and what was typed before is read and dropped for
 * `TYPEAHEAD_MS` before the question is written, so a key pressed after the question is visible is
 * never dropped.
 */
export const nodeTerminal = (input: NodeJS.ReadStream, output: NodeJS.WriteStream): PromptTerminal => ({
  write: (text) => Effect.sync(() => void output.write(text)),
  echo: (text) => void output.write(text),
  columns: () => output.columns,
  question: <A>(text: string, choose: (key: string) => A | undefined, interrupted: string | (() => string)) =>
    Effect.acquireUseRelease(
      Effect.sync(() => {
        const wasRaw = input.isRaw
        // a character of several bytes split over two reads is decoded whole
        input.setEncoding("utf8")
        input.setRawMode(true)
        input.resume()
        return wasRaw
      }),
      () =>
        Effect.async<A>((resume) => {
          let listening = false
          /** the start of an escape sequence the previous read ended with, and when it came */
          let unfinished: { readonly text: string; readonly at: number } | undefined
          const onData = (chunk: Buffer | string) => {
            let text = chunk.toString()
            if (!listening) {
              // typeahead: dropped, but a Ctrl-C in it still interrupts
              if (text.includes("\u0003")) choose("\u0003")
              return
            }
            // an escape sequence split over two reads is put together again (its pieces must not
            // count as keys); what waited too long was an Esc of its own
            if (unfinished !== undefined && Date.now() - unfinished.at <= SEQUENCE_WAIT_MS) {
              text = unfinished.text + text
            }
            unfinished = undefined
            const keys = splitKeys(text)
            const last = keys.at(-1)
            if (last !== undefined && isUnfinishedSequence(last)) {
              unfinished = { text: last, at: Date.now() }
            }
            // keys pressed quickly (or while the process was busy) arrive in one chunk: each counts
            for (const one of keys) {
              const choice = choose(one)
              if (choice === undefined) continue
              input.off("data", onData)
              resume(Effect.succeed(choice))
              return
            }
          }
          input.on("data", onData)
          const timer = setTimeout(() => {
            listening = true
            output.write(text)
          }, TYPEAHEAD_MS)
          return Effect.sync(() => {
            clearTimeout(timer)
            input.off("data", onData)
            if (listening) output.write(typeof interrupted === "string" ? interrupted : interrupted())
          })
        }),
      (wasRaw) =>
        Effect.sync(() => {
          input.setRawMode(wasRaw)
          input.pause()
        })
    )
})

/** Whether `logbook run` can ask the user: stdin and stderr are both a terminal. */
export const canPrompt = (input: NodeJS.ReadStream, output: NodeJS.WriteStream): boolean =>
  input.isTTY === true && output.isTTY === true && typeof input.setRawMode === "function"
