/**
 * `logbook events <session>`: the event log of one session, as text lines or JSON envelopes, with
 * `--follow` to keep printing events as they are committed (by this or another process).
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Chunk, Console, Effect, Option, Stream } from "effect"
import * as Events from "../domain/Events.js"
import { type ChainRow, EventStore } from "../store/EventStore.js"
import { rowToRaw } from "../store/internal/storeService.js"
import { envelopeJson } from "../store/SessionFile.js"
import { checkOnRead, type Problem, problemText, rowProblems } from "../store/Verify.js"
import { dbOption, existingStore } from "./db.js"
import { deletedAt, deletedText } from "./deleted.js"
import { CliError } from "./errors.js"
import { eventLine } from "./eventText.js"
import { damagedText, warnIfDamaged } from "./integrity.js"
import { formatOption, seqOption, sessionArg } from "./options.js"
import { stdoutStyle } from "./render.js"
import { resolveSession } from "./resolveSession.js"

const typeOption = Options.text("type").pipe(
  Options.withAlias("t"),
  Options.repeated,
  Options.withPseudoName("type"),
  Options.withDescription(
    "Only events of this type, e.g. tool.invoked. Repeat the flag or separate types with commas; " +
      "`tool.*` matches every type that starts with `tool.`."
  )
)

const fromOption = seqOption("from", "Start at this seq (inclusive).")

const toOption = seqOption("to", "Stop at this seq (inclusive). With --follow, exit once it is reached.")

const eventsFormat = formatOption(
  ["text", "json"],
  "text: one line per event (seq, local time, type, summary); " +
    "json: one stored envelope per line (id, sessionId, seq, type, at, parentId, v, payload)."
)

const followOption = Options.boolean("follow").pipe(
  Options.withAlias("f"),
  Options.withDescription(
    "After the stored events, keep printing new ones as they are committed, until Ctrl-C (exit 130)."
  )
)

/**
 * The type filter from `--type` values: a predicate, or none to keep everything. Unknown names
 * are a usage error, so a typo does not silently print nothing.
 */
export const parseTypeFilter = (
  values: ReadonlyArray<string>
): Effect.Effect<Option.Option<(type: string) => boolean>, CliError> => {
  const names = values
    .flatMap((v) => v.split(","))
    .map((v) => v.trim())
    .filter((v) => v !== "")
  if (names.length === 0) return Effect.succeed(Option.none())
  const exact = new Set<string>()
  const prefixes: Array<string> = []
  for (const name of names) {
    if (name.endsWith("*")) {
      const prefix = name.slice(0, -1)
      if (!Events.eventTypes.some((t) => t.startsWith(prefix))) {
        return Effect.fail(
          CliError.usage(`--type ${name} matches no event type; known types: ${Events.eventTypes.join(", ")}`)
        )
      }
      prefixes.push(prefix)
    } else if (Events.isEventType(name)) {
      exact.add(name)
    } else {
      return Effect.fail(CliError.usage(`unknown event type "${name}"; known types: ${Events.eventTypes.join(", ")}`))
    }
  }
  return Effect.succeed(Option.some((type: string) => exact.has(type) || prefixes.some((p) => type.startsWith(p))))
}

const checkRange = (from: Option.Option<number>, to: Option.Option<number>): Effect.Effect<void, CliError> => {
  if (Option.isSome(from) && from.value < 1)
    return Effect.fail(CliError.usage("--from must be 1 or more (seqs start at 1)"))
  if (Option.isSome(to) && to.value < 1) return Effect.fail(CliError.usage("--to must be 1 or more (seqs start at 1)"))
  if (Option.isSome(from) && Option.isSome(to) && from.value > to.value) {
    return Effect.fail(CliError.usage(`--from ${from.value} is after --to ${to.value}`))
  }
  return Effect.void
}

/** The stored envelope as JSON, fields in the documented order (the lines of a session file, too). */
export { envelopeJson } from "../store/SessionFile.js"

export const events = Command.make(
  "events",
  {
    session: sessionArg,
    db: dbOption,
    type: typeOption,
    from: fromOption,
    to: toOption,
    format: eventsFormat,
    follow: followOption
  },
  Effect.fn("cli.events")(
    function* ({ follow, format, from, session, to, type }) {
      const filter = yield* parseTypeFilter(type)
      yield* checkRange(from, to)
      const store = yield* EventStore
      const summary = yield* resolveSession(session)
      if (summary.deleted) {
        // on stderr, so the events on stdout stay exactly the log
        const at = yield* deletedAt(summary.id)
        yield* Console.error(`logbook: session ${summary.id} was ${deletedText(at)}`)
      }
      const style = yield* stdoutStyle
      const keep = Option.getOrElse(filter, () => (_: string) => true)
      const seqWidth = Math.max(4, String(summary.lastSeq).length)
      const render = (e: Events.RawEnvelope) => (format === "json" ? envelopeJson(e) : eventLine(e, style, seqWidth))
      const print = <E>(stream: Stream.Stream<Events.RawEnvelope, E>) =>
        stream.pipe(
          Stream.filter((e) => keep(e.type)),
          Stream.runForEachChunk((chunk) =>
            Chunk.isEmpty(chunk) ? Effect.void : Console.log(Chunk.toReadonlyArray(chunk).map(render).join("\n"))
          )
        )
      if (!follow) {
        // every row read is checked against the chain as it is printed; a gap or a broken row gets
        // a line of its own where it is (text), the whole list goes to stderr, and the exit code is 1
        const first = Option.getOrElse(from, () => 1)
        const last = Option.getOrElse(to, () => Number.MAX_SAFE_INTEGER)
        const found: Array<Problem> = []
        let expected = first
        let previous: ChainRow | undefined
        const mark = (p: Problem) => {
          found.push(p)
          return style.red(`${"!".padStart(seqWidth)}  ${problemText(p)}`)
        }
        yield* store.readChain(summary.id, { from: first, to: last }).pipe(
          Stream.runForEachChunk((chunk) => {
            const lines: Array<string> = []
            for (const row of chunk) {
              if (row.seq > expected) {
                const line = mark({ _tag: "missing", from: expected, to: row.seq - 1, atEnd: false })
                if (format === "text") lines.push(line)
              }
              for (const p of rowProblems(summary.id, row, previous)) {
                const line = mark(p)
                if (format === "text") lines.push(line)
              }
              previous = row
              expected = row.seq + 1
              if (keep(row.type)) lines.push(render(rowToRaw(summary.id, row)))
            }
            return lines.length === 0 ? Effect.void : Console.log(lines.join("\n"))
          })
        )
        const end = Math.min(last, summary.lastSeq)
        if (end >= expected) {
          const line = mark({ _tag: "missing", from: expected, to: end, atEnd: true })
          if (format === "text") yield* Console.log(line)
        }
        // outside the range printed: the seqs and the tip
        const seen = new Set(found.map(problemText))
        for (const p of yield* checkOnRead(summary.id)) if (!seen.has(problemText(p))) found.push(p)
        if (found.length > 0) return yield* CliError.failed(damagedText(summary.id, found))
        return
      }
      yield* warnIfDamaged(summary.id)
      const live = store.followRaw(summary.id, Option.getOrUndefined(from))
      return yield* print(
        Option.match(to, {
          onNone: () => live,
          onSome: (last) => live.pipe(Stream.takeUntil((e) => e.seq >= last))
        })
      )
    },
    (effect, { db }) => Effect.provide(effect, existingStore(db))
  )
).pipe(
  Command.withDescription(
    "Print the event log of a session: every step the agent took, in seq order. " +
      "Use --follow to watch a session that another process is running."
  )
)
