/**
 * Re-run (DESIGN §8, docs/rerun.md): drive the kernel again over a recorded session and
 * check that it writes the same log.
 *
 * - The model is the log: a `Model` that serves the recorded responses in order (`RerunPlan`), each
 *   step's deltas as they were recorded, its tool calls, and how it ended (finished, failed — with a
 *   `Retry` that replays the decision the policy took then, without waiting —, or stopped from
 *   outside). No request leaves the process.
 * - The tools run live, in a scratch copy of the workspace as the session started: the first
 *   `workspace.snapshot` baseline restored (`restoreManifest`), with the changes file tools made
 *   before it undone, every write confined (`restoreEntry`). No call may use a path outside the
 *   scratch directory, and an imported session's tools that change something run only with
 *   `allowLiveTools` (`ActionsOptions.refuse`; docs/rerun.md, "What a re-run may touch").
 *   Commands always run in the sandbox, or not at all (RerunSandbox.ts). No MCP server is
 *   started: a call the original made is answered from the log (`mcpStandIn`), another is refused.
 * - What acted from outside is done again at its place: user messages (prompt, steer, queue),
 *   withdrawals, interrupts, manual compactions; permission questions get the recorded answers.
 * - Each event the re-run writes is compared with the original's, in order: ids are matched one to
 *   one (a new id stands for one old id throughout), times, durations, process ids and costs are
 *   left out, the scratch directory stands for the original one, blobs are compared by content, and
 *   consecutive deltas of one part by their joined text (how many deltas a stream becomes depends on
 *   how fast they were read). The first event that differs stops the re-run and is reported, with
 *   what the tool returned then and now when it concerns a call.
 *
 * A fork (`fork`) re-runs up to a request and lets a live model (another, or with another system
 * prompt) answer from there, as a new session that records where it forked (`session.created`
 * `rerunOf`); the user's later prompts are sent to it at the end of each turn.
 */
import * as fs from "node:fs"
import * as fsp from "node:fs/promises"
import * as nodePath from "node:path"
import {
  Cause,
  Context,
  Deferred,
  Duration,
  Effect,
  Either,
  Fiber,
  FiberRef,
  HashMap,
  HashSet,
  Layer,
  Logger,
  Option,
  Queue,
  Schema,
  Stream,
  SubscriptionRef
} from "effect"
import type { Envelope } from "../domain/Events.js"
import { type SessionId, uuidV7 } from "../domain/Ids.js"
import { mergeProviderMetadata, type ProviderMetadata } from "../domain/Message.js"
import { defaultMcpBounds } from "../mcp/McpSettings.js"
import { isMcpTool, mcpStandIn, type RecordedMcpCall } from "../mcp/McpTools.js"
import { Model, type ModelError, type ModelRequest } from "../model/Model.js"
import { defaultRetryOptions, Retry, type RetryOptions } from "../model/Retry.js"
import { hashContent } from "../store/blobHash.js"
import { EventBus } from "../store/EventBus.js"
import { EventStore } from "../store/EventStore.js"
import * as Projection from "../store/Projection.js"
import { Approver } from "../tools/Approver.js"
import type { SandboxSettings } from "../tools/Sandbox.js"
import { Secrets, type SecretsService } from "../tools/Secrets.js"
import type { AnyTool } from "../tools/Tools.js"
import {
  decodeManifestDocument,
  type ManifestFile,
  manifestDocument,
  type RestoredEntry,
  type RestoreResult,
  restoreEntry,
  restoreManifest,
  scanWorkspace
} from "../tools/WorkspaceSnapshot.js"
import { type AgentOptions, makeAgentLayer } from "./Agent.js"
import type { RefusalRequest } from "./PermissionGate.js"
import { STREAM_FAILED } from "./Processor.js"
import { canonicalJson } from "./PromptVersion.js"
import { replayedHooks } from "./RerunHooks.js"
import { type InputPoint, planOf, type RecordedDecision, type RerunPlan } from "./RerunPlan.js"
import {
  COMMAND_TOOL,
  confineCommands,
  noSandboxRefusal,
  type RerunCommands,
  type RerunSandbox,
  rerunSandbox
} from "./RerunSandbox.js"
import { ownerId, Sessions } from "./Sessions.js"

export { planOf, type RerunPlan } from "./RerunPlan.js"
export type { RerunCommands } from "./RerunSandbox.js"

/** The session cannot be re-run (no such session, no record of its workspace, a directory in the way). */
export class RerunUnavailable extends Schema.TaggedError<RerunUnavailable>()("RerunUnavailable", {
  sessionId: Schema.String,
  message: Schema.String
}) {}

/** What a tool returned, for a divergence's then and now. */
export interface ToolResultText {
  readonly callId: string
  readonly tool: string
  readonly ok: boolean
  readonly output: string
}

export interface RerunDivergence {
  /** what differs, one sentence */
  readonly message: string
  /** the original's event the re-run did not match (absent: the original had ended) */
  readonly expected: Envelope | undefined
  /** the re-run's event there */
  readonly actual: Envelope | undefined
  /** when it concerns a call: what the tool returned in the original, and in the re-run */
  readonly then?: ToolResultText | undefined
  readonly now?: ToolResultText | undefined
}

export type RerunOutcome =
  /** every event of the original was written again */
  | { readonly _tag: "match"; readonly note?: string | undefined }
  | { readonly _tag: "divergence"; readonly divergence: RerunDivergence }
  /** the re-run could not go past this point of the original (its seq) */
  | { readonly _tag: "stopped"; readonly seq: number; readonly why: string }
  /** a call the re-run may not make (`RerunReport.refused`) stopped it at this point of the original (its seq) */
  | { readonly _tag: "refused"; readonly seq: number }
  /**
   * the fork went on live from `fromRequest` (at the original's `seq`); `failed`: why its live part
   * failed (the model's error, as the log says it)
   */
  | {
      readonly _tag: "forked"
      readonly fromRequest: number
      readonly seq: number
      readonly failed?: string | undefined
    }

/** A call the re-run refused (docs/rerun.md, "What a re-run may touch"). */
export interface RefusedCall {
  readonly callId: string
  readonly tool: string
  /** the path (absolute when outside the scratch directory) or the command, as the permission rules see it */
  readonly subject: string
  readonly outside: boolean
  /** why, one sentence */
  readonly why: string
}

export interface RerunReport {
  readonly original: SessionId
  /** the re-run's session (in the store the re-run wrote to) */
  readonly rerun: SessionId | undefined
  readonly workspace: string
  readonly outcome: RerunOutcome
  /** events of the original the re-run matched, of `compared` */
  readonly matched: number
  readonly compared: number
  /** model requests answered from the log, and by the live model (a fork) */
  readonly served: number
  readonly live: number
  /** files of the starting workspace the log could not restore */
  readonly missing: RestoreResult["missing"]
  /** where the starting workspace came from (`StartingWorkspace.source`) */
  readonly source: StartingWorkspace["source"]
  /** whether the session came from a session file (`logbook import`), or was re-run from one that did */
  readonly imported: boolean
  /** the calls the re-run refused to make (outside its scratch directory; an imported session's tools; commands with no sandbox) */
  readonly refused: ReadonlyArray<RefusedCall>
  /** the MCP calls answered from the log (a re-run never calls an MCP server) */
  readonly mcpServed: number
  /** how its commands ran (sandboxed, refused or unconfined), and how many `bash` calls it made or refused */
  readonly commands: RerunCommands & { readonly calls: number }
}

export interface RerunFork {
  /** the first request (1-based, as `logbook replay --step` counts) the live model answers */
  readonly fromRequest: number
  readonly model: Model["Type"]
  /** the system prompt from the fork on (default: the recorded one) */
  readonly system?: string | undefined
  /** who answers permission questions from the fork on */
  readonly approver: Approver["Type"]
}

export interface RerunOptions {
  readonly sessionId: SessionId
  /** the directory the re-run works in (missing or empty): the starting workspace is restored into it */
  readonly workspace: string
  /** the agent as a run gets it (tools, permissions, limits); model, retry and approver are the re-run's */
  readonly agent: Omit<AgentOptions, "approver" | "retry" | "instructions"> & {
    readonly retry?: RetryOptions | undefined
  }
  /**
   * the keys the run held (`toolSecrets` of its config): hidden and masked in the re-run as in the
   * run, and put back where a snapshot stored a workspace file's keys masked
   */
  readonly secrets: SecretsService
  /**
   * Whether the tools of an imported session may run live (`--allow-live-tools`): without it, only
   * the tools that change nothing (`READ_ONLY_TOOLS`) run; every other call is refused. Either way,
   * no call may use a path outside the scratch directory.
   */
  readonly allowLiveTools?: boolean | undefined
  /**
   * The sandbox of the config (its hidden paths with the database's): a re-run's commands always
   * run in the sandbox, with this network and these hidden paths, its scratch directory the only
   * writable workspace (the mode and the writable paths are not used). Default
   * `defaultSandboxSettings`.
   */
  readonly sandbox?: SandboxSettings | undefined
  /**
   * Where no sandbox can run, run the commands without one (`--unconfined-commands`) rather than
   * refuse them.
   */
  readonly unconfinedCommands?: boolean | undefined
  /** where the re-run's session is written (default: an in-memory log, gone afterwards) */
  readonly target?: Layer.Layer<EventStore | EventBus, unknown> | undefined
  readonly fork?: RerunFork | undefined
}

// ---------------------------------------------------------------------------------------------
// the starting workspace

const readEnvelopes = (sessionId: SessionId) =>
  Effect.flatMap(EventStore, (store) => Stream.runCollect(store.read(sessionId))).pipe(
    Effect.map((chunk) => Array.from(chunk))
  )

const isEmptyOrMissing = (directory: string) =>
  Effect.promise(() =>
    fsp.readdir(directory).then(
      (names) => names.length === 0,
      (error: NodeJS.ErrnoException) => error.code === "ENOENT"
    )
  )

/**
 * Writes the workspace the session started in into `directory`: its first baseline snapshot, with
 * the changes file tools made before that snapshot undone. A session that called no tool needs no
 * files; one that did but never took a snapshot (no command ran) cannot be restored.
 */
export const restoreStartingWorkspace = Effect.fn("Rerun.restoreStartingWorkspace")(function* (
  plan: RerunPlan,
  sessionId: SessionId,
  directory: string,
  /** files of the session's directory never copied (the log's own database) */
  exclude: ReadonlyArray<string> = [],
  /** the re-run's secrets: a snapshot stored a file's keys masked, the file had them */
  secrets?: SecretsService | undefined
) {
  const store = yield* EventStore
  const fail = (message: string) => new RerunUnavailable({ sessionId, message })
  const kind = yield* Effect.promise(() =>
    fsp.stat(directory).then(
      (stat) => (stat.isDirectory() ? "directory" : "other"),
      () => "missing"
    )
  )
  if (kind === "other")
    return yield* fail(
      `${directory} is not a directory: a re-run restores the session's workspace into a new directory`
    )
  if (!(yield* isEmptyOrMissing(directory)))
    return yield* fail(`${directory} is not empty: a re-run restores the session's workspace into a new directory`)
  const baselineAt = plan.envelopes.findIndex(
    (env) => env.type === "workspace.snapshot" && env.payload.phase === "baseline" && env.payload.manifest !== undefined
  )
  yield* Effect.promise(() => fsp.mkdir(directory, { recursive: true }))
  let restored: RestoreResult
  /** the file changes to undo: those before the baseline, or all of them */
  let undoBefore: number
  let source: StartingWorkspace["source"]
  if (baselineAt >= 0) {
    const baseline = plan.envelopes[baselineAt]! as Envelope & { readonly type: "workspace.snapshot" }
    const blobs = {
      getBlob: (hash: string) =>
        secrets === undefined ? store.getBlob(hash) : Effect.map(store.getBlob(hash), Option.map(secrets.revealBytes))
    }
    restored = yield* restoreManifest(blobs, baseline.payload.manifest!, directory).pipe(
      Effect.mapError((error) => fail(`cannot restore the workspace of session ${sessionId}: ${error.message}`))
    )
    undoBefore = baselineAt
    source = "snapshot"
  } else if (!plan.envelopes.some((env) => env.type === "tool.invoked")) {
    return { restored: 0, missing: [], source: "empty" } satisfies StartingWorkspace
  } else if (plan.cwd !== undefined && (yield* isDirectory(plan.cwd))) {
    // no command ran, so no snapshot was taken: the directory as it is now, with every change the
    // session's file tools made undone, is the best account of how it started (and said to be so)
    restored = yield* copyDirectory(plan.cwd, directory, exclude).pipe(
      Effect.mapError((error) => fail(`cannot copy ${plan.cwd}: ${error.message}`))
    )
    undoBefore = plan.envelopes.length
    source = "directory"
  } else {
    return yield* fail(
      `session ${sessionId} recorded no snapshot of its workspace (it ran no command) and its directory ` +
        `${plan.cwd ?? "(none recorded)"} is gone, so the files it started with are unknown`
    )
  }
  const missing = [...restored.missing, ...(yield* undoFileChanges(plan.envelopes.slice(0, undoBefore), directory))]
  return { restored: restored.restored, missing, source } satisfies StartingWorkspace
})

/**
 * Undoes the changes file tools recorded in `envelopes` (newest first) in `directory`: a created file
 * is removed, another one gets its content from before. Every write and removal goes through
 * `restoreEntry` (the file tools' confined, race-free checks), so a symbolic link in the restored
 * workspace cannot lead it outside. Returns what could not be undone.
 */
const undoFileChanges = Effect.fn("Rerun.undoFileChanges")(function* (
  envelopes: ReadonlyArray<Envelope>,
  directory: string
) {
  const store = yield* EventStore
  const root = yield* Effect.promise(() => fsp.realpath(directory))
  const missing: Array<RestoreResult["missing"][number]> = []
  for (let i = envelopes.length - 1; i >= 0; i--) {
    const env = envelopes[i]!
    if (env.type !== "file.changed") continue
    const { path, op, beforeHash } = env.payload
    // a change outside the workspace (allowed then): nothing of the workspace to undo
    if (nodePath.isAbsolute(path) || path.split(/[\\/]/).includes("..")) continue
    let entry: RestoredEntry
    if (op === "create") entry = { kind: "remove" }
    else {
      const content =
        beforeHash === undefined ? Option.none() : yield* Effect.orElseSucceed(store.getBlob(beforeHash), Option.none)
      if (Option.isNone(content)) {
        missing.push({ path, reason: "its content before the session changed it is not in the log" })
        continue
      }
      entry = { kind: "file", content: content.value }
    }
    const undone = yield* Effect.either(restoreEntry(root, path, entry))
    if (Either.isLeft(undone)) missing.push({ path, reason: `its change cannot be undone: ${undone.left}` })
  }
  return missing
})

/** The workspace a re-run starts in, and where it came from. */
export interface StartingWorkspace extends RestoreResult {
  /**
   * `snapshot`: the session's first workspace snapshot; `directory`: the session's directory as it
   * is now (no snapshot was taken), the session's own changes undone; `empty`: it used no tool
   */
  readonly source: "snapshot" | "directory" | "empty"
}

const isDirectory = (path: string) =>
  Effect.promise(() =>
    fsp.stat(path).then(
      (s) => s.isDirectory(),
      () => false
    )
  )

/** Copies what a workspace snapshot would see of `from` (its ignore rules and bounds) into `to`. */
const copyDirectory = (from: string, to: string, exclude: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const blobs = new Map<string, Uint8Array>()
    const put = (content: Uint8Array) =>
      Effect.sync(() => {
        const hash = hashContent(content)
        blobs.set(hash, content)
        return hash
      })
    const root = yield* Effect.promise(() => fsp.realpath(from))
    const scanned = yield* scanWorkspace({
      root,
      exclude: new Set(exclude.map((f) => nodePath.resolve(f))),
      store: put
    })
    const manifest = yield* put(new TextEncoder().encode(JSON.stringify(manifestDocument(scanned.manifest))))
    return yield* restoreManifest(
      { getBlob: (hash) => Effect.succeed(Option.fromNullable(blobs.get(hash))) },
      manifest,
      to
    )
  })

// ---------------------------------------------------------------------------------------------
// comparing

/** How the note that stands for the middle of a cut output ends: what follows is its tail. */
const CUT_END = "] …\n\n"

/**
 * Whether two texts of the same length differ only inside paths at the same places: the original's
 * directory `pa` in `a`, the scratch one `pb` (as long) in `b` — whole, or the part of one that a
 * cut left (an output shown by its head and tail is cut where its byte count says, maybe inside a
 * path: the head then ends with the start of one, the tail begins with the end of one).
 */
export const differOnlyInPath = (a: string, b: string, pa: string, pb: string): boolean => {
  if (a.length !== b.length || pa.length !== pb.length || pa === pb) return false
  /** `a[i]` is `pa[o]`, and what comes before it leads back to the path's start, or to a cut */
  const anchored = (i: number, o: number): boolean => {
    for (let t = 1; t <= o; t++) {
      const at = i - t
      if (at < 0 || a.startsWith(CUT_END, at + 1 - CUT_END.length)) return true
      if (a[at] !== pa[o - t]) return false
    }
    return true
  }
  let i = 0
  while (i < a.length) {
    if (a[i] === b[i]) {
      i++
      continue
    }
    let end = i
    for (let o = 0; o < pa.length && end === i; o++) {
      if (a[i] !== pa[o] || b[i] !== pb[o] || !anchored(i, o)) continue
      let k = 0
      while (o + k < pa.length && i + k < a.length && a[i + k] === pa[o + k] && b[i + k] === pb[o + k]) k++
      end = i + k
    }
    if (end === i) return false
    i = end
  }
  return true
}

/**
 * A new scratch directory under `parent` (created) whose real path is as long as `original` where
 * that can be: a path the tools print, or a file holds, then takes as many bytes as it did (an
 * output's size, where a long one is cut, a token estimate). Returns its path.
 */
export const scratchDirectoryFor = (original: string, parent: string): string => {
  const root = fs.realpathSync(fs.mkdtempSync(nodePath.join(parent, "lr-")))
  const room = Buffer.byteLength(original) - Buffer.byteLength(root) - 1
  const name = room >= 1 ? `${"workspace".slice(0, room)}${"_".repeat(Math.max(0, room - 9))}` : "workspace"
  return nodePath.join(root, name)
}

/**
 * Replaces the directories `from` by `to` in a text, where they are whole paths: `/w/a` in `/w/a`,
 * `/w/a/x`, `"/w/a"` or `in /w/a.`, not in `/w/ab` or `/w/a.txt`.
 */
export const replacePath = (from: ReadonlyArray<string>, to: string): ((text: string) => string) => {
  const names = [...new Set(from)].filter((dir) => dir !== "" && dir !== to).sort((a, b) => b.length - a.length)
  if (names.length === 0) return (text) => text
  const escaped = names.map((dir) => dir.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
  // not followed by more of a name: a letter, a digit, `_`, `-`, or a dot that another one follows
  const pattern = new RegExp(`(?:${escaped.join("|")})(?![\\w-]|\\.[\\w-])`, "g")
  return (text) => text.replace(pattern, to)
}

/** Seconds with nothing happening (no event, no input, no command running) after which a re-run gives up. */
const STUCK_SECONDS = 20

/** The log annotation telling the kernels of a re-run apart (1, then 2 after a crash …). */
const PROCESS_ANNOTATION = "logbook.rerun.process"

/** Fields that differ between two runs of the same thing: times, durations, processes, prices, the re-run mark. */
const IGNORED = new Set([
  // estimates of a request's tokens: the scratch directory's path is not as long as the original's
  "tokensBefore",
  "tokensAfter",
  "at",
  "nextAt",
  "startedAt",
  "durationMs",
  // how long a hook ran (`hook.ran`)
  "ms",
  "mtimeMs",
  "pgid",
  "pid",
  "token",
  // the processes a stop found: which ones (a shell before or after its exec) depends on timing
  "stoppedProcesses",
  "stillRunning",
  "cost",
  "costKnown",
  // how a command was confined: a re-run's always are (docs/rerun.md), whatever its original's were
  "sandbox",
  "rerunOf",
  // a `file.intent`'s temporary file: its name has a random part
  "temp"
])

/** Fields holding ids: a new id must stand for the same old one throughout. */
const ID_KIND: Record<string, string> = {
  messageId: "message",
  upToMessageId: "message",
  messageIds: "message",
  deliveredMessageIds: "message",
  callId: "call",
  callIds: "call",
  turnId: "turn",
  partId: "part",
  actionId: "action",
  permissionId: "permission",
  promptVersion: "prompt",
  requestDigest: "digest"
}

/** Fields naming a blob: equal, or blobs of the same content (the scratch directory standing for the original). */
const BLOB_FIELDS = new Set(["outputBlob", "beforeHash", "afterHash", "manifest", "blob", "hash"])

/**
 * Events not compared: a command's output so far, recorded at most every so often while it runs
 * (how many there are depends on timing); its whole output is in its `tool.finished`. A model
 * switch: the re-run's model is named after the log's (a fork's is its own all along), and older
 * logs changed models without recording it. A session hook's run (a command hook's on a message
 * or a turn's end, `sessionHookRun`): a re-run runs none; what it added to a message, and a Stop
 * hook's message, are sent as the log recorded them. A tool hook's run is served (RerunHooks.ts).
 */
const UNCOMPARED = new Set(["tool.progress", "model.switched"])

/** A `hook.ran` of a session hook (UserPromptSubmit, SessionStart, Stop): not of a tool call. */
const sessionHookRun = (env: Envelope): boolean => env.type === "hook.ran" && env.payload.callId === undefined

const uncompared = (env: Envelope): boolean => UNCOMPARED.has(env.type) || sessionHookRun(env)

/**
 * A baseline snapshot after the session's first: the next process that opened the session took it
 * (each process takes one before its first command); a re-run is one process, so it is not compared.
 */
const laterBaseline = (env: Envelope, envelopes: ReadonlyArray<Envelope>, index: number): boolean =>
  env.type === "workspace.snapshot" &&
  env.payload.phase === "baseline" &&
  envelopes.slice(0, index).some((e) => e.type === "workspace.snapshot" && e.payload.phase === "baseline")

/** One thing of the original to match: an event, or a run of deltas of one part (their joined text). */
type Unit =
  | { readonly kind: "event"; readonly start: number; readonly env: Envelope }
  | {
      readonly kind: "run"
      readonly start: number
      readonly env: Envelope
      readonly type: "text.delta" | "reasoning.delta"
      readonly partId: string
      readonly text: string
      readonly metadata: ProviderMetadata | undefined
    }

const deltaOf = (env: Envelope) =>
  env.type === "text.delta" || env.type === "reasoning.delta"
    ? {
        type: env.type,
        partId: env.payload.partId as string,
        delta: env.payload.delta,
        metadata: env.type === "reasoning.delta" ? env.payload.metadata : undefined
      }
    : undefined

const unitsOf = (envelopes: ReadonlyArray<Envelope>): Array<Unit> => {
  const units: Array<Unit> = []
  for (let i = 0; i < envelopes.length; i++) {
    const env = envelopes[i]!
    if (uncompared(env) || laterBaseline(env, envelopes, i)) continue
    const delta = deltaOf(env)
    const last = units[units.length - 1]
    if (delta === undefined) units.push({ kind: "event", start: i, env })
    else if (last?.kind === "run" && last.type === delta.type && last.partId === delta.partId)
      // a run goes on only with the event right after it (the previous unit is the run)
      units[units.length - 1] = {
        ...last,
        text: last.text + delta.delta,
        metadata: mergeProviderMetadata(last.metadata, delta.metadata)
      }
    else
      units.push({
        kind: "run",
        start: i,
        env,
        type: delta.type,
        partId: delta.partId,
        text: delta.delta,
        metadata: delta.metadata
      })
  }
  return units
}

const toolResultOf = (env: Envelope, tools: ReadonlyMap<string, string>): ToolResultText | undefined =>
  env.type === "tool.finished"
    ? { callId: env.payload.callId, tool: tools.get(env.payload.callId) ?? "?", ok: true, output: env.payload.output }
    : env.type === "tool.failed"
      ? { callId: env.payload.callId, tool: tools.get(env.payload.callId) ?? "?", ok: false, output: env.payload.error }
      : undefined

/** The call an event concerns, if any. */
const callOf = (env: Envelope | undefined): string | undefined => {
  const payload = env?.payload as { readonly callId?: unknown } | undefined
  return typeof payload?.callId === "string" ? payload.callId : undefined
}

const describe = (env: Envelope | undefined): string => {
  if (env === undefined) return "nothing"
  const payload = env.payload as Record<string, unknown>
  const call = typeof payload.callId === "string" ? ` of ${payload.callId}` : ""
  return `${env.type}${call}`
}

// ---------------------------------------------------------------------------------------------
// the re-run

interface Coordinator {
  /** the index in the original of the first event not matched yet */
  readonly position: SubscriptionRef.SubscriptionRef<number>
  /** input points performed */
  readonly performed: SubscriptionRef.SubscriptionRef<number>
  readonly outcome: Deferred.Deferred<RerunOutcome>
  /** new id -> old id, per kind, and back */
  readonly ids: Map<string, Map<string, string>>
  readonly back: Map<string, Map<string, string>>
}

/**
 * The tools an imported session's re-run runs without `--allow-live-tools`: they change nothing,
 * and read only the scratch directory (a path outside it is refused for every tool).
 */
export const READ_ONLY_TOOLS: ReadonlySet<string> = new Set(["read", "list", "glob", "grep", "todo"])

/**
 * Whether the session came from a session file (its chain mark says `imported`), or is a saved
 * re-run or fork of one that did (`session.created` `rerunOf`, followed back).
 */
const isImported = Effect.fn("Rerun.isImported")(function* (sessionId: SessionId, first: Envelope | undefined) {
  const store = yield* EventStore
  let id = sessionId
  let created = first
  const seen = new Set<string>()
  while (!seen.has(id)) {
    seen.add(id)
    const { mark } = yield* store.chainInfo(id)
    if (Option.isSome(mark) && mark.value.reason === "imported") return true
    const from = created?.type === "session.created" ? created.payload.rerunOf?.sessionId : undefined
    if (from === undefined) return false
    id = from as SessionId
    created = Option.getOrUndefined(yield* Stream.runHead(store.read(id, { from: 1, to: 1 })))
  }
  return false
})

const awaitRef = <A>(ref: SubscriptionRef.SubscriptionRef<A>, ok: (a: A) => boolean) =>
  ref.changes.pipe(Stream.filter(ok), Stream.runHead, Effect.asVoid)

// ---------------------------------------------------------------------------------------------
// the re-run, step by step

/** What the steps of a re-run share: the original, where it is cut, the scratch directory, the outcome. */
interface Replay {
  readonly options: RerunOptions
  readonly envelopes: ReadonlyArray<Envelope>
  readonly plan: RerunPlan
  readonly fork: RerunFork | undefined
  /** the request a fork goes live at */
  readonly forkRequest: RerunPlan["requests"][number] | undefined
  /** the original's events compared: all, or those before the fork's request */
  readonly cut: number
  readonly units: ReadonlyArray<Unit>
  /** the original's directory, and the scratch one (its real path) */
  readonly origCwd: string
  readonly workspace: string
  /** the scratch directory's paths written as the original's */
  readonly toOriginal: (text: string) => string
  /** and the other way: what the model wrote about the original directory, about the scratch one */
  readonly toScratch: (text: string) => string
  readonly coord: Coordinator
  readonly finish: (outcome: RerunOutcome) => Effect.Effect<void>
  /** the index in the original of the first event not matched yet */
  readonly position: () => number
  /** model requests answered so far, and how many of them the live model answered */
  readonly requests: { served: number; live: number }
  readonly imported: boolean
  readonly refused: Array<RefusedCall>
  /** how the commands run, and the `bash` calls made or refused so far */
  readonly confinement: RerunSandbox
  readonly commandCalls: { count: number }
  /** the original's MCP calls, and how many of them the re-run answered from the log */
  readonly mcpCalls: RecordedMcpCalls
  readonly mcpServed: { count: number }
}

/** The original's events and plan, where a fork cuts it, checked against the options. */
const readOriginal = Effect.fn("Rerun.readOriginal")(function* (options: RerunOptions) {
  const envelopes = yield* readEnvelopes(options.sessionId)
  if (envelopes.length === 0)
    return yield* new RerunUnavailable({ sessionId: options.sessionId, message: `no session ${options.sessionId}` })
  const plan = planOf(envelopes)
  const fork = options.fork
  if (fork !== undefined && fork.fromRequest > plan.requests.length)
    return yield* new RerunUnavailable({
      sessionId: options.sessionId,
      message: `session ${options.sessionId} made ${plan.requests.length} model requests: --from-step ${fork.fromRequest} is past them`
    })
  const forkRequest = fork === undefined ? undefined : plan.requests[fork.fromRequest - 1]
  const cut = forkRequest === undefined ? envelopes.length : forkRequest.index
  const imported = yield* isImported(options.sessionId, envelopes[0]).pipe(
    Effect.mapError(
      (error) =>
        new RerunUnavailable({
          sessionId: options.sessionId,
          message: `cannot tell where session ${options.sessionId} came from: ${error.message}`
        })
    )
  )
  return { envelopes, plan, fork, forkRequest, cut, imported }
})

/** The shared state of a re-run whose original is read and whose scratch directory is restored. */
const makeReplay = Effect.fn("Rerun.makeReplay")(function* (
  options: RerunOptions,
  original: Effect.Effect.Success<ReturnType<typeof readOriginal>>,
  confinement: RerunSandbox
) {
  const { envelopes, plan, cut } = original
  const origCwd = plan.cwd ?? options.workspace
  const workspace = yield* Effect.promise(() => fsp.realpath(options.workspace))
  const coord: Coordinator = {
    position: yield* SubscriptionRef.make(0),
    performed: yield* SubscriptionRef.make(0),
    outcome: yield* Deferred.make<RerunOutcome>(),
    ids: new Map(),
    back: new Map()
  }
  const replay: Omit<Replay, "mcpCalls"> = {
    ...original,
    options,
    units: unitsOf(envelopes.slice(0, cut)),
    origCwd,
    workspace,
    toOriginal: replacePath([workspace, nodePath.resolve(options.workspace)], origCwd),
    toScratch: replacePath([origCwd], workspace),
    coord,
    finish: (outcome: RerunOutcome) => Deferred.succeed(coord.outcome, outcome).pipe(Effect.asVoid),
    position: () => Effect.runSync(SubscriptionRef.get(coord.position)),
    requests: { served: 0, live: 0 },
    refused: [],
    confinement,
    commandCalls: { count: 0 },
    mcpServed: { count: 0 }
  }
  return { ...replay, mcpCalls: recordedMcpCalls(replay) } satisfies Replay
})

/** An MCP tool a recorded request offered: its definition as it was sent. */
interface RecordedTool {
  readonly name: string
  readonly description: string
  readonly inputSchema: Readonly<Record<string, unknown>>
}

/** The recorded prompts, by prompt version: the system prompt and the MCP tools offered with it. */
const recordedSystems = Effect.fn("Rerun.recordedSystems")(function* (envelopes: ReadonlyArray<Envelope>) {
  const store = yield* EventStore
  const systems = new Map<string, string | null>()
  const mcpTools = new Map<string, ReadonlyArray<RecordedTool>>()
  for (const env of envelopes) {
    if (env.type !== "prompt.recorded") continue
    const blob = yield* Effect.orElseSucceed(store.getBlob(env.payload.blob), Option.none)
    if (Option.isNone(blob)) continue
    const parsed = Either.try(
      () =>
        JSON.parse(new TextDecoder().decode(blob.value)) as {
          readonly system?: string | null
          readonly tools?: ReadonlyArray<RecordedTool>
        }
    )
    if (Either.isRight(parsed)) {
      systems.set(env.payload.promptVersion, parsed.right.system ?? null)
      mcpTools.set(
        env.payload.promptVersion,
        (parsed.right.tools ?? []).filter((tool) => typeof tool?.name === "string" && isMcpTool(tool.name))
      )
    }
  }
  return Object.assign(systems, { mcpTools })
})

/** The original's MCP calls by call id: the tool, and how each ended (`undefined`: refused before it ran). */
interface RecordedMcpCalls {
  /** every MCP call the model made (`tool.pending`): its tool */
  readonly pending: ReadonlyMap<string, string>
  /** the calls that ran (`tool.invoked`), as they ended */
  readonly ended: ReadonlyMap<string, RecordedMcpCall>
  /** the recorded timeout of a call that timed out, by its tool and input as the re-run sends it */
  readonly timeouts: ReadonlyMap<string, number>
}

const mcpCallKey = (tool: string, input: unknown) => `${tool} ${canonicalJson(input ?? null)}`

const recordedMcpCalls = (r: Pick<Replay, "envelopes" | "cut" | "toScratch">): RecordedMcpCalls => {
  const pending = new Map<string, string>()
  const invoked = new Map<string, { readonly tool: string; readonly input: unknown }>()
  const ended = new Map<string, RecordedMcpCall>()
  const timeouts = new Map<string, number>()
  const timedOut = new Map<string, number>()
  for (const env of r.envelopes.slice(0, r.cut)) {
    if (env.type === "tool.pending" && isMcpTool(env.payload.tool)) pending.set(env.payload.callId, env.payload.tool)
    if (env.type === "tool.invoked" && isMcpTool(env.payload.tool)) {
      invoked.set(env.payload.callId, { tool: env.payload.tool, input: env.payload.input })
      // until it ends: a call the log leaves running runs until the re-run stops it
      ended.set(env.payload.callId, { _tag: "stopped" })
    }
    if (env.type === "tool.timeout") timedOut.set(env.payload.callId, env.payload.timeoutMs)
    if (env.type === "tool.finished" && invoked.has(env.payload.callId))
      ended.set(env.payload.callId, { _tag: "finished", output: env.payload.output, metadata: env.payload.metadata })
    if (env.type === "tool.failed" && invoked.has(env.payload.callId)) {
      const { callId, error, metadata, timedOut: timed, interrupted } = env.payload
      ended.set(
        callId,
        timed === true || interrupted === true ? { _tag: "stopped" } : { _tag: "failed", error, metadata }
      )
      const ms = timedOut.get(callId)
      const call = invoked.get(callId)!
      if (timed === true && ms !== undefined) {
        // as the re-run sends it: the original directory's paths written as the scratch one's
        const input = Either.getOrElse(
          Either.try(() => JSON.parse(r.toScratch(JSON.stringify(call.input ?? null))) as unknown),
          () => call.input
        )
        timeouts.set(mcpCallKey(call.tool, input), ms)
        timeouts.set(call.tool, ms)
      }
    }
  }
  return { pending, ended, timeouts }
}

/**
 * The MCP tools of a re-run (`LateTools`): each request offers the MCP tools its original offered
 * (as recorded), and a call the original made is answered from the log, never by a server
 * (`mcpStandIn`); a call it did not make is refused (`makeRefuse`).
 */
const makeMcpStandIns = (r: Replay, recorded: ReadonlyMap<string, ReadonlyArray<RecordedTool>>) => {
  const calls = r.mcpCalls
  const serve = (callId: string): RecordedMcpCall | undefined => {
    const found = calls.ended.get(callId) ?? calls.ended.get(r.coord.ids.get("call")?.get(callId) ?? "")
    if (found !== undefined) r.mcpServed.count += 1
    return found
  }
  const all = new Map<string, AnyTool>()
  const standIn = (tool: RecordedTool): AnyTool => {
    const known = all.get(tool.name)
    if (known !== undefined) return known
    const made = mcpStandIn({
      ...tool,
      serve,
      // a call that timed out times out again, after the recorded time; the others answer at once
      timeoutMs: (input) =>
        calls.timeouts.get(mcpCallKey(tool.name, input)) ?? calls.timeouts.get(tool.name) ?? defaultMcpBounds.timeoutMs
    })
    all.set(tool.name, made)
    return made
  }
  const byVersion = new Map<string, ReadonlyArray<AnyTool>>()
  for (const [version, tools] of recorded) byVersion.set(version, tools.map(standIn))
  for (const tool of calls.pending.values()) standIn({ name: tool, description: "", inputSchema: { type: "object" } })
  return {
    current: () => {
      const version = r.plan.requests[Math.min(r.requests.served, r.plan.requests.length - 1)]?.promptVersion
      return (version === undefined ? undefined : byVersion.get(version)) ?? []
    },
    find: (name: string) => all.get(name)
  }
}

/** Whether an MCP call is one the original made (before a fork's point): the re-run answers it from the log. */
const isRecordedMcpCall = (r: Replay, callId: string, tool: string): boolean =>
  (r.fork === undefined || r.requests.served < r.fork.fromRequest) &&
  (r.mcpCalls.pending.get(callId) ?? r.mcpCalls.pending.get(r.coord.ids.get("call")?.get(callId) ?? "")) === tool

type RecordedSystems = Effect.Effect.Success<ReturnType<typeof recordedSystems>>

/** Whether the next model request goes to a fork's live model. */
const nextIsLive = (r: Replay): boolean => r.fork !== undefined && r.requests.served + 1 >= r.fork.fromRequest

/** The re-run's confinement, above the permission rules (docs/rerun.md, "What a re-run may touch"). */
const makeRefuse =
  (r: Replay) =>
  (request: RefusalRequest): Effect.Effect<string | undefined> =>
    Effect.gen(function* () {
      if (request.tool === COMMAND_TOOL) r.commandCalls.count += 1
      const why = request.outside
        ? `${request.tool} of ${request.subject} is outside the re-run's scratch directory, and a re-run touches nothing outside it`
        : isMcpTool(request.tool)
          ? isRecordedMcpCall(r, request.callId, request.tool)
            ? undefined
            : `${request.tool} is a tool of an MCP server, and a re-run never calls an MCP server: the original did not make this call`
          : r.imported && r.options.allowLiveTools !== true && !READ_ONLY_TOOLS.has(request.tool)
            ? `session ${r.options.sessionId} was imported from a session file: its ${request.tool} calls run only with --allow-live-tools`
            : noSandboxRefusal(r.confinement, request.tool)
      if (why === undefined) return undefined
      const { callId, tool, outside } = request
      r.refused.push({ callId, tool, subject: r.toOriginal(request.subject), outside, why })
      // before a fork's point, the re-run cannot go past a call it did not make
      if (r.fork === undefined || r.requests.served < r.fork.fromRequest)
        yield* r.finish({ _tag: "refused", seq: r.envelopes[Math.min(r.position(), r.envelopes.length - 1)]?.seq ?? 0 })
      return why
    })

/**
 * The re-run's model: the recorded responses in order (each recorded end: finished, failed with
 * the decision the policy took then, or hanging until the driver stops it), then a fork's live model.
 */
const makeCassette = (r: Replay) => {
  const { envelopes, plan, fork, requests } = r
  const decisions = new WeakMap<ModelError, RecordedDecision>()
  const modelName = (): string => {
    if (fork !== undefined) return fork.model.name
    for (let i = Math.min(r.position(), envelopes.length - 1); i < envelopes.length; i++) {
      const env = envelopes[i]!
      if ((env.type === "assistant.started" || env.type === "session.created") && env.payload.model !== undefined)
        return env.payload.model
    }
    return plan.model ?? "rerun/model"
  }
  const served = (recorded: RerunPlan["requests"][number]) => {
    const events = Stream.fromIterable(recorded.events).pipe(
      Stream.mapEffect((item) =>
        awaitRef(r.coord.performed, (n) => n >= item.inputsBefore).pipe(Effect.as(item.event))
      ),
      // what the model wrote about the original directory is about the scratch one here
      Stream.map((event) =>
        event._tag === "TextDelta"
          ? { ...event, delta: r.toScratch(event.delta) }
          : event._tag === "ToolCall"
            ? {
                ...event,
                input: JSON.parse(r.toScratch(JSON.stringify(event.input ?? null))) as unknown,
                inputText: r.toScratch(event.inputText)
              }
            : event
      )
    )
    switch (recorded.end._tag) {
      case "finish":
        return events
      case "fail":
        decisions.set(recorded.end.error, recorded.end.decision)
        return Stream.concat(events, Stream.fail(recorded.end.error))
      case "hang":
        return Stream.concat(events, Stream.never)
    }
  }
  const model: Model["Type"] = {
    get name() {
      return modelName()
    },
    stream: (request: ModelRequest) =>
      Stream.unwrap(
        Effect.gen(function* () {
          if (nextIsLive(r)) {
            requests.served += 1
            requests.live += 1
            return fork!.model.stream(request)
          }
          const recorded = plan.requests[requests.served]
          requests.served += 1
          if (recorded !== undefined) return served(recorded)
          yield* r.finish({
            _tag: "divergence",
            divergence: {
              message: `the re-run made model request ${requests.served}, which the original did not make (it made ${plan.requests.length})`,
              expected: undefined,
              actual: undefined
            }
          })
          return Stream.never
        })
      )
  }
  return { model, decisions }
}

/**
 * The policy's Schedule, with the decisions the original's log records: a recorded retry is taken
 * without a wait; a failure the log does not know (a live model's, in a fork) the policy decides.
 */
const makeReplayedRetry = (r: Replay, decisions: WeakMap<ModelError, RecordedDecision>) =>
  Retry.make(r.options.agent.retry ?? defaultRetryOptions, ({ error, now }) => {
    // (a failure is proxied with its span on the way: the original is the one the cassette failed with)
    const decision = decisions.get(Cause.originalError(error))
    if (decision === undefined) return undefined
    return decision._tag === "gaveUp"
      ? { _tag: "GiveUp", reason: decision.retryable ? "max-attempts" : "not-retryable", message: decision.message }
      : {
          _tag: "Retry",
          attempt: decision.attempt,
          delayMs: decision.delayMs,
          nextAt: now + decision.delayMs,
          fromServer: false,
          message: decision.message
        }
  })

/** The approver of the re-run: the recorded answers (a fork's approver past its point). */
const makeReplayedApprover = (r: Replay): Approver["Type"] => {
  const { coord, fork, cut } = r
  const replies = new Map<string, Envelope & { readonly type: "permission.replied" }>()
  for (const env of r.envelopes) if (env.type === "permission.replied") replies.set(env.payload.permissionId, env)
  let rejectedBy: string | undefined
  return {
    ask: (request) =>
      Effect.gen(function* () {
        // the comparator matched the question to the original's when its permission.asked came
        yield* awaitRef(
          coord.position,
          (at) => coord.ids.get("permission")?.has(request.permissionId) === true || at >= cut
        )
        const original = coord.ids.get("permission")?.get(request.permissionId)
        if (original === undefined) {
          if (fork === undefined) return yield* Effect.never
          const answer = yield* fork.approver.ask(request)
          rejectedBy = fork.approver.rejectedBy
          return answer
        }
        const reply = replies.get(original)
        // the original was interrupted while it asked: the interrupt comes from the re-run's driver
        if (reply === undefined || reply.payload.interrupted === true) return yield* Effect.never
        rejectedBy = reply.payload.by
        return reply.payload.message !== undefined
          ? { reply: "reject" as const, message: reply.payload.message }
          : reply.payload.reply
      }),
    // who rejected the question just answered, as the original's log says (the user, or a policy)
    get rejectedBy() {
      return rejectedBy
    }
  }
}

/** The system prompt of the next request: the recorded one (a fork's own past its point). */
const makeSystemOverride = (r: Replay, systems: ReadonlyMap<string, string | null>) => (): string | undefined => {
  const { plan, fork } = r
  const served = r.requests.served
  if (nextIsLive(r) && fork?.system !== undefined) return fork.system
  const recorded = (n: number) => {
    const version = plan.requests[n]?.promptVersion
    const system = version === undefined ? undefined : systems.get(version)
    return system === undefined || system === null ? undefined : r.toScratch(system)
  }
  for (let n = Math.min(served, plan.requests.length - 1); n >= 0; n--) {
    const system = recorded(n)
    if (system !== undefined) return system
    if (n === served) {
      // the next step's, looking forward first (a summary request has none of its own)
      for (let m = served + 1; m < plan.requests.length; m++) {
        const found = recorded(m)
        if (found !== undefined) return found
      }
    }
  }
  return undefined
}

/**
 * The step limit of the turn the latest request (served or live) belongs to: a turn the original
 * cut at its step limit (`max-steps`: that run's limit, which the log does not keep otherwise) is
 * cut where it was; the others end by themselves, as they did.
 */
const makeMaxSteps = (r: Replay) => {
  const stepLimits: Array<{ readonly start: number; readonly end: number; readonly steps: number }> = []
  let turnStart = 0
  let turnSteps = 0
  r.envelopes.forEach((env, i) => {
    if (env.type === "turn.started") {
      turnStart = i
      turnSteps = 0
    }
    if (env.type === "step.finished" && !(env.payload.aborted === true && env.payload.finishReason === STREAM_FAILED))
      turnSteps += 1
    if (env.type === "turn.finished" && env.payload.reason === "max-steps")
      stepLimits.push({ start: turnStart, end: i, steps: turnSteps })
  })
  const configured = r.options.agent.sessions.maxSteps
  return (): number => {
    const served = r.requests.served
    if (r.fork !== undefined && served >= r.fork.fromRequest) return configured
    const at = r.plan.requests[served - 1]?.index
    if (at === undefined) return configured
    return stepLimits.find((turn) => turn.start <= at && at <= turn.end)?.steps ?? Number.MAX_SAFE_INTEGER
  }
}

/** The agent of one process of the re-run (a crash of the original starts another, with another lease owner). */
const makeAgentOf = (r: Replay, systems: RecordedSystems) => {
  const { model, decisions } = makeCassette(r)
  const retry = makeReplayedRetry(r, decisions)
  const approver = makeReplayedApprover(r)
  const systemOverride = makeSystemOverride(r, systems)
  const maxSteps = makeMaxSteps(r)
  const refuse = makeRefuse(r)
  const agent = r.options.agent
  // the recorded MCP tools: offered as they were, their calls answered from the log
  const late = makeMcpStandIns(r, systems.mcpTools)
  return (owner: string, store: Context.Context<EventStore | EventBus>) =>
    makeAgentLayer({
      ...agent,
      sessions: {
        ...agent.sessions,
        get maxSteps() {
          return maxSteps()
        },
        systemOverride,
        owner,
        onLeftoverCommands: undefined
      },
      actions: { ...agent.actions, refuse },
      // its commands in the re-run's sandbox, whatever the config's (what the model is told stays);
      // the recorded MCP tools as they were offered; the hooks served from the log (RerunHooks.ts)
      tools: {
        ...agent.tools,
        tools: confineCommands(agent.tools.tools, r.confinement),
        late,
        hooks: replayedHooks(r.envelopes)
      },
      retry,
      approver: Layer.succeed(Approver, approver)
    }).pipe(
      Layer.provide(Layer.succeed(Model, model)),
      Layer.provide(Layer.succeed(Secrets, r.options.secrets)),
      Layer.provide(Layer.succeedContext(store))
    )
}

/** The kernel driving the re-run's session now: replaced at a crash of the original (another process). */
interface Kernel {
  sessions: Sessions["Type"]
  readonly owners: Array<string>
  readonly agentOf: ReturnType<typeof makeAgentOf>
  readonly store: Context.Context<EventStore | EventBus>
}

/**
 * Matches the re-run's payloads to the original's: ids one to one, blobs by content, the scratch
 * directory standing for the original one, sizes that count it, fields that differ between runs
 * left out.
 */
const makeMatcher = (r: Replay, originalStore: EventStore["Type"], targetStore: EventStore["Type"]) => {
  const { coord, toOriginal, origCwd, workspace, fork } = r
  const bind = (kind: string, oldId: string, newId: string): boolean => {
    const forward = coord.ids.get(kind) ?? new Map<string, string>()
    const backward = coord.back.get(kind) ?? new Map<string, string>()
    coord.ids.set(kind, forward)
    coord.back.set(kind, backward)
    const known = forward.get(newId)
    if (known !== undefined) return known === oldId
    if (backward.has(oldId)) return false
    forward.set(newId, oldId)
    backward.set(oldId, newId)
    return true
  }
  const sameBlob = (oldHash: string, newHash: string) =>
    Effect.gen(function* () {
      const [a, b] = yield* Effect.all([originalStore.getBlob(oldHash), targetStore.getBlob(newHash)])
      if (Option.isNone(a) || Option.isNone(b)) return false
      const decoder = new TextDecoder()
      const [before, now] = [decoder.decode(a.value), decoder.decode(b.value)]
      return before === toOriginal(now) || differOnlyInPath(before, now, origCwd, workspace)
    }).pipe(Effect.orElseSucceed(() => false))

  /** which files two workspace manifests disagree on, for the divergence's sentence */
  const manifestDifference = (oldHash: string, newHash: string) =>
    Effect.gen(function* () {
      const [a, b] = yield* Effect.all([originalStore.getBlob(oldHash), targetStore.getBlob(newHash)])
      if (Option.isNone(a) || Option.isNone(b)) return "a manifest is not in the log"
      const [before, after] = [decodeManifestDocument(a.value), decodeManifestDocument(b.value)]
      if (Either.isLeft(before) || Either.isLeft(after)) return "a manifest cannot be read"
      const key = (f: ManifestFile) => canonicalJson({ ...f, path: undefined })
      const olds = new Map(before.right.files.map((f) => [f.path, key(f)]))
      const news = new Map(after.right.files.map((f) => [f.path, key(f)]))
      const paths = [...new Set([...olds.keys(), ...news.keys()])].filter((p) => olds.get(p) !== news.get(p)).sort()
      const shown = paths
        .slice(0, 5)
        .map((p) => (!olds.has(p) ? `${p} is new` : !news.has(p) ? `${p} is gone` : `${p} differs`))
      return `the workspace differs: ${shown.join(", ")}${paths.length > 5 ? ` and ${paths.length - 5} more` : ""}`
    }).pipe(Effect.orElseSucceed(() => "the manifests cannot be read"))

  /**
   * A size beside the blob of what it measures (a command's `bytes` beside its `outputBlob`, a
   * read file's `size` beside its `hash`) counts the scratch directory's path where the content
   * names it: it is the size of the re-run's content written as the original.
   */
  const sameSize = (ra: Record<string, unknown>, rb: Record<string, unknown>, key: "bytes" | "size") =>
    Effect.gen(function* () {
      const hash = key === "bytes" ? rb.outputBlob : rb.hash
      if (typeof ra[key] !== "number" || typeof rb[key] !== "number" || typeof hash !== "string") return false
      const blob = yield* targetStore.getBlob(hash)
      if (Option.isNone(blob)) return false
      return Buffer.byteLength(toOriginal(new TextDecoder().decode(blob.value))) === ra[key]
    }).pipe(Effect.orElseSucceed(() => false))

  /** the first difference between two payload values, as a path, or undefined */
  const differ = (a: unknown, b: unknown, key: string, path: string): Effect.Effect<string | undefined> =>
    Effect.gen(function* () {
      if (IGNORED.has(key)) return undefined
      if (fork !== undefined && key === "model") return undefined
      const kind = ID_KIND[key]
      if (kind !== undefined && (typeof a === "string" || Array.isArray(a))) {
        const olds = Array.isArray(a) ? a : [a]
        const news = Array.isArray(b) ? b : [b]
        if (olds.length !== news.length) return path
        for (let i = 0; i < olds.length; i++) {
          if (typeof olds[i] !== "string" || typeof news[i] !== "string" || !bind(kind, olds[i], news[i])) return path
        }
        return undefined
      }
      if (BLOB_FIELDS.has(key) && typeof a === "string" && typeof b === "string") {
        if (a === b || (yield* sameBlob(a, b))) return undefined
        return key === "manifest" ? `${path} (${yield* manifestDifference(a, b)})` : path
      }
      if (typeof a === "string" && typeof b === "string")
        return a === toOriginal(b) || differOnlyInPath(a, b, origCwd, workspace) ? undefined : path
      if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return a === b ? undefined : path
      if (Array.isArray(a) !== Array.isArray(b)) return path
      if (Array.isArray(a) && Array.isArray(b)) {
        if (a.length !== b.length) return `${path} (${a.length} items, now ${b.length})`
        for (let i = 0; i < a.length; i++) {
          const found = yield* differ(a[i], b[i], key, `${path}[${i}]`)
          if (found !== undefined) return found
        }
        return undefined
      }
      const ra = a as Record<string, unknown>
      const rb = b as Record<string, unknown>
      const keys = new Set([...Object.keys(ra), ...Object.keys(rb)])
      for (const k of keys) {
        if (IGNORED.has(k)) continue
        if ((k === "bytes" || k === "size") && (yield* sameSize(ra, rb, k))) continue
        if (ra[k] === undefined && rb[k] === undefined) continue
        if (ra[k] === undefined || rb[k] === undefined) return `${path}.${k}`
        const found = yield* differ(ra[k], rb[k], k, `${path}.${k}`)
        if (found !== undefined) return found
      }
      return undefined
    })
  return { bind, differ }
}

/**
 * The comparator: each event the re-run writes against the original's next unit (an event, or a
 * run of deltas by their joined text); the first that differs ends the re-run as a divergence.
 */
const makeComparator = (r: Replay, matcher: ReturnType<typeof makeMatcher>) => {
  const { envelopes, units, coord, cut, fork, toOriginal } = r
  const { bind, differ } = matcher
  const seen: Array<Envelope> = []
  const newTools = new Map<string, string>()
  const oldTools = new Map<string, string>()
  for (const env of envelopes) if (env.type === "tool.pending") oldTools.set(env.payload.callId, env.payload.tool)
  // a log written before file tools recorded their intents (`file.intent`) is compared without them
  const originalIntents = envelopes.some((env) => env.type === "file.intent")

  const diverge = (message: string, expected: Envelope | undefined, actual: Envelope | undefined) => {
    const oldCall =
      callOf(expected) ?? (callOf(actual) === undefined ? undefined : coord.ids.get("call")?.get(callOf(actual)!))
    const newCall = callOf(actual) ?? (oldCall === undefined ? undefined : coord.back.get("call")?.get(oldCall))
    const isResult = (e: Envelope, callId: string) =>
      (e.type === "tool.finished" || e.type === "tool.failed") && e.payload.callId === callId
    const thenEnv = oldCall === undefined ? undefined : envelopes.find((e) => isResult(e, oldCall))
    const nowEnv = newCall === undefined ? undefined : [...seen].reverse().find((e) => isResult(e, newCall))
    const then = thenEnv === undefined ? undefined : toolResultOf(thenEnv, oldTools)
    const nowRaw = nowEnv === undefined ? undefined : toolResultOf(nowEnv, newTools)
    const now = nowRaw === undefined ? undefined : { ...nowRaw, output: toOriginal(nowRaw.output) }
    return r.finish({ _tag: "divergence", divergence: { message, expected, actual, then, now } })
  }

  let sawBaseline = false
  let unit = 0
  let runText = ""
  let runMetadata: ProviderMetadata | undefined
  const advance = () => {
    unit += 1
    runText = ""
    runMetadata = undefined
    return SubscriptionRef.set(coord.position, units[unit]?.start ?? cut)
  }
  /** a delta of the run of deltas `expected` */
  const compareDelta = (expected: Unit & { readonly kind: "run" }, env: Envelope) =>
    Effect.gen(function* () {
      const delta = deltaOf(env)
      const what = expected.type === "text.delta" ? "text" : "reasoning"
      if (delta === undefined || delta.type !== expected.type || !bind("part", expected.partId, delta.partId)) {
        return yield* diverge(
          `expected the model's ${what} "${expected.text.slice(0, 80)}", the re-run wrote ${describe(env)}`,
          expected.env,
          env
        )
      }
      runText += toOriginal(delta.delta)
      runMetadata = mergeProviderMetadata(runMetadata, delta.metadata)
      if (!expected.text.startsWith(runText)) {
        return yield* diverge(
          `the model's ${what} differs: "${expected.text.slice(0, 80)}", now "${runText.slice(0, 80)}"`,
          expected.env,
          env
        )
      }
      if (runText === expected.text && canonicalJson(runMetadata ?? null) === canonicalJson(expected.metadata ?? null))
        yield* advance()
    })
  const compareOne = (env: Envelope) =>
    Effect.gen(function* () {
      seen.push(env)
      if (env.type === "tool.pending") newTools.set(env.payload.callId, env.payload.tool)
      if (uncompared(env)) return
      if (env.type === "file.intent" && !originalIntents) return
      if (env.type === "workspace.snapshot" && env.payload.phase === "baseline") {
        if (sawBaseline) return
        sawBaseline = true
      }
      if (unit >= units.length) {
        if (fork !== undefined) return
        return yield* diverge(`the re-run went on after the original's last event: ${describe(env)}`, undefined, env)
      }
      const expected = units[unit]!
      if (expected.kind === "run") return yield* compareDelta(expected, env)
      const original = expected.env
      if (original.type !== env.type) {
        return yield* diverge(
          `expected ${describe(original)} (seq ${original.seq}), the re-run wrote ${describe(env)}`,
          original,
          env
        )
      }
      const where = yield* differ(original.payload, env.payload, "", "payload")
      const parentSame =
        (original.parentId === null && env.parentId === null) ||
        (original.parentId !== null && env.parentId !== null && bind("event", original.parentId, env.parentId))
      if (where !== undefined || !parentSame || !bind("event", original.id, env.id)) {
        return yield* diverge(
          `${describe(original)} (seq ${original.seq}) differs at ${where ?? "parentId"}`,
          original,
          env
        )
      }
      yield* advance()
    })
  return { seen, compareOne, diverge, unitNow: () => units[unit] }
}

/**
 * The driver: what acted from outside (prompts, steers, withdrawals, interrupts, compactions, a
 * crash), each at its place in the original; then a fork's later prompts, or the end of the match.
 */
const makeDriver = (
  r: Replay,
  kernel: Kernel,
  comparator: ReturnType<typeof makeComparator>,
  newSession: SessionId,
  targetStore: EventStore["Type"]
) => {
  const { envelopes, plan, coord, cut, fork, forkRequest, finish, toScratch } = r
  const fail = (why: string, index: number) => finish({ _tag: "stopped", seq: envelopes[index]?.seq ?? 0, why })
  const perform = (input: InputPoint) =>
    Effect.suspend(() => performIn(input).pipe(Effect.annotateLogs(PROCESS_ANNOTATION, kernel.owners.length)))
  const performIn = (input: InputPoint) =>
    Effect.gen(function* () {
      const sessions = kernel.sessions
      switch (input._tag) {
        case "send":
          if (input.mode === "prompt") yield* sessions.wait(newSession)
          // what the message's hooks added, as recorded (the re-run runs no hooks)
          yield* sessions.send(newSession, toScratch(input.text), {
            mode: input.mode,
            context: input.context === undefined ? undefined : toScratch(input.context)
          })
          return
        case "withdraw": {
          const id = coord.back.get("message")?.get(input.messageId)
          if (id === undefined)
            return yield* fail(`message ${input.messageId} was withdrawn before the re-run saw it`, input.index)
          yield* sessions
            .withdraw(newSession, id as never)
            .pipe(
              Effect.catchTag("WithdrawRefused", (refused) =>
                comparator.diverge(
                  `the withdrawal of message ${input.messageId} was refused: ${refused.message}`,
                  envelopes[input.index],
                  undefined
                )
              )
            )
          return
        }
        case "interrupt":
          yield* sessions.interrupt(newSession, input.reason)
          return
        case "compact":
          yield* sessions.wait(newSession)
          yield* sessions
            .compact(newSession)
            .pipe(
              Effect.catchAll((error) =>
                comparator.diverge(`the manual compaction failed: ${error.message}`, envelopes[input.index], undefined)
              )
            )
          return
        case "crash": {
          // the original's process died here and the next one that opened the session repaired it:
          // this process of the re-run loses the session (its lease goes, so it writes nothing more,
          // as a dead process does), and another one opens it — the same crash sweep
          yield* targetStore.releaseLease(newSession, kernel.owners[kernel.owners.length - 1]!)
          const owner = ownerId(`rerun-${yield* uuidV7}`)
          kernel.owners.push(owner)
          kernel.sessions = Context.get(yield* Layer.build(kernel.agentOf(owner, kernel.store)), Sessions)
          yield* kernel.sessions.open(newSession)
          return
        }
        case "unsupported":
          return yield* fail(input.why, input.index)
      }
    })

  // the model errors the log has before the fork's point were compared; one after it is the live part's
  const recordedErrors = envelopes.slice(0, cut).filter((env) => env.type === "model.error").length
  const liveFailure = targetStore.read(newSession).pipe(
    Stream.filter((env) => env.type === "model.error"),
    Stream.drop(recordedErrors),
    Stream.runHead,
    Effect.map((env) =>
      Option.getOrUndefined(Option.map(env, (e) => (e.type === "model.error" ? e.payload.message : "")))
    )
  )
  /** whether the original's log ends with the session idle (not in the middle of a turn) */
  const endsIdle = (() => {
    for (let i = envelopes.length - 1; i >= 0; i--) {
      const env = envelopes[i]!
      if (env.type === "session.status") return env.payload.status._tag === "idle"
    }
    return true
  })()

  /** a fork past its point: the user's later prompts, each when the turn before it is over */
  const goOnLive = (fromRequest: number, seq: number) =>
    Effect.gen(function* () {
      for (const input of plan.inputs) {
        if (input.index < cut || input._tag !== "send" || input.mode !== "prompt") continue
        yield* kernel.sessions.wait(newSession)
        yield* kernel.sessions.send(newSession, toScratch(input.text), {
          context: input.context === undefined ? undefined : toScratch(input.context)
        })
      }
      yield* kernel.sessions.wait(newSession)
      const failed = yield* liveFailure
      return yield* finish({ _tag: "forked", fromRequest, seq, ...(failed !== undefined ? { failed } : {}) })
    })

  return Effect.gen(function* () {
    for (const input of plan.inputs) {
      if (input.index >= cut) break
      yield* awaitRef(coord.position, (at) => at >= input.index)
      yield* perform(input)
      if (yield* Deferred.isDone(coord.outcome)) return
      yield* SubscriptionRef.update(coord.performed, (n) => n + 1)
    }
    yield* awaitRef(coord.position, (at) => at >= cut)
    if (fork !== undefined && forkRequest !== undefined) return yield* goOnLive(fork.fromRequest, forkRequest.seq)
    if (!endsIdle) {
      return yield* finish({
        _tag: "match",
        note: "the original's log ends in the middle of a turn (its process stopped and the session was not opened since); the re-run matched it to its end"
      })
    }
    yield* kernel.sessions.wait(newSession)
    // everything the re-run wrote has been compared
    const last = (yield* kernel.sessions.state(newSession)).lastSeq
    while (!(yield* Deferred.isDone(coord.outcome))) {
      if (comparator.seen.length >= last) break
      yield* Effect.yieldNow()
    }
    yield* finish({ _tag: "match" })
  }).pipe(
    Effect.catchAll((error) =>
      finish({
        _tag: "stopped",
        seq: envelopes[Math.min(r.position(), envelopes.length - 1)]?.seq ?? 0,
        why: `the re-run failed: ${error.message}`
      })
    )
  )
}

/**
 * A safety net, not a clock the re-run depends on: when nothing at all happened for a while and no
 * command runs, the re-run waits for something that will not come (a bug): it says so.
 */
const watchdog = (r: Replay, kernel: Kernel, comparator: ReturnType<typeof makeComparator>, newSession: SessionId) => {
  const progress = () => comparator.seen.length + r.position() + Effect.runSync(SubscriptionRef.get(r.coord.performed))
  return Effect.gen(function* () {
    let last = -1
    let still = 0
    while (true) {
      yield* Effect.sleep(Duration.seconds(1))
      const now = progress()
      const state = yield* Effect.either(kernel.sessions.state(newSession))
      const running =
        Either.isRight(state) && Projection.openToolParts(state.right).some((part) => part.state._tag === "running")
      // after a fork's point, a live model may take its time
      const pastFork = r.fork !== undefined && r.position() >= r.cut
      still = now === last && !running && !pastFork ? still + 1 : 0
      last = now
      if (still >= STUCK_SECONDS) {
        const expected = comparator.unitNow()?.env
        return yield* r.finish({
          _tag: "stopped",
          seq: expected?.seq ?? r.envelopes.at(-1)?.seq ?? 0,
          why:
            `the re-run waited ${STUCK_SECONDS} s for ${describe(expected)} and nothing came: a re-run that cannot ` +
            "go on here (please report it, with the session exported: logbook export)"
        })
      }
    }
  })
}

/**
 * Runs the re-run's kernel against the comparator and the driver until the outcome is known, in the
 * target log; returns the outcome and the re-run's session.
 */
const runReplay = (r: Replay, systems: RecordedSystems) =>
  Effect.scoped(
    Effect.gen(function* () {
      const originalStore = yield* EventStore
      const storeContext = yield* Layer.build(r.options.target ?? EventStore.layerMemory).pipe(
        Effect.mapError(
          (error: unknown) =>
            new RerunUnavailable({
              sessionId: r.options.sessionId,
              message: `cannot open the re-run's log: ${error instanceof Error ? error.message : String(error)}`
            })
        )
      )
      const agentOf = makeAgentOf(r, systems)
      const owners = [ownerId(`rerun-${yield* uuidV7}`)]
      const kernel: Kernel = {
        sessions: Context.get(yield* Layer.build(agentOf(owners[0]!, storeContext)), Sessions),
        owners,
        agentOf,
        store: storeContext
      }
      const targetStore = Context.get(storeContext, EventStore)
      const queue = yield* Context.get(storeContext, EventBus).subscribe
      const comparator = makeComparator(r, makeMatcher(r, originalStore, targetStore))
      const comparing = yield* Effect.fork(
        Effect.forever(
          Effect.flatMap(Queue.take(queue), (env) =>
            Effect.flatMap(Deferred.isDone(r.coord.outcome), (done) =>
              done ? Effect.void : comparator.compareOne(env)
            )
          )
        )
      )
      const newSession = yield* kernel.sessions
        .create({
          cwd: r.workspace,
          title: r.plan.title,
          rerunOf: {
            sessionId: r.options.sessionId,
            ...(r.fork !== undefined ? { fromRequest: r.fork.fromRequest } : {})
          }
        })
        .pipe(
          Effect.mapError(
            (error) =>
              new RerunUnavailable({
                sessionId: r.options.sessionId,
                message: `cannot start the re-run: ${error.message}`
              })
          )
        )
      // a kernel that lost the session at a crash still ends its fibers, which complain about it
      // (their writes are fenced off): what a dead process would not say is not said
      const loggers = yield* FiberRef.get(FiberRef.currentLoggers)
      const quiet = Logger.make<unknown, void>((entry) => {
        const from = HashMap.get(entry.annotations, PROCESS_ANNOTATION)
        if (Option.isSome(from) && from.value !== owners.length) return
        for (const logger of loggers) logger.log(entry)
      })
      const drive = makeDriver(r, kernel, comparator, newSession, targetStore)
      const driver = yield* Effect.fork(drive.pipe(Effect.locally(FiberRef.currentLoggers, HashSet.make(quiet))))
      const watching = yield* Effect.fork(watchdog(r, kernel, comparator, newSession))
      const outcome = yield* Deferred.await(r.coord.outcome)
      yield* Fiber.interrupt(watching)
      yield* Fiber.interrupt(driver)
      yield* kernel.sessions.close(newSession)
      yield* Fiber.interrupt(comparing)
      return { outcome, newSession }
    })
  )

/** Re-runs a session; see the module doc. Reads the original from `EventStore`. */
export const rerun = Effect.fn("Rerun.run")(function* (options: RerunOptions) {
  const original = yield* readOriginal(options)
  const restored = yield* restoreStartingWorkspace(
    original.plan,
    options.sessionId,
    options.workspace,
    options.agent.actions?.snapshot?.exclude,
    options.secrets
  )
  const confinement = yield* rerunSandbox({ settings: options.sandbox, unconfined: options.unconfinedCommands })
  const r = yield* makeReplay(options, original, confinement)
  const { outcome, newSession } = yield* runReplay(r, yield* recordedSystems(r.envelopes))
  return {
    original: options.sessionId,
    rerun: newSession,
    workspace: r.workspace,
    outcome,
    matched: outcome._tag === "match" ? r.cut : Math.min(r.position(), r.cut),
    compared: r.cut,
    served: r.requests.served - r.requests.live,
    live: r.requests.live,
    missing: restored.missing,
    source: restored.source,
    imported: r.imported,
    refused: r.refused,
    mcpServed: r.mcpServed.count,
    commands: { ...confinement.commands, calls: r.commandCalls.count }
  } satisfies RerunReport
})
