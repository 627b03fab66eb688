/**
 * Permissions through `logbook run`: the built binary, the config's `permission` rules, the
 * non-interactive default (what needs approval is denied) and `--yes`.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runCli, scratchDir } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import {
  contentText,
  latestSession,
  makeJanitor,
  makeWorkspace,
  ofType,
  readLog,
  toolResult,
  userConfigEnv
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

/** A run whose model calls bash with `command` once, then answers. */
const runBash = async (
  permission: Record<string, unknown>,
  command: string,
  flags: ReadonlyArray<string> = [],
  files: Record<string, string> = {}
) => {
  const server = await janitor.server()
  const ws = makeWorkspace(server, { config: { permission } })
  for (const [name, content] of Object.entries(files)) fs.writeFileSync(path.join(ws.dir, name), content)
  server.enqueue(
    Reply.stream({ toolCalls: [{ id: "call_bash", name: "bash", arguments: [JSON.stringify({ command })] }] }),
    Reply.text("done")
  )
  const result = await runCli([...ws.runArgs, ...flags, "do", "it"])
  const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
  const sent = contentText(toolResult(server.requests[1]!, "call_bash"))
  return { ws, result, log, sent }
}

describe("logbook run: permissions", () => {
  it('a deny rule ("rm *": "deny"): the model reads that it was denied, and the file stays', async () => {
    const { ws, result, log, sent } = await runBash({ bash: { "rm *": "deny" } }, "rm -rf x", [], { x: "keep" })
    expect(result.code).toBe(0)
    expect(sent).toContain('Denied: bash `rm -rf x` is denied by the rule "rm *"')
    expect(sent).toContain("Do not retry it")
    expect(fs.existsSync(path.join(ws.dir, "x"))).toBe(true)
    expect(ofType(log, "tool.invoked")).toEqual([])
  })

  it('"bash": "ask" without --yes: asked and rejected (logged), the command does not run', async () => {
    const { ws, result, log, sent } = await runBash({ bash: "ask" }, "touch made")
    expect(result.code).toBe(0)
    expect(sent).toContain("Denied: bash `touch made` needs approval")
    expect(sent).toContain("logbook run denies what needs approval unless --yes")
    expect(fs.existsSync(path.join(ws.dir, "made"))).toBe(false)
    const asked = ofType(log, "permission.asked")
    expect(asked.map((e) => [e.payload.callId, e.payload.tool, e.payload.pattern])).toEqual([
      ["call_bash", "bash", "touch made"]
    ])
    expect(ofType(log, "permission.replied").map((e) => [e.payload.permissionId, e.payload.reply])).toEqual([
      [asked[0]!.payload.permissionId, "reject"]
    ])
    expect(ofType(log, "tool.invoked")).toEqual([])
  })

  it('"bash": "ask" with --yes: asked and approved once, the command runs', async () => {
    const { ws, result, log, sent } = await runBash({ bash: "ask" }, "touch made", ["--yes"])
    expect(result.code).toBe(0)
    expect(sent).toContain("Exit code: 0")
    expect(fs.existsSync(path.join(ws.dir, "made"))).toBe(true)
    expect(ofType(log, "permission.replied").map((e) => e.payload.reply)).toEqual(["once"])
    expect(ofType(log, "tool.finished")).toHaveLength(1)
  })

  it('allowed by the most specific rule ("echo *": allow under "*": ask): runs without an ask', async () => {
    const { result, log, sent } = await runBash({ bash: { "*": "ask", "echo *": "allow" } }, "echo hello")
    expect(result.code).toBe(0)
    expect(sent).toContain("hello")
    expect(sent).toContain("Exit code: 0")
    expect(ofType(log, "permission.asked")).toEqual([])
    expect(ofType(log, "tool.finished")).toHaveLength(1)
  })
})

describe("logbook run: a path outside the workspace (external_directory: ask by default)", () => {
  const readOutside = async (
    flags: ReadonlyArray<string>,
    permission: { readonly project?: Record<string, unknown>; readonly global?: Record<string, unknown> } = {}
  ) => {
    const server = await janitor.server()
    const ws = makeWorkspace(
      server,
      permission.project === undefined ? {} : { config: { permission: permission.project } }
    )
    const userConfig = userConfigEnv(permission.global === undefined ? {} : { permission: permission.global })
    const outside = path.join(scratchDir(), "notes.txt")
    fs.writeFileSync(outside, "outside secret\n")
    server.enqueue(
      Reply.stream({ toolCalls: [{ id: "call_read", name: "read", arguments: [JSON.stringify({ path: outside })] }] }),
      Reply.text("done")
    )
    const result = await runCli([...ws.runArgs, ...flags, "read it"], { env: userConfig })
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    const sent = contentText(toolResult(server.requests[1]!, "call_read"))
    return { outside, result, log, sent }
  }

  it("without --yes: asked, rejected, the file is not read", async () => {
    const { outside, result, log, sent } = await readOutside([])
    expect(result.code).toBe(0)
    expect(sent).toContain(`Denied: read \`${fs.realpathSync(outside)}\` (outside the workspace) needs approval`)
    expect(sent).not.toContain("outside secret")
    expect(ofType(log, "permission.asked").map((e) => e.payload.tool)).toEqual(["read"])
    expect(ofType(log, "permission.replied").map((e) => e.payload.reply)).toEqual(["reject"])
    expect(ofType(log, "tool.invoked")).toEqual([])
  })

  it("with --yes: approved once, the outside file is read", async () => {
    const { result, log, sent } = await readOutside(["--yes"])
    expect(result.code).toBe(0)
    expect(sent).toContain("outside secret")
    expect(ofType(log, "permission.replied").map((e) => e.payload.reply)).toEqual(["once"])
    expect(ofType(log, "tool.finished")).toHaveLength(1)
  })

  it("the project's logbook.json cannot allow it (it may only tighten the user's rules): still asked, rejected", async () => {
    const { result, log, sent } = await readOutside([], { project: { external_directory: "allow" } })
    expect(result.code).toBe(0)
    expect(sent).toContain("(the project's logbook.json can tighten your rules, not loosen them)")
    expect(sent).not.toContain("outside secret")
    expect(ofType(log, "permission.replied").map((e) => e.payload.reply)).toEqual(["reject"])
  })

  it("the user's own config can allow it: read without an ask", async () => {
    const { result, log, sent } = await readOutside([], { global: { external_directory: "allow" } })
    expect(result.code).toBe(0)
    expect(sent).toContain("outside secret")
    expect(ofType(log, "permission.asked")).toEqual([])
  })
})
