/**
 * A small JSON-with-comments parser for config files: standard JSON plus `// line` and
 * `/* block *\/` comments and trailing commas in objects and arrays. Errors carry a 1-based line
 * and column, and say what was expected ("expected "," or "}" after a property").
 *
 * Written by hand instead of stripping comments and calling `JSON.parse`, so the positions in
 * errors are exact on every Node version, and so that duplicate keys (a common copy-paste mistake
 * where the first value silently loses) are reported. Strings are decoded with `JSON.parse` on the
 * scanned token, so escapes follow the JSON spec exactly. Keys such as `__proto__` become plain
 * own properties, never prototypes.
 */
import { Either } from "effect"

export interface JsoncError {
  /** what went wrong, e.g. `expected "," or "}" after a property, got "]"` */
  readonly message: string
  /** 1-based */
  readonly line: number
  /** 1-based, in UTF-16 code units */
  readonly column: number
}

/** Nesting deeper than this is refused (no stack overflow on hostile input). */
const maxDepth = 256

class JsoncFailure {
  constructor(
    readonly message: string,
    readonly pos: number
  ) {}
}

const numberPattern = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y

const describeChar = (text: string, pos: number): string => {
  if (pos >= text.length) return "the end of the file"
  const char = String.fromCodePoint(text.codePointAt(pos)!)
  return JSON.stringify(char)
}

const setOwn = (target: Record<string, unknown>, key: string, value: unknown): void => {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })
}

class Parser {
  pos = 0
  constructor(readonly text: string) {
    if (text.charCodeAt(0) === 0xfeff) this.pos = 1
  }

  fail(message: string, pos = this.pos): never {
    throw new JsoncFailure(message, pos)
  }

  skip(): void {
    const text = this.text
    while (this.pos < text.length) {
      const c = text[this.pos]!
      if (c === " " || c === "\t" || c === "\n" || c === "\r") {
        this.pos++
      } else if (c === "/" && text[this.pos + 1] === "/") {
        const end = text.indexOf("\n", this.pos)
        this.pos = end === -1 ? text.length : end + 1
      } else if (c === "/" && text[this.pos + 1] === "*") {
        const end = text.indexOf("*/", this.pos + 2)
        if (end === -1) this.fail("unterminated /* comment")
        this.pos = end + 2
      } else {
        return
      }
    }
  }

  document(): unknown {
    this.skip()
    if (this.pos >= this.text.length) this.fail("the file is empty; expected a JSON object")
    const value = this.value(0)
    this.skip()
    if (this.pos < this.text.length) {
      this.fail(`expected the end of the file after the top-level value, got ${describeChar(this.text, this.pos)}`)
    }
    return value
  }

  value(depth: number): unknown {
    if (depth > maxDepth) this.fail(`nesting deeper than ${maxDepth} levels`)
    const text = this.text
    const c = text[this.pos]
    if (c === "{") return this.object(depth)
    if (c === "[") return this.array(depth)
    if (c === '"') return this.string()
    if (c === "-" || (c !== undefined && c >= "0" && c <= "9")) return this.number()
    for (const [word, value] of [
      ["true", true],
      ["false", false],
      ["null", null]
    ] as const) {
      if (text.startsWith(word, this.pos)) {
        this.pos += word.length
        return value
      }
    }
    if (c === "'") this.fail("strings must be in double quotes")
    return this.fail(`expected a value, got ${describeChar(text, this.pos)}`)
  }

  object(depth: number): Record<string, unknown> {
    const result: Record<string, unknown> = {}
    const seen = new Set<string>()
    this.pos++ // {
    this.skip()
    while (this.text[this.pos] !== "}") {
      if (this.text[this.pos] !== '"') {
        this.fail(`expected a property name in double quotes or "}", got ${describeChar(this.text, this.pos)}`)
      }
      const keyPos = this.pos
      const key = this.string()
      if (seen.has(key)) this.fail(`duplicate key ${JSON.stringify(key)}`, keyPos)
      seen.add(key)
      this.skip()
      if (this.text[this.pos] !== ":") {
        this.fail(
          `expected ":" after the property name ${JSON.stringify(key)}, got ${describeChar(this.text, this.pos)}`
        )
      }
      this.pos++
      this.skip()
      setOwn(result, key, this.value(depth + 1))
      this.skip()
      const next = this.text[this.pos]
      if (next === ",") {
        this.pos++
        this.skip()
      } else if (next !== "}") {
        this.fail(`expected "," or "}" after a property, got ${describeChar(this.text, this.pos)}`)
      }
    }
    this.pos++ // }
    return result
  }

  array(depth: number): Array<unknown> {
    const result: Array<unknown> = []
    this.pos++ // [
    this.skip()
    while (this.text[this.pos] !== "]") {
      if (this.pos >= this.text.length) this.fail(`expected a value or "]", got the end of the file`)
      result.push(this.value(depth + 1))
      this.skip()
      const next = this.text[this.pos]
      if (next === ",") {
        this.pos++
        this.skip()
      } else if (next !== "]") {
        this.fail(`expected "," or "]" after an array element, got ${describeChar(this.text, this.pos)}`)
      }
    }
    this.pos++ // ]
    return result
  }

  string(): string {
    const text = this.text
    const start = this.pos
    let i = start + 1
    while (i < text.length) {
      const code = text.charCodeAt(i)
      if (code === 0x22) break // "
      if (code === 0x5c) {
        i += 2 // \ and the escaped character (checked by JSON.parse below)
        continue
      }
      if (code < 0x20) this.fail(code === 0x0a ? "line break inside a string" : "control character inside a string", i)
      i++
    }
    if (i >= text.length) this.fail("unterminated string", start)
    this.pos = i + 1
    try {
      return JSON.parse(text.slice(start, i + 1)) as string
    } catch {
      return this.fail("invalid escape sequence in a string", start)
    }
  }

  number(): number {
    numberPattern.lastIndex = this.pos
    const match = numberPattern.exec(this.text)
    if (match === null) return this.fail(`expected a number, got ${describeChar(this.text, this.pos)}`)
    const value = Number(match[0])
    // 1e309 is no number JavaScript can hold (it would be Infinity, then null in JSON)
    if (!Number.isFinite(value)) return this.fail(`the number ${match[0]} is out of range (too large to hold)`)
    this.pos += match[0].length
    return value
  }
}

const lineAndColumn = (text: string, pos: number): { readonly line: number; readonly column: number } => {
  let line = 1
  let lineStart = 0
  for (let i = 0; i < pos && i < text.length; i++) {
    if (text.charCodeAt(i) === 0x0a) {
      line++
      lineStart = i + 1
    }
  }
  return { line, column: pos - lineStart + 1 }
}

/** Parses JSON with comments and trailing commas. */
export const parseJsonc = (text: string): Either.Either<unknown, JsoncError> => {
  const parser = new Parser(text)
  try {
    return Either.right(parser.document())
  } catch (error) {
    if (error instanceof JsoncFailure) {
      return Either.left({ message: error.message, ...lineAndColumn(text, error.pos) })
    }
    throw error
  }
}
