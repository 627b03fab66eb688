/** Showing a value (a config field, a permission rule) in an error message without echoing what looks like a secret. */

/**
 * A value for an error message: JSON, cut to 60 characters; a string that looks like an API key
 * or token is not shown at all.
 */
export const showValue = (value: unknown): string => {
  if (value === undefined) return "nothing"
  // JSON has no word for them (it would say null)
  if (typeof value === "number" && !Number.isFinite(value)) return `${value} (a number out of range)`
  if (typeof value === "string" && looksLikeSecret(value)) return "a value that looks like a secret (not shown)"
  let text: string
  try {
    text = JSON.stringify(value) ?? String(value)
  } catch {
    text = String(value)
  }
  return text.length > 60 ? `${text.slice(0, 59)}…` : text
}

/** `sk-…`, `sk-ant-…`, `xai-…`, `gsk_…`, `AIza…`, or one long run of key-like characters. */
export const looksLikeSecret = (text: string): boolean =>
  /^(sk|pk|rk|xai|gsk|ghp|gho|github_pat|hf)[-_][A-Za-z0-9]/.test(text) ||
  /^AIza[0-9A-Za-z_-]{20,}/.test(text) ||
  /^[A-Za-z0-9_\-+/=.]{32,}$/.test(text.trim())
