/**
 * `logbook sessions list`: the session index, most recently updated first, with each session's
 * outcome, model and cost — all read from the index (`EventStore.sessions`, kept up to date on
 * every append), so listing costs the same however long the sessions are.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as FileSystem from "@effect/platform/FileSystem"
import { Clock, Console, Effect, Option } from "effect"
import { formatCost, oneLine } from "../present/text.js"
import { ownerIsDead } from "../session/Sessions.js"
import { EventStore, type Lease, type SessionSummary } from "../store/EventStore.js"
import { dbOption, existingStore, resolveDbPath } from "./db.js"
import { CliError } from "./errors.js"
import { formatOption, integerOption } from "./options.js"
import { type Style, stdoutStyle, table } from "./render.js"
import { shortIds } from "./shortId.js"

const listFormat = formatOption(
  ["table", "json"],
  "table: aligned columns for people (80 wide); json: one JSON array of session objects, with full ids."
)

const allOption = Options.boolean("all").pipe(
  Options.withAlias("a"),
  Options.withDescription("Also list deleted sessions (marked deleted).")
)

const limitOption = integerOption("limit").pipe(
  Options.optional,
  Options.withAlias("n"),
  Options.withDescription("Show at most this many sessions (the most recently updated).")
)

/**
 * How a session stands, from its index row and whether a live process drives it:
 * - `running`: a turn is open and the session's lease is held by a live process;
 * - `crashed`: a turn is open and nobody drives it (the process died: the next `run --session`
 *   repairs it), or the last turn was ended by that repair (`turn.interrupted {reason: crash}`);
 * - `finished` (the model was done), `max-steps`, `output-limit` (a model step reached
 *   `step.maxOutputBytes`), `failed` (a model or store error), `interrupted` (Ctrl-C, a steer that
 *   stopped it, a shutdown): how the last turn ended;
 * - `new`: no turn has ended or started yet.
 */
export type Outcome =
  | "running"
  | "crashed"
  | "finished"
  | "max-steps"
  | "output-limit"
  | "failed"
  | "interrupted"
  | "new"

export const outcomeOf = (s: SessionSummary, driven: boolean): Outcome => {
  if (s.turnOpen) return driven ? "running" : "crashed"
  const end = s.lastTurn
  if (end === null) return "new"
  if (end.interrupted) return end.reason === "crash" ? "crashed" : end.reason === "error" ? "failed" : "interrupted"
  switch (end.reason) {
    case "stop":
      return "finished"
    case "max-steps":
    case "output-limit":
      return end.reason
    default:
      return "failed"
  }
}

/** A lease held by a live owner: not expired, and not a process of this machine that is gone. */
export const isDriven = (lease: Option.Option<Lease>, now: number): boolean =>
  Option.isSome(lease) && lease.value.expiresAt > now && !ownerIsDead(lease.value.owner)

/** The cost for the table: `$0.0123`, `≥ $0.0123` when part was unpriced, `unknown` when none was priced. */
export const costText = (s: Pick<SessionSummary, "cost" | "costKnown">): string =>
  s.costKnown ? formatCost(s.cost) : s.cost > 0 ? `≥ ${formatCost(s.cost)}` : "unknown"

export interface ListedSession {
  readonly summary: SessionSummary
  readonly shortId: string
  readonly outcome: Outcome
}

/** The JSON form of a listed session: full id, times in UTC epoch milliseconds, as stored. */
export const listedJson = ({ outcome, shortId, summary: s }: ListedSession) => ({
  id: s.id,
  shortId,
  title: s.title,
  outcome,
  status: s.status,
  model: s.model,
  cost: s.cost,
  costKnown: s.costKnown,
  cwd: s.cwd,
  createdAt: s.createdAt,
  updatedAt: s.updatedAt,
  lastSeq: s.lastSeq,
  lastTurn: s.lastTurn,
  deleted: s.deleted
})

/** Cut to `width` characters, with `…` as the last one when something was cut. */
export const cut = (text: string, width: number): string => {
  const chars = Array.from(text)
  return chars.length <= width ? text : `${chars.slice(0, Math.max(0, width - 1)).join("")}…`
}

/** A model name in `width`: without its `provider/` first when it does not fit, then cut. */
const fitModel = (model: string, width: number): string => {
  if (Array.from(model).length <= width) return model
  const slash = model.indexOf("/")
  return cut(slash >= 0 ? model.slice(slash + 1) : model, width)
}

const statusStyle = (status: Outcome | "deleted", style: Style): string => {
  switch (status) {
    case "running":
      return style.cyan(status)
    case "crashed":
    case "failed":
      return style.red(status)
    case "interrupted":
    case "max-steps":
    case "output-limit":
      return style.yellow(status)
    case "new":
    case "deleted":
      return style.dim(status)
    case "finished":
      return status
  }
}

const HEADER = ["ID", "STATUS", "UPDATED", "COST", "MODEL", "TITLE"] as const
const GAP = 2
/** the title and model keep at least this many characters before the other shrinks further */
const TITLE_MIN = 20
const MODEL_MIN = 10

const pad2 = (n: number) => String(n).padStart(2, "0")

/**
 * When, in local time and 11 characters at most (as `ls -l` shortens its dates): `MM-DD HH:MM`
 * in the current year, `YYYY-MM-DD` before it.
 */
export const updatedText = (epochMs: number, now: number): string => {
  const d = new Date(epochMs)
  const date = `${pad2(d.getMonth() + 1)}-${pad2(d.getDate())}`
  return d.getFullYear() === new Date(now).getFullYear()
    ? `${date} ${pad2(d.getHours())}:${pad2(d.getMinutes())}`
    : `${d.getFullYear()}-${date}`
}

/**
 * The table, `width` characters wide (80 unless the terminal is wider): the title is cut to fit,
 * down to 20 characters, then the model (to 10), then the title again; the other columns are
 * never cut.
 */
export const renderTable = (
  rows: ReadonlyArray<ListedSession>,
  style: Style,
  options: { readonly width?: number | undefined; readonly now: number }
): Array<string> => {
  const width = options.width ?? 80
  const plain = rows.map(({ outcome, shortId, summary: s }) => {
    // a blank title or model shows its placeholder: an empty cell would leave the row's end blank
    const title = s.title !== null && s.title.trim() !== "" ? s.title : undefined
    return {
      id: shortId,
      status: s.deleted ? ("deleted" as const) : outcome,
      updated: updatedText(s.updatedAt, options.now),
      cost: costText(s),
      model: s.model === null || s.model.trim() === "" ? "-" : s.model,
      title: title === undefined ? "(untitled)" : oneLine(title),
      untitled: title === undefined
    }
  })
  const column = (header: string, key: "id" | "status" | "updated" | "cost" | "model" | "title") =>
    Math.max(header.length, ...plain.map((r) => Array.from(r[key]).length))
  const fixed = column("ID", "id") + column("STATUS", "status") + column("UPDATED", "updated") + column("COST", "cost")
  const rest = width - fixed - GAP * (HEADER.length - 1)
  const modelNatural = column("MODEL", "model")
  const titleNatural = column("TITLE", "title")
  let model = modelNatural
  let title = titleNatural
  if (model + title > rest) title = Math.max(Math.min(titleNatural, TITLE_MIN), rest - model)
  if (model + title > rest) model = Math.max(Math.min(modelNatural, MODEL_MIN), rest - title)
  if (model + title > rest) title = Math.max(HEADER[5].length, rest - model)
  return table(
    HEADER,
    plain.map((r) => [
      r.id,
      statusStyle(r.status, style),
      r.updated,
      r.cost === "unknown" ? style.dim(r.cost) : r.cost,
      r.model === "-" ? style.dim(r.model) : fitModel(r.model, model),
      r.untitled ? style.dim(r.title) : cut(r.title, title)
    ]),
    style
  )
}

/** The sessions to list with their short ids and outcomes; leases are read only for open turns. */
export const listSessions = Effect.fn("cli.sessions.listSessions")(function* (options: {
  readonly all: boolean
  readonly limit: number | undefined
  /** only the sessions of this workspace */
  readonly cwd?: string | undefined
}) {
  const store = yield* EventStore
  const sessions = yield* store.sessions({ includeDeleted: options.all, limit: options.limit, cwd: options.cwd })
  // unique among all sessions, deleted ones too: `resolveSession` matches those as well
  const short = shortIds(yield* store.sessionIds)
  const now = yield* Clock.currentTimeMillis
  return yield* Effect.forEach(sessions, (summary) =>
    Effect.map(
      summary.turnOpen ? Effect.map(store.lease(summary.id), (lease) => isDriven(lease, now)) : Effect.succeed(false),
      (driven): ListedSession => ({
        summary,
        shortId: short.get(summary.id) ?? summary.id,
        outcome: outcomeOf(summary, driven)
      })
    )
  )
})

export const sessionsList = Command.make(
  "list",
  { db: dbOption, format: listFormat, all: allOption, limit: limitOption },
  Effect.fn("cli.sessions.list")(
    function* ({ all, db, format, limit }) {
      const file = yield* resolveDbPath(db)
      const store = yield* EventStore
      if (Option.isSome(limit) && limit.value < 1) {
        return yield* CliError.usage(`--limit must be at least 1 (got ${limit.value})`)
      }
      const listed = yield* listSessions({ all, limit: Option.getOrUndefined(limit) })
      if (format === "json") {
        yield* Console.log(JSON.stringify(listed.map(listedJson), null, 2))
        return
      }
      if (listed.length === 0) {
        const hidden = all ? 0 : (yield* store.sessionIds).length
        yield* Console.log(
          hidden === 0
            ? `No sessions in ${file} yet.`
            : `No sessions in ${file}, but ${hidden} deleted one${hidden === 1 ? "" : "s"}: logbook sessions list --all lists ${hidden === 1 ? "it" : "them"}.`
        )
        return
      }
      const style = yield* stdoutStyle
      const width = process.stdout.isTTY === true && process.stdout.columns > 80 ? process.stdout.columns : 80
      const now = yield* Clock.currentTimeMillis
      yield* Console.log(renderTable(listed, style, { width, now }).join("\n"))
    },
    (effect, { db, format }) =>
      Effect.gen(function* () {
        // on a machine with no database yet (the default place, not one named by --db or LOGBOOK_DB,
        // where a missing file is more likely a typo): no sessions, and nothing is created
        if (Option.isNone(Option.filter(db, (file) => file !== ""))) {
          const file = yield* resolveDbPath(db)
          const fs = yield* FileSystem.FileSystem
          const exists = yield* fs.exists(file).pipe(Effect.orElseSucceed(() => true))
          if (!exists) {
            return yield* Console.log(format === "json" ? "[]" : `No sessions yet (no database at ${file}).`)
          }
        }
        return yield* Effect.provide(effect, existingStore(db))
      })
  )
).pipe(
  Command.withDescription(
    "List the sessions in the database, most recently updated first: short id, outcome, last update, cost, model and title."
  )
)
