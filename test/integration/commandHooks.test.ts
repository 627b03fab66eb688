/**
 * Command hooks (docs/hooks.md) through the built binary against the scripted model server: a
 * PreToolUse hook that rewrites a command (the new one ran; the log and `audit` show the change),
 * one that denies with exit 2 (the model reads the reason), one that fails and one that hangs (the
 * session goes on, both recorded, the hung one's processes stopped), UserPromptSubmit blocking a
 * message, SessionStart adding context, Stop making a turn go on (bounded), a project's hook that
 * does not run until approved, and a bad hooks config refused with the file and key named.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runCli } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import { hasTmux, runInTmux } from "../support/tmux.js"
import {
  bashReply,
  contentText,
  latestSession,
  makeJanitor,
  makeWorkspace,
  messagesOf,
  readLog,
  toolResult,
  userConfigEnv
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

/** A hook script in the workspace (`.hooks/<name>`), run as `bash "$CLAUDE_PROJECT_DIR/.hooks/<name>"`. */
const script = (dir: string, name: string, body: string): string => {
  const file = path.join(dir, ".hooks", name)
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, `#!/bin/bash\n${body}\n`, { mode: 0o755 })
  return `bash "$CLAUDE_PROJECT_DIR/.hooks/${name}"`
}

/** The live processes working in `dir` (a hook runs in the workspace), as `pid command`. */
const processesIn = (dir: string): ReadonlyArray<string> => {
  const real = fs.realpathSync(dir)
  return fs.readdirSync("/proc").flatMap((pid) => {
    if (!/^\d+$/.test(pid)) return []
    try {
      if (fs.realpathSync(`/proc/${pid}/cwd`) !== real) return []
      const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
      if (/^[ZX]$/.test(stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3))) return []
      return [`${pid} ${fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ")}`]
    } catch {
      return []
    }
  })
}

const hook = (command: string, extra: Record<string, unknown> = {}) => ({ type: "command", command, ...extra })

/** A workspace, and the user's config with `hooks` (and bash allowed). */
const setUp = async (hooks: (dir: string) => Record<string, unknown>) => {
  const server = await janitor.server()
  const ws = makeWorkspace(server)
  const env = userConfigEnv({ permission: { bash: "allow" }, hooks: hooks(ws.dir) })
  return { server, ws, env }
}

const hookRuns = (log: Awaited<ReturnType<typeof readLog>>) =>
  log.filter((e) => e.type === "hook.ran").map((e) => e.payload as Record<string, unknown>)

const lastUser = (request: Parameters<typeof messagesOf>[0]) =>
  contentText(
    messagesOf(request)
      .filter((m) => m.role === "user")
      .at(-1)
  )

describe("PreToolUse", () => {
  it("a hook that rewrites the command: the new command ran, and the log and audit show the change", async () => {
    const { server, ws, env } = await setUp((dir) => ({
      PreToolUse: [
        {
          matcher: "Bash",
          hooks: [
            hook(
              script(
                dir,
                "rewrite.sh",
                `input=$(cat)
case "$input" in
  *'"tool_name":"Bash"'*'"command":"echo original"'*)
    echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","updatedInput":{"command":"echo rewritten"}}}' ;;
esac`
              )
            )
          ]
        }
      ]
    }))
    server.enqueue(bashReply("c1", "echo original"), Reply.text("done"))
    const run = await runCli([...ws.runArgs, "say it"], { env })
    expect(run.code).toBe(0)
    expect(contentText(toolResult(server.requests[1]!, "c1"))).toContain("rewritten")
    const id = await latestSession(ws.db, ws.dir)
    const log = await readLog(ws.db, id)
    expect(log.find((e) => e.type === "tool.invoked")?.payload).toMatchObject({ input: { command: "echo rewritten" } })
    expect(hookRuns(log)).toEqual([
      expect.objectContaining({
        source: "hook:PreToolUse[0]",
        outcome: "changed",
        changed: true,
        input: { command: "echo original" }
      })
    ])
    const audit = await runCli(["audit", "--db", ws.db, id], { env })
    expect(audit.code).toBe(0)
    expect(audit.stdout).toContain("hook:PreToolUse[0]")
    expect(audit.stdout).toContain("echo rewritten")
    // a re-run runs no hook: the change is served from the log
    const rerun = await runCli(["rerun", id, "--db", ws.db, "--format", "json"], { env })
    expect(rerun.code, rerun.stdout + rerun.stderr).toBe(0)
  })

  it("a hook that denies with exit 2: the command does not run and the model reads the reason", async () => {
    const { server, ws, env } = await setUp((dir) => ({
      PreToolUse: [
        {
          matcher: "Edit|Bash",
          hooks: [hook(script(dir, "deny.sh", 'cat > /dev/null; echo "no deleting files in this repo" >&2; exit 2'))]
        }
      ]
    }))
    fs.writeFileSync(path.join(ws.dir, "keep.txt"), "keep")
    server.enqueue(bashReply("c1", "rm keep.txt"), Reply.text("ok"))
    const run = await runCli([...ws.runArgs, "clean up"], { env })
    expect(run.code).toBe(0)
    expect(contentText(toolResult(server.requests[1]!, "c1"))).toContain("no deleting files in this repo")
    expect(fs.existsSync(path.join(ws.dir, "keep.txt"))).toBe(true)
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(log.some((e) => e.type === "tool.invoked")).toBe(false)
    expect(hookRuns(log)).toEqual([
      expect.objectContaining({ outcome: "blocked", reason: "no deleting files in this repo" })
    ])
  })

  it("a hook that fails (exit 1) lets the call go on; one that hangs is stopped and refuses it; both recorded", async () => {
    const { server, ws, env } = await setUp((dir) => ({
      PreToolUse: [
        { hooks: [hook(script(dir, "broken.sh", 'cat > /dev/null; echo "jq: not found" >&2; exit 1'))] },
        {
          matcher: "Bash",
          hooks: [
            hook(
              script(
                dir,
                "slow.sh",
                `input=$(cat)
case "$input" in *slow*) sleep 1000 & echo $! > "$CLAUDE_PROJECT_DIR/hung.pid"; wait ;; esac`
              ),
              { timeout: 1 }
            )
          ]
        }
      ]
    }))
    server.enqueue(
      Reply.stream({
        toolCalls: [
          { id: "c1", name: "bash", arguments: JSON.stringify({ command: "echo fast" }) },
          { id: "c2", name: "bash", arguments: JSON.stringify({ command: "echo slow" }) }
        ]
      }),
      Reply.text("done")
    )
    const run = await runCli([...ws.runArgs, "go"], { env })
    expect(run.code).toBe(0)
    const second = server.requests[1]!
    expect(contentText(toolResult(second, "c1"))).toContain("fast")
    expect(contentText(toolResult(second, "c2"))).toMatch(/hook:PreToolUse\[1\].*timed out/)
    // the hung hook and what it started are gone (in the sandbox its pids are its namespace's)
    expect(fs.existsSync(path.join(ws.dir, "hung.pid"))).toBe(true)
    expect(processesIn(ws.dir)).toEqual([])
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    const runs = hookRuns(log)
    expect(runs.filter((r) => r.outcome === "failed" && String(r.error).includes("jq: not found"))).toHaveLength(2)
    expect(runs.filter((r) => r.outcome === "timeout" && r.source === "hook:PreToolUse[1]")).toHaveLength(1)
  })
})

describe("UserPromptSubmit, SessionStart and Stop", () => {
  it("UserPromptSubmit blocks a message: nothing is sent, the user reads the reason, the run fails", async () => {
    const { server, ws, env } = await setUp((dir) => ({
      UserPromptSubmit: [
        { hooks: [hook(script(dir, "gate.sh", 'cat > /dev/null; echo "no deploys on Friday" >&2; exit 2'))] }
      ]
    }))
    const run = await runCli([...ws.runArgs, "deploy it"], { env })
    expect(run.code).toBe(1)
    expect(run.stderr).toContain("no deploys on Friday")
    expect(server.requests).toHaveLength(0)
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(log.some((e) => e.type === "user.message")).toBe(false)
    expect(hookRuns(log)).toEqual([expect.objectContaining({ hook: "UserPromptSubmit", outcome: "blocked" })])
    const audit = await runCli(["audit", "--db", ws.db, await latestSession(ws.db, ws.dir)], { env })
    expect(audit.code).toBe(0)
    expect(audit.stdout).toContain("hook:UserPromptSubmit[0]")
    expect(audit.stdout).toContain("no deploys on Friday")
  })

  it("SessionStart and UserPromptSubmit add context that goes with the first message, recorded with it", async () => {
    const { server, ws, env } = await setUp((dir) => ({
      SessionStart: [
        { hooks: [hook(script(dir, "start.sh", 'cat > /dev/null; echo "This project builds with pnpm."'))] }
      ],
      UserPromptSubmit: [
        {
          hooks: [
            hook(
              script(
                dir,
                "submit.sh",
                `cat > /dev/null; echo '{"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":"Ticket: LB-7"}}'`
              )
            )
          ]
        }
      ]
    }))
    server.enqueue(Reply.text("ok"))
    const run = await runCli([...ws.runArgs, "build it"], { env })
    expect(run.code).toBe(0)
    const sent = lastUser(server.requests[0]!)
    expect(sent).toContain("build it")
    expect(sent).toContain("This project builds with pnpm.")
    expect(sent).toContain("Ticket: LB-7")
    const id = await latestSession(ws.db, ws.dir)
    const log = await readLog(ws.db, id)
    expect(log.find((e) => e.type === "user.message")?.payload).toMatchObject({
      text: "build it",
      context: "This project builds with pnpm.\n\nTicket: LB-7"
    })
    // a re-run (which runs no hooks) sends the context the log recorded, and matches
    const rerun = await runCli(["rerun", id, "--db", ws.db, "--format", "json"], { env })
    expect(rerun.code, rerun.stdout + rerun.stderr).toBe(0)
    expect(JSON.parse(rerun.stdout).outcome).toEqual({ _tag: "match" })
  })

  it("a Stop hook that blocks makes the turn go on once with its reason; then it lets it end", async () => {
    const { server, ws, env } = await setUp((dir) => ({
      Stop: [
        {
          hooks: [
            hook(
              script(
                dir,
                "stop.sh",
                `input=$(cat)
case "$input" in *'"stop_hook_active":false'*) echo '{"decision":"block","reason":"Run the tests too."}' ;; esac`
              )
            )
          ]
        }
      ]
    }))
    server.enqueue(Reply.text("Done."), Reply.text("Tests pass."))
    const run = await runCli([...ws.runArgs, "fix it"], { env })
    expect(run.code).toBe(0)
    expect(server.requests).toHaveLength(2)
    expect(lastUser(server.requests[1]!)).toBe("Stop hook feedback:\nRun the tests too.")
    expect(run.stdout).toContain("Tests pass.")
  })

  it("a Stop hook that always blocks goes on at most 3 times", async () => {
    const { server, ws, env } = await setUp((dir) => ({
      Stop: [{ hooks: [hook(script(dir, "nag.sh", 'cat > /dev/null; echo "keep going" >&2; exit 2'))] }]
    }))
    server.enqueue(Reply.text("1"), Reply.text("2"), Reply.text("3"), Reply.text("4"), Reply.text("5"))
    const run = await runCli([...ws.runArgs, "work"], { env })
    expect(run.code).toBe(0)
    expect(server.requests).toHaveLength(4)
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(hookRuns(log).filter((r) => r.hook === "Stop" && r.outcome === "blocked")).toHaveLength(3)
    expect(log.filter((e) => e.type === "turn.finished")).toHaveLength(1)
  })
})

describe("whose hooks run", () => {
  it("a project's hook does not run until approved (`logbook hooks approve`); `logbook config` lists it", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const marker = script(ws.dir, "mark.sh", 'cat > /dev/null; echo ran >> "$CLAUDE_PROJECT_DIR/marker"')
    fs.mkdirSync(path.join(ws.dir, ".claude"))
    fs.writeFileSync(
      path.join(ws.dir, ".claude", "settings.json"),
      JSON.stringify({ hooks: { UserPromptSubmit: [{ hooks: [{ type: "command", command: marker }] }] } })
    )
    const env = userConfigEnv({})
    server.enqueue(Reply.text("one"))
    const first = await runCli([...ws.runArgs, "hello"], { env })
    expect(first.code).toBe(0)
    expect(first.stderr).toMatch(/hook hook:UserPromptSubmit\[0\] of file .*settings\.json is not approved/)
    expect(fs.existsSync(path.join(ws.dir, "marker"))).toBe(false)
    const listed = await runCli(["config", "--cwd", ws.dir, "--format", "json"], { env })
    expect(JSON.parse(listed.stdout).hooks).toEqual([
      expect.objectContaining({
        event: "UserPromptSubmit",
        command: marker,
        scope: "project",
        approved: false,
        from: `file ${path.join(ws.dir, ".claude", "settings.json")}`
      })
    ])
    // approved without a terminal: it runs from the next run on
    const approved = await runCli(["hooks", "approve", "hook:UserPromptSubmit[0]", "--cwd", ws.dir], { env })
    expect(approved.code, approved.stderr).toBe(0)
    expect(approved.stdout).toContain("Approved hook hook:UserPromptSubmit[0]")
    const listed2 = await runCli(["hooks", "list", "--cwd", ws.dir, "--format", "json"], { env })
    expect(JSON.parse(listed2.stdout)).toEqual([expect.objectContaining({ approved: true })])
    server.enqueue(Reply.text("two"))
    const second = await runCli([...ws.runArgs, "again"], { env })
    expect(second.code, second.stderr).toBe(0)
    expect(fs.readFileSync(path.join(ws.dir, "marker"), "utf8")).toBe("ran\n")
  })

  it.skipIf(!hasTmux)(
    "on a terminal, `logbook run` asks; y runs it and remembers it; a changed hook asks again",
    async () => {
      const server = await janitor.server()
      const ws = makeWorkspace(server)
      const settings = (command: string) =>
        fs.writeFileSync(
          path.join(ws.dir, ".claude", "settings.json"),
          JSON.stringify({ hooks: { UserPromptSubmit: [{ hooks: [{ type: "command", command }] }] } })
        )
      const marker = script(ws.dir, "mark.sh", 'cat > /dev/null; echo ran >> "$CLAUDE_PROJECT_DIR/marker"')
      fs.mkdirSync(path.join(ws.dir, ".claude"))
      settings(marker)
      const env = userConfigEnv({})
      server.enqueue(Reply.text("one"), Reply.text("two"), Reply.text("three"))

      const asked = runInTmux([...ws.runArgs, "hello"], { env })
      janitor.defer(asked.close)
      await asked.waitFor(
        /UserPromptSubmit hook of file .*settings\.json is not approved\. It would run[\s\S]*Enter › $/m
      )
      asked.keys("y", "Enter")
      expect(await asked.exited()).toBe(0)
      expect(fs.readFileSync(path.join(ws.dir, "marker"), "utf8")).toBe("ran\n")

      // approved: no question, it runs (without a terminal too)
      const again = await runCli([...ws.runArgs, "again"], { env })
      expect(again.code, again.stderr).toBe(0)
      expect(fs.readFileSync(path.join(ws.dir, "marker"), "utf8")).toBe("ran\nran\n")

      // changed: not approved any more
      settings(`${marker} --changed`)
      const changed = await runCli([...ws.runArgs, "changed"], { env })
      expect(changed.code, changed.stderr).toBe(0)
      expect(changed.stderr).toContain("is not approved")
      expect(fs.readFileSync(path.join(ws.dir, "marker"), "utf8")).toBe("ran\nran\n")
    }
  )

  it("a bad hooks config is refused before anything runs, naming the file and the key", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server, {
      config: { hooks: { PreToolUse: [{ matcher: "Bash(", hooks: [{ type: "command", command: "true" }] }] } }
    })
    const run = await runCli([...ws.runArgs, "hi"], { env: userConfigEnv({}) })
    expect(run.code).toBe(2)
    expect(run.stderr).toContain(path.join(ws.dir, "logbook.json"))
    expect(run.stderr).toContain("hooks.PreToolUse[0].matcher")
    expect(server.requests).toHaveLength(0)
  })
})
