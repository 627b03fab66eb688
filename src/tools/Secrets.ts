/**
 * The API keys logbook holds for the model are logbook's, not the agent's (docs/tools.md,
 * "Secrets"). `Secrets` knows the environment variables that hold them and does two things:
 *
 * - `env`: the environment the tools' commands run with — the process's own without those
 *   variables (unless `pass` names them), so `env`, `printenv` or a prompt-injected
 *   `curl …?k=$OPENAI_API_KEY` find nothing; logbook's own `LOGBOOK_*` variables (where its
 *   database is …) are never in it;
 * - `redact`: every occurrence of a key's value in what is about to be logged is replaced by
 *   `[logbook redacted $NAME]` — the journal applies it to every event it appends, and `Actions` to
 *   the blobs of a command's output — so a key that reaches a tool's output anyway (a `cat ~/.bashrc`)
 *   reaches neither the event log nor the model.
 *
 * A value shorter than `MIN_SECRET_LENGTH` is not masked (it would mask ordinary text). The contents
 * of files a tool changed (`file.changed` blobs) are kept exact, for the audit.
 */
import { Context, Effect, Layer } from "effect"
import { defaultApiKeyEnv } from "../model/AiSdk.js"
import { ToolFailure } from "./Tools.js"

/**
 * Values shorter than this are not masked: real API keys are far longer (OpenAI's, Anthropic's: 100+
 * characters), while a local server's placeholder key ("lm-studio", "sk-no-key-required") is short
 * and may be part of ordinary text — paths included, which must stay as they are in the log.
 */
export const MIN_SECRET_LENGTH = 20

/** The prefix of logbook's own environment variables: none of them reaches a command. */
export const OWN_PREFIX = "LOGBOOK_"

/** What a masked value is replaced with. */
export const redactionMarker = (name: string): string => `[logbook redacted $${name}]`

/** Finds the markers `redact` leaves (e.g. in content the model wants written to a file). */
export const REDACTION_MARKER = /\[logbook redacted \$[A-Za-z_][A-Za-z0-9_]*\]/

export interface SecretsOptions {
  /** the variables that hold secrets: hidden from the tools' commands, their values masked */
  readonly hide: ReadonlyArray<string>
  /** of `hide`, those the commands may see anyway (their values are still masked in what is logged) */
  readonly pass?: ReadonlyArray<string> | undefined
  /** the environment (default `process.env`) */
  readonly env?: Readonly<Record<string, string | undefined>> | undefined
  /**
   * secret values that are a part of a variable, not its whole value (a header's value inside
   * `OTEL_EXPORTER_OTLP_HEADERS`): masked as `name`'s are
   */
  readonly values?: ReadonlyArray<{ readonly name: string; readonly value: string }> | undefined
}

export interface SecretsService {
  /** the names of the variables that hold secrets */
  readonly names: ReadonlyArray<string>
  /**
   * the environment for the tools' commands: the process's own (as it is when read) without the
   * hidden variables; the values to mask are read once, when the service is made
   */
  readonly env: Readonly<Record<string, string | undefined>>
  /** masks every secret value in a string */
  readonly redactText: (text: string) => string
  /** masks every secret value (as UTF-8) in bytes; other bytes stay as they are, valid UTF-8 or not */
  readonly redactBytes: (bytes: Uint8Array) => Uint8Array
  /**
   * A masker for output that arrives in chunks (a command's): a value split across chunks is masked
   * too, because the end of a chunk that could begin a value is held back until the next one (or
   * `end`). Mask before cutting or sampling output (head and tail, progress), so no cut leaves part
   * of a value.
   */
  readonly redactStream: () => StreamRedactor
  /** `redactStream` for text that arrives in pieces (the model's streamed text) */
  readonly redactTextStream: () => TextStreamRedactor
  /**
   * Masks every secret value in every string (and byte array) of a value: objects of any kind (their
   * own properties), arrays, strings. Returns the value itself when nothing was masked, so the common
   * case allocates nothing.
   */
  readonly redact: <A>(value: A) => A
  /**
   * The other way, for what the log kept masked that must be real again (a re-run restoring a
   * workspace file that held a key): each marker of a value this service holds becomes the value
   */
  readonly revealBytes: (bytes: Uint8Array) => Uint8Array
}

export interface StreamRedactor {
  /** the masked bytes that are safe to pass on (maybe fewer than given: a possible start is held back) */
  readonly push: (chunk: Uint8Array) => Uint8Array
  /** what was held back, masked: the output ended */
  readonly end: () => Uint8Array
}

export interface TextStreamRedactor {
  /** the masked text that is safe to pass on (a possible start of a value is held back) */
  readonly push: (piece: string) => string
  /** what was held back, masked: the text ended */
  readonly end: () => string
}

/** The variables of the built-in provider types' keys (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`). */
export const builtinSecretNames: ReadonlyArray<string> = Object.values(defaultApiKeyEnv).filter(
  (name): name is string => name !== undefined
)

/** A value to mask and what replaces it. */
interface Secret {
  readonly value: string
  readonly marker: string
}

/** The values to mask, long enough and each once, the longer first: one that contains a shorter one is masked whole. */
const secretValues = (options: SecretsOptions, names: ReadonlyArray<string>): Array<Secret> => {
  const env = options.env ?? process.env
  const values: Array<Secret> = []
  const add = (name: string, value: string | undefined) => {
    if (value !== undefined && value.length >= MIN_SECRET_LENGTH && !values.some((v) => v.value === value)) {
      values.push({ value, marker: redactionMarker(name) })
    }
  }
  for (const name of names) add(name, env[name])
  for (const { name, value } of options.values ?? []) add(name, value)
  values.sort((a, b) => b.value.length - a.value.length)
  return values
}

/** The environment of the tools' commands, read when a command starts (a program may change it). */
const toolEnv = (
  options: SecretsOptions,
  names: ReadonlyArray<string>,
  pass: ReadonlySet<string>
): Record<string, string | undefined> => {
  const current = options.env ?? process.env
  const result: Record<string, string | undefined> = {}
  for (const [name, value] of Object.entries(current)) {
    // logbook's own settings (`LOGBOOK_DB`, `LOGBOOK_MODEL` …) are not the project's: a command
    // does not learn where the log is, nor runs a nested logbook against it (unless the user's
    // config passes the variable by name: `tools.bash.passEnv`)
    if (name.startsWith(OWN_PREFIX) && !pass.has(name)) continue
    if (!names.includes(name) || pass.has(name)) result[name] = value
  }
  return result
}

const textRedactor =
  (values: ReadonlyArray<Secret>) =>
  (text: string): string => {
    let result = text
    for (const { value, marker } of values) {
      if (result.includes(value)) result = result.split(value).join(marker)
    }
    return result
  }

const bytesRedactor =
  (values: ReadonlyArray<Secret>) =>
  (bytes: Uint8Array): Uint8Array => {
    let result = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
    for (const { value, marker } of values) {
      const needle = Buffer.from(value)
      let at = result.indexOf(needle)
      if (at < 0) continue
      const pieces: Array<Buffer> = []
      let from = 0
      while (at >= 0) {
        pieces.push(result.subarray(from, at), Buffer.from(marker))
        from = at + needle.length
        at = result.indexOf(needle, from)
      }
      pieces.push(result.subarray(from))
      result = Buffer.concat(pieces)
    }
    return result
  }

const bytesRevealer =
  (values: ReadonlyArray<Secret>) =>
  (bytes: Uint8Array): Uint8Array => {
    const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
    if (!values.some(({ marker }) => text.includes(marker))) return bytes
    let result = text.toString("latin1")
    // latin1 keeps every byte as it is; a value is written back as its UTF-8 bytes
    for (const { value, marker } of values) result = result.split(marker).join(Buffer.from(value).toString("latin1"))
    return Buffer.from(result, "latin1")
  }

/** `redactStream`: maskers for bytes that arrive in chunks, holding back an end that may start a value. */
const streamRedactors = (values: ReadonlyArray<Secret>, redactBytes: (bytes: Uint8Array) => Uint8Array) => {
  const needles = values.map((v) => Buffer.from(v.value))
  /** the length of the longest end of `bytes` that is the start (shorter than the whole) of a value */
  const possibleStart = (bytes: Buffer): number => {
    let longest = 0
    for (const needle of needles) {
      // only where the value's first byte is: the longest end first
      const from = Math.max(0, bytes.length - (needle.length - 1))
      for (
        let at = bytes.indexOf(needle[0]!, from);
        at >= 0 && bytes.length - at > longest;
        at = bytes.indexOf(needle[0]!, at + 1)
      ) {
        if (bytes.subarray(at).equals(needle.subarray(0, bytes.length - at))) {
          longest = bytes.length - at
          break
        }
      }
    }
    return longest
  }
  return (): StreamRedactor => {
    let held: Buffer = Buffer.alloc(0)
    return {
      push: (chunk) => {
        const masked = Buffer.from(redactBytes(Buffer.concat([held, chunk])))
        const keep = possibleStart(masked)
        held = masked.subarray(masked.length - keep)
        return masked.subarray(0, masked.length - keep)
      },
      end: () => {
        const rest = held
        held = Buffer.alloc(0)
        return rest
      }
    }
  }
}
const passThrough: StreamRedactor = { push: (chunk) => chunk, end: () => new Uint8Array(0) }

/** `redactTextStream`: maskers for text that arrives in pieces, holding back an end that may start a value. */
const textStreamRedactors = (values: ReadonlyArray<Secret>, redactText: (text: string) => string) => {
  /** the length of the longest end of `text` that is the start (shorter than the whole) of a value */
  const possibleTextStart = (text: string): number => {
    let longest = 0
    for (const { value } of values) {
      // only where the value's first character is: the longest end first
      const from = Math.max(0, text.length - (value.length - 1))
      for (
        let at = text.indexOf(value[0]!, from);
        at >= 0 && text.length - at > longest;
        at = text.indexOf(value[0]!, at + 1)
      ) {
        if (value.startsWith(text.slice(at))) {
          longest = text.length - at
          break
        }
      }
    }
    return longest
  }
  return (): TextStreamRedactor => {
    let held = ""
    return {
      push: (piece) => {
        const masked = redactText(held + piece)
        const keep = possibleTextStart(masked)
        held = masked.slice(masked.length - keep)
        return masked.slice(0, masked.length - keep)
      },
      end: () => {
        const rest = held
        held = ""
        return rest
      }
    }
  }
}
const textPassThrough: TextStreamRedactor = { push: (piece) => piece, end: () => "" }

/** `redact`: every string and byte array of a value masked, the value itself returned when nothing was. */
const valueRedactor = (redactText: (text: string) => string, redactBytes: (bytes: Uint8Array) => Uint8Array) => {
  /** `seen`: the objects on the way down (a cyclic value is left as it is where it repeats) */
  const redactValue = (value: unknown, seen: WeakSet<object>): unknown => {
    if (typeof value === "string") return redactText(value)
    if (value === null || typeof value !== "object" || seen.has(value)) return value
    seen.add(value)
    try {
      return redactObject(value, seen)
    } finally {
      seen.delete(value)
    }
  }
  const redactObject = (value: object, seen: WeakSet<object>): unknown => {
    if (Array.isArray(value)) {
      let changed: Array<unknown> | undefined
      value.forEach((item, i) => {
        const masked = redactValue(item, seen)
        if (masked !== item) {
          changed ??= [...value]
          changed[i] = masked
        }
      })
      return changed ?? value
    }
    if (value instanceof Uint8Array) {
      const masked = redactBytes(value)
      return Buffer.from(masked.buffer, masked.byteOffset, masked.byteLength).equals(value) ? value : masked
    }
    // what JSON writes for it: a URL's text, a boxed string's, a class's own `toJSON` — masked, it
    // replaces the object (which JSON would have written so anyway); unchanged, the object stays
    const json = (value as { readonly toJSON?: unknown }).toJSON
    if (typeof json === "function" || value instanceof String) {
      const written: unknown = typeof json === "function" ? json.call(value, "") : value.valueOf()
      const masked = redactValue(written, seen)
      return masked === written ? value : masked
    }
    // a plain object, or anything else a custom tool put in its metadata (a class instance, an
    // object without a prototype): its own properties, as JSON would write them; a masked copy is plain
    let changed: Record<string, unknown> | undefined
    for (const key of Object.keys(value)) {
      let item: unknown
      try {
        item = (value as Record<string, unknown>)[key]
      } catch {
        // a getter that throws: left as it is (writing the payload as JSON fails on it, typed)
        continue
      }
      const masked = redactValue(item, seen)
      if (masked !== item) {
        changed ??= plainCopy(value)
        changed[key] = masked
      }
    }
    return changed ?? value
  }
  return <A>(value: A) => redactValue(value, new WeakSet()) as A
}

/** `{ ...value }`, but a getter that throws is copied as the getter (reading it would throw here) */
const plainCopy = (value: object): Record<string, unknown> => {
  const copy: Record<string, unknown> = {}
  for (const key of Object.keys(value)) {
    const descriptor = Object.getOwnPropertyDescriptor(value, key)!
    if (descriptor.get === undefined) copy[key] = descriptor.value
    else {
      try {
        copy[key] = descriptor.get.call(value)
      } catch {
        Object.defineProperty(copy, key, { ...descriptor, configurable: true })
      }
    }
  }
  return copy
}

export const makeSecrets = (options: SecretsOptions): SecretsService => {
  const names = [...new Set(options.hide)]
  const pass = new Set(options.pass ?? [])
  const values = secretValues(options, names)
  const redactText = textRedactor(values)
  const redactBytes = bytesRedactor(values)
  return {
    names,
    get env() {
      return toolEnv(options, names, pass)
    },
    redactText: values.length === 0 ? (text) => text : redactText,
    redactBytes: values.length === 0 ? (bytes) => bytes : redactBytes,
    redactStream: values.length === 0 ? () => passThrough : streamRedactors(values, redactBytes),
    redactTextStream: values.length === 0 ? () => textPassThrough : textStreamRedactors(values, redactText),
    redact: values.length === 0 ? (value) => value : valueRedactor(redactText, redactBytes),
    revealBytes: values.length === 0 ? (bytes) => bytes : bytesRevealer(values)
  }
}

/**
 * The secrets of this agent. There is no default: every layer that hides or masks keys (`Processor`,
 * `Actions`, `Sessions`, hence `makeAgentLayer`) has `Secrets` in its requirements, so a program
 * says which keys it holds — `Secrets.layerFromEnv` for the built-in providers' variables,
 * `Secrets.layer(options)` for the config's (`toolSecrets`), or `Layer.succeed(Secrets, service)` for
 * a `makeSecrets` service the program uses too (the CLI masks a session's title with it).
 */
export class Secrets extends Context.Tag("logbook/Secrets")<Secrets, SecretsService>() {
  /** the variables `options.hide` names, of `options.env` (default: the process's environment when the layer is built) */
  static readonly layer = (options: SecretsOptions): Layer.Layer<Secrets> =>
    Layer.sync(Secrets, () => makeSecrets(options))

  /**
   * The built-in providers' key variables (`builtinSecretNames`: `OPENAI_API_KEY`,
   * `ANTHROPIC_API_KEY`) of the process's environment when the layer is built. A config that names
   * other key variables (`apiKeyEnv`) needs `Secrets.layer({ hide: … })` to hide them too.
   */
  static readonly layerFromEnv: Layer.Layer<Secrets> = Secrets.layer({ hide: builtinSecretNames })
}

/**
 * Refuses text the model copied from output a secret was masked in (`Secrets`): a redaction marker
 * in `text` that the file (`current`, absent for a new file) does not contain literally would
 * replace the real value in the file with the marker.
 */
export const refuseMaskedSecret = (
  text: string,
  current: string | undefined,
  what: string
): Effect.Effect<void, ToolFailure> => {
  const global = new RegExp(REDACTION_MARKER.source, "g")
  const copied = text.match(global)?.find((marker) => current === undefined || !current.includes(marker))
  return copied === undefined
    ? Effect.void
    : Effect.fail(
        new ToolFailure({
          message:
            `${what} contains ${copied}: logbook masked an API key there in what you read (its keys are hidden ` +
            "from tools), so writing it would replace the real value in the file. Leave that part of the file " +
            "out of your change (with edit, pick an oldString that does not include it)."
        })
      )
}
