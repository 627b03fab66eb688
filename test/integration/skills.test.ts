/**
 * Skills through the built binary against the scripted model server: the system prompt lists the
 * project's and the user's skills (a broken one skipped and said), the `skill` tool returns a
 * skill's instructions and its files (a user's skill outside the workspace too, and nothing outside
 * its folder), the log, `audit` and `sessions show` name the skill loaded, `rerun` reproduces it; without skills the
 * prompt and the tools are as they were. At the interactive prompt (tmux), the tool line names the
 * skill and `/skills` lists them.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runCli, scratchDir } from "../support/cli.js"
import { type RecordedRequest, Reply } from "../support/scriptedServer.js"
import { hasTmux, runInTmux } from "../support/tmux.js"
import {
  contentText,
  latestSession,
  makeJanitor,
  makeWorkspace,
  notices,
  ofType,
  readLog,
  toolCall,
  toolResult
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const write = (file: string, text: string) => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, text)
}

const systemOf = (request: RecordedRequest): string => {
  const first = request.body.messages[0] as { role: string; content: unknown }
  expect(first.role).toBe("system")
  return first.content as string
}

const toolNames = (request: RecordedRequest) =>
  ((request.body.tools ?? []) as ReadonlyArray<{ readonly function: { readonly name: string } }>).map(
    (tool) => tool.function.name
  )

/**
 * A workspace with a project skill (`release`, with a file), a broken one (no description), and
 * the user's skill `pdf` beside the user's config, with a file, a link that leads out of its folder,
 * and a secret next to the folder.
 */
const setUp = async () => {
  const server = await janitor.server()
  const ws = makeWorkspace(server)
  write(
    path.join(ws.dir, ".logbook", "skills", "release", "SKILL.md"),
    "---\nname: release\ndescription: Cut a release of this project (version bump, changelog, tag).\n---\n" +
      "RELEASE STEPS: bump the version, then run scripts/tag.sh.\n"
  )
  write(path.join(ws.dir, ".logbook", "skills", "release", "scripts", "tag.sh"), "git tag v$1\n")
  write(path.join(ws.dir, ".claude", "skills", "broken", "SKILL.md"), "---\nname: broken\n---\nNo description.\n")
  const config = scratchDir()
  const pdf = path.join(config, "logbook", "skills", "pdf")
  write(
    path.join(pdf, "SKILL.md"),
    "---\ndescription: |\n  Read PDF files:\n  text and tables.\n---\nPDF STEPS: see reference.md.\n"
  )
  write(path.join(pdf, "reference.md"), "PDF REFERENCE: use pdftotext -layout.\n")
  write(path.join(config, "secret.txt"), "TOP SECRET outside the skill\n")
  fs.symlinkSync(path.join(config, "secret.txt"), path.join(pdf, "leak.txt"))
  return { server, ws, env: { XDG_CONFIG_HOME: config } }
}

describe("skills in logbook run", () => {
  it("the system prompt lists the skills; `skill` loads one, and a user's skill's file; the log, audit and sessions show name it", async () => {
    const { env, server, ws } = await setUp()
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_release", "skill", { name: "release" })] }),
      Reply.stream({ toolCalls: [toolCall("call_ref", "skill", { name: "pdf", file: "reference.md" })] }),
      Reply.stream({
        toolCalls: [
          toolCall("call_leak", "skill", { name: "pdf", file: "leak.txt" }),
          toolCall("call_up", "skill", { name: "pdf", file: "../../secret.txt" })
        ]
      }),
      Reply.text("Released.")
    )
    const run = await runCli([...ws.runArgs, "cut a release"], { env })
    expect(run.code, run.stderr).toBe(0)
    expect(notices(run.stderr)).toEqual([
      expect.stringMatching(/^logbook: skill skipped: .*broken\/SKILL\.md: it has no description/)
    ])
    expect(server.requests).toHaveLength(4)
    const [first, second, third, fourth] = server.requests

    // the section names each usable skill with its description on one line; the tool is offered
    const system = systemOf(first!)
    expect(system).toContain("# Skills")
    expect(system).toContain("- pdf: Read PDF files: text and tables.")
    expect(system).toContain("- release: Cut a release of this project (version bump, changelog, tag).")
    expect(system).not.toContain("broken")
    expect(system).not.toContain("RELEASE STEPS")
    expect(toolNames(first!)).toContain("skill")

    // the instructions and the files, relative to the skill's folder
    const loaded = contentText(toolResult(second!, "call_release"))
    expect(loaded).toContain("RELEASE STEPS: bump the version, then run scripts/tag.sh.")
    expect(loaded).toContain("- scripts/tag.sh")
    expect(loaded).not.toContain("- SKILL.md")
    // a file of the user's skill, outside the workspace
    expect(contentText(toolResult(third!, "call_ref"))).toBe("PDF REFERENCE: use pdftotext -layout.\n")
    // nothing outside the skill's folder: not through a link, not through `..`
    const leak = contentText(toolResult(fourth!, "call_leak"))
    const up = contentText(toolResult(fourth!, "call_up"))
    expect(leak).toMatch(/not a file of the skill pdf/)
    expect(up).toMatch(/not a file of the skill pdf/)
    for (const request of server.requests) expect(JSON.stringify(request.body)).not.toContain("TOP SECRET")

    // the log: the calls and, from their metadata, which skill and where it came from
    const id = await latestSession(ws.db, ws.dir)
    const log = await readLog(ws.db, id)
    const finished = ofType(log, "tool.finished").map((e) => e.payload.metadata)
    expect(finished).toEqual([
      expect.objectContaining({ skill: "release", scope: "project" }),
      expect.objectContaining({ skill: "pdf", scope: "user", file: "reference.md" })
    ])
    expect(
      ofType(log, "tool.failed")
        .map((e) => e.payload.callId)
        .sort()
    ).toEqual(["call_leak", "call_up"])

    const audit = await runCli(["audit", "--db", ws.db, id])
    expect(audit.code, audit.stderr).toBe(0)
    expect(audit.stdout).toMatch(/skill release loaded \(project, .*release\/SKILL\.md\)/)
    expect(audit.stdout).toMatch(/skill pdf: read reference\.md \(user, .*pdf\/SKILL\.md\)/)
    expect(audit.stdout).toMatch(/skill pdf: read leak\.txt .*\[failed · .*not a file of the skill pdf/)

    // a re-run loads the skills again and reproduces the session
    const scratch = path.join(scratchDir(), "ws")
    const again = await runCli(["rerun", id, "--db", ws.db, "--workspace", scratch, "--format", "json"], { env })
    expect(again.code, again.stderr).toBe(0)
    expect(JSON.parse(again.stdout).outcome).toEqual({ _tag: "match" })

    const show = await runCli(["sessions", "show", "--db", ws.db, id])
    expect(show.code, show.stderr).toBe(0)
    expect(show.stdout).toMatch(/▸ skill release completed/)
    expect(show.stdout).toMatch(/▸ skill pdf reference\.md completed/)
  })

  it("without skills the prompt has no Skills section and no `skill` tool", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(Reply.text("Hi."))
    const run = await runCli([...ws.runArgs, "hello"], { env: { XDG_CONFIG_HOME: scratchDir() } })
    expect(run.code, run.stderr).toBe(0)
    expect(systemOf(server.requests[0]!)).not.toContain("Skills")
    expect(toolNames(server.requests[0]!)).not.toContain("skill")
  })

  it("`logbook config --system-prompt` prints the section the model gets", async () => {
    const { env, server, ws } = await setUp()
    server.enqueue(Reply.text("Hi."))
    const run = await runCli([...ws.runArgs, "hello"], { env })
    expect(run.code, run.stderr).toBe(0)
    const printed = await runCli(["config", "--cwd", ws.dir, "--system-prompt"], { env })
    expect(printed.code, printed.stderr).toBe(0)
    expect(printed.stdout).toContain("- release: Cut a release")
    expect(printed.stdout.trimEnd()).toBe(systemOf(server.requests[0]!))
  })
})

describe.skipIf(!hasTmux)("skills at the interactive prompt", () => {
  it("the model loads a skill: the tool line names it; /skills lists the skills", async () => {
    const { env, server, ws } = await setUp()
    server.enqueue(
      Reply.stream({ toolCalls: [toolCall("call_release", "skill", { name: "release" })] }),
      Reply.text("Followed the release skill.")
    )
    const run = runInTmux(["--db", ws.db, "--cwd", ws.dir], { env })
    janitor.defer(run.close)
    await run.waitFor(/idle │/)
    run.keys("-l", "cut a release")
    await run.waitFor("│› cut a release")
    run.keys("Enter")
    await run.waitFor("Followed the release skill.")
    expect(run.screen()).toMatch(/skill release/)
    expect(contentText(toolResult(server.requests[1]!, "call_release"))).toContain("RELEASE STEPS")
    run.keys("-l", "/skills")
    await run.waitFor("│› /skills")
    run.keys("Enter")
    await run.waitFor("skills the model may load")
    const screen = run.screen()
    expect(screen).toMatch(/pdf +user +Read PDF files: text and tables\./)
    expect(screen).toMatch(/release +project +Cut a release/)
    expect(screen).toMatch(/skipped: .*broken/)
  })
})
