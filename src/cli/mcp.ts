/**
 * `logbook mcp`: the MCP servers of the user's config and of the project (docs/mcp.md). `list`
 * shows each with where it came from and whether it may start; `add` and `remove` edit the user's
 * config file; `test` starts one, lists its tools and stops it; `approve` lets a server a project
 * declares start, pinned to its definition as it is now; `login` authorizes logbook with an HTTP
 * server that needs OAuth (the user's browser comes back to a loopback server) and `logout` forgets it.
 */
import * as Http from "node:http"
import { homedir } from "node:os"
import * as NodePath from "node:path"
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as FileSystem from "@effect/platform/FileSystem"
import { Clock, Console, Duration, Effect, Config as EffectConfig, Either, HashMap, Option } from "effect"
import { Config, type ConfigService, resolveSources, sandboxSettings, toolSecrets } from "../config/Config.js"
import { parseJsonc } from "../config/Jsonc.js"
import { approveMcpServer, type McpServerEntry, mcpServerEntries } from "../config/McpTrust.js"
import { type Authorization, authFile, forgetAuthorization, McpClient } from "../mcp/McpClient.js"
import { mcpToolName } from "../mcp/McpTools.js"
import { sanitize } from "../present/sanitize.js"
import { probeSandbox } from "../tools/Sandbox.js"
import { makeSecrets } from "../tools/Secrets.js"
import { CliError } from "./errors.js"
import { cwdOption, formatOption, resolveCwd } from "./options.js"
import { stdoutStyle, table } from "./render.js"

/** The most of a tool's description `mcp test` prints (the model gets it whole, up to its cap). */
const MAX_DESCRIPTION_SHOWN = 1000

const cwd = cwdOption("The workspace whose project servers (.mcp.json, logbook.json) to include.")
const nameArg = Args.text({ name: "name" }).pipe(Args.withDescription("The server's name (a key of mcpServers)."))

const loadConfig = (dir: string) => Effect.provide(Config, Config.layer({ cwd: dir }))

/** The OAuth store of HTTP servers, in logbook's data dir. */
const authFileOf = Effect.gen(function* () {
  const home = yield* EffectConfig.string("HOME").pipe(EffectConfig.withDefault(homedir()))
  const xdg = yield* EffectConfig.string("XDG_DATA_HOME").pipe(EffectConfig.withDefault(""))
  return authFile({ XDG_DATA_HOME: xdg, HOME: home })
})

/** How long `mcp login` waits for the browser to come back. */
const LOGIN_WAIT = Duration.minutes(5)

const entriesOf = (config: ConfigService, dir: string) => mcpServerEntries(config, dir)

const status = (entry: McpServerEntry): string =>
  !entry.enabled ? "disabled" : !entry.approved ? "not approved" : entry.scope === "project" ? "approved" : "enabled"

const target = (entry: McpServerEntry): string =>
  entry.spec.type === "http" ? entry.spec.url : [entry.spec.command, ...entry.spec.args].join(" ")

const findEntry = (config: ConfigService, dir: string, name: string) =>
  Effect.gen(function* () {
    const { entries } = yield* entriesOf(config, dir)
    const entry = entries.find((e) => e.name === name)
    if (entry === undefined) {
      const known = entries.map((e) => e.name)
      return yield* CliError.usage(
        `no MCP server "${name}" is configured for ${dir}` +
          (known.length === 0 ? "; add one with `logbook mcp add`" : ` (configured: ${known.join(", ")})`)
      )
    }
    return entry
  })

// ---------------------------------------------------------------------------------------------
// list

const mcpList = Command.make(
  "list",
  { cwd, format: formatOption(["text", "json"], "text: a table; json: one object per server.") },
  Effect.fn("cli.mcp.list")(function* ({ cwd, format }) {
    const dir = yield* resolveCwd(cwd)
    const config = yield* loadConfig(dir)
    const { entries, notices } = yield* entriesOf(config, dir)
    for (const notice of notices) yield* Console.error(`logbook: ${notice}`)
    if (format === "json") {
      const out = entries.map((e) => ({
        name: e.name,
        type: e.spec.type,
        status: status(e),
        scope: e.scope,
        source: e.source,
        hash: e.hash,
        definition: e.entry
      }))
      yield* Console.log(JSON.stringify(out, null, 2))
      return
    }
    if (entries.length === 0) {
      yield* Console.log("No MCP servers are configured. Add one with `logbook mcp add <name> -- <command> [args…]`.")
      return
    }
    const style = yield* stdoutStyle
    const rows = entries.map((e) => [e.name, e.spec.type, status(e), target(e), style.dim(e.source)])
    yield* Console.log(table(["NAME", "TYPE", "STATUS", "COMMAND / URL", "FROM"], rows, style).join("\n"))
    if (entries.some((e) => e.enabled && !e.approved)) {
      yield* Console.log(
        "\nA server a project declares starts only once you approved it: `logbook mcp approve <name>` " +
          "(see its whole definition with `logbook mcp list --format json`)."
      )
    }
  })
).pipe(
  Command.withDescription(
    "List the MCP servers of your config and of the project (.mcp.json, logbook.json): their transport, " +
      "whether they start (a project's only once approved) and where each came from.\n" +
      "Example: logbook mcp list --cwd ~/src/app"
  )
)

// ---------------------------------------------------------------------------------------------
// add / remove: the user's config file

/** The user's config file as an object, or why it cannot be rewritten. */
const readUserFile = (file: string) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs.readFileString(file).pipe(Effect.orElseSucceed(() => ""))
    if (text.trim() === "") return {} as Record<string, unknown>
    let value: unknown
    try {
      value = JSON.parse(text)
    } catch {
      const jsonc = parseJsonc(text)
      return yield* CliError.usage(
        Either.isRight(jsonc)
          ? `${file} has comments or trailing commas, which rewriting it would lose; edit its "mcpServers" by hand`
          : `${file} is not valid JSON; fix it first`
      )
    }
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      return yield* CliError.usage(`${file} does not hold a JSON object; fix it first`)
    }
    return value as Record<string, unknown>
  })

const writeUserFile = (file: string, value: Record<string, unknown>) =>
  Effect.gen(function* () {
    // the new file must be a valid config on its own
    const checked = resolveSources([{ source: { _tag: "File", path: file }, value }])
    if (Either.isLeft(checked)) return yield* CliError.usage(checked.left.message)
    const fs = yield* FileSystem.FileSystem
    yield* fs.makeDirectory(NodePath.dirname(file), { recursive: true })
    const temp = `${file}.${process.pid}.tmp`
    yield* fs.writeFileString(temp, `${JSON.stringify(value, null, 2)}\n`, { mode: 0o600 })
    yield* fs.rename(temp, file)
  }).pipe(
    Effect.catchTags({
      SystemError: (error) => CliError.failed(`cannot write ${file}: ${error.message}`),
      BadArgument: (error) => CliError.failed(`cannot write ${file}: ${error.message}`)
    })
  )

const userFileOf = (config: ConfigService) => {
  const file = config.files.find((f) => f.kind === "global")?.path
  return file === undefined ? CliError.usage("there is no user config file to write") : Effect.succeed(file)
}

const mcpAdd = Command.make(
  "add",
  {
    name: nameArg,
    command: Args.text({ name: "command" }).pipe(
      Args.repeated,
      Args.withDescription("stdio: the command that is the server and its arguments, after --.")
    ),
    url: Options.text("url").pipe(Options.optional, Options.withDescription("A Streamable HTTP server's URL.")),
    env: Options.keyValueMap("env").pipe(
      Options.optional,
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${NAME} reference, as config files write it
      Options.withDescription("stdio: a variable of the server's environment, NAME=value (a secret as NAME=${VAR}).")
    ),
    header: Options.keyValueMap("header").pipe(
      Options.optional,
      Options.withDescription("http: a header of every request, Name=value.")
    ),
    bearerTokenEnv: Options.text("bearer-token-env").pipe(
      Options.optional,
      Options.withDescription("http: the variable whose value is sent as Authorization: Bearer <value>.")
    ),
    cwd
  },
  Effect.fn("cli.mcp.add")(function* ({ name, command, url, env, header, bearerTokenEnv, cwd }) {
    const dir = yield* resolveCwd(cwd)
    const config = yield* loadConfig(dir)
    const file = yield* userFileOf(config)
    if (Option.isSome(url) === command.length > 0) {
      return yield* CliError.usage(
        "give either a command (logbook mcp add <name> -- <command> [args…]) or --url <url> for an HTTP server"
      )
    }
    const entry: Record<string, unknown> = Option.isSome(url)
      ? {
          type: "http",
          url: url.value,
          ...(Option.isSome(header) ? { headers: Object.fromEntries(HashMap.toEntries(header.value)) } : {}),
          ...(Option.isSome(bearerTokenEnv) ? { bearerTokenEnv: bearerTokenEnv.value } : {})
        }
      : {
          command: command[0],
          ...(command.length > 1 ? { args: command.slice(1) } : {}),
          ...(Option.isSome(env) ? { env: Object.fromEntries(HashMap.toEntries(env.value)) } : {})
        }
    const value = yield* readUserFile(file)
    const servers = (value.mcpServers ?? {}) as Record<string, unknown>
    if (Object.hasOwn(servers, name)) {
      return yield* CliError.usage(`MCP server "${name}" is in ${file} already; remove it first to replace it`)
    }
    yield* writeUserFile(file, { ...value, mcpServers: { ...servers, [name]: entry } })
    yield* Console.log(`Added MCP server "${name}" to ${file}. Try it with \`logbook mcp test ${name}\`.`)
  })
).pipe(
  Command.withDescription(
    "Add an MCP server to your own config (~/.config/logbook/config.json).\n" +
      "Examples: logbook mcp add everything -- npx -y @modelcontextprotocol/server-everything\n" +
      "          logbook mcp add docs --url https://example.com/mcp --bearer-token-env DOCS_TOKEN"
  )
)

const mcpRemove = Command.make(
  "remove",
  { name: nameArg, cwd },
  Effect.fn("cli.mcp.remove")(function* ({ name, cwd }) {
    const dir = yield* resolveCwd(cwd)
    const config = yield* loadConfig(dir)
    const file = yield* userFileOf(config)
    const value = yield* readUserFile(file)
    const servers = { ...((value.mcpServers ?? {}) as Record<string, unknown>) }
    if (!Object.hasOwn(servers, name)) {
      const { entries } = yield* entriesOf(config, dir)
      const other = entries.find((e) => e.name === name)
      return yield* CliError.usage(
        other === undefined
          ? `no MCP server "${name}" is in ${file}`
          : `MCP server "${name}" comes from ${other.source}, not from ${file}; edit that file to remove it`
      )
    }
    delete servers[name]
    yield* writeUserFile(file, { ...value, mcpServers: servers })
    yield* Console.log(`Removed MCP server "${name}" from ${file}.`)
  })
).pipe(Command.withDescription("Remove an MCP server from your own config.\nExample: logbook mcp remove everything"))

// ---------------------------------------------------------------------------------------------
// test / approve

const mcpTest = Command.make(
  "test",
  { name: nameArg, cwd },
  Effect.fn("cli.mcp.test")(function* ({ name, cwd }) {
    const dir = yield* resolveCwd(cwd)
    const config = yield* loadConfig(dir)
    const entry = yield* findEntry(config, dir, name)
    if (!entry.approved) {
      return yield* CliError.usage(
        `MCP server "${name}" of ${entry.source} is not approved; approve it first with \`logbook mcp approve ${name}\``
      )
    }
    // in the sandbox of the agent's commands where it can run, as a session starts it
    const home = yield* EffectConfig.string("HOME").pipe(EffectConfig.withDefault(homedir()))
    const sandbox = sandboxSettings(config, home).settings
    const globalFile = config.files.find((file) => file.kind === "global")?.path
    const hidden = [...sandbox.hidden, ...(globalFile === undefined ? [] : [NodePath.dirname(globalFile)])]
    const status = sandbox.mode === "off" ? undefined : yield* probeSandbox({ network: sandbox.network })
    const auth = yield* authFileOf
    const started = yield* Clock.currentTimeMillis
    const outcome = yield* Effect.scoped(
      Effect.gen(function* () {
        const client = yield* McpClient
        const connection = yield* client.connect(name, entry.spec, { cwd: dir })
        return {
          tools: connection.tools,
          leftOut: connection.toolsLeftOut,
          ms: (yield* Clock.currentTimeMillis) - started
        }
      })
    ).pipe(
      // as a session starts it: without the API key variables
      Effect.provide(
        McpClient.layer({
          env: makeSecrets(toolSecrets(config)).env,
          sandbox: { ...sandbox, hidden, status },
          authFile: auth
        })
      ),
      Effect.catchTag("McpError", (error) => CliError.failed(error.message))
    )
    const more = outcome.leftOut > 0 ? ` (and ${outcome.leftOut} more past its maxTools)` : ""
    yield* Console.log(`✓ ${name}: started in ${outcome.ms} ms, ${outcome.tools.length} tools${more}; stopped`)
    // the whole description the model would read, on one line, sanitised: a server's text may hide what it says
    for (const tool of outcome.tools) {
      const text = sanitize(tool.description.replace(/\s+/g, " ").trim())
      const shown = text.length > MAX_DESCRIPTION_SHOWN ? `${text.slice(0, MAX_DESCRIPTION_SHOWN - 1)}…` : text
      yield* Console.log(`  ${mcpToolName(name, tool.name)}  ${shown}`)
    }
  })
).pipe(
  Command.withDescription(
    "Start an MCP server, list its tools (as the model is offered them), and stop it.\n" +
      "Example: logbook mcp test everything"
  )
)

const mcpApprove = Command.make(
  "approve",
  { name: nameArg, cwd },
  Effect.fn("cli.mcp.approve")(function* ({ name, cwd }) {
    const dir = yield* resolveCwd(cwd)
    const config = yield* loadConfig(dir)
    const entry = yield* findEntry(config, dir, name)
    if (entry.scope === "user") {
      yield* Console.log(`MCP server "${name}" is in your own config (${entry.source}): it needs no approval.`)
      return
    }
    const file = yield* approveMcpServer(config, dir, name, entry.hash).pipe(
      Effect.catchAll((error) => CliError.failed(`could not record the approval: ${error.message}`))
    )
    yield* Console.log(
      [
        `Approved MCP server "${name}" of ${entry.source} for ${dir}, as it is now:`,
        JSON.stringify(entry.entry, null, 2),
        `(recorded in ${file}; if the definition changes, it must be approved again)`
      ].join("\n")
    )
  })
).pipe(
  Command.withDescription(
    "Let a server a project declares (.mcp.json or its logbook.json) start in this workspace: its definition " +
      "as it is now is approved; a changed one is not.\nExample: logbook mcp approve github --cwd ~/src/app"
  )
)

// ---------------------------------------------------------------------------------------------
// login / logout

/** An HTTP server that may use OAuth (not one given a bearer token), or why not. */
const oauthServer = (config: ConfigService, dir: string, name: string) =>
  Effect.gen(function* () {
    const entry = yield* findEntry(config, dir, name)
    const spec = entry.spec
    if (spec.type !== "http") {
      return yield* CliError.usage(`MCP server "${name}" is a command (stdio), not an HTTP server: it needs no login`)
    }
    if (spec.bearerTokenEnv !== undefined) {
      return yield* CliError.usage(
        `MCP server "${name}" is given a bearer token from ${spec.bearerTokenEnv}: it needs no login`
      )
    }
    return { entry, spec }
  })

type Loopback = Http.Server & { waiting?: ((query: URLSearchParams) => boolean) | undefined }

/**
 * A loopback server on 127.0.0.1 (a free port) that the browser comes back to: `visit` prints the
 * authorization URL and resolves to the code of the redirect whose `state` is the URL's.
 */
const loopback = Effect.acquireRelease(
  Effect.async<Loopback, CliError>((resume) => {
    const server: Loopback = Http.createServer((request, response) => {
      const url = new URL(request.url ?? "/", "http://127.0.0.1")
      const done = url.pathname === "/callback" && server.waiting?.(url.searchParams) === true
      response.writeHead(done ? 200 : 400, { "content-type": "text/plain; charset=utf-8" })
      response.end(
        done
          ? "logbook has the answer of the authorization; you can close this tab.\n"
          : "This is not the authorization logbook is waiting for.\n"
      )
    })
    server.once("error", (error) => resume(CliError.failed(`cannot listen on 127.0.0.1: ${error.message}`)))
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
  }),
  (server) =>
    Effect.async<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
)

const mcpLogin = Command.make(
  "login",
  { name: nameArg, cwd },
  Effect.fn("cli.mcp.login")(function* ({ name, cwd }) {
    const dir = yield* resolveCwd(cwd)
    const config = yield* loadConfig(dir)
    const { entry, spec } = yield* oauthServer(config, dir, name)
    if (!entry.approved) {
      return yield* CliError.usage(
        `MCP server "${name}" of ${entry.source} is not approved; approve it first with \`logbook mcp approve ${name}\``
      )
    }
    const auth = yield* authFileOf
    const waitMs = Duration.toMillis(LOGIN_WAIT)
    let visited = false
    const tools = yield* Effect.scoped(
      Effect.gen(function* () {
        const server = yield* loopback
        const port = (server.address() as { port: number }).port
        const authorization: Authorization = {
          redirectUrl: `http://127.0.0.1:${port}/callback`,
          visit: (url) =>
            new Promise<string>((resolve, reject) => {
              visited = true
              const state = url.searchParams.get("state")
              const timer = setTimeout(() => {
                server.waiting = undefined
                reject(new Error(`the browser did not come back within ${Duration.format(LOGIN_WAIT)}`))
              }, waitMs)
              server.waiting = (query) => {
                if (state !== null && query.get("state") !== state) return false
                server.waiting = undefined
                clearTimeout(timer)
                const code = query.get("code")
                if (code !== null) resolve(code)
                else {
                  const error = query.get("error_description") ?? query.get("error") ?? "no code"
                  reject(new Error(`the authorization was refused: ${sanitize(error).slice(0, 200)}`))
                }
                return true
              }
              process.stdout.write(
                `Open this URL in your browser to authorize logbook with MCP server "${name}":\n\n  ${url.href}\n\n` +
                  `Waiting for the browser to come back to ${authorization.redirectUrl} ` +
                  `(up to ${Duration.format(LOGIN_WAIT)}; Ctrl-C cancels)…\n`
              )
            })
        }
        const client = yield* McpClient
        const connection = yield* client.connect(
          name,
          { ...spec, startTimeoutMs: spec.startTimeoutMs + waitMs },
          { cwd: dir, authorization }
        )
        return connection.tools.length
      })
    ).pipe(
      Effect.provide(McpClient.layer({ env: makeSecrets(toolSecrets(config)).env, authFile: auth })),
      Effect.catchTag("McpError", (error) => CliError.failed(error.message))
    )
    yield* Console.log(
      visited
        ? `✓ Logged in to MCP server "${name}" (${tools} tools); its tokens are kept in ${auth}.`
        : `✓ MCP server "${name}" started without a new authorization (${tools} tools): it needs none, or the kept tokens still work.`
    )
  })
).pipe(
  Command.withDescription(
    "Authorize logbook with an HTTP MCP server that needs OAuth: prints the URL to open in your browser, " +
      "waits for it to come back (on 127.0.0.1), and keeps the tokens in logbook's data dir.\n" +
      "Example: logbook mcp login linear"
  )
)

const mcpLogout = Command.make(
  "logout",
  { name: nameArg, cwd },
  Effect.fn("cli.mcp.logout")(function* ({ name, cwd }) {
    const dir = yield* resolveCwd(cwd)
    const config = yield* loadConfig(dir)
    const { spec } = yield* oauthServer(config, dir, name)
    const auth = yield* authFileOf
    const had = yield* forgetAuthorization(auth, spec, makeSecrets(toolSecrets(config)).env).pipe(
      Effect.catchAll((error) => CliError.failed(`cannot update ${auth}: ${error.message}`))
    )
    yield* Console.log(
      had
        ? `Logged out of MCP server "${name}": its tokens and registration are forgotten.`
        : `logbook holds no authorization of MCP server "${name}".`
    )
  })
).pipe(
  Command.withDescription(
    "Forget the OAuth tokens and client registration logbook keeps for an HTTP MCP server.\n" +
      "Example: logbook mcp logout linear"
  )
)

export const mcp = Command.make("mcp", {}, () =>
  Console.log(
    "Usage: logbook mcp list | add <name> -- <command> [args…] | add <name> --url <url> | remove <name> | " +
      "test <name> | approve <name> | login <name> | logout <name>  (see `logbook mcp --help`)"
  )
).pipe(
  Command.withDescription(
    "The MCP servers whose tools the agent may use: list them, add or remove one in your config, start one " +
      "to see its tools, approve one a project declares, log in to one that needs OAuth. See docs/mcp.md."
  ),
  Command.withSubcommands([mcpList, mcpAdd, mcpRemove, mcpTest, mcpApprove, mcpLogin, mcpLogout])
)
