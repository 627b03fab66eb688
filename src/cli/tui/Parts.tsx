/**
 * The transcript's pieces: a user message, a text part (markdown), reasoning (collapsed unless
 * asked for), a tool part with its live state, a notice; and the status line.
 */
import { structuredPatch } from "diff"
import { Box, Text } from "ink"
import type React from "react"
import type { ToolPart } from "../../domain/Message.js"
import { exitText, outputTail } from "../../present/commandOutput.js"
import { sanitize } from "../../present/sanitize.js"
import type { FileChangeRef, Item, Screen } from "../../present/screen.js"
import { formatCount, formatDuration, formatUsageCost, oneLine } from "../../present/text.js"
import { describeInput, retryLine } from "../runOutput.js"
import { Markdown } from "./Markdown.js"
import { useTheme } from "./theme.js"

/** The most lines of a running command's output shown (its tail). */
export const TAIL_LINES = 5
/** The most lines of a diff shown per file. */
export const DIFF_LINES = 40

export interface ItemContext {
  readonly screen: Screen
  readonly blobs: ReadonlyMap<string, string | null>
  readonly now: number
  readonly showReasoning: boolean
  readonly width: number
}

const cut = (line: string, width: number): string => {
  const chars = Array.from(line)
  return chars.length <= width ? line : `${chars.slice(0, Math.max(1, width - 1)).join("")}…`
}

/** A text on one line (line breaks shown as ⏎), cut to `width`. */
export const oneLineCut = (text: string, width: number): string => cut(oneLine(text), Math.max(1, width))

export const ItemView = ({ item, ctx }: { readonly item: Item; readonly ctx: ItemContext }): React.ReactNode => {
  const theme = useTheme()
  switch (item.kind) {
    case "user":
      return (
        <Box marginTop={1}>
          <Text {...theme.fg("blue")} bold>
            {"› "}
          </Text>
          <Box flexShrink={1}>
            <Text>{item.text}</Text>
          </Box>
          {item.mode === "steer" ? (
            <Text dimColor> (steer)</Text>
          ) : item.mode === "queue" ? (
            <Text dimColor> (queued)</Text>
          ) : null}
        </Box>
      )
    case "text":
      return (
        <Box marginTop={1}>
          <Markdown text={item.text} />
        </Box>
      )
    case "reasoning": {
      const words = item.text.trim() === "" ? 0 : item.text.trim().split(/\s+/).length
      return ctx.showReasoning ? (
        <Box marginTop={1} flexDirection="column">
          <Text dimColor italic>
            ▾ thinking
          </Text>
          <Text dimColor>{item.text}</Text>
        </Box>
      ) : (
        <Box marginTop={1}>
          <Text dimColor italic>
            ▸ thinking{words > 0 ? ` (${formatCount(words)} words)` : ""} · Ctrl-O shows it
          </Text>
        </Box>
      )
    }
    case "tool": {
      const part = ctx.screen.session.toolParts.get(item.callId)
      return part === undefined ? null : <ToolView part={part} ctx={ctx} />
    }
    case "notice":
      return (
        <Box marginTop={1}>
          <Text
            {...theme.fg(item.tone === "error" ? "red" : item.tone === "warn" ? "yellow" : "gray")}
            dimColor={item.tone === "info"}
          >
            {item.tone === "error" ? "✗ " : item.tone === "warn" ? "! " : "· "}
            {item.text}
          </Text>
        </Box>
      )
  }
}

const inputOf = (part: ToolPart): unknown => ("input" in part.state ? part.state.input : {})

const ToolView = ({ part, ctx }: { readonly part: ToolPart; readonly ctx: ItemContext }): React.ReactNode => {
  const theme = useTheme()
  const state = part.state
  const subject = state._tag === "pending" ? "" : sanitize(describeInput(part.tool, inputOf(part)))
  const header = (icon: string, color: "yellow" | "green" | "red" | "gray", suffix: string) => (
    <Text>
      <Text {...theme.fg(color)}>{icon}</Text> <Text bold>{part.tool}</Text>
      {subject === "" ? "" : ` ${subject}`}
      <Text dimColor>{suffix === "" ? "" : `  ${suffix}`}</Text>
    </Text>
  )
  switch (state._tag) {
    case "pending":
      return <Box marginTop={1}>{header("○", "gray", "pending")}</Box>
    case "running": {
      const elapsed = formatDuration(Math.max(0, ctx.now - state.startedAt))
      const tail =
        state.progress === undefined
          ? []
          : sanitize(state.progress)
              .replace(/\n+$/, "")
              .split("\n")
              .slice(-TAIL_LINES)
              .map((line) => cut(line, ctx.width - 4))
      return (
        <Box marginTop={1} flexDirection="column">
          {header("●", "yellow", `running ${elapsed}${state.timedOut ? " · timed out, stopping" : ""}`)}
          {tail.map((line, i) => (
            <Text key={i} dimColor>
              {"  │ "}
              {line}
            </Text>
          ))}
        </Box>
      )
    }
    case "completed": {
      const took = formatDuration(state.endedAt - state.startedAt)
      // a command that exited non-zero failed: said with its exit, in the colour of failures
      const exit = exitText(state.metadata)
      return (
        <Box marginTop={1} flexDirection="column">
          {exit === undefined ? header("✓", "green", took) : header("✗", "red", `${exit} · ${took}`)}
          <Outcome part={part} output={state.output} ctx={ctx} />
        </Box>
      )
    }
    case "error": {
      const took = state.startedAt === undefined ? "" : ` · ${formatDuration(state.endedAt - state.startedAt)}`
      const label = state.interrupted ? "interrupted" : state.timedOut ? "timed out" : "error"
      const first =
        sanitize(state.error)
          .split("\n")
          .find((line) => line.trim() !== "") ?? ""
      return (
        <Box marginTop={1} flexDirection="column">
          {header(state.interrupted ? "⊘" : "✗", state.interrupted ? "yellow" : "red", `${label}${took}`)}
          {state.interrupted ? null : (
            <Text {...theme.fg("red")}>
              {"  "}
              {cut(first, ctx.width - 2)}
            </Text>
          )}
          <Diffs part={part} ctx={ctx} />
        </Box>
      )
    }
  }
}

/** Under a finished call: the diff of what it changed, else the first lines of its output. */
const Outcome = ({
  part,
  output,
  ctx
}: {
  readonly part: ToolPart
  readonly output: string
  readonly ctx: ItemContext
}): React.ReactNode => {
  if ((ctx.screen.changes[part.callId] ?? []).length > 0) return <Diffs part={part} ctx={ctx} />
  if (part.tool !== "bash") return null
  // the end of what the command printed (its exit is in the header)
  const { lines: shown, above } = outputTail(sanitize(output), 3)
  return (
    <Box flexDirection="column">
      {above > 0 ? <Text dimColor>{`  │ … ${above} lines above`}</Text> : null}
      {shown.map((line, i) => (
        <Text key={i} dimColor>
          {"  │ "}
          {cut(line, ctx.width - 4)}
        </Text>
      ))}
    </Box>
  )
}

const Diffs = ({ part, ctx }: { readonly part: ToolPart; readonly ctx: ItemContext }): React.ReactNode => {
  const changes = ctx.screen.changes[part.callId] ?? []
  return (
    <Box flexDirection="column">
      {changes.map((change, i) => (
        <DiffView key={i} change={change} ctx={ctx} />
      ))}
    </Box>
  )
}

/** The unified diff lines of a change, or why it cannot be shown yet. */
export const diffLines = (
  change: FileChangeRef,
  blobs: ReadonlyMap<string, string | null>
): ReadonlyArray<string> | "loading" | "missing" => {
  const content = (hash: string | undefined): string | null | undefined =>
    hash === undefined ? "" : blobs.has(hash) ? blobs.get(hash)! : undefined
  const before = content(change.beforeHash)
  const after = content(change.afterHash)
  if (before === undefined || after === undefined) return "loading"
  if (before === null || after === null) return "missing"
  const patch = structuredPatch(change.path, change.path, before, after, "", "", { context: 2 })
  const lines: Array<string> = []
  for (const hunk of patch.hunks) {
    // an empty range starts at the line before it, as diff -u writes it (`@@ -0,0 +1,2 @@`)
    const from = hunk.oldLines === 0 ? hunk.oldStart - 1 : hunk.oldStart
    const to = hunk.newLines === 0 ? hunk.newStart - 1 : hunk.newStart
    lines.push(`@@ -${from},${hunk.oldLines} +${to},${hunk.newLines} @@`)
    for (const line of hunk.lines) if (!line.startsWith("\\")) lines.push(line)
  }
  return lines
}

const DiffView = ({ change, ctx }: { readonly change: FileChangeRef; readonly ctx: ItemContext }): React.ReactNode => {
  const theme = useTheme()
  const lines = diffLines(change, ctx.blobs)
  const title = `  ${change.op === "create" ? "created" : change.op === "delete" ? "deleted" : "changed"} ${sanitize(change.path)}`
  if (typeof lines === "string")
    return (
      <Text dimColor>
        {title}
        {lines === "missing" ? " (its content is not in the log)" : ""}
      </Text>
    )
  const shown = lines.slice(0, DIFF_LINES)
  return (
    <Box flexDirection="column">
      <Text dimColor>{title}</Text>
      {shown.map((line, i) => {
        const color = line.startsWith("+")
          ? "green"
          : line.startsWith("-")
            ? "red"
            : line.startsWith("@@")
              ? "cyan"
              : undefined
        return (
          <Text key={i} {...(color === undefined ? {} : theme.fg(color))} dimColor={color === undefined}>
            {"  "}
            {cut(sanitize(line), ctx.width - 2)}
          </Text>
        )
      })}
      {lines.length > shown.length ? (
        <Text dimColor>{`  … ${lines.length - shown.length} more diff lines`}</Text>
      ) : null}
    </Box>
  )
}

export interface StatusInfo {
  readonly screen: Screen
  readonly model: string
  readonly contextWindow: number | undefined
  readonly maxAttempts: number
  readonly now: number
  readonly interrupting: boolean
}

/** `busy · streaming │ openai/gpt-4o │ 12,345 tokens │ $0.0123 │ ctx 34% │ 01J…` */
export const statusText = (info: StatusInfo): { readonly state: string; readonly rest: string } => {
  const { session } = info.screen
  const status = session.status
  const state = info.interrupting
    ? "interrupting…"
    : status._tag === "retry"
      ? retryLine(status.attempt, info.maxAttempts, status.nextAt - info.now, sanitize(status.message))
      : status._tag === "busy"
        ? `busy · ${session.chatState.replace("_", " ")}`
        : "idle"
  const totals = session.totals
  const parts = [
    info.model,
    `${formatCount(totals.input + totals.output + totals.cacheRead + totals.cacheWrite)} tokens`,
    formatUsageCost(totals)
  ]
  if (info.contextWindow !== undefined && info.contextWindow > 0)
    parts.push(`ctx ${Math.min(999, Math.round((100 * info.screen.contextTokens) / info.contextWindow))}%`)
  else if (info.screen.contextTokens > 0) parts.push(`ctx ${formatCount(info.screen.contextTokens)}`)
  parts.push(session.sessionId === "" ? "new session" : session.sessionId)
  return { state, rest: parts.join(" │ ") }
}

export const StatusLine = ({ info, width }: { readonly info: StatusInfo; readonly width: number }): React.ReactNode => {
  const theme = useTheme()
  const { state, rest } = statusText(info)
  const tag = info.screen.session.status._tag
  const color = info.interrupting || tag === "retry" ? "yellow" : tag === "busy" ? "cyan" : "green"
  return (
    <Text>
      <Text {...theme.fg(color)} bold>
        {cut(state, Math.max(10, width - 2))}
      </Text>
      <Text dimColor>{cut(` │ ${rest}`, Math.max(0, width - Array.from(state).length - 1))}</Text>
    </Text>
  )
}
