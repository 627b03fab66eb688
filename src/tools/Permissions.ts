/**
 * Permission rules (DESIGN §6): a pure rules engine that says whether a tool call is
 * allowed, needs the user's approval, or is denied. No services here: `Actions` evaluates the
 * config's `permission` rules before every call and asks the `Approver` service about an `ask`.
 *
 * Rules are data (`PermissionRules`, a Schema the config can embed): per tool name either one
 * action, or an object of wildcard patterns to actions; `external_directory` decides paths outside
 * the workspace, and `"*"` any tool without an entry of its own:
 *
 *     { "read": "allow",
 *       "bash": { "git status*": "allow", "git *": "ask", "rm *": "deny", "*": "ask" },
 *       "edit": { "src/**": "allow", "*.lock": "deny", "**": "ask" },
 *       "external_directory": "ask",
 *       "*": "ask" }
 *
 * What a pattern is matched against (the request's `subject`):
 * - `bash`: the command. `*` matches any characters (spaces and `/` included), `?` one character,
 *   everything else is literal, and the whole command must match (`git status*` matches
 *   `git status --short`, not `sudo git status`). Leading and trailing whitespace is ignored and,
 *   outside quotes, every run of spaces and tabs counts as one space. A command chained with `&&`,
 *   `||`, `;`, `|`, `|&`, `&` or a newline is split (quotes and backslashes respected) and every part
 *   is judged on its own; so is the inside of a `$(…)` or `` `…` `` substitution. The strictest part
 *   decides: `git status && rm -rf /` is not allowed by `git status*`.
 * - `read`, `write`, `edit`, `list`, `glob`, `grep` and `external_directory`: the path, relative to
 *   the workspace (absolute for a path outside it), matched as a glob by `compileGlob` (`*` stays
 *   within one directory, `**` crosses them, `?`, `[…]`, `{a,b}`).
 * - any other tool: like `bash`'s patterns, without the splitting.
 * A request without a subject is matched as the empty string (only patterns like `*` match it).
 *
 * The order of decision for one (part of a) request:
 * 1. the tool's own entry; when it is an object, its most specific matching pattern;
 * 2. when the tool has no entry, or none of its patterns matches: the most specific entry whose key
 *    names tools by a wildcard (`"mcp__github__*"`: `*` matches any characters), likewise;
 * 3. then the `"*"` entry, likewise;
 * 4. then the built-in defaults (`defaultRules`, or those given to `evaluate`): the tool's entry,
 *    then their `"*"` entry;
 * 5. when nothing at all matches: `ask`.
 * A path outside the workspace (`outside: true`) is decided by both the above and
 * `external_directory` (the rules' entry, else the defaults', else `ask`; no `"*"` fallback there):
 * the stricter of the two wins (deny > ask > allow).
 *
 * The most specific pattern wins, among the patterns of one entry that match:
 * 1. a pattern without wildcards (an exact command or path) beats every pattern with them;
 * 2. among patterns with wildcards, the one with more literal characters wins: its length without
 *    the wildcard syntax (`*` and `?`; for paths also `[`, `]`, `{`, `}`, `,`, and a `\` before an
 *    escaped character);
 * 3. on a tie, the later pattern in the object wins (JSON object order).
 * So with `{ "git *": "ask", "git status*": "allow", "*": "deny" }`, `git status` is allowed (10
 * literal characters beat 4), `git push` asks and `ls` is denied.
 */
import { Either, ParseResult, Schema } from "effect"
import { compileGlob } from "./ignore.js"
import { showValue } from "./showValue.js"

// ---------------------------------------------------------------------------------------------
// rules as data

/** a value for an error message: JSON cut to 60 characters, a secret-looking string not shown */
const show = showValue

const actionsText = '"allow", "ask" or "deny"'

export const PermissionAction = Schema.Literal("allow", "ask", "deny").annotations({
  identifier: "PermissionAction",
  description: "allow: run without asking; ask: ask the user first; deny: refuse.",
  message: (issue) => ({ message: `expected ${actionsText}, got ${show(issue.actual)}`, override: true })
})
export type PermissionAction = typeof PermissionAction.Type

const isAction = (value: unknown): value is PermissionAction => value === "allow" || value === "ask" || value === "deny"

/** Wildcard patterns (commands for `bash`, paths for the file tools) to actions. */
export const PermissionPatterns = Schema.Record({ key: Schema.String, value: PermissionAction })
export type PermissionPatterns = typeof PermissionPatterns.Type

/** One tool's rule: an action for every call, or patterns to actions. */
export const PermissionRule = Schema.Union(PermissionAction, PermissionPatterns).annotations({
  identifier: "PermissionRule",
  // one sentence instead of the union's two branches: the bad pattern when it is an object
  message: (issue) => {
    const actual = issue.actual
    if (typeof actual === "object" && actual !== null && !Array.isArray(actual)) {
      const bad = Object.entries(actual).find(([, value]) => !isAction(value))
      if (bad !== undefined) {
        return { message: `pattern ${show(bad[0])}: expected ${actionsText}, got ${show(bad[1])}`, override: true }
      }
    }
    return {
      message: `expected ${actionsText} or an object of patterns to those, got ${show(actual)}`,
      override: true
    }
  }
})
export type PermissionRule = typeof PermissionRule.Type

/** Tool names (and `external_directory`, `"*"`) to rules. */
export const PermissionRules = Schema.Record({ key: Schema.String, value: PermissionRule }).annotations({
  identifier: "PermissionRules",
  message: (issue) => ({
    message: `expected an object of tool names to rules, got ${show(issue.actual)}`,
    override: false
  })
})
export type PermissionRules = typeof PermissionRules.Type

/** The key deciding paths outside the workspace. */
export const EXTERNAL_DIRECTORY = "external_directory"
/** The key for every tool without an entry of its own. */
export const ANY_TOOL = "*"

/**
 * The built-in rules, as logbook behaves before permissions are configured: the built-in tools
 * (and `skill`, which only reads a skill's own files) run without asking, paths outside the workspace ask, any other tool asks (no `"*"` entry).
 */
export const defaultRules: PermissionRules = {
  read: "allow",
  list: "allow",
  glob: "allow",
  grep: "allow",
  write: "allow",
  edit: "allow",
  bash: "allow",
  todo: "allow",
  skill: "allow",
  // the search over the MCP tools' definitions (mcp/ToolSearch.ts): it reads only what the servers listed
  mcp__tool_search: "allow",
  external_directory: "ask"
}

/**
 * Decodes rules from unknown input (a config value), every problem collected; the error is one
 * line per problem, `<path>: <what is wrong>` (`bash: pattern "rm *": expected "allow", …`).
 */
export const decodeRules = (input: unknown): Either.Either<PermissionRules, string> =>
  Schema.decodeUnknownEither(PermissionRules)(input, { errors: "all" }).pipe(
    Either.mapLeft((error) =>
      ParseResult.ArrayFormatter.formatErrorSync(error)
        .map((issue) =>
          issue.path.length === 0 ? issue.message : `${issue.path.map(String).join(".")}: ${issue.message}`
        )
        .join("\n")
    )
  )

// ---------------------------------------------------------------------------------------------
// requests and results

export interface PermissionRequest {
  readonly tool: string
  /** the bash command, or the path (workspace-relative; absolute when outside) for the file tools */
  readonly subject?: string | undefined
  /** whether the path is outside the workspace */
  readonly outside?: boolean | undefined
}

export interface PermissionResult {
  readonly action: PermissionAction
  /** the matching pattern, or the entry's key when the entry is one action; undefined when nothing matched */
  readonly rule: string | undefined
  /** the entry the rule belongs to (the tool, `"*"`, `external_directory`); undefined when nothing matched */
  readonly key: string | undefined
  /** whether the rule came from the built-in defaults rather than the configured rules */
  readonly fromDefaults: boolean
  /** for a chained bash command, the part that decided */
  readonly part: string | undefined
  readonly tool: string
  readonly subject: string | undefined
  readonly outside: boolean
}

/** The tools whose subject is a path (matched as a glob). */
export const PATH_TOOLS: ReadonlySet<string> = new Set(["read", "write", "edit", "list", "glob", "grep"])

const strictness: Record<PermissionAction, number> = { allow: 0, ask: 1, deny: 2 }

/** The stricter of two actions (deny > ask > allow). */
export const stricter = (a: PermissionAction, b: PermissionAction): PermissionAction =>
  strictness[a] >= strictness[b] ? a : b

// ---------------------------------------------------------------------------------------------
// patterns

export type PatternKind = "command" | "path"

const commandRegExps = new Map<string, RegExp>()

/** A command pattern (`*` anything, `?` one character, the rest literal) as a whole-string regular expression. */
export const compileCommandPattern = (pattern: string): RegExp => {
  let regex = commandRegExps.get(pattern)
  if (regex === undefined) {
    const source = Array.from(pattern, (c) =>
      c === "*" ? "[\\s\\S]*" : c === "?" ? "[\\s\\S]" : c.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")
    ).join("")
    regex = new RegExp(`^${source}$`, "u")
    commandRegExps.set(pattern, regex)
  }
  return regex
}

const pathRegExps = new Map<string, RegExp | null>()

/** A path pattern as `compileGlob` reads it; null when it cannot be compiled (it then matches nothing). */
const compilePathPattern = (pattern: string): RegExp | null => {
  let regex = pathRegExps.get(pattern)
  if (regex === undefined) {
    try {
      regex = compileGlob(pattern)
    } catch {
      regex = null
    }
    pathRegExps.set(pattern, regex)
  }
  return regex
}

/** Whether `pattern` matches the whole `subject`. */
export const matchesPattern = (kind: PatternKind, pattern: string, subject: string): boolean => {
  if (kind === "command") return compileCommandPattern(pattern).test(subject)
  return compilePathPattern(pattern)?.test(subject) ?? false
}

const PATH_SYNTAX = new Set(["*", "?", "[", "]", "{", "}", ","])

/**
 * How specific a pattern is: whether it has no wildcards, and its count of literal characters
 * (see the module doc). Higher sorts later: exact first, then by literal characters.
 */
export const specificity = (
  kind: PatternKind,
  pattern: string
): { readonly exact: boolean; readonly literals: number } => {
  let literals = 0
  let wildcard = false
  const chars = Array.from(pattern)
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i]!
    if (kind === "command") {
      if (c === "*" || c === "?") wildcard = true
      else literals++
    } else if (c === "\\" && i + 1 < chars.length) {
      i++
      literals++
    } else if (PATH_SYNTAX.has(c)) {
      // a lone `]`, `}` or `,` is literal for the glob but counts as syntax here: still deterministic
      if (c !== "]" && c !== "}" && c !== ",") wildcard = true
    } else literals++
  }
  return { exact: !wildcard, literals }
}

/** Negative when `a` is less specific than `b`. */
const compareSpecificity = (kind: PatternKind, a: string, b: string): number => {
  const sa = specificity(kind, a)
  const sb = specificity(kind, b)
  if (sa.exact !== sb.exact) return sa.exact ? 1 : -1
  return sa.literals - sb.literals
}

/**
 * The most specific pattern of `patterns` that matches `subject`, with its action: exact beats
 * wildcard, more literal characters beat fewer, and on a tie the later pattern wins.
 */
export const mostSpecificMatch = (
  kind: PatternKind,
  patterns: PermissionPatterns,
  subject: string
): { readonly pattern: string; readonly action: PermissionAction } | undefined => {
  let best: { pattern: string; action: PermissionAction } | undefined
  for (const [pattern, action] of Object.entries(patterns)) {
    if (!matchesPattern(kind, pattern, subject)) continue
    // `>=`: a later pattern of equal specificity replaces an earlier one
    if (best === undefined || compareSpecificity(kind, pattern, best.pattern) >= 0) best = { pattern, action }
  }
  return best
}

// ---------------------------------------------------------------------------------------------
// splitting a shell command

/**
 * The simple commands of a shell command line: split at `&&`, `||`, `;`, `|`, `|&`, `&` (not the
 * `&` of a redirection like `2>&1` or `&>`) and newlines outside quotes; the inside of every `$(…)`
 * and `` `…` `` substitution (outside single quotes) is split too and added after. Each part is
 * trimmed, and runs of unquoted spaces and tabs become one space; empty parts are dropped. Quotes
 * and backslashes are kept as written. Not a full shell parser: here-documents, `case … ;;` and
 * the like may split in odd places, which only makes the result stricter.
 */
export const splitCommand = (command: string): Array<string> => {
  const parts: Array<string> = []
  const nested: Array<string> = []
  let current = ""
  let quote: "'" | '"' | undefined
  const flush = () => {
    const part = current.trim()
    if (part !== "") parts.push(part)
    current = ""
  }
  /** The index of the `)` closing the `$(` whose `(` is at `open` (quotes respected), or -1. */
  const closeParen = (open: number): number => {
    let depth = 0
    let q: "'" | '"' | undefined
    for (let j = open; j < command.length; j++) {
      const c = command[j]
      if (q === "'") {
        if (c === "'") q = undefined
      } else if (c === "\\") j++
      else if (q === '"') {
        if (c === '"') q = undefined
      } else if (c === "'" || c === '"') q = c
      else if (c === "(") depth++
      else if (c === ")" && --depth === 0) return j
    }
    return -1
  }
  for (let i = 0; i < command.length; i++) {
    const c = command[i]!
    if (quote === "'") {
      current += c
      if (c === "'") quote = undefined
      continue
    }
    if (c === "\\") {
      current += command.slice(i, i + 2)
      i++
      continue
    }
    if (c === "$" && command[i + 1] === "(") {
      const close = closeParen(i + 1)
      const end = close < 0 ? command.length : close
      nested.push(...splitCommand(command.slice(i + 2, end)))
      current += command.slice(i, end + 1)
      i = end
      continue
    }
    if (c === "`") {
      let end = i + 1
      while (end < command.length && command[end] !== "`") end += command[end] === "\\" ? 2 : 1
      nested.push(...splitCommand(command.slice(i + 1, end)))
      current += command.slice(i, end + 1)
      i = end
      continue
    }
    if (quote === '"') {
      current += c
      if (c === '"') quote = undefined
      continue
    }
    if (c === "'" || c === '"') {
      quote = c
      current += c
    } else if (c === " " || c === "\t") {
      if (!current.endsWith(" ")) current += " "
    } else if (c === "\n" || c === ";") {
      flush()
    } else if (c === "|") {
      flush()
      if (command[i + 1] === "|" || command[i + 1] === "&") i++
    } else if (c === "&") {
      const previous = command[i - 1]
      if (command[i + 1] === "&") {
        flush()
        i++
      } else if (previous === ">" || previous === "<" || command[i + 1] === ">") {
        current += c // a redirection: 2>&1, >&2, &>file
      } else flush()
    } else current += c
  }
  flush()
  return [...parts, ...nested]
}

// ---------------------------------------------------------------------------------------------
// evaluation

interface Decision {
  readonly action: PermissionAction
  readonly rule: string | undefined
  readonly key: string | undefined
  readonly fromDefaults: boolean
}

/** What one entry says about `subject`, or undefined when it says nothing (no pattern matches). */
const fromEntry = (
  entry: PermissionRule | undefined,
  key: string,
  kind: PatternKind,
  subject: string,
  fromDefaults: boolean
): Decision | undefined => {
  if (entry === undefined) return undefined
  if (typeof entry === "string") return { action: entry, rule: key, key, fromDefaults }
  const match = mostSpecificMatch(kind, entry, subject)
  return match === undefined ? undefined : { action: match.action, rule: match.pattern, key, fromDefaults }
}

const own = (rules: PermissionRules, key: string): PermissionRule | undefined =>
  Object.hasOwn(rules, key) ? rules[key] : undefined

const nothing: Decision = { action: "ask", rule: undefined, key: undefined, fromDefaults: true }

/** A key naming tools by a wildcard (`mcp__github__*`): `*` matches any characters; not `"*"` itself. */
const toolPattern = (key: string): RegExp | undefined =>
  key === ANY_TOOL || !key.includes("*")
    ? undefined
    : new RegExp(
        `^${key
          .split("*")
          .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
          .join(".*")}$`
      )

/** The most specific wildcard key (most characters besides `*`, the later on a tie) that names `tool`. */
const toolPatternKey = (rules: PermissionRules, tool: string): string | undefined => {
  let best: string | undefined
  for (const key of Object.keys(rules)) {
    if (toolPattern(key)?.test(tool) !== true) continue
    if (best === undefined || key.replace(/\*/g, "").length >= best.replace(/\*/g, "").length) best = key
  }
  return best
}

const fromPatternKey = (
  rules: PermissionRules,
  tool: string,
  kind: PatternKind,
  subject: string,
  fromDefaults: boolean
): Decision | undefined => {
  const key = toolPatternKey(rules, tool)
  return key === undefined ? undefined : fromEntry(own(rules, key), key, kind, subject, fromDefaults)
}

/**
 * The tool's entry, then the most specific wildcard entry naming it (`mcp__github__*`), then `"*"`,
 * in the rules and then in the defaults; `ask` when none matches.
 */
const decideTool = (
  rules: PermissionRules,
  defaults: PermissionRules,
  tool: string,
  kind: PatternKind,
  subject: string
): Decision =>
  fromEntry(own(rules, tool), tool, kind, subject, false) ??
  (tool === ANY_TOOL ? undefined : fromPatternKey(rules, tool, kind, subject, false)) ??
  (tool === ANY_TOOL ? undefined : fromEntry(own(rules, ANY_TOOL), ANY_TOOL, kind, subject, false)) ??
  fromEntry(own(defaults, tool), tool, kind, subject, true) ??
  (tool === ANY_TOOL ? undefined : fromEntry(own(defaults, ANY_TOOL), ANY_TOOL, kind, subject, true)) ??
  nothing

/** The decision of `b` when it is stricter than `a`'s, else `a`'s (the first of equals is kept). */
const strictest = <A extends { readonly action: PermissionAction }>(a: A, b: A): A =>
  strictness[b.action] > strictness[a.action] ? b : a

/**
 * What `rules` say about `request` (see the module doc for the order); `defaults` stand in for what
 * the rules leave open.
 */
export const evaluate = (
  rules: PermissionRules,
  request: PermissionRequest,
  defaults: PermissionRules = defaultRules
): PermissionResult => {
  const subject = request.subject
  const outside = request.outside === true
  const kind: PatternKind = PATH_TOOLS.has(request.tool) ? "path" : "command"
  let decision: Decision & { readonly part: string | undefined }
  if (request.tool === "bash") {
    const parts = splitCommand(subject ?? "")
    const candidates = (parts.length === 0 ? [""] : parts).map((part) => ({
      ...decideTool(rules, defaults, request.tool, kind, part),
      part: parts.length > 1 ? part : undefined
    }))
    decision = candidates.reduce(strictest)
  } else {
    decision = { ...decideTool(rules, defaults, request.tool, kind, subject ?? ""), part: undefined }
  }
  if (outside) {
    const path = subject ?? ""
    const external = {
      ...(fromEntry(own(rules, EXTERNAL_DIRECTORY), EXTERNAL_DIRECTORY, "path", path, false) ??
        fromEntry(own(defaults, EXTERNAL_DIRECTORY), EXTERNAL_DIRECTORY, "path", path, true) ?? {
          ...nothing,
          key: EXTERNAL_DIRECTORY
        }),
      part: undefined
    }
    // on equal strictness external_directory is named: being outside is why it is asked
    decision = strictest(external, decision)
  }
  return { ...decision, tool: request.tool, subject, outside }
}

// ---------------------------------------------------------------------------------------------
// words for the log and the UI

/** The rule that decided, for a log line: `"rm *" (bash)`, `read (default)`, `no rule`. */
export const describeRule = (result: PermissionResult): string => {
  if (result.rule === undefined) return result.key === undefined ? "no rule" : `no rule (${result.key})`
  const origin = result.fromDefaults ? "default" : undefined
  if (result.rule === result.key) return origin === undefined ? result.rule : `${result.rule} (${origin})`
  return `"${result.rule}" (${[result.key, origin].filter((x) => x !== undefined).join(", ")})`
}

const verbs: Record<PermissionAction, string> = { allow: "is allowed", ask: "needs approval", deny: "is denied" }

/**
 * A sentence for the log and the UI: ``bash `rm -rf build` is denied by the rule "rm *"``,
 * ``read `/etc/hosts` (outside the workspace) needs approval by the rule "external_directory"``.
 */
export const explain = (result: PermissionResult): string => {
  const what =
    result.subject === undefined || result.subject === "" ? result.tool : `${result.tool} \`${result.subject}\``
  const where = result.outside ? " (outside the workspace)" : ""
  const part = result.part === undefined ? "" : ` (for \`${result.part}\`)`
  if (result.rule === undefined) return `${what}${where} ${verbs[result.action]}: no rule matches${part}`
  const kind = result.fromDefaults ? "the default rule" : "the rule"
  const under =
    result.key !== undefined && result.rule !== result.key && result.key !== result.tool ? ` under "${result.key}"` : ""
  return `${what}${where} ${verbs[result.action]} by ${kind} "${result.rule}"${under}${part}`
}

// ---------------------------------------------------------------------------------------------
// answers

/** How the user answers an `ask` (the `permission.replied` event's `reply`); see `Approver`. */
export type ApprovalReply = "once" | "always" | "reject"
