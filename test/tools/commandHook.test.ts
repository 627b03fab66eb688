/**
 * The command hook runner (src/tools/commandHook.ts) with real processes: the event on stdin, the
 * environment (the workspace named, no API keys), stdout and stderr apart and bounded, a hook that
 * hangs stopped with everything it started, the sandbox of `bash` around it; and how an answer is
 * read (src/session/CommandHooks.ts `readAnswer`).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { readAnswer } from "../../src/session/CommandHooks.js"
import { type CommandHookSpec, runCommandHook } from "../../src/tools/commandHook.js"
import { isZombie } from "../../src/tools/processGroup.js"
import { defaultSandboxSettings } from "../../src/tools/Sandbox.js"
import { makeSecrets } from "../../src/tools/Secrets.js"
import { hasBwrap, outsideDir, removeOutsideDirs } from "../support/bwrap.js"
import { tempDir } from "../support/tmp.js"

afterAll(removeOutsideDirs)

const KEY = "sk-test-0123456789abcdefghijklmnop"

const spec = (command: string, extra: Partial<CommandHookSpec> = {}): CommandHookSpec => {
  const secrets = makeSecrets({ hide: ["OPENAI_API_KEY"], env: { ...process.env, OPENAI_API_KEY: KEY } })
  return {
    command,
    cwd: tempDir(),
    input: JSON.stringify({ hook_event_name: "PreToolUse", tool_name: "Bash", tool_input: { command: "ls" } }),
    timeoutMs: 30_000,
    env: secrets.env,
    sandbox: { ...defaultSandboxSettings, mode: "off" },
    ...extra
  }
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return !isZombie(pid)
  } catch {
    return false
  }
}

describe("runCommandHook", () => {
  it.live("gives the event on stdin, runs in the workspace with it named, and hides the API keys", () =>
    Effect.gen(function* () {
      const given = spec(
        // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell expansion
        'cat; echo; pwd; echo "dir=$CLAUDE_PROJECT_DIR $LOGBOOK_PROJECT_DIR"; echo "key=${OPENAI_API_KEY:-none}"; echo oops >&2'
      )
      const result = yield* runCommandHook(given)
      const lines = result.stdout.split("\n")
      expect(JSON.parse(lines[0]!)).toEqual(JSON.parse(given.input))
      expect(lines[1]).toBe(fs.realpathSync(given.cwd))
      expect(lines[2]).toBe(`dir=${given.cwd} ${given.cwd}`)
      expect(lines[3]).toBe("key=none")
      expect(result.stderr).toBe("oops\n")
      expect(result.exitCode).toBe(0)
      expect(result.timedOut).toBe(false)
    })
  )

  it.live("keeps only the start of a huge output, and says it was cut", () =>
    Effect.gen(function* () {
      const result = yield* runCommandHook(
        spec("head -c 3000000 /dev/zero | tr '\\0' a; head -c 3000000 /dev/zero | tr '\\0' b >&2", {
          maxOutputBytes: 1000
        })
      )
      expect(result.stdout).toBe("a".repeat(1000))
      expect(result.stderr).toBe("b".repeat(1000))
      expect(result.truncated).toBe(true)
      expect(result.exitCode).toBe(0)
    })
  )

  it.live("stops a hook that hangs past its timeout, and what it started in the background", () =>
    Effect.gen(function* () {
      const given = spec("sleep 1000 & echo $! > bg.pid; sleep 1000", { timeoutMs: 500 })
      const result = yield* runCommandHook(given)
      expect(result.timedOut).toBe(true)
      expect(result.exitCode).toBeUndefined()
      const background = Number(fs.readFileSync(path.join(given.cwd, "bg.pid"), "utf8"))
      expect(background).toBeGreaterThan(0)
      expect(alive(background)).toBe(false)
      expect(readAnswer(result, given.timeoutMs)).toMatchObject({ _tag: "Failed", outcome: "timeout" })
    })
  )

  it.live("a hook's answers: exit 2 blocks with stderr, another code fails, bad JSON fails, text is text", () =>
    Effect.gen(function* () {
      const run = (command: string) => Effect.map(runCommandHook(spec(command)), (r) => readAnswer(r, 30_000))
      expect(yield* run("echo 'not this way' >&2; exit 2")).toEqual({ _tag: "Block", reason: "not this way" })
      expect(yield* run("echo broken >&2; exit 1")).toEqual({
        _tag: "Failed",
        outcome: "failed",
        error: "exit code 1: broken"
      })
      const bad = yield* run("echo '{\"decision\": '")
      expect(bad._tag).toBe("Failed")
      expect(bad._tag === "Failed" && bad.error).toMatch(/^its output is not valid JSON/)
      expect(yield* run('echo \'{"decision":"block","reason":"r"}\'')).toEqual({
        _tag: "Ok",
        json: { decision: "block", reason: "r" },
        text: '{"decision":"block","reason":"r"}'
      })
      expect(yield* run("echo plain context")).toEqual({ _tag: "Ok", json: undefined, text: "plain context" })
    })
  )

  it.live("JSON cut at the bound is not read", () =>
    Effect.gen(function* () {
      const result = yield* runCommandHook(
        spec(`printf '{"reason":"'; head -c 5000 /dev/zero | tr '\\0' x; printf '"}'`, { maxOutputBytes: 100 })
      )
      expect(readAnswer(result, 30_000)).toEqual({
        _tag: "Failed",
        outcome: "failed",
        error: "its JSON output is too long (it was cut, so it is not read)"
      })
    })
  )

  it.live.skipIf(!hasBwrap)("runs in the sandbox of bash: the workspace writable, the rest read-only", () =>
    Effect.gen(function* () {
      const workspace = outsideDir()
      const elsewhere = outsideDir()
      const result = yield* runCommandHook(
        spec(`touch inside && echo made; touch ${elsewhere}/outside 2>/dev/null || echo refused`, {
          cwd: workspace,
          sandbox: { ...defaultSandboxSettings, mode: "on" }
        })
      )
      expect(result.sandboxed).toBe(true)
      expect(result.stdout).toBe("made\nrefused\n")
      expect(fs.existsSync(path.join(workspace, "inside"))).toBe(true)
      expect(fs.existsSync(path.join(elsewhere, "outside"))).toBe(false)
    })
  )
})
