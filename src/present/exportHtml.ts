/**
 * `logbook export <session> --format html`: one self-contained HTML page to read a session in a
 * browser. No external resource (inline CSS, no script at all; a Content-Security-Policy that
 * forbids scripts, and loading anything, as a second wall), deterministic (the same log gives the
 * same bytes: times are the log's, in UTC).
 *
 * What it shows comes from the log only: the transcript as the interactive screen folds it
 * (`screen.ts`: user messages where they were delivered, assistant text as markdown, reasoning
 * collapsed, tool parts with their state, input and output, notices), the diffs of the files each
 * call changed (from the blobs), the timeline of retries, errors, interruptions, timeouts, crash
 * recoveries and compactions, and a header with the model, tokens, cost and duration.
 *
 * Everything from the log is escaped: text from the model, a command or a file never becomes
 * markup. Markdown goes through `marked` with raw HTML escaped, images not loaded (shown as their
 * text and address) and links kept only for http(s), mailto and in-page targets.
 */
import { structuredPatch } from "diff"
import { Effect, Option, Stream } from "effect"
import { Marked, type Tokens } from "marked"
import type { Envelope } from "../domain/Events.js"
import type { SessionId } from "../domain/Ids.js"
import type { ToolPart, Usage } from "../domain/Message.js"
import { EventStore } from "../store/EventStore.js"
import { version } from "../version.js"
import { type FileChangeRef, type Item, makeScreenFolder, type Screen } from "./screen.js"
import { formatCount, formatDuration, formatUsageCost } from "./text.js"

/** The most bytes of one blob read to draw a diff (a larger file is named, not drawn). */
export const MAX_DIFF_BLOB_BYTES = 2 * 1024 * 1024
/** The most lines of one diff drawn. */
export const MAX_DIFF_LINES = 3000
/** The most characters of one tool input or output shown (the log keeps all of it). */
export const MAX_TOOL_TEXT = 200_000

const escapes: Readonly<Record<string, string>> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;"
}

/** Text as HTML text or attribute value: nothing in it can become markup. */
export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => escapes[c]!)

const cut = (text: string, max: number): string =>
  text.length <= max ? text : `${text.slice(0, max)}\n… ${formatCount(text.length - max)} more characters in the log`

const utc = (ms: number): string =>
  new Date(ms)
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d+Z$/, " UTC")

// ---------------------------------------------------------------------------------------------
// markdown

const safeHref = (href: string): string | undefined => {
  const trimmed = href.trim()
  return /^(https?:|mailto:|#)/i.test(trimmed) ? trimmed : undefined
}

const markdown = new Marked({
  gfm: true,
  async: false,
  renderer: {
    // raw HTML in the model's text is shown as text, never parsed
    html: ({ text }: Tokens.HTML | Tokens.Tag) => escapeHtml(text),
    // nothing is loaded: an image is its description and its address
    image: ({ href, text }: Tokens.Image) =>
      `<span class="md-image">[image: ${escapeHtml(text)}] ${escapeHtml(href)}</span>`,
    link(token: Tokens.Link) {
      const inner = this.parser.parseInline(token.tokens)
      const href = safeHref(token.href)
      if (href === undefined) return `${inner} <span class="md-href">(${escapeHtml(token.href)})</span>`
      return `<a href="${escapeHtml(href)}" rel="noopener noreferrer nofollow">${inner}</a>`
    }
  }
})

/** Markdown to HTML, with the model's raw HTML escaped, no image loaded and only safe links. */
export const renderMarkdown = (text: string): string => markdown.parse(text, { async: false }) as string

// ---------------------------------------------------------------------------------------------
// parts

const toolStateName = (part: ToolPart): string => {
  const state = part.state
  if (state._tag === "error" && state.interrupted) return "interrupted"
  return state._tag
}

const toolStateDetail = (part: ToolPart): string => {
  const state = part.state
  switch (state._tag) {
    case "pending":
      return "its input never arrived whole"
    case "running":
      return state.timedOut
        ? `running since ${utc(state.startedAt)} (timed out, stopping)`
        : `running since ${utc(state.startedAt)}`
    case "completed":
      return formatDuration(state.endedAt - state.startedAt)
    case "error": {
      const notes = [
        ...(state.startedAt === undefined ? [] : [formatDuration(state.endedAt - state.startedAt)]),
        ...(state.interrupted ? [`interrupted: ${state.reason ?? "unknown"}`] : []),
        ...(state.timedOut ? ["timed out"] : [])
      ]
      return notes.join(" · ")
    }
  }
}

const json = (value: unknown): string => {
  try {
    return JSON.stringify(value, null, 2) ?? String(value)
  } catch {
    return String(value)
  }
}

const pre = (cls: string, text: string): string => `<pre class="${cls}">${escapeHtml(text)}</pre>`

export interface BlobText {
  /** the content as text, or why it is not shown */
  readonly text?: string | undefined
  readonly note?: string | undefined
}

const diffHtml = (change: FileChangeRef, blobs: ReadonlyMap<string, BlobText>): string => {
  const side = (hash: string | undefined): BlobText =>
    hash === undefined ? { text: "" } : (blobs.get(hash) ?? { note: "not in the log" })
  const before = side(change.beforeHash)
  const after = side(change.afterHash)
  const head = `<div class="diff-head"><span class="diff-op">${escapeHtml(change.op)}</span> <span class="diff-path">${escapeHtml(change.path)}</span></div>`
  if (before.text === undefined || after.text === undefined) {
    const note = before.text === undefined ? before.note : after.note
    return `<div class="diff" data-path="${escapeHtml(change.path)}">${head}<div class="diff-note">${escapeHtml(note ?? "")}</div></div>`
  }
  const patch = structuredPatch(`a/${change.path}`, `b/${change.path}`, before.text, after.text, "", "", { context: 3 })
  const rows: Array<string> = []
  let lines = 0
  for (const hunk of patch.hunks) {
    rows.push(`<div class="dl hunk">@@ -${hunk.oldStart},${hunk.oldLines} +${hunk.newStart},${hunk.newLines} @@</div>`)
    for (const line of hunk.lines) {
      if (lines++ >= MAX_DIFF_LINES) break
      const cls = line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : line.startsWith("\\") ? "meta" : "ctx"
      rows.push(`<div class="dl ${cls}">${escapeHtml(line === "" ? " " : line)}</div>`)
    }
  }
  if (lines > MAX_DIFF_LINES)
    rows.push(`<div class="diff-note">… ${formatCount(lines - MAX_DIFF_LINES)} more lines</div>`)
  if (patch.hunks.length === 0) rows.push(`<div class="diff-note">no change in the content</div>`)
  return `<div class="diff" data-path="${escapeHtml(change.path)}">${head}<div class="diff-body">${rows.join("")}</div></div>`
}

const toolHtml = (screen: Screen, callId: string, blobs: ReadonlyMap<string, BlobText>): string => {
  const part = screen.session.toolParts.get(callId as ToolPart["callId"])
  if (part === undefined) return ""
  const state = part.state
  const name = toolStateName(part)
  const input = state._tag === "pending" ? state.inputText : "input" in state ? json(state.input) : ""
  const body: Array<string> = []
  body.push(
    `<details class="tool-input" open><summary>input</summary>${pre("code", cut(input, MAX_TOOL_TEXT))}</details>`
  )
  if (state._tag === "completed")
    body.push(`<div class="label">output</div>${pre("tool-output", cut(state.output, MAX_TOOL_TEXT))}`)
  if (state._tag === "error")
    body.push(`<div class="label">error</div>${pre("tool-error", cut(state.error, MAX_TOOL_TEXT))}`)
  if (state._tag === "running" && state.progress !== undefined)
    body.push(`<div class="label">progress</div>${pre("tool-output", cut(state.progress, MAX_TOOL_TEXT))}`)
  for (const change of screen.changes[callId] ?? []) body.push(diffHtml(change, blobs))
  return (
    `<section class="tool state-${name}" data-call-id="${escapeHtml(callId)}" data-state="${name}">` +
    `<div class="tool-head"><span class="tool-name">${escapeHtml(part.tool)}</span> ` +
    `<span class="tool-state">${name}</span> <span class="tool-detail">${escapeHtml(toolStateDetail(part))}</span>` +
    `<span class="call-id">${escapeHtml(callId)}</span></div>${body.join("")}</section>`
  )
}

const itemHtml = (screen: Screen, item: Item, blobs: ReadonlyMap<string, BlobText>): string => {
  switch (item.kind) {
    case "user":
      return `<section class="user"><div class="role">user${item.mode === "prompt" ? "" : ` · ${escapeHtml(item.mode)}`}</div>${pre("user-text", item.text)}</section>`
    case "text":
      return `<div class="assistant-text">${renderMarkdown(item.text)}</div>`
    case "reasoning":
      return `<details class="reasoning"><summary>reasoning</summary>${pre("reasoning-text", item.text)}</details>`
    case "tool":
      return toolHtml(screen, item.callId, blobs)
    case "notice":
      return `<div class="notice ${item.tone}">${escapeHtml(item.text)}</div>`
  }
}

// ---------------------------------------------------------------------------------------------
// timeline

/** What the timeline shows of an event, or nothing. */
const timelineEntry = (env: Envelope, tools: ReadonlyMap<string, string>): readonly [string, string] | undefined => {
  switch (env.type) {
    case "turn.started":
      return ["turn", "turn started"]
    case "turn.finished":
      return ["turn", `turn finished (${env.payload.reason})`]
    case "turn.interrupted":
      return env.payload.reason === "crash"
        ? ["crash", "crash recovery: the run driving this turn died; what it left open was closed"]
        : ["interrupt", `turn interrupted (${env.payload.reason})`]
    case "model.retry": {
      const p = env.payload
      return [
        "retry",
        `attempt ${p.attempt} in ${formatDuration(p.delayMs)}${p.status === undefined ? "" : ` (HTTP ${p.status})`}: ${p.message}`
      ]
    }
    case "model.error":
      return [
        "error",
        `model error${env.payload.status === undefined ? "" : ` (HTTP ${env.payload.status})`}: ${env.payload.message}`
      ]
    case "tool.timeout":
      return [
        "timeout",
        `${tools.get(env.payload.callId) ?? "tool"} ${env.payload.callId} timed out after ${formatDuration(env.payload.timeoutMs)}`
      ]
    case "tool.failed":
      return env.payload.interrupted
        ? [
            env.payload.reason === "crash" ? "crash" : "interrupt",
            `${tools.get(env.payload.callId) ?? "tool"} ${env.payload.callId} interrupted (${env.payload.reason ?? "unknown"})`
          ]
        : undefined
    case "compaction.done": {
      const p = env.payload
      const tokens =
        p.tokensBefore !== undefined && p.tokensAfter !== undefined
          ? ` (${formatCount(p.tokensBefore)} → ${formatCount(p.tokensAfter)} tokens)`
          : ""
      return [
        "compaction",
        `compacted ${p.messages === undefined ? "the conversation" : `${p.messages} messages`}${tokens}${p.trigger === undefined ? "" : `, ${p.trigger}`}`
      ]
    }
    case "context.pruned":
      return ["compaction", `pruned the outputs of ${env.payload.callIds.length} calls from the context`]
    default:
      return undefined
  }
}

// ---------------------------------------------------------------------------------------------
// the page

const usageText = (u: Usage): string => {
  const parts = [`in ${formatCount(u.input)}`, `out ${formatCount(u.output)}`]
  if (u.reasoning > 0) parts.push(`reasoning ${formatCount(u.reasoning)}`)
  if (u.cacheRead > 0 || u.cacheWrite > 0)
    parts.push(`cache read ${formatCount(u.cacheRead)}`, `cache write ${formatCount(u.cacheWrite)}`)
  return parts.join(" · ")
}

const STYLE = `
:root{color-scheme:light}
body{margin:0;background:#ffffff;color:#1f2328;font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif}
header.session{background:#24292f;color:#ffffff;padding:16px 24px}
header.session h1{margin:0 0 8px;font-size:20px}
header.session dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:0;font-size:13px}
header.session dt{color:#afb8c1}header.session dd{margin:0}
main,section.timeline{max-width:960px;margin:0 auto;padding:8px 24px}
pre{white-space:pre-wrap;word-break:break-word;margin:4px 0;font:13px/1.45 ui-monospace,SFMono-Regular,Menlo,monospace}
section.user{background:#ddf4ff;border-left:4px solid #0969da;padding:8px 12px;margin:16px 0}
.role{font-size:12px;color:#57606a;font-weight:600}
.assistant-text{margin:8px 0}.assistant-text pre{background:#f6f8fa;padding:8px}
details.reasoning{color:#57606a;font-style:italic;margin:8px 0}
section.tool{border:1px solid #d0d7de;border-radius:6px;margin:10px 0;padding:6px 10px}
.tool-head{font-size:13px}.tool-name{font-weight:700;font-family:ui-monospace,monospace}
.tool-state{display:inline-block;padding:0 6px;border-radius:10px;font-size:12px;font-weight:600;background:#eaeef2}
.state-completed .tool-state{background:#dafbe1;color:#116329}
.state-error .tool-state{background:#ffebe9;color:#a40e26}
.state-interrupted .tool-state{background:#fff8c5;color:#7d4e00}
.state-running .tool-state,.state-pending .tool-state{background:#ddf4ff;color:#0550ae}
.tool-detail{color:#57606a;margin-left:6px}.call-id{float:right;color:#8c959f;font-family:ui-monospace,monospace;font-size:11px}
.label{font-size:12px;color:#57606a;margin-top:4px}
.tool-output,.tool-error{background:#f6f8fa;padding:6px;max-height:480px;overflow:auto}.tool-error{color:#a40e26}
.diff{border:1px solid #d0d7de;margin:8px 0;font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace}
.diff-head{background:#f6f8fa;padding:4px 8px;border-bottom:1px solid #d0d7de}.diff-op{font-weight:700}
.dl{white-space:pre-wrap;word-break:break-all;padding:0 8px}
.dl.add{background:#ccffd8}.dl.del{background:#ffd7d5}.dl.hunk{background:#ddf4ff;color:#57606a}.dl.meta{color:#8c959f}
.diff-note{padding:4px 8px;color:#57606a}
.notice{margin:8px 0;padding:4px 10px;border-left:4px solid #8c959f;font-size:13px}
.notice.warn{border-color:#bf8700;background:#fff8c5}.notice.error{border-color:#cf222e;background:#ffebe9}
.error-banner{background:#ffebe9;border:1px solid #cf222e;padding:8px 12px;margin:12px 0}
section.timeline ol{list-style:none;padding:0;font-size:13px}
section.timeline li{padding:2px 0;border-bottom:1px solid #eaeef2}
.t{display:inline-block;min-width:90px;color:#57606a;font-family:ui-monospace,monospace}
.kind{display:inline-block;min-width:90px;font-weight:600}
.k-retry .kind,.k-timeout .kind{color:#9a6700}.k-error .kind,.k-crash .kind{color:#cf222e}.k-interrupt .kind{color:#7d4e00}.k-compaction .kind{color:#8250df}
footer{max-width:960px;margin:24px auto;padding:0 24px;color:#8c959f;font-size:12px}
`

export interface HtmlInput {
  readonly envelopes: ReadonlyArray<Envelope>
  /** the contents of the blobs `file.changed` names (as text, or why not) */
  readonly blobs: ReadonlyMap<string, BlobText>
}

/** The page for a session's envelopes (seq 1..n). Pure: the same input gives the same bytes. */
export const renderSessionHtml = (sessionId: SessionId, input: HtmlInput): string => {
  const folder = makeScreenFolder(sessionId)
  folder.push(input.envelopes)
  const screen = folder.snapshot()
  const s = screen.session
  const tools = new Map(Array.from(s.toolParts.values()).map((part) => [part.callId as string, part.tool]))
  const first = input.envelopes[0]?.at ?? 0
  const last = input.envelopes.at(-1)?.at ?? first
  const outcome =
    s.turn !== null
      ? "a turn is open"
      : s.lastTurn === null
        ? "no turn yet"
        : `${s.lastTurn.interrupted ? "interrupted" : "finished"} (${s.lastTurn.reason})`
  const facts: Array<readonly [string, string]> = [
    ["session", sessionId],
    ["model", s.model ?? "-"],
    ["directory", s.cwd ?? "-"],
    ["started", utc(first)],
    ["duration", formatDuration(last - first)],
    ["events", formatCount(s.lastSeq)],
    ["tokens", usageText(s.totals)],
    ["cost", formatUsageCost(s.totals)],
    ["last turn", outcome],
    ...(s.deleted ? [["deleted", "yes (its events are kept)"] as const] : [])
  ]
  const timeline: Array<string> = []
  for (const env of input.envelopes) {
    const entry = timelineEntry(env, tools)
    if (entry === undefined) continue
    const [kind, text] = entry
    timeline.push(
      `<li class="k-${kind}" data-seq="${env.seq}"><span class="t">+${escapeHtml(formatDuration(env.at - first))}</span>` +
        `<span class="kind">${kind}</span>${escapeHtml(text)}</li>`
    )
  }
  const title = s.title ?? `session ${sessionId}`
  return [
    "<!doctype html>",
    '<html lang="en"><head><meta charset="utf-8">',
    "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'; base-uri 'none'\">",
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<meta name="referrer" content="no-referrer">',
    `<title>${escapeHtml(title)} · logbook</title>`,
    `<style>${STYLE}</style></head><body>`,
    `<header class="session"><h1>${escapeHtml(title)}</h1><dl>`,
    ...facts.map(([k, v]) => `<dt>${escapeHtml(k)}</dt><dd class="f-${k.replace(/\s/g, "-")}">${escapeHtml(v)}</dd>`),
    "</dl></header>",
    '<main class="transcript">',
    ...screen.items.map((item) => itemHtml(screen, item, input.blobs)),
    ...(screen.error === undefined ? [] : [`<div class="error-banner">${escapeHtml(screen.error)}</div>`]),
    "</main>",
    `<section class="timeline"><h2>Timeline</h2>${timeline.length === 0 ? "<p>No retries, errors, interruptions, timeouts or compactions.</p>" : `<ol>${timeline.join("")}</ol>`}</section>`,
    `<footer>Exported by logbook ${escapeHtml(version)} from the event log of session ${escapeHtml(sessionId)}.</footer>`,
    "</body></html>",
    ""
  ].join("\n")
}

/** A blob as diff text: UTF-8 without NUL, at most `MAX_DIFF_BLOB_BYTES`; else why it is not drawn. */
export const blobText = (bytes: Uint8Array): BlobText => {
  if (bytes.byteLength > MAX_DIFF_BLOB_BYTES)
    return { note: `${formatCount(bytes.byteLength)} bytes: too large to show here` }
  if (bytes.subarray(0, 8000).includes(0)) return { note: `binary content (${formatCount(bytes.byteLength)} bytes)` }
  try {
    return { text: new TextDecoder("utf-8", { fatal: true }).decode(bytes) }
  } catch {
    return { note: `binary content (${formatCount(bytes.byteLength)} bytes)` }
  }
}

/** The HTML page of a stored session: its events, and the blobs of the files its calls changed. */
export const exportSessionHtml = Effect.fn("exportSessionHtml")(function* (sessionId: SessionId) {
  const store = yield* EventStore
  const envelopes = Array.from(yield* Stream.runCollect(store.read(sessionId)))
  const blobs = new Map<string, BlobText>()
  for (const env of envelopes) {
    if (env.type !== "file.changed") continue
    for (const hash of [env.payload.beforeHash, env.payload.afterHash]) {
      if (hash === undefined || blobs.has(hash)) continue
      const found = yield* store.getBlob(hash)
      blobs.set(
        hash,
        Option.match(found, { onNone: () => ({ note: "its content is not in the log" }), onSome: blobText })
      )
    }
  }
  return renderSessionHtml(sessionId, { envelopes, blobs })
})
