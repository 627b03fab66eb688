/**
 * Whose MCP servers start (docs/mcp.md, "Whose servers"): the user's own (`mcpServers` of the
 * global config, the environment, flags) always; a server a project declares (its `.mcp.json` or
 * its `logbook.json`) only once the user approved that exact definition for that workspace. An
 * approval is the hash of the definition (canonical JSON), kept in `approved-mcp.json` (Approvals.ts):
 * a changed definition is not approved until it is approved again.
 */
import * as NodePath from "node:path"
import * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Either, ParseResult, Schema } from "effect"
import type { McpServerSpec } from "../mcp/McpSettings.js"
import { canonicalJson } from "../session/PromptVersion.js"
import { approve, contentHash, workspaceApprovals } from "./Approvals.js"
import { type McpServerInput, McpServers } from "./ConfigSchema.js"
import { describeSource, findSecretField, formatPath, type LoadedConfig } from "./ConfigSources.js"
import { parseJsonc } from "./Jsonc.js"
import { isMcpEntryProblem, mcpServerSpec } from "./McpConfig.js"

/** The file other agents share a project's MCP servers in, at the workspace's root. */
export const MCP_JSON = ".mcp.json"

/** One configured server, where it came from, and whether it may start. */
export interface McpServerEntry {
  readonly name: string
  readonly entry: McpServerInput
  /** `file /home/u/.config/logbook/config.json`, `file /w/.mcp.json` … */
  readonly source: string
  readonly scope: "user" | "project"
  /** the definition's hash (`definitionHash`) */
  readonly hash: string
  /** a user's server; a project's that the user approved as it is now */
  readonly approved: boolean
  readonly enabled: boolean
  readonly spec: McpServerSpec
}

/** The hash an approval pins: the definition as canonical JSON. */
export const definitionHash = (entry: McpServerInput): string => contentHash(canonicalJson(entry))

/** The approvals of MCP servers: `approved-mcp.json` (Approvals.ts). */
const MCP_APPROVALS = "mcp"

/** Records the user's approval of `server`'s definition (`hash`) for `workspace`. */
export const approveMcpServer = (
  loaded: Pick<LoadedConfig, "files">,
  workspace: string,
  server: string,
  hash: string
): Effect.Effect<string, Error, FileSystem.FileSystem> => approve(loaded, MCP_APPROVALS, workspace, server, hash)

/** The project's `.mcp.json`: its servers, or a sentence saying why they are not read. */
const readMcpJson = (
  file: string
): Effect.Effect<
  { readonly servers: Readonly<Record<string, McpServerInput>>; readonly problem?: string },
  never,
  FileSystem.FileSystem
> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs.readFileString(file).pipe(Effect.option)
    if (text._tag === "None") return { servers: {} }
    const parsed = parseJsonc(text.value)
    if (Either.isLeft(parsed)) {
      const { line, column, message } = parsed.left
      return { servers: {}, problem: `${file} is not valid JSON: ${message} at line ${line}, column ${column}` }
    }
    const value = parsed.right as { mcpServers?: unknown } | null
    if (typeof value !== "object" || value === null || value.mcpServers === undefined) return { servers: {} }
    const secret = findSecretField({ mcpServers: value.mcpServers })
    if (secret !== undefined) {
      return {
        servers: {},
        problem: `${file} at ${formatPath(secret)}: a value that looks like a secret is written there (not shown)`
      }
    }
    const decoded = Schema.decodeUnknownEither(McpServers)(value.mcpServers, { onExcessProperty: "error" })
    if (Either.isLeft(decoded)) {
      const first = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)[0]
      return {
        servers: {},
        problem: `${file} at ${formatPath(["mcpServers", ...(first?.path ?? [])])}: ${first?.message ?? "invalid"}`
      }
    }
    return { servers: decoded.right }
  })

/**
 * Every configured server: the user's, then the project's (`logbook.json`, then `.mcp.json`; a name
 * the user's config has is the user's). `notices`: what the user should hear (a project entry that
 * cannot be read, or that is shadowed).
 */
export const mcpServerEntries = Effect.fn("McpTrust.mcpServerEntries")(function* (
  loaded: LoadedConfig,
  workspace: string
) {
  const notices: Array<string> = []
  const entries: Array<McpServerEntry> = []
  for (const [name, entry] of Object.entries(loaded.config.mcpServers)) {
    const spec = mcpServerSpec(entry)
    if (isMcpEntryProblem(spec)) continue
    entries.push({
      name,
      entry,
      source: describeSource(loaded.originOf(["mcpServers", name])),
      scope: "user",
      hash: definitionHash(entry),
      approved: true,
      enabled: entry.enabled !== false,
      spec
    })
  }
  const approvals = yield* workspaceApprovals(loaded, MCP_APPROVALS, workspace)
  const projectFile = loaded.files.find((file) => file.kind === "project")?.path
  const mcpJsonFile = NodePath.join(workspace, MCP_JSON)
  const mcpJson = yield* readMcpJson(mcpJsonFile)
  if (mcpJson.problem !== undefined) notices.push(`ignoring the MCP servers of ${mcpJson.problem}`)
  const declared: ReadonlyArray<readonly [string, Readonly<Record<string, McpServerInput>>]> = [
    [projectFile ?? "logbook.json", loaded.projectMcpServers],
    [mcpJsonFile, mcpJson.servers]
  ]
  for (const [file, servers] of declared) {
    for (const [name, entry] of Object.entries(servers)) {
      if (entries.some((known) => known.name === name)) {
        notices.push(`ignoring MCP server "${name}" of ${file}: a server of that name is configured already`)
        continue
      }
      const declaredSpec = mcpServerSpec(entry)
      if (isMcpEntryProblem(declaredSpec)) {
        notices.push(
          `ignoring MCP server "${name}" of ${file}: ${formatPath(["mcpServers", name, ...declaredSpec.key])} ${declaredSpec.reason}`
        )
        continue
      }
      // a repository may not take its server out of the sandbox: only the user's own config may
      let spec = declaredSpec
      if (spec.type === "stdio" && spec.sandbox === false) {
        notices.push(
          `ignoring "sandbox": false of MCP server "${name}" of ${file}: only your own config may run a server ` +
            "outside the sandbox"
        )
        spec = { ...spec, sandbox: true }
      }
      const hash = definitionHash(entry)
      entries.push({
        name,
        entry,
        source: `file ${file}`,
        scope: "project",
        hash,
        approved: approvals[name] === hash,
        enabled: entry.enabled !== false,
        spec
      })
    }
  }
  return { entries, notices }
})
