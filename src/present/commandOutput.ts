/**
 * A command's output as the screens show it after the call: the exit (`exit 3`, `killed by SIGKILL`)
 * and the last lines that matter — the output's own end, without the lines `bash` closes it with
 * for the model (the exit code, the processes it stopped, a sandbox hint) and without blank lines.
 */
import { failedExit } from "../domain/Message.js"

/** `exit 3`, `killed by SIGKILL`: how a failed command ended; undefined when it did not fail. */
export const exitText = (metadata: unknown): string | undefined => {
  const exit = failedExit(metadata)
  if (exit === undefined) return undefined
  return exit.signal === undefined ? `exit ${exit.code}` : `exit ${exit.code}, killed by ${exit.signal}`
}

/** What `bash` notes before the exit code about the processes it stopped (`stopLines`). */
const STOP_NOTE = /^\((background processes|still running)/

/** The last `n` lines of the command's own output (`lines`) and how many came before them (`above`). */
export const outputTail = (
  output: string,
  n: number
): { readonly lines: ReadonlyArray<string>; readonly above: number } => {
  const all = output.replace(/\r\n/g, "\n").split("\n")
  // the closing block: `Exit code: N`, after the output, its blank line and any stop notes
  let end = all.length
  for (let i = all.length - 1; i >= 0; i--) {
    if (/^Exit code: -?\d+/.test(all[i]!)) {
      end = i
      while (end > 0 && STOP_NOTE.test(all[end - 1]!)) end--
      break
    }
  }
  while (end > 0 && all[end - 1]!.trim() === "") end--
  const own = all.slice(0, end)
  if (own.length === 1 && own[0] === "(no output)") return { lines: [], above: 0 }
  const lines = own.slice(-n)
  return { lines, above: own.length - lines.length }
}
