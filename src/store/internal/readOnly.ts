/**
 * Reading a database this process may not write (`SqliteOptions.readonly`): a colleague's file, a
 * backup on a read-only mount, a file of an older schema.
 *
 * SQLite reads a WAL database read-only where it is when its `-wal` and `-shm` files exist and are
 * readable (a writer has them open, or left them), or when it may create them (the directory is
 * writable). Then the reader shares the writers' index (`-shm`) and sees their commits as they
 * happen. When neither holds — the last writer closed cleanly, which removes both files, and the
 * directory is not writable by this user (0755 root, 0555, a read-only mount) — SQLite refuses
 * with `SQLITE_READONLY_DIRECTORY` / `SQLITE_CANTOPEN`, although every byte is readable. Its way
 * out, the `immutable` URI parameter, cannot be passed through better-sqlite3 (built without URI
 * filenames). So logbook reads a private copy instead: the database and its `-wal` (if any) copied
 * into a new 0700 directory under the OS temp directory, removed when the store closes. A copy
 * is also how a database of an older schema is read: the copy is upgraded, the file never is.
 *
 * A copy is a snapshot. To keep `follow` live, the SqlClient handed to the store delegates to the
 * current *generation* (a client over the file or over a copy); while it reads a copy it looks at
 * the file's size, time and inode (and those of its `-wal` and `-shm`) at most once a second, and
 * when they changed — another process wrote the file — it plans again: where it is, if a writer's
 * `-shm` now makes that possible, else a fresh copy. Queries hold a share of a lock that the switch
 * takes whole, so a generation is closed only when no query uses it.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Statement from "@effect/sql/Statement"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { Clock, Effect, Exit, Layer, Ref, Scope } from "effect"
import { DatabaseError } from "../Errors.js"

/** How a database is read: where it is, or from a private copy (`olderSchema`: to be upgraded). */
export type ReadPlan =
  | { readonly _tag: "in-place" }
  | { readonly _tag: "copy"; readonly olderSchema?: number | undefined; readonly why: string }

export interface ReadOnlyOptions {
  /** the plan for the file as it is now (the store's preflight) */
  readonly plan: Effect.Effect<ReadPlan, DatabaseError>
  /** the plan for a private copy of the file: in place, or `olderSchema` when the copy must be upgraded */
  readonly planCopy: (copy: string) => Effect.Effect<ReadPlan, DatabaseError>
  /** connection settings (busy timeout) */
  readonly setup: (sql: SqlClient.SqlClient) => Effect.Effect<void, DatabaseError>
  /** upgrades a private copy to the current schema */
  readonly upgrade: (sql: SqlClient.SqlClient) => Effect.Effect<void, DatabaseError>
  /** how often a copy looks for changes of the file (ms); default 1000 */
  readonly refreshMs?: number | undefined
}

/** Shares of the lock a query holds; a switch of generation takes all of them. */
const READERS = 1024

const statOf = (file: string, withTimes: boolean): string => {
  try {
    const s = fs.statSync(file)
    return withTimes ? `${s.ino}:${s.size}:${s.mtimeMs}` : `${s.ino}`
  } catch {
    return "-"
  }
}

/**
 * What changes when a process writes the database: the file's and its `-wal`'s inode, size and
 * time, and whether a `-shm` exists (a writer's index, which may let the file be read in place).
 */
export const signature = (file: string): string =>
  [statOf(file, true), statOf(`${file}-wal`, true), statOf(`${file}-shm`, false)].join("|")

const copyError = (file: string, message: string) =>
  new DatabaseError({ file, reason: "unreadable", message: `cannot read ${file}: ${message}` })

/**
 * Copies the database and its `-wal` (when there is one; the `-shm` is rebuilt from it) into a new
 * private directory, removed when the scope closes. The copy is taken again when the file changed
 * while it was copied (a writer checkpointed), so it is always a state the file was in: the one of
 * `signature`.
 */
export const copyDatabase = (
  file: string
): Effect.Effect<{ readonly path: string; readonly signature: string }, DatabaseError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.try({
      try: () => fs.mkdtempSync(path.join(os.tmpdir(), "logbook-copy-")),
      catch: (e) => copyError(file, `no private copy could be made to read it from (${(e as Error).message})`)
    }),
    (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
  ).pipe(
    Effect.flatMap((dir) =>
      Effect.try({
        try: () => {
          const copy = path.join(dir, "copy.db")
          for (let attempt = 0; attempt < 5; attempt++) {
            for (const name of fs.readdirSync(dir)) fs.rmSync(path.join(dir, name), { force: true })
            const before = signature(file)
            fs.copyFileSync(file, copy)
            const wal = `${file}-wal`
            if (fs.existsSync(wal)) fs.copyFileSync(wal, `${copy}-wal`)
            if (signature(file) !== before) continue
            // the copies keep the modes of the originals (0444, say): they are ours to write
            for (const name of fs.readdirSync(dir)) fs.chmodSync(path.join(dir, name), 0o600)
            return { path: copy, signature: before }
          }
          throw new Error("it kept changing while logbook copied it to read it; try again")
        },
        catch: (e) =>
          (e as NodeJS.ErrnoException).code === "ENOSPC"
            ? copyError(file, `the temporary directory ${os.tmpdir()} is full, so no private copy could be made`)
            : copyError(file, (e as Error).message)
      })
    )
  )

interface Generation {
  readonly sql: SqlClient.SqlClient
  readonly scope: Scope.CloseableScope
  /** reads a private copy (a snapshot) rather than the file itself */
  readonly copied: boolean
  /** `signature(file)` when it was opened */
  readonly signature: string
}

/** The SqlClient of a read-only store over `file`: see the module doc. */
export const layerReadOnly = (
  file: string,
  options: ReadOnlyOptions
): Layer.Layer<SqlClient.SqlClient, DatabaseError> =>
  Layer.scoped(
    SqlClient.SqlClient,
    Effect.gen(function* () {
      const refreshMs = options.refreshMs ?? 1000
      const open = (plan: ReadPlan, first: boolean): Effect.Effect<Generation, DatabaseError, Reactivity.Reactivity> =>
        Effect.flatMap(Scope.make(), (scope) =>
          Effect.gen(function* () {
            if (plan._tag === "in-place") {
              const sql = yield* SqliteClient.make({ filename: file, readonly: true, disableWAL: true })
              yield* options.setup(sql)
              return { sql, scope, copied: false, signature: signature(file) }
            }
            const copy = yield* copyDatabase(file)
            const copyPlan = yield* options.planCopy(copy.path)
            const sql = yield* SqliteClient.make({ filename: copy.path })
            yield* options.setup(sql)
            if (copyPlan._tag === "copy" && copyPlan.olderSchema !== undefined) {
              yield* options.upgrade(sql)
              if (first) {
                yield* Effect.logWarning(
                  `${file} was written by an older logbook (${copyPlan.why}): read from an upgraded private copy; ` +
                    "the next logbook command that writes to it (run, compact, sessions delete) upgrades it in place"
                )
              }
            }
            return { sql, scope, copied: true, signature: copy.signature }
          }).pipe(
            Effect.catchAllDefect((defect) =>
              Effect.fail(copyError(file, String((defect as Error)?.message ?? defect)))
            ),
            Scope.extend(scope),
            Effect.onError(() => Scope.close(scope, Exit.void))
          )
        )

      const first = yield* Effect.flatMap(options.plan, (plan) => open(plan, true))
      const current = yield* Ref.make(first)
      yield* Effect.addFinalizer(() => Effect.flatMap(Ref.get(current), (g) => Scope.close(g.scope, Exit.void)))
      const lock = yield* Effect.makeSemaphore(READERS)
      const lastCheck = yield* Ref.make(yield* Clock.currentTimeMillis)
      const warned = yield* Ref.make(false)
      const reactivity = yield* Reactivity.Reactivity

      /** While reading a copy: when the file changed, read it anew (in place if it can be now). */
      const refresh = Effect.gen(function* () {
        const generation = yield* Ref.get(current)
        if (!generation.copied) return
        const now = yield* Clock.currentTimeMillis
        if (now - (yield* Ref.get(lastCheck)) < refreshMs) return
        yield* Ref.set(lastCheck, now)
        if (signature(file) === generation.signature) return
        yield* lock.withPermits(READERS)(
          Effect.gen(function* () {
            if ((yield* Ref.get(current)) !== generation) return
            const next = yield* Effect.flatMap(options.plan, (plan) => open(plan, false))
            yield* Ref.set(current, next)
            yield* Scope.close(generation.scope, Exit.void)
          })
        )
      }).pipe(
        Effect.provideService(Reactivity.Reactivity, reactivity),
        // the copy read so far stays a true (older) state of the file: say once that it is not refreshed
        Effect.catchAll((error) =>
          Effect.flatMap(Ref.getAndSet(warned, true), (done) =>
            done ? Effect.void : Effect.logWarning(`${error.message}; showing what was read before`)
          )
        )
      )

      const acquirer = Effect.gen(function* () {
        yield* refresh
        yield* Effect.acquireRelease(lock.take(1), () => lock.release(1))
        const generation = yield* Ref.get(current)
        return yield* generation.sql.reserve
      })
      return yield* SqlClient.make({
        acquirer,
        compiler: Statement.makeCompilerSqlite(),
        spanAttributes: [["db.system.name", "sqlite"]]
      })
    })
  ).pipe(Layer.provide(Reactivity.layer))
