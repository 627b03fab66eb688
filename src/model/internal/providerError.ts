/**
 * What a failed request says, for `ModelError` (see docs/models.md#errors):
 *
 * - `providerMessage`: the provider's own words from an error body or an error object sent in the
 *   stream — OpenAI and OpenAI-compatible `{"error": {"message", "type", "code"}}`, Anthropic
 *   `{"type": "error", "error": {"type", "message"}}`, Ollama `{"error": "…"}`, `{"message": …}`,
 *   `{"detail": …}`, OpenRouter's `metadata.raw`, a plain-text or HTML body — on one line, the API
 *   key and key-like tokens masked, cut to `maxProviderMessageLength` characters;
 * - `networkKind`: a connection failure that no retry soon will fix: a host that does not resolve,
 *   a connection refused, a port fetch never connects to;
 * - `endpointOf`: the host and port a provider's requests go to, for messages that name them.
 */
import { maxProviderMessageLength } from "../Model.js"

// ---------------------------------------------------------------------------------------------
// the provider's message

/** Tokens that look like credentials, masked even when they are not our key (a provider may echo another). */
const KEY_LIKE = /\b(?:sk|rk|pk)-[A-Za-z0-9_-]{16,}/g
const AUTH_VALUE = /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}/gi

const nonEmpty = (value: unknown): string | undefined =>
  typeof value === "string" && value.trim() !== "" ? value : undefined

/** `detail` of FastAPI/pydantic servers: a string, or a list of `{ loc, msg }`. */
const detailText = (value: unknown): string | undefined => {
  const direct = nonEmpty(value)
  if (direct !== undefined) return direct
  if (!Array.isArray(value)) return undefined
  const messages = value
    .slice(0, 5)
    .map((item) => (typeof item === "object" && item !== null ? nonEmpty((item as { msg?: unknown }).msg) : undefined))
    .filter((m): m is string => m !== undefined)
  return messages.length === 0 ? undefined : messages.join("; ")
}

/** A code or type that says something (`content_policy_violation`), when there is no message. */
const codeText = (value: unknown): string | undefined => {
  const text = nonEmpty(value)
  return text === undefined || /^(error|\d+)$/i.test(text.trim()) ? undefined : text
}

const fromJson = (value: unknown, depth: number): string | undefined => {
  if (depth > 4) return undefined
  if (typeof value === "string") return nonEmpty(value)
  if (Array.isArray(value)) {
    // Gemini's OpenAI-compatible endpoint answers `[{"error": …}]`
    for (const item of value.slice(0, 3)) {
      const found = fromJson(item, depth + 1)
      if (found !== undefined) return found
    }
    return undefined
  }
  if (typeof value !== "object" || value === null) return undefined
  const record = value as Record<string, unknown>
  if (record.error !== undefined && typeof record.error !== "boolean") {
    const inner = fromJson(record.error, depth + 1)
    if (inner !== undefined) return inner
  }
  const message = nonEmpty(record.message) ?? detailText(record.detail) ?? nonEmpty(record.error_description)
  if (message !== undefined) {
    // OpenRouter: "Provider returned error", the upstream provider's own body in `metadata.raw`
    const metadata = record.metadata
    if (typeof metadata === "object" && metadata !== null && depth < 4) {
      const { raw, provider_name } = metadata as { raw?: unknown; provider_name?: unknown }
      const upstream = typeof raw === "string" ? fromText(raw, depth + 1) : fromJson(raw, depth + 1)
      if (upstream !== undefined && upstream !== message) {
        return `${message} (${nonEmpty(provider_name) ?? "upstream"}: ${upstream})`
      }
    }
    return message
  }
  return codeText(record.code) ?? codeText(record.type)
}

const HTML = /^\s*<(?:!doctype|html|head|body|\?xml)/i

const fromText = (text: string, depth: number): string | undefined => {
  const trimmed = text.trim()
  if (trimmed === "") return undefined
  if (trimmed.startsWith("{") || trimmed.startsWith("[")) {
    try {
      return fromJson(JSON.parse(trimmed), depth)
    } catch {
      // not JSON after all: the text as it is
    }
  }
  if (HTML.test(trimmed)) {
    // a proxy's error page: its title ("502 Bad Gateway"), or the text without the tags
    const title = /<title[^>]*>([^<]*)<\/title>/i.exec(trimmed)?.[1]
    const stripped = nonEmpty(title) ?? trimmed.replace(/<script[\s\S]*?<\/script>|<style[\s\S]*?<\/style>/gi, " ")
    return nonEmpty(stripped.replace(/<[^>]*>/g, " "))
  }
  return trimmed
}

/** One line, at most `max` characters (code points), ending with `…` when cut. */
export const capLine = (text: string, max: number = maxProviderMessageLength): string => {
  const line = text.replace(/\s+/g, " ").trim()
  const chars = Array.from(line)
  return chars.length <= max ? line : `${chars.slice(0, max - 1).join("")}…`
}

/**
 * The provider's message in an error body (a string) or an error object sent inside a stream:
 * masked by `redact` (the API key) and for key-like tokens, on one line, capped. Undefined when
 * there is nothing to say.
 */
export const providerMessage = (source: unknown, redact: (text: string) => string): string | undefined => {
  const found = typeof source === "string" ? fromText(source, 0) : fromJson(source, 0)
  if (found === undefined) return undefined
  // masked before it is cut, so a cut cannot leave part of a key
  const masked = redact(found).replace(KEY_LIKE, "[redacted]").replace(AUTH_VALUE, "$1 [redacted]")
  const line = capLine(masked)
  return line === "" ? undefined : line
}

// ---------------------------------------------------------------------------------------------
// connection failures

export type NetworkKind = "dns" | "refused" | "blocked-port"

/** The error, its causes and (for an AggregateError: several addresses tried) their parts. */
const errorsIn = (error: unknown): Array<unknown> => {
  const out: Array<unknown> = []
  const queue: Array<unknown> = [error]
  while (queue.length > 0 && out.length < 12) {
    const current = queue.shift()
    if (current === undefined || current === null) continue
    out.push(current)
    if (current instanceof Error) {
      queue.push(current.cause)
      const parts = (current as { errors?: unknown }).errors
      if (Array.isArray(parts)) queue.push(...parts.slice(0, 4))
    }
  }
  return out
}

const codeOf = (error: unknown): string | undefined => {
  const code = typeof error === "object" && error !== null ? (error as { code?: unknown }).code : undefined
  return typeof code === "string" ? code : undefined
}

/**
 * The kind of a connection failure that happened before anything was sent: `dns` (ENOTFOUND,
 * EAI_AGAIN), `refused` (ECONNREFUSED), `blocked-port` (undici's "bad port": a port on the fetch
 * standard's block list, such as 1, 25 or 6000). Undefined for everything else (resets, timeouts …).
 */
export const networkKind = (error: unknown): NetworkKind | undefined => {
  const chain = errorsIn(error)
  const codes = chain.map(codeOf)
  if (codes.some((code) => code === "ENOTFOUND" || code === "EAI_AGAIN")) return "dns"
  if (codes.includes("ECONNREFUSED")) return "refused"
  if (chain.some((e) => e instanceof Error && /^bad port$/i.test(e.message))) return "blocked-port"
  return undefined
}

/** The SDKs' own base URLs, used when the config gives none. */
const DEFAULT_BASE_URL: Readonly<Record<string, string>> = {
  openai: "https://api.openai.com/v1",
  anthropic: "https://api.anthropic.com/v1"
}

/** The host (as the URL spells it: `localhost`, `[::1]`) and port of the provider's base URL. */
export const endpointOf = (
  baseURL: string | undefined,
  type: string
): { readonly host: string; readonly port: number } | undefined => {
  const url = baseURL ?? DEFAULT_BASE_URL[type]
  if (url === undefined || !URL.canParse(url)) return undefined
  const parsed = new URL(url)
  const port = parsed.port !== "" ? Number(parsed.port) : parsed.protocol === "https:" ? 443 : 80
  return parsed.hostname === "" ? undefined : { host: parsed.hostname, port }
}
