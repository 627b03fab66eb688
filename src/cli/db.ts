/**
 * The database every command reads: `--db <file>`, else `LOGBOOK_DB`, else
 * `$XDG_DATA_HOME/logbook/logbook.db` (`~/.local/share/logbook/logbook.db` when XDG_DATA_HOME is
 * unset, empty or relative, per the XDG spec).
 *
 * Commands that only read never create or change a database: they open it `readonly`, so a
 * missing file, or one that is not a logbook database, is reported (`DatabaseError`) and never
 * touched; read permission is enough (a database SQLite cannot read where it is, such as a WAL
 * file in a directory this user cannot write, is read from a private copy), and a writer elsewhere
 * never blocks them. Commands that write (`logbook run`) use `resolveDbPath` with the default
 * `create: true`; `sessions delete` writes to an existing database only (`writableStore`).
 */

import { homedir } from "node:os"
import * as Options from "@effect/cli/Options"
import * as Path from "@effect/platform/Path"
import { Config, Effect, Layer, Option } from "effect"
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
export const defaultDbPath = (
  path: Path.Path,
  env: { readonly xdgDataHome?: string | undefined; readonly home: string }
) => {
  const xdg = env.xdgDataHome
  const dataHome =
    xdg !== undefined && xdg !== "" && path.isAbsolute(xdg) ? xdg : path.join(env.home, ".local", "share")
  return path.join(dataHome, "logbook", "logbook.db")
}

/**
 * The URL scheme of a `--db` value that is a URL (`postgres://…`, `file:…`), or `undefined` for a
 * path (a one-letter scheme is a Windows drive). This build takes paths only.
 */
export const urlScheme = (value: string): string | undefined => /^([a-z][a-z0-9+.-]+):/i.exec(value)?.[1]

/**
 * The absolute database path for a parsed `--db` option. A value with a URL scheme is refused (exit 2)
 * before anything is created: this build keeps the log in a SQLite file only, and such a value
 * would otherwise become a directory named after the scheme.
 */
export const resolveDbPath = Effect.fn("cli.resolveDbPath")(function* (db: Option.Option<string>) {
  const path = yield* Path.Path
  const given = Option.filter(db, (file) => file !== "")
  if (Option.isSome(given)) {
    const scheme = urlScheme(given.value)
    if (scheme !== undefined) {
      return yield* CliError.usage(
        `--db / LOGBOOK_DB: ${JSON.stringify(given.value)} is a ${scheme}: URL, and this build of logbook keeps its ` +
          "log in a SQLite file only; give the database file's path"
      )
    }
    return path.resolve(given.value)
  }
  const xdgDataHome = yield* Config.string("XDG_DATA_HOME").pipe(Config.option, Config.map(Option.getOrUndefined))
  const home = yield* Config.string("HOME").pipe(Config.withDefault(homedir()))
  return defaultDbPath(path, { xdgDataHome, home })
})

/**
 * The store of an existing database, for commands that only read: the file is opened read-only,
 * never created, migrated or written, and a missing, foreign, damaged or newer file fails the
 * layer with `DatabaseError` (exit 2).
 */
export const existingStore = (db: Option.Option<string>) =>
  Layer.unwrapEffect(
    Effect.map(resolveDbPath(db), (file) => EventStore.layerSqlite({ filename: file, readonly: true }))
  )

/**
 * The store of an existing database, for a command that changes it but must not create one
 * (`sessions delete`): a missing file is `DatabaseError` `missing`, one this user may not write
 * is `read-only` (exit 2); an older schema is upgraded.
 */
export const writableStore = (db: Option.Option<string>) =>
  Layer.unwrapEffect(Effect.map(resolveDbPath(db), (file) => EventStore.layerSqlite({ filename: file, create: false })))
