/**
 * Custom commands through the built binary against the scripted model server: `logbook run /name
 * args` sends the command's prompt (the request shows it), with the user's command's model; a
 * project's command cannot choose the model; a near miss of a command's name is refused before
 * anything is sent; `//…` is a message that starts with a /; and `/name args` at the interactive
 * prompt (tmux) sends the same prompt.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runCli, scratchDir } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import { hasTmux, runInTmux } from "../support/tmux.js"
import { contentText, latestSession, makeJanitor, makeWorkspace, messagesOf, notices, readLog } from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const write = (file: string, text: string) => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, text)
}

/** A workspace with two models (`local/scripted`, `local/other`), a project command and a user command. */
const setUp = async () => {
  const server = await janitor.server()
  const ws = makeWorkspace(server, {
    config: {
      provider: {
        local: {
          type: "openai-compatible",
          baseURL: `${server.url}/v1`,
          models: { scripted: {}, other: {} }
        }
      }
    }
  })
  write(
    path.join(ws.dir, ".logbook", "commands", "review.md"),
    "---\ndescription: Review a file\nmodel: local/other\n---\nReview $1 for bugs. Focus: $ARGUMENTS\n"
  )
  write(path.join(ws.dir, ".claude", "commands", "frontend", "lint.md"), "Lint the frontend.\n")
  const config = scratchDir()
  write(
    path.join(config, "logbook", "commands", "explain.md"),
    "---\nmodel: local/other\nargument-hint: <topic>\n---\nExplain this simply.\n"
  )
  return { server, ws, env: { XDG_CONFIG_HOME: config } }
}

const lastUserText = (request: Parameters<typeof messagesOf>[0]): string =>
  contentText(
    messagesOf(request)
      .filter((m) => m.role === "user")
      .at(-1)
  )

describe("custom commands in logbook run", () => {
  it("/review sends the project command's prompt with its arguments, on the session's model (a project cannot choose it)", async () => {
    const { env, server, ws } = await setUp()
    server.enqueue(Reply.text("Looks fine."))
    const run = await runCli([...ws.runArgs, "/review src/a.ts error handling"], { env })
    expect(notices(run.stderr)).toEqual([])
    expect(run.code).toBe(0)
    expect(server.requests).toHaveLength(1)
    const request = server.requests[0]!
    expect(lastUserText(request)).toBe("Review src/a.ts for bugs. Focus: src/a.ts error handling")
    expect(request.body.model).toBe("scripted")
    const id = await latestSession(ws.db, ws.dir)
    const log = await readLog(ws.db, id)
    // the log has the prompt the model got; the title is what the user typed
    expect(log.find((e) => e.type === "user.message")?.payload).toMatchObject({
      text: "Review src/a.ts for bugs. Focus: src/a.ts error handling"
    })
    expect(log.find((e) => e.type === "session.created")?.payload).toMatchObject({
      title: "/review src/a.ts error handling"
    })
  })

  it("a user's command runs on its model; a folder's command is /folder:name; arguments without a placeholder go at the end", async () => {
    const { env, server, ws } = await setUp()
    server.enqueue(Reply.text("Sure."), Reply.text("Done."))
    const explain = await runCli([...ws.runArgs, "/explain", "the", "event", "log"], { env })
    expect(notices(explain.stderr)).toEqual([])
    expect(explain.code).toBe(0)
    expect(server.requests[0]!.body.model).toBe("other")
    expect(lastUserText(server.requests[0]!)).toBe("Explain this simply.\n\nARGUMENTS: the event log")
    const lint = await runCli([...ws.runArgs, "/frontend:lint"], { env })
    expect(lint.code, lint.stderr).toBe(0)
    expect(lastUserText(server.requests[1]!)).toBe("Lint the frontend.")
  })

  it("a near miss of a command's name is refused before anything is sent; //… and a path are messages", async () => {
    const { env, server, ws } = await setUp()
    const typo = await runCli([...ws.runArgs, "/reveiw src/a.ts"], { env })
    expect(typo.code).toBe(2)
    expect(typo.stderr).toMatch(/unknown command \/reveiw: did you mean \/review\?/)
    expect(server.requests).toHaveLength(0)
    expect(fs.existsSync(ws.db)).toBe(false)

    server.enqueue(Reply.text("A comment."), Reply.text("A path."))
    const escaped = await runCli([...ws.runArgs, "//review is a comment marker"], { env })
    expect(escaped.code, escaped.stderr).toBe(0)
    expect(lastUserText(server.requests[0]!)).toBe("/review is a comment marker")
    const pathMessage = await runCli([...ws.runArgs, "/etc/hosts has a typo"], { env })
    expect(pathMessage.code, pathMessage.stderr).toBe(0)
    expect(lastUserText(server.requests[1]!)).toBe("/etc/hosts has a typo")
  })

  it("a command file that cannot be used is skipped and said; the others still work", async () => {
    const { env, server, ws } = await setUp()
    write(path.join(ws.dir, ".logbook", "commands", "broken.md"), "---\ndescription: [unclosed\n---\nBody\n")
    write(path.join(ws.dir, ".logbook", "commands", "help.md"), "Not the built-in help.\n")
    server.enqueue(Reply.text("Ok."))
    const run = await runCli([...ws.runArgs, "/frontend:lint"], { env })
    expect(run.code).toBe(0)
    expect(run.stderr).toMatch(/command file skipped: .*broken\.md: its frontmatter is not YAML/)
    expect(run.stderr).toMatch(/command file skipped: .*help\.md: \/help is a built-in command/)
  })
})

describe.skipIf(!hasTmux)("custom commands at the interactive prompt", () => {
  it("/review <file> sends the command's prompt; a typo names the nearest command", async () => {
    const { env, server, ws } = await setUp()
    server.enqueue(Reply.text("Reviewed it."))
    const run = runInTmux(["--db", ws.db, "--cwd", ws.dir], { env })
    janitor.defer(run.close)
    await run.waitFor(/idle │/)
    run.keys("-l", "/reveiw a.ts")
    await run.waitFor("│› /reveiw a.ts")
    run.keys("Enter")
    await run.waitFor(/unknown command \/reveiw: did you mean \/review\?/)
    expect(server.requests).toHaveLength(0)
    run.keys("-l", "/review a.ts")
    await run.waitFor("│› /review a.ts")
    run.keys("Enter")
    await run.waitFor("Reviewed it.")
    expect(lastUserText(server.requests[0]!)).toBe("Review a.ts for bugs. Focus: a.ts")
    // /help lists them, with their description (or their prompt's first line) and argument hint
    run.keys("-l", "/help")
    await run.waitFor("│› /help")
    run.keys("Enter")
    await run.waitFor("Your commands")
    const screen = run.screen()
    expect(screen).toMatch(/\/review +Review a file/)
    expect(screen).toMatch(/\/explain <topic> +Explain this simply\./)
    expect(screen).toMatch(/\/frontend:lint +Lint the frontend\./)
  })
})
