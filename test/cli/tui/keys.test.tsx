/**
 * The screen's keys (App.tsx), typed into ink-testing-library's stdin one write each: what each
 * one calls of `Actions` and what the prompt then shows. Every step waits for the frame to show
 * its effect before the next key (Ink hands a key to the handler of the last render).
 */
import { afterEach, describe, expect, it } from "vitest"
import type { Overlay, UiState } from "../../../src/cli/tui/App.js"
import type { ApprovalRequest } from "../../../src/tools/Approver.js"
import {
  cid,
  fold,
  keys,
  Log,
  type Mounted,
  mid,
  mount,
  press,
  SID,
  settle,
  tid,
  uiState,
  untilFrame,
  untilShown
} from "./support.js"

let mounted: Array<Mounted> = []
const show = (ui: UiState): Mounted => {
  const m = mount(ui)
  mounted.push(m)
  return m
}
afterEach(() => {
  for (const m of mounted) m.unmount()
  mounted = []
})

const idle = (more: Partial<UiState> = {}) => uiState(fold(new Log().created().all()), more)
const busy = (more: Partial<UiState> = {}) => uiState(fold(new Log().created().startTurn("go").all()), more)

const IDLE_HINT = "Ask the agent"
const BUSY_HINT = "Enter steers the agent now"

/** The prompt's lines (inside its box), without the box. */
const promptLines = (frame: string): ReadonlyArray<string> => {
  const lines = frame.split("\n")
  const last = (start: string) => lines.length - 1 - [...lines].reverse().findIndex((l) => l.startsWith(start))
  return lines.slice(last("╭") + 1, last("╰")).map((l) => l.slice(1, -1).trimEnd())
}

/** Types `text` and waits until the prompt shows it (on its last line). */
const type = async (m: Mounted, text: string) => {
  await press(m, text)
  await untilFrame(m, (f) => (promptLines(f).at(-1) ?? "").includes(text), `the prompt holding ${JSON.stringify(text)}`)
}

describe("sending", () => {
  it("Enter sends the prompt and empties it; a blank prompt sends nothing", async () => {
    const m = show(idle())
    await untilShown(m, IDLE_HINT)
    await press(m, keys.enter, "   ", keys.enter)
    await settle()
    expect(m.actions.submit).not.toHaveBeenCalled()
    await press(m, keys.ctrlU)
    await type(m, "list the files")
    expect(promptLines(m.frame())).toEqual(["› list the files"])
    await press(m, keys.enter)
    await untilShown(m, IDLE_HINT)
    expect(m.actions.submit).toHaveBeenCalledTimes(1)
    expect(m.actions.submit).toHaveBeenCalledWith("list the files", "prompt")
  })

  it("while the agent works, Enter still sends (the controller makes it a steer)", async () => {
    const m = show(busy())
    await untilShown(m, BUSY_HINT)
    await type(m, "use zod")
    await press(m, keys.enter)
    await untilShown(m, BUSY_HINT)
    expect(m.actions.submit).toHaveBeenCalledWith("use zod", "prompt")
  })

  it("Alt+Enter and Tab queue", async () => {
    const m = show(busy())
    await untilShown(m, BUSY_HINT)
    await type(m, "then run the tests")
    await press(m, keys.altEnter)
    await untilShown(m, BUSY_HINT)
    await type(m, "and commit")
    await press(m, keys.tab)
    await untilShown(m, BUSY_HINT)
    expect(m.actions.submit.mock.calls).toEqual([
      ["then run the tests", "queue"],
      ["and commit", "queue"]
    ])
  })

  it("text typed fast with its Enter in one read is sent up to the Enter", async () => {
    const m = show(idle())
    await untilShown(m, IDLE_HINT)
    await press(m, "first\rsec")
    await untilFrame(m, (f) => promptLines(f)[0] === "› sec", "the rest in the prompt")
    expect(m.actions.submit).toHaveBeenCalledWith("first", "prompt")
  })
})

describe("new lines", () => {
  it("\\ then Enter makes a new line instead of sending; the prompt shows both lines", async () => {
    const m = show(idle())
    await untilShown(m, IDLE_HINT)
    await type(m, "first line\\")
    await press(m, keys.enter)
    await untilFrame(m, (f) => promptLines(f).length === 2, "two lines")
    await type(m, "second line")
    expect(promptLines(m.frame())).toEqual(["› first line", "  second line"])
    expect(m.actions.submit).not.toHaveBeenCalled()
    await press(m, keys.enter)
    await untilShown(m, IDLE_HINT)
    expect(m.actions.submit).toHaveBeenCalledWith("first line\nsecond line", "prompt")
  })

  it("Ctrl-J makes a new line", async () => {
    const m = show(idle())
    await untilShown(m, IDLE_HINT)
    await type(m, "one")
    await press(m, keys.ctrlJ)
    await untilFrame(m, (f) => promptLines(f).length === 2, "two lines")
    await type(m, "two")
    expect(promptLines(m.frame())).toEqual(["› one", "  two"])
    expect(m.actions.submit).not.toHaveBeenCalled()
  })

  it("a bracketed paste inserts its lines and sends nothing", async () => {
    const m = show(idle())
    await untilShown(m, IDLE_HINT)
    await press(m, keys.paste("line1\rline2"))
    await untilFrame(m, (f) => promptLines(f).length === 2, "two lines")
    expect(promptLines(m.frame())).toEqual(["› line1", "  line2"])
    expect(m.actions.submit).not.toHaveBeenCalled()
    await press(m, keys.enter)
    await untilShown(m, IDLE_HINT)
    expect(m.actions.submit).toHaveBeenCalledWith("line1\nline2", "prompt")
  })
})

describe("editing and history", () => {
  it("arrows, backspace, Ctrl-W and Ctrl-U edit where the cursor is", async () => {
    const m = show(idle())
    await untilShown(m, IDLE_HINT)
    await type(m, "git comit")
    await press(m, keys.left, keys.left)
    await press(m, "m")
    await untilShown(m, "git commit")
    await press(m, keys.right, keys.right, keys.backspace)
    await untilFrame(m, (f) => promptLines(f)[0] === "› git commi", "the last letter gone")
    await press(m, keys.ctrlW)
    await untilFrame(m, (f) => promptLines(f)[0] === "› git", "the word gone")
    await press(m, keys.ctrlU)
    await untilShown(m, IDLE_HINT)
  })

  it("Up and Down walk the history (earlier sessions' too) and come back to the draft", async () => {
    const m = show(idle({ history: ["older message", "newer message"] }))
    await untilShown(m, IDLE_HINT)
    await type(m, "draft")
    await press(m, keys.up)
    await untilShown(m, "› newer message")
    await press(m, keys.up)
    await untilShown(m, "› older message")
    await press(m, keys.up)
    await settle()
    expect(promptLines(m.frame())).toEqual(["› older message"])
    await press(m, keys.down)
    await untilShown(m, "› newer message")
    await press(m, keys.down)
    await untilShown(m, "› draft")
  })

  it("what was sent comes back with Up", async () => {
    const m = show(idle())
    await untilShown(m, IDLE_HINT)
    await type(m, "do it again")
    await press(m, keys.enter)
    await untilShown(m, IDLE_HINT)
    await press(m, keys.up)
    await untilShown(m, "› do it again")
  })
})

describe("messages not delivered yet", () => {
  /** a turn that runs with a steered and a queued message waiting; or, after an interrupt, the queue */
  const waiting = (options: { readonly interrupted?: boolean } = {}) => {
    const log = new Log().created().startTurn("go")
    log.add("user.message", { messageId: mid("s1"), text: "use zod", mode: "steer" })
    log.add("user.message", { messageId: mid("q1"), text: "then run the tests", mode: "queue" })
    if (options.interrupted === true) {
      log.add("user.withdrawn", { messageId: mid("s1") })
      log.add("turn.interrupted", { turnId: tid("t1"), reason: "user" })
      log.add("session.status", { status: { _tag: "idle" } })
    }
    return uiState(fold(log.all()))
  }

  it("Up on an empty prompt takes back the newest one; its text comes into the prompt, before what was typed", async () => {
    const m = show(waiting())
    await untilShown(m, "⧗ queued: then run the tests")
    expect(m.frame()).toContain("↑ on an empty prompt edits the last one")
    await press(m, keys.up)
    await settle()
    expect(m.actions.editPending).toHaveBeenCalledTimes(1)
    // the controller hands the text over once the session withdrew it; typed meanwhile stays after it
    await type(m, "and lint")
    m.actions.editPending.mock.calls[0]![0]("then run the tests")
    await untilFrame(
      m,
      (f) => promptLines(f).join("|") === "› then run the tests|  and lint",
      "the withdrawn text before the typed one"
    )
  })

  it("Up with text in the prompt, or with nothing waiting, walks the history as before", async () => {
    const m = show(waiting())
    await untilShown(m, "⧗ queued")
    await type(m, "x")
    await press(m, keys.up)
    await settle()
    expect(m.actions.editPending).not.toHaveBeenCalled()
    const plain = show(idle({ history: ["older"] }))
    await untilShown(plain, IDLE_HINT)
    await press(plain, keys.up)
    await untilShown(plain, "› older")
    expect(plain.actions.editPending).not.toHaveBeenCalled()
  })

  it("idle with messages left queued: Enter on an empty prompt sends them; with text it sends the text", async () => {
    const m = show(waiting({ interrupted: true }))
    await untilShown(m, "⧗ queued: then run the tests")
    expect(m.frame()).not.toContain("use zod")
    expect(m.frame()).toContain("Enter sends them")
    await press(m, keys.enter)
    await settle()
    expect(m.actions.sendPending).toHaveBeenCalledTimes(1)
    expect(m.actions.submit).not.toHaveBeenCalled()
    await type(m, "more")
    await press(m, keys.enter)
    await settle()
    expect(m.actions.submit).toHaveBeenCalledWith("more", "prompt")
    expect(m.actions.sendPending).toHaveBeenCalledTimes(1)
  })

  it("while the agent works, Enter on an empty prompt sends nothing (the turn delivers the queue itself)", async () => {
    const m = show(waiting())
    await untilShown(m, "⧗ queued")
    await press(m, keys.enter)
    await settle()
    expect(m.actions.sendPending).not.toHaveBeenCalled()
    expect(m.actions.submit).not.toHaveBeenCalled()
  })
})

describe("leaving and interrupting", () => {
  it("Ctrl-D on an empty prompt quits; with text it deletes under the cursor", async () => {
    const m = show(idle())
    await untilShown(m, IDLE_HINT)
    await type(m, "abc")
    await press(m, keys.left, keys.ctrlD)
    await untilFrame(m, (f) => promptLines(f)[0] === "› ab", "the c deleted")
    expect(m.actions.quit).not.toHaveBeenCalled()
    await press(m, keys.ctrlU)
    await untilShown(m, IDLE_HINT)
    await press(m, keys.ctrlD)
    await untilFrame(m, () => m.actions.quit.mock.calls.length === 1, "quit")
  })

  it("Esc interrupts while the agent works, and does nothing while it is idle", async () => {
    const idleScreen = show(idle())
    await untilShown(idleScreen, IDLE_HINT)
    await press(idleScreen, keys.escape)
    await settle()
    expect(idleScreen.actions.interrupt).not.toHaveBeenCalled()
    expect(idleScreen.actions.quit).not.toHaveBeenCalled()

    const busyScreen = show(busy())
    await untilShown(busyScreen, BUSY_HINT)
    await press(busyScreen, keys.escape)
    await untilFrame(busyScreen, () => busyScreen.actions.interrupt.mock.calls.length === 1, "an interrupt")
    expect(busyScreen.actions.quit).not.toHaveBeenCalled()
  })

  it("Ctrl-C while the agent works interrupts (it never quits)", async () => {
    const m = show(busy())
    await untilShown(m, BUSY_HINT)
    await press(m, keys.ctrlC)
    await untilFrame(m, () => m.actions.interrupt.mock.calls.length === 1, "an interrupt")
    await press(m, keys.ctrlC)
    await untilFrame(m, () => m.actions.interrupt.mock.calls.length === 2, "a second interrupt")
    expect(m.actions.quit).not.toHaveBeenCalled()
    expect(m.frame()).not.toContain("Press Ctrl-C again")
  })

  it("Ctrl-C while idle asks for a second one, which quits; another key in between starts over", async () => {
    const m = show(idle())
    await untilShown(m, IDLE_HINT)
    await press(m, keys.ctrlC)
    await untilShown(m, "Press Ctrl-C again to quit")
    expect(m.actions.quit).not.toHaveBeenCalled()
    await type(m, "x")
    await untilFrame(m, (f) => !f.includes("Press Ctrl-C again"), "the question gone")
    await press(m, keys.ctrlC)
    await untilShown(m, "Press Ctrl-C again to quit")
    expect(m.actions.quit).not.toHaveBeenCalled()
    await press(m, keys.ctrlC)
    await untilFrame(m, () => m.actions.quit.mock.calls.length === 1, "quit")
    expect(m.actions.interrupt).not.toHaveBeenCalled()
  })
})

describe("an approval question", () => {
  const request: ApprovalRequest = {
    sessionId: SID,
    permissionId: "p1",
    callId: cid("c1"),
    tool: "bash",
    subject: "rm -rf build",
    outside: false,
    rule: "rm *",
    reason: 'bash `rm -rf build` needs approval by the rule "rm *"'
  }
  const asking = () => busy({ approval: request })
  const selected = (frame: string) =>
    frame
      .split("\n")
      .find((l) => l.includes("❯"))
      ?.replace(/^║|║$/g, "")
      .trim()

  it("shows the tool, the command, the reason and the choices, the first selected", async () => {
    const m = show(asking())
    const frame = await untilShown(m, "Allow bash?")
    expect(frame).toContain("rm -rf build")
    expect(frame).toContain('needs approval by the rule "rm *"')
    expect(selected(frame)).toBe("❯ once (o)")
    for (const choice of ["always (this session) (a)", "reject (r)", "reject and tell the model why (t)"])
      expect(frame).toContain(choice)
  })

  it("a word typed while it is shown answers nothing (and does not go into the prompt)", async () => {
    const m = show(asking())
    await untilShown(m, "Allow bash?")
    for (const letter of "clear") await press(m, letter)
    // the last letter that names a choice selects it: every key has been seen
    await untilFrame(m, (f) => selected(f) === "❯ reject (r)", "reject selected")
    expect(m.actions.answer).not.toHaveBeenCalled()
    expect(m.actions.submit).not.toHaveBeenCalled()
    expect(m.frame()).toContain(BUSY_HINT)
  })

  it("a then Enter answers always", async () => {
    const m = show(asking())
    await untilShown(m, "Allow bash?")
    await press(m, "a")
    await untilFrame(m, (f) => selected(f) === "❯ always (this session) (a)", "always selected")
    expect(m.actions.answer).not.toHaveBeenCalled()
    await press(m, keys.enter)
    await untilFrame(m, () => m.actions.answer.mock.calls.length === 1, "an answer")
    expect(m.actions.answer).toHaveBeenCalledWith("always")
  })

  it("the arrows move the selection round; Enter answers the selected one", async () => {
    const m = show(asking())
    await untilShown(m, "Allow bash?")
    await press(m, keys.up)
    await untilFrame(m, (f) => selected(f) === "❯ reject and tell the model why (t)", "the last one")
    await press(m, keys.down)
    await untilFrame(m, (f) => selected(f) === "❯ once (o)", "the first again")
    await press(m, keys.down)
    await untilFrame(m, (f) => selected(f) === "❯ always (this session) (a)", "the second")
    await press(m, keys.down)
    await untilFrame(m, (f) => selected(f) === "❯ reject (r)", "the third")
    await press(m, keys.enter)
    await untilFrame(m, () => m.actions.answer.mock.calls.length === 1, "an answer")
    expect(m.actions.answer).toHaveBeenCalledWith("reject")
  })

  it("t then Enter asks why; the reason typed then Enter rejects with it", async () => {
    const m = show(asking())
    await untilShown(m, "Allow bash?")
    await press(m, "t")
    await untilFrame(m, (f) => selected(f) === "❯ reject and tell the model why (t)", "tell selected")
    await press(m, keys.enter)
    await untilShown(m, "Why (the model reads it; Enter sends):")
    expect(m.actions.answer).not.toHaveBeenCalled()
    for (const word of ["use ", "the ", "cached ", "copyy"]) await press(m, word)
    await untilShown(m, "copyy")
    await press(m, keys.backspace)
    await untilFrame(m, (f) => f.includes("use the cached copy") && !f.includes("copyy"), "the reason")
    // the letters of the reason chose nothing
    expect(m.actions.answer).not.toHaveBeenCalled()
    await press(m, keys.enter)
    await untilFrame(m, () => m.actions.answer.mock.calls.length === 1, "an answer")
    expect(m.actions.answer).toHaveBeenCalledWith({ reply: "reject", message: "use the cached copy" })
  })

  it("Esc while it is shown interrupts, as the question says", async () => {
    const m = show(asking())
    const frame = await untilShown(m, "Allow bash?")
    expect(frame).toContain("Esc interrupts")
    await press(m, keys.escape)
    await untilFrame(m, () => m.actions.interrupt.mock.calls.length === 1, "an interrupt")
    expect(m.actions.answer).not.toHaveBeenCalled()
  })

  it("Ctrl-C while it is shown interrupts", async () => {
    const m = show(asking())
    await untilShown(m, "Allow bash?")
    await press(m, keys.ctrlC)
    await untilFrame(m, () => m.actions.interrupt.mock.calls.length === 1, "an interrupt")
    expect(m.actions.answer).not.toHaveBeenCalled()
  })
})

/**
 * A terminal hands over what it has: keys typed while the screen was busy drawing, or sent by a
 * program (tmux send-keys), arrive in one read. Ink splits them into keys and calls the handler once
 * for each, synchronously, before React renders what the key before did (React 19 schedules the
 * render as a microtask): a handler must work on the state the keys before it left, not the drawn one.
 */
describe("several keys in one read", () => {
  it("Down Down Enter answers the choice they selected (reject), not the first one (allow once)", async () => {
    const m = show(
      busy({
        approval: {
          sessionId: SID,
          permissionId: "p1",
          callId: cid("c1"),
          tool: "bash",
          subject: "rm -rf /",
          outside: false,
          rule: undefined,
          reason: "needs approval"
        }
      })
    )
    await untilShown(m, "Allow bash?")
    m.write(`${keys.down}${keys.down}${keys.enter}`)
    await untilFrame(m, () => m.actions.answer.mock.calls.length > 0, "an answer")
    expect(m.actions.answer.mock.calls).toEqual([["reject"]])
  })

  it("text then Alt+Enter queues the text", async () => {
    const m = show(busy())
    await untilShown(m, BUSY_HINT)
    m.write(`run the tests${keys.altEnter}`)
    await untilFrame(m, () => m.actions.submit.mock.calls.length > 0, "a message")
    expect(m.actions.submit.mock.calls).toEqual([["run the tests", "queue"]])
    expect(m.frame()).toContain(BUSY_HINT)
  })

  it("text, Left, more text: nothing typed is lost", async () => {
    const m = show(idle())
    await untilShown(m, IDLE_HINT)
    m.write(`helo${keys.left}l${keys.right}!`)
    await untilFrame(m, (f) => promptLines(f)[0] === "› hello!", "hello!")
  })

  it("a pasted text that holds escape sequences arrives whole", async () => {
    const m = show(idle())
    await untilShown(m, IDLE_HINT)
    m.write(keys.paste("first \u001b[2Jsecond \u001b]0;title\u0007third"))
    // Ink splits the paste at each escape and drops the ESC: what is left of a sequence stays as text
    await untilFrame(m, (f) => promptLines(f)[0]?.endsWith("third") === true, "the end of the paste")
    expect(promptLines(m.frame())[0]).toMatch(/^› first .*second .*third$/)
    expect(m.actions.submit).not.toHaveBeenCalled()
  })

  it("Down Enter in the sessions picker opens the second session", async () => {
    const m = show(
      idle({
        overlay: {
          kind: "sessions",
          rows: [
            { id: "01JSESSIONA", label: "first" },
            { id: "01JSESSIONB", label: "second" }
          ]
        }
      })
    )
    await untilShown(m, "second")
    m.write(`${keys.down}${keys.enter}`)
    await untilFrame(m, () => m.actions.openSession.mock.calls.length > 0, "a session opened")
    expect(m.actions.openSession.mock.calls).toEqual([["01JSESSIONB"]])
  })
})

describe("overlays", () => {
  const sessions: Overlay = {
    kind: "sessions",
    rows: [
      { id: "01JSESSIONA", label: "2026-12-01 10:00  idle   first session  01JSESSIONA" },
      { id: "01JSESSIONB", label: "2026-12-01 11:00  idle   second session  01JSESSIONB" },
      { id: "01JSESSIONC", label: "2026-12-01 12:00  idle   third session  01JSESSIONC" }
    ]
  }
  const selectedRow = (frame: string) => frame.split("\n").find((l) => l.includes("❯"))

  it("help lists the keys and the commands; Esc closes it (and interrupts nothing); typing does not reach the prompt", async () => {
    const m = show(busy({ overlay: { kind: "help" } }))
    const frame = await untilShown(m, "Commands")
    for (const text of ["Keys", "Alt+Enter, Tab", "Ctrl-O", "/sessions", "/quit"]) expect(frame).toContain(text)
    await press(m, "x", keys.escape)
    await untilFrame(m, () => m.actions.closeOverlay.mock.calls.length === 1, "closed")
    expect(m.actions.interrupt).not.toHaveBeenCalled()
    expect(m.frame()).toContain(BUSY_HINT)
  })

  it("help closes with Enter and with q", async () => {
    const m = show(idle({ overlay: { kind: "help" } }))
    await untilShown(m, "Commands")
    await press(m, keys.enter)
    await untilFrame(m, () => m.actions.closeOverlay.mock.calls.length === 1, "closed by Enter")
    await press(m, "q")
    await untilFrame(m, () => m.actions.closeOverlay.mock.calls.length === 2, "closed by q")
    expect(m.actions.submit).not.toHaveBeenCalled()
  })

  it("the events list scrolls; it starts at its end", async () => {
    const lines = Array.from({ length: 100 }, (_, i) => `${String(i + 1).padStart(3)} text.delta event ${i + 1}`)
    const m = show(idle({ overlay: { kind: "events", title: `events of ${SID}`, lines } }))
    const frame = await untilShown(m, "100 events")
    expect(frame).toContain("100 text.delta event 100")
    expect(frame).not.toContain("  1 text.delta event 1 ")
    await press(m, "\u001b[H") // Home
    await untilShown(m, "  1 text.delta event 1")
    expect(m.frame()).not.toContain("event 100")
    await press(m, keys.down)
    await untilFrame(m, (f) => !f.includes("  1 text.delta event 1"), "one line down")
  })

  it("the sessions picker: arrows choose, Enter opens the chosen one", async () => {
    const m = show(idle({ overlay: sessions }))
    await untilShown(m, "first session")
    expect(selectedRow(m.frame())).toContain("first session")
    await press(m, keys.down)
    await untilFrame(m, (f) => selectedRow(f)?.includes("second session") === true, "the second chosen")
    await press(m, keys.down)
    await untilFrame(m, (f) => selectedRow(f)?.includes("third session") === true, "the third chosen")
    await press(m, keys.down)
    await settle()
    expect(selectedRow(m.frame())).toContain("third session")
    await press(m, keys.up)
    await untilFrame(m, (f) => selectedRow(f)?.includes("second session") === true, "back to the second")
    await press(m, keys.enter)
    await untilFrame(m, () => m.actions.openSession.mock.calls.length === 1, "opened")
    expect(m.actions.openSession).toHaveBeenCalledWith("01JSESSIONB")
  })

  it("the sessions picker closes with Esc without opening anything", async () => {
    const m = show(idle({ overlay: sessions }))
    await untilShown(m, "first session")
    await press(m, keys.escape)
    await untilFrame(m, () => m.actions.closeOverlay.mock.calls.length === 1, "closed")
    expect(m.actions.openSession).not.toHaveBeenCalled()
    expect(m.actions.interrupt).not.toHaveBeenCalled()
  })

  it("with no other session it says so", async () => {
    const m = show(idle({ overlay: { kind: "sessions", rows: [] } }))
    await untilShown(m, "no other sessions here")
  })
})
