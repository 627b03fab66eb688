/**
 * The stdio transport of an MCP server, in its own process group: started with `detached` (the
 * group is the server's pid), read through a bounded buffer, and closed by stopping the whole
 * group (`stopGroup`), so a server that forks (npx, a shell) leaves nothing behind. The SDK's own
 * stdio transport starts the server in logbook's group and kills only its first process.
 *
 * In the sandbox the process started is bwrap, with `--die-with-parent`: when logbook dies, even by
 * SIGKILL, the kernel kills bwrap and with it the sandbox's PID namespace, the server included.
 * Every process of the server carries a token (`PROCESS_TOKEN_ENV`), recorded with its group
 * (`ServerRecords`) so that the next logbook stops an unsandboxed server a killed one left.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { newProcessToken, PROCESS_TOKEN_ENV, trackGroup, untrackGroup } from "../../tools/processGroup.js"
import type { ServerRecords } from "./serverRecords.js"

/** The most of a server's stderr kept for an error message (its tail). */
const STDERR_TAIL_BYTES = 4 * 1024

export interface StdioOptions {
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
  readonly cwd: string
  /** the largest message (one line) the server may send */
  readonly maxMessageBytes: number
  /** the sandbox to start it in: bwrap and its options (before `--`) */
  readonly sandbox?: { readonly bwrap: string; readonly args: ReadonlyArray<string> } | undefined
  /** where its group is noted while it runs */
  readonly records?: ServerRecords | undefined
}

/** How the server's process ended. */
export interface ProcessEnd {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

export class StdioProcessTransport implements Transport {
  onclose?: (() => void) | undefined
  onerror?: ((error: Error) => void) | undefined
  onmessage?: (<T extends JSONRPCMessage>(message: T) => void) | undefined

  private child: ChildProcess | undefined
  private readonly buffer: ReadBuffer
  private stderr = ""
  /** why the transport closed on its own (a message too large), for the error of the call it cut */
  tooLarge = false
  ended: ProcessEnd | undefined

  constructor(private readonly options: StdioOptions) {
    this.buffer = new ReadBuffer({ maxBufferSize: options.maxMessageBytes })
  }

  /** the server's pid: also its process group's id */
  get pid(): number | undefined {
    return this.child?.pid
  }

  /** the last lines the server wrote to stderr */
  get stderrTail(): string {
    return this.stderr.trim()
  }

  start(): Promise<void> {
    return new Promise((resolve, reject) => {
      const token = newProcessToken()
      const env = { ...this.options.env, [PROCESS_TOKEN_ENV]: token }
      const sandbox = this.options.sandbox
      const child =
        sandbox === undefined
          ? spawn(this.options.command, [...this.options.args], {
              cwd: this.options.cwd,
              env,
              stdio: ["pipe", "pipe", "pipe"],
              detached: true
            })
          : spawn(
              sandbox.bwrap,
              [...sandbox.args, "--die-with-parent", "--", this.options.command, ...this.options.args],
              {
                cwd: this.options.cwd,
                env: { ...env, TMPDIR: "/tmp" },
                stdio: ["pipe", "pipe", "pipe"],
                detached: true
              }
            )
      this.child = child
      child.once("error", (error) => {
        reject(error)
        this.onerror?.(error)
      })
      child.once("spawn", () => {
        if (child.pid !== undefined) {
          trackGroup(child.pid, token)
          this.options.records?.add({ pgid: child.pid, token })
        }
        resolve()
      })
      child.once("exit", (code, signal) => {
        this.ended = { code, signal }
      })
      child.once("close", (code, signal) => {
        this.ended ??= { code, signal }
        this.onclose?.()
      })
      child.stdin?.on("error", (error) => this.onerror?.(error))
      child.stdout?.on("data", (chunk: Buffer) => {
        try {
          this.buffer.append(chunk)
        } catch (error) {
          // a message past the bound: the connection cannot go on (its rest would be read as messages)
          this.tooLarge = true
          this.onerror?.(error as Error)
          this.kill()
          return
        }
        for (;;) {
          let message: JSONRPCMessage | null
          try {
            message = this.buffer.readMessage()
          } catch (error) {
            this.onerror?.(error as Error)
            continue
          }
          if (message === null) break
          this.onmessage?.(message)
        }
      })
      child.stderr?.on("data", (chunk: Buffer) => {
        this.stderr = (this.stderr + chunk.toString("utf8")).slice(-STDERR_TAIL_BYTES)
      })
    })
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve, reject) => {
      const stdin = this.child?.stdin
      if (stdin === undefined || stdin === null || !stdin.writable) {
        reject(new Error("Not connected"))
        return
      }
      if (stdin.write(serializeMessage(message))) resolve()
      else stdin.once("drain", resolve)
    })
  }

  /** Asks the server to stop: stdin ended and SIGTERM to its group (`stopGroup` waits for it). */
  async close(): Promise<void> {
    try {
      this.child?.stdin?.end()
    } catch {}
    this.kill()
    this.buffer.clear()
  }

  /** Forgets the group once it is stopped. */
  release(): void {
    if (this.child?.pid === undefined) return
    untrackGroup(this.child.pid)
    this.options.records?.remove(this.child.pid)
  }

  private kill(): void {
    const pid = this.child?.pid
    if (pid === undefined) return
    try {
      process.kill(-pid, "SIGTERM")
    } catch {}
  }
}
