/**
 * The screen model (src/present/screen.ts): what the transcript holds, in which order, when an
 * item is final, and that it is the projection that decides which logs are legal.
 */
import { describe, expect, it } from "vitest"
import { finalPrefix, isFinal, MAX_PART_CHARS, makeScreenFolder, pendingMessages } from "../../src/present/screen.js"
import { CONTROL, cid, fold, Log, mid, pid, SID, tid, usage } from "../cli/tui/support.js"

const summary = (log: Log) =>
  fold(log.all()).items.map((item) =>
    item.kind === "tool" ? `tool ${item.callId}` : `${item.kind} ${"text" in item ? item.text : ""}`
  )

describe("the transcript's items", () => {
  it("a prompt, then the assistant's reasoning and text parts in log order", () => {
    const log = new Log().created().startTurn("what is in src?")
    log.reasoning("Let me ").reasoning("look.").text("It holds ").text("**two** files.")
    log.finishStep(0, usage(100, 20, 0.001)).endTurn()
    expect(summary(log)).toEqual(["user what is in src?", "reasoning Let me look.", "text It holds **two** files."])
  })

  it("a steered message appears where the step that delivered it begins, not at the end", () => {
    const log = new Log().created().startTurn("refactor the parser")
    log.text("Reading the parser.")
    // typed while the model streams: recorded at once, delivered with the next step
    log.add("user.message", { messageId: mid("s1"), text: "use zod instead", mode: "steer" })
    log.add("chat.state", { state: "interrupted" })
    log.add("tool.pending", { messageId: mid("a1"), callId: cid("c1"), tool: "read" })
    log.add("tool.invoked", { messageId: mid("a1"), callId: cid("c1"), tool: "read", input: { path: "src/parser.ts" } })
    // not on the screen yet: it waits for delivery
    expect(summary(log)).toEqual(["user refactor the parser", "text Reading the parser.", "tool c1"])
    expect(pendingMessages(fold(log.all())).map((m) => m.text)).toEqual(["use zod instead"])
    log.add("tool.finished", { callId: cid("c1"), output: "export const parse = …" })
    log.finishStep(0, usage(100, 20, 0.001), 1, "tool-calls")
    log.add("step.started", { messageId: mid("a1"), step: 1, deliveredMessageIds: [mid("s1")] })
    log.add("chat.state", { state: "streaming" })
    log.text("Switching to zod.", 1, "p2")
    log.finishStep(1, usage(150, 30, 0.002))
    log.endTurn()
    expect(summary(log)).toEqual([
      "user refactor the parser",
      "text Reading the parser.",
      "tool c1",
      "user use zod instead",
      "text Switching to zod."
    ])
    expect(pendingMessages(fold(log.all()))).toEqual([])
  })

  it("a queued message appears when the turn that delivers it starts", () => {
    const log = new Log().created().startTurn("first")
    log.add("user.message", { messageId: mid("q1"), text: "then this", mode: "queue" })
    log
      .text("One.")
      .finishStep(0, usage(10, 2, 0))
      .endTurn()
    expect(summary(log)).toEqual(["user first", "text One."])
    expect(pendingMessages(fold(log.all())).map((m) => [m.mode, m.text])).toEqual([["queue", "then this"]])
    log.add("turn.started", { turnId: tid("t2"), messageIds: [mid("q1")] })
    expect(summary(log)).toEqual(["user first", "text One.", "user then this"])
    const item = fold(log.all()).items[2]!
    expect(item.kind === "user" && item.mode).toBe("queue")
  })

  it("a reasoning delta that only carries metadata makes no item until it has text", () => {
    const log = new Log().created().startTurn("go")
    log.add("reasoning.delta", {
      messageId: mid("a1"),
      partId: pid("r1"),
      delta: "",
      metadata: { anthropic: { signature: "sig" } }
    })
    expect(summary(log)).toEqual(["user go"])
    log.reasoning("thinking")
    expect(summary(log)).toEqual(["user go", "reasoning thinking"])
  })

  it("a call recorded without tool.pending gets one item; with it, still one", () => {
    const log = new Log().created().startTurn("go")
    log.add("tool.invoked", { messageId: mid("a1"), callId: cid("c1"), tool: "bash", input: { command: "ls" } })
    log.add("tool.pending", { messageId: mid("a1"), callId: cid("c2"), tool: "bash" })
    log.add("tool.invoked", { messageId: mid("a1"), callId: cid("c2"), tool: "bash", input: { command: "pwd" } })
    expect(summary(log)).toEqual(["user go", "tool c1", "tool c2"])
  })

  it("text from the log is sanitized before it is kept, also when an escape is split between deltas", () => {
    const log = new Log().created().startTurn("hi\u001b]0;owned\u0007 there")
    log.text("red \u001b[3").text("1mtext\u0007 \u001b[2J")
    const screen = fold(log.all())
    const texts = screen.items.map((item) => ("text" in item ? item.text : ""))
    expect(texts[0]).toBe("hi there")
    for (const text of texts) expect(text).not.toMatch(CONTROL)
  })
})

describe("notices", () => {
  const notices = (log: Log) =>
    fold(log.all()).items.flatMap((item) => (item.kind === "notice" ? [`${item.tone}: ${item.text}`] : []))

  it("errors, interruptions, the step limit, compactions", () => {
    const log = new Log().created().startTurn("go")
    log.add("model.error", { message: "401 unauthorized: check OPENAI_API_KEY", status: 401, retryable: false })
    log.add("turn.interrupted", { turnId: tid("t1"), reason: "user" })
    log.add("session.status", { status: { _tag: "idle" } })
    log.startTurn("again", 2)
    log.add("turn.interrupted", { turnId: tid("t2"), reason: "crash" })
    log.startTurn("once more", 3)
    log.add("turn.interrupted", { reason: "shutdown" })
    log.startTurn("long task", 4)
    log.finishStep(0, usage(10, 1, 0), 4, "tool-calls")
    log.add("assistant.completed", { messageId: mid("a4") })
    log.add("turn.finished", { turnId: tid("t4"), reason: "max-steps" })
    log.add("compaction.done", { summary: "…", messages: 12, tokensBefore: 120_000, tokensAfter: 8_000 })
    log.add("compaction.done", { summary: "…" })
    expect(notices(log)).toEqual([
      "error: 401 unauthorized: check OPENAI_API_KEY",
      "warn: interrupted",
      "warn: the last run of this session stopped without ending its turn (a crash); what was open is closed",
      "warn: interrupted (shutdown)",
      "warn: stopped at the step limit (maxSteps); send a message to go on",
      "info: compacted 12 messages into a summary (120,000 → 8,000 tokens)",
      "info: compacted the conversation into a summary"
    ])
  })

  it("a hook's run on a call: a one-line notice naming the hook, the tool and what it did", () => {
    const log = new Log().created().startTurn("go")
    log.add("tool.pending", { messageId: mid("a1"), callId: cid("c1"), tool: "bash" })
    log.add("hook.ran", {
      source: "plugin:guard",
      hook: "tool.execute.before",
      callId: cid("c1"),
      outcome: "changed",
      changed: true,
      input: { command: "ls" },
      ms: 3
    })
    log.add("tool.invoked", { messageId: mid("a1"), callId: cid("c1"), tool: "bash", input: { command: "ls -la" } })
    log.add("hook.ran", {
      source: "plugin:slow",
      hook: "tool.execute.after",
      callId: cid("c1"),
      tool: "bash",
      outcome: "timeout",
      changed: false,
      error: "it did not return within 10000 ms",
      ms: 10_000
    })
    expect(notices(log)).toEqual([
      "info: plugin:guard changed the input of bash",
      "warn: plugin:slow (tool.execute.after) timed out on bash, skipped: it did not return within 10000 ms"
    ])
  })

  it("a turn stopped at a step's output bound says so and names the setting", () => {
    const log = new Log().created().startTurn("go")
    log.finishStep(0, usage(10, 1, 0), 1, "output-limit")
    log.add("assistant.completed", { messageId: mid("a1"), finishReason: "output-limit" })
    log.add("turn.finished", { turnId: tid("t1"), reason: "output-limit" })
    expect(notices(log)).toEqual([
      "warn: stopped: the model's output in one step passed its limit (step.maxOutputBytes); none of its tool " +
        "calls ran. Send a message to go on"
    ])
  })

  it("answers to permission questions name the tool and the pattern; a timeout names the tool", () => {
    const log = new Log().created().startTurn("go")
    for (const [n, command] of [
      [1, "rm -rf build"],
      [2, "git push"],
      [3, "curl x"],
      [4, "sudo ls"]
    ] as const) {
      log.add("tool.invoked", { messageId: mid("a1"), callId: cid(`c${n}`), tool: "bash", input: { command } })
      log.add("permission.asked", { permissionId: `p${n}`, callId: cid(`c${n}`), tool: "bash", pattern: command })
    }
    log.add("permission.replied", { permissionId: "p1", reply: "once" })
    log.add("permission.replied", { permissionId: "p2", reply: "always" })
    log.add("permission.replied", { permissionId: "p3", reply: "reject", message: "use the cached copy" })
    log.add("permission.replied", { permissionId: "p4", reply: "reject", interrupted: true })
    log.add("tool.timeout", { callId: cid("c1"), timeoutMs: 120_000 })
    expect(notices(log)).toEqual([
      "info: allowed once: bash rm -rf build",
      "info: always allowed: bash git push",
      'warn: rejected: bash curl x — "use the cached copy"',
      "warn: permission question bash sudo ls ended unanswered",
      "warn: bash timed out after 2m00s"
    ])
  })
})

describe("what is final (printed once) and what stays live", () => {
  it("a text part grows until something follows it or the turn ends; a tool part until it ends", () => {
    const log = new Log().created().startTurn("go")
    log.text("Looking.")
    let screen = fold(log.all())
    expect(finalPrefix(screen)).toBe(1) // the user message; the text still grows
    log.add("tool.pending", { messageId: mid("a1"), callId: cid("c1"), tool: "bash" })
    screen = fold(log.all())
    expect(isFinal(screen, 1)).toBe(true)
    expect(isFinal(screen, 2)).toBe(false)
    expect(finalPrefix(screen)).toBe(2)
    log.add("tool.invoked", { messageId: mid("a1"), callId: cid("c1"), tool: "bash", input: { command: "make" } })
    log.add("tool.pending", { messageId: mid("a1"), callId: cid("c2"), tool: "read" })
    log.add("tool.invoked", { messageId: mid("a1"), callId: cid("c2"), tool: "read", input: { path: "a.ts" } })
    log.add("tool.finished", { callId: cid("c2"), output: "…" })
    screen = fold(log.all())
    // c2 is done, but c1 before it still runs: nothing after c1 is printed yet (the order stays)
    expect(isFinal(screen, 3)).toBe(true)
    expect(finalPrefix(screen)).toBe(2)
    log.add("tool.failed", { callId: cid("c1"), error: "interrupted", interrupted: true, reason: "user" })
    expect(finalPrefix(fold(log.all()))).toBe(4)
    log.finishStep(0, usage(1, 1, 0), 1, "tool-calls")
    log.add("step.started", { messageId: mid("a1"), step: 1 })
    log.text("Done.", 1, "p2").finishStep(1, usage(1, 1, 0))
    expect(finalPrefix(fold(log.all()))).toBe(4)
    log.endTurn()
    expect(finalPrefix(fold(log.all()))).toBe(5)
  })
})

describe("file changes and context", () => {
  it("changes are kept per call in order; a change without a call is not shown", () => {
    const log = new Log().created().startTurn("edit")
    log.add("tool.invoked", { messageId: mid("a1"), callId: cid("c1"), tool: "edit", input: { path: "a.ts" } })
    log.add("file.changed", { path: "a.ts", op: "update", beforeHash: "h1", afterHash: "h2", callId: cid("c1") })
    log.add("file.changed", { path: "b.ts", op: "create", afterHash: "h3", callId: cid("c1") })
    log.add("file.changed", { path: "c.ts", op: "delete", beforeHash: "h4" })
    log.add("tool.finished", { callId: cid("c1"), output: "ok" })
    const screen = fold(log.all())
    expect(screen.changes).toEqual({
      c1: [
        { path: "a.ts", op: "update", beforeHash: "h1", afterHash: "h2" },
        { path: "b.ts", op: "create", beforeHash: undefined, afterHash: "h3" }
      ]
    })
  })

  it("the context is the latest step's input (cache included); an aborted step without usage leaves it", () => {
    const log = new Log().created().startTurn("go")
    log.finishStep(0, usage(1000, 10, 0, { cacheRead: 9000, cacheWrite: 500 }), 1, "tool-calls")
    expect(fold(log.all()).contextTokens).toBe(10_500)
    log.add("step.started", { messageId: mid("a1"), step: 1 })
    log.add("step.finished", {
      messageId: mid("a1"),
      step: 1,
      finishReason: "error",
      usage: usage(0, 0, 0),
      aborted: true
    })
    expect(fold(log.all()).contextTokens).toBe(10_500)
  })
})

describe("the fold itself", () => {
  it("a text part keeps at most MAX_PART_CHARS characters", () => {
    const log = new Log().created().startTurn("go")
    const chunk = "x".repeat(MAX_PART_CHARS / 4 + 1)
    for (let i = 0; i < 5; i++) log.text(chunk)
    const item = fold(log.all()).items[1]!
    expect(item.kind).toBe("text")
    expect("text" in item && item.text.length).toBe(MAX_PART_CHARS)
  })

  it("each push is folded through the projection: an illegal log stops the screen with a message", () => {
    const log = new Log().created().startTurn("go")
    log.text("Fine so far.")
    log.add("tool.progress", { callId: cid("nope"), output: "…" })
    log.text(" Never shown.")
    const folder = makeScreenFolder(SID)
    folder.push(log.all())
    const screen = folder.snapshot()
    expect(screen.error).toMatch(/the log cannot be shown past seq 9: .*unknown call nope/)
    expect(screen.lastSeq).toBe(8)
    expect(screen.items.map((item) => ("text" in item ? item.text : ""))).toEqual(["go", "Fine so far."])
    expect(() => fold(log.all())).toThrow(/the scripted log is invalid/)
  })

  it("envelopes already folded are skipped (the bus may repeat what the store read)", () => {
    const log = new Log().created().startTurn("go").text("one ")
    const folder = makeScreenFolder(SID)
    folder.push(log.take())
    log.text("two")
    folder.push(log.all())
    const item = folder.snapshot().items[1]!
    expect("text" in item && item.text).toBe("one two")
    expect(folder.snapshot().error).toBeUndefined()
  })

  it("a snapshot does not change when later envelopes are folded (the view can keep it)", () => {
    const log = new Log().created().startTurn("go").text("one")
    const folder = makeScreenFolder(SID)
    folder.push(log.take())
    const before = folder.snapshot()
    const beforeSession = before.session
    log.text(" two")
    log.add("tool.invoked", { messageId: mid("a1"), callId: cid("c1"), tool: "bash", input: { command: "ls" } })
    log.add("file.changed", { path: "a", op: "create", afterHash: "h", callId: cid("c1") })
    folder.push(log.take())
    const after = folder.snapshot()
    expect(before.items.map((item) => ("text" in item ? item.text : item.kind))).toEqual(["go", "one"])
    expect(before.changes).toEqual({})
    expect(before.session).toBe(beforeSession)
    expect(beforeSession.toolParts.size).toBe(0)
    expect(after.items).toHaveLength(3)
    expect(after.session.lastSeq).toBe(11)
  })
})
