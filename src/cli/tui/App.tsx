/**
 * The interactive screen (DESIGN §10): the transcript (what is final is printed once, above; what
 * still changes is redrawn below it), the pending messages, an approval question, the prompt and
 * the status line. It holds no agent logic: everything it shows comes from `UiState` (the log's
 * projection, `screen.ts`, plus what the controller knows: the model, an open question, an
 * overlay), and every key that does something calls one of `Actions`.
 *
 * Keys: Enter sends (a steer while the agent works), Alt+Enter or Tab queues for after the turn,
 * `\` + Enter or Ctrl-J is a new line, Up/Down walk the lines and the history — Up on an empty
 * prompt first takes back the newest message not delivered yet, to edit it; Enter on an empty
 * prompt, idle, sends the messages an interrupt left queued. Esc (or the first
 * Ctrl-C) interrupts, Ctrl-C twice while idle or Ctrl-D on an empty prompt quits, Ctrl-O shows or
 * hides reasoning. An approval is a selection: letters and arrows move it, only Enter answers.
 */
import { Box, Static, Text, useInput, useStdout } from "ink"
import type React from "react"
import { useEffect, useRef, useState, useSyncExternalStore } from "react"
import { sanitize } from "../../present/sanitize.js"
import { finalPrefix, pendingMessages, type Screen } from "../../present/screen.js"
import type { ApprovalAnswer, ApprovalRequest } from "../../tools/Approver.js"
import * as Editor from "./editor.js"
import { ItemView, oneLineCut, StatusLine } from "./Parts.js"
import { type Theme, ThemeContext, useTheme } from "./theme.js"

export type Overlay =
  | {
      readonly kind: "help"
      /** the custom commands (`/name [hint]`, what it does) of the session's directory */
      readonly custom?: ReadonlyArray<readonly [string, string]> | undefined
    }
  | { readonly kind: "events"; readonly title: string; readonly lines: ReadonlyArray<string> }
  | { readonly kind: "sessions"; readonly rows: ReadonlyArray<SessionRow> }

export interface SessionRow {
  readonly id: string
  readonly label: string
}

export interface UiState {
  readonly screen: Screen
  readonly blobs: ReadonlyMap<string, string | null>
  readonly model: string
  readonly contextWindow: number | undefined
  readonly maxAttempts: number
  /** the question the agent waits on */
  readonly approval: ApprovalRequest | undefined
  readonly interrupting: boolean
  /** a line from the screen itself (a command's answer, an error), not from the log */
  readonly flash: { readonly tone: "info" | "error"; readonly text: string } | undefined
  readonly overlay: Overlay | undefined
  /** changes when the printed part must be drawn again (a new session, a resize) */
  readonly epoch: number
  /** the prompt history (earlier sessions' messages included) */
  readonly history: ReadonlyArray<string>
}

export interface UiStore {
  readonly get: () => UiState
  readonly subscribe: (listener: () => void) => () => void
}

export interface Actions {
  readonly submit: (text: string, mode: "prompt" | "queue") => void
  /**
   * Takes back the newest message not delivered yet (steered or queued) and hands its text to
   * `put` (the prompt), once the session withdrew it; nothing when a step delivered it first.
   */
  readonly editPending: (put: (text: string) => void) => void
  /** Sends the queued messages alone (those an interrupt left), when no turn runs. */
  readonly sendPending: () => void
  readonly interrupt: () => void
  readonly quit: () => void
  readonly answer: (answer: ApprovalAnswer) => void
  readonly openSession: (id: string) => void
  readonly closeOverlay: () => void
  /** Ctrl-O and a resize: the printed part is drawn again */
  readonly redraw: () => void
}

export const COMMANDS: ReadonlyArray<readonly [string, string]> = [
  ["/new", "start a new session in this directory"],
  ["/sessions", "pick a session of this directory to switch to"],
  ["/model [provider/model]", "show the model, or switch to another one"],
  ["/compact", "summarise the conversation now (keeps the context small)"],
  ["/events", "this session's raw event log"],
  ["/audit", "every file change, command and question of this session"],
  ["/skills", "the skills the model may load"],
  ["/mcp", "the MCP servers: state, tools, prompts, last error"],
  ["/mcp-resource <server> <uri>", "attach an MCP server's resource to the next message"],
  ["/help", "keys and commands"],
  ["/quit", "leave (also Ctrl-D on an empty prompt, or Ctrl-C twice)"]
]

const KEYS: ReadonlyArray<readonly [string, string]> = [
  ["Enter", "send; while the agent works: steer (delivered at its next step)"],
  ["Alt+Enter, Tab", "queue for after the turn"],
  ["\\ then Enter, Ctrl-J", "a new line"],
  ["Up / Down", "move between lines; on the first or last line: history"],
  ["Up (empty prompt)", "take back the newest message not delivered yet, to edit it"],
  ["Enter (empty prompt)", "while idle: send the messages left queued"],
  ["Esc, Ctrl-C", "interrupt: stop the model and running commands (queued messages stay)"],
  ["Ctrl-O", "show or hide the model's reasoning"],
  ["Ctrl-U, Ctrl-W", "delete to the line's start, the word before"]
]

const CHOICES = [
  { key: "o", label: "once", answer: "once" as const },
  { key: "a", label: "always (this session)", answer: "always" as const },
  { key: "r", label: "reject", answer: "reject" as const },
  { key: "t", label: "reject and tell the model why", answer: "tell" as const }
]

export const App = ({
  store,
  actions,
  theme
}: {
  readonly store: UiStore
  readonly actions: Actions
  readonly theme: Theme
}): React.ReactNode => {
  const ui = useSyncExternalStore(store.subscribe, store.get, store.get)
  return (
    <ThemeContext.Provider value={theme}>
      <Main ui={ui} actions={actions} />
    </ThemeContext.Provider>
  )
}

const useColumns = (redraw: () => void): number => {
  const { stdout } = useStdout()
  const [columns, setColumns] = useState(stdout.columns || 80)
  useEffect(() => {
    const onResize = () => {
      setColumns(stdout.columns || 80)
      redraw()
    }
    stdout.on("resize", onResize)
    return () => {
      stdout.off("resize", onResize)
    }
  }, [stdout, redraw])
  return columns
}

/** A clock for elapsed times and countdowns, ticking once a second while something runs. */
const useNow = (ticking: boolean): number => {
  const [now, setNow] = useState(() => Date.now())
  useEffect(() => {
    if (!ticking) return
    setNow(Date.now())
    const timer = setInterval(() => setNow(Date.now()), 1000)
    return () => clearInterval(timer)
  }, [ticking])
  return ticking ? now : Date.now()
}

/**
 * State a key handler reads and writes as it goes: `[value, set, ref]`. Ink calls the handler for
 * every key of one read before React renders again, so a handler reads `ref.current` (updated by
 * `set` at once), not the value of its render: Down Down Enter must answer the third choice.
 */
const useKeyState = <A,>(
  initial: () => A
): readonly [A, (next: A | ((current: A) => A)) => void, { readonly current: A }] => {
  const [state, setState] = useState(initial)
  const ref = useRef(state)
  const set = (next: A | ((current: A) => A)) => {
    ref.current = typeof next === "function" ? (next as (current: A) => A)(ref.current) : next
    setState(ref.current)
  }
  return [state, set, ref] as const
}

const Main = ({ ui, actions }: { readonly ui: UiState; readonly actions: Actions }): React.ReactNode => {
  const theme = useTheme()
  const width = useColumns(actions.redraw)
  const screen = ui.screen
  const busy = screen.session.status._tag !== "idle" || screen.session.turn !== null
  const now = useNow(busy)
  const [showReasoning, setShowReasoning] = useState(false)

  const ctx = { screen, blobs: ui.blobs, now, showReasoning, width }
  // a part whose diff is still loading is not printed yet (the printed part cannot change)
  const done = finalPrefix(screen, (hash) => ui.blobs.has(hash))
  const printed = screen.items.slice(0, done)
  const live = screen.items.slice(done)
  const pending = pendingMessages(screen)
  const toggleReasoning = () => {
    setShowReasoning((shown) => !shown)
    actions.redraw()
  }

  return (
    <Box flexDirection="column" width={width}>
      <Static key={`${ui.epoch}-${showReasoning}`} items={printed.map((item, i) => ({ item, i }))}>
        {({ item }) => (
          <Box key={item.key} width={width}>
            <ItemView item={item} ctx={ctx} />
          </Box>
        )}
      </Static>
      {live.map((item) => (
        <ItemView key={item.key} item={item} ctx={ctx} />
      ))}
      {screen.error === undefined ? null : <Text {...theme.fg("red")}>✗ {screen.error}</Text>}
      {pending.length === 0 ? null : (
        <Box flexDirection="column" marginTop={1}>
          {pending.map((message) => (
            <Text key={message.id} dimColor>
              {message.mode === "queue" ? "⧗ queued: " : "⧗ steer, at the next step: "}
              {oneLineCut(sanitize(message.text), width - 30)}
            </Text>
          ))}
          <Text dimColor>
            {busy ? "  ↑ on an empty prompt edits the last one" : "  Enter sends them · ↑ edits the last one"}
          </Text>
        </Box>
      )}
      {ui.overlay === undefined ? null : <OverlayView overlay={ui.overlay} actions={actions} width={width} />}
      {ui.approval === undefined ? null : <ApprovalView request={ui.approval} actions={actions} width={width} />}
      {ui.flash === undefined ? null : (
        <Box marginTop={1}>
          <Text {...theme.fg(ui.flash.tone === "error" ? "red" : "gray")}>
            {ui.flash.tone === "error" ? "✗ " : "· "}
            {ui.flash.text}
          </Text>
        </Box>
      )}
      <Prompt
        ui={ui}
        busy={busy}
        pending={pending.length > 0}
        actions={actions}
        active={ui.approval === undefined && ui.overlay === undefined}
        width={width}
        onToggleReasoning={toggleReasoning}
      />
      <StatusLine
        info={{
          screen,
          model: ui.model,
          contextWindow: ui.contextWindow,
          maxAttempts: ui.maxAttempts,
          now,
          interrupting: ui.interrupting
        }}
        width={width}
      />
    </Box>
  )
}

const Prompt = ({
  ui,
  busy,
  pending,
  actions,
  active,
  width,
  onToggleReasoning
}: {
  readonly ui: UiState
  readonly busy: boolean
  /** messages wait to be delivered (steered or queued) */
  readonly pending: boolean
  readonly actions: Actions
  readonly active: boolean
  readonly width: number
  readonly onToggleReasoning: () => void
}): React.ReactNode => {
  const theme = useTheme()
  const [editor, setEditor, editorRef] = useKeyState(() => Editor.emptyEditor(ui.history))
  const [quitArmed, setQuitArmed, quitArmedRef] = useKeyState(() => false)

  // inside a bracketed paste (the terminal marks it): Enter is a line break, not "send"
  const pasting = useRef(false)

  // keys work even when the prompt is not the one answering (Esc, Ctrl-C)
  useInput((input, key) => {
    const editor = editorRef.current
    const quitArmed = quitArmedRef.current
    if (input === "[200~") {
      pasting.current = true
      return undefined
    }
    if (input === "[201~") {
      pasting.current = false
      return undefined
    }
    if (pasting.current && active) {
      return setEditor(Editor.insert(editor, key.return ? "\n" : sanitizeInput(input)))
    }
    if (key.ctrl && input === "c") {
      if (busy) {
        setQuitArmed(false)
        return actions.interrupt()
      }
      if (quitArmed) return actions.quit()
      return setQuitArmed(true)
    }
    if (quitArmed) setQuitArmed(false)
    // an overlay takes Esc (it closes it); a question does not (it says "Esc interrupts")
    if (key.escape && ui.overlay !== undefined) return undefined
    if (key.escape) return busy ? actions.interrupt() : undefined
    if (!active) return undefined
    if (key.ctrl && input === "d") return editor.text === "" ? actions.quit() : setEditor(Editor.deleteForward)
    if (key.ctrl && input === "o") return onToggleReasoning()
    const send = (state: Editor.EditorState, mode: "prompt" | "queue"): Editor.EditorState => {
      if (state.text.trim() === "") return state
      actions.submit(state.text, mode)
      return Editor.submitted(state)
    }
    if (key.return && key.meta) return setEditor(send(editor, "queue"))
    if (key.tab) return setEditor(send(editor, "queue"))
    if (key.return) {
      // a backslash before the cursor: a new line instead of sending
      if (editor.text.slice(0, editor.cursor).endsWith("\\")) {
        return setEditor(Editor.insert(Editor.backspace(editor), "\n"))
      }
      if (editor.text.trim() === "" && pending && !busy) return actions.sendPending()
      return setEditor(send(editor, "prompt"))
    }
    if ((key.ctrl && input === "j") || input === "\n") return setEditor(Editor.insert(editor, "\n"))
    if (key.backspace || key.delete) return setEditor(Editor.backspace(editor))
    if (key.leftArrow) return setEditor(Editor.left(editor))
    if (key.rightArrow) return setEditor(Editor.right(editor))
    if (key.upArrow && editor.text === "" && pending)
      // the withdrawn text arrives later: it goes before whatever was typed meanwhile
      return actions.editPending((text) =>
        setEditor((now) => Editor.withText(now, now.text === "" ? text : `${text}\n${now.text}`))
      )
    if (key.upArrow) return setEditor(Editor.up(editor))
    if (key.downArrow) return setEditor(Editor.down(editor))
    if (key.home || (key.ctrl && input === "a")) return setEditor(Editor.home(editor))
    if (key.end || (key.ctrl && input === "e")) return setEditor(Editor.end(editor))
    if (key.ctrl && input === "u") return setEditor(Editor.killLineBefore(editor))
    if (key.ctrl && input === "w") return setEditor(Editor.killWordBefore(editor))
    if (key.ctrl || key.meta || input === "") return undefined
    // typed text; typed fast, an Enter can arrive with it in one read (outside a bracketed paste a
    // carriage return is a key press): each one sends what comes before it
    const pieces = input.split("\r")
    let state = editor
    pieces.forEach((piece, i) => {
      state = Editor.insert(state, sanitizeInput(piece))
      if (i < pieces.length - 1) state = send(state, "prompt")
    })
    return setEditor(state)
  })

  const lines = editor.text.split("\n")
  const { line: cursorLine, column } = Editor.cursorPosition(editor)
  const placeholder = busy
    ? "Enter steers the agent now · Alt+Enter/Tab queues for after · Esc interrupts"
    : "Ask the agent · /help for keys and commands"
  return (
    <Box
      flexDirection="column"
      marginTop={1}
      borderStyle="round"
      {...theme.border(active ? "blue" : "gray")}
      width={width}
    >
      {editor.text === "" ? (
        <Text>
          <Text {...theme.fg("blue")}>› </Text>
          <Text inverse> </Text>
          <Text dimColor>{placeholder.slice(0, Math.max(0, width - 6))}</Text>
        </Text>
      ) : (
        lines.map((text, i) => (
          <Text key={i}>
            <Text {...theme.fg("blue")}>{i === 0 ? "› " : "  "}</Text>
            {i === cursorLine ? (
              <>
                {text.slice(0, column)}
                <Text inverse>{text.slice(column, column + 1) || " "}</Text>
                {text.slice(column + 1)}
              </>
            ) : (
              text
            )}
          </Text>
        ))
      )}
      {quitArmed ? <Text {...theme.fg("yellow")}>Press Ctrl-C again to quit</Text> : null}
    </Box>
  )
}

/** Typed or pasted text without escape sequences and control characters (line breaks stay). */
const sanitizeInput = (input: string): string => sanitize(input.replace(/\r\n?/g, "\n"))

const ApprovalView = ({
  request,
  actions,
  width
}: {
  readonly request: ApprovalRequest
  readonly actions: Actions
  readonly width: number
}): React.ReactNode => {
  const theme = useTheme()
  const [selected, setSelected, selectedRef] = useKeyState(() => 0)
  const [message, setMessage, messageRef] = useKeyState<string | undefined>(() => undefined)
  useInput((input, key) => {
    const selected = selectedRef.current
    const message = messageRef.current
    if (key.escape || (key.ctrl && input === "c")) return undefined
    if (message !== undefined) {
      if (key.return) return actions.answer({ reply: "reject", message })
      if (key.backspace || key.delete) return setMessage(message.slice(0, -1))
      if (key.ctrl || key.meta || key.upArrow || key.downArrow || key.leftArrow || key.rightArrow || key.tab)
        return undefined
      return setMessage((message + sanitize(input).replace(/\n/g, " ")).slice(0, 2000))
    }
    if (key.upArrow || key.leftArrow) return setSelected((s) => (s + CHOICES.length - 1) % CHOICES.length)
    if (key.downArrow || key.rightArrow || key.tab) return setSelected((s) => (s + 1) % CHOICES.length)
    if (key.return) {
      const choice = CHOICES[selected]!
      return choice.answer === "tell" ? setMessage("") : actions.answer(choice.answer)
    }
    // a letter only moves the selection (the last one of a word typed fast): a word answers nothing
    for (const char of input) {
      const at = CHOICES.findIndex((choice) => choice.key === char)
      if (at >= 0) setSelected(at)
    }
  })
  const subject = sanitize(request.subject)
  return (
    <Box flexDirection="column" marginTop={1} borderStyle="double" {...theme.border("yellow")} width={width}>
      <Text bold>
        Allow {request.tool}
        {request.outside ? " (outside the workspace)" : ""}?
      </Text>
      <Text {...theme.fg("cyan")}>{subject.length > 2000 ? `${subject.slice(0, 2000)}…` : subject}</Text>
      <Text dimColor>{sanitize(request.reason)}</Text>
      {message === undefined ? (
        CHOICES.map((choice, i) => (
          <Text key={choice.key} {...(i === selected ? theme.fg("yellow") : {})} bold={i === selected}>
            {i === selected ? "❯ " : "  "}
            {choice.label} ({choice.key})
          </Text>
        ))
      ) : (
        <Text>
          Why (the model reads it; Enter sends): {message}
          <Text inverse> </Text>
        </Text>
      )}
      <Text dimColor>{message === undefined ? "↑/↓ or a letter to choose, Enter to answer, Esc interrupts" : ""}</Text>
    </Box>
  )
}

const OverlayView = ({
  overlay,
  actions,
  width
}: {
  readonly overlay: Overlay
  readonly actions: Actions
  readonly width: number
}): React.ReactNode => {
  const theme = useTheme()
  const { stdout } = useStdout()
  const height = Math.max(5, (stdout.rows || 24) - 10)
  const [at, setAt, atRef] = useKeyState(() =>
    overlay.kind === "events" ? Math.max(0, overlay.lines.length - height) : 0
  )
  const count = overlay.kind === "events" ? overlay.lines.length : overlay.kind === "sessions" ? overlay.rows.length : 0
  useInput((input, key) => {
    if (key.escape || input === "q") return actions.closeOverlay()
    const last = overlay.kind === "events" ? Math.max(0, count - height) : Math.max(0, count - 1)
    if (key.upArrow) return setAt((a) => Math.max(0, a - 1))
    if (key.downArrow) return setAt((a) => Math.min(last, a + 1))
    if (key.pageUp) return setAt((a) => Math.max(0, a - height))
    if (key.pageDown) return setAt((a) => Math.min(last, a + height))
    if (key.home) return setAt(() => 0)
    if (key.end) return setAt(() => last)
    if (key.return) {
      // the row the keys before it chose, also in the same read (not the one last drawn)
      const chosen = overlay.kind === "sessions" ? overlay.rows[atRef.current] : undefined
      if (chosen !== undefined) return actions.openSession(chosen.id)
      return actions.closeOverlay()
    }
    return undefined
  })
  const cutLine = (line: string) => oneLineCut(line, width - 4)
  return (
    <Box flexDirection="column" marginTop={1} borderStyle="single" {...theme.border("gray")} width={width}>
      {overlay.kind === "help" ? (
        <>
          <Text bold>Keys</Text>
          {KEYS.map(([keys, what]) => (
            <Text key={keys}>
              {`  ${keys.padEnd(22)}`}
              <Text dimColor>{what}</Text>
            </Text>
          ))}
          <Text bold>Commands</Text>
          {COMMANDS.map(([name, what]) => (
            <Text key={name}>
              {`  ${name.padEnd(22)}`}
              <Text dimColor>{what}</Text>
            </Text>
          ))}
          {overlay.custom !== undefined && overlay.custom.length > 0 ? <Text bold>Your commands</Text> : null}
          {(overlay.custom ?? []).map(([name, what]) => (
            <Text key={`custom ${name}`}>
              {`  ${name.padEnd(22)}`}
              <Text dimColor>{what}</Text>
            </Text>
          ))}
          <Text dimColor>Esc or Enter closes</Text>
        </>
      ) : overlay.kind === "events" ? (
        <>
          <Text bold>
            {overlay.title} · {count} events · ↑/↓ PgUp/PgDn Home/End · Esc closes
          </Text>
          {overlay.lines.slice(at, at + height).map((line, i) => (
            <Text key={at + i}>{cutLine(line)}</Text>
          ))}
        </>
      ) : (
        <>
          <Text bold>Sessions in this directory · ↑/↓ to choose · Enter opens · Esc closes</Text>
          <Text dimColor>{"  updated      outcome           cost  title  id"}</Text>
          {overlay.rows.length === 0 ? <Text dimColor>no other sessions here</Text> : null}
          {overlay.rows.slice(Math.max(0, at - height + 1), Math.max(0, at - height + 1) + height).map((row) => {
            const selected = overlay.rows[at]?.id === row.id
            return (
              <Text key={row.id} {...(selected ? theme.fg("yellow") : {})} bold={selected}>
                {selected ? "❯ " : "  "}
                {cutLine(row.label)}
              </Text>
            )
          })}
        </>
      )}
    </Box>
  )
}
