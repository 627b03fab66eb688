/**
 * One-line summaries of events for `logbook events --format text`. They work on raw JSON payloads,
 * so events of a type this version does not know (written by a newer logbook) are still shown.
 */

import {
  compactJson,
  formatCost,
  formatDuration,
  formatLocalTimestamp,
  oneLine,
  quoted,
  truncate
} from "../present/text.js"
import type { Style } from "./render.js"

type Fields = Readonly<Record<string, unknown>>

const asFields = (payload: unknown): Fields =>
  typeof payload === "object" && payload !== null && !Array.isArray(payload) ? (payload as Fields) : {}

const str = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)
const num = (value: unknown): number | undefined => (typeof value === "number" ? value : undefined)

/** `key=value` pairs for the fields that are set; strings quoted and cut. */
const pairs = (fields: Fields, keys: ReadonlyArray<string>, max = 60): string =>
  keys
    .filter((key) => fields[key] !== undefined && fields[key] !== null)
    .map((key) => {
      const value = fields[key]
      return `${key}=${typeof value === "string" ? quoted(oneLine(value), max) : compactJson(value, max)}`
    })
    .join(" ")

const usageText = (usage: unknown): string => {
  const u = asFields(usage)
  const parts = [`in=${num(u.input) ?? 0}`, `out=${num(u.output) ?? 0}`]
  if ((num(u.reasoning) ?? 0) > 0) parts.push(`reasoning=${num(u.reasoning)}`)
  if ((num(u.cacheRead) ?? 0) > 0) parts.push(`cacheRead=${num(u.cacheRead)}`)
  if ((num(u.cacheWrite) ?? 0) > 0) parts.push(`cacheWrite=${num(u.cacheWrite)}`)
  const cost = num(u.cost)
  if (u.costKnown === false) parts.push(`cost=${cost !== undefined && cost > 0 ? `≥${formatCost(cost)}` : "unknown"}`)
  else if (cost !== undefined && cost > 0) parts.push(`cost=${formatCost(cost)}`)
  return parts.join(" ")
}

/** A compact summary of an event's payload, by type; unknown types show compact JSON. */
export const summarize = (type: string, payload: unknown, style: Style): string => {
  const p = asFields(payload)
  switch (type) {
    case "session.created":
      return pairs(p, ["title", "cwd", "model"])
    case "session.titled":
      return quoted(oneLine(str(p.title) ?? ""), 80)
    case "session.deleted":
      return ""
    case "session.status": {
      const status = asFields(p.status)
      const tag = str(status._tag) ?? "?"
      if (tag !== "retry") return tag
      return `retry attempt=${num(status.attempt) ?? "?"} ${pairs(status, ["message"])}`
    }
    case "user.message":
      return `[${str(p.mode) ?? "prompt"}] ${quoted(oneLine(str(p.text) ?? ""), 100)}`
    case "user.withdrawn":
      return `message=${str(p.messageId) ?? "?"}`
    case "turn.started":
      return `turn=${str(p.turnId) ?? "?"} messages=${Array.isArray(p.messageIds) ? p.messageIds.length : 0}`
    case "turn.finished":
      return `turn=${str(p.turnId) ?? "?"} reason=${str(p.reason) ?? "?"}`
    case "turn.interrupted":
      return pairs(p, ["reason", "turnId"])
    case "chat.state":
      return str(p.state) ?? ""
    case "assistant.started":
      return pairs(p, ["messageId", "model"])
    case "model.switched":
      return `${str(p.from) ?? "?"} → ${str(p.to) ?? "?"}`
    case "step.started":
      return `step=${num(p.step) ?? "?"} message=${str(p.messageId) ?? "?"}`
    case "text.delta":
      return quoted(oneLine(str(p.delta) ?? ""), 100)
    case "reasoning.delta":
      return style.dim(quoted(oneLine(str(p.delta) ?? ""), 100))
    case "step.finished":
      return [
        `step=${num(p.step) ?? "?"}`,
        `finish=${str(p.finishReason) ?? "?"}`,
        usageText(p.usage),
        p.aborted === true ? style.yellow("aborted") : "",
        str(p.promptVersion) === undefined ? "" : style.dim(`prompt=${str(p.promptVersion)}`)
      ]
        .filter((s) => s !== "")
        .join(" ")
    case "assistant.completed":
      return pairs(p, ["messageId", "finishReason"])
    case "tool.pending":
      return `${str(p.tool) ?? "?"} call=${str(p.callId) ?? "?"}`
    case "tool.invoked":
      return `${str(p.tool) ?? "?"} call=${str(p.callId) ?? "?"} input=${compactJson(p.input, 80)}`
    case "tool.progress":
      return `call=${str(p.callId) ?? "?"} ${quoted(oneLine(str(p.output) ?? ""), 80)}`
    case "tool.finished":
      return `call=${str(p.callId) ?? "?"} output=${quoted(oneLine(str(p.output) ?? ""), 80)}`
    case "tool.failed": {
      const flags = [p.interrupted === true ? "interrupted" : "", p.timedOut === true ? "timedOut" : ""]
        .filter((s) => s !== "")
        .join(" ")
      return [
        `call=${str(p.callId) ?? "?"}`,
        flags === "" ? "" : style.yellow(flags),
        pairs(p, ["reason"]),
        style.red(`error=${quoted(oneLine(str(p.error) ?? ""), 80)}`)
      ]
        .filter((s) => s !== "")
        .join(" ")
    }
    case "tool.process":
      return `call=${str(p.callId) ?? "?"} ${pairs(p, ["pgid"])}`
    case "hook.ran":
      return [
        `${str(p.source) ?? "?"} ${str(p.hook) ?? "?"} ${str(p.outcome) ?? "?"}`,
        p.callId === undefined ? "" : `call=${str(p.callId) ?? "?"}`,
        pairs(p, ["tool", "reason"]),
        p.error === undefined ? "" : style.red(`error=${quoted(oneLine(str(p.error) ?? ""), 80)}`)
      ]
        .filter((part) => part !== "")
        .join(" ")
    case "tool.timeout":
      return `call=${str(p.callId) ?? "?"} after ${formatDuration(num(p.timeoutMs) ?? 0)}`
    case "action.state":
      return `${str(p.state) ?? "?"} action=${str(p.actionId) ?? "?"} calls=${Array.isArray(p.callIds) ? p.callIds.length : 0}`
    case "model.retry":
      return `attempt=${num(p.attempt) ?? "?"} in ${formatDuration(num(p.delayMs) ?? 0)} ${pairs(p, ["status", "message"])}`
    case "model.error":
      return style.red(pairs(p, ["status", "retryable", "message"], 100))
    case "prompt.recorded":
      return `version=${str(p.promptVersion) ?? "?"} blob=${str(p.blob) ?? "?"}`
    case "permission.asked":
      return pairs(p, ["tool", "pattern", "permissionId", "callId"])
    case "permission.replied":
      return pairs(p, ["reply", "interrupted", "permissionId"])
    case "file.changed": {
      const omitted = [str(p.beforeOmitted), str(p.afterOmitted)].filter((s) => s !== undefined)
      return [
        `${str(p.op) ?? "?"} ${str(p.path) ?? "?"}`,
        p.callId === undefined ? "" : `call=${str(p.callId)}`,
        p.observed === true ? style.dim("observed") : "",
        p.recovered === true ? style.yellow("recovered") : "",
        omitted.length === 0 ? "" : style.yellow(`content not stored (${omitted.join(", ")})`)
      ]
        .filter((s) => s !== "")
        .join(" ")
    }
    case "file.intent":
      return `${str(p.op) ?? "?"} ${str(p.path) ?? "?"} call=${str(p.callId) ?? "?"} ${style.dim(`temp=${str(p.temp) ?? "?"}`)}`
    case "file.recovered":
      return [
        `${str(p.outcome) ?? "?"} ${str(p.path) ?? "?"}`,
        `call=${str(p.callId) ?? "?"}`,
        p.tempRemoved === true ? style.dim("temp removed") : "",
        p.error === undefined ? "" : style.red(`error=${quoted(oneLine(str(p.error) ?? ""), 80)}`)
      ]
        .filter((s) => s !== "")
        .join(" ")
    case "workspace.snapshot": {
      const limits = Array.isArray(p.limits)
        ? (p.limits as ReadonlyArray<Fields>).map((l) => `${str(l.limit) ?? "?"}:${num(l.files) ?? "?"}`)
        : []
      return [
        str(p.phase) ?? "?",
        p.callId === undefined ? "" : `call=${str(p.callId)}`,
        `files=${num(p.files) ?? "?"}`,
        p.changed === undefined ? "" : `changed=${num(p.changed) ?? "?"}`,
        p.manifest === undefined ? "" : `manifest=${str(p.manifest)}`,
        limits.length === 0 ? "" : style.yellow(`limits=${limits.join(",")}`),
        p.error === undefined ? "" : style.red(`error=${quoted(oneLine(str(p.error) ?? ""), 80)}`)
      ]
        .filter((s) => s !== "")
        .join(" ")
    }
    case "todo.updated": {
      const items = Array.isArray(p.items) ? (p.items as ReadonlyArray<Fields>) : []
      const done = items.filter((item) => item.status === "completed").length
      return `${items.length} item${items.length === 1 ? "" : "s"}, ${done} completed`
    }
    case "compaction.done":
      return `upTo=${str(p.upToMessageId) ?? "?"} summary=${quoted(oneLine(str(p.summary) ?? ""), 60)}`
    default:
      return truncate(compactJson(payload, 120), 120)
  }
}

/** The envelope fields `events` prints, in the stored order. */
export interface EventLine {
  readonly seq: number
  readonly at: number
  readonly type: string
  readonly payload: unknown
}

/** `seq  local time  type  summary`, with seq right-aligned to `seqWidth`. */
export const eventLine = (event: EventLine, style: Style, seqWidth = 4): string => {
  const seq = String(event.seq).padStart(seqWidth)
  const summary = summarize(event.type, event.payload, style)
  return `${style.dim(seq)}  ${style.dim(formatLocalTimestamp(event.at))}  ${style.cyan(event.type.padEnd(19))}${summary === "" ? "" : ` ${summary}`}`.trimEnd()
}
