/**
 * What the screen shows for scripted logs (App.tsx, Parts.tsx, Markdown.tsx): the transcript, tool
 * parts in each state, diffs, the status line, the pending messages; colours or none; the width;
 * and that nothing from the model or a command can put a control character on the terminal.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest"
import {
  CONTROL,
  cid,
  fixClock,
  fold,
  keys,
  Log,
  type Mounted,
  mid,
  mount,
  press,
  SID,
  T0,
  tid,
  uiState,
  untilFrame,
  untilShown,
  usage,
  withChalkLevel
} from "./support.js"

let mounted: Array<Mounted> = []
const show = (...args: Parameters<typeof mount>): Mounted => {
  const m = mount(...args)
  mounted.push(m)
  return m
}

// elapsed times and countdowns read the clock: the log's times are T0 + …, and so is "now"
let clock: ReturnType<typeof fixClock>
beforeEach(() => {
  clock = fixClock(T0)
})
afterEach(() => {
  for (const m of mounted) m.unmount()
  mounted = []
  vi.restoreAllMocks()
})

/** A turn that is streaming its first step. */
const streaming = () => new Log().created().startTurn("what is in src?")

const lines = (frame: string) => frame.split("\n")
/** The frame's line that contains `text` (the first one). */
const lineWith = (frame: string, text: string): string => {
  const line = lines(frame).find((l) => l.includes(text))
  if (line === undefined) throw new Error(`no line with ${JSON.stringify(text)} in:\n${frame}`)
  return line
}

describe("the transcript", () => {
  it("the user's message and the model's markdown, rendered: no ** or backticks left", async () => {
    const log = streaming()
    log.text("Here are **two files** and `index.ts`:\n\n")
    log.text("# Layout\n\n- first item\n- second *item*\n\n```ts\nconst x = 1\n```\n")
    clock.set(log.now)
    const m = show(uiState(fold(log.all())))
    const frame = await untilShown(m, "Layout")
    expect(frame).toContain("› what is in src?")
    expect(lineWith(frame, "Here are")).toContain("Here are two files and index.ts:")
    expect(frame).not.toContain("**")
    expect(frame).not.toContain("`")
    expect(frame).not.toContain("# Layout")
    expect(frame).toMatch(/• first item\n\s*• second item/)
    // the code block: its language, then its code
    expect(frame).toMatch(/\n {2}ts\n {2}const x = 1\n/)
  })

  it("with colours, bold is bold and inline code is coloured", async () => {
    await withChalkLevel(1, async () => {
      const log = streaming().text("a **strong** word and `code`")
      clock.set(log.now)
      const m = show(uiState(fold(log.all())), { colors: true })
      await untilShown(m, "strong")
      expect(m.raw()).toContain("\u001b[1mstrong\u001b[22m")
      expect(m.raw()).toContain("\u001b[36mcode\u001b[39m")
    })
  })

  it("reasoning is collapsed to one line; Ctrl-O shows it (and draws the printed part again), Ctrl-O hides it", async () => {
    const log = streaming()
    log.reasoning("The user wants a listing. ").reasoning("I should call ls.")
    log.text("Listing it.")
    clock.set(log.now)
    const m = show(uiState(fold(log.all())))
    const frame = await untilShown(m, "Listing it.")
    expect(frame).toContain("▸ thinking (9 words) · Ctrl-O shows it")
    expect(frame).not.toContain("The user wants")
    await press(m, keys.ctrlO)
    await untilShown(m, "▾ thinking")
    expect(m.frame()).toContain("The user wants a listing. I should call ls.")
    expect(m.actions.redraw).toHaveBeenCalledTimes(1)
    await press(m, keys.ctrlO)
    // the printed part is drawn anew (the real screen is cleared by `redraw`): the last copy is collapsed
    await untilFrame(m, (f) => f.lastIndexOf("▸ thinking") > f.lastIndexOf("▾ thinking"), "reasoning hidden again")
    expect(m.actions.redraw).toHaveBeenCalledTimes(2)
  })

  it("notices: an error, an interruption; the log's own error when it cannot be folded", async () => {
    const log = streaming()
    log.add("model.error", { message: "401 unauthorized: check OPENAI_API_KEY", status: 401, retryable: false })
    log.add("turn.interrupted", { turnId: tid("t1"), reason: "user" })
    log.add("chat.state", { state: "idle" })
    log.add("session.status", { status: { _tag: "idle" } })
    const screen = fold(log.all())
    const m = show(uiState({ ...screen, error: "the log cannot be shown past seq 12: unknown call c9" }))
    const frame = await untilShown(m, "unknown call c9")
    expect(frame).toContain("✗ 401 unauthorized: check OPENAI_API_KEY")
    expect(frame).toContain("! interrupted")
    expect(frame).toContain("✗ the log cannot be shown past seq 12: unknown call c9")
  })

  it("a flash line from the screen itself", async () => {
    const m = show(uiState(fold(streaming().all()), { flash: { tone: "error", text: "unknown command /frob" } }))
    expect(await untilShown(m, "/frob")).toContain("✗ unknown command /frob")
  })
})

describe("tool parts", () => {
  /** One call of each state in one step. */
  const calls = () => {
    const log = streaming()
    const a = mid("a1")
    log.text("Running things.")
    log.add("tool.pending", { messageId: a, callId: cid("c-pending"), tool: "write" })
    log.add("tool.pending", { messageId: a, callId: cid("c-ok"), tool: "bash" })
    log.add("tool.invoked", { messageId: a, callId: cid("c-ok"), tool: "bash", input: { command: "ls src" } })
    log.tick(1500)
    log.add("tool.finished", { callId: cid("c-ok"), output: "a.ts\nb.ts\nc.ts\nd.ts\ne.ts\n" })
    log.add("tool.invoked", { messageId: a, callId: cid("c-err"), tool: "bash", input: { command: "npm test" } })
    log.tick(2000)
    log.add("tool.failed", { callId: cid("c-err"), error: "\nexit code 1: 3 tests failed\nmore detail" })
    log.add("tool.invoked", { messageId: a, callId: cid("c-int"), tool: "bash", input: { command: "sleep 100" } })
    log.tick(3000)
    log.add("tool.failed", {
      callId: cid("c-int"),
      error: "interrupted by the user",
      interrupted: true,
      reason: "user"
    })
    log.add("tool.invoked", { messageId: a, callId: cid("c-run"), tool: "bash", input: { command: "make test" } })
    const started = log.now
    const progress = Array.from({ length: 8 }, (_, i) => `line ${i + 1}`).join("\n")
    log.add("tool.progress", { callId: cid("c-run"), output: `${progress}\n[###   ] 50%\r[######] 100%\n` })
    return { log, started }
  }

  it("pending ○, running ● with its elapsed time and the tail of its output, completed ✓, error ✗, interrupted ⊘", async () => {
    const { log, started } = calls()
    clock.set(started + 12_400)
    const m = show(uiState(fold(log.all())))
    const frame = await untilShown(m, "make test")
    expect(lineWith(frame, "○")).toMatch(/○ write\s+pending$/)
    expect(lineWith(frame, "●")).toMatch(/● bash make test\s+running 12s$/)
    // the last five lines of its output; a progress bar redrawn with \r shows its latest state
    const after = lines(frame).slice(lines(frame).indexOf(lineWith(frame, "●")) + 1)
    const tail = after.slice(
      0,
      after.findIndex((l) => !l.startsWith("  │ "))
    )
    expect(tail).toEqual(["  │ line 5", "  │ line 6", "  │ line 7", "  │ line 8", "  │ [######] 100%"])
    expect(lineWith(frame, "✓")).toMatch(/✓ bash ls src\s+1\.5s$/)
    // a finished command shows its last three lines
    expect(frame).toContain("  │ … 2 lines above\n  │ c.ts\n  │ d.ts\n  │ e.ts")
    expect(lineWith(frame, "✗")).toMatch(/✗ bash npm test\s+error · 2\.0s$/)
    expect(frame).toContain("  exit code 1: 3 tests failed")
    expect(frame).not.toContain("more detail")
    expect(lineWith(frame, "⊘")).toMatch(/⊘ bash sleep 100\s+interrupted · 3\.0s$/)
    expect(frame).not.toContain("interrupted by the user")
  })

  it("the running call's elapsed time advances with the clock", async () => {
    const { log, started } = calls()
    clock.set(started + 2_000)
    const m = show(uiState(fold(log.all())))
    await untilShown(m, "running 2.0s")
    clock.set(started + 75_000)
    // the screen's clock ticks once a second (a real interval; only Date is faked)
    await untilShown(m, "running 1m15s")
  })

  it("a call that timed out says so while it is stopped, and after", async () => {
    const log = streaming()
    log.add("tool.invoked", { messageId: mid("a1"), callId: cid("c1"), tool: "bash", input: { command: "sleep 1000" } })
    log.tick(120_000)
    log.add("tool.timeout", { callId: cid("c1"), timeoutMs: 120_000 })
    clock.set(log.now)
    const m = show(uiState(fold(log.all())))
    await untilShown(m, "timed out, stopping")
    expect(m.frame()).toContain("! bash timed out after 2m00s")
    m.store.set((s) => {
      log.tick(500).add("tool.failed", { callId: cid("c1"), error: "timed out after 2m00s", timedOut: true })
      return { ...s, screen: fold(log.all()) }
    })
    const frame = await untilShown(m, "✗ bash sleep 1000")
    expect(lineWith(frame, "✗ bash")).toMatch(/timed out · 2m01s$/)
  })

  describe("an edit's diff, from the blobs before and after", () => {
    const edit = () => {
      const log = streaming()
      log.add("tool.invoked", {
        messageId: mid("a1"),
        callId: cid("c1"),
        tool: "edit",
        input: { path: "src/a.ts", oldString: "one", newString: "uno" }
      })
      log.add("file.changed", {
        path: "src/a.ts",
        op: "update",
        beforeHash: "h-before",
        afterHash: "h-after",
        callId: cid("c1")
      })
      log.add("file.changed", { path: "src/new.ts", op: "create", afterHash: "h-new", callId: cid("c1") })
      log.tick(40)
      log.add("tool.finished", { callId: cid("c1"), output: "edited src/a.ts" })
      clock.set(log.now)
      return fold(log.all())
    }
    const before = "first\nsecond\none\nfourth\nfifth\nsixth\n"
    const after = "first\nsecond\nuno\nfourth\nfifth\nsixth\n"

    it("- and + lines with the hunk header and two lines of context", async () => {
      const blobs = new Map([
        ["h-before", before],
        ["h-after", after],
        ["h-new", "export {}\n"]
      ])
      const m = show(uiState(edit(), { blobs }))
      const frame = await untilShown(m, "uno")
      expect(frame).toContain(
        [
          "✓ edit src/a.ts  40ms",
          "  changed src/a.ts",
          "  @@ -1,5 +1,5 @@",
          "   first",
          "   second",
          "  -one",
          "  +uno",
          "   fourth",
          "   fifth",
          "  created src/new.ts"
        ].join("\n")
      )
      // a new file's hunk, as diff -u writes it
      expect(frame).toContain("  created src/new.ts\n  @@ -0,0 +1,1 @@\n  +export {}")
    })

    it("with colours: removed lines red, added green", async () => {
      await withChalkLevel(1, async () => {
        const blobs = new Map([
          ["h-before", before],
          ["h-after", after],
          ["h-new", ""]
        ])
        const m = show(uiState(edit(), { blobs }), { colors: true })
        await untilShown(m, "uno")
        expect(m.raw()).toContain("\u001b[31m  -one\u001b[39m")
        expect(m.raw()).toContain("\u001b[32m  +uno\u001b[39m")
      })
    })

    it("while the blobs load, only the file; a blob the log does not have is said so", async () => {
      const m = show(uiState(edit(), { blobs: new Map([["h-new", null]]) }))
      const frame = await untilShown(m, "src/new.ts")
      expect(lineWith(frame, "changed src/a.ts")).toBe("  changed src/a.ts")
      expect(frame).toContain("  created src/new.ts (its content is not in the log)")
      expect(frame).not.toContain("@@")
    })
  })
})

describe("the status line", () => {
  const statusOf = (frame: string) => lines(frame).at(-1)!

  it("idle: the model, the tokens, the cost, the context used, the session", async () => {
    const log = streaming()
    log
      .text("Done.")
      .finishStep(0, usage(9_000, 1_234, 0.0123, { cacheRead: 3_000 }))
      .endTurn()
    const m = show(uiState(fold(log.all()), { contextWindow: 120_000 }))
    const frame = await untilShown(m, "Done.")
    expect(statusOf(frame)).toBe(`idle │ openai/gpt-4o │ 13,234 tokens │ $0.0123 │ ctx 10% │ ${SID}`)
  })

  it("busy: what the chat is doing; without a context window the context in tokens; an unpriced cost", async () => {
    const log = streaming()
    log.finishStep(0, usage(2_000, 10, 0, { costKnown: false }), 1, "tool-calls")
    log.add("chat.state", { state: "awaiting_tool" })
    clock.set(log.now)
    const m = show(uiState(fold(log.all()), { contextWindow: undefined, model: "local/qwen" }))
    const frame = await untilShown(m, "awaiting tool")
    expect(statusOf(frame)).toBe(`busy · awaiting tool │ local/qwen │ 2,010 tokens │ unknown │ ctx 2,000 │ ${SID}`)
  })

  it("busy · streaming, then interrupting…", async () => {
    const log = streaming()
    clock.set(log.now)
    const m = show(uiState(fold(log.all())))
    expect(statusOf(await untilShown(m, "busy"))).toMatch(/^busy · streaming │ /)
    m.store.set((s) => ({ ...s, interrupting: true }))
    expect(statusOf(await untilShown(m, "interrupting…"))).toMatch(/^interrupting… │ /)
  })

  it("a retry: its attempt, the countdown and the reason", async () => {
    const log = streaming()
    log.add("model.retry", { attempt: 2, delayMs: 4_000, nextAt: log.now + 4_000, message: "429 rate limited" })
    log.add("session.status", {
      status: { _tag: "retry", attempt: 2, nextAt: log.now + 4_000, message: "429 rate limited" }
    })
    clock.set(log.now + 200)
    const m = show(uiState(fold(log.all()), { maxAttempts: 8 }))
    const frame = await untilShown(m, "retry")
    expect(statusOf(frame)).toMatch(/^retry 2\/8 in 4s: 429 rate limited │ openai\/gpt-4o │ /)
    clock.set(log.now + 3_500)
    await untilFrame(m, (f) => statusOf(f).startsWith("retry 2/8 in 0.5s: 429"), "the countdown going down")
  })
})

describe("pending messages", () => {
  it("a steer waits for the next step, a queued message for the next turn: each on its line", async () => {
    const log = streaming().text("Working.")
    log.add("user.message", { messageId: mid("s1"), text: "use zod\ninstead", mode: "steer" })
    log.add("user.message", { messageId: mid("q1"), text: "then run the tests", mode: "queue" })
    clock.set(log.now)
    const m = show(uiState(fold(log.all())))
    const frame = await untilShown(m, "queued")
    expect(frame).toContain("⧗ steer, at the next step: use zod⏎instead")
    expect(frame).toContain("⧗ queued: then run the tests")
    // not in the transcript yet
    expect(frame).not.toContain("› use zod")
  })
})

describe("colours", () => {
  const everything = () => {
    const log = streaming().text("**bold** and `code`")
    log.add("tool.invoked", { messageId: mid("a1"), callId: cid("c1"), tool: "bash", input: { command: "ls" } })
    log.add("tool.finished", { callId: cid("c1"), output: "a" })
    log.add("model.error", { message: "boom", retryable: true })
    clock.set(log.now)
    return uiState(fold(log.all()), { flash: { tone: "error", text: "flash" } })
  }
  /** A foreground or border colour (30–37, 90–97; 38;… for 256 colours and RGB). */
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding them is the point
  const COLOUR = /\u001b\[(?:3[0-8]|9[0-7])[;m]/

  it("NO_COLOR (a theme without colours): no colour codes at all, even where the terminal has them", async () => {
    await withChalkLevel(3, async () => {
      const m = show(everything(), { colors: false })
      await untilShown(m, "flash")
      expect(m.raw()).not.toMatch(COLOUR)
      // what a colour meant is said by a symbol
      expect(m.frame()).toContain("✓ bash ls")
      expect(m.frame()).toContain("✗ boom")
    })
  })

  it("with colours: colour codes", async () => {
    await withChalkLevel(3, async () => {
      const m = show(everything(), { colors: true })
      await untilShown(m, "flash")
      expect(m.raw()).toMatch(COLOUR)
    })
  })
})

describe("80 columns", () => {
  it("no line of the frame is wider than the terminal, whatever the content", async () => {
    const long = "word ".repeat(60)
    const log = new Log().created().startTurn(long)
    log.reasoning(long)
    log.text(`${long}\n\n\`\`\`\n${"x".repeat(200)}\n\`\`\`\n\n- ${long}\n\n> ${long}\n`)
    log.add("tool.invoked", {
      messageId: mid("a1"),
      callId: cid("c1"),
      tool: "bash",
      input: { command: `grep -rn ${"pattern".repeat(30)} src` }
    })
    log.add("tool.progress", { callId: cid("c1"), output: `${"p".repeat(300)}\n${"q ".repeat(150)}` })
    log.add("tool.invoked", {
      messageId: mid("a1"),
      callId: cid("c2"),
      tool: "edit",
      input: { path: `src/${"d/".repeat(60)}f.ts` }
    })
    log.add("file.changed", {
      path: `src/${"d/".repeat(60)}f.ts`,
      op: "update",
      beforeHash: "b",
      afterHash: "a",
      callId: cid("c2")
    })
    log.add("tool.failed", { callId: cid("c2"), error: `failed: ${"e".repeat(300)}` })
    log.add("user.message", { messageId: mid("s1"), text: long, mode: "steer" })
    log.add("user.message", { messageId: mid("q1"), text: long, mode: "queue" })
    log.add("model.error", { message: long, retryable: true })
    log.add("session.status", { status: { _tag: "retry", attempt: 3, nextAt: log.now + 9_000, message: long } })
    clock.set(log.now)
    const ui = uiState(fold(log.all()), {
      blobs: new Map([
        ["b", `${"old ".repeat(50)}\n`],
        ["a", `${"new ".repeat(50)}\n`]
      ]),
      model: `provider/${"m".repeat(100)}`,
      flash: { tone: "info", text: long },
      history: [long]
    })
    const m = show(ui, { columns: 80 })
    await untilShown(m, "retry 3/8")
    await press(m, "typed ".repeat(30))
    await untilShown(m, "typed")
    const frame = m.frame()
    expect(lines(frame).filter((l) => Array.from(l).length > 80)).toEqual([])
    // a list item's lines wrap under its text, not under its marker
    const item = lines(frame).indexOf(lineWith(frame, "• word"))
    expect(lines(frame).slice(item + 1, item + 4)).toEqual([
      expect.stringMatching(/^ {2}word/),
      expect.stringMatching(/^ {2}word/),
      expect.stringMatching(/^ {2}word/)
    ])
    expect(frame).toContain("╰") // the prompt's box is drawn
    expect(lines(frame).at(-1)).toMatch(/^retry 3\/8 in 9s: (word )+/)
  })
})

describe("control characters never reach the terminal", () => {
  const hostile = [
    "\u001b[2J\u001b[3J\u001b[H", // clear the screen and the scrollback
    "\u001b]0;pwned-title\u0007", // the window title
    "\u001b]8;;https://evil.example\u001b\\click\u001b]8;;\u001b\\", // a hyperlink
    "\u001b]52;c;Y3VybCBldmlsIHwgc2g=\u0007", // the clipboard
    "\u0007\u0007", // the bell
    "\u009b2J\u009d0;c1-title\u009c", // 8-bit CSI and OSC
    "\u001bc\u001b(0" // reset, a line-drawing character set
  ].join("")

  it("from the model's text and reasoning, a command's output, an error, a file name, the user's own message", async () => {
    await withChalkLevel(0, async () => {
      const log = new Log().created().startTurn(`hello ${hostile}there`)
      log.reasoning(`think ${hostile}`)
      log.text(`answer ${hostile} **bold${hostile}** done`)
      log.add("tool.invoked", {
        messageId: mid("a1"),
        callId: cid("c1"),
        tool: "bash",
        input: { command: `echo ${hostile}` }
      })
      log.add("tool.progress", { callId: cid("c1"), output: `step 1\n[#   ] 10%\r[##  ] 20%\r${hostile}[####] 40%` })
      log.add("tool.invoked", { messageId: mid("a1"), callId: cid("c2"), tool: "bash", input: { command: "cat x" } })
      log.add("tool.finished", { callId: cid("c2"), output: `out ${hostile}\nlast\r\n` })
      log.add("tool.invoked", {
        messageId: mid("a1"),
        callId: cid("c3"),
        tool: "read",
        input: { path: `evil${hostile}.ts` }
      })
      log.add("tool.failed", { callId: cid("c3"), error: `no such file ${hostile}` })
      log.add("tool.invoked", { messageId: mid("a1"), callId: cid("c4"), tool: "edit", input: { path: "f.ts" } })
      log.add("file.changed", {
        path: `f${hostile}.ts`,
        op: "update",
        beforeHash: "b",
        afterHash: "a",
        callId: cid("c4")
      })
      log.add("tool.finished", { callId: cid("c4"), output: "ok" })
      log.add("model.error", { message: `provider said ${hostile}`, retryable: true })
      log.add("user.message", { messageId: mid("s1"), text: `steer ${hostile}`, mode: "steer" })
      log.add("session.status", {
        status: { _tag: "retry", attempt: 1, nextAt: log.now + 1000, message: `r ${hostile}` }
      })
      clock.set(log.now)
      const ui = uiState(fold(log.all()), {
        blobs: new Map([
          ["b", `old ${hostile}\n`],
          ["a", `new ${hostile}\n`]
        ])
      })
      const m = show(ui)
      await untilShown(m, "answer")
      await press(m, keys.ctrlO)
      await untilShown(m, "▾ thinking")
      // and a question with the same in it
      m.store.set((s) => ({
        ...s,
        approval: {
          sessionId: SID,
          permissionId: "p1",
          callId: cid("c1"),
          tool: "bash",
          subject: `rm ${hostile}`,
          outside: false,
          rule: undefined,
          reason: `because ${hostile}`
        }
      }))
      await untilShown(m, "Allow bash")
      const raw = m.raw()
      expect(raw).not.toMatch(CONTROL)
      expect(raw).not.toContain("pwned-title")
      expect(raw).not.toContain("c1-title")
      expect(raw).not.toContain("evil.example")
      expect(raw).toContain("[####] 40%")
      expect(raw).not.toContain("20%")
      for (const text of ["hello", "there", "answer", "bold", "click", "out", "last", "no such file", "provider said"])
        expect(m.frame()).toContain(text)
    })
  })

  it("typed or pasted into the prompt", async () => {
    await withChalkLevel(0, async () => {
      const m = show(uiState(fold(new Log().created().all())))
      await untilShown(m, "Ask the agent")
      await press(m, "abc", keys.paste(`x${hostile}y`))
      await untilFrame(m, (f) => /› abcx.*y/.test(f), "the paste in the prompt")
      expect(m.raw()).not.toMatch(CONTROL)
    })
  })
})
