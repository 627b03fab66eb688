/**
 * Which command hooks run (docs/hooks.md, "Whose hooks run"): the user's own (`hooks` of the global
 * config) always; a hook the project declares (its `logbook.json` `hooks`, or the `hooks` of Claude
 * Code's `.claude/settings.json`) only once the user approved that exact definition for the
 * workspace — its event, matcher, command and timeout, hash-pinned: a changed hook asks again.
 */
import * as NodePath from "node:path"
import * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Either, ParseResult, Schema } from "effect"
import { type CommandHookDefinition, DEFAULT_COMMAND_HOOK_TIMEOUT_MS, type HookEvent } from "../session/CommandHooks.js"
import { canonicalJson } from "../session/PromptVersion.js"
import { approve, contentHash, workspaceApprovals } from "./Approvals.js"
import { type CommandHooks, CommandHooks as CommandHooksSchema, HOOK_EVENTS } from "./ConfigSchema.js"
import { describeSource, formatPath, type LoadedConfig } from "./ConfigSources.js"
import { parseJsonc } from "./Jsonc.js"

/** Claude Code's project settings, whose `hooks` are read as the project's. */
export const CLAUDE_SETTINGS = NodePath.join(".claude", "settings.json")

/** One configured hook, where it came from, and whether it may run. */
export interface HookEntry {
  readonly definition: CommandHookDefinition
  /** `file /home/u/.config/logbook/config.json`, `file /w/.claude/settings.json` … */
  readonly origin: string
  readonly scope: "user" | "project"
  /** the definition's hash (`hookHash`): what an approval pins */
  readonly hash: string
  /** a user's hook; a project's that the user approved as it is now */
  readonly approved: boolean
}

/** The hash an approval pins: event, matcher, command and timeout as canonical JSON. */
export const hookHash = (definition: CommandHookDefinition): string =>
  contentHash(
    canonicalJson({
      event: definition.event,
      matcher: definition.matcher ?? "",
      command: definition.command,
      timeoutMs: definition.timeoutMs
    })
  )

/** The definitions of a `hooks` object, in order (event by event, group by group). */
const definitionsOf = (
  hooks: CommandHooks,
  counts: Map<HookEvent, number>
): Array<Omit<CommandHookDefinition, "source"> & { readonly source: string }> => {
  const out: Array<CommandHookDefinition> = []
  for (const event of HOOK_EVENTS) {
    for (const group of hooks[event] ?? []) {
      for (const hook of group.hooks) {
        const index = counts.get(event) ?? 0
        counts.set(event, index + 1)
        out.push({
          event,
          ...(group.matcher !== undefined ? { matcher: group.matcher } : {}),
          command: hook.command,
          timeoutMs: Math.round((hook.timeout ?? DEFAULT_COMMAND_HOOK_TIMEOUT_MS / 1000) * 1000),
          source: `hook:${event}[${index}]`
        })
      }
    }
  }
  return out
}

/**
 * The `hooks` of the project's `.claude/settings.json`: the events and hook types logbook runs
 * (others are named in a notice and left out), or why none are read.
 */
const readClaudeSettings = (
  file: string
): Effect.Effect<
  { readonly hooks: CommandHooks; readonly notices: ReadonlyArray<string> },
  never,
  FileSystem.FileSystem
> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs.readFileString(file).pipe(Effect.option)
    if (text._tag === "None") return { hooks: {}, notices: [] }
    const parsed = parseJsonc(text.value)
    if (Either.isLeft(parsed)) {
      const { line, column, message } = parsed.left
      return {
        hooks: {},
        notices: [`ignoring the hooks of ${file}: it is not valid JSON: ${message} at line ${line}, column ${column}`]
      }
    }
    const value = parsed.right as { hooks?: unknown } | null
    if (typeof value !== "object" || value === null || typeof value.hooks !== "object" || value.hooks === null) {
      return { hooks: {}, notices: [] }
    }
    const notices: Array<string> = []
    const kept: Record<string, unknown> = {}
    for (const [event, groups] of Object.entries(value.hooks)) {
      if (!(HOOK_EVENTS as ReadonlyArray<string>).includes(event)) {
        notices.push(`ignoring the ${event} hooks of ${file}: logbook runs ${HOOK_EVENTS.join(", ")}`)
        continue
      }
      // hooks of another type than "command" (prompt, http …) are Claude Code's own
      kept[event] = Array.isArray(groups)
        ? groups.map((group: unknown) =>
            typeof group === "object" && group !== null && Array.isArray((group as { hooks?: unknown }).hooks)
              ? {
                  ...group,
                  hooks: (group as { hooks: Array<unknown> }).hooks.filter((hook) => {
                    const type = (hook as { type?: unknown } | null)?.type
                    if (type === "command") return true
                    notices.push(
                      `ignoring a ${event} hook of ${file} of type ${JSON.stringify(type)}: logbook runs "command" hooks`
                    )
                    return false
                  })
                }
              : group
          )
        : groups
    }
    const decoded = Schema.decodeUnknownEither(CommandHooksSchema)(kept, { onExcessProperty: "ignore" })
    if (Either.isLeft(decoded)) {
      const first = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)[0]
      return {
        hooks: {},
        notices: [
          ...notices,
          `ignoring the hooks of ${file}: at ${formatPath(["hooks", ...(first?.path ?? [])])}: ${first?.message ?? "invalid"}`
        ]
      }
    }
    return { hooks: decoded.right, notices }
  })

/**
 * Every configured hook: the user's, then the project's (`logbook.json`, then `.claude/settings.json`).
 * `approvedHashes`: the hooks the user approved for this workspace. `notices`: what the user should
 * hear (a project file's hooks that cannot be read).
 */
export const hookEntries = Effect.fn("HookConfig.hookEntries")(function* (
  loaded: LoadedConfig,
  workspace: string,
  approvedHashes: ReadonlySet<string>
) {
  const counts = new Map<HookEvent, number>()
  const entries: Array<HookEntry> = []
  for (const definition of definitionsOf(loaded.config.hooks, counts)) {
    entries.push({
      definition,
      origin: describeSource(loaded.originOf(["hooks", definition.event])),
      scope: "user",
      hash: hookHash(definition),
      approved: true
    })
  }
  const projectFile = loaded.files.find((file) => file.kind === "project")?.path ?? "logbook.json"
  const claudeFile = NodePath.join(workspace, CLAUDE_SETTINGS)
  const claude = yield* readClaudeSettings(claudeFile)
  const declared: ReadonlyArray<readonly [string, CommandHooks]> = [
    [projectFile, loaded.projectHooks],
    [claudeFile, claude.hooks]
  ]
  for (const [file, hooks] of declared) {
    for (const definition of definitionsOf(hooks, counts)) {
      const hash = hookHash(definition)
      entries.push({ definition, origin: `file ${file}`, scope: "project", hash, approved: approvedHashes.has(hash) })
    }
  }
  return { entries, notices: claude.notices }
})

/** A hook as one line for the user: event, matcher and command. */
export const describeHook = (definition: CommandHookDefinition): string =>
  `${definition.event}${definition.matcher === undefined || definition.matcher === "" ? "" : ` (${definition.matcher})`}: ${definition.command}`

/** The approvals of command hooks: `approved-hooks.json` (Approvals.ts). */
const HOOK_APPROVALS = "hooks"

/** The key an approval is kept under: the hook's event and command, readable in the file. */
const approvalKey = (definition: CommandHookDefinition): string => {
  const key = `${definition.event} ${definition.command}`
  return key.length > 200 ? `${key.slice(0, 199)}…` : key
}

/** The hashes of the hooks the user approved for `workspace`. */
export const approvedHooks = (loaded: Pick<LoadedConfig, "files">, workspace: string) =>
  Effect.map(workspaceApprovals(loaded, HOOK_APPROVALS, workspace), (byKey) => new Set(Object.values(byKey)))

/** Records the user's approval of a hook (its hash) for `workspace`; the file it went to. */
export const approveHook = (
  loaded: Pick<LoadedConfig, "files">,
  workspace: string,
  entry: HookEntry
): Effect.Effect<string, Error, FileSystem.FileSystem> =>
  approve(loaded, HOOK_APPROVALS, workspace, approvalKey(entry.definition), entry.hash)
