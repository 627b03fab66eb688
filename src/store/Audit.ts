/**
 * The audit of a session: what the agent did to the workspace and what happened to
 * it, read from the log alone, in time order — every file change (with the blobs of its content
 * before and after), every command (its directory, exit code, duration and the blob of its whole
 * output), every permission question with its answer, every retry, model error, interruption
 * (crash recovery included: reason `crash`) and timeout, and the MCP tools the model was offered
 * (their descriptions: what a server told the model) once per prompt version.
 *
 * `auditSession` reads one session's events (a stream, so a long session is not held twice);
 * `auditLog` those of several sessions (a directory's, those updated since a time); `auditDiff`
 * and `auditOutput` read the blobs an entry names. Nothing here writes.
 */

import { structuredPatch } from "diff"
import { Effect, Option, Stream } from "effect"
import { decodeEnvelope, type Envelope, type EnvelopeOf } from "../domain/Events.js"
import type { SessionId } from "../domain/Ids.js"
import { EventStore, type SessionSummary } from "./EventStore.js"

interface EntryBase {
  readonly sessionId: SessionId
  /** the seq of the event the entry starts at (a command: its `tool.invoked`) */
  readonly seq: number
  /** when it happened (UTC ms) */
  readonly at: number
}

export interface FileEntry extends EntryBase {
  readonly kind: "file"
  /** relative to the session's directory when inside it */
  readonly path: string
  readonly op: "create" | "update" | "delete"
  readonly beforeHash?: string | undefined
  readonly afterHash?: string | undefined
  readonly callId?: string | undefined
  /** the tool of the call that changed it, when known */
  readonly tool?: string | undefined
  /** recorded by the crash sweep from the call's `file.intent`: the process died before recording it */
  readonly recovered?: boolean | undefined
}

/**
 * A file change a call announced (`file.intent`) and a crash left unrecorded, as the next run's
 * crash sweep found it (`file.recovered`): applied (its `file.changed {recovered}` is the entry
 * before), not applied, changed by something else, or unreadable.
 */
export interface RecoveryEntry extends EntryBase {
  readonly kind: "recovery"
  readonly callId: string
  readonly tool?: string | undefined
  readonly path: string
  readonly op: "create" | "update"
  readonly outcome: "applied" | "not-applied" | "changed" | "unreadable"
  /** what the file held when it was neither content (`changed`): its SHA-256; absent when it was gone */
  readonly hash?: string | undefined
  readonly error?: string | undefined
  /** the intent's temporary file was left and was removed */
  readonly tempRemoved?: boolean | undefined
}

/** How a command ended: it ran to its end (any exit code), or it was stopped, or it never ran. */
export type CommandStatus = "finished" | "failed" | "interrupted" | "timed out" | "not run"

export interface CommandEntry extends EntryBase {
  readonly kind: "command"
  readonly callId: string
  readonly command: string
  /** the directory it ran in (the session's) */
  readonly cwd: string | null
  readonly status: CommandStatus
  readonly exitCode?: number | undefined
  readonly signal?: string | undefined
  readonly durationMs?: number | undefined
  /** bytes of output in all */
  readonly bytes?: number | undefined
  /** the blob of the whole output (absent when it was too large to keep, or the command never ran) */
  readonly outputBlob?: string | undefined
  /** what the model was told when the call failed (a denial, a timeout, an interrupt) */
  readonly error?: string | undefined
  /** background processes were still running when the shell ended, and were stopped */
  readonly stoppedBackground?: boolean | undefined
}

export interface PermissionEntry extends EntryBase {
  readonly kind: "permission"
  readonly permissionId: string
  readonly tool: string
  readonly pattern: string
  readonly outside: boolean
  readonly callId?: string | undefined
  /** absent: never answered (the log ends while it waits) */
  readonly reply?: "once" | "always" | "reject" | undefined
  readonly message?: string | undefined
  /** the question ended unanswered: an interrupt or a crash */
  readonly interrupted?: boolean | undefined
  /** who rejected it when it was not the user (a policy) */
  readonly by?: string | undefined
}

export interface RetryEntry extends EntryBase {
  readonly kind: "retry"
  readonly attempt: number
  readonly delayMs: number
  readonly message: string
  readonly status?: number | undefined
}

export interface ModelErrorEntry extends EntryBase {
  readonly kind: "model-error"
  readonly message: string
  readonly status?: number | undefined
  readonly retryable: boolean
}

export interface InterruptEntry extends EntryBase {
  readonly kind: "interrupt"
  /** `user`, `shutdown`, `crash` (the repair of a dead process's session), `error` … */
  readonly reason: string
}

export interface TimeoutEntry extends EntryBase {
  readonly kind: "timeout"
  readonly callId: string
  readonly tool?: string | undefined
  readonly timeoutMs: number
}

/** A call refused before it ran (denied, rejected, an unknown tool, invalid arguments): what the model tried. */
export interface RefusedEntry extends EntryBase {
  readonly kind: "refused"
  readonly callId: string
  readonly tool: string
  /** its input as the model sent it (absent in older logs, and when it was not JSON) */
  readonly input?: unknown
  /** its input when it was not JSON */
  readonly inputText?: string | undefined
  /** why it did not run: the error the model read */
  readonly error: string
}

/**
 * A call of an MCP server's tool (`mcp__<server>__<tool>`): its input as the model sent it, how it
 * ended, and the blob of its whole result (docs/mcp.md).
 */
export interface McpCallEntry extends EntryBase {
  readonly kind: "mcp"
  readonly callId: string
  readonly tool: string
  readonly input: unknown
  readonly status: CommandStatus
  /** bytes of the whole result */
  readonly bytes?: number | undefined
  readonly resultBlob?: string | undefined
  /** what the model was told when the call failed */
  readonly error?: string | undefined
}

/**
 * A skill the model loaded (`skill`, docs/skills.md): its name, the file of it read when one was,
 * and where the skill came from (its `SKILL.md`, from the call's metadata).
 */
export interface SkillEntry extends EntryBase {
  readonly kind: "skill"
  readonly callId: string
  readonly name: string
  /** the file of the skill read (absent: its instructions were loaded) */
  readonly file?: string | undefined
  readonly scope?: string | undefined
  readonly source?: string | undefined
  readonly status: CommandStatus
  /** what the model was told when the call failed */
  readonly error?: string | undefined
}

/** The tool that loads skills (src/tools/skill.ts). */
const SKILL_TOOL = "skill"

/**
 * A hook run that changed a call's input or output, blocked it, failed or timed out (`hook.ran`,
 * docs/extensions.md). A before hook that changed the input: `from` is the input it got, `to` what it
 * made (the next run's input, or the call's `tool.invoked`).
 */
export interface HookEntry extends EntryBase {
  readonly kind: "hook"
  readonly source: string
  readonly hook: string
  readonly callId?: string | undefined
  readonly tool?: string | undefined
  readonly outcome: "changed" | "blocked" | "failed" | "timeout"
  readonly error?: string | undefined
  readonly reason?: string | undefined
  readonly from?: unknown
  readonly to?: unknown
  readonly ms: number
}

const shortJson = (value: unknown): string => {
  const text = JSON.stringify(value) ?? String(value)
  return text.length > 200 ? `${text.slice(0, 199)}…` : text
}

/**
 * A hook run in one line (audit, the screen, `sessions show`): `plugin:guard changed the input of
 * bash: {…} → {…}`, `… blocked bash: reason`, `… failed on bash: error`.
 */
export const hookRunText = (run: {
  readonly source: string
  readonly hook: string
  readonly tool?: string | undefined
  readonly outcome: "changed" | "blocked" | "failed" | "timeout"
  readonly error?: string | undefined
  readonly reason?: string | undefined
  readonly from?: unknown
  readonly to?: unknown
}): string => {
  const tool = run.tool ?? "a call"
  const after = run.hook === "tool.execute.after"
  const firstLine = (text: string | undefined) => (text ?? "").split("\n")[0]
  switch (run.outcome) {
    case "changed": {
      const change =
        run.from !== undefined && run.to !== undefined ? `: ${shortJson(run.from)} → ${shortJson(run.to)}` : ""
      return `${run.source} changed the ${after ? "output" : "input"} of ${tool}${change}`
    }
    case "blocked":
      return `${run.source} blocked ${tool}: ${firstLine(run.reason)}`
    case "failed":
    case "timeout":
      return (
        `${run.source} (${run.hook}) ${run.outcome === "timeout" ? "timed out" : "failed"} on ${tool}` +
        `${after ? ", skipped" : ", the call was not run"}: ${firstLine(run.error)}`
      )
  }
}

/** The prefix of an MCP server's tools (src/mcp/McpTools.ts). */
const MCP_TOOL_PREFIX = "mcp__"

/** An MCP tool a request offered: its server, its name, and the description the model read. */
export interface OfferedMcpTool {
  readonly server: string
  /** its name as the model saw it (`mcp__<server>__<tool>`) */
  readonly name: string
  readonly description: string
  /** against the session's previous `mcp-tools` entry: offered then too (`same`), or not (`new`), or told otherwise (`changed`) */
  readonly change: "new" | "changed" | "same"
}

/**
 * The MCP tools a prompt version offered (its `prompt.recorded` document), at the first request
 * sent with it: what each server told the model its tools do. One per prompt version that offers
 * MCP tools, or stops offering them.
 */
export interface McpToolsEntry extends EntryBase {
  readonly kind: "mcp-tools"
  readonly promptVersion: string
  readonly tools: ReadonlyArray<OfferedMcpTool>
  /** the MCP tools of the previous entry this prompt version does not offer */
  readonly removed: ReadonlyArray<string>
}

/** The server of an MCP tool's name (`mcp__<server>__<tool>`); `logbook` for its own tool search (`mcp__tool_search`). */
const serverOf = (name: string): string => {
  const parts = name.slice(MCP_TOOL_PREFIX.length).split("__")
  return parts.length < 2 ? "logbook" : (parts[0] ?? "")
}

/**
 * The MCP tools of a prompt document (docs/prompt.md), or `undefined` when it is not one: its
 * `tools` whose name is an MCP tool's, with their descriptions.
 */
export const offeredMcpTools = (
  document: string
): ReadonlyArray<{ readonly name: string; readonly description: string }> | undefined => {
  let parsed: unknown
  try {
    parsed = JSON.parse(document)
  } catch {
    return undefined
  }
  const tools = record(parsed).tools
  if (!Array.isArray(tools)) return undefined
  return tools.flatMap((tool) => {
    const { name, description } = record(tool)
    return typeof name === "string" && name.startsWith(MCP_TOOL_PREFIX)
      ? [{ name, description: typeof description === "string" ? description : "" }]
      : []
  })
}

export type AuditEntry =
  | HookEntry
  | RefusedEntry
  | McpCallEntry
  | SkillEntry
  | McpToolsEntry
  | FileEntry
  | RecoveryEntry
  | CommandEntry
  | PermissionEntry
  | RetryEntry
  | ModelErrorEntry
  | InterruptEntry
  | TimeoutEntry

export type AuditKind = AuditEntry["kind"]

export const auditKinds: ReadonlyArray<AuditKind> = [
  "file",
  "recovery",
  "command",
  "mcp",
  "skill",
  "mcp-tools",
  "hook",
  "permission",
  "retry",
  "model-error",
  "interrupt",
  "timeout"
]

export interface AuditFilter {
  /** the kinds kept (default: all) */
  readonly kinds?: ReadonlyArray<AuditKind> | undefined
  /** file changes only of the paths this matches (and no other kind unless `kinds` names it) */
  readonly path?: ((path: string) => boolean) | undefined
  /** entries at or after this time (UTC ms) */
  readonly since?: number | undefined
}

export interface SessionAudit {
  readonly session: SessionSummary
  readonly entries: ReadonlyArray<AuditEntry>
}

/** The event types an audit reads (the rest of a session's log — text deltas above all — is skipped). */
const AUDITED = new Set([
  "session.created",
  "tool.pending",
  "tool.invoked",
  "tool.finished",
  "tool.failed",
  "tool.timeout",
  "hook.ran",
  "file.changed",
  "file.recovered",
  "permission.asked",
  "permission.replied",
  "model.retry",
  "model.error",
  "turn.interrupted"
])

const record = (value: unknown): Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {}
const num = (value: unknown): number | undefined => (typeof value === "number" ? value : undefined)
const str = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

/** A command's end, from its `tool.finished` / `tool.failed` and what the bash tool recorded (`BashMetadata`). */
const commandEnd = (
  env: Envelope & { readonly type: "tool.finished" | "tool.failed" }
): Omit<CommandEntry, keyof EntryBase | "kind" | "callId" | "command" | "cwd"> => {
  const meta = record(env.payload.metadata)
  const ran = num(meta.exitCode) !== undefined
  const status: CommandStatus =
    env.type === "tool.finished"
      ? "finished"
      : env.payload.timedOut === true
        ? "timed out"
        : env.payload.interrupted === true
          ? "interrupted"
          : ran
            ? "failed"
            : "not run"
  return {
    status,
    exitCode: num(meta.exitCode),
    signal: str(meta.signal),
    durationMs: num(meta.durationMs),
    bytes: num(meta.bytes),
    outputBlob: str(meta.outputBlob),
    stoppedBackground: meta.stoppedBackground === true ? true : undefined,
    error: env.type === "tool.failed" ? env.payload.error : undefined
  }
}

const keep = (entry: AuditEntry, filter: AuditFilter): boolean => {
  if (filter.since !== undefined && entry.at < filter.since) return false
  const kinds = filter.kinds ?? (filter.path !== undefined ? ["file", "recovery"] : undefined)
  // a command the agent tried to run and was refused is one of the commands (what it tried), and
  // so is a hook's run on a command (what changed it)
  const kind = (entry.kind === "refused" || entry.kind === "hook") && entry.tool === "bash" ? "command" : entry.kind
  if (kinds !== undefined && !kinds.includes(kind) && !kinds.includes(entry.kind)) return false
  if ((entry.kind === "file" || entry.kind === "recovery") && filter.path !== undefined && !filter.path(entry.path))
    return false
  return true
}

/** Drops the fields that are undefined (so the JSON form has only what is known). */
const defined = <A extends object>(value: A): A =>
  Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as A

/** An audit folded one envelope at a time: what `auditEntries` and `auditSession` run. */
export interface Auditor {
  readonly push: (env: Envelope) => void
  /** whether a prompt version was seen already (its MCP tools need not be read again) */
  readonly knowsPrompt: (promptVersion: string) => boolean
  /** a `prompt.recorded` with the MCP tools its document offers (`offeredMcpTools`) */
  readonly offered: (
    env: EnvelopeOf<"prompt.recorded">,
    tools: ReadonlyArray<{ readonly name: string; readonly description: string }>
  ) => void
  /** the entries so far that the filter keeps, in seq order */
  readonly entries: () => Array<AuditEntry>
}

/**
 * What an auditor keeps: the entries, and per call the tool's name and where its entry is; nothing
 * of the envelopes (outputs, deltas) themselves.
 */
interface AuditState {
  readonly entries: Array<AuditEntry>
  /** the session's working directory (`session.created`), given to its commands */
  cwd: string | null
  /** the tool of each call, by call id */
  readonly tools: Map<string, string>
  /** the index in `entries` of a command's entry, by call id */
  readonly commands: Map<string, number>
  /** the index in `entries` of an MCP call's entry, by call id */
  readonly mcpCalls: Map<string, number>
  /** the index in `entries` of a skill call's entry, by call id */
  readonly skillCalls: Map<string, number>
  /** the index in `entries` of a permission question's entry, by permission id */
  readonly questions: Map<string, number>
  /** the prompt versions seen, and the MCP tools of the last `mcp-tools` entry (name -> description) */
  readonly prompts: Set<string>
  offered: ReadonlyMap<string, string>
  /** the index in `entries` of the last before hook that changed a call's input, until its `to` is known */
  readonly changedInput: Map<string, number>
}

/** A new prompt version's MCP tools, as an entry when it offers any or stops offering some. */
const promptOffered = (
  a: AuditState,
  env: EnvelopeOf<"prompt.recorded">,
  tools: ReadonlyArray<{ readonly name: string; readonly description: string }>
): void => {
  if (a.prompts.has(env.payload.promptVersion)) return
  a.prompts.add(env.payload.promptVersion)
  const now = new Map(tools.map((tool) => [tool.name, tool.description]))
  const removed = [...a.offered.keys()].filter((name) => !now.has(name))
  if (tools.length === 0 && removed.length === 0) return
  a.entries.push({
    kind: "mcp-tools",
    sessionId: env.sessionId,
    seq: env.seq,
    at: env.at,
    promptVersion: env.payload.promptVersion,
    tools: tools.map((tool) => {
      const before = a.offered.get(tool.name)
      return {
        server: serverOf(tool.name),
        name: tool.name,
        description: tool.description,
        change: before === undefined ? "new" : before === tool.description ? "same" : "changed"
      }
    }),
    removed
  })
  a.offered = now
}

/** A hook's run; a before hook that changed the input gets what it made from the next run or the call. */
const hookRan = (a: AuditState, env: EnvelopeOf<"hook.ran">, base: EntryBase): void => {
  const p = env.payload
  const callId = p.callId
  if (callId !== undefined && p.hook === "tool.execute.before") settleChangedInput(a, callId, p.input)
  if (callId !== undefined && p.outcome === "changed" && p.hook === "tool.execute.before")
    a.changedInput.set(callId, a.entries.length)
  a.entries.push({
    kind: "hook",
    ...base,
    source: p.source,
    hook: p.hook,
    callId,
    tool: p.tool ?? (callId === undefined ? undefined : a.tools.get(callId)),
    outcome: p.outcome,
    error: p.error,
    reason: p.reason,
    ...(p.input !== undefined ? { from: p.input } : {}),
    ms: p.ms
  })
}

const settleChangedInput = (a: AuditState, callId: string, to: unknown): void => {
  const at = a.changedInput.get(callId)
  if (at === undefined) return
  a.changedInput.delete(callId)
  if (to !== undefined) a.entries[at] = { ...(a.entries[at] as HookEntry), to }
}

/** A call invoked: a command's entry (bash) or an MCP call's, each with how it ends still to come. */
const callInvoked = (a: AuditState, env: EnvelopeOf<"tool.invoked">, base: EntryBase): void => {
  const p = env.payload
  a.tools.set(p.callId, p.tool)
  settleChangedInput(a, p.callId, p.input)
  if (p.tool === "bash") {
    const command = str(record(p.input).command) ?? JSON.stringify(p.input)
    a.commands.set(p.callId, a.entries.length)
    a.entries.push({ kind: "command", ...base, callId: p.callId, command, cwd: a.cwd, status: "not run" })
  } else if (p.tool === SKILL_TOOL) {
    const input = record(p.input)
    a.skillCalls.set(p.callId, a.entries.length)
    a.entries.push({
      kind: "skill",
      ...base,
      callId: p.callId,
      name: str(input.name) ?? "?",
      file: str(input.file),
      status: "not run"
    })
  } else if (p.tool.startsWith(MCP_TOOL_PREFIX)) {
    a.mcpCalls.set(p.callId, a.entries.length)
    a.entries.push({ kind: "mcp", ...base, callId: p.callId, tool: p.tool, input: p.input, status: "not run" })
  }
}

/** How a call ended, from its `tool.finished` / `tool.failed`. */
const callStatus = (env: EnvelopeOf<"tool.finished" | "tool.failed">): CommandStatus =>
  env.type === "tool.finished"
    ? "finished"
    : env.payload.timedOut === true
      ? "timed out"
      : env.payload.interrupted === true
        ? "interrupted"
        : "failed"

/** An MCP call's entry with how it ended. */
const mcpCallEnd = (entry: McpCallEntry, env: EnvelopeOf<"tool.finished" | "tool.failed">): McpCallEntry => {
  const meta = record(env.payload.metadata)
  return defined({
    ...entry,
    status: callStatus(env),
    bytes: num(meta.resultBytes),
    resultBlob: str(meta.resultBlob),
    error: env.type === "tool.failed" ? env.payload.error : undefined
  } satisfies McpCallEntry)
}

/**
 * A call ended: an MCP call's or a command's entry gets how it ended; a call that failed before it
 * was invoked, with the input the model sent, is a refused call of its own.
 */
const callEnded = (a: AuditState, env: EnvelopeOf<"tool.finished" | "tool.failed">, base: EntryBase): void => {
  const skillAt = a.skillCalls.get(env.payload.callId)
  if (skillAt !== undefined) {
    const entry = a.entries[skillAt] as SkillEntry
    const meta = record(env.payload.metadata)
    a.entries[skillAt] = defined({
      ...entry,
      status: callStatus(env),
      scope: str(meta.scope),
      source: str(meta.source),
      error: env.type === "tool.failed" ? env.payload.error : undefined
    } satisfies SkillEntry)
    return
  }
  const mcpAt = a.mcpCalls.get(env.payload.callId)
  if (mcpAt !== undefined) {
    a.entries[mcpAt] = mcpCallEnd(a.entries[mcpAt] as McpCallEntry, env)
    return
  }
  const at = a.commands.get(env.payload.callId)
  if (env.type === "tool.failed" && at === undefined && !env.payload.interrupted) {
    const p = env.payload
    if (p.input !== undefined || p.inputText !== undefined)
      a.entries.push({
        kind: "refused",
        ...base,
        callId: p.callId,
        tool: a.tools.get(p.callId) ?? "?",
        ...(p.input !== undefined ? { input: p.input } : {}),
        inputText: p.inputText,
        error: p.error
      })
    return
  }
  if (at === undefined) return
  a.entries[at] = { ...(a.entries[at] as CommandEntry), ...commandEnd(env) }
}

/** A file changed (by a tool, or recovered from an intent), or a recovery's outcome. */
const fileEvent = (a: AuditState, env: EnvelopeOf<"file.changed" | "file.recovered">, base: EntryBase): void => {
  if (env.type === "file.changed") {
    const p = env.payload
    a.entries.push({
      kind: "file",
      ...base,
      path: p.path,
      op: p.op,
      beforeHash: p.beforeHash,
      afterHash: p.afterHash,
      callId: p.callId,
      tool: p.callId === undefined ? undefined : a.tools.get(p.callId),
      recovered: p.recovered === true ? true : undefined
    })
    return
  }
  const p = env.payload
  a.entries.push({
    kind: "recovery",
    ...base,
    callId: p.callId,
    tool: a.tools.get(p.callId),
    path: p.path,
    op: p.op,
    outcome: p.outcome,
    hash: p.hash,
    error: p.error,
    tempRemoved: p.tempRemoved === true ? true : undefined
  })
}

/** A permission question's entry, and its answer once given. */
const permissionEvent = (
  a: AuditState,
  env: EnvelopeOf<"permission.asked" | "permission.replied">,
  base: EntryBase
): void => {
  if (env.type === "permission.asked") {
    const p = env.payload
    a.questions.set(p.permissionId, a.entries.length)
    a.entries.push({
      kind: "permission",
      ...base,
      permissionId: p.permissionId,
      tool: p.tool,
      pattern: p.pattern,
      outside: p.outside === true,
      callId: p.callId
    })
    return
  }
  const at = a.questions.get(env.payload.permissionId)
  if (at === undefined) return
  const p = env.payload
  a.entries[at] = {
    ...(a.entries[at] as PermissionEntry),
    reply: p.interrupted === true ? undefined : p.reply,
    message: p.message,
    interrupted: p.interrupted,
    by: p.by
  }
}

/** A turn's retries, model errors and interrupts. */
const turnEvent = (
  a: AuditState,
  env: EnvelopeOf<"model.retry" | "model.error" | "turn.interrupted">,
  base: EntryBase
): void => {
  switch (env.type) {
    case "model.retry":
      a.entries.push({
        kind: "retry",
        ...base,
        attempt: env.payload.attempt,
        delayMs: env.payload.delayMs,
        message: env.payload.message,
        status: env.payload.status
      })
      break
    case "model.error":
      a.entries.push({
        kind: "model-error",
        ...base,
        message: env.payload.message,
        status: env.payload.status,
        retryable: env.payload.retryable
      })
      break
    case "turn.interrupted":
      a.entries.push({ kind: "interrupt", ...base, reason: env.payload.reason })
      break
  }
}

/** Folds one envelope into the audit by the group its type belongs to (types not `AUDITED` are skipped). */
const auditEnvelope = (a: AuditState, env: Envelope): void => {
  if (!AUDITED.has(env.type)) return
  const base = { sessionId: env.sessionId, seq: env.seq, at: env.at }
  switch (env.type) {
    case "session.created":
      a.cwd = env.payload.cwd ?? null
      break
    case "tool.pending":
      a.tools.set(env.payload.callId, env.payload.tool)
      break
    case "tool.invoked":
      callInvoked(a, env, base)
      break
    case "tool.finished":
    case "tool.failed":
      callEnded(a, env, base)
      break
    case "tool.timeout":
      a.entries.push({
        kind: "timeout",
        ...base,
        callId: env.payload.callId,
        tool: a.tools.get(env.payload.callId),
        timeoutMs: env.payload.timeoutMs
      })
      break
    case "hook.ran":
      hookRan(a, env, base)
      break
    case "file.changed":
    case "file.recovered":
      fileEvent(a, env, base)
      break
    case "permission.asked":
    case "permission.replied":
      permissionEvent(a, env, base)
      break
    case "model.retry":
    case "model.error":
    case "turn.interrupted":
      turnEvent(a, env, base)
      break
  }
}

/**
 * Folds one session's envelopes, in seq order, into audit entries (a command at its `tool.invoked`,
 * with how it ended; a question with its answer). It keeps the entries and, per call, the tool's
 * name and where its entry is; nothing of the envelopes (outputs, deltas) themselves.
 */
export const makeAuditor = (filter: AuditFilter = {}): Auditor => {
  const a: AuditState = {
    entries: [],
    cwd: null,
    tools: new Map(),
    commands: new Map(),
    mcpCalls: new Map(),
    skillCalls: new Map(),
    questions: new Map(),
    prompts: new Set(),
    offered: new Map(),
    changedInput: new Map()
  }
  return {
    push: (env) => auditEnvelope(a, env),
    knowsPrompt: (promptVersion) => a.prompts.has(promptVersion),
    offered: (env, tools) => promptOffered(a, env, tools),
    entries: () => a.entries.filter((entry) => keep(entry, filter)).map(defined)
  }
}

/** The audit entries of a sequence of one session's envelopes, in seq order. */
export const auditEntries = (envelopes: Iterable<Envelope>, filter: AuditFilter = {}): Array<AuditEntry> => {
  const auditor = makeAuditor(filter)
  for (const env of envelopes) auditor.push(env)
  return auditor.entries()
}

/** The most of a prompt document the audit reads for its MCP tools (larger: not shown). */
const MAX_PROMPT_BYTES = 16 * 1024 * 1024

/** The MCP tools of a new prompt version, read from its document's blob. */
const promptEvent = (auditor: Auditor, env: EnvelopeOf<"prompt.recorded">) =>
  Effect.gen(function* () {
    if (auditor.knowsPrompt(env.payload.promptVersion)) return
    const store = yield* EventStore
    const blob = yield* store.getBlob(env.payload.blob)
    const tools =
      Option.isNone(blob) || blob.value.byteLength > MAX_PROMPT_BYTES
        ? undefined
        : offeredMcpTools(Buffer.from(blob.value).toString("utf8"))
    if (tools !== undefined) auditor.offered(env, tools)
  })

/**
 * The audit of one session: its rows read page by page, only the audited types decoded, each
 * folded as it comes (a long session is never held); a new prompt version's document is read for
 * the MCP tools it offered.
 */
export const auditSession = Effect.fn("Audit.session")(function* (session: SessionSummary, filter: AuditFilter = {}) {
  const store = yield* EventStore
  const auditor = makeAuditor(filter)
  yield* store.readRaw(session.id).pipe(
    Stream.runForEach((raw) => {
      if (raw.type === "prompt.recorded")
        return Effect.flatMap(decodeEnvelope(raw), (env) =>
          env.type === "prompt.recorded" ? promptEvent(auditor, env) : Effect.void
        )
      if (!AUDITED.has(raw.type)) return Effect.void
      return Effect.map(decodeEnvelope(raw), auditor.push)
    })
  )
  return { session, entries: auditor.entries() } satisfies SessionAudit
})

export interface AuditLogOptions extends AuditFilter {
  /** the sessions of this directory only */
  readonly cwd?: string | undefined
  /** deleted sessions too (default false) */
  readonly includeDeleted?: boolean | undefined
}

/**
 * The audits of several sessions (a directory's, those updated since `since`), oldest first;
 * sessions with no entry left by the filter are left out.
 */
export const auditLog = Effect.fn("Audit.log")(function* (options: AuditLogOptions = {}) {
  const store = yield* EventStore
  const sessions = yield* store.sessions({ cwd: options.cwd, includeDeleted: options.includeDeleted })
  const chosen = sessions
    .filter((s) => options.since === undefined || s.updatedAt >= options.since)
    .sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id))
  const audits: Array<SessionAudit> = []
  for (const session of chosen) {
    const audit = yield* auditSession(session, options)
    if (audit.entries.length > 0) audits.push(audit)
  }
  return audits
})

/** The most bytes of one blob a diff is computed from (larger: the diff says so). */
export const MAX_DIFF_BYTES = 1024 * 1024

/** The content of a blob as text: absent (no hash), missing (not in the store), too large, or binary. */
export type BlobText =
  | { readonly _tag: "text"; readonly text: string }
  | { readonly _tag: "none" }
  | { readonly _tag: "missing" | "binary" | "too-large"; readonly hash: string; readonly bytes?: number }

export const blobText = Effect.fn("Audit.blobText")(function* (hash: string | undefined, maxBytes = MAX_DIFF_BYTES) {
  if (hash === undefined) return { _tag: "none" } satisfies BlobText as BlobText
  const store = yield* EventStore
  const blob = yield* store.getBlob(hash)
  if (Option.isNone(blob)) return { _tag: "missing", hash } satisfies BlobText as BlobText
  const bytes = blob.value
  if (bytes.byteLength > maxBytes)
    return { _tag: "too-large", hash, bytes: bytes.byteLength } satisfies BlobText as BlobText
  if (bytes.includes(0)) return { _tag: "binary", hash, bytes: bytes.byteLength } satisfies BlobText as BlobText
  return { _tag: "text", text: Buffer.from(bytes).toString("utf8") } satisfies BlobText as BlobText
})

/** A line saying why a side of a change cannot be shown as text. */
const unshown = (side: "before" | "after", blob: BlobText): string | undefined => {
  switch (blob._tag) {
    case "text":
    case "none":
      return undefined
    case "missing":
      return `the content ${side} (blob ${blob.hash}) is not in this database`
    case "binary":
      return `binary content ${side} (${blob.bytes} bytes, blob ${blob.hash})`
    case "too-large":
      return `the content ${side} is too large to diff (${blob.bytes} bytes, blob ${blob.hash})`
  }
}

/**
 * A file change as a unified diff (`--- a/path`, `+++ b/path`, hunks with 3 lines of context), or
 * the sentences saying why it cannot be one (a binary, too large or missing blob).
 */
export const auditDiff = Effect.fn("Audit.diff")(function* (entry: FileEntry) {
  const before = yield* blobText(entry.beforeHash)
  const after = yield* blobText(entry.afterHash)
  const notes = [unshown("before", before), unshown("after", after)].filter((n): n is string => n !== undefined)
  if (notes.length > 0) return { diff: undefined, notes }
  const oldText = before._tag === "text" ? before.text : ""
  const newText = after._tag === "text" ? after.text : ""
  const patch = structuredPatch(
    entry.op === "create" ? "/dev/null" : `a/${entry.path}`,
    entry.op === "delete" ? "/dev/null" : `b/${entry.path}`,
    oldText,
    newText,
    "",
    "",
    { context: 3 }
  )
  const lines = [`--- ${patch.oldFileName}`, `+++ ${patch.newFileName}`]
  // an empty side starts at the line before (as diff -u writes it: @@ -0,0 +1,2 @@)
  const start = (line: number, count: number) => (count === 0 ? Math.max(0, line - 1) : line)
  for (const hunk of patch.hunks) {
    lines.push(
      `@@ -${start(hunk.oldStart, hunk.oldLines)},${hunk.oldLines} +${start(hunk.newStart, hunk.newLines)},${hunk.newLines} @@`
    )
    lines.push(...hunk.lines)
  }
  return { diff: patch.hunks.length === 0 ? undefined : lines.join("\n"), notes }
})

/** The whole output of a command, from its blob (`undefined` when there is none to read). */
export const auditOutput = Effect.fn("Audit.output")(function* (entry: CommandEntry) {
  if (entry.outputBlob === undefined) return undefined
  const store = yield* EventStore
  const blob = yield* store.getBlob(entry.outputBlob)
  return Option.match(blob, {
    onNone: () => undefined,
    onSome: (bytes) => Buffer.from(bytes).toString("utf8")
  })
})
