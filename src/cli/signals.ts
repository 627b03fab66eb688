/**
 * What a signal means for the run it stops (docs/run.md "Signals"):
 *
 * - SIGINT (Ctrl-C) interrupts with reason `user`, SIGTERM with `shutdown`, SIGHUP (the terminal
 *   closed, an SSH connection dropped) with `hangup` — each like Ctrl-C: the model request aborted,
 *   running commands stopped, every open part ended, the session idle, the log says why.
 * - A second signal during that cleanup does not cut it short (the runtime, `NodeRuntime.runMain`,
 *   stops listening after the first one, and Node would then exit at once): it says the cleanup goes
 *   on. A third forces the exit — after SIGKILLing the process groups of the commands still
 *   running, so none outlives it; the next open of the session repairs its log (the crash sweep).
 *
 * `installSignals` runs once, before the runtime installs its own handlers; the runtime interrupts
 * the program on SIGINT and SIGTERM, and a SIGHUP is handed to it as a SIGTERM.
 */
import { killTrackedGroups } from "../tools/processGroup.js"
import { ExitCode } from "./errors.js"

const reasons = { SIGINT: "user", SIGTERM: "shutdown", SIGHUP: "hangup" } as const
type Handled = keyof typeof reasons

let first: Handled | undefined
let count = 0
/** a SIGTERM this module sends itself (a hangup handed to the runtime): not counted */
let forwarding = false

/** The reason of the signal that is stopping the program (undefined: none came). */
export const signalReason = (): string | undefined => (first === undefined ? undefined : reasons[first])

/** The interrupt reason for a run that is being stopped: the signal's, else `fallback`. */
export const interruptReason = (fallback = "user"): string => signalReason() ?? fallback

/** Installs the handlers (once per process). `say` writes a line for the user (stderr). */
export const installSignals = (say: (line: string) => void = (line) => process.stderr.write(`${line}\n`)): void => {
  const handle = (signal: Handled) => () => {
    if (forwarding) return
    count += 1
    if (count === 1) {
      first = signal
      if (signal === "SIGHUP") {
        // nobody reads the terminal any more: writing to it must not end the process
        quietOnClosedTerminal()
        forwarding = true
        try {
          process.emit("SIGTERM", "SIGTERM")
        } finally {
          forwarding = false
        }
      }
      return
    }
    if (count === 2) {
      if (first !== "SIGHUP")
        say("logbook: still stopping the model and the running commands; a third signal forces the exit")
      return
    }
    killTrackedGroups()
    if (first !== "SIGHUP") say("logbook: forced exit; the next run of the session repairs its log")
    process.exit(ExitCode.interrupted)
  }
  for (const signal of Object.keys(reasons) as Array<Handled>) process.on(signal, handle(signal))
}

/** After a hangup, a write to the gone terminal fails (EIO, EPIPE): the failure is dropped. */
const quietOnClosedTerminal = () => {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", (error: NodeJS.ErrnoException) => {
      if (error.code !== "EIO" && error.code !== "EPIPE") throw error
    })
  }
}
