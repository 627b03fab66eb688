/**
 * The interactive Approver's desk (src/cli/approvalPrompt.ts) with a scripted terminal: the kernel's
 * ask and the output follower's prompt meet in either order, keys select an answer and Enter
 * confirms it, an interrupt or the end of the turn ends it. Through a real terminal:
 * test/integration/approve.test.ts.
 */
import { EventEmitter } from "node:events"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Queue } from "effect"
import {
  type ApprovalDesk,
  choicesLine,
  isUnfinishedSequence,
  keyMeaning,
  makeApprovalDesk,
  moveChoice,
  nodeTerminal,
  type PromptTerminal,
  splitKeys
} from "../../src/cli/approvalPrompt.js"
import { makeStyle } from "../../src/cli/render.js"
import { CallId, SessionId } from "../../src/domain/Ids.js"
import type { ApprovalRequest } from "../../src/tools/Approver.js"

const request = (permissionId: string, subject = "rm -rf build"): ApprovalRequest => ({
  sessionId: SessionId.make("s"),
  permissionId,
  callId: CallId.make(`call-${permissionId}`),
  tool: "bash",
  subject,
  outside: false,
  rule: "rm *",
  reason: `bash \`${subject}\` needs approval by the rule "rm *"`
})

/** A terminal whose keys come from a queue; what it shows is collected, `asking` says a question waits. */
const scripted = Effect.gen(function* () {
  const keys = yield* Queue.unbounded<string>()
  const shown: Array<string> = []
  const asking = yield* Deferred.make<void>()
  const terminal: PromptTerminal = {
    write: (text) => Effect.sync(() => void shown.push(text)),
    echo: (text) => void shown.push(text),
    columns: () => 200,
    question: <A>(text: string, choose: (key: string) => A | undefined, interrupted: string | (() => string)) =>
      Effect.gen(function* () {
        shown.push(text)
        yield* Deferred.succeed(asking, undefined)
        while (true) {
          const choice = choose(yield* Queue.take(keys))
          if (choice !== undefined) return choice
        }
      }).pipe(
        Effect.onInterrupt(() =>
          Effect.sync(() => void shown.push(typeof interrupted === "string" ? interrupted : interrupted()))
        )
      )
  }
  return { keys, shown, asking, terminal }
})

/** Enough of a terminal's stdin for `nodeTerminal`: raw mode, and `data` events the test emits. */
const fakeTty = () => {
  const emitter = new EventEmitter() as EventEmitter & {
    isRaw: boolean
    setEncoding: (encoding: string) => unknown
    setRawMode: (raw: boolean) => void
    resume: () => void
    pause: () => void
  }
  emitter.isRaw = false
  emitter.setEncoding = () => emitter
  emitter.setRawMode = (raw) => {
    emitter.isRaw = raw
  }
  emitter.resume = () => {}
  emitter.pause = () => {}
  return emitter
}

/**
 * One ask answered through `nodeTerminal` over a fake TTY: once the question is shown (the typeahead
 * window is over), `chunks` arrive as reads; returns the answer and the fake TTY.
 */
const answerOnNodeTerminal = (chunks: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const input = fakeTty()
    const output: Array<string> = []
    const desk = makeApprovalDesk({
      terminal: nodeTerminal(
        input as unknown as NodeJS.ReadStream,
        { write: (text: string) => output.push(text), columns: 200 } as unknown as NodeJS.WriteStream
      ),
      style: makeStyle(false),
      onCtrlC: Effect.void
    })
    const asking = yield* Effect.fork(desk.approver.ask(request("p1")))
    const serving = yield* Effect.fork(desk.serve("p1"))
    while (!output.join("").includes("› ")) yield* Effect.sleep("5 millis")
    for (const chunk of chunks) input.emit("data", Buffer.from(chunk))
    const answer = yield* Fiber.join(asking)
    yield* Fiber.join(serving)
    return { answer, input }
  })

const setup = Effect.gen(function* () {
  const t = yield* scripted
  let ctrlC = 0
  const desk: ApprovalDesk = makeApprovalDesk({
    terminal: t.terminal,
    style: makeStyle(false),
    onCtrlC: Effect.sync(() => void ctrlC++)
  })
  return { ...t, desk, ctrlCs: () => ctrlC }
})

describe("splitKeys", () => {
  it("a chunk read from the terminal is its keys in order; an escape sequence is one key to the chunk's end", () => {
    expect(splitKeys("r")).toEqual(["r"])
    // two keys pressed quickly (or while logbook was busy) arrive together: both count, in order
    expect(splitKeys("xr")).toEqual(["x", "r"])
    expect(splitKeys("\u001b[A")).toEqual(["\u001b[A"])
    expect(splitKeys("x\u001b[B")).toEqual(["x", "\u001b[B"])
    // an escape sequence is one key, and what follows it in the chunk is kept
    expect(splitKeys("\u001b[Ddef")).toEqual(["\u001b[D", "d", "e", "f"])
    expect(splitKeys("\u001b[1;5Cx")).toEqual(["\u001b[1;5C", "x"])
    expect(splitKeys("\u001bOAy")).toEqual(["\u001bOA", "y"])
    expect(splitKeys("\u001bx")).toEqual(["\u001bx"])
    expect(splitKeys("a\u001b")).toEqual(["a", "\u001b"])
    expect(splitKeys("\u001b[")).toEqual(["\u001b["])
    // Alt+arrow (ESC ESC [ A), the Linux console's F1 (ESC [ [ A), Alt+SS3: one key each
    expect(splitKeys("\u001b\u001b[Ar")).toEqual(["\u001b\u001b[A", "r"])
    expect(splitKeys("\u001b[[Ar")).toEqual(["\u001b[[A", "r"])
    expect(splitKeys("\u001b\u001bOAr")).toEqual(["\u001b\u001bOA", "r"])
    // a sequence cut short by the end of a read is recognised as such (its rest comes next)
    expect(
      ["\u001b", "\u001b[", "\u001b[1;5", "\u001bO", "\u001b[[", "\u001b\u001b["].map(isUnfinishedSequence)
    ).toEqual([true, true, true, true, true, true])
    expect(["\u001b[A", "\u001bOA", "\u001bx", "a"].map(isUnfinishedSequence)).toEqual([false, false, false, false])
    expect(splitKeys("é\u0003")).toEqual(["é", "\u0003"])
    // each key counts, in order, as when they come one by one
    expect(splitKeys("xr\r").map(keyMeaning)).toEqual([undefined, { select: "reject" }, "confirm"])
  })
})

describe("keyMeaning", () => {
  it("letters select, arrows move, Enter confirms; Ctrl-D rejects, Ctrl-C interrupts; anything else means nothing", () => {
    expect(["o", "y", "a", "r", "n", "t"].map(keyMeaning)).toEqual([
      { select: "once" },
      { select: "once" },
      { select: "always" },
      { select: "reject" },
      { select: "reject" },
      { select: "tell" }
    ])
    expect(["\r", "\n"].map(keyMeaning)).toEqual(["confirm", "confirm"])
    expect(["\u001b[C", "\u001b[B", "\u001bOC", "\t"].map(keyMeaning)).toEqual(["next", "next", "next", "next"])
    expect(["\u001b[D", "\u001b[A", "\u001bOA", "\u001b[Z"].map(keyMeaning)).toEqual([
      "previous",
      "previous",
      "previous",
      "previous"
    ])
    expect(keyMeaning("\u0004")).toBe("eof")
    expect(keyMeaning("\u0003")).toBe("interrupt")
    // capitals mean nothing: an escape sequence ends with one (ESC [ A is the up arrow), and a piece of
    // a sequence split over two reads must not count
    expect(
      ["O", "A", "R", "T", "[", "\u001b", "x", "oa", " ", "\u001b[1;5A", "\u001b\u001b[A"].map(keyMeaning)
    ).toEqual(Array(11).fill(undefined))
  })

  it("the arrows go round the choices; from none, the first or the last", () => {
    expect(moveChoice(undefined, 1)).toBe("once")
    expect(moveChoice(undefined, -1)).toBe("tell")
    expect(moveChoice("once", 1)).toBe("always")
    expect(moveChoice("tell", 1)).toBe("once")
    expect(moveChoice("once", -1)).toBe("tell")
  })
})

/** The choices' line redrawn (a line of 200 columns or less: one row) with `selected` highlighted. */
const redrawn = (selected: Parameters<typeof choicesLine>[1]) => `\r\u001b[2K${choicesLine(makeStyle(false), selected)}`

describe("the approval desk", () => {
  it.effect("ask first, then the prompt: the choice confirmed with Enter reaches the kernel, and is shown", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const asking = yield* Effect.fork(t.desk.approver.ask(request("p1")))
      const serving = yield* Effect.fork(t.desk.serve("p1"))
      yield* Deferred.await(t.asking)
      // a stray key and Enter with nothing chosen answer nothing; `a` chooses, Enter confirms
      yield* Queue.offerAll(t.keys, ["x", "\r", "a", "\r"])
      expect(yield* Fiber.join(asking)).toBe("always")
      yield* Fiber.join(serving)
      expect(t.shown.join("")).toBe(
        "? bash rm -rf build\n" +
          '  bash `rm -rf build` needs approval by the rule "rm *"\n' +
          "  o once · a always (this exact call, this session) · r reject · t reject and tell the model why " +
          "— choose, then Enter › " +
          "\r\u001b[2K  o once · [a always (this exact call, this session)] · r reject · " +
          "t reject and tell the model why — choose, then Enter › " +
          "allowed for the rest of this session\n"
      )
    })
  )

  it.effect("a word typed into the wrong window never answers: `clear` moves the choice, nothing more", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const asking = yield* Effect.fork(t.desk.approver.ask(request("p1")))
      const serving = yield* Effect.fork(t.desk.serve("p1"))
      yield* Deferred.await(t.asking)
      yield* Queue.offerAll(t.keys, splitKeys("clear"))
      // every key was read (the last one, `r`, chose reject), and the ask is still open
      while (!t.shown.join("").endsWith(redrawn("reject"))) yield* Effect.yieldNow()
      expect(asking.unsafePoll()).toBeNull()
      // `a` then Enter: always
      yield* Queue.offerAll(t.keys, ["a", "\r"])
      expect(yield* Fiber.join(asking)).toBe("always")
      yield* Fiber.join(serving)
    })
  )

  it.effect("the arrows move the choice (round), Enter confirms it", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const asking = yield* Effect.fork(t.desk.approver.ask(request("p1")))
      const serving = yield* Effect.fork(t.desk.serve("p1"))
      yield* Deferred.await(t.asking)
      // right: once; left twice: tell, reject; Enter
      yield* Queue.offerAll(t.keys, ["\u001b[C", "\u001b[D", "\u001b[D", "\r"])
      expect(yield* Fiber.join(asking)).toBe("reject")
      yield* Fiber.join(serving)
      const shown = t.shown.join("")
      expect(shown).toContain(redrawn("once"))
      expect(shown).toContain(redrawn("tell"))
      expect(shown.endsWith(`${redrawn("reject")}rejected\n`)).toBe(true)
    })
  )

  it.effect("Ctrl-D rejects at once", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const asking = yield* Effect.fork(t.desk.approver.ask(request("p1")))
      yield* Effect.fork(t.desk.serve("p1"))
      yield* Deferred.await(t.asking)
      yield* Queue.offer(t.keys, "\u0004")
      expect(yield* Fiber.join(asking)).toBe("reject")
    })
  )

  it.effect(
    "the prompt first (the follower reached permission.asked before the kernel asked): it waits for the request",
    () =>
      Effect.gen(function* () {
        const t = yield* setup
        const serving = yield* Effect.fork(t.desk.serve("p1"))
        yield* Effect.yieldNow()
        expect(t.shown).toEqual([])
        const asking = yield* Effect.fork(t.desk.approver.ask(request("p1")))
        yield* Deferred.await(t.asking)
        yield* Queue.offerAll(t.keys, ["r", "\r"])
        expect(yield* Fiber.join(asking)).toBe("reject")
        yield* Fiber.join(serving)
        expect(t.shown.at(-1)).toBe("rejected\n")
      })
  )

  it.effect(
    "t, Enter: rejected with the line typed after it (echoed, Backspace works, Ctrl-C interrupts, Enter sends)",
    () =>
      Effect.gen(function* () {
        const t = yield* setup
        const asking = yield* Effect.fork(t.desk.approver.ask(request("p1")))
        const serving = yield* Effect.fork(t.desk.serve("p1"))
        yield* Deferred.await(t.asking)
        // a paste arrives as one chunk: split into its keys as the terminal does
        const typed = [
          "t",
          "\r",
          ...splitKeys(" use git stxx"),
          "\u007f",
          "\u007f",
          "ash",
          "\u0003",
          "\u0001",
          "\u001b[D",
          " ",
          "\r"
        ]
        yield* Queue.offerAll(
          t.keys,
          typed.flatMap((chunk) => splitKeys(chunk))
        )
        expect(yield* Fiber.join(asking)).toEqual({ reply: "reject", message: "use git stash" })
        yield* Fiber.join(serving)
        expect(t.ctrlCs()).toBe(1)
        const shown = t.shown.join("")
        expect(shown).toContain("rejected; tell the model why (Enter sends it)\n  › ")
        expect(shown.slice(shown.lastIndexOf("› "))).toBe("›  use git stxx\b \b\b \bash \n")
      })
  )

  it.effect(
    "t, Enter, then Enter at once: a rejection without a message; Esc (an arrow key's start) does not end the line",
    () =>
      Effect.gen(function* () {
        const t = yield* setup
        const asking = yield* Effect.fork(t.desk.approver.ask(request("p1")))
        const serving = yield* Effect.fork(t.desk.serve("p1"))
        yield* Deferred.await(t.asking)
        yield* Queue.offerAll(t.keys, ["t", "\r", "\u001b", "\u001b[D", "\r"])
        expect(yield* Fiber.join(asking)).toBe("reject")
        yield* Fiber.join(serving)
      })
  )

  it.live("nodeTerminal: no escape sequence answers or counts as a letter, whole or split over two reads", () =>
    Effect.gen(function* () {
      // sequences with no meaning here (Alt+Up, F1 of the Linux console, Ctrl+arrows), whole or split
      const cases = [["\u001b\u001b[A"], ["\u001b[[A"], ["\u001b\u001bOA"], ["\u001b[1;5", "A"], ["\u001b[", "1;5C"]]
      for (const chunks of cases) {
        // none of them selects anything (a piece is no letter): Enter after them has nothing to confirm
        const { answer } = yield* answerOnNodeTerminal([...chunks, "\r", "r", "\r"])
        expect(answer, JSON.stringify(chunks)).toBe("reject")
      }
      // an arrow split over two reads is put together again: it moves the choice, it is no `A` or `O`
      for (const chunks of [
        ["\u001b", "[C"],
        ["\u001b", "OB"]
      ]) {
        const { answer } = yield* answerOnNodeTerminal([...chunks, "\r"])
        expect(answer, JSON.stringify(chunks)).toBe("once")
      }
    })
  )

  it.live("nodeTerminal: the message typed right after t and Enter, even in the same read, is kept", () =>
    Effect.gen(function* () {
      for (const chunks of [["t\ruse pnpm\r"], ["t", "\ruse pnpm\r"], ["t\r", "use ", "pnpm", "\r"]]) {
        const { answer, input } = yield* answerOnNodeTerminal(chunks)
        expect(answer, JSON.stringify(chunks)).toEqual({ reply: "reject", message: "use pnpm" })
        expect(input.isRaw).toBe(false)
      }
    })
  )

  it.effect("Ctrl-C at the prompt raises the interrupt and keeps waiting; the interrupted ask ends the prompt", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const asking = yield* Effect.fork(t.desk.approver.ask(request("p1")))
      const serving = yield* Effect.fork(t.desk.serve("p1"))
      yield* Deferred.await(t.asking)
      yield* Queue.offer(t.keys, "\u0003")
      // the key is read and the run's interrupt raised; no answer yet
      while (t.ctrlCs() === 0) yield* Effect.yieldNow()
      expect(asking.unsafePoll()).toBeNull()
      // the run's interrupt reaches the ask
      const exit = yield* Fiber.interrupt(asking)
      expect(Exit.isInterrupted(exit)).toBe(true)
      yield* Fiber.join(serving)
      expect(t.shown.at(-1)).toBe("(not answered: interrupted)\n")
    })
  )

  it.effect("close ends a prompt whose request never came (the turn ended between the ask's event and the ask)", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const serving = yield* Effect.fork(t.desk.serve("p-lost"))
      yield* Effect.yieldNow()
      yield* t.desk.close
      yield* Fiber.join(serving)
      expect(t.shown).toEqual([])
    })
  )

  it.effect("asks that ended before the follower reached them: a late serve returns at once (no hang)", () =>
    Effect.gen(function* () {
      const t = yield* setup
      // two parallel asks; the follower prompts for the first; Ctrl-C ends the turn: both asks end
      const first = yield* Effect.fork(t.desk.approver.ask(request("p1", "rm a")))
      const second = yield* Effect.fork(t.desk.approver.ask(request("p2", "rm b")))
      const follower = yield* Effect.fork(Effect.zipRight(t.desk.serve("p1"), t.desk.serve("p2")))
      yield* Deferred.await(t.asking)
      yield* Fiber.interrupt(first)
      yield* Fiber.interrupt(second)
      yield* t.desk.close
      yield* Fiber.join(follower)
      // the first prompt was shown and ended unanswered; the second was never shown
      expect(t.shown.filter((s) => s.startsWith("? bash")).map((s) => s.split("\n")[0])).toEqual(["? bash rm a"])
      expect(t.shown.at(-1)).toBe("(not answered: interrupted)\n")
    })
  )

  it.effect("after close, a serve returns at once and an ask is rejected", () =>
    Effect.gen(function* () {
      const t = yield* setup
      yield* t.desk.close
      yield* t.desk.serve("late")
      expect(yield* t.desk.approver.ask(request("later"))).toBe("reject")
      expect(t.shown).toEqual([])
    })
  )

  it.effect("two asks at once (parallel calls) are prompted one after the other, each answered on its own", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const first = yield* Effect.fork(t.desk.approver.ask(request("p1", "rm a")))
      const second = yield* Effect.fork(t.desk.approver.ask(request("p2", "rm b")))
      // the follower serves the asks in the order of their events
      const serving = yield* Effect.fork(Effect.zipRight(t.desk.serve("p1"), t.desk.serve("p2")))
      yield* Queue.offerAll(t.keys, ["o", "\r", "r", "\r"])
      expect(yield* Fiber.join(first)).toBe("once")
      expect(yield* Fiber.join(second)).toBe("reject")
      yield* Fiber.join(serving)
      const text = t.shown.join("")
      expect(text.indexOf("? bash rm a")).toBeLessThan(text.indexOf("allowed once"))
      expect(text.indexOf("allowed once")).toBeLessThan(text.indexOf("? bash rm b"))
      expect(text.endsWith("rejected\n")).toBe(true)
    })
  )
})
