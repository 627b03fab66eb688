/**
 * Runs the benchmarks and prints each figure as a ratio measured side by side in the same run,
 * with its goal. Benchmarks are not tests: nothing here fails on a missed goal, only on a wrong
 * result (e.g. restore and the full fold disagree).
 *
 *   npm run bench                               all of them
 *   npm run bench -- restore                    one (or several): append, restore, stats, coldstart, startup, kernel, steps, provider, grep, render, snapshot
 *   npm run bench -- --quick                    small sizes, to check that everything runs
 *   npm run bench -- startup --baseline main    also build git ref `main` in a temporary directory and
 *                                               time its start-up in the same rounds (before / after);
 *                                               with steps, run its binary in the same rounds too
 *   npm run bench -- --write docs/benchmarks.md also put the figures into that file, between
 *                                               the `<!-- bench:begin -->` / `<!-- bench:end -->` lines
 *
 * Temporary databases go to a directory under `os.tmpdir()`, removed at the end.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { type AppendResult, benchAppend } from "./append.js"
import { benchColdStart, type ColdStartResult } from "./coldstart.js"
import { benchGrep, type GrepResult, RIPGREP_MIN_FILES } from "./grep.js"
import { benchKernel, DEFAULT_SHAPE, type KernelResult, QUICK_SHAPE } from "./kernel.js"
import { benchProvider, type ProviderResult } from "./provider.js"
import { benchRender, type RenderResult, type RenderRun } from "./render.js"
import { benchRestore, type RestoreMeasurement, type RestoreResult } from "./restore.js"
import { benchSnapshot, type SnapshotResult } from "./snapshot.js"
import { benchStartup, buildBaseline, type StartupResult } from "./startup.js"
import { benchStats, type StatsResult } from "./stats.js"
import { type AgentSteps, benchSteps, PI_VERSION, type StepsResult } from "./steps.js"

const NAMES = [
  "append",
  "restore",
  "stats",
  "coldstart",
  "startup",
  "kernel",
  "steps",
  "provider",
  "grep",
  "render",
  "snapshot"
] as const
type Name = (typeof NAMES)[number]

const BEGIN = "<!-- bench:begin -->"
const END = "<!-- bench:end -->"

interface Args {
  readonly names: ReadonlyArray<Name>
  readonly quick: boolean
  readonly write: string | undefined
  readonly baseline: string | undefined
}

const usage =
  "usage: npm run bench -- [append] [restore] [stats] [coldstart] [startup] [kernel] [steps] [provider] [grep] [render] [snapshot] [--quick] [--write FILE] [--baseline GIT-REF]"

const parseArgs = (argv: ReadonlyArray<string>): Args => {
  const names: Array<Name> = []
  let quick = false
  let write: string | undefined
  let baseline: string | undefined
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === "--quick") quick = true
    else if (arg === "--write") {
      write = argv[++i]
      if (write === undefined) throw new Error(`--write needs a file\n${usage}`)
    } else if (arg === "--baseline") {
      baseline = argv[++i]
      if (baseline === undefined) throw new Error(`--baseline needs a git ref\n${usage}`)
    } else if ((NAMES as ReadonlyArray<string>).includes(arg)) names.push(arg as Name)
    else throw new Error(`unknown argument "${arg}"\n${usage}`)
  }
  return { names: names.length > 0 ? names : NAMES, quick, write, baseline }
}

// ---------------------------------------------------------------------------------------------
// formatting

const int = (x: number) => Math.round(x).toLocaleString("en-US")
const ms = (x: number) => (x >= 100 ? int(x) : x.toFixed(1))
const ratio = (x: number) => (x >= 10 ? x.toFixed(1) : x.toFixed(3))
const bytes = (x: number) =>
  x >= 1e6 ? `${(x / 1e6).toFixed(1)} MB` : x >= 1e3 ? `${(x / 1e3).toFixed(1)} kB` : `${x} B`
const verdict = (ok: boolean) => (ok ? "PASS" : "MISS")

interface Row {
  readonly figure: string
  readonly value: string
  readonly goal: string
  readonly result: string
}

const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string =>
  [
    `| ${header.join(" | ")} |`,
    `|${header.map(() => "---").join("|")}|`,
    ...rows.map((r) => `| ${r.join(" | ")} |`)
  ].join("\n")

const APPEND_GOAL = 0.5
const APPEND_ROUNDS = 5
const RESTORE_GOAL = 0.05
const STATS_GOAL = 0.05
const STATS_ROUNDS = 3

const statsRows = (r: StatsResult): Array<Row> => [
  {
    figure: `stats / fold of every payload, ${int(r.events)} events in ${int(r.sessions)} sessions`,
    value: ratio(r.summaryMs / r.foldMs),
    goal: `≤ ${STATS_GOAL}`,
    result: verdict(r.summaryMs / r.foldMs <= STATS_GOAL)
  },
  {
    figure: "stats --by model / fold of every payload",
    value: ratio(r.byModelMs / r.foldMs),
    goal: `≤ ${STATS_GOAL}`,
    result: verdict(r.byModelMs / r.foldMs <= STATS_GOAL)
  }
]

const statsMarkdown = (r: StatsResult): string =>
  [
    `### Stats (${int(r.events)} events in ${int(r.sessions)} sessions, median of ${r.rounds} rounds)`,
    "",
    `A store of simulated sessions (${bytes(r.bytes)} with its WAL, written in ${ms(r.buildMs)} ms through ` +
      `\`EventStore.append\`, which keeps the stats index): ${int(r.summary.turns)} turns, ` +
      `${int(r.summary.steps)} steps, ${int(r.summary.toolCalls)} tool calls, ${int(r.summary.retries)} retries. ` +
      "The fold reads every row with raw better-sqlite3, parses every payload and folds it " +
      "(`foldIndex` + `foldFigures`); it gives the same figures, or the benchmark fails.",
    "",
    table(
      ["", "ms"],
      [
        ["`Stats.stats` (summary)", ms(r.summaryMs)],
        ["`Stats.stats` --by model", ms(r.byModelMs)],
        ["`Stats.stats` --by day", ms(r.byDayMs)],
        ["fold of every payload", ms(r.foldMs)]
      ]
    )
  ].join("\n")

const appendRows = (r: AppendResult): Array<Row> =>
  r.cases.flatMap((c, i) => {
    const headline = i === r.cases.length - 1
    const name = `append: ${c.name}${headline ? " (headline)" : ""}`
    return [
      {
        figure: `${name}, over raw batched`,
        value: ratio(c.ratio),
        // the kernel cases commit once per awaited event: judged on the same-commits ratio below
        goal: headline ? `≥ ${APPEND_GOAL}` : "(judged on same commits)",
        result: headline ? verdict(c.ratio >= APPEND_GOAL) : "(reported)"
      },
      ...(headline
        ? []
        : [
            {
              figure: `${name}, over raw with the same commits`,
              value: ratio(c.ratioSameCommits),
              goal: `≥ ${APPEND_GOAL}`,
              result: verdict(c.ratioSameCommits >= APPEND_GOAL)
            }
          ])
    ]
  })

const appendMarkdown = (r: AppendResult): string =>
  [
    `### Append throughput (${int(r.count)} events, median of ${APPEND_ROUNDS} rounds)`,
    "",
    `Raw better-sqlite3, 1000 rows a transaction: ${int(r.rawPerSec)} events/s. ` +
      `Raw with the kernel's commit points (one transaction per lifecycle event): ${int(r.rawKernelPerSec)} events/s.`,
    "",
    table(
      ["case", "events/s", "over raw batched", "over raw, same commits", `goal ≥ ${APPEND_GOAL}`],
      r.cases.map((c, i) => {
        const headline = i === r.cases.length - 1
        const judged = headline ? c.ratio : c.ratioSameCommits
        return [
          headline ? `**${c.name}**` : c.name,
          int(c.perSec),
          ratio(c.ratio),
          headline ? "(same)" : ratio(c.ratioSameCommits),
          verdict(judged >= APPEND_GOAL)
        ]
      })
    ),
    "",
    "The kernel cases are judged on the ratio over raw inserts with the same commit points (each awaited " +
      "lifecycle event is its own transaction in both); the headline on the ratio over raw batched inserts."
  ].join("\n")

const growthOf = (list: ReadonlyArray<RestoreMeasurement>) => {
  const first = list[0]!
  const last = list[list.length - 1]!
  return {
    first,
    last,
    events: last.session.count / first.session.count,
    state: last.session.stateBytes / first.session.stateBytes,
    restore: last.restoreMs / first.restoreMs,
    full: last.fullMs / first.fullMs
  }
}

const kindsOf = (r: RestoreResult) => [...new Set(r.growth.map((m) => m.session.kind))]

const restoreRows = (r: RestoreResult): Array<Row> => {
  const h = r.headline
  const rows: Array<Row> = [
    {
      figure: `restore / full fold, ${h.session.kind} session of ${int(h.session.count)} events`,
      value: ratio(h.restoreMs / h.fullMs),
      goal: `≤ ${RESTORE_GOAL}`,
      result: verdict(h.restoreMs / h.fullMs <= RESTORE_GOAL)
    }
  ]
  for (const kind of kindsOf(r)) {
    const g = growthOf(r.growth.filter((m) => m.session.kind === kind))
    if (g.first === g.last) continue
    rows.push({
      figure:
        `restore growth, ${kind}, ${int(g.first.session.count)} → ${int(g.last.session.count)} events ` +
        `(state ×${ratio(g.state)}, full fold ×${ratio(g.full)})`,
      value: `×${ratio(g.restore)}`,
      goal: "follows the state, not the events",
      result: "(reported)"
    })
  }
  return rows
}

const restoreMarkdown = (r: RestoreResult): string => {
  const h = r.headline
  const s = h.session
  const lines = [
    `### Restore (${s.kind} session of ${int(s.count)} events, median of ${h.rounds} rounds)`,
    "",
    `${s.snapshots} snapshots taken (every 500 events; the store keeps the newest 3), the newest at seq ` +
      `${int(s.snapshotSeq)}: restore reads it and folds the ${int(s.count - s.snapshotSeq)} events after it. ` +
      `State ${bytes(s.stateBytes)} of JSON; event payloads ${bytes(s.payloadBytes)}; all snapshots taken ` +
      `${bytes(s.snapshotBytes)} (written, most of them since deleted).`,
    "",
    table(
      ["", "ms"],
      [
        ["`Snapshots.restore`", ms(h.restoreMs)],
        ["  snapshot row + JSON.parse", ms(h.loadMs)],
        ["  (Schema decode of the state: skipped, the snapshot is intact)", ms(h.decodeMs)],
        [`  fold of the ${int(s.count - s.snapshotSeq)}-event tail`, ms(h.tailMs)],
        ["`Snapshots.foldAll` (every event)", ms(h.fullMs)],
        [
          `**restore / full fold** (goal ≤ ${RESTORE_GOAL})`,
          `**${ratio(h.restoreMs / h.fullMs)}** ${verdict(h.restoreMs / h.fullMs <= RESTORE_GOAL)}`
        ]
      ]
    ),
    "",
    "(The three parts are timed separately, after the two runs of each round.)",
    "",
    "### Restore growth",
    "",
    table(
      ["session", "events", "state (JSON)", "tail", "restore ms", "full fold ms", "restore / full"],
      r.growth.map((m) => [
        m.session.kind,
        int(m.session.count),
        bytes(m.session.stateBytes),
        int(m.session.count - m.session.snapshotSeq),
        ms(m.restoreMs),
        ms(m.fullMs),
        ratio(m.restoreMs / m.fullMs)
      ])
    ),
    ""
  ]
  for (const kind of kindsOf(r)) {
    const g = growthOf(r.growth.filter((m) => m.session.kind === kind))
    if (g.first === g.last) continue
    lines.push(
      `- ${kind}, ${int(g.first.session.count)} → ${int(g.last.session.count)} events (×${ratio(g.events)}): ` +
        `restore ×${ratio(g.restore)}, state ×${ratio(g.state)}, full fold ×${ratio(g.full)}.`
    )
  }
  return lines.join("\n")
}

const coldRows = (c: ColdStartResult): Array<Row> => [
  {
    figure: `cold start: \`node dist/bin.js --version\` (${ms(c.binMs)} ms) / \`node -e 0\` (${ms(c.nodeMs)} ms)`,
    value: ratio(c.ratio),
    goal: "(none: reported)",
    result: "(reported)"
  }
]

const coldMarkdown = (c: ColdStartResult): string =>
  [
    `### Cold start (median of ${c.runs} spawns each, alternated, after 2 warm-ups)`,
    "",
    table(
      ["command", "median ms"],
      [
        [`\`node dist/bin.js --version\` (a start reads ${bytes(c.bundleBytes)})`, ms(c.binMs)],
        ["`node -e 0`", ms(c.nodeMs)],
        ["**ratio**", `**${ratio(c.ratio)}** (${ms(c.binMs - c.nodeMs)} ms added)`]
      ]
    )
  ].join("\n")

const startupRows = (r: StartupResult): Array<Row> => {
  const rows: Array<Row> = r.rows.map((row) => ({
    figure:
      `start-up: \`${row.name}\` (${ms(row.after.medianMs)} ms) / \`node -e 0\` (${ms(r.node.medianMs)} ms)` +
      (row.before === undefined ? "" : `; before (${r.baseline?.ref}): ${ratio(row.before.ratio)}`),
    value: ratio(row.after.ratio),
    goal: "(none: reported)",
    result: "(reported)"
  }))
  const frames = r.firstFrame
  if (typeof frames === "string") {
    rows.push({ figure: "first frame", value: "-", goal: "(skipped)", result: frames })
    return rows
  }
  const [base, ...others] = frames
  for (const row of others) {
    rows.push({
      figure:
        `first frame: ${row.name} (${ms(row.timing.medianMs)} ms) / ${base!.name} (${ms(base!.timing.medianMs)} ms)` +
        (row.before === undefined ? "" : `; before (${r.baseline?.ref}): ${ratio(row.before.ratio)}`),
      value: ratio(row.ratio),
      goal: "(none: reported)",
      result: "(reported)"
    })
    if (row.over !== undefined) {
      rows.push({
        figure: `first frame: ${row.name} / ${row.over.name}, side by side`,
        value: ratio(row.over.ratio),
        goal: `<= ${row.over.goal}`,
        result: row.over.ratio <= row.over.goal ? "pass" : "FAIL"
      })
    }
  }
  return rows
}

const startupMarkdown = (r: StartupResult): string => {
  const b = r.baseline
  const header = ["command", "median ms", "p90 ms", "/ `node -e 0`"]
  if (b !== undefined) header.push(`before: median ms`, "before: p90 ms", "before: / `node -e 0`", "after / before")
  const cell = (row: StartupResult["rows"][number]) => {
    const cells = [`\`${row.name}\``, ms(row.after.medianMs), ms(row.after.p90Ms), `**${ratio(row.after.ratio)}**`]
    if (row.before !== undefined) {
      cells.push(
        ms(row.before.medianMs),
        ms(row.before.p90Ms),
        ratio(row.before.ratio),
        ratio(row.after.medianMs / row.before.medianMs)
      )
    }
    return cells
  }
  const nodeRow = ["`node -e 0`", ms(r.node.medianMs), ms(r.node.p90Ms), "1"]
  if (b !== undefined) nodeRow.push("(same)", "", "", "")
  const lines = [
    `### Start-up (${r.runs} spawns of each, round-robin, the order rotating each round, after 2 warm-ups; medians and p90s)`,
    "",
    `Each command runs with an empty HOME in an empty directory (no config, no database at the default place); ` +
      "the empty database is a fresh logbook file with no sessions. What a start reads: " +
      `${bytes(r.startBytes)} (bin.js and its static imports)` +
      (b === undefined
        ? "."
        : `; the baseline, \`${b.ref}\` (${b.commit.slice(0, 7)}), built from git in a temporary directory: ${bytes(b.bundleBytes)}.`),
    "",
    table(header, [nodeRow, ...r.rows.map(cell)])
  ]
  lines.push("", `#### Time to the first frame (tmux, 100×30, ${r.firstFrameRuns} runs of each after 1 warm-up)`, "")
  if (typeof r.firstFrame === "string") {
    lines.push(`Skipped: ${r.firstFrame}.`)
  } else {
    lines.push(
      "From starting the command in a new tmux terminal until its marker text is on the screen (`capture-pane -p` " +
        "every 5 ms), over node printing a line in the same kind of terminal. The interactive screen: `logbook` in a " +
        "workspace whose config names an openai-compatible model, with a database of its own, until the status line " +
        "shows (`INTERACTIVE_READY`); other cases go in `firstFrameCases` (bench/startup.ts).",
      "",
      table(
        [
          "case",
          "median ms",
          "p90 ms",
          "/ node",
          ...(b === undefined ? [] : ["before: median ms", "before: p90 ms", "before: / node", "after / before"])
        ],
        r.firstFrame.map((row, i) => [
          row.name,
          ms(row.timing.medianMs),
          ms(row.timing.p90Ms),
          i === 0 ? "1" : `**${ratio(row.ratio)}**`,
          ...(b === undefined
            ? []
            : row.before === undefined
              ? ["(same)", "", "", ""]
              : [
                  ms(row.before.medianMs),
                  ms(row.before.p90Ms),
                  ratio(row.before.ratio),
                  ratio(row.timing.medianMs / row.before.medianMs)
                ])
        ])
      )
    )
    for (const row of r.firstFrame) {
      if (row.over === undefined) continue
      lines.push(
        "",
        `Side by side in the same run: ${row.name} / ${row.over.name} = **${ratio(row.over.ratio)}** ` +
          `(goal: at most ${row.over.goal}; ${row.over.ratio <= row.over.goal ? "pass" : "FAIL"}).`
      )
    }
  }
  return lines.join("\n")
}

const KERNEL_GOAL = 1.3

const kernelRows = (k: KernelResult): Array<Row> => [
  {
    figure:
      `kernel: ${int(k.shape.deltas)} text deltas + ${int(k.shape.calls)} tool calls through the kernel ` +
      `(${ms(k.kernelMs)} ms) / the same model streams drained + the same ${int(k.baselineEvents)} events ` +
      `through a SessionJournal, step by step in the kernel's order (${ms(k.baselineMs)} ms)`,
    value: ratio(k.ratio),
    goal: `≤ ${KERNEL_GOAL}`,
    result: verdict(k.ratio <= KERNEL_GOAL)
  },
  {
    figure:
      `kernel: the same over the two halves run apart (the streams alone ${ms(k.modelMs)} ms + the journal's calls ` +
      `alone ${ms(k.journalMs)} ms; apart, each runs warm in the caches)`,
    value: ratio(k.separateRatio),
    goal: "(reported)",
    result: ""
  },
  {
    figure:
      `kernel: the floor (the baseline + the kernel's reader of the stream + a fiber per tool call: what no kernel ` +
      `step with a steer and a tool timeout can drop; ${ms(k.floorMs)} ms) / the baseline; the goal leaves ` +
      (k.floorRatio < KERNEL_GOAL
        ? `${ratio(KERNEL_GOAL - k.floorRatio)} of the baseline for everything else a step does`
        : "nothing for everything else a step does"),
    value: ratio(k.floorRatio),
    goal: "(reported)",
    result: ""
  },
  {
    figure: "kernel: its own time (kernel − baseline) per model step",
    value: `${k.overheadPerStepMs.toFixed(2)} ms`,
    goal: "(reported)",
    result: ""
  },
  {
    figure: `kernel: its own time per model event (${int(k.modelEvents)} events: deltas, tool chunks, finishes)`,
    value: `${k.overheadPerModelEventUs.toFixed(1)} µs`,
    goal: "(reported)",
    result: ""
  },
  {
    figure:
      `kernel: its own Effect operations per model step (kernel ${int(perStep(k, k.ops.kernel.ops))} − model ` +
      `streams ${int(perStep(k, k.ops.model.ops))} − journal ${int(perStep(k, k.ops.journal.ops))}; counted, not timed)`,
    value: int(ownOpsPerStep(k)),
    goal: "(reported)",
    result: ""
  }
]

/** A count of the turn per model step, rounded. */
const perStep = (k: KernelResult, count: number): number => Math.round(count / k.steps)

/** The kernel's Effect operations per step beyond those of the model's streams and the journal. */
const ownOpsPerStep = (k: KernelResult): number => perStep(k, k.ops.kernel.ops - k.ops.model.ops - k.ops.journal.ops)

const kernelMarkdown = (k: KernelResult): string => {
  const range = (r: readonly [number, number], f: (x: number) => string) => `${f(r[0])}–${f(r[1])}`
  const x2 = (x: number) => x.toFixed(2)
  return [
    `### Kernel overhead (${int(k.events)} events, median of ${k.rounds} rounds)`,
    "",
    `One turn of ${k.steps} scripted steps (${int(k.shape.deltas)} text deltas, ${int(k.shape.calls)} calls of an ` +
      "in-process `echo` tool), one event per stream chunk, through `makeAgentLayer` on a fresh SQLite file, timed " +
      `from \`send\` to the end of \`wait\`: ${int(k.timedEvents)} events, handed to the store in ` +
      `${int(k.appendLaterCalls)} \`appendLater\` and ${int(k.appendCalls)} awaited \`append\` calls; the journal ` +
      `saved ${k.snapshots} snapshots (${bytes(k.snapshotBytes)} of JSON). The baseline is what the kernel cannot ` +
      `avoid: the same ${k.steps} model streams (${int(k.modelEvents)} events) drained with nothing done per event, ` +
      "and the same events (type and payload, read back from the kernel's database) written through a " +
      "`SessionJournal` on a fresh file in the same calls, in the kernel's order — per step its `step.started`, " +
      "its stream, the rest of its calls — then `flush`. The same two halves run apart (all streams, then all " +
      "calls) are shown too, not judged. Events in each database: kernel " +
      `${int(k.kernelEvents)}, replay ${int(k.baselineEvents)} (asserted equal in every round).`,
    "",
    table(
      ["", "median ms", "range (ms)"],
      [
        ["kernel (`send` … `wait`)", ms(k.kernelMs), range(k.kernelRange, ms)],
        [
          "baseline: model streams drained + the events through a `SessionJournal`, in the kernel's order",
          ms(k.baselineMs),
          range(k.baselineRange, ms)
        ],
        [
          "(not judged) the same two halves apart, summed per round",
          ms(k.separateMs),
          `${range(k.separateRange, ms)}; in the kernel's order they cost ${x2(k.baselineMs / k.separateMs)}×`
        ],
        ["  the model streams alone, drained", ms(k.modelMs), range(k.modelRange, ms)],
        [
          "  the same calls alone through a `SessionJournal` (fold + snapshots + store)",
          ms(k.journalMs),
          range(k.journalRange, ms)
        ],
        [
          `**kernel / baseline** (goal ≤ ${KERNEL_GOAL})`,
          `**${ratio(k.ratio)}** ${verdict(k.ratio <= KERNEL_GOAL)}`,
          `${range(k.ratioRange, x2)} (per round)`
        ],
        ["(not judged) kernel / the halves apart", ratio(k.separateRatio), ""],
        [
          "(not judged) the floor: the baseline + the kernel's reader of the stream + a fiber per tool call",
          ms(k.floorMs),
          `${range(k.floorRange, ms)}; ${ratio(k.floorRatio)} of the baseline`
        ],
        [
          "the kernel's own time (kernel − baseline)",
          ms(k.kernelMs - k.baselineMs),
          `${x2(k.overheadPerStepMs)} ms per step, ${k.overheadPerModelEventUs.toFixed(1)} µs per model event`
        ],
        [
          "Effect operations per step (counted in one more run of each, not timed): kernel / model streams / journal",
          `${int(perStep(k, k.ops.kernel.ops))} / ${int(perStep(k, k.ops.model.ops))} / ${int(perStep(k, k.ops.journal.ops))}`,
          `the kernel's own ${int(ownOpsPerStep(k))}; fibers started per step ${(k.ops.kernel.fibers / k.steps).toFixed(1)} / ` +
            `${(k.ops.model.fibers / k.steps).toFixed(1)} / ${(k.ops.journal.fibers / k.steps).toFixed(1)}`
        ],
        [
          "(not judged) the same calls straight to the `EventStore`",
          ms(k.storeMs),
          `${range(k.storeRange, ms)}; the journal adds ${x2(k.journalMs / k.storeMs)}×`
        ]
      ]
    )
  ].join("\n")
}

const STEP_OVERHEAD_GOAL_MS = 6
const FLAT_GOAL = 1.1
const RESUME_GOAL = 1.05

const mib = (x: number) => `${(x / 2 ** 20).toFixed(0)} MiB`

/**
 * About the transactions a step with one call commits since the kernel hands its lifecycle events
 * over (docs/event-log.md, "What the kernel awaits"; 9 before that, 3 until the parts of a model's
 * response were read together, 2.03 since): a figure that moves far from it means the grouping changed
 */
const EXPECTED_COMMITS_PER_STEP = 2

const stepsRows = (r: StepsResult): Array<Row> => {
  if (r._tag === "Skipped") return [{ figure: "steps", value: "-", goal: "(skipped)", result: r.reason }]
  const logbook = r.agents.find((a) => a.agent === "logbook")!
  const pi = r.agents.find((a) => a.agent === "pi")
  const short = logbook.shortOverhead ?? logbook.short
  const start = logbook.longStartOverhead ?? logbook.longStart
  const end = logbook.longEndOverhead ?? logbook.longEnd
  const rows: Array<Row> = [
    {
      figure: `steps: logbook's overhead per step (cycle − tool), ${r.shortSteps}-step sessions, median`,
      value: `${ms(short.medianMs)} ms`,
      goal: `≤ ${STEP_OVERHEAD_GOAL_MS} ms`,
      result: verdict(short.medianMs <= STEP_OVERHEAD_GOAL_MS)
    },
    {
      figure: `steps: logbook's overhead per step at steps ${int(r.longSteps - 40)}–${int(r.longSteps - 1)} of ${int(r.longSteps)}, median`,
      value: `${ms(end.medianMs)} ms`,
      goal: `≤ ${STEP_OVERHEAD_GOAL_MS} ms`,
      result: verdict(end.medianMs <= STEP_OVERHEAD_GOAL_MS)
    },
    {
      figure: `steps: flat — logbook's overhead at the end of ${int(r.longSteps)} steps over at the start (steps 2–41)`,
      value: ratio(end.medianMs / start.medianMs),
      goal: `≤ ${FLAT_GOAL}`,
      result: verdict(end.medianMs / start.medianMs <= FLAT_GOAL)
    },
    {
      figure:
        `resume: one step in the ${int(r.longSteps)}-step session (${int(logbook.longEvents ?? 0)} events, ` +
        `${ms(logbook.resumeMs)} ms) / one step in a fresh database (${ms(logbook.freshMs)} ms)`,
      value: ratio(logbook.resumeMs / logbook.freshMs),
      goal: `≤ ${RESUME_GOAL}`,
      result: verdict(logbook.resumeMs / logbook.freshMs <= RESUME_GOAL)
    }
  ]
  if (logbook.longCommits !== undefined) {
    rows.push({
      figure: `steps: SQLite transactions per step over the ${int(r.longSteps)}-step session (${int(logbook.longCommits)} in all, start-up's included)`,
      value: (logbook.longCommits / r.longSteps).toFixed(2),
      goal: `(reported; ${EXPECTED_COMMITS_PER_STEP} expected)`,
      result: ""
    })
  }
  const before = r.agents.find((a) => a.agent === "before")
  if (before !== undefined) {
    const ref = r.baseline?.ref ?? "baseline"
    const beforeShort = before.shortOverhead ?? before.short
    const beforeEnd = before.longEndOverhead ?? before.longEnd
    rows.push(
      {
        figure: `steps: overhead per step, ${r.shortSteps}-step sessions, this build (${ms(short.medianMs)} ms) / ${ref} (${ms(beforeShort.medianMs)} ms), same rounds`,
        value: ratio(short.medianMs / beforeShort.medianMs),
        goal: "(reported)",
        result: ""
      },
      {
        figure: `steps: overhead per step at the end of ${int(r.longSteps)} steps, this build (${ms(end.medianMs)} ms) / ${ref} (${ms(beforeEnd.medianMs)} ms)`,
        value: ratio(end.medianMs / beforeEnd.medianMs),
        goal: "(reported)",
        result: ""
      }
    )
    for (const tool of ["write", "bash"] as const) {
      const now = logbook.byTool?.[tool]
      const then = before.byTool?.[tool]
      if (now === undefined || then === undefined) continue
      rows.push({
        figure: `steps: cycle per \`${tool}\` step, this build (${ms(now.medianMs)} ms) / ${ref} (${ms(then.medianMs)} ms), same rounds`,
        value: ratio(now.medianMs / then.medianMs),
        goal: "(reported)",
        result: ""
      })
    }
  }
  if (pi === undefined) {
    rows.push({ figure: "steps: against pi", value: "-", goal: "(skipped)", result: r.piSkipped ?? "" })
    return rows
  }
  rows.push(
    {
      figure: `steps: cycle per step, logbook (${ms(logbook.short.medianMs)} ms) / pi ${PI_VERSION} (${ms(pi.short.medianMs)} ms), ${r.shortSteps}-step sessions`,
      value: ratio(logbook.short.medianMs / pi.short.medianMs),
      goal: "(reported)",
      result: ""
    },
    {
      figure: `steps: peak RSS over ${int(r.longSteps)} steps, logbook (${mib(logbook.peakRssBytes)}) / pi (${mib(pi.peakRssBytes)})`,
      value: ratio(logbook.peakRssBytes / pi.peakRssBytes),
      goal: "≤ 1",
      result: verdict(logbook.peakRssBytes <= pi.peakRssBytes)
    }
  )
  return rows
}

/** a baseline's ref, and its commit when the ref is not that commit already */
const baselineName = (b: { readonly ref: string; readonly commit: string } | undefined): string =>
  b === undefined
    ? "baseline"
    : b.commit.startsWith(b.ref)
      ? b.commit.slice(0, 7)
      : `${b.ref} (${b.commit.slice(0, 7)})`

const stepsMarkdown = (r: StepsResult): string => {
  if (r._tag === "Skipped")
    return `### Steps through the binary

Skipped: ${r.reason}.`
  const window = (w: { readonly medianMs: number; readonly p90Ms: number } | undefined) =>
    w === undefined ? "—" : `${ms(w.medianMs)} (p90 ${ms(w.p90Ms)})`
  const row = (a: AgentSteps) => [
    a.agent === "pi" ? `pi ${PI_VERSION}` : a.agent === "before" ? `logbook ${baselineName(r.baseline)}` : "logbook",
    window(a.short),
    window(a.shortOverhead),
    window(a.longStart),
    window(a.longEnd),
    window(a.longEndOverhead),
    `${(a.longWallMs / 1000).toFixed(1)} s`,
    mib(a.peakRssBytes),
    `${ms(a.resumeMs)} / ${ms(a.freshMs)} = ${ratio(a.resumeMs / a.freshMs)}`
  ]
  return [
    `### Steps through the binary (${r.shortSteps}-step sessions × ${r.rounds}, one ${int(r.longSteps)}-step session each)`,
    "",
    "Cycle: the time between two requests at the scripted server (answer read, events written, `read` of a " +
      "12-byte file, next request sent); overhead: the cycle minus the tool's own time from logbook's log. " +
      `Start: steps 2–41 of the ${int(r.longSteps)}; end: the last 40. Resume: a one-step answer in the long ` +
      "session against one in a fresh workspace, spawn to exit. Medians in ms.",
    "",
    table(
      [
        "agent",
        `cycle, ${r.shortSteps} steps`,
        `overhead, ${r.shortSteps} steps`,
        "cycle, start",
        "cycle, end",
        "overhead, end",
        `${int(r.longSteps)} steps, wall`,
        "peak RSS",
        "resume / fresh (ms)"
      ],
      r.agents.map(row)
    ),
    ...(r.piSkipped !== undefined ? ["", `pi was not run: ${r.piSkipped}.`] : []),
    "",
    "Other tools (logbook only; pi's `bash` is not sandboxed, so not the same work): the median cycle of " +
      "sessions whose steps call `write` (a new small file) or `bash` (`echo`, in the sandbox where " +
      `bubblewrap works), ${r.rounds} round${r.rounds === 1 ? "" : "s"}; medians in ms.`,
    "",
    table(
      ["agent", "cycle, `write` steps", "cycle, `bash` steps"],
      r.agents
        .filter((a) => a.byTool !== undefined)
        .map((a) => [row(a)[0]!, window(a.byTool?.write), window(a.byTool?.bash)])
    )
  ].join("\n")
}

const providerRows = (r: ProviderResult): Array<Row> =>
  r.cases.map((c) => ({
    figure:
      `provider: one openai-compatible request with ${int(c.messages)} messages before it, our client ` +
      `(${c.ownMs.toFixed(2)} ms) / the SDK's package (${c.sdkMs.toFixed(2)} ms), same rounds`,
    value: ratio(c.ownMs / c.sdkMs),
    goal: "(reported)",
    result: ""
  }))

const providerMarkdown = (r: ProviderResult): string =>
  [
    `### One openai-compatible request: our client and the SDK's package (${r.rounds} rounds × ${r.requestsPerRound} requests each, alternated)`,
    "",
    "From the stream's start to its `Finish`, through `makeAiSdkModel` with and without `viaSdk`, to the scripted server in the same process (which neither parses nor keeps the body). Medians in ms.",
    "",
    "| messages before the request | body | our client | the SDK's package | ours / SDK |",
    "|---|---|---|---|---|",
    ...r.cases.map(
      (c) =>
        `| ${int(c.messages)} | ${bytes(c.bodyBytes)} | ${c.ownMs.toFixed(2)} | ${c.sdkMs.toFixed(2)} | ${ratio(c.ownMs / c.sdkMs)} |`
    )
  ].join("\n")

const grepRows = (g: GrepResult): Array<Row> => {
  if (g._tag === "Skipped") return [{ figure: "grep", value: "-", goal: "(skipped)", result: g.reason }]
  const rows: Array<Row> = g.cases.map((c) => {
    const big = c.tree === "big"
    return {
      figure:
        `grep: ${big ? `${int(g.big.files)} files (${bytes(g.big.bytes)})` : "5 files"}, ${c.pattern}: ` +
        `ripgrep (${ms(c.rgMs)} ms) / JavaScript (${ms(c.jsMs)} ms)`,
      value: ratio(c.ratio),
      goal: big ? "< 1" : `(reported: JavaScript below ${RIPGREP_MIN_FILES} files)`,
      result: big ? verdict(c.ratio < 1) : "(reported)"
    }
  })
  rows.push({
    figure: "grep: ripgrep faster (both patterns) from, files",
    value: g.crossover === undefined ? "never" : int(g.crossover),
    goal: `RIPGREP_MIN_FILES = ${RIPGREP_MIN_FILES}`,
    result: "(reported)"
  })
  return rows
}

const grepMarkdown = (g: GrepResult): string => {
  if (g._tag === "Skipped") return `### grep: JavaScript vs ripgrep\n\nSkipped: ${g.reason}.`
  const x = (t: { readonly jsMs: number; readonly rgMs: number }) => `${(t.jsMs / t.rgMs).toFixed(1)}×`
  return [
    `### grep: JavaScript vs ripgrep (\`${g.rg}\`; medians of ${g.rounds} rounds on the large tree, ${g.sweepRounds * 2} on the small one, ${g.sweepRounds} in the sweep)`,
    "",
    table(
      ["tree", "pattern", "matching lines (files)", "JavaScript ms", "ripgrep ms", "ripgrep / JavaScript", "speed-up"],
      g.cases.map((c) => [
        c.tree === "big" ? `${int(g.big.files)} files, ${bytes(g.big.bytes)}` : "5 files",
        c.pattern,
        `${int(c.matches)} (${int(c.files)})`,
        ms(c.jsMs),
        ms(c.rgMs),
        ratio(c.ratio),
        x(c)
      ])
    ),
    "",
    "Sweep (same kind of tree, rare literal and broad pattern):",
    "",
    table(
      [
        "files",
        "rare: JavaScript ms",
        "rare: ripgrep ms",
        "rare: rg / JS",
        "broad: JavaScript ms",
        "broad: ripgrep ms",
        "broad: rg / JS"
      ],
      g.sweep.map((p) => [
        int(p.files),
        ms(p.rare.jsMs),
        ms(p.rare.rgMs),
        ratio(p.rare.ratio),
        ms(p.broad.jsMs),
        ms(p.broad.rgMs),
        ratio(p.broad.ratio)
      ])
    ),
    "",
    `ripgrep faster for both patterns from ${g.crossover === undefined ? "no size of the sweep" : `${int(g.crossover)} files`}; ` +
      `the tool uses it from \`RIPGREP_MIN_FILES\` = ${RIPGREP_MIN_FILES} files (directory searches only).`
  ].join("\n")
}

const snapshotRows = (r: SnapshotResult): Array<Row> => {
  if (r._tag === "Skipped") return [{ figure: "snapshot", value: "-", goal: "(skipped)", result: r.reason }]
  const row = (
    what: string,
    t: { readonly oursMs: number; readonly gitMs: number },
    goal: number | undefined
  ): Row => ({
    figure: `snapshot: ${int(r.files)} files, ${what}: ours (${ms(t.oursMs)} ms) / shadow git (${ms(t.gitMs)} ms)`,
    value: ratio(t.oursMs / t.gitMs),
    goal: goal === undefined ? "(reported)" : `< ${goal}`,
    result: goal === undefined ? "(reported)" : verdict(t.oursMs / t.gitMs < goal)
  })
  return [
    row("unchanged", r.unchanged, 1),
    row("10 changed", r.changed, 1),
    row("first command (baseline)", r.baseline, undefined)
  ]
}

const snapshotMarkdown = (r: SnapshotResult): string => {
  if (r._tag === "Skipped") return `### snapshot: workspace snapshots vs a shadow git\n\nSkipped: ${r.reason}.`
  const line = (what: string, t: { readonly oursMs: number; readonly gitMs: number }) => [
    what,
    ms(t.oursMs),
    ms(t.gitMs),
    ratio(t.oursMs / t.gitMs)
  ]
  return [
    `### snapshot: the workspace snapshot around a command vs a shadow git (${int(r.files)} files, ${bytes(r.bytes)}; medians of ${r.rounds} rounds)`,
    "",
    table(
      ["command", "ours ms", "shadow git ms", "ours / git"],
      [
        line("changed nothing", r.unchanged),
        line("changed 10 files", r.changed),
        line("first of the session (baseline)", r.baseline)
      ]
    ),
    "",
    `The baseline grew the log by ${bytes(r.oursBaselineBytes)}; the shadow repository took ${bytes(r.gitBaselineBytes)}.`
  ].join("\n")
}

const renderRows = (r: RenderResult): Array<Row> => {
  const rows: Array<Row> = [
    {
      figure:
        `render: fold only, a snapshot per delta (${r.foldPerDeltaUs.toFixed(1)} µs a delta) / ` +
        `per batch of 100 (${r.foldBatchedUs.toFixed(1)} µs)`,
      value: ratio(r.foldPerDeltaUs / r.foldBatchedUs),
      goal: "(none: reported)",
      result: "(reported)"
    },
    {
      figure:
        `render: ${int(r.deltas)} deltas, batches of 100 (${ms(r.batch100.ms)} ms, ${r.batch100.frames} frames) / ` +
        `batches of 1,000 (${ms(r.batch1000.ms)} ms, ${r.batch1000.frames} frames)`,
      value: ratio(r.batch100.ms / r.batch1000.ms),
      goal: "(none: reported)",
      result: "(reported)"
    },
    {
      figure:
        `render: one update per delta (${int(r.perDelta.deltas)} deltas in ${ms(r.perDelta.ms)} ms` +
        `${r.perDelta.finished ? "" : `, stopped by the ${int(r.budgetMs / 1000)} s budget`}) / batches of 100 to the same delta (${ms(r.batch100AtPerDelta)} ms)`,
      value: `${r.perDelta.finished ? "" : "≥ "}${ratio(r.perDelta.ms / r.batch100AtPerDelta)}`,
      goal: "(none: reported)",
      result: "(reported)"
    }
  ]
  if (r.batch100Production !== undefined)
    rows.push({
      figure:
        `render: batches of 100, React's development build as the bundle runs it (${ms(r.batch100.ms)} ms) / ` +
        `NODE_ENV=production (${ms(r.batch100Production.ms)} ms)`,
      value: ratio(r.batch100.ms / r.batch100Production.ms),
      goal: "(none: reported)",
      result: "(reported)"
    })
  return rows
}

const renderMarkdown = (r: RenderResult): string => {
  const row = (run: RenderRun, react = "development") => [
    `${run.name}${react === "development" ? "" : ` (${react})`}`,
    `${int(run.deltas)}${run.finished ? "" : " (budget)"}`,
    ms(run.ms),
    int(run.updates),
    react === "development" ? int(run.commits) : "—",
    int(run.frames),
    ms(run.ms / Math.max(1, run.frames)),
    int(run.clears),
    bytes(run.bytes)
  ]
  return [
    `### Rendering the interactive screen (${int(r.deltas)} text deltas, ${bytes(r.textChars)} of text)`,
    "",
    `Fold only (median of ${r.foldRounds} rounds): ${r.foldPerDeltaUs.toFixed(1)} µs a delta with a snapshot per delta, ` +
      `${r.foldBatchedUs.toFixed(1)} µs with one per batch of 100.`,
    "",
    table(
      [
        "store updates",
        "deltas drawn",
        "ms",
        "updates",
        "React commits",
        "frames",
        "ms a frame",
        "frames that cleared the terminal",
        "written"
      ],
      [
        row(r.batch1000),
        row(r.batch100),
        row(r.perDelta),
        ...(r.batch100Production === undefined ? [] : [row(r.batch100Production, "NODE_ENV=production")])
      ]
    ),
    "",
    `One update per delta reached delta ${int(r.perDelta.deltas)} in ${ms(r.perDelta.ms)} ms; the batches of 100 ` +
      `drew as far in ${ms(r.batch100AtPerDelta)} ms.`
  ].join("\n")
}

const machine = () => {
  const cpus = os.cpus()
  return (
    `${os.availableParallelism()} cores (${cpus[0]?.model.trim() ?? "unknown CPU"}), ` +
    `${(os.totalmem() / 2 ** 30).toFixed(0)} GB RAM, Node ${process.version}, ${os.platform()} ${os.arch()}`
  )
}

const load = () =>
  os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(" ")

const writeInto = (file: string, block: string) => {
  const current = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : ""
  const begin = current.indexOf(BEGIN)
  const end = current.indexOf(END)
  const wrapped = `${BEGIN}\n${block}\n${END}`
  const next =
    begin >= 0 && end > begin
      ? current.slice(0, begin) + wrapped + current.slice(end + END.length)
      : `${current}${current === "" || current.endsWith("\n") ? "" : "\n"}${wrapped}\n`
  fs.writeFileSync(file, next)
}

// ---------------------------------------------------------------------------------------------

const main = async () => {
  const args = parseArgs(process.argv.slice(2))
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "logbook-bench-"))
  const cleanup = () => fs.rmSync(dir, { recursive: true, force: true })
  process.once("SIGINT", () => {
    cleanup()
    process.exit(130)
  })
  const started = performance.now()
  const loadBefore = load()
  console.log(`logbook benchmarks — ${machine()}; load average ${loadBefore}`)
  const rows: Array<Row> = []
  const sections: Array<string> = []
  try {
    for (const name of args.names) {
      const t = performance.now()
      if (name === "append") {
        const count = args.quick ? 10_000 : 50_000
        console.log(`\nappend: ${int(count)} events, raw and store variants alternated …`)
        const sub = fs.mkdtempSync(path.join(dir, "append-"))
        const r = await benchAppend(sub, count, APPEND_ROUNDS)
        rows.push(...appendRows(r))
        sections.push(appendMarkdown(r))
      } else if (name === "restore") {
        console.log("\nrestore: building sessions and measuring restore vs full fold …")
        const sub = fs.mkdtempSync(path.join(dir, "restore-"))
        const r = await benchRestore(
          sub,
          args.quick
            ? { headlineCount: 20_000, sizes: [2_000, 20_000], rounds: () => 3, log: console.log }
            : { log: console.log }
        )
        rows.push(...restoreRows(r))
        sections.push(restoreMarkdown(r))
      } else if (name === "stats") {
        const events = args.quick ? 50_000 : 1_000_000
        console.log(`\nstats: a store of ${int(events)} events, stats and the fold alternated …`)
        const sub = fs.mkdtempSync(path.join(dir, "stats-"))
        const r = await benchStats(path.join(sub, "stats.db"), events, args.quick ? 1 : STATS_ROUNDS)
        rows.push(...statsRows(r))
        sections.push(statsMarkdown(r))
      } else if (name === "kernel") {
        const rounds = args.quick ? 3 : 7
        const shape = args.quick ? QUICK_SHAPE : DEFAULT_SHAPE
        console.log(`\nkernel: one scripted turn through the kernel and straight to the store, ${rounds} rounds …`)
        const sub = fs.mkdtempSync(path.join(dir, "kernel-"))
        const r = await benchKernel(sub, { shape, rounds, log: console.log })
        rows.push(...kernelRows(r))
        sections.push(kernelMarkdown(r))
      } else if (name === "steps") {
        console.log(
          `\nsteps: logbook${args.baseline === undefined ? "" : `, logbook ${args.baseline}`} and pi through their binaries on the scripted server …`
        )
        const sub = fs.mkdtempSync(path.join(dir, "steps-"))
        let baseline: { ref: string; commit: string; bin: string } | undefined
        if (args.baseline !== undefined) {
          console.log(`  building the baseline ${args.baseline} …`)
          baseline = { ref: args.baseline, ...buildBaseline(args.baseline, path.join(sub, "baseline")) }
        }
        const r = await benchSteps(sub, {
          ...(args.quick ? { shortSteps: 10, longSteps: 60, rounds: 2 } : {}),
          baseline,
          log: console.log
        })
        rows.push(...stepsRows(r))
        sections.push(stepsMarkdown(r))
      } else if (name === "provider") {
        console.log("\nprovider: openai-compatible requests, our client and the SDK's package alternated …")
        const r = await benchProvider({ ...(args.quick ? { rounds: 2, requestsPerRound: 5 } : {}), log: console.log })
        rows.push(...providerRows(r))
        sections.push(providerMarkdown(r))
      } else if (name === "grep") {
        console.log("\ngrep: JavaScript and ripgrep searches alternated on generated trees …")
        const sub = fs.mkdtempSync(path.join(dir, "grep-"))
        const r = await benchGrep(sub, { quick: args.quick, log: console.log })
        rows.push(...grepRows(r))
        sections.push(grepMarkdown(r))
      } else if (name === "snapshot") {
        console.log("\nsnapshot: workspace snapshots and a shadow git alternated on a generated tree …")
        const sub = fs.mkdtempSync(path.join(dir, "snapshot-"))
        const r = await benchSnapshot(sub, { quick: args.quick, log: console.log })
        rows.push(...snapshotRows(r))
        sections.push(snapshotMarkdown(r))
      } else if (name === "startup") {
        const runs = args.quick ? 4 : 20
        console.log(
          `\nstartup: ${runs} spawns of each command, round-robin${args.baseline === undefined ? "" : `, beside ${args.baseline}`} …`
        )
        const sub = fs.mkdtempSync(path.join(dir, "startup-"))
        const r = await benchStartup({
          dir: sub,
          runs,
          firstFrameRuns: args.quick ? 3 : 10,
          baseline: args.baseline,
          log: console.log
        })
        rows.push(...startupRows(r))
        sections.push(startupMarkdown(r))
      } else if (name === "render") {
        const deltas = args.quick ? 2_000 : 10_000
        console.log(`\nrender: ${int(deltas)} text deltas folded and drawn, batched and one by one …`)
        const r = await benchRender({
          deltas,
          budgetMs: args.quick ? 5_000 : 60_000,
          foldRounds: args.quick ? 3 : 7,
          production: true,
          log: console.log
        })
        rows.push(...renderRows(r))
        sections.push(renderMarkdown(r))
      } else {
        const runs = args.quick ? 6 : 20
        console.log(`\ncoldstart: ${runs} spawns of each, alternated …`)
        const r = benchColdStart(runs, 2)
        rows.push(...coldRows(r))
        sections.push(coldMarkdown(r))
      }
      console.log(`  (${((performance.now() - t) / 1000).toFixed(0)} s)`)
    }
  } finally {
    cleanup()
  }
  const elapsed = (performance.now() - started) / 1000
  const loadAfter = load()

  console.log("\nsummary (ratios measured side by side in this run)\n")
  const width = Math.max(...rows.map((r) => r.figure.length))
  for (const r of rows) {
    console.log(`  ${r.figure.padEnd(width)}  ${r.value.padStart(8)}  goal ${r.goal.padEnd(34)} ${r.result}`)
  }

  const block = [
    `Run of ${new Date().toISOString().slice(0, 10)}: ${machine()}. ` +
      `Load average ${loadBefore} before, ${loadAfter} after; ${elapsed.toFixed(0)} s in all` +
      `${args.quick ? " (`--quick` sizes)" : ""}.`,
    "",
    table(
      ["figure", "ratio", "goal", "result"],
      rows.map((r) => [r.figure, r.value, r.goal, r.result])
    ),
    "",
    ...sections.flatMap((s) => [s, ""])
  ]
    .join("\n")
    .trimEnd()
  if (args.write !== undefined) {
    writeInto(args.write, block)
    console.log(`\nfigures written to ${args.write}`)
  } else {
    console.log(`\n--- markdown (or: npm run bench -- --write docs/benchmarks.md) ---\n\n${block}\n`)
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? (error.stack ?? error.message) : String(error))
  process.exitCode = 1
})
