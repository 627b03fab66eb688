/**
 * `logbook` on a terminal: the interactive session (DESIGN §10). This module is the controller
 * between the screen (App.tsx, Ink) and the agent (`Sessions` over the SQLite log): it opens or
 * creates the session, folds its log and then every committed envelope of it from the `EventBus`
 * into the screen model, answers the screen's actions (send, steer, queue, interrupt, approve,
 * the slash commands) with `Sessions` calls, and on the way out interrupts what runs and releases
 * the session — whatever ends it (Ctrl-D, /quit, Ctrl-C twice, a signal).
 *
 * Loaded with a dynamic `import()` by the command, so the read commands never load Ink or React.
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import { Cause, Chunk, Deferred, Effect, Exit, Fiber, Layer, Option, Runtime, Scope, Stream } from "effect"
import { render } from "ink"
import { createElement } from "react"
import type { ConfigInput } from "../../config/Config.js"
import { expandCommand, matchCommand, nearMissCommand } from "../../config/CustomCommands.js"
import type { Envelope } from "../../domain/Events.js"
import type { SessionId } from "../../domain/Ids.js"
import {
  attachResource,
  MAX_ATTACHMENTS,
  McpServers,
  parsePromptCommand,
  parseResourceCommand,
  promptMessage,
  promptUsage
} from "../../mcp/McpServers.js"
import type { ReasoningSetting } from "../../model/Reasoning.js"
import { makeScreenFolder, pendingMessages, type ScreenFolder } from "../../present/screen.js"
import { formatCount } from "../../present/text.js"
import { Sessions } from "../../session/Sessions.js"
import { auditSession } from "../../store/Audit.js"
import { EventBus } from "../../store/EventBus.js"
import { EventStore } from "../../store/EventStore.js"
import { type ApprovalAnswer, type ApprovalRequest, Approver } from "../../tools/Approver.js"
import { findResumed, setupAgent } from "../agentSetup.js"
import { auditReport } from "../audit.js"
import { customCommandsOf } from "../customCommands.js"
import { CliError, ExitCode } from "../errors.js"
import { eventLine } from "../eventText.js"
import { warnIfDamaged } from "../integrity.js"
import { makeStyle } from "../render.js"
import { titleOf } from "../run.js"
import { costText, listSessions, updatedText } from "../sessionsList.js"
import { interruptReason } from "../signals.js"
import { type Actions, App, COMMANDS, type UiState, type UiStore } from "./App.js"
import { MAX_HISTORY } from "./editor.js"
import { makeTheme } from "./theme.js"

export interface InteractiveOptions {
  readonly cwd: string
  readonly flags: ConfigInput
  readonly reasoning: ReasoningSetting | undefined
  readonly db: Option.Option<string>
  readonly session: Option.Option<string>
  readonly continue: boolean
  /** a first message to send */
  readonly message: string | undefined
  readonly yes: boolean
  readonly colors: boolean
  readonly stdin: NodeJS.ReadStream
  readonly stdout: NodeJS.WriteStream
}

/** The signals logbook handles (`cli/signals.ts`): the runtime turns them into an interrupt. */
const handledSignals = ["SIGINT", "SIGTERM", "SIGHUP"] as const

/** Clears the screen and its scrollback, cursor home: what was printed is drawn again after it. */
const CLEAR = "\u001b[2J\u001b[3J\u001b[H"

const PASTE_ON = "\u001b[?2004h"
const PASTE_OFF = "\u001b[?2004l"

/** The most bytes of one blob the screen reads to show a diff. */
const MAX_DIFF_BLOB = 1024 * 1024
/** The prompt history: the user messages of this many recent sessions of the directory, at most MAX_HISTORY. */
const HISTORY_SESSIONS = 10

/** The most events `/events` shows (the newest). */
const MAX_EVENT_LINES = 5000

const makeUiStore = (initial: UiState) => {
  let state = initial
  const listeners = new Set<() => void>()
  const store: UiStore & { readonly set: (update: (state: UiState) => UiState) => void } = {
    get: () => state,
    subscribe: (listener) => {
      listeners.add(listener)
      return () => listeners.delete(listener)
    },
    set: (update) => {
      state = update(state)
      for (const listener of listeners) listener()
    }
  }
  return store
}

/** The approver of the screen: one question at a time, answered by a selection (App.tsx). */
const makeScreenApprover = (onAsk: (request: ApprovalRequest | undefined) => void) =>
  Effect.gen(function* () {
    const one = yield* Effect.makeSemaphore(1)
    let current: Deferred.Deferred<ApprovalAnswer> | undefined
    const ask = (request: ApprovalRequest) =>
      one.withPermits(1)(
        Effect.gen(function* () {
          const answer = yield* Deferred.make<ApprovalAnswer>()
          current = answer
          onAsk(request)
          return yield* Deferred.await(answer)
        }).pipe(
          Effect.ensuring(
            Effect.sync(() => {
              current = undefined
              onAsk(undefined)
            })
          )
        )
      )
    return {
      layer: Layer.succeed(Approver, { ask }),
      answer: (answer: ApprovalAnswer) =>
        current === undefined ? Effect.void : Effect.asVoid(Deferred.succeed(current, answer))
    }
  })

type ScreenStore = ReturnType<typeof makeUiStore>

/** The screen before anything is shown: an empty session, nothing asked. */
const initialUiState = (): UiState => ({
  screen: makeScreenFolder("" as SessionId).snapshot(),
  blobs: new Map(),
  model: "",
  contextWindow: undefined,
  maxAttempts: 1,
  approval: undefined,
  interrupting: false,
  flash: undefined,
  overlay: undefined,
  epoch: 0,
  history: []
})

/**
 * The agent of one model: its layers built in a scope of their own (`/model`, and opening a session
 * that is on another model, build another). `sessionModel`: the model of the session it is for,
 * used unless `flags` names one.
 */
const buildAgent = (
  options: InteractiveOptions,
  approver: Layer.Layer<Approver>,
  flags: ConfigInput,
  sessionModel?: string | undefined
) =>
  Effect.gen(function* () {
    const setup = yield* setupAgent({
      cwd: options.cwd,
      flags,
      sessionModel,
      reasoning: options.reasoning,
      db: options.db,
      approver
    })
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(setup.layer, scope).pipe(
      Effect.mapError((error) => CliError.usage(`cannot open the database: ${error.message}`)),
      Effect.tapError(() => Scope.close(scope, Exit.void))
    )
    return { setup, scope, context }
  })
type Agent = Effect.Effect.Success<ReturnType<typeof buildAgent>>

/** What the steps of the interactive session share: the screen's store, the agent in use, the session shown. */
interface Controller {
  readonly options: InteractiveOptions
  readonly ui: ScreenStore
  readonly quit: Deferred.Deferred<void>
  readonly approver: Layer.Layer<Approver>
  readonly runtime: Runtime.Runtime<FileSystem.FileSystem | Path.Path>
  /** one session created at a time: the first message of a new session creates it */
  readonly creating: Effect.Semaphore
  /** replaced by `/model`, and by opening a session that is on another model */
  agent: Agent
  /** What drives the screen for one session: the fold and the fiber that feeds it. */
  current: { readonly id: SessionId; readonly feeder: Fiber.RuntimeFiber<void, unknown> } | undefined
  /** the screen is on the terminal (a new session's screen then starts from a clear one) */
  mounted: boolean
  /** resources `/mcp-resource` attached to the next message, as text */
  attached: Array<string>
}

/** Runs `effect` on the agent in use now. */
const withAgent = <A, E, R>(ctl: Controller, effect: Effect.Effect<A, E, R>) =>
  Effect.provide(effect, ctl.agent.context)

const modelInfo = (a: Agent) => ({
  model: a.setup.resolved.ref,
  contextWindow: a.setup.info.contextWindow?.value,
  maxAttempts: a.setup.settings.retry.maxAttempts
})

const flash = (ui: ScreenStore, tone: "info" | "error", text: string) =>
  ui.set((s) => ({ ...s, flash: { tone, text } }))

/** Reads the blobs of the folder's file changes that the screen does not hold yet, for their diffs. */
const loadBlobs = (ui: ScreenStore, folder: ScreenFolder) =>
  Effect.gen(function* () {
    const store = yield* EventStore
    const screen = folder.snapshot()
    const wanted = new Set<string>()
    for (const list of Object.values(screen.changes))
      for (const change of list) {
        if (change.beforeHash !== undefined) wanted.add(change.beforeHash)
        if (change.afterHash !== undefined) wanted.add(change.afterHash)
      }
    const known = ui.get().blobs
    const missing = [...wanted].filter((hash) => !known.has(hash))
    if (missing.length === 0) return
    const loaded = new Map(known)
    for (const hash of missing) {
      const blob = yield* store.getBlob(hash).pipe(Effect.orElseSucceed(() => Option.none<Uint8Array>()))
      loaded.set(
        hash,
        Option.match(blob, {
          onNone: () => null,
          onSome: (bytes) => (bytes.byteLength > MAX_DIFF_BLOB ? null : Buffer.from(bytes).toString("utf8"))
        })
      )
    }
    ui.set((s) => ({ ...s, blobs: loaded }))
  })

/** What was sent in this directory's recent sessions, for Up/Down (newest last): indexed reads only. */
const promptHistory = (cwd: string) =>
  Effect.gen(function* () {
    const store = yield* EventStore
    const recent = yield* store.sessions({ cwd, limit: HISTORY_SESSIONS })
    const texts: Array<string> = []
    for (const summary of [...recent].reverse()) {
      const headers = yield* Stream.runCollect(store.query({ types: ["user.message"], sessionId: summary.id }))
      for (const header of Chunk.toReadonlyArray(headers).slice(-MAX_HISTORY)) {
        const events = yield* Stream.runCollect(store.readRaw(summary.id, { from: header.seq, to: header.seq }))
        for (const event of events) {
          const text = (event.payload as { readonly text?: unknown }).text
          if (typeof text === "string") texts.push(text)
        }
      }
    }
    return texts.slice(-MAX_HISTORY)
  }).pipe(Effect.orElseSucceed(() => [] as Array<string>))

/**
 * A new session: a blank screen; the session is created (titled after it) by the first message,
 * so opening logbook and leaving writes nothing.
 */
const showNew = (ctl: Controller) =>
  Effect.gen(function* () {
    const history = yield* promptHistory(ctl.options.cwd)
    if (ctl.mounted) ctl.options.stdout.write(CLEAR)
    ctl.ui.set((s) => ({
      ...s,
      ...modelInfo(ctl.agent),
      screen: makeScreenFolder("" as SessionId).snapshot(),
      epoch: s.epoch + 1,
      overlay: undefined,
      flash: undefined,
      history
    }))
  })

/** Opens a session and feeds the screen from its log, then from the bus. */
const show = (ctl: Controller, id: SessionId) =>
  Effect.gen(function* () {
    const { ui } = ctl
    const sessions = yield* Sessions
    const store = yield* EventStore
    const bus = yield* EventBus
    const scope = yield* Scope.make()
    // subscribe first: nothing committed between reading the log and following it is missed
    const queue = yield* bus.subscribe.pipe(Scope.extend(scope))
    yield* sessions.open(id)
    const folder = makeScreenFolder(id)
    const log = yield* Stream.runCollect(store.read(id))
    folder.push(Chunk.toReadonlyArray(log))
    const history = yield* promptHistory(ctl.options.cwd)
    const feeder = yield* Stream.fromQueue(queue).pipe(
      Stream.filter((env: Envelope) => env.sessionId === id),
      // what arrives together is drawn together: the screen keeps up with any stream of deltas
      Stream.groupedWithin(1000, "16 millis"),
      Stream.runForEach((batch) =>
        Effect.gen(function* () {
          folder.push(Chunk.toReadonlyArray(batch))
          ui.set((s) => ({ ...s, screen: folder.snapshot() }))
          if (Chunk.some(batch, (env) => env.type === "file.changed")) yield* loadBlobs(ui, folder)
        })
      ),
      Effect.ensuring(Scope.close(scope, Exit.void)),
      Effect.forkDaemon
    )
    // the session is the one the keys act on before it is shown: a key pressed at once is not lost
    ctl.current = { id, feeder }
    // another session's screen was printed: start from a clear screen
    if (ctl.mounted) ctl.options.stdout.write(CLEAR)
    ui.set((s) => ({
      ...s,
      ...modelInfo(ctl.agent),
      screen: folder.snapshot(),
      epoch: s.epoch + 1,
      overlay: undefined,
      flash: undefined,
      history
    }))
    yield* loadBlobs(ui, folder)
    return id
  })

/** Stops feeding the screen and releases the session (interrupting its turn, reason `user`). */
const leave = (ctl: Controller) =>
  Effect.gen(function* () {
    if (ctl.current === undefined) return
    const { id, feeder } = ctl.current
    ctl.current = undefined
    const sessions = yield* Sessions
    // leaving because of a signal: its reason (SIGTERM `shutdown`, SIGHUP `hangup`)
    yield* sessions.interrupt(id, interruptReason()).pipe(Effect.ignore)
    yield* sessions.close(id)
    yield* Fiber.interrupt(feeder)
  })

/** Leaves the session shown, puts `next` in the place of the agent, and shows session `id` (or a new one). */
const replaceAgent = (ctl: Controller, next: Agent, id: SessionId | undefined) =>
  Effect.gen(function* () {
    yield* leave(ctl)
    yield* Scope.close(ctl.agent.scope, Exit.void)
    ctl.agent = next
    yield* withAgent(ctl, id === undefined ? showNew(ctl) : show(ctl, id))
  })

/** The session a message goes to: the one shown, or (the first message of a new one) created now. */
const sessionFor = (ctl: Controller, message: string) =>
  ctl.creating.withPermits(1)(
    Effect.gen(function* () {
      if (ctl.current !== undefined) return ctl.current.id
      const sessions = yield* Sessions
      // the title is cut from the message: masked first, so the cut cannot leave part of a key
      const title = titleOf(ctl.agent.setup.secrets.redactText(message))
      const id = yield* sessions.create({ cwd: ctl.options.cwd, title })
      yield* show(ctl, id)
      return id
    })
  )

/** Runs `effect` on the agent in use, in the background; a failure is shown as the flash line. */
const fork = <A, E>(
  ctl: Controller,
  effect: Effect.Effect<A, E, Sessions | EventStore | EventBus | McpServers | FileSystem.FileSystem | Path.Path>
) =>
  Runtime.runFork(ctl.runtime)(
    withAgent(ctl, effect).pipe(
      Effect.catchAllCause((cause) =>
        Cause.isInterruptedOnly(cause)
          ? Effect.void
          : Effect.sync(() => flash(ctl.ui, "error", errorText(Cause.squash(cause))))
      )
    )
  )

const sessionId = (ctl: Controller) => ctl.current?.id

/** `/sessions`: the directory's sessions as a list to open one from. */
const sessionsOverlay = (ctl: Controller) =>
  Effect.gen(function* () {
    const listed = yield* listSessions({ all: false, limit: 200, cwd: ctl.options.cwd })
    const now = Date.now()
    ctl.ui.set((s) => ({
      ...s,
      overlay: {
        kind: "sessions",
        rows: listed.map(({ summary, shortId, outcome }) => ({
          id: summary.id,
          label: [
            updatedText(summary.updatedAt, now).padEnd(11),
            outcome.padEnd(11),
            costText(summary).padStart(9),
            `${summary.title ?? "(untitled)"}${summary.id === sessionId(ctl) ? " (this one)" : ""}`,
            shortId
          ].join("  ")
        }))
      }
    }))
  })

/** `/model` shows the model in use; `/model <provider/model>` switches the agent to another. */
const switchModel = (ctl: Controller, arg: string, busy: boolean) =>
  Effect.gen(function* () {
    if (arg === "") {
      const info = modelInfo(ctl.agent)
      return flash(
        ctl.ui,
        "info",
        `model ${info.model}${info.contextWindow === undefined ? "" : ` · context ${formatCount(info.contextWindow)} tokens`} · /model <provider/model> switches`
      )
    }
    if (busy) return needIdle(ctl, "/model")
    const next = yield* buildAgent(ctl.options, ctl.approver, { ...ctl.options.flags, model: arg }).pipe(Effect.either)
    if (next._tag === "Left") return flash(ctl.ui, "error", errorText(next.left))
    const id = sessionId(ctl)
    yield* replaceAgent(ctl, next.right, id)
    // the session's log records the switch with the next message (`model.switched`)
    return flash(
      ctl.ui,
      "info",
      `model ${ctl.agent.setup.resolved.ref}${id === undefined ? "" : ": the session goes on with it from the next message"}`
    )
  })

/** `/compact`: the session's history summarised now. */
const compactNow = (ctl: Controller) =>
  Effect.gen(function* () {
    const id = sessionId(ctl)
    if (id === undefined) return
    flash(ctl.ui, "info", "compacting…")
    const sessions = yield* Sessions
    const result = yield* sessions.compact(id)
    return flash(
      ctl.ui,
      "info",
      `compacted ${result.messages} messages into a summary (${formatCount(result.tokensBefore)} → ${formatCount(result.tokensAfter)} tokens)`
    )
  })

/** `/audit`: the session's audit report as an overlay. */
const auditOverlay = (ctl: Controller) =>
  Effect.gen(function* () {
    const id = sessionId(ctl)
    if (id === undefined)
      return flash(ctl.ui, "info", "nothing to audit yet: the session starts with its first message")
    const store = yield* EventStore
    const summary = yield* store.session(id)
    if (Option.isNone(summary)) return
    const audit = yield* auditSession(summary.value)
    const text = yield* auditReport([audit], "text", makeStyle(false))
    return ctl.ui.set((s) => ({
      ...s,
      overlay: { kind: "events", title: `audit of ${id}`, lines: text.split("\n").slice(-MAX_EVENT_LINES) }
    }))
  })

/** `/events`: the session's newest events, one line each, as an overlay. */
const eventsOverlay = (ctl: Controller) =>
  Effect.gen(function* () {
    const id = sessionId(ctl)
    if (id === undefined) return
    const store = yield* EventStore
    const style = makeStyle(false)
    const lastSeq = yield* store.lastSeq(id)
    const from = Math.max(1, lastSeq - MAX_EVENT_LINES + 1)
    const events = yield* Stream.runCollect(store.readRaw(id, { from }))
    const width = String(lastSeq).length
    const lines = Chunk.toReadonlyArray(events).map((e) => eventLine(e, style, width))
    return ctl.ui.set((s) => ({
      ...s,
      overlay: {
        kind: "events",
        title: `events of ${id}${from > 1 ? ` (the last ${MAX_EVENT_LINES})` : ""}`,
        lines
      }
    }))
  })

/** `/skills`: the skills the model may load (docs/skills.md), and the ones skipped, as an overlay. */
const skillsOverlay = (ctl: Controller) => {
  const { skills, problems } = ctl.agent.setup.skills
  const width = Math.max(0, ...skills.map((skill) => skill.name.length))
  const lines = [
    ...(skills.length === 0
      ? ["no skills: a folder with a SKILL.md in .logbook/skills/ or ~/.config/logbook/skills/ is one"]
      : skills.map(
          (skill) =>
            `${skill.name.padEnd(width)}  ${skill.scope.padEnd(7)}  ${oneLine(skill.description.replace(/\s+/g, " "), 72)}`
        )),
    ...problems.map((problem) => `skipped: ${problem}`)
  ]
  ctl.ui.set((s) => ({ ...s, overlay: { kind: "events", title: "skills the model may load", lines } }))
}

/** `/mcp`: each MCP server's state, its tools and prompts, its last error (docs/mcp.md). */
const mcpOverlay = (ctl: Controller) =>
  Effect.gen(function* () {
    const servers = (yield* McpServers).status()
    const lines =
      servers.length === 0
        ? ["no MCP servers: `logbook mcp add` adds one (docs/mcp.md)"]
        : servers.flatMap((server) => [
            `${server.name}  ${server.state}${server.state === "ready" ? ` · ${server.tools.length} tools · ${server.prompts.length} prompts` : ""}`,
            ...(server.tools.length === 0 ? [] : [`  tools: ${oneLine(server.tools.join(", "), 100)}`]),
            ...(server.prompts.length === 0
              ? []
              : [
                  `  prompts: ${oneLine(server.prompts.map((p) => `/mcp__${server.name}__${p.name}`).join(", "), 100)}`
                ]),
            ...(server.lastError === undefined ? [] : [`  last error: ${oneLine(server.lastError, 100)}`])
          ])
    ctl.ui.set((s) => ({ ...s, overlay: { kind: "events", title: "MCP servers", lines } }))
  })

/** `/mcp-resource <server> <uri> [message]`: the resource sent with the message, or attached to the next one. */
const mcpResource = (ctl: Controller, line: string) =>
  Effect.gen(function* () {
    const parsed = parseResourceCommand(line)
    if (parsed === undefined) return flash(ctl.ui, "error", "/mcp-resource <server> <uri> [message]")
    if (ctl.attached.length >= MAX_ATTACHMENTS)
      return flash(ctl.ui, "error", `at most ${MAX_ATTACHMENTS} resources go with one message: send it first`)
    const text = yield* attachResource(yield* McpServers, parsed.server, parsed.uri).pipe(Effect.either)
    if (text._tag === "Left") return flash(ctl.ui, "error", text.left)
    if (parsed.message === "") {
      ctl.attached.push(text.right)
      return flash(ctl.ui, "info", `${parsed.server}:${parsed.uri} is attached to your next message`)
    }
    const message = [parsed.message, ...ctl.attached, text.right].join("\n\n")
    ctl.attached = []
    const id = yield* sessionFor(ctl, parsed.message)
    yield* (yield* Sessions).send(id, message, { mode: "prompt" })
  })

/** `/mcp__<server>__<prompt> args`: the server's prompt, filled in, sent as the message. */
const mcpPrompt = (ctl: Controller, line: string) =>
  Effect.gen(function* () {
    const text = yield* promptMessage(yield* McpServers, parsePromptCommand(line)!).pipe(Effect.either)
    if (text._tag === "Left") return flash(ctl.ui, "error", text.left)
    const message = [text.right, ...ctl.attached].join("\n\n")
    ctl.attached = []
    const id = yield* sessionFor(ctl, line)
    yield* (yield* Sessions).send(id, message, { mode: "prompt" })
  })

/** The first line of `text`, cut to `max` characters with `…`. */
const oneLine = (text: string, max: number): string => {
  const first = Array.from(text.split("\n")[0]!)
  return first.length <= max ? first.join("") : `${first.slice(0, max - 1).join("")}…`
}

const needIdle = (ctl: Controller, what: string) =>
  flash(ctl.ui, "error", `${what} waits until the agent is idle (Esc interrupts it)`)

/** A slash command typed at the prompt. */
const command = (ctl: Controller, line: string) =>
  Effect.gen(function* () {
    const [name = "", ...rest] = line.trim().split(/\s+/)
    const arg = rest.join(" ")
    const busy = ctl.ui.get().screen.session.status._tag !== "idle"
    switch (name) {
      case "/help":
      case "/?": {
        const loaded = yield* customCommandsOf(ctl.options.cwd)
        const prompts = (yield* McpServers)
          .status()
          .flatMap((server) =>
            server.prompts.map(
              (p) =>
                [
                  promptUsage(server.name, p),
                  oneLine(p.description === "" ? "an MCP prompt" : p.description, 56)
                ] as const
            )
          )
        const custom = [
          ...loaded.commands.map(
            (c) =>
              [
                `/${c.name}${c.argumentHint === undefined ? "" : ` ${c.argumentHint}`}`,
                oneLine(c.description ?? c.body, 56)
              ] as const
          ),
          ...prompts
        ]
        return ctl.ui.set((s) => ({ ...s, overlay: { kind: "help", custom } }))
      }
      case "/quit":
      case "/exit":
        return yield* Deferred.succeed(ctl.quit, undefined)
      case "/new": {
        if (busy) return needIdle(ctl, "/new")
        yield* leave(ctl)
        yield* showNew(ctl)
        return flash(ctl.ui, "info", "a new session: it is created with its first message")
      }
      case "/sessions":
        return yield* sessionsOverlay(ctl)
      case "/model":
        return yield* switchModel(ctl, arg, busy)
      case "/compact":
        if (busy) return needIdle(ctl, "/compact")
        return yield* compactNow(ctl)
      case "/audit":
        return yield* auditOverlay(ctl)
      case "/events":
        return yield* eventsOverlay(ctl)
      case "/skills":
        return skillsOverlay(ctl)
      case "/mcp":
        return yield* mcpOverlay(ctl)
      case "/mcp-resource":
        return yield* mcpResource(ctl, line)
      default:
        if (parsePromptCommand(line) !== undefined) return yield* mcpPrompt(ctl, line)
        return yield* customCommand(ctl, line, busy)
    }
  })

/**
 * A custom command (`config/CustomCommands.ts`): its prompt sent as a typed message is; a user's
 * command with a model switches to it first, when idle.
 * Anything else is an unknown command, with the nearest name when there is one.
 */
const customCommand = (ctl: Controller, line: string, busy: boolean) =>
  Effect.gen(function* () {
    const loaded = yield* customCommandsOf(ctl.options.cwd)
    const matched = matchCommand(loaded.commands, line)
    if (matched === undefined) {
      const name = line.trim().split(/\s+/)[0]!.slice(1)
      const near = nearMissCommand(
        loaded.commands,
        line,
        COMMANDS.map(([c]) => c.split(" ")[0]!.slice(1))
      )
      const skipped =
        loaded.problems.length === 0
          ? ""
          : ` (${loaded.problems.length} command file(s) skipped: ${loaded.problems[0]})`
      return flash(
        ctl.ui,
        "error",
        near !== undefined
          ? `unknown command /${name}: did you mean /${near.name}?${skipped}`
          : `unknown command /${name}; /help lists the commands${skipped}`
      )
    }
    const { command } = matched
    if (command.model !== undefined && command.model !== ctl.agent.setup.resolved.ref) {
      if (busy) return needIdle(ctl, `/${command.name} (it runs on ${command.model})`)
      yield* switchModel(ctl, command.model, busy)
    }
    const message = expandCommand(command, matched.args)
    const id = yield* sessionFor(ctl, line)
    const sessions = yield* Sessions
    yield* sessions.send(id, message, { mode: "prompt" })
  })

/** Shows session `id`: a session goes on with the model it is on, so another agent when that is not this one's. */
const openSession = (ctl: Controller, id: SessionId) =>
  Effect.gen(function* () {
    const summary = yield* Effect.flatMap(EventStore, (store) => store.session(id))
    const model = Option.isSome(summary) ? summary.value.model : null
    if (model === null || model === ctl.agent.setup.resolved.ref) {
      yield* leave(ctl)
      return yield* show(ctl, id)
    }
    const { model: _given, ...flags } = ctl.options.flags
    const next = yield* buildAgent(ctl.options, ctl.approver, flags, model).pipe(Effect.either)
    if (next._tag === "Left") return flash(ctl.ui, "error", errorText(next.left))
    yield* replaceAgent(ctl, next.right, id)
  })

/** What the screen's keys and prompt do (App.tsx calls these). */
const makeActions = (ctl: Controller, answerApproval: (answer: ApprovalAnswer) => Effect.Effect<void>): Actions => {
  const { ui } = ctl
  return {
    submit: (text, mode) => {
      ui.set((s) => ({ ...s, flash: undefined }))
      if (text.trim().startsWith("/") && !text.trim().startsWith("//")) return void fork(ctl, command(ctl, text))
      const typed = text.trim().startsWith("//") ? text.trim().slice(1) : text
      // the resources attached with /mcp-resource go with this message (and are recorded with it)
      const message = ctl.attached.length === 0 ? typed : [typed, ...ctl.attached].join("\n\n")
      ctl.attached = []
      void fork(
        ctl,
        Effect.gen(function* () {
          const id = yield* sessionFor(ctl, message)
          const sessions = yield* Sessions
          yield* sessions.send(id, message, { mode })
        })
      )
    },
    editPending: (put) => {
      const id = sessionId(ctl)
      const last = pendingMessages(ui.get().screen).at(-1)
      if (id === undefined || last === undefined) return
      void fork(
        ctl,
        Effect.flatMap(Sessions, (sessions) => sessions.withdraw(id, last.id)).pipe(
          Effect.tap((withdrawn) => Effect.sync(() => put(withdrawn.text))),
          Effect.catchTag("WithdrawRefused", () =>
            Effect.sync(() =>
              flash(ui, "info", "that message was delivered to the model before it could be taken back")
            )
          )
        )
      )
    },
    sendPending: () => {
      const id = sessionId(ctl)
      if (id === undefined) return
      void fork(
        ctl,
        Effect.flatMap(Sessions, (sessions) => sessions.sendPending(id))
      )
    },
    interrupt: () => {
      const id = sessionId(ctl)
      if (id === undefined || ui.get().interrupting) return
      ui.set((s) => ({ ...s, interrupting: true }))
      void fork(
        ctl,
        Effect.flatMap(Sessions, (sessions) => sessions.interrupt(id, "user")).pipe(
          Effect.ensuring(Effect.sync(() => ui.set((s) => ({ ...s, interrupting: false }))))
        )
      )
    },
    quit: () => void Runtime.runFork(ctl.runtime)(Deferred.succeed(ctl.quit, undefined)),
    answer: (answer) => void Runtime.runFork(ctl.runtime)(answerApproval(answer)),
    openSession: (id) => {
      ui.set((s) => ({ ...s, overlay: undefined }))
      if (id === sessionId(ctl)) return
      if (ui.get().screen.session.status._tag !== "idle")
        return flash(ui, "error", "switching sessions waits until the agent is idle (Esc interrupts it)")
      void fork(ctl, openSession(ctl, id as SessionId))
    },
    closeOverlay: () => ui.set((s) => ({ ...s, overlay: undefined })),
    redraw: () => {
      // the printed part is drawn again from the start: what was printed at another width goes
      ctl.options.stdout.write(CLEAR)
      ui.set((s) => ({ ...s, epoch: s.epoch + 1 }))
    }
  }
}

/** Puts the screen on the terminal (raw keys, bracketed paste) for the scope, and takes it off after. */
const mountScreen = (ctl: Controller, actions: Actions) => {
  const { options } = ctl
  return Effect.acquireRelease(
    Effect.sync(() => {
      // raw before the first frame: a key pressed as soon as the screen shows waits for the prompt
      // (in the terminal's line mode it would be echoed, or end the input: Ctrl-D)
      if (options.stdin.isTTY) options.stdin.setRawMode(true)
      const before = new Map(handledSignals.map((signal) => [signal, new Set(process.listeners(signal))]))
      const instance = render(createElement(App, { store: ctl.ui, actions, theme: makeTheme(options.colors) }), {
        stdin: options.stdin,
        stdout: options.stdout,
        exitOnCtrlC: false,
        maxFps: 30
      })
      // Ink unmounts on a signal through signal-exit, which then kills the process with the signal
      // again — before the runtime's own handler has interrupted the session (commands left running,
      // the session busy). The runtime handles signals; the screen is unmounted by this release.
      for (const signal of handledSignals)
        for (const listener of process.listeners(signal))
          if (!before.get(signal)!.has(listener)) process.removeListener(signal, listener)
      // bracketed paste: a pasted text arrives marked, so its line breaks do not send it
      options.stdout.write(PASTE_ON)
      ctl.mounted = true
      return instance
    }),
    (instance) =>
      Effect.sync(() => {
        options.stdout.write(PASTE_OFF)
        instance.unmount()
        instance.cleanup()
        if (options.stdin.isTTY) options.stdin.setRawMode(false)
      })
  )
}

export const interactive = Effect.fn("cli.interactive")(function* (options: InteractiveOptions) {
  const ui = makeUiStore(initialUiState())
  const quit = yield* Deferred.make<void>()
  const screenApprover = yield* makeScreenApprover((request) => ui.set((s) => ({ ...s, approval: request })))
  const approver = options.yes ? Approver.autoAllow : screenApprover.layer

  // the session to show (-s, -c, or a new one), found first: a resumed session goes on with the
  // model it is on, unless -m switches it
  const resumed = yield* findResumed({
    session: options.session,
    continue: options.continue,
    cwd: options.cwd,
    db: options.db,
    noSession: `no session in ${options.cwd} to continue; run logbook without -c to start one`
  })
  const ctl: Controller = {
    options,
    ui,
    quit,
    approver,
    runtime: yield* Effect.runtime<FileSystem.FileSystem | Path.Path>(),
    creating: yield* Effect.makeSemaphore(1),
    agent: yield* buildAgent(options, approver, options.flags, resumed?.model ?? undefined),
    current: undefined,
    mounted: false,
    attached: []
  }

  // resuming a session whose log is damaged: said on stderr before the screen starts (it goes on)
  yield* withAgent(
    ctl,
    resumed === undefined ? showNew(ctl) : Effect.zipRight(warnIfDamaged(resumed.id), show(ctl, resumed.id))
  )

  const actions = makeActions(ctl, screenApprover.answer)
  yield* mountScreen(ctl, actions)

  if (options.message !== undefined) actions.submit(options.message, "prompt")

  // the way out, whatever it was: what runs is interrupted, the session released
  yield* Deferred.await(quit).pipe(
    Effect.ensuring(
      Effect.gen(function* () {
        yield* withAgent(ctl, leave(ctl)).pipe(Effect.ignore)
        yield* Scope.close(ctl.agent.scope, Exit.void)
      })
    )
  )
  return ExitCode.ok
})

const errorText = (error: unknown): string => {
  if (typeof error === "object" && error !== null && "message" in error && typeof error.message === "string")
    return error.message
  return String(error)
}
