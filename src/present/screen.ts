/**
 * What the interactive screen shows, folded from committed envelopes only (DESIGN §10): the
 * session's state (the projection itself, `Projection.folder`) and the transcript — user messages
 * where they were delivered, text and reasoning parts, tool parts, and notices (retries, errors,
 * interruptions, compactions, answers to permission questions) — in log order. A resumed session
 * folds its whole log, so it shows what it showed while it ran.
 *
 * Pure: no terminal, no Effect. The controller pushes batches of envelopes and hands each
 * `snapshot()` to the view.
 */
import { Either } from "effect"
import type { Envelope } from "../domain/Events.js"
import type { CallId, MessageId, SessionId } from "../domain/Ids.js"
import type { ToolPart, UserMessage } from "../domain/Message.js"
import { hookRunText } from "../store/Audit.js"
import { empty, type Folder, folder, isToolFinal, type SessionState } from "../store/Projection.js"
import { sanitize } from "./sanitize.js"
import { formatCount, formatDuration } from "./text.js"

export type NoticeTone = "info" | "warn" | "error"

export type Item =
  | { readonly kind: "user"; readonly key: string; readonly text: string; readonly mode: UserMessage["mode"] }
  | { readonly kind: "text"; readonly key: string; readonly text: string }
  | { readonly kind: "reasoning"; readonly key: string; readonly text: string }
  | { readonly kind: "tool"; readonly key: string; readonly callId: CallId }
  | { readonly kind: "notice"; readonly key: string; readonly tone: NoticeTone; readonly text: string }

/** A file a call changed (`file.changed`): the blobs of its content before and after. */
export interface FileChangeRef {
  readonly path: string
  readonly op: "create" | "update" | "delete"
  readonly beforeHash?: string | undefined
  readonly afterHash?: string | undefined
}

export interface Screen {
  readonly session: SessionState
  readonly items: ReadonlyArray<Item>
  /** the files each call changed, in order */
  readonly changes: Readonly<Record<string, ReadonlyArray<FileChangeRef>>>
  /** the latest step's input tokens (what the context holds now), 0 before the first step */
  readonly contextTokens: number
  /** the last seq folded */
  readonly lastSeq: number
  /** the log could not be folded (an inconsistent log): what is shown stops there */
  readonly error?: string | undefined
}

/** The most characters of one text or reasoning part the screen keeps (the log has all of it). */
export const MAX_PART_CHARS = 2_000_000

const appendBounded = (text: string, delta: string): string =>
  text.length >= MAX_PART_CHARS ? text : (text + delta).slice(0, MAX_PART_CHARS)

export interface ScreenFolder {
  readonly push: (envelopes: ReadonlyArray<Envelope>) => void
  readonly snapshot: () => Screen
}

/** The transcript being folded: its items and what places the next ones. */
interface Transcript {
  readonly items: Array<Item>
  /** part id -> its item's index */
  readonly partIndex: Map<string, number>
  /** user messages recorded, shown once delivered */
  readonly undelivered: Map<MessageId, UserMessage>
  readonly changes: Record<string, Array<FileChangeRef>>
  contextTokens: number
}

const deliver = (t: Transcript, ids: ReadonlyArray<MessageId>) => {
  for (const id of ids) {
    const message = t.undelivered.get(id)
    if (message === undefined) continue
    t.undelivered.delete(id)
    t.items.push({ kind: "user", key: id, text: sanitize(message.text), mode: message.mode })
  }
}

const delta = (t: Transcript, kind: "text" | "reasoning", partId: string, text: string) => {
  const at = t.partIndex.get(partId)
  if (at === undefined) {
    t.partIndex.set(partId, t.items.length)
    t.items.push({ kind, key: partId, text: sanitize(text) })
    return
  }
  const item = t.items[at] as { readonly kind: "text" | "reasoning"; readonly key: string; readonly text: string }
  t.items[at] = { ...item, text: appendBounded(item.text, sanitize(text)) }
}

const toolLabel = (session: SessionState, callId: CallId): string => {
  const part = session.toolParts.get(callId)
  return part === undefined ? callId : part.tool
}

/** The notice line an event shows (a model error, a switch, an interrupt, a compaction, an answer …), if any. */
const noticeOf = (
  session: SessionState,
  env: Envelope
): { readonly tone: NoticeTone; readonly text: string } | undefined => {
  switch (env.type) {
    case "model.error":
      return { tone: "error", text: env.payload.message }
    case "model.switched":
      return { tone: "info", text: `model ${env.payload.from} → ${env.payload.to}` }
    case "turn.interrupted": {
      const reason = env.payload.reason
      return {
        tone: "warn",
        text:
          reason === "user"
            ? "interrupted"
            : reason === "crash"
              ? "the last run of this session stopped without ending its turn (a crash); what was open is closed"
              : `interrupted (${reason})`
      }
    }
    case "turn.finished":
      return env.payload.reason === "max-steps"
        ? { tone: "warn", text: "stopped at the step limit (maxSteps); send a message to go on" }
        : env.payload.reason === "output-limit"
          ? {
              tone: "warn",
              text:
                "stopped: the model's output in one step passed its limit (step.maxOutputBytes); none of its " +
                "tool calls ran. Send a message to go on"
            }
          : undefined
    case "compaction.done": {
      const p = env.payload
      const what = p.messages === undefined ? "the conversation" : `${p.messages} messages`
      const tokens =
        p.tokensBefore !== undefined && p.tokensAfter !== undefined
          ? ` (${formatCount(p.tokensBefore)} → ${formatCount(p.tokensAfter)} tokens)`
          : ""
      return { tone: "info", text: `compacted ${what} into a summary${tokens}` }
    }
    case "permission.replied": {
      const p = env.payload
      const asked = Object.values(session.permissions).find((info) => info.permissionId === p.permissionId)
      const subject = asked === undefined ? "" : ` ${asked.tool} ${asked.pattern}`
      if (p.interrupted) return { tone: "warn", text: `permission question${subject} ended unanswered` }
      const verb = p.reply === "once" ? "allowed once" : p.reply === "always" ? "always allowed" : "rejected"
      return {
        tone: p.reply === "reject" ? "warn" : "info",
        text: `${verb}:${subject}${p.message === undefined ? "" : ` — "${p.message}"`}`
      }
    }
    case "hook.ran": {
      const p = env.payload
      const tool = p.tool ?? (p.callId === undefined ? undefined : session.toolParts.get(p.callId)?.tool)
      return { tone: p.outcome === "changed" ? "info" : "warn", text: hookRunText({ ...p, tool, from: undefined }) }
    }
    case "tool.timeout":
      return {
        tone: "warn",
        text: `${toolLabel(session, env.payload.callId)} timed out after ${formatDuration(env.payload.timeoutMs)}`
      }
    default:
      return undefined
  }
}

/** Folds one event into the transcript: messages as they are delivered, parts, tool calls, file changes, notices. */
const foldItem = (t: Transcript, session: SessionState, env: Envelope) => {
  switch (env.type) {
    case "user.message": {
      const p = env.payload
      t.undelivered.set(p.messageId, {
        role: "user",
        id: p.messageId,
        text: p.text,
        mode: p.mode,
        at: env.at,
        delivered: false
      })
      return
    }
    case "user.withdrawn":
      t.undelivered.delete(env.payload.messageId)
      return
    case "turn.started":
      return deliver(t, env.payload.messageIds)
    case "step.started":
      return deliver(t, env.payload.deliveredMessageIds ?? [])
    case "text.delta":
      return delta(t, "text", env.payload.partId, env.payload.delta)
    case "reasoning.delta":
      return env.payload.delta === "" && !t.partIndex.has(env.payload.partId)
        ? undefined
        : delta(t, "reasoning", env.payload.partId, env.payload.delta)
    case "tool.pending":
      t.items.push({ kind: "tool", key: env.payload.callId, callId: env.payload.callId })
      return
    case "tool.invoked":
      // a call recorded without `tool.pending` (older logs, a call that arrived whole)
      if (!t.items.some((item) => item.kind === "tool" && item.callId === env.payload.callId))
        t.items.push({ kind: "tool", key: env.payload.callId, callId: env.payload.callId })
      return
    case "file.changed": {
      const p = env.payload
      if (p.callId === undefined) return
      const list = t.changes[p.callId] ?? []
      list.push({ path: p.path, op: p.op, beforeHash: p.beforeHash, afterHash: p.afterHash })
      t.changes[p.callId] = list
      return
    }
    case "step.finished":
      if (!env.payload.aborted || env.payload.usage.input > 0)
        t.contextTokens = env.payload.usage.input + env.payload.usage.cacheRead + env.payload.usage.cacheWrite
      return
    default: {
      const notice = noticeOf(session, env)
      if (notice !== undefined)
        t.items.push({ kind: "notice", key: env.id, tone: notice.tone, text: sanitize(notice.text) })
    }
  }
}

export const makeScreenFolder = (sessionId: SessionId): ScreenFolder => {
  const projection: Folder = folder(empty(sessionId))
  let session = empty(sessionId)
  const t: Transcript = { items: [], partIndex: new Map(), undelivered: new Map(), changes: {}, contextTokens: 0 }
  let lastSeq = 0
  let error: string | undefined
  return {
    push: (envelopes) => {
      if (error !== undefined || envelopes.length === 0) return
      const fresh = envelopes.filter((env) => env.seq > lastSeq)
      if (fresh.length === 0) return
      // the projection first: a notice reads the state after its event
      for (const env of fresh) {
        const pushed = projection.push(env)
        if (Either.isLeft(pushed)) {
          error = `the log cannot be shown past seq ${env.seq}: ${pushed.left.message}`
          break
        }
        if (readsState.has(env.type)) session = currentState(projection, session)
        foldItem(t, session, env)
        lastSeq = env.seq
      }
      session = currentState(projection, session)
    },
    snapshot: () => ({
      session,
      items: t.items.slice(),
      changes: { ...t.changes },
      contextTokens: t.contextTokens,
      lastSeq,
      error
    })
  }
}

/** The events whose notice reads the state (the others are folded without it, for speed). */
const readsState = new Set(["permission.replied", "tool.timeout", "hook.ran"])

const currentState = (projection: Folder, fallback: SessionState): SessionState =>
  Either.getOrElse(projection.state(), () => fallback)

/** The user messages recorded and not yet delivered to the model (steered and queued), oldest first. */
export const pendingMessages = (screen: Screen): ReadonlyArray<UserMessage> =>
  screen.session.messages.flatMap((m) => (m.role === "user" && !m.delivered ? [m] : []))

/**
 * Whether an item will not change any more (it can be printed once, above the live area). A tool
 * part is final when its call ended and the contents of the files it changed are `loaded` (its diff
 * can be drawn).
 */
export const isFinal = (screen: Screen, index: number, loaded: (hash: string) => boolean = () => true): boolean => {
  const item = screen.items[index]!
  switch (item.kind) {
    case "user":
    case "notice":
      return true
    case "text":
    case "reasoning":
      // the part grows until something follows it or the turn ends
      return index < screen.items.length - 1 || screen.session.turn === null
    case "tool": {
      const part: ToolPart | undefined = screen.session.toolParts.get(item.callId)
      if (part === undefined || !isToolFinal(part.state)) return false
      return (screen.changes[item.callId] ?? []).every(
        (change) =>
          (change.beforeHash === undefined || loaded(change.beforeHash)) &&
          (change.afterHash === undefined || loaded(change.afterHash))
      )
    }
  }
}

/** How many items from the start are final: they go to the static (printed once) part of the screen. */
export const finalPrefix = (screen: Screen, loaded?: (hash: string) => boolean): number => {
  let n = 0
  while (n < screen.items.length && isFinal(screen, n, loaded)) n++
  return n
}
