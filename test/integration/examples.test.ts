/**
 * The EXAMPLES of `run`, `compact`, `events`, `config` and `help` (src/cli/examples.ts) work as
 * written: each is run by a shell, in one workspace, with `logbook` on PATH (the built binary),
 * `LOGBOOK_DB` set and the scripted model server behind the workspace's config (its `local` and
 * `ollama` providers). They are shown in their command's help, within 80 columns.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { examples } from "../../src/cli/examples.js"
import { baseEnv, binPath, runCli, scratchDir } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import { contentText, makeJanitor, makeWorkspace, messagesOf, notices } from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const commands = ["run", "compact", "events", "audit", "replay", "config", "help"] as const

/** Runs `command` with sh in `cwd`; with `until`, interrupts it (SIGINT) once its stdout matches. */
const sh = (
  command: string,
  options: { readonly cwd: string; readonly env: NodeJS.ProcessEnv; readonly until?: RegExp }
): Promise<{ readonly code: number | null; readonly stdout: string; readonly stderr: string }> =>
  new Promise((resolve, reject) => {
    // its own process group, so an interrupt reaches logbook and not only the shell
    // stdin /dev/null: an open pipe would be read as context (and waited for)
    const child = spawn("sh", ["-c", command], {
      cwd: options.cwd,
      env: options.env,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"]
    })
    janitor.defer(() => {
      try {
        process.kill(-child.pid!, "SIGKILL")
      } catch {
        // gone
      }
    })
    let stdout = ""
    let stderr = ""
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk
      if (options.until?.test(stdout)) process.kill(-child.pid!, "SIGINT")
    })
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk
    })
    const timer = setTimeout(() => reject(new Error(`${command} did not finish\n${stderr}`)), 30_000)
    child.on("error", reject)
    child.on("close", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })

describe("the EXAMPLES of run, compact, events, config and help", () => {
  it.each(commands)("%s --help ends with its examples, within 80 columns, also through logbook help", async (name) => {
    const help = await runCli([name, "--help"])
    expect(help.code).toBe(0)
    const lines = help.stdout.split("\n")
    const start = lines.indexOf("EXAMPLES")
    expect(start).toBeGreaterThan(lines.indexOf("OPTIONS"))
    const block = lines.slice(start + 2, start + 2 + examples[name]!.length)
    expect(block.map((line) => line.trim().split(/ {3,}/))).toEqual(examples[name]!.map((e) => [...e]))
    for (const line of lines.slice(start)) expect(Array.from(line).length).toBeLessThanOrEqual(80)
    expect((await runCli(["help", name])).stdout).toBe(help.stdout)
  })

  it("every one works as written", async () => {
    const server = await janitor.server()
    const local = { type: "openai-compatible", baseURL: `${server.url}/v1` }
    const ws = makeWorkspace(server, { config: { provider: { local, ollama: local } } })
    // a repository with a change in it, for `git diff`, and the README the examples name
    fs.writeFileSync(path.join(ws.dir, "README.md"), "# demo\n")
    fs.writeFileSync(path.join(ws.dir, "a.txt"), "hello\n")
    const git = (...args: ReadonlyArray<string>) => sh(["git", ...args].join(" "), { cwd: ws.dir, env: baseEnv() })
    expect((await git("init", "-q")).code).toBe(0)
    expect((await git("add", "a.txt")).code).toBe(0)
    fs.writeFileSync(path.join(ws.dir, "a.txt"), "hello world\n")
    // `logbook` on PATH is the built binary; config's `../api` is a directory next to the workspace
    const bin = scratchDir()
    fs.writeFileSync(path.join(bin, "logbook"), `#!/bin/sh\nexec "${process.execPath}" "${binPath}" "$@"\n`, {
      mode: 0o755
    })
    const env = baseEnv({ PATH: `${bin}:${process.env.PATH}`, LOGBOOK_DB: ws.db })
    // an answer for each of the five first runs; the last one (the latest session, which compact and
    // events name) makes a tool call first, for events -t tool.finished; then the summaries
    server.enqueue(
      ...Array.from({ length: 5 }, (_, i) => Reply.text(`answer ${i}`)),
      Reply.stream({ toolCalls: [{ id: "call_ls", name: "bash", arguments: '{"command":"ls"}' }] }),
      ...Array.from({ length: 4 }, (_, i) => Reply.text(`summary ${i}`))
    )

    for (const name of commands) {
      for (const [command] of examples[name]!) {
        const follow = command.includes("--follow")
        // (exec: the shell becomes logbook, whose own exit code is then the one seen)
        const result = follow
          ? await sh(`exec ${command}`, { cwd: ws.dir, env, until: /\n/ })
          : await sh(command, { cwd: ws.dir, env })
        expect(notices(result.stderr), command).toEqual([])
        // --follow goes on until it is interrupted (Ctrl-C: 130), after printing the log
        expect(result.code, `${command}\n${result.stderr}`).toBe(follow ? 130 : 0)
        const wrote = command.includes(" > ")
          ? fs.readFileSync(path.join(ws.dir, command.split(" > ")[1]!), "utf8")
          : result.stdout
        expect(wrote.length, command).toBeGreaterThan(0)
      }
    }
    // the diff went to the model with its message
    const review = server.requests.find((r) => contentText(messagesOf(r).at(-1)).startsWith("review this"))
    expect(contentText(messagesOf(review!).at(-1))).toMatch(/^review this\n\n<stdin>\ndiff --git a\/a\.txt b\/a\.txt\n/)
    // the -m example went to the ollama provider's model
    expect(server.requests.some((r) => r.body.model === "qwen3:8b")).toBe(true)
  })
})
