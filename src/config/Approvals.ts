/**
 * The user's approvals of what a project brings (docs/trust.md): an MCP server's definition, a
 * plugin's file, a command hook. An approval pins a hash of that exact content for one workspace;
 * changed content is not approved until it is approved again. Each kind keeps its approvals in its
 * own file beside the user's config (`approved-<kind>.json`: `{ "<workspace>": { "<key>": "<hash>" } }`),
 * written whole to a temporary file and renamed over it.
 */
import { createHash } from "node:crypto"
import * as NodePath from "node:path"
import * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Either, Schema } from "effect"
import type { LoadedConfig } from "./ConfigSources.js"
import { parseJsonc } from "./Jsonc.js"

/** What is approved: `mcp` (approved-mcp.json), `plugins`, `hooks` … — the name of its file. */
export type ApprovalKind = string

/** The SHA-256 (hex) an approval pins: of a file's bytes, or of a definition's canonical JSON. */
export const contentHash = (content: string | Uint8Array): string => createHash("sha256").update(content).digest("hex")

/** The approvals file of a kind: beside the user's config file; none without a user config directory. */
export const approvalsFile = (loaded: Pick<LoadedConfig, "files">, kind: ApprovalKind): string | undefined => {
  const global = loaded.files.find((file) => file.kind === "global")
  return global === undefined ? undefined : NodePath.join(NodePath.dirname(global.path), `approved-${kind}.json`)
}

/** `{ "<workspace>": { "<key>": "<hash>" } }` */
const Approvals = Schema.Record({
  key: Schema.String,
  value: Schema.Record({ key: Schema.String, value: Schema.String })
})
type Approvals = typeof Approvals.Type

/** Every approval in `file`; none when it is missing or unreadable (nothing is approved then). */
const readApprovals = (file: string | undefined): Effect.Effect<Approvals, never, FileSystem.FileSystem> =>
  Effect.gen(function* () {
    if (file === undefined) return {}
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs.readFileString(file).pipe(Effect.orElseSucceed(() => ""))
    if (text === "") return {}
    const parsed = parseJsonc(text)
    if (Either.isLeft(parsed)) return {}
    return Either.getOrElse(Schema.decodeUnknownEither(Approvals)(parsed.right), () => ({}))
  })

/** The approved hashes of a kind for one workspace, by key. */
export const workspaceApprovals = (
  loaded: Pick<LoadedConfig, "files">,
  kind: ApprovalKind,
  workspace: string
): Effect.Effect<Readonly<Record<string, string>>, never, FileSystem.FileSystem> =>
  Effect.map(readApprovals(approvalsFile(loaded, kind)), (approvals) => approvals[workspace] ?? {})

/** Records the user's approval of `key`'s content (`hash`) for `workspace`; the file it is kept in. */
export const approve = (
  loaded: Pick<LoadedConfig, "files">,
  kind: ApprovalKind,
  workspace: string,
  key: string,
  hash: string
): Effect.Effect<string, Error, FileSystem.FileSystem> =>
  Effect.gen(function* () {
    const file = approvalsFile(loaded, kind)
    if (file === undefined) return yield* Effect.fail(new Error("no user config directory to keep the approval in"))
    const fs = yield* FileSystem.FileSystem
    const approvals = { ...(yield* readApprovals(file)) }
    approvals[workspace] = { ...approvals[workspace], [key]: hash }
    yield* fs.makeDirectory(NodePath.dirname(file), { recursive: true })
    const temp = `${file}.${process.pid}.tmp`
    yield* fs.writeFileString(temp, `${JSON.stringify(approvals, null, 2)}\n`, { mode: 0o600 })
    yield* fs.rename(temp, file)
    return file
  }).pipe(Effect.mapError((error) => (error instanceof Error ? error : new Error(String(error)))))
