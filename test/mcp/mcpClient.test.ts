/**
 * `McpClient` against the real reference server (`@modelcontextprotocol/server-everything`), over
 * stdio and Streamable HTTP: tools listed, a call answered, the environment a server sees (no
 * provider key), a call interrupted (the server is sent the cancel), a crash mid-call (that call
 * fails, the server is started again once), a start that never answers, a result too large.
 */
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Scope } from "effect"
import { McpClient, type McpConnection, McpError } from "../../src/mcp/McpClient.js"
import { groupAlive } from "../../src/tools/processGroup.js"
import { everythingStdio, startEverythingHttp, waitForFileText } from "../support/mcpServers.js"
import { tempDir } from "../support/tmp.js"

const KEYS = { OPENAI_API_KEY: "sk-test-openai-0123456789abcdef", ANTHROPIC_API_KEY: "sk-ant-test-0123456789abcdef" }
const env = { PATH: process.env.PATH, HOME: process.env.HOME, LANG: "C.UTF-8", DEMO_VALUE: "from-logbook", ...KEYS }
const client = McpClient.layer({ env })

const connect = (name: string, spec: Parameters<McpClient["Type"]["connect"]>[1]) =>
  Effect.flatMap(McpClient, (mcp) => mcp.connect(name, spec, { cwd: tempDir("logbook-mcp-") }))

const text = (result: { readonly content: ReadonlyArray<{ readonly type: string }> }): string =>
  result.content.map((part) => ("text" in part ? String(part.text) : "")).join("")

const failure = <A>(exit: Exit.Exit<A, McpError>): McpError => {
  if (Exit.isSuccess(exit)) throw new Error("expected the call to fail")
  const error = exit.cause._tag === "Fail" ? exit.cause.error : undefined
  if (!(error instanceof McpError)) throw new Error(`expected an McpError, got ${String(exit.cause)}`)
  return error
}

describe("McpClient over stdio (server-everything)", () => {
  it.live("lists the tools and calls echo", () =>
    Effect.gen(function* () {
      const server = yield* connect("everything", everythingStdio())
      expect(server.tools.map((t) => t.name)).toEqual(expect.arrayContaining(["echo", "get-env", "get-sum"]))
      const echo = server.tools.find((t) => t.name === "echo")!
      expect(echo.inputSchema).toMatchObject({ type: "object", properties: { message: { type: "string" } } })
      const result = yield* server.callTool("echo", { message: "hello" })
      expect(result.isError).toBe(false)
      expect(text(result)).toBe("Echo: hello")
    }).pipe(Effect.scoped, Effect.provide(client))
  )

  it.live(
    "the server sees its own env and a minimal base, never logbook's provider keys; closing stops its group",
    () =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const server = yield* connect(
          "everything",
          // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${NAME} reference, as config files write it
          everythingStdio({ env: { MINE: "1", FROM: "${DEMO_VALUE}" } })
        ).pipe(Scope.extend(scope))
        const seen = JSON.parse(text(yield* server.callTool("get-env", {}))) as Record<string, string>
        expect(seen.MINE).toBe("1")
        expect(seen.FROM).toBe("from-logbook")
        expect(seen.PATH).toBe(process.env.PATH)
        expect(seen.OPENAI_API_KEY).toBeUndefined()
        expect(seen.ANTHROPIC_API_KEY).toBeUndefined()
        expect(seen.DEMO_VALUE).toBeUndefined()
        expect(JSON.stringify(seen)).not.toContain(KEYS.OPENAI_API_KEY)
        const group = (yield* server.processGroup)!
        expect(groupAlive(group)).toBe(true)
        yield* Scope.close(scope, Exit.void)
        expect(groupAlive(group)).toBe(false)
      }).pipe(Effect.provide(client))
  )

  it.live("interrupting a call sends the server notifications/cancelled; the server goes on serving", () =>
    Effect.gen(function* () {
      const log = path.join(tempDir("logbook-mcp-"), "stdin.jsonl")
      const server = yield* connect("everything", everythingStdio({ stdinLog: log }))
      const call = yield* Effect.fork(server.callTool("trigger-long-running-operation", { duration: 60, steps: 60 }))
      yield* Effect.promise(() => waitForFileText(log, '"trigger-long-running-operation"'))
      yield* Fiber.interrupt(call)
      yield* Effect.promise(() => waitForFileText(log, '"notifications/cancelled"'))
      const sent = fs
        .readFileSync(log, "utf8")
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as { method?: string; id?: number; params?: { requestId?: number } })
      const request = sent.find((m) => m.method === "tools/call")!
      const cancel = sent.find((m) => m.method === "notifications/cancelled")!
      expect(cancel.params?.requestId).toBe(request.id)
      expect(text(yield* server.callTool("echo", { message: "still here" }))).toBe("Echo: still here")
    }).pipe(Effect.scoped, Effect.provide(client))
  )

  it.live("a call that passes its timeout fails with Timeout and the server is sent the cancel", () =>
    Effect.gen(function* () {
      const log = path.join(tempDir("logbook-mcp-"), "stdin.jsonl")
      const server = yield* connect("everything", everythingStdio({ stdinLog: log }))
      const exit = yield* Effect.exit(
        server.callTool("trigger-long-running-operation", { duration: 60, steps: 60 }, { timeoutMs: 200 })
      )
      const error = failure(exit)
      expect(error.reason).toBe("Timeout")
      expect(error.message).toBe('MCP server "everything" did not answer within 200 ms; the call was cancelled')
      yield* Effect.promise(() => waitForFileText(log, '"notifications/cancelled"'))
    }).pipe(Effect.scoped, Effect.provide(client))
  )

  it.live("a server that dies mid-call fails that call clearly and is started again once", () =>
    Effect.gen(function* () {
      const log = path.join(tempDir("logbook-mcp-"), "stdin.jsonl")
      const server: McpConnection = yield* connect("everything", everythingStdio({ stdinLog: log }))
      const killDuringCall = Effect.gen(function* () {
        const before = fs.existsSync(log) ? fs.readFileSync(log, "utf8").split("tools/call").length : 1
        const call = yield* Effect.fork(server.callTool("trigger-long-running-operation", { duration: 60, steps: 60 }))
        yield* Effect.promise(async () => {
          while (fs.readFileSync(log, "utf8").split("tools/call").length <= before) {
            await new Promise((resolve) => setTimeout(resolve, 20))
          }
        })
        const group = (yield* server.processGroup)!
        process.kill(-group, "SIGKILL")
        return { exit: yield* Fiber.await(call), group }
      })
      const first = yield* killDuringCall
      const error = failure(first.exit)
      expect(error.reason).toBe("Exited")
      expect(error.message).toMatch(
        /^MCP server "everything" stopped during the call \(it was killed by SIGKILL.*\); it will be started again for the next call$/
      )
      // started again, in a new group
      expect(text(yield* server.callTool("echo", { message: "again" }))).toBe("Echo: again")
      const second = (yield* server.processGroup)!
      expect(second).not.toBe(first.group)
      // dies again: not restarted a second time
      const again = yield* killDuringCall
      expect(failure(again.exit).reason).toBe("Exited")
      const refused = failure(yield* Effect.exit(server.callTool("echo", { message: "x" })))
      expect(refused.message).toMatch(/was already restarted once; it is not started again$/)
    }).pipe(Effect.scoped, Effect.provide(client))
  )

  it.live("a server that never answers the start fails with StartTimeout, its process stopped", () =>
    Effect.gen(function* () {
      const dir = tempDir("logbook-mcp-")
      const pidFile = path.join(dir, "pid")
      const fork = yield* Effect.fork(
        connect("silent", {
          ...everythingStdio(),
          command: "sh",
          args: ["-c", `echo $$ > '${pidFile}'; exec sleep 600`],
          startTimeoutMs: 2000
        }).pipe(Effect.scoped)
      )
      const error = failure(yield* Fiber.await(fork))
      expect(error.reason).toBe("StartTimeout")
      expect(error.message).toBe('MCP server "silent" did not start within 2000 ms')
      const pid = Number(fs.readFileSync(pidFile, "utf8"))
      expect(groupAlive(pid)).toBe(false)
    }).pipe(Effect.provide(client))
  )

  // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${NAME} reference, as config files write it
  it.live("a command that does not exist, and a ${NAME} that is not set, are start errors that say so", () =>
    Effect.gen(function* () {
      const missing = failure(
        yield* Effect.exit(
          connect("nope", { ...everythingStdio(), command: "logbook-no-such-server", args: [] }).pipe(Effect.scoped)
        )
      )
      expect(missing.message).toBe(
        'MCP server "nope" did not start: its command "logbook-no-such-server" was not found'
      )
      const unset = failure(
        yield* Effect.exit(
          // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${NAME} reference, as config files write it
          connect("gh", everythingStdio({ env: { TOKEN: "${LOGBOOK_TEST_UNSET}" } })).pipe(Effect.scoped)
        )
      )
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${NAME} reference, as config files write it
      expect(unset.message).toBe('MCP server "gh" names ${LOGBOOK_TEST_UNSET}, which is not set')
    }).pipe(Effect.provide(client))
  )

  it.live("a result past maxResultBytes fails the call (bounded while it is read); the next call starts it again", () =>
    Effect.gen(function* () {
      const server = yield* connect("everything", everythingStdio({ maxResultBytes: 1000 }))
      const small = failure(yield* Effect.exit(server.callTool("echo", { message: "x".repeat(5000) })))
      expect(small.reason).toBe("TooLarge")
      const huge = failure(yield* Effect.exit(server.callTool("echo", { message: "x".repeat(200_000) })))
      expect(huge.reason).toBe("TooLarge")
      expect(huge.message).toBe(
        'MCP server "everything" sent a result larger than 1000 bytes (its maxResultBytes); the call failed'
      )
      expect(text(yield* server.callTool("echo", { message: "ok" }))).toBe("Echo: ok")
    }).pipe(Effect.scoped, Effect.provide(client))
  )

  it.live("maxTools bounds the tools taken", () =>
    Effect.gen(function* () {
      const server = yield* connect("everything", everythingStdio({ maxTools: 2 }))
      expect(server.tools).toHaveLength(2)
      expect(server.toolsLeftOut).toBeGreaterThan(0)
    }).pipe(Effect.scoped, Effect.provide(client))
  )
})

describe("McpClient over Streamable HTTP: headers", () => {
  it.live("sends the entry's headers (NAME references filled in) and the bearer token of bearerTokenEnv", () =>
    Effect.gen(function* () {
      const seen: Array<http.IncomingHttpHeaders> = []
      const server = yield* Effect.acquireRelease(
        Effect.promise(
          () =>
            new Promise<http.Server>((resolve) => {
              const s = http.createServer((req, res) => {
                seen.push(req.headers)
                res.writeHead(401, { "content-type": "application/json" }).end('{"error":"unauthorized"}')
              })
              s.listen(0, "127.0.0.1", () => resolve(s))
            })
        ),
        (s) => Effect.promise(() => new Promise<void>((resolve) => s.close(() => resolve())))
      )
      const port = (server.address() as { port: number }).port
      const bearer = McpClient.layer({ env: { ...env, REMOTE_TOKEN: "tok-0123" } })
      const error = failure(
        yield* Effect.exit(
          connect("remote", {
            type: "http",
            url: `http://127.0.0.1:${port}/mcp`,
            // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${NAME} reference, as config files write it
            headers: { "X-Demo": "${DEMO_VALUE}" },
            bearerTokenEnv: "REMOTE_TOKEN",
            timeoutMs: 5000,
            startTimeoutMs: 5000,
            maxOutputBytes: 1000,
            maxResultBytes: 100_000,
            maxTools: 10
          }).pipe(Effect.scoped, Effect.provide(bearer))
        )
      )
      expect(error.reason).toBe("Start")
      expect(seen[0]?.authorization).toBe("Bearer tok-0123")
      expect(seen[0]?.["x-demo"]).toBe("from-logbook")
    }).pipe(Effect.scoped)
  )
})

describe("McpClient over Streamable HTTP (server-everything)", () => {
  it.live("lists the tools and calls echo; a call past its timeout fails and the session goes on", () =>
    Effect.gen(function* () {
      const http = yield* Effect.acquireRelease(
        Effect.promise(() => startEverythingHttp()),
        (server) => Effect.sync(server.stop)
      )
      const server = yield* connect("remote", {
        type: "http",
        url: http.url,
        // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${NAME} reference, as config files write it
        headers: { "X-Demo": "${DEMO_VALUE}" },
        timeoutMs: 120_000,
        startTimeoutMs: 30_000,
        maxOutputBytes: 32_768,
        maxResultBytes: 16 * 1024 * 1024,
        maxTools: 128
      })
      expect(server.tools.map((t) => t.name)).toContain("echo")
      expect(yield* server.processGroup).toBeUndefined()
      expect(text(yield* server.callTool("echo", { message: "over http" }))).toBe("Echo: over http")
      const timedOut = failure(
        yield* Effect.exit(
          server.callTool("trigger-long-running-operation", { duration: 60, steps: 60 }, { timeoutMs: 300 })
        )
      )
      expect(timedOut.reason).toBe("Timeout")
      expect(text(yield* server.callTool("echo", { message: "after" }))).toBe("Echo: after")
    }).pipe(Effect.scoped, Effect.provide(client))
  )
})
