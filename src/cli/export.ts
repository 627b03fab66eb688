/**
 * `logbook export <session> [-o <file>] [--format jsonl|html]`: one session as a file — the JSONL
 * session file `logbook import` reads (`store/SessionFile.ts`), or one self-contained HTML page to
 * read it in a browser (`present/exportHtml.ts`, loaded only for `--format html`).
 *
 * `-o` writes a temporary file next to the target (mode 0600: a session holds code and command
 * output) and renames it into place once it is whole, so a failed export leaves no half file.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { isPlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as NodeSink from "@effect/platform-node/NodeSink"
import { Effect, Option, Stream } from "effect"
import type { EventDecodeError } from "../domain/Events.js"
import type { SessionId } from "../domain/Ids.js"
import type { EventStore, EventStoreError } from "../store/EventStore.js"
import type { ProjectionError } from "../store/Projection.js"
import { exportSession, type SessionFileError } from "../store/SessionFile.js"
import { dbOption, existingStore } from "./db.js"
import { CliError } from "./errors.js"
import { formatOption, sessionArg } from "./options.js"
import { resolveSession } from "./resolveSession.js"

const outputOption = Options.file("output").pipe(
  Options.withAlias("o"),
  Options.optional,
  Options.withDescription("Write to this file (replaced when it exists) instead of stdout.")
)

const exportFormat = formatOption(
  ["jsonl", "html"],
  "jsonl: the session file logbook import reads (every event as stored, and the blobs they reference); " +
    "html: one self-contained page to read the session in a browser."
)

/** The session's export as text chunks: the JSONL lines, or the HTML page. */
export const exportText = (
  sessionId: SessionId,
  format: "jsonl" | "html"
): Stream.Stream<string, SessionFileError | EventStoreError | EventDecodeError | ProjectionError, EventStore> =>
  format === "jsonl"
    ? exportSession(sessionId)
    : Stream.unwrap(
        Effect.map(
          Effect.promise(() => import("../present/exportHtml.js")),
          (html) => Stream.fromEffect(html.exportSessionHtml(sessionId))
        )
      )

/**
 * Writes `text` to `file` whole or not at all: into a temporary file beside it (0600), renamed
 * over it at the end; removed when anything fails.
 */
export const writeFileAtomically = <E, R>(file: string, text: Stream.Stream<string, E, R>) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const target = path.resolve(file)
    const dir = path.dirname(target)
    const info = yield* fs.stat(dir).pipe(Effect.option)
    if (Option.isNone(info) || info.value.type !== "Directory") {
      return yield* CliError.usage(`cannot write ${target}: the directory ${dir} does not exist`)
    }
    const temp = path.join(dir, `.${path.basename(target)}.${process.pid}.${Date.now()}.tmp`)
    const encoder = new TextEncoder()
    yield* text.pipe(
      Stream.map((chunk) => encoder.encode(chunk)),
      Stream.run(fs.sink(temp, { flag: "wx", mode: 0o600 })),
      Effect.zipRight(fs.rename(temp, target)),
      Effect.onError(() => Effect.ignore(fs.remove(temp))),
      Effect.catchIf(isPlatformError, (error) =>
        Effect.fail(CliError.failed(`cannot write ${target}: ${error.message}`))
      )
    )
  })

export const exportCommand = Command.make(
  "export",
  { session: sessionArg, db: dbOption, output: outputOption, format: exportFormat },
  Effect.fn("cli.export")(
    function* ({ format, output, session }) {
      const summary = yield* resolveSession(session)
      const text = exportText(summary.id, format)
      if (Option.isSome(output)) return yield* writeFileAtomically(output.value, text)
      const encoder = new TextEncoder()
      return yield* text.pipe(
        Stream.map((chunk) => encoder.encode(chunk)),
        Stream.run(NodeSink.stdout)
      )
    },
    (effect, { db }) => Effect.provide(effect, existingStore(db))
  )
).pipe(
  Command.withDescription(
    "Write one session to a file: a JSONL session file (every event exactly as stored, and the blobs " +
      "they reference) that logbook import reads into another database, or with --format html one " +
      "self-contained page to read it in a browser."
  )
)
