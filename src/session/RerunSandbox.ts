/**
 * How a re-run's commands run (docs/rerun.md, "What a re-run may touch"): always in the sandbox
 * (tools/Sandbox.ts), whatever the config's `tools.bash.sandbox`, with the scratch directory as the
 * only writable workspace besides the sandbox's private `/tmp` (no configured writable path), the
 * hidden paths as always and the network as configured. Where no sandbox can run here, every
 * command is refused, unless the caller lets them run without one (`--unconfined-commands`).
 */
import { Effect } from "effect"
import { BashInput, withSandbox } from "../tools/bash.js"
import {
  defaultSandboxSettings,
  probeSandbox,
  type SandboxOptions,
  type SandboxSettings,
  type SandboxStatus
} from "../tools/Sandbox.js"
import type { AnyTool } from "../tools/Tools.js"

/** The tool whose calls run commands: the built-in `bash`. */
export const COMMAND_TOOL = "bash"

/** How the re-run's commands ran (`RerunReport.commands`). */
export type RerunCommands =
  /** in the sandbox: writable only the scratch directory and a private `/tmp` */
  | { readonly _tag: "sandboxed"; readonly network: boolean }
  /** no sandbox can run here (`reason`): every command was refused */
  | { readonly _tag: "refused"; readonly reason: string }
  /** no sandbox can run here (`reason`), and the caller let the commands run without one */
  | { readonly _tag: "unconfined"; readonly reason: string }

export interface RerunSandboxOptions {
  /**
   * The sandbox of the config (`tools.bash`, its hidden paths with the database's): its network
   * and hidden paths are kept; its mode and writable paths are not used. Default
   * `defaultSandboxSettings`.
   */
  readonly settings?: SandboxSettings | undefined
  /** where no sandbox can run, run the commands without one instead of refusing them */
  readonly unconfined?: boolean | undefined
  /** whether a sandbox can run here; default: probed (once per process) */
  readonly status?: SandboxStatus | undefined
}

/** The re-run's commands: how they run, and the sandbox the `bash` tool is given. */
export interface RerunSandbox {
  readonly commands: RerunCommands
  readonly sandbox: SandboxOptions
}

/** How the re-run's commands run here. */
export const rerunSandbox = Effect.fn("Rerun.sandbox")(function* (options: RerunSandboxOptions) {
  const settings = options.settings ?? defaultSandboxSettings
  const status = options.status ?? (yield* probeSandbox({ network: settings.network }))
  const confined = { ...settings, writable: [], status }
  if (status._tag === "Available")
    return {
      commands: { _tag: "sandboxed", network: settings.network },
      sandbox: { ...confined, mode: "on" }
    } satisfies RerunSandbox
  // refused: the tool would refuse them too ("on" without a sandbox), were the re-run's check passed
  return {
    commands: { _tag: options.unconfined === true ? "unconfined" : "refused", reason: status.reason },
    sandbox: { ...confined, mode: options.unconfined === true ? "auto" : "on" }
  } satisfies RerunSandbox
})

/** The tools with the built-in `bash` running its commands in the re-run's sandbox. */
export const confineCommands = (tools: ReadonlyArray<AnyTool>, confinement: RerunSandbox): ReadonlyArray<AnyTool> =>
  tools.map((tool) =>
    tool.name === COMMAND_TOOL && tool.input === BashInput ? withSandbox(tool, confinement.sandbox) : tool
  )

/** Why a call of `tool` is refused because no sandbox can run, or undefined. */
export const noSandboxRefusal = (confinement: RerunSandbox, tool: string): string | undefined =>
  tool === COMMAND_TOOL && confinement.commands._tag === "refused"
    ? `no sandbox here (${confinement.commands.reason}): a re-run runs commands only in the sandbox, ` +
      "and --unconfined-commands runs them without one"
    : undefined
