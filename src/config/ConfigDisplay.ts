/**
 * The config as `logbook config` shows it: URLs without their credentials, and which key
 * variables are set, never their values.
 */
import { looksLikeSecret, type McpServerInput, type ProviderSettings, type ResolvedConfig } from "./ConfigSchema.js"

/** A provider as `logbook config` shows it: `apiKey` says whether its variable is set, never the value. */
const maskedProvider = (settings: ProviderSettings, isSet: (name: string) => boolean) => ({
  type: settings.type,
  ...(settings.baseURL === undefined ? {} : { baseURL: maskUrl(settings.baseURL) }),
  ...(settings.apiKeyEnv === undefined
    ? {}
    : { apiKeyEnv: settings.apiKeyEnv, apiKey: isSet(settings.apiKeyEnv) ? "(set)" : "(not set)" }),
  ...(settings.catalog === undefined ? {} : { catalog: settings.catalog }),
  models: settings.models
})

/** An MCP server's `env` or `headers` value: a `${NAME}` reference as written, a value like a key hidden. */
const maskedValue = (value: string): string =>
  !value.includes("${") && looksLikeSecret(value.replace(/^(Bearer|Basic|token)\s+/i, "")) ? "(hidden)" : value

/** An MCP server as `logbook config` shows it: `bearerToken` says whether its variable is set. */
const maskedMcpServer = (entry: McpServerInput, isSet: (name: string) => boolean) => ({
  ...entry,
  ...(entry.url === undefined ? {} : { url: maskUrl(entry.url) }),
  ...(entry.env === undefined
    ? {}
    : { env: Object.fromEntries(Object.entries(entry.env).map(([key, value]) => [key, maskedValue(value)])) }),
  ...(entry.headers === undefined
    ? {}
    : { headers: Object.fromEntries(Object.entries(entry.headers).map(([key, value]) => [key, maskedValue(value)])) }),
  ...(entry.bearerTokenEnv === undefined ? {} : { bearerToken: isSet(entry.bearerTokenEnv) ? "(set)" : "(not set)" })
})

/** A URL with its password (if any) replaced by `***`. */
export const maskUrl = (url: string): string => {
  if (!URL.canParse(url)) return url
  const parsed = new URL(url)
  if (parsed.username === "" && parsed.password === "" && parsed.search === "") return url
  // credentials and query values (`?api_key=…`) may be secrets
  if (parsed.username !== "") parsed.username = "***"
  if (parsed.password !== "") parsed.password = "***"
  for (const key of Array.from(parsed.searchParams.keys())) parsed.searchParams.set(key, "***")
  return parsed.toString()
}

/**
 * The resolved config for people: every setting, and for each provider with an `apiKeyEnv`
 * whether that variable is set (`"apiKey": "(set)"` / `"(not set)"`). Never contains a key.
 */
export const maskConfig = (config: ResolvedConfig, isSet: (name: string) => boolean) => ({
  ...(config.model === undefined ? {} : { model: config.model }),
  provider: Object.fromEntries(
    Object.entries(config.provider).map(([id, settings]) => [id, maskedProvider(settings, isSet)])
  ),
  retry: config.retry,
  step: config.step,
  tools: config.tools,
  permission: config.permission,
  mcpServers: Object.fromEntries(
    Object.entries(config.mcpServers).map(([name, entry]) => [name, maskedMcpServer(entry, isSet)])
  ),
  maxSteps: config.maxSteps,
  snapshotEvery: config.snapshotEvery
})
export type MaskedConfig = ReturnType<typeof maskConfig>
