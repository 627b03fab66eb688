/**
 * What a command hook's answer does (src/session/CommandHooks.ts), with real hook commands (no
 * sandbox): which tools a matcher selects, and a PreToolUse / PostToolUse hook's JSON read as
 * Claude Code reads it.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { CallId, SessionId } from "../../src/domain/Ids.js"
import {
  type CommandHookDefinition,
  type CommandHookEnv,
  commandSessionHooks,
  matchesTool,
  postToolUse,
  preToolUse
} from "../../src/session/CommandHooks.js"
import { defaultSandboxSettings } from "../../src/tools/Sandbox.js"
import { makeSecrets } from "../../src/tools/Secrets.js"
import { type AnyTool, defineTool, Tools } from "../../src/tools/Tools.js"
import { tempDir } from "../support/tmp.js"

const env = (): CommandHookEnv => ({
  cwd: tempDir(),
  secrets: makeSecrets({ hide: [] }),
  sandbox: { ...defaultSandboxSettings, mode: "off" }
})

const hook = (event: CommandHookDefinition["event"], command: string): CommandHookDefinition => ({
  event,
  command,
  timeoutMs: 30_000,
  source: `hook:${event}[0]`
})

const call = {
  sessionId: SessionId.make("s1"),
  callId: CallId.make("c1"),
  tool: "bash",
  input: { command: "npm test", timeoutMs: 5000 }
}

/** A command that prints `json` (single quotes are not allowed in it). */
const answer = (json: unknown) => `cat > /dev/null; echo '${JSON.stringify(json)}'`

describe("matchesTool", () => {
  it("matches Claude Code's name or logbook's, the whole name, as a regular expression", () => {
    expect(matchesTool("Bash", "bash")).toBe(true)
    expect(matchesTool("bash", "bash")).toBe(true)
    expect(matchesTool("Edit|Write", "write")).toBe(true)
    expect(matchesTool("Edit|Write", "read")).toBe(false)
    expect(matchesTool("Bas", "bash")).toBe(false)
    expect(matchesTool("mcp__github__.*", "mcp__github__create_issue")).toBe(true)
    expect(matchesTool("mcp__github", "mcp__github__create_issue")).toBe(false)
    expect(matchesTool("LS", "list")).toBe(true)
    for (const all of [undefined, "", "*"]) expect(matchesTool(all, "anything")).toBe(true)
  })
})

describe("PreToolUse answers", () => {
  it.live("updatedInput replaces the fields it names", () =>
    Effect.gen(function* () {
      const ran = yield* preToolUse(
        env(),
        hook("PreToolUse", answer({ hookSpecificOutput: { updatedInput: { command: "npm test -- --run" } } })),
        call
      )
      expect(ran.outcome).toEqual({ _tag: "Input", input: { command: "npm test -- --run", timeoutMs: 5000 } })
    })
  )

  it.live("deny, a legacy block, ask and continue: false refuse the call with their reason", () =>
    Effect.gen(function* () {
      const run = (json: unknown) =>
        Effect.map(preToolUse(env(), hook("PreToolUse", answer(json)), call), (r) => r.outcome)
      expect(
        yield* run({ hookSpecificOutput: { permissionDecision: "deny", permissionDecisionReason: "not here" } })
      ).toEqual({ _tag: "Block", reason: "not here" })
      expect(yield* run({ decision: "block", reason: "old style" })).toEqual({ _tag: "Block", reason: "old style" })
      const asked = yield* run({ hookSpecificOutput: { permissionDecision: "ask" } })
      expect(asked._tag === "Block" && asked.reason).toMatch(/cannot ask for in logbook/)
      expect(yield* run({ continue: false, stopReason: "stop all" })).toEqual({ _tag: "Block", reason: "stop all" })
      expect(yield* run({ hookSpecificOutput: { permissionDecision: "allow" } })).toEqual({ _tag: "Unchanged" })
    })
  )
})

describe("PostToolUse and the session's events", () => {
  it.live("a PostToolUse block reason and context are added for the model; exit 2's stderr too", () =>
    Effect.gen(function* () {
      const output = { output: "ok" }
      const json = yield* postToolUse(
        env(),
        hook("PostToolUse", answer({ decision: "block", reason: "lint failed", additionalContext: "see .eslintrc" })),
        call,
        output
      )
      expect(json.outcome).toEqual({ _tag: "Added", text: "lint failed\nsee .eslintrc" })
      const stderr = yield* postToolUse(
        env(),
        hook("PostToolUse", "cat >/dev/null; echo 'fix it' >&2; exit 2"),
        call,
        output
      )
      expect(stderr.outcome).toEqual({ _tag: "Added", text: "fix it" })
    })
  )

  it.live("a SessionStart hook cannot block: its exit 2 is an error that blocks nothing", () =>
    Effect.gen(function* () {
      const hooks = commandSessionHooks(env(), [hook("SessionStart", "cat >/dev/null; echo nope >&2; exit 2")])
      const result = yield* hooks.sessionStart({ sessionId: SessionId.make("s1"), cwd: "/" })
      expect(result.block).toBeUndefined()
      expect(result.runs).toEqual([expect.objectContaining({ outcome: "failed", error: "nope" })])
    })
  )
})

describe("the registry and a hook that fails without blocking", () => {
  it.effect("{ failed } is recorded as failed and the call goes on with its input", () =>
    Effect.gen(function* () {
      const bash = defineTool({
        name: "bash",
        description: "runs a command",
        input: Schema.Struct({ command: Schema.String }),
        execute: (input) => Effect.succeed({ output: input.command })
      })
      const tools = Tools.make({
        tools: [bash],
        hooks: {
          before: [
            { source: "hook:PreToolUse[0]", run: () => Effect.succeed({ failed: "exit code 1: jq: not found" }) }
          ]
        }
      })
      const input = { command: "ls" }
      const prepared = yield* tools.before({ ...call, input }, { tool: bash as AnyTool, input })
      expect(prepared).toMatchObject({ _tag: "Ready", input: { command: "ls" } })
      expect(prepared.hookRuns).toEqual([
        expect.objectContaining({
          source: "hook:PreToolUse[0]",
          outcome: "failed",
          changed: false,
          error: "exit code 1: jq: not found"
        })
      ])
    })
  )
})
