/**
 * Records the files a call changed without saying so (a command: `ToolDefinition.snapshotWorkspace`),
 * from workspace snapshots taken around it (docs/workspace.md).
 *
 * Per session and workspace root, the observer keeps the manifest of the last snapshot in memory
 * (`WorkspaceSnapshot.scanWorkspace`): the stat cache that makes a snapshot of an unchanged
 * workspace cheap, and the baseline whose blobs hold the "before" of every file a command changes.
 * - `begin` (before the call runs): when no other observed call of the session is running, the
 *   manifest is brought up to date (what changed since — the user's editor, a file tool — is not
 *   the call's doing, and is not recorded). The first snapshot of the session in this process also
 *   stores the manifest document as a blob and commits `workspace.snapshot {phase: "baseline"}`.
 * - `end` (after the call ended, however it ended): a snapshot is taken and compared with the
 *   manifest; each difference is committed as `file.changed {observed: true, callId}`, then
 *   `workspace.snapshot {phase: "after", changed}`, and the new manifest replaces the old one.
 *
 * Snapshots of one session run one at a time (a semaphore); calls may overlap, each change is then
 * recorded once, by the first `end` that sees it. A file tool's own change is noted (`noteChange`:
 * path → the blob it wrote) from the snapshot before a call on, and an `end` leaves out a
 * difference whose new content is the noted one: a command running beside `write` or `edit` does
 * not record their change a second time. The change is noted from the tool's intent on
 * (`noteIntent`, before it writes), and an intent stays noted through the snapshots before calls
 * until the tool recorded the change or its call ended (`dropIntents`).
 */
import * as fs from "node:fs"
import * as fsp from "node:fs/promises"
import * as nodePath from "node:path"
import { Effect, Either } from "effect"
import { type ContentOmitted, make, type NewEvent } from "../domain/Events.js"
import type { CallId, SessionId } from "../domain/Ids.js"
import type { EventStore } from "../store/EventStore.js"
import type { SessionJournal } from "../store/SessionJournal.js"
import type { RestoreError } from "../store/Snapshots.js"
import type { SecretsService } from "../tools/Secrets.js"
import {
  defaultSnapshotLimits,
  diffManifests,
  type Manifest,
  manifestDocument,
  type ObservedChange,
  type ScanResult,
  type SnapshotEntry,
  type SnapshotLimits,
  scanWorkspace
} from "../tools/WorkspaceSnapshot.js"

export interface WorkspaceSnapshotOptions {
  /** snapshot around calls of tools with `snapshotWorkspace` (default true) */
  readonly enabled?: boolean | undefined
  /** the bounds of one snapshot (default `defaultSnapshotLimits`) */
  readonly limits?: Partial<SnapshotLimits> | undefined
  /** absolute paths never snapshotted: the log's own database files (with `-wal`, `-shm`, `-journal`) */
  readonly exclude?: ReadonlyArray<string> | undefined
}

export interface ObservedCall {
  readonly journal: SessionJournal
  readonly cwd: string
  readonly callId: CallId
}

interface WorkspaceState {
  manifest: Manifest | undefined
  /** observed calls running (between `begin` and `end`) */
  running: number
  /** path -> the blob a file tool wrote there since the last snapshot before a call (`noteChange`): not the call's */
  noted: Map<string, string | undefined>
  /**
   * path -> the blob a file tool is about to write (`noteIntent`), until it recorded the change or
   * its call ended: kept through the reset of `noted` by the snapshot before a call, which may be
   * taken before the write (the write is then not in it, and must still not count as the call's)
   */
  readonly intents: Map<string, string | undefined>
  readonly lock: Effect.Semaphore
}

export interface WorkspaceObserver {
  /**
   * The snapshot before a call. Hands `register` the `end` to run once the call stopped (idempotent,
   * uninterruptible), together with counting the call as running: an interrupt during `begin`
   * leaves neither. Both fail with the store's error when the log cannot take a content or an
   * event (the call then fails with it, as a tool's own record does); a workspace that cannot be
   * read is no failure (the snapshot says so).
   */
  readonly begin: (
    call: ObservedCall,
    register: (end: Effect.Effect<void, RestoreError>) => void
  ) => Effect.Effect<void, RestoreError>
  /** A change a file tool recorded itself (real absolute path): the manifest follows it. */
  readonly noteChange: (
    sessionId: SessionId,
    cwd: string,
    path: string,
    after: { readonly hash: string } | undefined
  ) => Effect.Effect<void>
  /**
   * A change a file tool is about to make (its `file.intent`, before it writes): noted like a change,
   * and kept through the snapshots before calls until `noteChange` or `dropIntents` for the path.
   */
  readonly noteIntent: (
    sessionId: SessionId,
    cwd: string,
    path: string,
    after: { readonly hash: string }
  ) => Effect.Effect<void>
  /** The call that noted these intents ended (whether it wrote them or not). */
  readonly dropIntents: (sessionId: SessionId, cwd: string, paths: ReadonlyArray<string>) => Effect.Effect<void>
}

const relativeSlash = (root: string, path: string): string | undefined => {
  const relative = nodePath.relative(root, path)
  if (relative === "" || relative.startsWith("..") || nodePath.isAbsolute(relative)) return undefined
  return relative.split(nodePath.sep).join("/")
}

const storedHash = (entry: SnapshotEntry | undefined): string | undefined =>
  entry?.stored === true ? entry.hash : undefined

const omittedOf = (entry: SnapshotEntry): ContentOmitted | undefined =>
  entry.stored ? undefined : (entry.omitted ?? "unreadable")

/** `file.changed {observed: true}`; a side whose content is not stored says why (`beforeOmitted` …). */
const changeEvent = (change: ObservedChange, callId: CallId): NewEvent => {
  const { before, after } = change
  const beforeOmitted = before === undefined ? undefined : omittedOf(before)
  const afterOmitted = after === undefined ? undefined : omittedOf(after)
  return make("file.changed", {
    path: change.path,
    op: change.op,
    ...(before?.hash !== undefined ? { beforeHash: before.hash } : {}),
    ...(after?.hash !== undefined ? { afterHash: after.hash } : {}),
    callId,
    observed: true,
    ...(before !== undefined ? { beforeSize: before.size } : {}),
    ...(after !== undefined ? { afterSize: after.size } : {}),
    ...(beforeOmitted !== undefined ? { beforeOmitted } : {}),
    ...(afterOmitted !== undefined ? { afterOmitted } : {})
  })
}

/** Sessions whose manifests are kept in memory at most. */
const MAX_WORKSPACES = 16

/** What the observer's steps share: the store, the snapshot settings and the workspaces it knows. */
interface ObserverEnv {
  readonly store: EventStore["Type"]
  readonly secrets: SecretsService
  readonly limits: SnapshotLimits
  /** the log's own database files, as given (their real paths are added when first needed) */
  readonly excluded: ReadonlyArray<string>
  /** key: session id + the workspace's real path */
  readonly states: Map<string, WorkspaceState>
  readonly realRoots: Map<string, string>
  /** `excluded` with the real paths, once resolved */
  excludeSet: ReadonlySet<string> | undefined
}

/** A workspace's real path, remembered per cwd: a thread-pool round trip per call would wait for the event loop (confine.ts). */
const realRoot = (env: ObserverEnv, cwd: string): Effect.Effect<string> =>
  Effect.sync(() => {
    const known = env.realRoots.get(cwd)
    if (known !== undefined) return known
    let real: string
    try {
      real = fs.realpathSync(cwd)
    } catch {
      real = nodePath.resolve(cwd)
    }
    env.realRoots.set(cwd, real)
    return real
  })

/** The state of a session's workspace, made when there is none (at most `MAX_WORKSPACES` kept). */
const stateOf = (env: ObserverEnv, sessionId: SessionId, root: string): WorkspaceState => {
  const { states } = env
  const key = `${sessionId}\0${root}`
  let state = states.get(key)
  if (state === undefined) {
    // bounded: a process that serves many sessions keeps the manifests of the latest ones (a
    // session whose manifest was dropped takes a new baseline at its next command)
    for (const [other, kept] of states) {
      if (states.size < MAX_WORKSPACES) break
      if (kept.running === 0) states.delete(other)
    }
    state = {
      manifest: undefined,
      running: 0,
      noted: new Map(),
      intents: new Map(),
      lock: Effect.unsafeMakeSemaphore(1)
    }
    states.set(key, state)
  }
  return state
}

const storeContent = (env: ObserverEnv, content: Uint8Array) =>
  // masked like everything else the log keeps (Secrets)
  env.store.putBlob(env.secrets.redactBytes(content))

/** The paths never snapshotted, with their real paths (resolved once). */
const excludeSet = (env: ObserverEnv) =>
  Effect.suspend(() =>
    env.excludeSet !== undefined
      ? Effect.succeed(env.excludeSet)
      : Effect.promise(async () => {
          const real = await Promise.all(env.excluded.map((file) => fsp.realpath(file).catch(() => file)))
          env.excludeSet = new Set([...env.excluded, ...real])
          return env.excludeSet
        })
  )

/** A snapshot of the workspace at `root`, or why it could not be read; fails only with the store's error. */
const scan = (env: ObserverEnv, root: string, previous: Manifest | undefined) =>
  Effect.flatMap(excludeSet(env), (exclude) =>
    // a workspace that cannot be read is recorded as such; a store that fails fails the call
    scanWorkspace({ root, previous, limits: env.limits, exclude, store: (content) => storeContent(env, content) }).pipe(
      Effect.map((result) => Either.right(result)),
      Effect.catchTag("SnapshotError", (error) => Effect.succeed(Either.left(error)))
    )
  )

const limitFields = (result: ScanResult) => (result.limits.length > 0 ? { limits: result.limits } : {})

const append = (call: ObservedCall, events: ReadonlyArray<NewEvent>) => Effect.asVoid(call.journal.append(events))

/**
 * The manifest brought up to date before a call, when no other observed call runs: the first of
 * the session stores the manifest document and commits `workspace.snapshot {phase: "baseline"}`.
 */
const refreshManifest = (env: ObserverEnv, call: ObservedCall, root: string, state: WorkspaceState) =>
  Effect.gen(function* () {
    // what file tools wrote before this snapshot is in it; what they write from now on is noted,
    // and so is what they are about to write (the write may come after the scan)
    state.noted = new Map(state.intents)
    const first = state.manifest === undefined
    const scanned = yield* scan(env, root, state.manifest)
    // a failed scan leaves nothing to compare with: `end` says the call's changes are unknown
    if (scanned._tag === "Left") return
    state.manifest = scanned.right.manifest
    if (!first) return
    const manifest = yield* storeContent(
      env,
      new TextEncoder().encode(JSON.stringify(manifestDocument(scanned.right.manifest)))
    )
    yield* append(call, [
      make("workspace.snapshot", {
        callId: call.callId,
        phase: "baseline",
        manifest,
        files: scanned.right.manifest.size,
        ...limitFields(scanned.right)
      })
    ])
  })

const begin = (
  env: ObserverEnv,
  call: ObservedCall,
  register: (end: Effect.Effect<void, RestoreError>) => void
): Effect.Effect<void, RestoreError> =>
  Effect.gen(function* () {
    const root = yield* realRoot(env, call.cwd)
    const state = stateOf(env, call.journal.sessionId, root)
    let ended = false
    const end = Effect.uninterruptible(
      Effect.suspend(() => {
        if (ended) return Effect.void
        ended = true
        return state.lock.withPermits(1)(endScan(env, call, root, state))
      })
    )
    yield* state.lock.withPermits(1)(
      Effect.gen(function* () {
        if (state.running === 0 || state.manifest === undefined) yield* refreshManifest(env, call, root, state)
        // counted and handed over at once: an interrupt cannot leave one without the other
        yield* Effect.sync(() => {
          state.running++
          register(end)
        })
      })
    )
  })

/**
 * The snapshot after a call, compared with the manifest: each difference but the noted ones is
 * `file.changed {observed: true}`, then `workspace.snapshot {phase: "after"}`.
 */
const endScan = (env: ObserverEnv, call: ObservedCall, root: string, state: WorkspaceState) =>
  Effect.gen(function* () {
    state.running--
    const before = state.manifest
    const scanned = yield* scan(env, root, before)
    if (scanned._tag === "Left" || before === undefined) {
      if (scanned._tag === "Right") state.manifest = scanned.right.manifest
      return yield* append(call, [
        make("workspace.snapshot", {
          callId: call.callId,
          phase: "after",
          files: scanned._tag === "Right" ? scanned.right.manifest.size : 0,
          error:
            scanned._tag === "Left"
              ? scanned.left.message
              : "there was no snapshot from before the call (the workspace could not be read): its changes are unknown"
        })
      ])
    }
    const after = scanned.right.manifest
    state.manifest = after
    // what a file tool wrote meanwhile (also during this scan) is recorded by the tool itself
    const noted = state.noted
    const changes = diffManifests(before, after).filter(
      (change) => !(noted.has(change.path) && noted.get(change.path) === storedHash(change.after))
    )
    yield* append(call, [
      ...changes.map((change) => changeEvent(change, call.callId)),
      make("workspace.snapshot", {
        callId: call.callId,
        phase: "after",
        files: after.size,
        changed: changes.length,
        ...limitFields(scanned.right)
      })
    ])
  })

/**
 * `f` on the session's state and the path relative to its root, when the path is in the
 * workspace and the state is known — or made (`create`: an intent must outlive the first
 * snapshot of the session, which may come after it)
 */
const withPath = (
  env: ObserverEnv,
  sessionId: SessionId,
  cwd: string,
  path: string,
  f: (state: WorkspaceState, relative: string) => void,
  create = false
): Effect.Effect<void> =>
  Effect.map(realRoot(env, cwd), (root) => {
    const relative = relativeSlash(root, path)
    if (relative === undefined) return
    const state = create ? stateOf(env, sessionId, root) : env.states.get(`${sessionId}\0${root}`)
    if (state !== undefined) f(state, relative)
  })

export const makeWorkspaceObserver = (
  store: EventStore["Type"],
  secrets: SecretsService,
  options: WorkspaceSnapshotOptions = {}
): WorkspaceObserver => {
  const env: ObserverEnv = {
    store,
    secrets,
    limits: { ...defaultSnapshotLimits, ...options.limits },
    excluded: (options.exclude ?? []).flatMap((file) => [
      nodePath.resolve(file),
      ...["-wal", "-shm", "-journal"].map((suffix) => nodePath.resolve(`${file}${suffix}`))
    ]),
    states: new Map(),
    realRoots: new Map(),
    excludeSet: undefined
  }
  return {
    begin: (call, register) => begin(env, call, register),
    noteChange: (sessionId, cwd, path, after) =>
      withPath(env, sessionId, cwd, path, (state, relative) => {
        state.noted.set(relative, after?.hash)
        state.intents.delete(relative)
      }),
    noteIntent: (sessionId, cwd, path, after) =>
      withPath(
        env,
        sessionId,
        cwd,
        path,
        (state, relative) => {
          state.noted.set(relative, after.hash)
          state.intents.set(relative, after.hash)
        },
        true
      ),
    dropIntents: (sessionId, cwd, paths) =>
      Effect.forEach(
        paths,
        (path) => withPath(env, sessionId, cwd, path, (state, relative) => state.intents.delete(relative)),
        { discard: true }
      )
  }
}
