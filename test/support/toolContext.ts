/**
 * A `ToolContext` for testing a tool on its own: progress and file changes are collected in arrays,
 * reads are remembered in memory, as `Actions` does for a session.
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect } from "effect"
import type { TodoItem } from "../../src/domain/Events.js"
import { CallId, SessionId } from "../../src/domain/Ids.js"
import type { ProcessGroup } from "../../src/tools/processGroup.js"
import { makeSecrets, type SecretsService } from "../../src/tools/Secrets.js"
import type { FileChange, FileIntent, FileStamp, ToolContext } from "../../src/tools/Tools.js"
import { tempDir } from "./tmp.js"

export interface TestToolContext extends ToolContext {
  /** every progress text reported, in order */
  readonly progressed: Array<string>
  /** every file change recorded, in order */
  readonly changes: Array<FileChange>
  /** every intended change recorded, in order, with whether its temporary file existed then */
  readonly intents: Array<FileIntent & { readonly tempExisted: boolean }>
  /** the blobs stored (hash -> content as text) */
  readonly blobs: Map<string, string>
  /** every task list recorded, in order */
  readonly todos: Array<ReadonlyArray<TodoItem>>
  /** every record of a stopped call, in order */
  readonly stoppedRecords: Array<unknown>
  /** every process group recorded, in order */
  readonly processes: Array<ProcessGroup>
}

export const testContext = (
  cwd: string,
  options: { readonly progress?: Array<string>; readonly secrets?: SecretsService } = {}
): TestToolContext => {
  const progressed = options.progress ?? []
  const changes: Array<FileChange> = []
  const intents: Array<FileIntent & { readonly tempExisted: boolean }> = []
  const blobs = new Map<string, string>()
  const todos: Array<ReadonlyArray<TodoItem>> = []
  const stamps = new Map<string, FileStamp>()
  const stoppedRecords: Array<unknown> = []
  const processes: Array<ProcessGroup> = []
  return {
    sessionId: SessionId.make("s"),
    callId: CallId.make("c"),
    cwd,
    secrets: options.secrets ?? makeSecrets({ hide: [] }),
    timeoutMs: 60_000,
    outsideAllowed: false,
    progress: (output) => Effect.sync(() => void progressed.push(output)),
    recordFileChange: (change) => Effect.sync(() => void changes.push(change)),
    recordFileIntent: (intent) =>
      Effect.sync(() => void intents.push({ ...intent, tempExisted: fs.existsSync(intent.temp) })),
    updateTodos: (items) => Effect.sync(() => void todos.push(items)),
    storeBlob: (content) =>
      Effect.sync(() => {
        const hash = createHash("sha256").update(content).digest("hex")
        blobs.set(hash, typeof content === "string" ? content : Buffer.from(content).toString("utf8"))
        return hash
      }),
    reads: {
      record: (path, stamp) => Effect.sync(() => void stamps.set(path, stamp)),
      last: (path) => Effect.sync(() => stamps.get(path))
    },
    recordProcess: (group) => Effect.sync(() => void processes.push(group)),
    recordStopped: (metadata) => Effect.sync(() => void stoppedRecords.push(metadata)),
    progressed,
    changes,
    intents,
    blobs,
    todos,
    stoppedRecords,
    processes
  }
}

/** A temp dir holding `files` (relative path -> content), parent directories created. */
export const workspaceWith = (files: Record<string, string | Buffer> = {}, prefix = "logbook-tool-"): string => {
  const dir = tempDir(prefix)
  for (const [name, content] of Object.entries(files)) {
    const file = path.join(dir, name)
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, content)
  }
  return dir
}
