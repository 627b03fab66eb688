/**
 * The built binary in a real terminal: a tmux session of its own (a private server socket), driven
 * with send-keys and read with capture-pane — the way a user at a terminal meets `logbook`.
 */

import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { baseEnv, binPath, scratchDir, shellQuote } from "./cli.js"

export const hasTmux = spawnSync("tmux", ["-V"], { encoding: "utf8" }).status === 0
// CI installs tmux: there the terminal tests must run, not be skipped
if (!hasTmux && process.env.LOGBOOK_REQUIRE_TMUX === "1")
  throw new Error("LOGBOOK_REQUIRE_TMUX=1 but tmux is not installed: the terminal tests cannot run")

export interface TmuxRun {
  /** the screen and its history, as text (wrapped lines joined) */
  readonly screen: () => string
  /** polls the screen (every 20 ms) until `pattern` is on it; returns the screen */
  readonly waitFor: (pattern: string | RegExp, timeoutMs?: number) => Promise<string>
  /** presses keys (tmux key names: "o", "C-c", "Enter") */
  readonly keys: (...keys: ReadonlyArray<string>) => void
  /** the exit code of logbook, once it exited */
  readonly exited: (timeoutMs?: number) => Promise<number>
  /** ends the tmux server and everything in it */
  readonly close: () => void
  /** the visible screen only, as the terminal shows it: rows not joined, with `escapes` the SGR codes too */
  readonly visible: (options?: { readonly escapes?: boolean }) => string
  /** resizes the terminal (the window) */
  readonly resize: (columns: number, rows: number) => void
  /** the pane's title (what an OSC title sequence would set) */
  readonly title: () => string
}

let counter = 0

/**
 * Runs `logbook <args>` in a new tmux session, 160×50, with the environment of `runCli`; with
 * `stdoutFile`, its stdout goes to that file (stdin and stderr stay the terminal).
 */
export const runInTmux = (
  args: ReadonlyArray<string>,
  options: {
    readonly stdoutFile?: string
    /** variables to set (a value) or remove (undefined) in logbook's environment */
    readonly env?: Readonly<Record<string, string | undefined>>
    readonly columns?: number
    readonly rows?: number
  } = {}
): TmuxRun => {
  const dir = scratchDir()
  const socket = `logbook-test-${process.pid}-${++counter}`
  const exitFile = path.join(dir, "exit-code")
  const env = baseEnv(options.env)
  const tmux = (...tmuxArgs: ReadonlyArray<string>) => {
    const result = spawnSync("tmux", ["-L", socket, "-f", "/dev/null", ...tmuxArgs], { encoding: "utf8", env })
    if (result.status !== 0) throw new Error(`tmux ${tmuxArgs[0]} failed: ${result.stderr}`)
    return result.stdout
  }
  const redirect = options.stdoutFile === undefined ? "" : ` > ${shellQuote(options.stdoutFile)}`
  const command = `${[process.execPath, binPath, ...args].map(shellQuote).join(" ")}${redirect}; echo $? > ${shellQuote(exitFile)}; sleep 100000`
  tmux(
    "new-session",
    "-d",
    "-s",
    "main",
    "-x",
    String(options.columns ?? 160),
    "-y",
    String(options.rows ?? 50),
    command
  )
  const screen = () => tmux("capture-pane", "-p", "-J", "-t", "main", "-S", "-")
  const poll = async <A>(what: string, probe: () => A | undefined, timeoutMs: number): Promise<A> => {
    const deadline = Date.now() + timeoutMs
    while (true) {
      const value = probe()
      if (value !== undefined) return value
      if (Date.now() > deadline) throw new Error(`waited ${timeoutMs} ms for ${what}; the screen:\n${screen()}`)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  }
  return {
    screen,
    waitFor: (pattern, timeoutMs = 20_000) =>
      poll(
        `${pattern} on the screen`,
        () => {
          const text = screen()
          return (typeof pattern === "string" ? text.includes(pattern) : pattern.test(text)) ? text : undefined
        },
        timeoutMs
      ),
    keys: (...keys) => void tmux("send-keys", "-t", "main", ...keys),
    exited: (timeoutMs = 30_000) =>
      poll(
        "logbook to exit",
        () => {
          if (!fs.existsSync(exitFile)) return undefined
          const text = fs.readFileSync(exitFile, "utf8")
          return text.endsWith("\n") ? Number(text.trim()) : undefined
        },
        timeoutMs
      ),
    close: () => {
      spawnSync("tmux", ["-L", socket, "kill-server"], { env })
      // the server's socket file stays behind it
      const uid = process.getuid?.() ?? 0
      fs.rmSync(path.join(env.TMUX_TMPDIR ?? "/tmp", `tmux-${uid}`, socket), { force: true })
    },
    visible: (visibleOptions = {}) =>
      tmux("capture-pane", "-p", ...(visibleOptions.escapes === true ? ["-e"] : []), "-t", "main"),
    resize: (columns, rows) => void tmux("resize-window", "-t", "main", "-x", String(columns), "-y", String(rows)),
    title: () => tmux("display-message", "-p", "-t", "main", "#{pane_title}").trim()
  }
}
