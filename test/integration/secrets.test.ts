/**
 * The API keys logbook holds for the model are logbook's, not the agent's (src/tools/Secrets.ts),
 * through `logbook run`: the built binary, a keyed provider the user's own config defines, real
 * HTTP. A command the model runs does not see a provider's key variable (unless the user's config
 * passes it in `tools.bash.passEnv`; a project's logbook.json cannot), a key value that reaches a
 * tool's output anyway is masked before it is logged (so neither the SQLite files nor the model's
 * next request hold it), and write/edit refuse text that would put the mask into a file in place of
 * the real key.
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runCli } from "../support/cli.js"
import { type RecordedRequest, Reply, type ScriptedServer, type ScriptedToolCall } from "../support/scriptedServer.js"
import {
  blobText,
  contentText,
  idle,
  latestSession,
  makeJanitor,
  makeWorkspace,
  notices,
  ofType,
  readLog,
  toolResult,
  unanswered,
  userConfigEnv,
  type Workspace
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

/** The key variable of the scripted provider (named in the user's config). */
const KEY_ENV = "LOGBOOK_TEST_KEY"

/** What a masked key is replaced with in the log. */
const masked = (name: string) => `[logbook redacted $${name}]`

/** A fake API key, different in every test, so no other test's run can account for a hit. */
const fakeKey = () => `sk-test-${randomBytes(16).toString("hex")}`

const call = (id: string, name: string, input: unknown): ScriptedToolCall => ({
  id,
  name,
  arguments: JSON.stringify(input)
})

interface KeyedSetup {
  /** `tools.bash` of the user's own config */
  readonly userBash?: Record<string, unknown>
  /** extra top-level fields of the project's logbook.json */
  readonly project?: Record<string, unknown>
}

/**
 * A workspace whose model (`local/scripted`) is served by a scripted server and keyed by `KEY_ENV`:
 * the user's config defines the key variable (a project's logbook.json may not route a key), and
 * `env` sets it — and `OPENAI_API_KEY`, a built-in provider's key that is hidden although its
 * provider is not in use — to fresh fake keys. `APP_TEST_VISIBLE` is an ordinary variable, which
 * commands do see.
 */
const keyedWorkspace = async (setup: KeyedSetup = {}) => {
  const server = await janitor.server()
  const ws = makeWorkspace(server, setup.project === undefined ? {} : { config: setup.project })
  const key = fakeKey()
  const openaiKey = fakeKey()
  const userConfig = userConfigEnv({
    provider: { local: { type: "openai-compatible", baseURL: `${server.url}/v1`, apiKeyEnv: KEY_ENV } },
    ...(setup.userBash === undefined ? {} : { tools: { bash: setup.userBash } })
  })
  const env = {
    ...userConfig,
    [KEY_ENV]: key,
    OPENAI_API_KEY: openaiKey,
    // a developer's own key stays out of the run
    ANTHROPIC_API_KEY: undefined,
    APP_TEST_VISIBLE: "plain-value"
  }
  return { server, ws, key, openaiKey, env }
}

/** The files of the database (`logbook.db`, `-wal`, `-shm`: its directory holds nothing else) that contain `value` as raw bytes. */
const dbFilesHolding = (ws: Workspace, value: string): ReadonlyArray<string> => {
  const dir = path.dirname(ws.db)
  const files = fs.readdirSync(dir)
  expect(files).toContain(path.basename(ws.db))
  return files.filter((file) => fs.readFileSync(path.join(dir, file)).includes(Buffer.from(value)))
}

/** Everything the model server was sent but the headers: each request's method, URL and raw body. */
const sentBodies = (server: ScriptedServer): string =>
  server.requests
    .map((request: RecordedRequest) => `${request.method} ${request.url}\n${JSON.stringify(request.body)}`)
    .join("\n")

/** Asserts `value` is nowhere in the request bodies, the run's output or the database files. */
const expectNowhere = (
  value: string,
  where: { readonly server: ScriptedServer; readonly ws: Workspace; readonly stdout: string; readonly stderr: string }
) => {
  expect(sentBodies(where.server)).not.toContain(value)
  expect(where.stdout).not.toContain(value)
  expect(where.stderr).not.toContain(value)
  expect(dbFilesHolding(where.ws, value)).toEqual([])
}

// ---------------------------------------------------------------------------------------------

describe.each(["text", "json"] as const)("logbook run --format %s: a command the model runs", (format) => {
  it("does not see the providers' key variables, and a key it prints anyway is masked in the log, the output and the model's request", async () => {
    const { server, ws, key, openaiKey, env } = await keyedWorkspace()
    fs.writeFileSync(path.join(ws.dir, "secret.txt"), `token=${key}\nopenai=${openaiKey}\n`)
    const command = [
      `printf 'k=[%s]\\n' "$${KEY_ENV}"`,
      `printf 'o=[%s]\\n' "$OPENAI_API_KEY"`,
      `printf 'v=[%s]\\n' "$APP_TEST_VISIBLE"`,
      `printf 'n=%s\\n' "$(env | grep -c sk-test)"`,
      "cat secret.txt"
    ].join("; ")
    server.enqueue(Reply.stream({ toolCalls: [call("call_env", "bash", { command })] }), Reply.text("Looked."))

    const result = await runCli([...ws.runArgs, "--format", format, "look around"], { env })
    expect(notices(result.stderr)).toEqual([])
    if (format === "json") expect(result.stderr).toBe("")
    expect(result.code).toBe(0)

    // the key was really configured: it went to the server, in the header (and only there)
    expect(server.requests).toHaveLength(2)
    for (const request of server.requests) expect(request.headers.authorization).toBe(`Bearer ${key}`)

    // what the model got back: no key variable (an ordinary one is there), the file's keys masked
    const expected = [
      "k=[]",
      "o=[]",
      "v=[plain-value]",
      "n=0",
      `token=${masked(KEY_ENV)}`,
      `openai=${masked("OPENAI_API_KEY")}`
    ].join("\n")
    const sent = contentText(toolResult(server.requests[1]!, "call_env"))
    expect(sent).toContain(expected)
    expect(sent).toContain("Exit code: 0")
    expect(unanswered(server.requests[1]!)).toEqual([])

    // the log: the result as the model got it, the command's whole output (its blob) masked too
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    const finished = ofType(log, "tool.finished").find((e) => e.payload.callId === "call_env")!
    expect(JSON.stringify(finished.payload.output)).toContain(masked(KEY_ENV))
    const record = finished.payload.metadata as { readonly command: string; readonly outputBlob: string }
    expect(record.command).toBe(command)
    expect(await blobText(ws.db, record.outputBlob)).toBe(`${expected}\n`)
    expect(log.at(-1)).toMatchObject(idle)

    // neither key anywhere else: the requests' bodies, stdout, stderr, the database's raw bytes
    expectNowhere(key, { server, ws, ...result })
    expectNowhere(openaiKey, { server, ws, ...result })
  })
})

describe("logbook run: a key in the user's message", () => {
  it("is masked in the message, in the session's title (cut from it) and in what the model is sent; `sessions` shows the mask", async () => {
    const { server, ws, key, env } = await keyedWorkspace()
    server.enqueue(Reply.text("Noted."))
    // the key starts within the title's first 60 characters and runs past them
    const message = `the staging key is ${key} for tests`
    const result = await runCli([...ws.runArgs, message], { env })
    expect(result.code).toBe(0)
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "session.created")[0]!.payload.title).toMatch(/^the staging key is \[logbook redact/)
    expect(JSON.stringify(server.requests[0]!.body)).toContain(`the staging key is ${masked(KEY_ENV)} for tests`)
    // the table cuts the title to fit 80 columns: the JSON has it whole
    const sessions = await runCli(["sessions", "list", "--db", ws.db], { env })
    expect(sessions.stdout).toContain("the staging key is")
    const listed = await runCli(["sessions", "list", "--format", "json", "--db", ws.db], { env })
    expect((JSON.parse(listed.stdout) as Array<{ title: string }>)[0]!.title).toMatch(
      /^the staging key is \[logbook redact/
    )
    expectNowhere(key.slice(0, 12), {
      server,
      ws,
      stdout: result.stdout + sessions.stdout + listed.stdout,
      stderr: result.stderr
    })
  })
})

describe("logbook run: tools.bash.passEnv", () => {
  it("in the user's own config: the command sees that variable (only that one), and what it prints of it is still masked", async () => {
    const { server, ws, key, env } = await keyedWorkspace({ userBash: { passEnv: [KEY_ENV] } })
    // the command compares the variable with the file, so the key is not in the command the model sends
    fs.writeFileSync(path.join(ws.dir, "expected.txt"), key)
    const command = [
      `if [ "$${KEY_ENV}" = "$(cat expected.txt)" ]; then echo has-key; else echo no-key; fi`,
      `printf 'k=[%s]\\n' "$${KEY_ENV}"`,
      `printf 'o=[%s]\\n' "$OPENAI_API_KEY"`
    ].join("; ")
    server.enqueue(Reply.stream({ toolCalls: [call("call_env", "bash", { command })] }), Reply.text("Checked."))

    const result = await runCli([...ws.runArgs, "check the key"], { env })
    expect(notices(result.stderr)).toEqual([])
    expect(result.code).toBe(0)

    const sent = contentText(toolResult(server.requests[1]!, "call_env"))
    expect(sent).toContain(["has-key", `k=[${masked(KEY_ENV)}]`, "o=[]"].join("\n"))
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    const finished = ofType(log, "tool.finished").find((e) => e.payload.callId === "call_env")!
    const record = finished.payload.metadata as { readonly outputBlob: string }
    expect(await blobText(ws.db, record.outputBlob)).toBe(`has-key\nk=[${masked(KEY_ENV)}]\no=[]\n`)
    expectNowhere(key, { server, ws, ...result })
  })

  it("in the project's logbook.json only: ignored, with a notice on stderr; the command does not see the variable", async () => {
    const { server, ws, key, env } = await keyedWorkspace({
      project: { tools: { bash: { passEnv: [KEY_ENV, "OPENAI_API_KEY"] } } }
    })
    const command = `printf 'k=[%s]\\n' "$${KEY_ENV}"; printf 'o=[%s]\\n' "$OPENAI_API_KEY"`
    server.enqueue(Reply.stream({ toolCalls: [call("call_env", "bash", { command })] }), Reply.text("Checked."))

    const result = await runCli([...ws.runArgs, "check the key"], { env })
    expect(result.code).toBe(0)
    expect(result.stderr).toContain(
      `logbook: ignoring tools.bash.passEnv ${KEY_ENV}, OPENAI_API_KEY of ${path.join(ws.dir, "logbook.json")}: ` +
        "only your own config may let commands see API keys"
    )
    const sent = contentText(toolResult(server.requests[1]!, "call_env"))
    expect(sent).toContain("k=[]\no=[]")
    expectNowhere(key, { server, ws, ...result })
  })

  it("the project's logbook.json may pass fewer than the user's config: an empty list hides the variable again, without a notice", async () => {
    const { server, ws, env } = await keyedWorkspace({
      userBash: { passEnv: [KEY_ENV] },
      project: { tools: { bash: { passEnv: [] } } }
    })
    const command = `printf 'k=[%s]\\n' "$${KEY_ENV}"`
    server.enqueue(Reply.stream({ toolCalls: [call("call_env", "bash", { command })] }), Reply.text("Checked."))

    const result = await runCli([...ws.runArgs, "check the key"], { env })
    expect(notices(result.stderr)).toEqual([])
    expect(result.code).toBe(0)
    expect(contentText(toolResult(server.requests[1]!, "call_env"))).toContain("k=[]")
  })
})

describe("logbook run: write and edit with a masked key", () => {
  const secretFile = (key: string) => `# settings\nname=demo\ntoken=${key}\n`

  it("the model reads the file (masked), then copies the mask back with write and edit: all refused, the key stays in the file", async () => {
    const { server, ws, key, env } = await keyedWorkspace()
    const file = path.join(ws.dir, "secret.txt")
    fs.writeFileSync(file, secretFile(key))
    const copied = `# settings\nname=renamed\ntoken=${masked(KEY_ENV)}\n`
    server.enqueue(
      Reply.stream({ toolCalls: [call("call_read", "read", { path: "secret.txt" })] }),
      Reply.stream({ toolCalls: [call("call_write", "write", { path: "secret.txt", content: copied })] }),
      Reply.stream({
        toolCalls: [
          call("call_edit", "edit", {
            path: "secret.txt",
            oldString: `name=demo\ntoken=${masked(KEY_ENV)}`,
            newString: `name=renamed\ntoken=${masked(KEY_ENV)}`
          })
        ]
      }),
      // the marker only in newString: it would add the mask as if it were the value
      Reply.stream({
        toolCalls: [
          call("call_add", "edit", {
            path: "secret.txt",
            oldString: "name=demo",
            newString: `name=demo\nbackup=${masked(KEY_ENV)}`
          })
        ]
      }),
      Reply.text("I could not change it.")
    )

    const result = await runCli([...ws.runArgs, "rename the setting"], { env })
    expect(notices(result.stderr)).toEqual([])
    expect(result.code).toBe(0)
    expect(server.requests).toHaveLength(5)

    const last = server.requests.at(-1)!
    expect(unanswered(last)).toEqual([])
    // what the read gave the model: the file with its key masked
    const read = contentText(toolResult(last, "call_read"))
    expect(read).toContain(`token=${masked(KEY_ENV)}`)
    expect(read).toContain("name=demo")
    // both refusals reached the model, naming the marker and why
    const wrote = contentText(toolResult(last, "call_write"))
    expect(wrote).toContain(`content contains ${masked(KEY_ENV)}`)
    expect(wrote).toContain("logbook masked an API key there")
    const edited = contentText(toolResult(last, "call_edit"))
    expect(edited).toContain(`oldString contains ${masked(KEY_ENV)}`)
    expect(edited).toContain("logbook masked an API key there")
    const added = contentText(toolResult(last, "call_add"))
    expect(added).toContain(`newString contains ${masked(KEY_ENV)}`)
    expect(added).toContain("logbook masked an API key there")

    // the file still holds the real key; nothing was changed, so no blob holds it either
    expect(fs.readFileSync(file, "utf8")).toBe(secretFile(key))
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "file.changed")).toEqual([])
    expect(
      ofType(log, "tool.failed")
        .map((e) => e.payload.callId)
        .sort()
    ).toEqual(["call_add", "call_edit", "call_write"])
    expect(log.at(-1)).toMatchObject(idle)
    expectNowhere(key, { server, ws, ...result })
  })

  it("an edit that leaves the masked part out goes through: the key in the file is intact (and the change's blobs keep it exact)", async () => {
    const { server, ws, key, env } = await keyedWorkspace()
    const file = path.join(ws.dir, "secret.txt")
    fs.writeFileSync(file, secretFile(key))
    server.enqueue(
      Reply.stream({ toolCalls: [call("call_read", "read", { path: "secret.txt" })] }),
      Reply.stream({
        toolCalls: [
          call("call_edit", "edit", { path: "secret.txt", oldString: "name=demo", newString: "name=renamed" })
        ]
      }),
      Reply.text("Renamed.")
    )

    const result = await runCli([...ws.runArgs, "rename the setting"], { env })
    expect(notices(result.stderr)).toEqual([])
    expect(result.code).toBe(0)
    expect(contentText(toolResult(server.requests.at(-1)!, "call_edit"))).not.toContain("logbook masked")
    expect(fs.readFileSync(file, "utf8")).toBe(`# settings\nname=renamed\ntoken=${key}\n`)

    // file.changed blobs are the audit of what changed: kept exact, key included (by design)
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    const changes = ofType(log, "file.changed")
    expect(changes.map((e) => [e.payload.path, e.payload.op])).toEqual([["secret.txt", "update"]])
    expect(await blobText(ws.db, changes[0]!.payload.beforeHash!)).toBe(secretFile(key))
    expect(await blobText(ws.db, changes[0]!.payload.afterHash!)).toBe(`# settings\nname=renamed\ntoken=${key}\n`)
    // ... but the model never got it
    expect(sentBodies(server)).not.toContain(key)
    expect(result.stdout).not.toContain(key)
  })

  it("a marker the file already holds literally (say, docs about logbook) may be kept by write and edit", async () => {
    const { server, ws, env } = await keyedWorkspace()
    const file = path.join(ws.dir, "notes.md")
    const notes = `Keys show up as ${masked(KEY_ENV)} in the log.\n`
    fs.writeFileSync(file, notes)
    const edited = `Masked keys show up as ${masked(KEY_ENV)} in the log.\n`
    server.enqueue(
      Reply.stream({ toolCalls: [call("call_read", "read", { path: "notes.md" })] }),
      Reply.stream({
        toolCalls: [
          call("call_edit", "edit", { path: "notes.md", oldString: notes.trimEnd(), newString: edited.trimEnd() })
        ]
      }),
      Reply.stream({ toolCalls: [call("call_write", "write", { path: "notes.md", content: `${edited}More.\n` })] }),
      Reply.text("Updated.")
    )

    const result = await runCli([...ws.runArgs, "update the notes"], { env })
    expect(notices(result.stderr)).toEqual([])
    expect(result.code).toBe(0)
    const last = server.requests.at(-1)!
    expect(contentText(toolResult(last, "call_edit"))).not.toContain("logbook masked")
    expect(contentText(toolResult(last, "call_write"))).not.toContain("logbook masked")
    expect(fs.readFileSync(file, "utf8")).toBe(`${edited}More.\n`)
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    expect(ofType(log, "file.changed").map((e) => e.payload.callId)).toEqual(["call_edit", "call_write"])
  })
})
