/**
 * The config's Schemas (DESIGN §9). Two views of the same keys:
 *
 * - `ConfigInput`: what one source may contain (a config file, a `LOGBOOK_*` variable, a flag).
 *   Every key is optional and unknown keys are errors (typo protection), except `$schema`. The
 *   JSON Schema for editors (`schema/config.schema.json`) is generated from it.
 * - `ResolvedConfig`: the result of merging the built-in `defaults` and every source, with every
 *   setting present. Its type is what the rest of logbook reads.
 *
 * Every leaf carries a `message` annotation of the form `expected <what>, got <value>`, so a
 * validation error can say what was expected; values that look like secrets are never echoed.
 */
import { type ParseResult, Schema } from "effect"
import { defaultMcpBounds, serverNamePattern } from "../mcp/McpSettings.js"
import { defaultToolSearch, type ToolSearchSettings } from "../mcp/ToolSearch.js"
import { AiSdkProviderType } from "../model/AiSdk.js"
import * as ModelPrice from "../model/Price.js"
import { ReasoningSetting } from "../model/Reasoning.js"
import { defaultRetryOptions } from "../model/Retry.js"
import { defaultStepLimits, type StepLimits } from "../session/StepLimits.js"
import { defaultBashTimeouts } from "../tools/bash.js"
import { PermissionRules } from "../tools/Permissions.js"
import { defaultSandboxSettings } from "../tools/Sandbox.js"
import { looksLikeSecret, showValue } from "../tools/showValue.js"

// ---------------------------------------------------------------------------------------------
// messages

export { looksLikeSecret, showValue } from "../tools/showValue.js"

/** The message of a leaf: used for every failure of the schema, its base type's included. */
const expected =
  (what: string) =>
  (issue: ParseResult.ParseIssue): { readonly message: string; readonly override: boolean } => ({
    message: `expected ${what}, got ${showValue(issue.actual)}`,
    override: true
  })

/** The message of an object: used when the value is not an object; its keys keep their own messages. */
const expectedObject =
  (what: string) =>
  (issue: ParseResult.ParseIssue): { readonly message: string; readonly override: boolean } => ({
    message: `expected ${what}, got ${showValue(issue.actual)}`,
    override: false
  })

// ---------------------------------------------------------------------------------------------
// leaves

const PositiveInt = (description: string) =>
  Schema.Int.pipe(
    Schema.positive(),
    Schema.annotations({
      description,
      message: expected("a positive integer"),
      jsonSchema: { type: "integer", minimum: 1, description }
    })
  )

const Millis = (description: string) =>
  Schema.Int.pipe(
    Schema.nonNegative(),
    Schema.annotations({
      description,
      message: expected("a whole number of milliseconds (0 or more)"),
      jsonSchema: { type: "integer", minimum: 0, description }
    })
  )

const UsdPerMillion = (description: string) =>
  ModelPrice.UsdPerMillion.annotations({
    description,
    message: expected("a price in USD per million tokens (a number, 0 or more)"),
    jsonSchema: { type: "number", minimum: 0, description }
  })

const providerIdPattern = /^[A-Za-z0-9][A-Za-z0-9._-]*$/

/** A provider id: the part of `provider/model` before the first `/`. */
export const ProviderId = Schema.String.pipe(
  Schema.pattern(providerIdPattern),
  Schema.annotations({
    description: "a provider id (letters, digits, '.', '_' and '-'; no '/')",
    message: expected("a provider id (letters, digits, '.', '_' and '-')"),
    jsonSchema: { type: "string", pattern: providerIdPattern.source }
  })
)

const modelRefPattern = /^[A-Za-z0-9][A-Za-z0-9._-]*\/\S+$/

/** `provider/model`, e.g. `openai/gpt-4o` or `ollama/qwen2.5-coder:7b`; the model part may contain `/`. */
export const ModelRef = Schema.String.pipe(
  Schema.pattern(modelRefPattern),
  Schema.annotations({
    description: 'The model to use, as "provider/model" (e.g. "openai/gpt-4o"); the provider is a key of "provider".',
    message: expected('"provider/model", such as "openai/gpt-4o"'),
    jsonSchema: {
      type: "string",
      pattern: modelRefPattern.source,
      description: 'The model to use, as "provider/model" (e.g. "openai/gpt-4o"); the provider is a key of "provider".'
    }
  })
)

export const ProviderType = AiSdkProviderType.annotations({
  description:
    "How to talk to the provider: openai-compatible (any /v1/chat/completions server: Ollama, vLLM, LM Studio, " +
    "OpenRouter …), openai (the OpenAI API) or anthropic (the Anthropic API).",
  message: expected('one of "openai-compatible", "openai", "anthropic"')
})
export type ProviderType = typeof ProviderType.Type

const isHttpUrl = (text: string): boolean => {
  if (!URL.canParse(text)) return false
  const protocol = new URL(text).protocol
  return protocol === "http:" || protocol === "https:"
}

const hasNoCredentials = (text: string): boolean => {
  const parsed = new URL(text)
  return parsed.username === "" && parsed.password === ""
}

export const BaseUrl = Schema.String.pipe(
  Schema.filter((text) => {
    if (!isHttpUrl(text)) return `expected a URL starting with http:// or https://, got ${showValue(text)}`
    // the URL itself is not shown: it holds a password
    if (!hasNoCredentials(text)) {
      return (
        "expected a URL without a user name or password (the value is not shown); " +
        "put the API key in the environment variable named by apiKeyEnv"
      )
    }
    return true
  }),
  Schema.annotations({
    description: "The API's base URL, e.g. http://localhost:11434/v1 for Ollama. Required for openai-compatible.",
    jsonSchema: {
      type: "string",
      format: "uri",
      pattern: "^https?://",
      description: "The API's base URL, e.g. http://localhost:11434/v1 for Ollama. Required for openai-compatible."
    }
  })
)

const envNamePattern = /^[A-Za-z_][A-Za-z0-9_]*$/

/** The NAME of an environment variable. The value is never echoed: it may be a key pasted by mistake. */
/** A valid name can still be a pasted key (`gsk_…`, `hf_…`): names of variables are upper case by custom. */
const isNotAKey = (text: string): boolean => !looksLikeSecret(text) || /^[A-Z0-9_]+$/.test(text)

export const EnvVarName = Schema.String.pipe(
  Schema.pattern(envNamePattern),
  Schema.filter(isNotAKey),
  Schema.annotations({
    description:
      "The NAME of the environment variable that holds the API key (e.g. OPENAI_API_KEY), never the key itself.",
    message: () => ({
      message:
        "expected the NAME of an environment variable (letters, digits and '_', such as OPENAI_API_KEY), " +
        "not the key itself (the value is not shown)",
      override: true
    }),
    jsonSchema: {
      type: "string",
      pattern: envNamePattern.source,
      description:
        "The NAME of the environment variable that holds the API key (e.g. OPENAI_API_KEY), never the key itself."
    }
  })
)

// ---------------------------------------------------------------------------------------------
// groups: the fields once, as required (resolved) and as optional (input)

type Fields = Schema.Struct.Fields

/** The fields with every key optional (absent, never `undefined`). */
const optionalFields = <F extends Record<string, Schema.Schema.All>>(
  fields: F
): { readonly [K in keyof F]: Schema.optionalWith<F[K], { exact: true }> } => {
  const out: Record<string, unknown> = {}
  for (const [key, schema] of Object.entries(fields)) out[key] = Schema.optionalWith(schema, { exact: true })
  return out as never
}

// the fields of model/Price.ts's `Price` (its keys: a field added there must be described here)
const priceFields = {
  input: UsdPerMillion("USD per million input tokens."),
  output: UsdPerMillion("USD per million output tokens."),
  cacheRead: UsdPerMillion("USD per million input tokens read from the provider's prompt cache."),
  cacheWrite: UsdPerMillion("USD per million input tokens written to the provider's prompt cache.")
} satisfies { readonly [K in ModelPrice.PriceKind]: Schema.Schema<number> } & Fields

export const Price = Schema.Struct(optionalFields(priceFields)).annotations({
  message: expectedObject("an object of prices"),
  description:
    "Prices in USD per million tokens, used to compute the cost of each step. Each one given here wins over the " +
    "model catalog's; a price neither gives is unknown (and so is the cost of the tokens it would price)."
})
// the same type as the model's: the config file's prices are the ones a step is priced with
export type Price = ModelPrice.Price

export const ModelSettings = Schema.Struct({
  contextWindow: Schema.optionalWith(
    PositiveInt("The model's context window, in tokens (default: the model catalog's)."),
    { exact: true }
  ),
  maxOutput: Schema.optionalWith(
    PositiveInt(
      "The most tokens the model may write in one step, sent with every request (default: none is sent, so the " +
        "provider's or the SDK's own limit for the model holds)."
    ),
    { exact: true }
  ),
  price: Schema.optionalWith(Price, { exact: true }),
  reasoning: Schema.optionalWith(
    ReasoningSetting.annotations({
      description:
        'Thinking: "off", an effort ("minimal", "low", "medium", "high") or a token budget (1024 or more), mapped ' +
        "to the provider's option (Anthropic extended thinking, OpenAI reasoning_effort). Unset: the provider's " +
        "default. --reasoning overrides it.",
      message: expected('"off", "minimal", "low", "medium", "high" or a token budget (an integer, 1024 or more)')
    }),
    { exact: true }
  )
}).annotations({
  description: "What logbook knows about one model of the provider.",
  message: expectedObject("an object of model settings")
})
export type ModelSettings = typeof ModelSettings.Type

const ModelId = Schema.String.pipe(
  Schema.minLength(1),
  Schema.annotations({ description: "a model id, as the provider spells it", message: expected("a model id") })
)

const catalogDescription =
  "The model catalog's provider whose limits and prices apply to this provider's models (e.g. \"deepseek\", " +
  '"openrouter"); the config\'s own model settings win, field by field. Default: "openai" for type openai, ' +
  '"anthropic" for type anthropic, none for openai-compatible. See docs/models.md, "Model catalog".'

/** A provider id of the model catalog (checked against the catalog when a model is resolved). */
const CatalogProvider = Schema.String.pipe(
  Schema.pattern(providerIdPattern),
  Schema.annotations({
    description: catalogDescription,
    message: expected('a provider id of the model catalog, such as "deepseek"'),
    jsonSchema: { type: "string", pattern: providerIdPattern.source, description: catalogDescription }
  })
)

const providerFields = {
  type: ProviderType,
  baseURL: BaseUrl,
  apiKeyEnv: EnvVarName,
  streamIdleTimeoutMs: PositiveInt(
    "Cut a model response that sends nothing for this many milliseconds, before its first part too, and " +
      "retry it like a broken stream (default 120000). Raise it for a model that thinks long before it answers."
  ),
  catalog: CatalogProvider,
  models: Schema.Record({ key: ModelId, value: ModelSettings }).annotations({
    message: expectedObject("an object of models by model id"),
    description: "Per-model settings, keyed by the model id (the part of provider/model after the first '/')."
  })
} satisfies Fields

export const ProviderInput = Schema.Struct(optionalFields(providerFields)).annotations({
  message: expectedObject("an object of provider settings"),
  description: "A model provider: how to reach it and where its API key is."
})

const retryFields = {
  maxAttempts: PositiveInt(
    `Attempts per model request, the first one included (default ${defaultRetryOptions.maxAttempts}).`
  ),
  initialDelayMs: Millis(
    `The first backoff delay, doubled on each retry, with jitter (default ${defaultRetryOptions.initialDelayMs}).`
  ),
  maxDelayMs: Millis(`The longest computed backoff delay (default ${defaultRetryOptions.maxDelayMs}).`),
  maxRetryAfterMs: Millis(
    `The longest Retry-After wait a server may ask for; a longer one fails the request (default ${defaultRetryOptions.maxRetryAfterMs}).`
  ),
  budgetMs: Millis(`The total time one request may spend retrying (default ${defaultRetryOptions.budgetMs}).`)
} satisfies Fields

/** A path of the sandbox settings: absolute, or under the home directory (`~`, `~/…`). */
const isSandboxPath = (text: string): boolean =>
  text === "~" || text.startsWith("~/") || (text.startsWith("/") && !text.includes("\0"))

const SandboxPath = Schema.String.pipe(
  Schema.filter(isSandboxPath),
  Schema.annotations({
    description: "An absolute path, or one under the home directory (~/…).",
    message: expected('an absolute path or one starting with "~/"'),
    jsonSchema: {
      type: "string",
      pattern: "^(/|~/|~$)",
      description: "An absolute path, or one under the home directory (~/…)."
    }
  })
)

const sandboxPaths = (description: string) =>
  Schema.Array(SandboxPath).annotations({
    description,
    message: expectedObject('an array of paths, such as ["~/.cache"]')
  })

const bashFields = {
  timeoutMs: PositiveInt(
    `The timeout of a command when the model gives none (default ${defaultBashTimeouts.timeoutMs}).`
  ),
  maxTimeoutMs: PositiveInt(`The longest timeout the model may ask for (default ${defaultBashTimeouts.maxTimeoutMs}).`),
  passEnv: Schema.Array(EnvVarName).annotations({
    description:
      "API key variables (the providers' apiKeyEnv) that commands may see. By default they are removed from " +
      "the environment of every command the agent runs; their values are masked in the log either way. " +
      "Only your own config may set it: a project's logbook.json cannot (default []).",
    message: expectedObject('an array of environment variable names, such as ["OPENAI_API_KEY"]')
  }),
  sandbox: Schema.Literal("auto", "on", "off").annotations({
    description:
      'Run commands in a sandbox (bubblewrap, Linux): "auto" when it works here, else unconfined with a notice; ' +
      '"on": sandboxed or not at all (commands fail when there is no sandbox); "off": unconfined. A project\'s ' +
      'logbook.json may make it stricter, never looser (default "auto"). See docs/tools.md, "The sandbox".',
    message: expected('one of "auto", "on", "off"')
  }),
  network: Schema.Boolean.annotations({
    description:
      "Whether sandboxed commands may use the network; false gives them a network of their own with nothing " +
      "in it, not even the host's localhost. A project's logbook.json may turn it off, not on (default true).",
    message: expected("true or false")
  }),
  writablePaths: sandboxPaths(
    'Paths sandboxed commands may write besides the workspace and /tmp (e.g. a build cache: "~/.cache"). ' +
      "Only your own config may add them: a project's logbook.json can only leave some out (default [])."
  ),
  hiddenPaths: sandboxPaths(
    "Paths hidden from sandboxed commands besides the built-in list (credentials, logbook's own files); " +
      "a project's logbook.json adds to yours (default [])."
  )
} satisfies Fields

const compactionFields = {
  auto: Schema.Boolean.annotations({
    description:
      "Prune old tool outputs and compact the session before a request that would not fit the model's context " +
      "window (contextWindow minus reserveTokens); false: only after a context-overflow error and with " +
      "logbook compact (default true).",
    message: expected("true or false")
  }),
  reserveTokens: PositiveInt(
    "Tokens kept free of the context window for the answer and the estimate's error (default 20000)."
  ),
  pruneProtectTokens: Millis(
    "The newest tool output, in tokens, that pruning never replaces by a note (default 40000)."
  ).annotations({
    message: expected("a whole number of tokens (0 or more)"),
    jsonSchema: {
      type: "integer",
      minimum: 0,
      description: "The newest tool output, in tokens, that pruning never replaces by a note (default 40000)."
    }
  })
} satisfies Fields

// the fields of session/StepLimits.ts's `StepLimits` (its keys: a field added there must be described here)
const stepFields = {
  maxOutputBytes: PositiveInt(
    "The most output (text, reasoning and tool-call input, in UTF-8 bytes) the model may stream in one step; " +
      "past it the stream is stopped, none of the step's tool calls runs and the turn ends (default 4194304, " +
      '4 MiB). See docs/kernel.md, "Step bounds".'
  ),
  maxToolCalls: PositiveInt(
    "The most tool calls of one model step that run; the calls after them are answered as refused, so every " +
      "call still has a result (default 64)."
  )
} satisfies { readonly [K in keyof StepLimits]: Schema.Schema<number> } & Fields

const headerNamePattern = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

const StringMap = (keyPattern: RegExp, keyWhat: string, description: string) =>
  Schema.Record({
    key: Schema.String.pipe(
      Schema.pattern(keyPattern),
      Schema.annotations({ message: expected(keyWhat), jsonSchema: { type: "string", pattern: keyPattern.source } })
    ),
    value: Schema.String.annotations({ message: expected("a string") })
  }).annotations({ description, message: expectedObject(`an object of ${keyWhat}s to strings`) })

const mcpServerFields = {
  type: Schema.Literal("stdio", "http").annotations({
    description:
      'How to reach the server: "stdio" (the default when "command" is given: logbook starts it and speaks over ' +
      'its stdin and stdout) or "http" (Streamable HTTP at "url"). The older SSE transport is not supported.',
    message: expected('one of "stdio", "http" (the SSE transport is not supported)')
  }),
  command: Schema.String.pipe(
    Schema.minLength(1),
    Schema.annotations({
      description: "stdio: the program that is the server (looked up on PATH), e.g. npx.",
      message: expected("a command (a non-empty string)")
    })
  ),
  args: Schema.Array(Schema.String.annotations({ message: expected("a string") })).annotations({
    description: "stdio: the command's arguments.",
    message: expectedObject("an array of strings")
  }),
  env: StringMap(
    envNamePattern,
    "environment variable name",
    "stdio: the server's environment besides a minimal base (PATH, HOME, LANG …); never logbook's API keys. " +
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${NAME} reference, as config files write it
      'A value may name a variable of logbook\'s environment as "${NAME}" (or "${NAME:-default}").'
  ),
  cwd: Schema.String.pipe(
    Schema.minLength(1),
    Schema.annotations({
      description:
        "stdio: the server's working directory, absolute or relative to the workspace (default: the workspace).",
      message: expected("a directory (a non-empty string)")
    })
  ),
  sandbox: Schema.Boolean.annotations({
    description:
      "stdio: false runs the server outside the sandbox of bash, with your rights (default true: in it where it " +
      "can run). Only your own config may say false; a project's entry is sandboxed regardless.",
    message: expected("true or false")
  }),
  url: BaseUrl.annotations({
    description: 'http: the server\'s Streamable HTTP endpoint, e.g. "https://example.com/mcp".',
    jsonSchema: { type: "string", format: "uri", pattern: "^https?://" }
  }),
  headers: StringMap(
    headerNamePattern,
    "HTTP header name",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${NAME} reference, as config files write it
    'http: headers sent with every request; a value may name a variable as "${NAME}". Put a token in ' +
      '"bearerTokenEnv" rather than here.'
  ),
  bearerTokenEnv: EnvVarName.annotations({
    description: "http: the NAME of the environment variable whose value is sent as `Authorization: Bearer <value>`.",
    jsonSchema: { type: "string", pattern: envNamePattern.source }
  }),
  enabled: Schema.Boolean.annotations({
    description: "false: keep the entry but do not start the server (default true).",
    message: expected("true or false")
  }),
  timeoutMs: PositiveInt(
    `The timeout of one call of the server's tools, in ms (default ${defaultMcpBounds.timeoutMs}); the server is ` +
      "sent a cancel when it passes."
  ),
  startTimeoutMs: PositiveInt(
    `How long starting the server and listing its tools may take, in ms (default ${defaultMcpBounds.startTimeoutMs}).`
  ),
  maxOutputBytes: PositiveInt(
    `The most of a result's text the model reads, head and tail, in bytes (default ${defaultMcpBounds.maxOutputBytes}); ` +
      "the whole result is kept in the log."
  ),
  maxResultBytes: PositiveInt(
    `The largest result (any message) the server may send, in bytes; a larger one fails the call (default ${defaultMcpBounds.maxResultBytes}).`
  ),
  maxTools: PositiveInt(`The most tools offered from this server (default ${defaultMcpBounds.maxTools}).`)
} satisfies Fields

export const McpServerInput = Schema.Struct(optionalFields(mcpServerFields)).annotations({
  description:
    "An MCP server, in the shape of the mcpServers entries of .mcp.json files: stdio (command, args, env, cwd) " +
    'or Streamable HTTP ("type": "http", url, headers, bearerTokenEnv). See docs/mcp.md.',
  message: expectedObject("an object of MCP server settings")
})
export type McpServerInput = typeof McpServerInput.Type

const McpServerName = Schema.String.pipe(
  Schema.pattern(serverNamePattern),
  Schema.annotations({
    description: "an MCP server name (letters, digits, '_' and '-'; at most 32)",
    message: expected(
      "a server name (letters, digits, '_' and '-', at most 32, starting with a letter or digit, no '__')"
    ),
    jsonSchema: { type: "string", pattern: serverNamePattern.source }
  })
)

export const McpServers = Schema.Record({ key: McpServerName, value: McpServerInput }).annotations({
  description: "MCP servers by name; their tools are offered to the model as mcp__<server>__<tool>. See docs/mcp.md.",
  message: expectedObject("an object of MCP servers by name")
})

// the fields of mcp/ToolSearch.ts's `ToolSearchSettings`
const toolSearchFields = {
  maxContextShare: Schema.Number.pipe(Schema.between(0, 1)).annotations({
    description:
      "The share of the model's context window (0 to 1) the MCP tools' definitions may take; past it the model " +
      `is offered a tool search instead of them (default ${defaultToolSearch.maxContextShare}; 1: never). See docs/mcp.md.`,
    message: expected("a number from 0 to 1")
  })
} satisfies { readonly [K in keyof ToolSearchSettings]: Schema.Schema<number> } & Fields

/** The command hooks' events (Claude Code's names). */
export const HOOK_EVENTS = ["PreToolUse", "PostToolUse", "UserPromptSubmit", "SessionStart", "Stop"] as const

/** Whether a matcher is a regular expression JavaScript can compile (it is matched whole: `^(?:…)$`). */
const isMatcher = (text: string): boolean | string => {
  try {
    new RegExp(`^(?:${text})$`)
    return true
  } catch (error) {
    return `expected a tool name or a regular expression (e.g. "Bash", "Edit|Write", "mcp__github__.*"), got ${showValue(text)}: ${error instanceof Error ? error.message : String(error)}`
  }
}

export const CommandHookInput = Schema.Struct({
  type: Schema.Literal("command").annotations({
    description: 'The kind of hook: "command" (a shell command) is the one there is.',
    message: expected('"command"')
  }),
  command: Schema.String.pipe(
    Schema.minLength(1),
    Schema.annotations({
      description:
        "The shell command (bash -c), run in the workspace with the event as JSON on stdin; $CLAUDE_PROJECT_DIR " +
        "and $LOGBOOK_PROJECT_DIR name the workspace. Sandboxed like the bash tool. See docs/hooks.md.",
      message: expected("a command (a non-empty string)")
    })
  ),
  timeout: Schema.optionalWith(
    Schema.Number.pipe(
      Schema.positive(),
      Schema.lessThanOrEqualTo(600),
      Schema.annotations({
        description: "How long the command may run, in seconds (default 60, at most 600); then it is stopped.",
        message: expected("a number of seconds from 0 to 600")
      })
    ),
    { exact: true }
  )
}).annotations({ message: expectedObject('an object { "type": "command", "command": "…" }') })
export type CommandHookInput = typeof CommandHookInput.Type

export const HookMatcherGroup = Schema.Struct({
  matcher: Schema.optionalWith(
    Schema.String.pipe(
      Schema.filter(isMatcher),
      Schema.annotations({
        description:
          'PreToolUse and PostToolUse: the tools the hooks run for, a name or a regular expression matched whole against the tool\'s Claude Code name (Bash, Edit …) and its logbook name (bash, edit …); "*" or "" for all. The other events ignore it.'
      })
    ),
    { exact: true }
  ),
  hooks: Schema.Array(CommandHookInput).annotations({ message: expectedObject("an array of hooks") })
}).annotations({ message: expectedObject('an object { "matcher": "…", "hooks": [ … ] }') })
export type HookMatcherGroup = typeof HookMatcherGroup.Type

const hookGroups = (event: string) =>
  Schema.optionalWith(
    Schema.Array(HookMatcherGroup).annotations({
      description: `The hooks run on ${event}.`,
      message: expectedObject("an array of { matcher, hooks }")
    }),
    { exact: true }
  )

/** Command hooks by event, in Claude Code's shape (docs/hooks.md). */
const commandHookEvents = {
  PreToolUse: hookGroups("PreToolUse: before a tool call runs (allow, deny with a reason, change its input)"),
  PostToolUse: hookGroups("PostToolUse: after a tool call succeeded (add to what the model reads)"),
  UserPromptSubmit: hookGroups("UserPromptSubmit: before a message is sent (block it, or add context)"),
  SessionStart: hookGroups("SessionStart: at a session's first message (add context)"),
  Stop: hookGroups("Stop: when a turn ends (block: the agent goes on with the reason)")
}

/** The command hooks of a `hooks` object (Claude Code's shape), without its settings. */
export const CommandHooks = Schema.Struct(commandHookEvents).annotations({
  message: expectedObject(`an object of hooks by event (${HOOK_EVENTS.join(", ")})`)
})
export type CommandHooks = typeof CommandHooks.Type

/** The hooks' settings (docs/extensions.md). */
const hookFields = {
  timeoutMs: Schema.Int.pipe(
    Schema.between(1, 600_000),
    Schema.annotations({
      description:
        "The most time one hook run may take, in ms (1 to 600000; default 10000): a before hook past it fails " +
        "its call, an after hook past it is skipped. See docs/extensions.md.",
      message: expected("an integer from 1 to 600000"),
      jsonSchema: { type: "integer", minimum: 1, maximum: 600_000 }
    })
  )
} satisfies Fields

const topFields = {
  maxSteps: PositiveInt("The most model steps in one turn (default 50)."),
  snapshotEvery: PositiveInt("Store a snapshot of a session every this many events (default 500).")
} satisfies Fields

// ---------------------------------------------------------------------------------------------
// one source

/** What one config file (or env var, or flag) may contain. The JSON Schema is generated from it. */
export const ConfigInput = Schema.Struct({
  $schema: Schema.optionalWith(
    Schema.String.annotations({
      description: "The JSON Schema of this file, for editors. Ignored by logbook.",
      message: expected("a string (the URL or path of the JSON Schema)")
    }),
    { exact: true }
  ),
  model: Schema.optionalWith(ModelRef, { exact: true }),
  provider: Schema.optionalWith(
    Schema.Record({ key: ProviderId, value: ProviderInput }).annotations({
      message: expectedObject("an object of providers by id"),
      description: "Model providers by id. Built in: openai, anthropic, ollama."
    }),
    { exact: true }
  ),
  retry: Schema.optionalWith(
    Schema.Struct(optionalFields(retryFields)).annotations({
      description: "Retrying failed model requests.",
      message: expectedObject("an object of retry settings")
    }),
    { exact: true }
  ),
  compaction: Schema.optionalWith(
    Schema.Struct(optionalFields(compactionFields)).annotations({
      description: "Keeping the context bounded: pruning old tool outputs and compacting (docs/models.md).",
      message: expectedObject("an object of compaction settings")
    }),
    { exact: true }
  ),
  step: Schema.optionalWith(
    Schema.Struct(optionalFields(stepFields)).annotations({
      description: 'The bounds of one model step: its output and its tool calls (docs/kernel.md, "Step bounds").',
      message: expectedObject("an object of step settings")
    }),
    { exact: true }
  ),
  tools: Schema.optionalWith(
    Schema.Struct({
      bash: Schema.optionalWith(
        Schema.Struct(optionalFields(bashFields)).annotations({
          description: "The bash tool.",
          message: expectedObject("an object of bash settings")
        }),
        { exact: true }
      )
    }).annotations({
      description: "Settings of the built-in tools.",
      message: expectedObject("an object of tool settings")
    }),
    { exact: true }
  ),
  permission: Schema.optionalWith(
    PermissionRules.annotations({
      description:
        'Permission rules per tool: "allow", "ask" or "deny", or an object of patterns (commands for bash, ' +
        'paths for the file tools) to those; "external_directory" decides paths outside the workspace, "*" ' +
        "any tool without an entry. The most specific pattern wins. See docs/tools.md."
    }),
    { exact: true }
  ),
  mcpServers: Schema.optionalWith(McpServers, { exact: true }),
  mcp: Schema.optionalWith(
    Schema.Struct({
      toolSearch: Schema.optionalWith(
        Schema.Struct(optionalFields(toolSearchFields)).annotations({
          description: 'Offering many MCP tools through a search (docs/mcp.md, "Many tools").',
          message: expectedObject("an object of tool search settings")
        }),
        { exact: true }
      )
    }).annotations({
      description: "How the MCP servers' tools are offered (the servers themselves are mcpServers).",
      message: expectedObject("an object of MCP settings")
    }),
    { exact: true }
  ),
  plugins: Schema.optionalWith(
    Schema.Array(
      Schema.String.pipe(Schema.minLength(1)).annotations({ message: expected("a path or a package name") })
    ).annotations({
      description:
        "Plugins to load besides the files of the plugins directories: a path (absolute, or relative to the " +
        "config file) or a package name. A project's entries load once approved. See docs/plugins.md.",
      message: expected("an array of paths or package names")
    }),
    { exact: true }
  ),
  hooks: Schema.optionalWith(
    Schema.Struct({ ...optionalFields(hookFields), ...commandHookEvents }).annotations({
      description:
        "Hooks: the bound of every hook run (timeoutMs; docs/extensions.md), and command hooks in the shape of Claude " +
        'Code\'s settings: { "PreToolUse": [ { "matcher": "Bash", "hooks": [ { "type": "command", "command": "…" } ] } ] }. ' +
        "A project's command hooks run only once you approved them. See docs/hooks.md.",
      message: expectedObject(`an object of hook settings and hooks by event (${HOOK_EVENTS.join(", ")})`)
    }),
    { exact: true }
  ),
  ...optionalFields(topFields)
}).annotations({
  identifier: "LogbookConfig",
  title: "logbook config",
  description:
    "A logbook config file: ~/.config/logbook/config.json (global) or ./logbook.json (project). " +
    "Comments and trailing commas are allowed."
})
export type ConfigInput = typeof ConfigInput.Type

// ---------------------------------------------------------------------------------------------
// resolved

export const ProviderSettings = Schema.Struct({
  type: Schema.propertySignature(ProviderType).annotations({
    missingMessage: () => 'is required: expected one of "openai-compatible", "openai", "anthropic"'
  }),
  baseURL: Schema.optionalWith(BaseUrl, { exact: true }),
  apiKeyEnv: Schema.optionalWith(EnvVarName, { exact: true }),
  streamIdleTimeoutMs: Schema.optionalWith(providerFields.streamIdleTimeoutMs, { exact: true }),
  catalog: Schema.optionalWith(CatalogProvider, { exact: true }),
  models: Schema.optionalWith(providerFields.models, { exact: true, default: () => ({}) })
})
export type ProviderSettings = typeof ProviderSettings.Type

export const RetrySettings = Schema.Struct(retryFields)
export type RetrySettings = typeof RetrySettings.Type

export const BashSettings = Schema.Struct(bashFields)
export type BashSettings = typeof BashSettings.Type

/** The merged config, every setting present. */
export const ResolvedConfig = Schema.Struct({
  model: Schema.optionalWith(ModelRef, { exact: true }),
  provider: Schema.Record({ key: ProviderId, value: ProviderSettings }),
  retry: RetrySettings,
  compaction: Schema.Struct(compactionFields),
  step: Schema.Struct(stepFields),
  tools: Schema.Struct({ bash: BashSettings }),
  /** the user's permission rules (the built-in `defaultRules` apply below them); `{}` when none */
  permission: PermissionRules,
  /** MCP servers by name, as their entries give them (`mcpServerSpecs` fills in the defaults) */
  mcpServers: McpServers,
  mcp: Schema.Struct({ toolSearch: Schema.Struct(toolSearchFields) }),
  /** the plugins the user's own config names (a project file's are `LoadedConfig.projectPlugins`) */
  plugins: Schema.Array(Schema.String),
  /** the hooks' bound, and the user's command hooks (a project's are in `LoadedConfig.projectHooks`) */
  hooks: Schema.Struct({ ...hookFields, ...commandHookEvents }),
  ...topFields
})
export type ResolvedConfig = typeof ResolvedConfig.Type

/** The built-in defaults: the lowest layer of every config. */
export const defaults = {
  provider: {
    openai: { type: "openai", apiKeyEnv: "OPENAI_API_KEY" },
    anthropic: { type: "anthropic", apiKeyEnv: "ANTHROPIC_API_KEY" },
    ollama: { type: "openai-compatible", baseURL: "http://localhost:11434/v1" }
  },
  retry: {
    maxAttempts: defaultRetryOptions.maxAttempts,
    initialDelayMs: defaultRetryOptions.initialDelayMs,
    maxDelayMs: defaultRetryOptions.maxDelayMs,
    maxRetryAfterMs: defaultRetryOptions.maxRetryAfterMs,
    budgetMs: defaultRetryOptions.budgetMs
  },
  compaction: { auto: true, reserveTokens: 20_000, pruneProtectTokens: 40_000 },
  step: defaultStepLimits,
  tools: {
    bash: {
      timeoutMs: defaultBashTimeouts.timeoutMs,
      maxTimeoutMs: defaultBashTimeouts.maxTimeoutMs,
      passEnv: [],
      sandbox: defaultSandboxSettings.mode,
      network: defaultSandboxSettings.network,
      writablePaths: [],
      hiddenPaths: []
    }
  },
  permission: {},
  mcpServers: {},
  mcp: { toolSearch: { maxContextShare: defaultToolSearch.maxContextShare } },
  plugins: [],
  hooks: { timeoutMs: 10_000 },
  maxSteps: 50,
  snapshotEvery: 500
} as const satisfies ConfigInput

/** The conventional key variable of a provider type (owned by `model/AiSdk.ts`). */
export { defaultApiKeyEnv } from "../model/AiSdk.js"
