/**
 * Trace export of the built binary (docs/observability.md): `logbook run` with
 * `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at an OTLP/HTTP receiver on 127.0.0.1 (a node:http server
 * keeping every POST /v1/traces body) sends the run's spans there — the command's root span, a
 * `chat <model>` span per model request with the GenAI attributes, an `execute_tool <tool>` span
 * per call — and the export headers (an API key) go on the requests only. A receiver that is not
 * there changes nothing of the run; without the variable the exporter's code is never loaded.
 */
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { afterEach, describe, expect, it } from "vitest"
import { type RunOptions, root, runCli, scratchDir, spawnCli } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import {
  bashReply,
  fileLines,
  keyedProviderEnv,
  latestSession,
  makeJanitor,
  makeWorkspace,
  notices,
  ofType,
  readLog,
  toolCall,
  until,
  writableEnv
} from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

const EXPORT_SECRET = "sk-secret-123"

/**
 * The export at exit may take up to 10 s here (default 1 s): a CI machine under load must not lose
 * the spans a test looks for. A receiver that answers takes milliseconds.
 */
const patientExport = { OTEL_BSP_EXPORT_TIMEOUT: "10000" }
const API_KEY = "sk-test-tracing-0123456789abcdef"

interface Received {
  readonly url: string
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
}

/** An OTLP/HTTP receiver on 127.0.0.1 that answers `status` (200) to every POST and keeps what it got. */
const startReceiver = async (status = 200) => {
  const received: Array<Received> = []
  const server = http.createServer((req, res) => {
    let body = ""
    req.setEncoding("utf8")
    req.on("data", (chunk: string) => {
      body += chunk
    })
    req.on("end", () => {
      received.push({ url: req.url ?? "", headers: req.headers, body })
      res.writeHead(status, { "content-type": "application/json" })
      res.end("{}")
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  janitor.defer(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const port = (server.address() as AddressInfo).port
  return { received, url: `http://127.0.0.1:${port}` }
}

/** A port on 127.0.0.1 where nothing listens (it was free a moment ago). */
const closedPort = async (): Promise<number> => {
  const server = http.createServer()
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

type AnyValue = {
  readonly stringValue?: string
  readonly intValue?: number | string
  readonly boolValue?: boolean
  readonly arrayValue?: { readonly values: ReadonlyArray<AnyValue> }
}

interface OtlpSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: number
  readonly attributes: ReadonlyArray<{ readonly key: string; readonly value: AnyValue }>
  readonly status: { readonly code: number; readonly message?: string }
  readonly events: ReadonlyArray<unknown>
}

const otlpValue = (value: AnyValue): unknown =>
  value.stringValue ??
  (value.intValue !== undefined ? Number(value.intValue) : undefined) ??
  value.boolValue ??
  value.arrayValue?.values.map(otlpValue)

const attrs = (span: OtlpSpan): Record<string, unknown> =>
  Object.fromEntries(span.attributes.map((a) => [a.key, otlpValue(a.value)]))

const spansOf = (received: ReadonlyArray<Received>): ReadonlyArray<OtlpSpan> =>
  received.flatMap((r) => {
    const body = JSON.parse(r.body) as {
      readonly resourceSpans: ReadonlyArray<{
        readonly scopeSpans: ReadonlyArray<{ readonly spans: ReadonlyArray<OtlpSpan> }>
      }>
    }
    return body.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans))
  })

/** A workspace with a keyed provider (`API_KEY`) and a turn: one step calling read twice (one fails), then an answer. */
const scriptedTurn = async () => {
  const server = await janitor.server()
  const model = "keyed/scripted"
  const ws = makeWorkspace(server, { config: { model } })
  fs.writeFileSync(path.join(ws.dir, "a.txt"), "hello\n")
  server.enqueue(
    Reply.stream({
      toolCalls: [
        toolCall("call_read", "read", { path: "a.txt" }),
        toolCall("call_missing", "read", { path: "nope.txt" }),
        // what a command sees: not the export headers
        toolCall("call_env", "bash", { command: "env" })
      ],
      usage: { prompt_tokens: 120, completion_tokens: 17 },
      // the model the provider says answered (its chunks' "model")
      model: "scripted-2026-01"
    }),
    Reply.text("a.txt holds hello.", { usage: { prompt_tokens: 240, completion_tokens: 9 } })
  )
  const env = keyedProviderEnv(server, model, { type: "openai-compatible" }, API_KEY)
  return { server, ws, env }
}

describe("logbook run with OTEL_EXPORTER_OTLP_ENDPOINT", () => {
  it("sends the run's spans to the receiver: one trace, chat spans with the GenAI attributes, a span per tool call; the headers only on the requests", async () => {
    const receiver = await startReceiver()
    const { server, ws, env } = await scriptedTurn()
    const result = await runCli([...ws.runArgs, "what", "is", "in", "a.txt?"], {
      env: {
        ...env,
        ...patientExport,
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_HEADERS: "authorization=Bearer%20sk-secret-123"
      }
    })
    expect(notices(result.stderr)).toEqual([])
    expect(result.code).toBe(0)
    expect(result.stdout).toBe("a.txt holds hello.\n")
    expect(server.requests).toHaveLength(2)

    // the spans arrived, at /v1/traces, with the export header (URL-decoded) on every request
    expect(receiver.received.length).toBeGreaterThan(0)
    for (const r of receiver.received) {
      expect(r.url).toBe("/v1/traces")
      expect(r.headers.authorization).toBe(`Bearer ${EXPORT_SECRET}`)
      expect(r.headers["content-type"]).toContain("application/json")
    }
    const resource = JSON.parse(receiver.received[0]!.body).resourceSpans[0].resource
    expect(
      Object.fromEntries(resource.attributes.map((a: { key: string; value: AnyValue }) => [a.key, otlpValue(a.value)]))
    ).toMatchObject({
      "service.name": "logbook"
    })
    const spans = spansOf(receiver.received)

    // the command is the root; every span is of its trace and reaches it through its parents
    const roots = spans.filter((s) => s.parentSpanId === undefined)
    expect(roots.map((s) => s.name)).toEqual(["logbook run"])
    const rootSpan = roots[0]!
    expect(attrs(rootSpan)).toMatchObject({ "logbook.command": "run", "process.exit.code": 0 })
    const byId = new Map(spans.map((s) => [s.spanId, s]))
    const reachesRoot = (span: OtlpSpan): boolean => {
      let at: OtlpSpan | undefined = span
      for (let hops = 0; at !== undefined && hops < 100; hops++) {
        if (at.spanId === rootSpan.spanId) return true
        at = at.parentSpanId === undefined ? undefined : byId.get(at.parentSpanId)
      }
      return false
    }
    for (const span of spans) {
      expect(span.traceId).toBe(rootSpan.traceId)
      expect(reachesRoot(span)).toBe(true)
    }

    // a chat span per model request, kind client, the GenAI attributes and the scripted usage
    const sessionId = await latestSession(ws.db, ws.dir)
    const chats = spans.filter((s) => s.name === "chat scripted")
    expect(chats).toHaveLength(2)
    for (const chat of chats) expect(chat.kind).toBe(3)
    const [first, second] = [...chats].sort(
      (a, b) => Number(attrs(a)["logbook.step"]) - Number(attrs(b)["logbook.step"])
    )
    // logbook.step is the log's step number (step.finished)
    const log = await readLog(ws.db, sessionId)
    const steps = log.flatMap((e) => (e.type === "step.finished" ? [e.payload.step] : []))
    expect(steps).toHaveLength(2)
    expect(attrs(first!)).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.system": "openai-compatible",
      "gen_ai.provider.name": "openai-compatible",
      "gen_ai.request.model": "scripted",
      "gen_ai.response.model": "scripted-2026-01",
      "gen_ai.usage.input_tokens": 120,
      "gen_ai.usage.output_tokens": 17,
      "gen_ai.response.finish_reasons": ["tool-calls"],
      "logbook.session.id": sessionId,
      "logbook.step": steps[0],
      "logbook.model": "keyed/scripted"
    })
    expect(attrs(second!)).toMatchObject({
      "gen_ai.response.model": "scripted",
      "gen_ai.usage.input_tokens": 240,
      "gen_ai.usage.output_tokens": 9,
      "gen_ai.response.finish_reasons": ["stop"],
      "logbook.step": steps[1]
    })

    // a span per tool call: the one that worked is ok, the one that failed is an error without its text
    const tools = spans.filter((s) => s.name === "execute_tool read")
    expect(tools.map((s) => attrs(s)["gen_ai.tool.call.id"]).sort()).toEqual(["call_missing", "call_read"])
    const ok = tools.find((s) => attrs(s)["gen_ai.tool.call.id"] === "call_read")!
    const failed = tools.find((s) => attrs(s)["gen_ai.tool.call.id"] === "call_missing")!
    expect(attrs(ok)).toMatchObject({
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "read",
      "logbook.session.id": sessionId
    })
    expect(ok.status.code).toBe(1)
    expect(failed.status.code).toBe(2)
    expect(attrs(failed)["error.type"]).toBe("ToolFailed")
    const toolError = log.find((e) => e.type === "tool.failed")?.payload as { readonly error: string } | undefined
    expect(toolError?.error).toContain("nope.txt")
    expect(JSON.stringify(failed)).not.toContain(toolError!.error)
    // the services' spans (Effect.fn): a chat span is under its step's, a tool span under its batch's
    const names = new Set(spans.map((s) => s.name))
    for (const name of [
      "Sessions.create",
      "Sessions.send",
      "Processor.run",
      "Actions.run",
      "EventStore.acquireLease"
    ]) {
      expect(names.has(name)).toBe(true)
    }
    for (const chat of chats) expect(byId.get(chat.parentSpanId!)?.name).toBe("Processor.run")
    for (const tool of tools) expect(byId.get(tool.parentSpanId!)?.name).toBe("Actions.run")
    // no span per journal append or per delta (docs/benchmarks.md), none from inside a tool
    for (const name of ["EventStore.append", "EventStore.appendLater", "EventStore.flush", "tools.read"]) {
      expect(names.has(name)).toBe(false)
    }

    // no key anywhere but the export request's header: not in a span, the output or the log
    const bodies = receiver.received.map((r) => r.body).join("\n")
    expect(bodies).not.toContain(EXPORT_SECRET)
    expect(bodies).not.toContain(API_KEY)
    // nor a tool's error text (the tools' own spans are not traced), nor the prompt or the answer
    expect(bodies).not.toContain("File not found")
    expect(bodies).not.toContain("what is in a.txt?")
    expect(bodies).not.toContain("a.txt holds hello.")
    for (const text of [result.stdout, result.stderr]) expect(text).not.toContain(EXPORT_SECRET)
    expect(JSON.stringify(log)).not.toContain(EXPORT_SECRET)
    for (const file of [ws.db, `${ws.db}-wal`]) {
      if (fs.existsSync(file)) expect(fs.readFileSync(file).includes(EXPORT_SECRET)).toBe(false)
    }
    // the agent's commands do not see the export headers (hidden like a provider's key variable)
    const envOutput = log.find((e) => e.type === "tool.finished" && e.payload.callId === "call_env")?.payload as
      | { readonly output: string }
      | undefined
    expect(envOutput?.output).toContain("HOME=")
    expect(envOutput?.output).not.toContain("OTEL_EXPORTER_OTLP_HEADERS")
    // the model server got the API key, and nothing of the export's
    expect(server.requests.every((r) => !JSON.stringify(r).includes(EXPORT_SECRET))).toBe(true)
  })

  it("a failed request's chat span is an error that shows the error's kind, not the provider's message; compaction's request is a chat span too", async () => {
    const receiver = await startReceiver()
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const env = { ...patientExport, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url }
    server.enqueue(
      // retried (fastRetry): the next attempt answers
      Reply.error(500, { message: "overloaded while reading PROVIDER-SAYS-THIS" }),
      Reply.text("first answer", { usage: { prompt_tokens: 11, completion_tokens: 2 } })
    )
    const run = await runCli([...ws.runArgs, "first"], { env })
    expect(run.code).toBe(0)
    const chats = spansOf(receiver.received).filter((s) => s.name === "chat scripted")
    expect(chats.map((s) => s.status.code).sort()).toEqual([1, 2])
    const failed = chats.find((s) => s.status.code === 2)!
    expect(attrs(failed)["error.type"]).toBe("ModelError.http.500")
    expect(failed.status.message).toBe("ModelError.http.500")
    expect(receiver.received.map((r) => r.body).join("\n")).not.toContain("PROVIDER-SAYS-THIS")
    // the span names the session
    const sessionId = await latestSession(ws.db, ws.dir)
    expect(attrs(failed)["logbook.session.id"]).toBe(sessionId)

    const before = receiver.received.length
    server.enqueue(Reply.text("SUMMARY of everything", { usage: { prompt_tokens: 30, completion_tokens: 4 } }))
    const compacted = await runCli(["compact", "--db", ws.db, "--cwd", ws.dir], { env })
    expect(compacted.code).toBe(0)
    const spans = spansOf(receiver.received.slice(before))
    expect(spans.filter((s) => s.parentSpanId === undefined).map((s) => s.name)).toEqual(["logbook compact"])
    const summary = spans.filter((s) => s.name === "chat scripted")
    expect(summary).toHaveLength(1)
    expect(attrs(summary[0]!)).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.usage.input_tokens": 30,
      "gen_ai.usage.output_tokens": 4,
      "logbook.operation": "compaction",
      "logbook.session.id": sessionId
    })
    expect(receiver.received.map((r) => r.body).join("\n")).not.toContain("SUMMARY of everything")
  })

  it("a turn that fails: no span of the run carries the provider's message, only the failure's kind", async () => {
    const receiver = await startReceiver()
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const env = { ...patientExport, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url }
    // not retried: the turn fails, and every span on the way up (Processor.run, Sessions, the
    // command's root) ends failed
    server.enqueue(Reply.error(400, { message: "bad request: PROVIDER-GAVE-UP-HERE" }))
    const run = await runCli([...ws.runArgs, "first"], { env })
    expect(run.code).toBe(1)
    expect(run.stderr).toContain("PROVIDER-GAVE-UP-HERE")
    const spans = spansOf(receiver.received)
    const failedSpans = spans.filter((s) => s.status.code === 2)
    expect(failedSpans.map((s) => s.name)).toEqual(expect.arrayContaining(["chat scripted", "Processor.run"]))
    for (const span of failedSpans) expect(span.status.message ?? "").not.toMatch(/bad request/)
    expect(receiver.received.map((r) => r.body).join("\n")).not.toContain("PROVIDER-GAVE-UP-HERE")
  })

  it("Ctrl-C: the spans of the interrupted run are still sent before it exits, with 130", async () => {
    const receiver = await startReceiver()
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    const pidFile = path.join(scratchDir(), "shell.pid")
    janitor.killGroupIn(pidFile, ws.dir)
    server.enqueue(bashReply("call_sleep", `echo $$ > ${pidFile}; sleep 300`), Reply.text("after"))
    const live = spawnCli([...ws.runArgs, "run it"], {
      env: { ...writableEnv(path.dirname(pidFile)), ...patientExport, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url }
    })
    janitor.defer(() => live.child.kill("SIGKILL"))
    await fileLines(pidFile, 1)
    const session = await latestSession(ws.db, ws.dir)
    await until("the command's group recorded", async () =>
      ofType(await readLog(ws.db, session), "tool.process").length === 1 ? true : undefined
    )
    // nothing was sent yet: the first export is due 5 s after the start, or at the exit
    const sentBefore = receiver.received.length
    live.child.kill("SIGINT")
    expect((await live.exited).code).toBe(130)
    expect(receiver.received.length).toBeGreaterThan(sentBefore)
    const spans = spansOf(receiver.received)
    const root = spans.find((s) => s.parentSpanId === undefined && s.name === "logbook run")
    expect(root).toBeDefined()
    expect(attrs(root!)["process.exit.code"]).toBe(130)
    const tool = spans.find((s) => s.name === "execute_tool bash")
    expect(tool && attrs(tool)["gen_ai.tool.call.id"]).toBe("call_sleep")
    expect(spans.filter((s) => s.name === "chat scripted")).toHaveLength(1)
  })

  it("a receiver that is not there, or answers 500, changes nothing: same exit code, same output, no notice", async () => {
    const port = await closedPort()
    const failing = await startReceiver(500)
    const runs = []
    for (const endpoint of [undefined, `http://127.0.0.1:${port}`, failing.url]) {
      const { ws, env } = await scriptedTurn()
      const options: RunOptions = {
        env: endpoint === undefined ? env : { ...env, ...patientExport, OTEL_EXPORTER_OTLP_ENDPOINT: endpoint }
      }
      runs.push(await runCli([...ws.runArgs, "what", "is", "in", "a.txt?"], options))
    }
    const [plain, ...traced] = runs
    expect(plain!.code).toBe(0)
    expect(plain!.stdout).toBe("a.txt holds hello.\n")
    for (const run of traced) {
      expect(run.code).toBe(plain!.code)
      expect(run.stdout).toBe(plain!.stdout)
      expect(notices(run.stderr)).toEqual(notices(plain!.stderr))
    }
    // the failing receiver was asked (once: a failed export is not retried, and export pauses)
    expect(failing.received).toHaveLength(1)
  })
})

// ---------------------------------------------------------------------------------------------
// what is loaded (dist/bundle.json and the load recorder, as in test/cli/startup.test.ts)

const dist = path.join(root, "dist")
const recorder = path.join(root, "test", "support", "loadRecorder.mjs")

const bundle = JSON.parse(fs.readFileSync(path.join(dist, "bundle.json"), "utf8")) as {
  readonly files: Readonly<
    Record<string, { readonly imports: ReadonlyArray<string>; readonly packages: ReadonlyArray<string> }>
  >
}

/** The files of the bundle holding @effect/opentelemetry's code. */
const exporterFiles = new Set(
  Object.entries(bundle.files)
    .filter(([, file]) => file.packages.includes("@effect/opentelemetry"))
    .map(([name]) => name)
)

/** Runs `logbook <args>` with the load recorder; the files of dist/ it loaded. */
const loadedBy = async (args: ReadonlyArray<string>, options: RunOptions) => {
  const record = path.join(scratchDir(), "loaded.txt")
  const result = await runCli(args, {
    ...options,
    env: { ...options.env, NODE_OPTIONS: `--import=${pathToFileURL(recorder).href}`, LOGBOOK_LOAD_RECORD: record }
  })
  const distUrl = `${pathToFileURL(dist).href}/`
  const urls = fs.existsSync(record) ? fs.readFileSync(record, "utf8").split("\n").filter(Boolean) : []
  const files = new Set(urls.filter((url) => url.startsWith(distUrl)).map((url) => url.slice(distUrl.length)))
  return { result, files }
}

describe("without OTEL_EXPORTER_OTLP_ENDPOINT", () => {
  it("bin.js does not import the exporter statically", () => {
    expect(exporterFiles.size).toBeGreaterThan(0)
    const seen = new Set<string>()
    const visit = (name: string) => {
      if (seen.has(name)) return
      seen.add(name)
      for (const next of bundle.files[name]?.imports ?? []) visit(next)
    }
    visit("bin.js")
    expect(seen.has("bin.js")).toBe(true)
    expect([...seen].filter((name) => exporterFiles.has(name))).toEqual([])
  })

  it("a run sends nothing and never loads the exporter; with the variable, the same run loads it", async () => {
    const receiver = await startReceiver()
    const loaded = []
    for (const tracing of [false, true]) {
      const { ws, env } = await scriptedTurn()
      const { result, files } = await loadedBy([...ws.runArgs, "what", "is", "in", "a.txt?"], {
        env: tracing ? { ...env, ...patientExport, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url } : env
      })
      expect(result.code).toBe(0)
      // the recorder saw the start (else "not loaded" would hold trivially)
      expect(files.has("bin.js")).toBe(true)
      loaded.push({ files, requests: receiver.received.length })
    }
    const [plain, traced] = loaded
    expect([...plain!.files].filter((name) => exporterFiles.has(name))).toEqual([])
    expect(plain!.requests).toBe(0)
    expect([...traced!.files].filter((name) => exporterFiles.has(name)).length).toBeGreaterThan(0)
    expect(traced!.requests).toBeGreaterThan(0)
  })

  it("--version loads neither the exporter nor anything that holds it", async () => {
    const { result, files } = await loadedBy(["--version"], { cwd: scratchDir() })
    expect(result.code).toBe(0)
    expect(files.has("bin.js")).toBe(true)
    expect([...files].filter((name) => exporterFiles.has(name))).toEqual([])
  })
})
