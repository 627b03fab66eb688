/**
 * `logbook import <file> [--db <file>]`: reads a session file (`logbook export`) into a database,
 * checking each line as it writes it (`store/SessionFile.ts`), in one transaction and in bounded
 * memory: a damaged file, or a session the database already holds, is refused with a sentence
 * naming what and where (line), and the transaction rolled back. `-` reads the file from stdin.
 *
 * The database is created when missing, as `logbook run` creates it, and removed again when the
 * import fails, so a damaged file creates nothing.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as NodeStream from "@effect/platform-node/NodeStream"
import { Console, Effect, Either, Option, type Stream } from "effect"
import { formatCount } from "../present/text.js"
import { EventStore, type EventStoreError } from "../store/EventStore.js"
import { sessionFileItems } from "../store/SessionFile.js"
import { dbOption, resolveDbPath } from "./db.js"
import { CliError } from "./errors.js"

const fileArg = Args.text({ name: "file" }).pipe(
  Args.withDescription("The session file to import (written by logbook export); - reads it from stdin.")
)

export const importCommand = Command.make(
  "import",
  { file: fileArg, db: dbOption },
  Effect.fn("cli.import")(function* ({ db, file }) {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const dbFile = yield* resolveDbPath(db)
    const name = file === "-" ? "stdin" : path.resolve(file)
    let bytes: Stream.Stream<Uint8Array, PlatformError>
    if (file === "-") bytes = NodeStream.stdin
    else {
      const info = yield* fs.stat(name).pipe(Effect.option)
      if (Option.isNone(info)) return yield* CliError.usage(`cannot import ${name}: no such file`)
      if (info.value.type !== "File") return yield* CliError.usage(`cannot import ${name}: it is not a file`)
      bytes = fs.stream(name)
    }
    const nothing = "nothing was imported"
    // a database this import creates is removed again when the import fails: a damaged file creates nothing
    const existed = yield* fs.exists(dbFile).pipe(Effect.orElseSucceed(() => true))
    const imported = yield* Effect.flatMap(EventStore, (store) => store.importStream(sessionFileItems(bytes))).pipe(
      Effect.catchTags({
        SessionFileError: (error) => Effect.fail(CliError.usage(`cannot import ${name}: ${error.message}; ${nothing}`)),
        BadArgument: (error) => Effect.fail(CliError.failed(`cannot read ${name}: ${error.message}; ${nothing}`)),
        SystemError: (error) => Effect.fail(CliError.failed(`cannot read ${name}: ${error.message}; ${nothing}`)),
        EventStoreError: (error): Effect.Effect<never, CliError | EventStoreError> =>
          error.reason === "refused"
            ? Effect.fail(CliError.usage(`cannot import ${name} into ${dbFile}: ${error.message}; ${nothing}`))
            : Effect.fail(error)
      }),
      Effect.provide(EventStore.layerSqlite({ filename: dbFile })),
      Effect.either
    )
    if (Either.isLeft(imported)) {
      if (!existed) {
        for (const file of [dbFile, `${dbFile}-wal`, `${dbFile}-shm`, `${dbFile}-journal`]) {
          yield* fs.remove(file, { force: true }).pipe(Effect.ignore)
        }
      }
      return yield* Effect.fail(imported.left)
    }
    const summary = imported.right
    yield* Console.log(
      `Imported session ${summary.id}${summary.title === null ? "" : ` "${summary.title}"`} into ${dbFile}: ` +
        `${formatCount(summary.lastSeq)} events. logbook sessions show ${summary.id} --db ${dbFile} reads it.`
    )
  })
).pipe(
  Command.withDescription(
    "Read a session file (written by logbook export) into a database, after checking all of it; " +
      "a damaged file, or a session the database already holds, is refused and nothing is written."
  )
)
