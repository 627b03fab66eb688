/**
 * Provider streams for the scripted server: recorded ones (`test/fixtures/recorded/`, see its
 * README) replayed as they were sent, and Anthropic Messages API streams built in the real framing
 * (`event: <type>` + `data: <json>`, the event and block shapes of the recordings).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type { ScriptedResponse, SseStep } from "./scriptedServer.js"

const dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "recorded")

/** The JSON objects of a recorded stream, one per line. */
export const recordedChunks = (name: string): ReadonlyArray<Record<string, unknown>> =>
  fs
    .readFileSync(path.join(dir, name), "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as Record<string, unknown>)

/**
 * A recorded stream as a response: Anthropic events (objects with a `type` such as `message_start`)
 * as named SSE events; OpenAI-compatible chunks as `data:` lines, then `[DONE]`.
 */
export const recordedReply = (name: string): ScriptedResponse => {
  const chunks = recordedChunks(name)
  const anthropic = chunks[0]?.type === "message_start"
  const steps: Array<SseStep> = chunks.map((chunk) =>
    anthropic ? { type: "event", event: String(chunk.type), data: chunk } : { type: "chunk", chunk }
  )
  if (!anthropic) steps.push({ type: "done" })
  return { type: "sse", steps }
}

/** The text of the reasoning (`reasoning_content`) and content deltas of a recorded OpenAI-compatible stream. */
export const recordedText = (name: string): { readonly reasoning: string; readonly text: string } => {
  let reasoning = ""
  let text = ""
  for (const chunk of recordedChunks(name)) {
    const choices = (chunk.choices ?? []) as ReadonlyArray<{
      delta?: { reasoning_content?: unknown; content?: unknown }
    }>
    for (const choice of choices) {
      if (typeof choice.delta?.reasoning_content === "string") reasoning += choice.delta.reasoning_content
      if (typeof choice.delta?.content === "string") text += choice.delta.content
    }
  }
  return { reasoning, text }
}

/** One content block of an Anthropic answer. */
export type AnthropicBlock =
  /** extended thinking: its text (pieces as deltas) and the signature that closes it */
  | { readonly thinking: string | ReadonlyArray<string>; readonly signature: string }
  /** a redacted thinking block: encrypted data, no text */
  | { readonly redacted: string }
  | { readonly text: string | ReadonlyArray<string> }
  /** a tool call; `input` is the JSON text, pieces as `input_json_delta`s */
  | { readonly toolUse: { readonly id: string; readonly name: string; readonly input: string | ReadonlyArray<string> } }

export interface AnthropicUsage {
  readonly input_tokens: number
  readonly output_tokens: number
  readonly cache_creation_input_tokens?: number
  readonly cache_read_input_tokens?: number
}

const pieces = (value: string | ReadonlyArray<string>): ReadonlyArray<string> =>
  typeof value === "string" ? [value] : value

/** An Anthropic streamed answer made of `blocks`, in the Messages API's SSE framing. */
export const anthropicReply = (
  blocks: ReadonlyArray<AnthropicBlock>,
  options: { readonly stopReason?: string; readonly usage?: AnthropicUsage; readonly model?: string } = {}
): ScriptedResponse => {
  const usage = options.usage ?? { input_tokens: 10, output_tokens: 5 }
  const steps: Array<SseStep> = []
  const event = (data: Record<string, unknown>) => steps.push({ type: "event", event: String(data.type), data })
  event({
    type: "message_start",
    message: {
      id: "msg_scripted",
      type: "message",
      role: "assistant",
      model: options.model ?? "claude-scripted",
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: {
        input_tokens: usage.input_tokens,
        cache_creation_input_tokens: usage.cache_creation_input_tokens ?? 0,
        cache_read_input_tokens: usage.cache_read_input_tokens ?? 0,
        output_tokens: 1
      }
    }
  })
  blocks.forEach((block, index) => {
    const delta = (d: Record<string, unknown>) => event({ type: "content_block_delta", index, delta: d })
    if ("thinking" in block) {
      event({ type: "content_block_start", index, content_block: { type: "thinking", thinking: "", signature: "" } })
      for (const piece of pieces(block.thinking)) delta({ type: "thinking_delta", thinking: piece })
      delta({ type: "signature_delta", signature: block.signature })
    } else if ("redacted" in block) {
      event({ type: "content_block_start", index, content_block: { type: "redacted_thinking", data: block.redacted } })
    } else if ("text" in block) {
      event({ type: "content_block_start", index, content_block: { type: "text", text: "" } })
      for (const piece of pieces(block.text)) delta({ type: "text_delta", text: piece })
    } else {
      const { id, name, input } = block.toolUse
      event({ type: "content_block_start", index, content_block: { type: "tool_use", id, name, input: {} } })
      for (const piece of pieces(input)) delta({ type: "input_json_delta", partial_json: piece })
    }
    event({ type: "content_block_stop", index })
  })
  const calls = blocks.some((block) => "toolUse" in block)
  event({
    type: "message_delta",
    delta: { stop_reason: options.stopReason ?? (calls ? "tool_use" : "end_turn"), stop_sequence: null },
    usage: { output_tokens: usage.output_tokens }
  })
  event({ type: "message_stop" })
  return { type: "sse", steps }
}
