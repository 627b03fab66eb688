/**
 * A generator of legal but adversarial logs: long turns with many steps, calls of earlier steps
 * that stay running and finish (or are pruned) steps later, deltas to parts of earlier steps,
 * parts outside steps, steers, aborted steps, compactions mid-turn, prunes mid-turn.
 */
import { type Event, type EventType, make, type PayloadOf } from "../../src/domain/Events.js"
import { CallId, MessageId, PartId, TurnId } from "../../src/domain/Ids.js"

const e = <T extends EventType>(type: T, payload: PayloadOf<T>): Event => make(type, payload)
const usage = { input: 1, output: 1, reasoning: 0, cacheRead: 0, cacheWrite: 0, cost: 0 }

export interface AdversarialLogOptions {
  /** reuse step numbers within a message (legal for the projection) */
  readonly dupSteps?: boolean
}

export const adversarialLog = (choices: ReadonlyArray<number>, options: AdversarialLogOptions = {}): Array<Event> => {
  const out: Array<Event> = [e("session.created", { title: "t", cwd: "/w", model: "test/model" })]
  let n = 0
  const id = (p: string) => `${p}${++n}`
  let turn: TurnId | null = null
  let msg: MessageId | null = null
  let step = -1
  let stepOpen = false
  let maxStep = -1
  const parts: Array<{ id: PartId; kind: "text" | "reasoning" }> = []
  const calls = new Map<CallId, { state: "pending" | "running" | "done"; tool: string; msg: MessageId }>()
  const messages: Array<MessageId> = []
  const undelivered: Array<MessageId> = []
  const words = ["a ", "b ", "", " ", "c\n"]
  /** A part of `kind` for a delta: a new one when `fresh` or there is none yet, else the one `pick` takes. */
  const partFor = (
    kind: "text" | "reasoning",
    prefix: string,
    fresh: boolean,
    pick: (ids: ReadonlyArray<PartId>) => PartId
  ): PartId => {
    const ids = parts.filter((p) => p.kind === kind).map((p) => p.id)
    if (ids.length > 0 && !fresh) return pick(ids)
    const partId = PartId.make(id(prefix))
    parts.push({ id: partId, kind })
    return partId
  }
  for (const c of choices) {
    const x = Math.floor(c / 32)
    const m = c % 32
    if (turn === null) {
      if (m < 2 && messages.length > 0) {
        out.push(
          e("compaction.done", { upToMessageId: messages[x % messages.length]!, summary: `s${x % 3}`, trigger: "auto" })
        )
      } else if (m < 4 && calls.size > 0) {
        const ids = [...calls.keys()].filter((_, i) => (i + x) % 3 === 0)
        if (ids.length > 0) out.push(e("context.pruned", { callIds: ids }))
      } else {
        const u = MessageId.make(id("u"))
        out.push(e("user.message", { messageId: u, text: `hi ${x % 5}`, mode: "prompt" }))
        messages.push(u)
        turn = TurnId.make(id("t"))
        out.push(e("turn.started", { turnId: turn, messageIds: [u] }))
        msg = MessageId.make(id("a"))
        out.push(
          e("assistant.started", { messageId: msg, ...(x % 2 === 0 ? { model: "test/model" } : { model: "other/m" }) })
        )
        messages.push(msg)
        step = -1
        maxStep = -1
        stepOpen = false
        parts.length = 0
      }
      continue
    }
    const running = [...calls].filter(([, v]) => v.state === "running").map(([k]) => k)
    const pending = [...calls].filter(([, v]) => v.state === "pending").map(([k]) => k)
    switch (m) {
      case 0:
      case 1:
      case 2:
      case 3:
      case 4: {
        // text delta: new part, or the last, or any earlier part of the message
        const partId = partFor("text", "p", x % 3 === 0, (texts) =>
          x % 3 === 1 ? texts[texts.length - 1]! : texts[x % texts.length]!
        )
        out.push(e("text.delta", { messageId: msg!, partId, delta: words[x % words.length]! }))
        break
      }
      case 5:
      case 6: {
        const partId = partFor("reasoning", "r", x % 2 === 0, (rs) => rs[x % rs.length]!)
        out.push(
          e("reasoning.delta", {
            messageId: msg!,
            partId,
            delta: words[x % words.length]!,
            ...(x % 4 === 1 ? { metadata: { anthropic: { signature: `sig${x % 7}` } } } : {})
          })
        )
        break
      }
      case 7:
      case 8: {
        const callId = CallId.make(id("c"))
        if (m === 7) {
          out.push(e("tool.pending", { messageId: msg!, callId, tool: "bash" }))
          calls.set(callId, { state: "pending", tool: "bash", msg: msg! })
        } else {
          out.push(e("tool.invoked", { messageId: msg!, callId, tool: "read", input: { p: x % 9 } }))
          calls.set(callId, { state: "running", tool: "read", msg: msg! })
        }
        break
      }
      case 9:
      case 10: {
        // a pending call of this message is invoked (any step)
        const mine = pending.filter((k) => calls.get(k)!.msg === msg)
        if (mine.length === 0) break
        const callId = mine[x % mine.length]!
        out.push(e("tool.invoked", { messageId: msg!, callId, tool: calls.get(callId)!.tool, input: { q: x % 5 } }))
        calls.get(callId)!.state = "running"
        break
      }
      case 11:
      case 12:
      case 13: {
        // a running call (of any step, any message) ends
        if (running.length === 0) break
        const callId = running[x % running.length]!
        if (x % 3 === 0) out.push(e("tool.failed", { callId, error: `err ${x % 4}` }))
        else out.push(e("tool.finished", { callId, output: `out ${x % 50}` }))
        calls.get(callId)!.state = "done"
        break
      }
      case 14: {
        if (running.length === 0) break
        const callId = running[x % running.length]!
        if (x % 2 === 0) out.push(e("tool.progress", { callId, output: `line ${x % 9}` }))
        else out.push(e("tool.timeout", { callId, timeoutMs: 1000 }))
        break
      }
      case 15: {
        if (pending.length === 0) break
        const callId = pending[x % pending.length]!
        out.push(e("tool.failed", { callId, error: "cut", interrupted: true, reason: "step" }))
        calls.get(callId)!.state = "done"
        break
      }
      case 16:
      case 17:
      case 18:
      case 19: {
        // step ends / starts
        if (stepOpen) {
          out.push(
            e("step.finished", {
              messageId: msg!,
              step,
              finishReason: "tool-calls",
              usage,
              ...(x % 4 === 0 ? { aborted: true } : {})
            })
          )
          stepOpen = false
        } else {
          step = options.dupSteps === true && x % 3 === 0 && maxStep >= 0 ? x % (maxStep + 1) : maxStep + 1
          maxStep = Math.max(maxStep, step)
          const delivered = undelivered.splice(0, undelivered.length)
          out.push(
            e("step.started", {
              messageId: msg!,
              step,
              ...(delivered.length > 0 ? { deliveredMessageIds: delivered } : {})
            })
          )
          stepOpen = true
        }
        break
      }
      case 20: {
        // a steer (delivered by the next step)
        const u = MessageId.make(id("s"))
        out.push(e("user.message", { messageId: u, text: `steer ${x % 3}`, mode: "steer" }))
        messages.push(u)
        undelivered.push(u)
        break
      }
      case 21: {
        // prune some calls mid-turn
        const ids = [...calls.keys()].filter((_, i) => (i + x) % 2 === 0)
        if (ids.length > 0) out.push(e("context.pruned", { callIds: ids }))
        break
      }
      case 22: {
        if (messages.length > 0 && x % 4 === 0)
          out.push(
            e("compaction.done", { upToMessageId: messages[x % messages.length]!, summary: "mid", trigger: "auto" })
          )
        break
      }
      case 23: {
        // the turn ends (calls may stay open: a crash), and maybe the message completes
        if (x % 5 === 0) break
        if (stepOpen) {
          out.push(
            e("step.finished", {
              messageId: msg!,
              step,
              finishReason: "stop",
              usage,
              ...(x % 2 === 0 ? { aborted: true } : {})
            })
          )
          stepOpen = false
        }
        if (x % 3 !== 0) out.push(e("assistant.completed", { messageId: msg!, finishReason: "stop" }))
        out.push(e("turn.finished", { turnId: turn, reason: "stop" }))
        turn = null
        msg = null
        undelivered.length = 0
        break
      }
      default: {
        // more text in the open step
        const texts = parts.filter((p) => p.kind === "text")
        const partId = texts.length > 0 && x % 2 === 0 ? texts[texts.length - 1]!.id : PartId.make(id("p"))
        if (!texts.some((p) => p.id === partId)) parts.push({ id: partId, kind: "text" })
        out.push(e("text.delta", { messageId: msg!, partId, delta: words[(x + 1) % words.length]! }))
      }
    }
  }
  return out
}
