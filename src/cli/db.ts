/**
 * The database every command reads: `--db <file>`, else `LOGBOOK_DB`, else
 * `$XDG_DATA_HOME/logbook/logbook.db` (`~/.local/share/logbook/logbook.db` when XDG_DATA_HOME is
 * unset, empty or relative, per the XDG spec).
 *
 * Commands that only read never create a database: the file must exist before the store layer
 * opens it, and a file that is not a logbook database is reported, never touched.
 */
import { Options } from "@effect/cli"
import { FileSystem, Path } from "@effect/platform"
import { Config, Effect, Layer, Option } from "effect"
import { homedir } from "node:os"
import { EventStore } from "../store/EventStore.js"
import { CliError } from "./errors.js"

/** `--db <file>`, falling back to `LOGBOOK_DB`; put on every command that opens the database. */
export const dbOption: Options.Options<Option.Option<string>> = Options.text("db").pipe(
  Options.withFallbackConfig(Config.string("LOGBOOK_DB")),
  Options.optional,
  Options.withPseudoName("file"),
  Options.withDescription(
    "The logbook database file. Defaults to $LOGBOOK_DB, else $XDG_DATA_HOME/logbook/logbook.db " +
      "(~/.local/share/logbook/logbook.db)."
  )
)

/** The default database path from XDG_DATA_HOME and the home directory. */
export const defaultDbPath = (path: Path.Path, env: { readonly xdgDataHome?: string | undefined; readonly home: string }) => {
  const xdg = env.xdgDataHome
  const dataHome = xdg !== undefined && xdg !== "" && path.isAbsolute(xdg) ? xdg : path.join(env.home, ".local", "share")
  return path.join(dataHome, "logbook", "logbook.db")
}

/** The absolute database path for a parsed `--db` option. */
export const resolveDbPath = Effect.fn("cli.resolveDbPath")(function* (db: Option.Option<string>) {
  const path = yield* Path.Path
  const given = Option.filter(db, (file) => file !== "")
  if (Option.isSome(given)) return path.resolve(given.value)
  const xdgDataHome = yield* Config.string("XDG_DATA_HOME").pipe(Config.option, Config.map(Option.getOrUndefined))
  const home = yield* Config.string("HOME").pipe(Config.withDefault(homedir()))
  return defaultDbPath(path, { xdgDataHome, home })
})

/** Fails with a `CliError` (exit 2) unless `file` exists and is a regular file. */
export const requireExisting = Effect.fn("cli.requireExisting")(function* (file: string) {
  const fs = yield* FileSystem.FileSystem
  const info = yield* fs.stat(file).pipe(
    Effect.mapError((error) =>
      error._tag === "SystemError" && error.reason === "NotFound"
        ? CliError.usage(`no logbook database at ${file}; run \`logbook run\` first or pass --db <file>`)
        : CliError.usage(`cannot open the logbook database ${file}: ${error.message}`)
    )
  )
  if (info.type === "Directory") {
    return yield* CliError.usage(`${file} is a directory, not a logbook database; pass --db <file>`)
  }
})

/**
 * The store of an existing database, for commands that read: checks the file exists, then opens
 * it with `EventStore.layerSqlite` (which reports foreign, damaged or newer files as `DatabaseError`).
 */
export const existingStore = (db: Option.Option<string>) =>
  Layer.unwrapEffect(
    Effect.gen(function* () {
      const file = yield* resolveDbPath(db)
      yield* requireExisting(file)
      return EventStore.layerSqlite({ filename: file })
    })
  )
