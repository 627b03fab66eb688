/**
 * Plugins (docs/plugins.md): an ES module whose default export (an object, or a function of a
 * small context that returns one) gives `tool.execute.before` / `tool.execute.after` hooks, event
 * hooks and tools, written as plain Promise-based JavaScript. `loadPlugin` imports one file,
 * checks its export with Schema, and turns it into what the registry runs: named, bounded hooks
 * (`NamedHook`), tools (`AnyTool`) and event handlers (`PluginEvents.ts`).
 */
import * as NodePath from "node:path"
import { pathToFileURL } from "node:url"
import { Duration, Effect, Either, ParseResult, Runtime, Schema } from "effect"
import { capText } from "../tools/boundedOutput.js"
import {
  type AfterHook,
  type AnyTool,
  type BeforeHook,
  defineTool,
  type NamedHook,
  ToolFailure,
  type ToolOutput
} from "../tools/Tools.js"

// ---------------------------------------------------------------------------------------------
// the API a plugin author sees (plain types: no Effect)

/** What a plugin's default export, when it is a function, is called with. */
export interface PluginContext {
  /** the workspace logbook runs in */
  readonly workspace: string
  /** logbook's diagnostic log (stderr lines), not the session's event log */
  readonly log: PluginLog
}

export interface PluginLog {
  readonly info: (...message: ReadonlyArray<unknown>) => void
  readonly warn: (...message: ReadonlyArray<unknown>) => void
  readonly error: (...message: ReadonlyArray<unknown>) => void
}

/** A call as a plugin's hooks see it (a copy: changing it changes nothing unless it is returned or it is the hook's own). */
export interface PluginToolCall {
  readonly sessionId: string
  readonly callId: string
  readonly tool: string
  input: unknown
}

/** What a plugin tool's `execute` gets besides its input. */
export interface PluginToolContext {
  readonly sessionId: string
  readonly callId: string
  /** the workspace the call runs in */
  readonly cwd: string
  /** aborted when the call is interrupted or passes its timeout */
  readonly signal: AbortSignal
  readonly log: PluginLog
}

// ---------------------------------------------------------------------------------------------
// the export, checked

const Fn = Schema.declare((u: unknown): u is (...args: ReadonlyArray<unknown>) => unknown => typeof u === "function", {
  identifier: "function",
  description: "a function"
})

/** A plugin tool's name: what the model calls it (plain, as OpenCode names them). */
const ToolName = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z][A-Za-z0-9_-]{0,63}$/),
  Schema.filter((name) => !name.startsWith("mcp__") || "mcp__ names belong to MCP servers"),
  Schema.annotations({ message: () => "a name of letters, digits, _ and - (at most 64, starting with a letter)" })
)

const PluginToolSpec = Schema.Struct({
  name: ToolName,
  description: Schema.String.pipe(Schema.minLength(1)),
  /** the input's JSON Schema, as the model is given it (an object schema); default: any object */
  inputSchema: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  /** the call's timeout (ms); default: the registry's */
  timeoutMs: Schema.optional(Schema.Int.pipe(Schema.between(1, 3_600_000))),
  execute: Fn
})

const PluginName = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/),
  Schema.annotations({ message: () => "a name of letters, digits, _, . and - (at most 64)" })
)

/** What a plugin's default export gives (after calling it, when it is a function). */
export const PluginExport = Schema.Struct({
  name: Schema.optional(PluginName),
  "tool.execute.before": Schema.optional(Fn),
  "tool.execute.after": Schema.optional(Fn),
  "session.start": Schema.optional(Fn),
  "session.end": Schema.optional(Fn),
  "turn.end": Schema.optional(Fn),
  event: Schema.optional(Fn),
  tools: Schema.optional(Schema.Array(PluginToolSpec))
})
export type PluginExport = typeof PluginExport.Type

/** A plugin could not be loaded: `message` names its file and says why. */
export class PluginLoadError extends Schema.TaggedError<PluginLoadError>()("PluginLoadError", {
  file: Schema.String,
  message: Schema.String
}) {}

/** The event hooks of a plugin, as `PluginEvents` runs them. */
export interface PluginEventHandlers {
  readonly "session.start"?: ((event: { readonly sessionId: string }) => unknown) | undefined
  readonly "session.end"?: ((event: { readonly sessionId: string }) => unknown) | undefined
  readonly "turn.end"?:
    | ((event: { readonly sessionId: string; readonly turnId?: string; readonly reason: string }) => unknown)
    | undefined
  readonly event?: ((envelope: unknown) => unknown) | undefined
}

/** A loaded plugin: what the registry and the event runner take from it. */
export interface LoadedPlugin {
  readonly name: string
  readonly file: string
  readonly before: ReadonlyArray<NamedHook<BeforeHook>>
  readonly after: ReadonlyArray<NamedHook<AfterHook>>
  readonly tools: ReadonlyArray<AnyTool>
  readonly events: PluginEventHandlers
}

/** The extensions a plugin file may have: `.ts` only where Node strips types (`typeScriptSupported`). */
export const PLUGIN_EXTENSIONS = [".js", ".mjs", ".ts", ".mts"] as const

/** Whether this Node runs a `.ts` module as it is (it strips the types: Node 22.18+, 23.6+). */
export const typeScriptSupported = (): boolean => {
  const features = process.features as { readonly typescript?: string | false }
  return typeof features.typescript === "string"
}

/** The most of a plugin tool's output the model reads: head and tail (bytes); the whole is kept as a blob. */
const MAX_TOOL_OUTPUT_HEAD = 16 * 1024
const MAX_TOOL_OUTPUT_TAIL = 16 * 1024

const describeError = (error: unknown): string =>
  error instanceof Error ? error.message : typeof error === "string" ? error : String(error)

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** A plugin function's call as an Effect: a throw, a rejection or an interrupt (the signal aborted) handled. */
const callPlugin = <A>(f: (signal: AbortSignal) => A): Effect.Effect<Awaited<A>, Error> =>
  Effect.tryPromise({
    try: (signal) => Promise.resolve(f(signal)),
    catch: (error) => (error instanceof Error ? error : new Error(describeError(error)))
  })

const copy = <A>(value: A): A => {
  try {
    return structuredClone(value)
  } catch {
    return value
  }
}

/** A logger of the diagnostic log for one plugin (`plugin <name>: …` lines). */
const pluginLog = (runtime: Runtime.Runtime<never>, name: () => string): PluginLog => {
  const line = (message: ReadonlyArray<unknown>) =>
    `plugin ${name()}: ${message.map((part) => (typeof part === "string" ? part : describeError(part))).join(" ")}`
  const run = Runtime.runFork(runtime)
  return {
    info: (...message) => void run(Effect.logInfo(line(message))),
    warn: (...message) => void run(Effect.logWarning(line(message))),
    error: (...message) => void run(Effect.logError(line(message)))
  }
}

/** The JSON Schema a plugin tool's input is offered and checked with: an object schema. */
const toolInputSchema = (schema: Readonly<Record<string, unknown>> | undefined): Record<string, unknown> =>
  schema === undefined
    ? { type: "object", properties: {} }
    : schema.type === "object"
      ? { ...schema }
      : { properties: {}, ...schema, type: "object" }

type AjvClass = typeof import("ajv").Ajv

// bundled, the CommonJS module's class is its default export
const loadAjv = (): Promise<AjvClass> =>
  import("ajv").then((m) => (typeof m.Ajv === "function" ? m.Ajv : (m.default as unknown as AjvClass)))

/** Checks a call's input against a tool's JSON Schema: undefined when it holds, else what is wrong. */
type InputValidator = (input: unknown) => string | undefined

/**
 * The validator of a JSON Schema, or why it is not one. Formats and unknown keywords are not
 * checked: a schema written for a model need not be strict. One Ajv each: a schema's `$id` may repeat.
 */
const inputValidator = (Ajv: AjvClass, schema: Record<string, unknown>): InputValidator | string => {
  try {
    const ajv = new Ajv({ strict: false, validateFormats: false })
    const validate = ajv.compile(schema)
    return (input) =>
      validate(input) ? undefined : ajv.errorsText(validate.errors, { dataVar: "input", separator: "; " })
  } catch (error) {
    return describeError(error)
  }
}

/** One plugin tool as the registry holds it: its input a JSON object that its `inputSchema` holds for. */
const pluginTool = (
  plugin: string,
  spec: PluginExport["tools"] extends ReadonlyArray<infer T> | undefined ? T : never,
  validate: InputValidator,
  log: PluginLog
): AnyTool =>
  defineTool({
    name: spec.name,
    description: spec.description,
    asksByDefault: true,
    input: Schema.Record({ key: Schema.String, value: Schema.Unknown }).pipe(
      Schema.filter((input) => {
        const problem = validate(input)
        return problem === undefined || `does not match the tool's input schema: ${problem}`
      })
    ),
    inputSchema: toolInputSchema(spec.inputSchema),
    ...(spec.timeoutMs !== undefined ? { timeoutMs: () => spec.timeoutMs! } : {}),
    execute: (input, context) =>
      Effect.gen(function* () {
        const returned = yield* callPlugin((signal) =>
          spec.execute(copy(input), {
            sessionId: context.sessionId,
            callId: context.callId,
            cwd: context.cwd,
            signal,
            log
          } satisfies PluginToolContext)
        ).pipe(Effect.mapError((error) => new ToolFailure({ message: error.message })))
        const text =
          typeof returned === "string"
            ? returned
            : isRecord(returned) && typeof returned.output === "string"
              ? returned.output
              : undefined
        if (text === undefined) {
          return yield* Effect.fail(
            new ToolFailure({
              message: `The tool ${spec.name} of plugin ${plugin} returned neither a string nor { output: string }.`
            })
          )
        }
        const masked = context.secrets.redactText(text)
        const output = capText(masked, MAX_TOOL_OUTPUT_HEAD, MAX_TOOL_OUTPUT_TAIL)
        if (output === masked) return { output, metadata: { plugin } }
        const outputBlob = yield* context.storeBlob(masked)
        return { output, metadata: { plugin, outputBlob, bytes: Buffer.byteLength(masked), cut: true } }
      })
  })

/** The plugin's hooks as the registry runs them: named `plugin:<name>`, the call given as a copy. */
const pluginHooks = (name: string, plugin: PluginExport, timeoutMs: number | undefined) => {
  const source = `plugin:${name}`
  const before = plugin["tool.execute.before"]
  const after = plugin["tool.execute.after"]
  return {
    before:
      before === undefined
        ? []
        : [
            {
              source,
              timeoutMs,
              run: (call) =>
                Effect.suspend(() => {
                  const given: PluginToolCall = { ...call, input: copy(call.input) }
                  // a hook that changes the call it was given and returns nothing changed the input
                  return Effect.map(
                    callPlugin(() => before(given)),
                    (result) => (result === undefined ? { input: given.input } : (result as never))
                  )
                })
            } satisfies NamedHook<BeforeHook>
          ],
    after:
      after === undefined
        ? []
        : [
            {
              source,
              timeoutMs,
              run: (call, output) =>
                Effect.suspend(() => {
                  const given = { output: output.output, metadata: copy(output.metadata) }
                  return Effect.map(
                    callPlugin(() => after({ ...call, input: copy(call.input) }, given)),
                    (result): ToolOutput | string =>
                      result === undefined ? { output: given.output, metadata: given.metadata } : (result as never)
                  )
                })
            } satisfies NamedHook<AfterHook>
          ]
  }
}

export interface LoadPluginOptions {
  readonly file: string
  readonly workspace: string
  /** the bound of the plugin's hooks (and of loading it); the registry's `hookTimeoutMs` when absent */
  readonly timeoutMs: number
}

const formatIssue = (error: ParseResult.ParseError): string => {
  const first = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
  if (first === undefined) return "its default export is not a plugin"
  const path = first.path.length === 0 ? "its default export" : `"${first.path.join(".")}"`
  return `${path}: ${first.message}`
}

/**
 * Imports a plugin file and checks what it gives; a file that cannot be imported, throws, takes
 * longer than `timeoutMs`, or gives something else than a plugin is a `PluginLoadError` naming it.
 */
export const loadPlugin = Effect.fn("Plugin.load")(function* (options: LoadPluginOptions) {
  const { file } = options
  const fail = (message: string) => new PluginLoadError({ file, message: `plugin ${file}: ${message}` })
  const extension = NodePath.extname(file)
  if ((extension === ".ts" || extension === ".mts") && !typeScriptSupported()) {
    return yield* Effect.fail(
      fail(
        `this Node (${process.version}) does not run TypeScript as it is: compile the plugin to .js, or use a Node ` +
          "that strips types (22.18 or later, 23.6 or later)"
      )
    )
  }
  const runtime = yield* Effect.runtime<never>()
  let name = NodePath.basename(file, extension)
  const log = pluginLog(runtime, () => name)
  const bounded = <A>(effect: Effect.Effect<A, Error>, what: string) =>
    effect.pipe(
      Effect.timeoutFail({
        duration: Duration.millis(options.timeoutMs),
        onTimeout: () => new Error(`${what} did not finish within ${options.timeoutMs} ms`)
      }),
      Effect.mapError((error) => fail(`${what} failed: ${error.message}`))
    )
  const module = yield* bounded(
    callPlugin(() => import(pathToFileURL(file).href) as Promise<{ default?: unknown }>),
    "importing it"
  )
  if (module.default === undefined) return yield* Effect.fail(fail("it has no default export"))
  const made =
    typeof module.default === "function"
      ? yield* bounded(
          callPlugin(() =>
            (module.default as (context: PluginContext) => unknown)({ workspace: options.workspace, log })
          ),
          "its default export"
        )
      : module.default
  const decoded = Schema.decodeUnknownEither(PluginExport)(made, { onExcessProperty: "error" })
  if (Either.isLeft(decoded)) return yield* Effect.fail(fail(formatIssue(decoded.left)))
  const plugin = decoded.right
  name = plugin.name ?? name
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/.test(name)) {
    return yield* Effect.fail(fail(`its name "${name}" is not a name of letters, digits, _, . and -: give it one`))
  }
  const names = new Set<string>()
  const validators = new Map<string, InputValidator>()
  // loaded only for a plugin that has tools
  const Ajv = (plugin.tools ?? []).length === 0 ? undefined : yield* Effect.promise(loadAjv)
  for (const tool of plugin.tools ?? []) {
    if (names.has(tool.name)) return yield* Effect.fail(fail(`it has two tools named "${tool.name}"`))
    names.add(tool.name)
    const validator = inputValidator(Ajv!, toolInputSchema(tool.inputSchema))
    if (typeof validator === "string") {
      return yield* Effect.fail(fail(`the inputSchema of its tool "${tool.name}" is not a JSON Schema: ${validator}`))
    }
    validators.set(tool.name, validator)
  }
  const hooks = pluginHooks(name, plugin, options.timeoutMs)
  return {
    name,
    file,
    before: hooks.before,
    after: hooks.after,
    tools: (plugin.tools ?? []).map((spec) => pluginTool(name, spec, validators.get(spec.name)!, log)),
    events: {
      "session.start": plugin["session.start"],
      "session.end": plugin["session.end"],
      "turn.end": plugin["turn.end"],
      event: plugin.event
    } as PluginEventHandlers
  } satisfies LoadedPlugin
})
