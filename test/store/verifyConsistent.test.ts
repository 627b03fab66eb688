/**
 * `verifySession` and `checkOnRead` read the session index, the rows and the snapshots as of one
 * moment (`EventStore.consistent`): a commit that lands while they read is not tampering. A hook
 * between the reads commits through another connection; then the CLI's `verify` runs again and
 * again while another OS process appends to the same session.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Events from "../../src/domain/Events.js"
import { CallId, SessionId } from "../../src/domain/Ids.js"
import { EventStore } from "../../src/store/EventStore.js"
import { checkOnRead, problemText, verifySession } from "../../src/store/Verify.js"
import { runCli } from "../support/cli.js"
import { exitCode, spawnTs, waitForLine } from "../support/processes.js"
import { tempDb } from "../support/tmp.js"

const sid = SessionId.make("0195a0ba-0000-7000-8000-0000000c0a51")

const events = (n: number, from = 0): Array<Events.NewEvent> =>
  Array.from({ length: n }, (_, i) =>
    Events.make("tool.progress", { callId: CallId.make("c"), output: `line ${from + i}` })
  )

/** Appends through a connection of its own, as another process would. */
const appendElsewhere = (file: string, n: number) =>
  Effect.promise(() =>
    Effect.runPromise(
      Effect.flatMap(EventStore, (store) => store.append(sid, events(n, 100))).pipe(
        Effect.provide(EventStore.layerSqlite({ filename: file }))
      )
    )
  )

/** The store, with `session` (the index read) followed by a commit of `n` events elsewhere. */
const hooked = (file: string, n: number, calls: { count: number }) =>
  Effect.map(EventStore, (store) => ({
    ...store,
    session: (id: SessionId) =>
      Effect.tap(store.session(id), () => {
        calls.count++
        return appendElsewhere(file, n)
      })
  }))

describe("verify reads one state of the log", () => {
  for (const readonly of [true, false]) {
    it.live(`a commit between its reads of the index and the rows is no problem (readonly: ${readonly})`, () =>
      Effect.gen(function* () {
        const file = tempDb()
        yield* Effect.provide(
          Effect.flatMap(EventStore, (store) =>
            store.append(sid, [Events.make("session.created", { title: "t" }), ...events(4)])
          ),
          EventStore.layerSqlite({ filename: file })
        )
        const calls = { count: 0 }
        const { verification, onRead, after } = yield* Effect.gen(function* () {
          const store = yield* hooked(file, 3, calls)
          const verification = yield* verifySession(sid, { snapshots: true }).pipe(
            Effect.provideService(EventStore, store)
          )
          const onRead = yield* checkOnRead(sid).pipe(Effect.provideService(EventStore, store))
          const after = yield* verifySession(sid)
          return { verification, onRead, after }
        }).pipe(Effect.provide(EventStore.layerSqlite({ filename: file, readonly })))
        // the hook ran: two commits landed while the checks were reading
        expect(calls.count).toBe(2)
        expect(verification.problems.map(problemText)).toEqual([])
        expect({ events: verification.events, lastSeq: verification.lastSeq }).toEqual({ events: 5, lastSeq: 5 })
        expect(onRead.map(problemText)).toEqual([])
        // a later check sees both commits, and they verify
        expect(after.problems.map(problemText)).toEqual([])
        expect({ events: after.events, lastSeq: after.lastSeq }).toEqual({ events: 11, lastSeq: 11 })
      })
    )
  }

  it.live(
    "logbook verify while another process appends to the session never reports tampering",
    () =>
      Effect.gen(function* () {
        const file = tempDb()
        const writer = spawnTs("test/support/append-loop.ts", [file, sid])
        const finished = exitCode(writer)
        let output = ""
        writer.stdout!.on("data", (d) => {
          output += String(d)
        })
        yield* Effect.promise(() => waitForLine(writer, "ready"))
        const runs: Array<{ code: number | null; text: string }> = []
        for (let i = 0; i < 4; i++) {
          const run = yield* Effect.promise(() => runCli(["verify", sid, "--db", file, "--format", "json"]))
          runs.push({ code: run.code, text: run.stdout + run.stderr })
        }
        // the writer was still writing all along: it stops only now
        expect(writer.exitCode).toBe(null)
        writer.stdin!.end()
        expect(yield* Effect.promise(() => finished)).toBe(0)
        for (const run of runs) {
          expect(run, run.text).toMatchObject({ code: 0 })
          expect(JSON.parse(run.text).ok).toBe(true)
        }
        const written = Number(/done (\d+)/.exec(output)?.[1])
        // each verify counted a state the writer passed through, rising
        const counts = runs.map((r) => JSON.parse(r.text).sessions[0].events as number)
        expect([...counts].sort((a, b) => a - b)).toEqual(counts)
        expect(counts.every((c) => c >= 1 && c <= written)).toBe(true)
        const last = yield* Effect.promise(() => runCli(["verify", sid, "--db", file]))
        expect(last.code, last.stderr).toBe(0)
      }),
    120_000
  )
})
