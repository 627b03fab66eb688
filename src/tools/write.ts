/**
 * The `write` tool: creates a file, or replaces one the agent has read.
 *
 * Creating a new file needs nothing; replacing an existing one needs a read of it in this session
 * with no change on disk since (`requireFreshRead`): overwriting a file blind loses whatever the
 * agent did not see. Parent directories are created. The file is written atomically (a temporary
 * file in the same directory, renamed over it) and keeps its permission bits; the change is recorded
 * with its before/after contents (`recordFileChange`), and the new content becomes what the agent
 * last read, so an edit can follow.
 */
import * as nodePath from "node:path"
import { Effect, Schema } from "effect"
import { formatBytes } from "./boundedOutput.js"
import { makeDirectoryChecked } from "./confine.js"
import { confinedPath, openFailure, readExisting } from "./confinedFiles.js"
import { crashPoint } from "./crashPoint.js"
import {
  countLines,
  fileStamp,
  requireFreshRead,
  requireWritable,
  tempPathFor,
  writeFileAtomic
} from "./fileChanges.js"
import { refuseMaskedSecret } from "./Secrets.js"
import { defineTool, type ToolContext, ToolFailure, type ToolOutput } from "./Tools.js"
import { nonEmptyString } from "./toolInput.js"

export const WriteInput = Schema.Struct({
  path: nonEmptyString(
    "The file to create or replace, relative to the working directory or absolute. Missing parent directories are created."
  ),
  content: Schema.String.annotations({
    description: "The whole new content of the file, exactly as it should be on disk (no line numbers)."
  })
})
export type WriteInput = typeof WriteInput.Type

/** metadata of a write: the absolute path, whether the file was new, and its new size */
export interface WriteMetadata {
  readonly path: string
  readonly op: "create" | "update"
  readonly bytes: number
  readonly lines: number
}

/** The content as the change record keeps it: text when it is valid UTF-8, else the bytes. */
export const asRecorded = (content: Buffer): string | Uint8Array => {
  const text = content.toString("utf8")
  return Buffer.from(text, "utf8").equals(content) ? text : new Uint8Array(content)
}

export const write = defineTool<WriteInput>({
  name: "write",
  description: [
    "Creates a file with the given content, or replaces an existing file's whole content.",
    "- Use it for new files and for rewriting most of a file. To change part of an existing file, use edit instead: it is shorter and cannot lose the parts you do not repeat.",
    "- To replace an existing file you must have read it with the read tool in this session, and it must not have changed on disk since; otherwise the call is refused and you read it first. A new file needs no read.",
    "- `path` is relative to the working directory, or absolute; a path outside it (symlinks included) needs the user's permission and may be denied. Missing parent directories are created.",
    "- `content` is written exactly as given (UTF-8): no line numbers, keep the file's indentation and line endings.",
    "- The file is replaced atomically and keeps its permissions."
  ].join("\n"),
  input: WriteInput,
  permission: (input) => ({ path: input.path ?? "." }),
  execute: Effect.fn("tools.write")(function* (input: WriteInput, context: ToolContext) {
    const absolute = yield* confinedPath(context.cwd, input.path, context.outsideAllowed)
    const shown = input.path
    const where = { cwd: context.cwd, input: input.path, absolute, shown }
    // opened, then checked (confine.ts): what is read before the write is the file that was checked
    const current = yield* readExisting(where, context.outsideAllowed)
    const existing = current?.stat
    let before: Buffer | undefined
    if (existing !== undefined) {
      if (existing.isDirectory()) {
        return yield* new ToolFailure({
          message: `${shown} is a directory; write needs the path of a file (e.g. ${nodePath.posix.join(shown, "name.ext")}).`
        })
      }
      if (current?.content === undefined) {
        return yield* new ToolFailure({
          message: `Cannot write ${shown}: it is not a regular file (a device, socket or pipe).`
        })
      }
      before = current.content
      yield* requireFreshRead(context.reads, absolute, shown, { stat: existing, content: before }, "overwrite")
      // renaming over a read-only file would succeed: respect its permissions instead
      yield* requireWritable(absolute, shown)
    } else {
      // each missing directory made through its parent's checked descriptor (confine.ts)
      yield* makeDirectoryChecked(nodePath.dirname(absolute)).pipe(
        Effect.catchAll((error) => Effect.flatMap(openFailure(error, where, context.outsideAllowed), Effect.fail))
      )
    }
    yield* refuseMaskedSecret(input.content, before?.toString("utf8"), "content")
    const op = before === undefined ? "create" : "update"
    const bytes = Buffer.byteLength(input.content)
    const lines = countLines(input.content)
    const recordedBefore = before === undefined ? undefined : asRecorded(before)
    // the intent is committed before anything is written, and once the file is replaced the change is
    // recorded and remembered: an interrupt cannot split them, a crash leaves the intent to the sweep
    yield* Effect.uninterruptible(
      Effect.gen(function* () {
        const temp = yield* tempPathFor(absolute)
        yield* context.recordFileIntent({ path: absolute, op, before: recordedBefore, after: input.content, temp })
        yield* crashPoint("file.intent")
        const stat = yield* writeFileAtomic(absolute, input.content, shown, existing && existing.mode & 0o7777, temp)
        yield* crashPoint("file.renamed")
        yield* context.recordFileChange({ path: absolute, op, before: recordedBefore, after: input.content })
        yield* context.reads.record(absolute, fileStamp(stat, input.content))
      })
    )
    return {
      output: `${op === "create" ? "Created" : "Wrote"} ${shown} (${lines} line${lines === 1 ? "" : "s"}, ${formatBytes(bytes)})`,
      metadata: { path: absolute, op, bytes, lines } satisfies WriteMetadata
    } satisfies ToolOutput
  })
})
