/**
 * The interactive screen under a long streamed answer: 10,000 `text.delta` envelopes (1,000 lines
 * with some markdown) folded into the screen model (`makeScreenFolder`) and drawn by the App the
 * way the controller renders it (Ink, not debug, `maxFps` 30, a fake terminal of 100 × 40), side by
 * side in one run:
 *
 * - **fold only**: one `push` + `snapshot` per delta, against one per batch of 100;
 * - **batches of 1,000 and of 100**: one store update per batch, as the controller does
 *   (`Stream.groupedWithin(1000, "16 millis")`: under load a batch is up to 1,000 envelopes);
 * - **one store update per delta**, within a time budget (it falls behind: every frame draws the
 *   whole text, which stays live until the turn ends), against the batches of 100 at the same delta;
 * - the batches of 100 again with React's production build, in a child process (`NODE_ENV` picks
 *   React's build when it is loaded; the bundle does not set it, so logbook runs the development
 *   build, and so does the rest of this benchmark).
 *
 * Between two updates the event loop turns once (`setImmediate`), as it does between two batches of
 * the controller: React draws the update (it schedules the render as a microtask) and Ink's 30 fps
 * throttle can fire. Counted: store updates, React commits of the App (a `Profiler`; the production
 * build does not report them), frames Ink rendered (`onRender`), frames that cleared the terminal
 * and its scrollback (Ink does when the live part is taller than the terminal), bytes written.
 * Every run ends with the turn's end; the frames after it must show the text's last line and the
 * idle status line, else the run fails.
 *
 *   node --expose-gc --import tsx bench/render.ts [--quick]     this benchmark alone
 */
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { render } from "ink"
import { createElement, Profiler } from "react"
import { type Actions, App } from "../src/cli/tui/App.js"
import { makeTheme } from "../src/cli/tui/theme.js"
import { makeScreenFolder } from "../src/present/screen.js"
import { checked, FakeStdin, FakeStdout, Log, makeStore, SID, uiState, usage } from "../test/cli/tui/scripted.js"
import { gc, median, now } from "./util.js"

/** Pieces of an answer, ten to a line (1,000 lines for 10,000 deltas), some markdown in them. */
const PIECES = [
  "The ",
  "writer ",
  "fiber ",
  "commits ",
  "**pending** ",
  "deltas ",
  "in ",
  "`one` ",
  "transaction",
  ".\n"
]
const delta = (i: number) => PIECES[i % PIECES.length]!
/** A line as the log holds it, and as the screen shows it */
const RAW_LINE = PIECES.join("")
const LAST_LINE = "The writer fiber commits pending deltas in one transaction."

const COLUMNS = 100

export interface RenderOptions {
  readonly deltas: number
  /** how long the one-update-per-delta run may take (ms) */
  readonly budgetMs: number
  readonly foldRounds: number
  /** also run the batches of 100 with React's production build (a child process) */
  readonly production: boolean
  readonly log?: (line: string) => void
}

export interface RenderRun {
  readonly name: string
  /** deltas folded and drawn in `ms` (fewer than asked when the budget ran out) */
  readonly deltas: number
  readonly ms: number
  readonly updates: number
  readonly commits: number
  readonly frames: number
  /** frames that cleared the terminal (and its scrollback) and wrote everything again */
  readonly clears: number
  readonly bytes: number
  /** ms from the start at which each batch had been drawn: [deltas so far, ms] */
  readonly progress: ReadonlyArray<readonly [number, number]>
  readonly finished: boolean
}

export interface RenderResult {
  readonly deltas: number
  readonly budgetMs: number
  readonly textChars: number
  readonly foldRounds: number
  /** µs per delta: push + snapshot per delta, and per batch of 100 (medians) */
  readonly foldPerDeltaUs: number
  readonly foldBatchedUs: number
  readonly batch1000: RenderRun
  readonly batch100: RenderRun
  readonly perDelta: RenderRun
  /** ms the batches of 100 took to draw as many deltas as the per-delta run did */
  readonly batch100AtPerDelta: number
  /** the batches of 100 again in a child process with NODE_ENV=production (React's production build) */
  readonly batch100Production: RenderRun | undefined
}

const noop = () => undefined
const actions: Actions = {
  submit: noop,
  editPending: noop,
  sendPending: noop,
  interrupt: noop,
  quit: noop,
  answer: noop,
  openSession: noop,
  closeOverlay: noop,
  redraw: noop
}

const turn = () => new Log().created().startTurn("explain the writer fiber")

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve))

/** Fold only: `deltas` deltas, a snapshot every `batch`. µs per delta. */
const foldOnly = (deltas: number, batch: number): number => {
  const log = turn()
  const folder = makeScreenFolder(SID)
  folder.push(log.take())
  for (let i = 0; i < deltas; i++) log.text(delta(i))
  const envelopes = log.take()
  gc()
  const start = now()
  for (let i = 0; i < envelopes.length; i += batch) {
    folder.push(envelopes.slice(i, i + batch))
    folder.snapshot()
  }
  const ms = now() - start
  const screen = checked(folder)
  const item = screen.items[1]
  if (item?.kind !== "text" || !item.text.endsWith(RAW_LINE)) throw new Error("the fold lost deltas")
  return (ms * 1000) / deltas
}

/** Folds and draws `deltas` deltas, one store update per `batch`, within `budgetMs`. */
const drawRun = async (name: string, deltas: number, batch: number, budgetMs: number): Promise<RenderRun> => {
  const log = turn()
  const folder = makeScreenFolder(SID)
  folder.push(log.take())
  const store = makeStore(uiState(checked(folder)))
  const stdout = new FakeStdout(COLUMNS)
  let clears = 0
  let bytes = 0
  // what was written since the last update (static output and the live part come in separate writes)
  let since = ""
  const write = stdout.write
  stdout.write = (frame: string) => {
    bytes += Buffer.byteLength(frame)
    since += frame
    if (frame.includes("\u001b[3J")) clears += 1
    return write(frame)
  }
  let commits = 0
  let frames = 0
  const tree = createElement(
    Profiler,
    {
      id: "app",
      onRender: () => {
        commits += 1
      }
    },
    createElement(App, { store, actions, theme: makeTheme(false) })
  )
  const instance = render(tree, {
    stdout: stdout as unknown as NodeJS.WriteStream,
    stderr: new FakeStdout(COLUMNS) as unknown as NodeJS.WriteStream,
    stdin: new FakeStdin() as unknown as NodeJS.ReadStream,
    exitOnCtrlC: false,
    patchConsole: false,
    maxFps: 30,
    onRender: () => {
      frames += 1
    }
  })
  await nextTurn()
  const startCommits = commits
  const startFrames = frames
  let updates = 0
  const progress: Array<readonly [number, number]> = []
  gc()
  const start = now()
  let done = 0
  let finished = true
  for (let i = 0; i < deltas; i++) {
    log.text(delta(i))
    if ((i + 1) % batch === 0 || i === deltas - 1) {
      folder.push(log.take())
      store.set((s) => ({ ...s, screen: folder.snapshot() }))
      updates += 1
      await nextTurn()
      done = i + 1
      progress.push([done, now() - start])
      if (now() - start > budgetMs && done < deltas) {
        finished = false
        break
      }
    }
  }
  let ms = now() - start
  // the rest (when the budget ran out) and the turn's end, then the last frame must show both
  for (let i = done; i < deltas; i++) log.text(delta(i))
  log.finishStep(0, usage(5_000, 25_000, 0.3125)).endTurn()
  folder.push(log.take())
  since = ""
  store.set((s) => ({ ...s, screen: checked(folder) }))
  const shows = () => since.includes(LAST_LINE) && stdout.last.includes("idle │")
  const deadline = now() + 30_000
  while (!shows()) {
    if (now() > deadline) throw new Error(`${name}: the last frame does not show the end of the text and idle`)
    await new Promise((resolve) => setTimeout(resolve, 1))
  }
  if (finished) ms = now() - start
  instance.unmount()
  instance.cleanup()
  return {
    name,
    deltas: done,
    ms,
    updates,
    commits: commits - startCommits,
    frames: frames - startFrames,
    clears,
    bytes,
    progress,
    finished
  }
}

export const benchRender = async (options: RenderOptions): Promise<RenderResult> => {
  const say = options.log ?? (() => undefined)
  const per: Array<number> = []
  const batched: Array<number> = []
  foldOnly(options.deltas, 1) // warm-up
  for (let r = 0; r < options.foldRounds; r++) {
    // alternate which goes first
    if (r % 2 === 0) {
      per.push(foldOnly(options.deltas, 1))
      batched.push(foldOnly(options.deltas, 100))
    } else {
      batched.push(foldOnly(options.deltas, 100))
      per.push(foldOnly(options.deltas, 1))
    }
  }
  say(
    `  fold only: ${median(per).toFixed(2)} µs a delta one by one, ${median(batched).toFixed(2)} µs in batches of 100`
  )
  await drawRun("warm-up", Math.min(1000, options.deltas), 100, options.budgetMs)
  const batch1000 = await drawRun("batches of 1,000", options.deltas, 1000, Number.POSITIVE_INFINITY)
  say(`  batches of 1,000: ${batch1000.ms.toFixed(0)} ms, ${batch1000.frames} frames`)
  const batch100 = await drawRun("batches of 100", options.deltas, 100, Number.POSITIVE_INFINITY)
  say(`  batches of 100: ${batch100.ms.toFixed(0)} ms, ${batch100.frames} frames`)
  const perDelta = await drawRun("one update per delta", options.deltas, 1, options.budgetMs)
  say(
    `  one update per delta: ${perDelta.finished ? "" : "stopped by the budget after "}${perDelta.deltas} deltas in ${perDelta.ms.toFixed(0)} ms, ${perDelta.frames} frames`
  )
  const at = batch100.progress.find(([n]) => n >= perDelta.deltas) ?? batch100.progress.at(-1)!
  const batch100Production = options.production ? productionRun(options.deltas) : undefined
  if (batch100Production !== undefined)
    say(
      `  batches of 100, NODE_ENV=production: ${batch100Production.ms.toFixed(0)} ms, ${batch100Production.frames} frames`
    )
  return {
    deltas: options.deltas,
    budgetMs: options.budgetMs,
    textChars: Array.from({ length: options.deltas }, (_, i) => delta(i)).join("").length,
    foldRounds: options.foldRounds,
    foldPerDeltaUs: median(per),
    foldBatchedUs: median(batched),
    batch1000,
    batch100,
    perDelta,
    batch100AtPerDelta: at[1],
    batch100Production
  }
}

const self = fileURLToPath(import.meta.url)

/**
 * React picks its build when it is first loaded, from NODE_ENV: the bundle (scripts/build.mjs) does
 * not set it, so logbook runs React's development build, as this process does (it must: the benchmark
 * measures what a user gets). The production build is measured in a child process.
 */
const productionRun = (deltas: number): RenderRun => {
  const child = spawnSync(process.execPath, ["--expose-gc", "--import", "tsx", self, "--child", String(deltas)], {
    env: { ...process.env, NODE_ENV: "production" },
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024
  })
  if (child.status !== 0) throw new Error(`the production run failed: ${child.stderr}`)
  return JSON.parse(child.stdout.trim().split("\n").at(-1)!) as RenderRun
}

const main = async () => {
  const child = process.argv.indexOf("--child")
  if (child >= 0) {
    const deltas = Number(process.argv[child + 1])
    await drawRun("warm-up", Math.min(1000, deltas), 100, Number.POSITIVE_INFINITY)
    const run = await drawRun("batches of 100", deltas, 100, Number.POSITIVE_INFINITY)
    console.log(JSON.stringify({ ...run, progress: [] }))
    return
  }
  const quick = process.argv.includes("--quick")
  const r = await benchRender({
    deltas: quick ? 2_000 : 10_000,
    budgetMs: quick ? 5_000 : 60_000,
    foldRounds: quick ? 3 : 7,
    production: true,
    log: console.log
  })
  const brief = (run: RenderRun | undefined) => (run === undefined ? undefined : { ...run, progress: undefined })
  console.log(
    JSON.stringify(
      {
        ...r,
        batch1000: brief(r.batch1000),
        batch100: brief(r.batch100),
        perDelta: brief(r.perDelta),
        batch100Production: brief(r.batch100Production)
      },
      null,
      2
    )
  )
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((error: unknown) => {
    console.error(error)
    process.exitCode = 1
  })
}
