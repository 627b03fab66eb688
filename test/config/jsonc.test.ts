/**
 * The JSON-with-comments parser of config files: comments, trailing commas, exact error positions.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either, FastCheck } from "effect"
import { type JsoncError, parseJsonc } from "../../src/config/Jsonc.js"

const ok = (text: string): unknown => {
  const result = parseJsonc(text)
  if (Either.isLeft(result)) throw new Error(`expected valid JSONC, got ${JSON.stringify(result.left)}`)
  return result.right
}

const fail = (text: string): JsoncError => {
  const result = parseJsonc(text)
  if (Either.isRight(result)) throw new Error(`expected an error, got ${JSON.stringify(result.right)}`)
  return result.left
}

describe("parseJsonc", () => {
  it("accepts line and block comments, and trailing commas in objects and arrays", () => {
    const text = [
      "// the project config",
      "{",
      '  "model": "openai/gpt-4o", // the default model',
      "  /* retry settings",
      "     over two lines */",
      '  "retry": { "maxAttempts": 3, },',
      '  "list": [1, 2, /* three */ 3,],',
      "}",
      "/* trailing comment */"
    ].join("\n")
    expect(ok(text)).toEqual({ model: "openai/gpt-4o", retry: { maxAttempts: 3 }, list: [1, 2, 3] })
  })

  it("leaves comment markers inside strings alone", () => {
    expect(ok('{ "url": "http://localhost:11434/v1", "glob": "src/**/*.ts", "q": "a \\" // b" }')).toEqual({
      url: "http://localhost:11434/v1",
      glob: "src/**/*.ts",
      q: 'a " // b'
    })
  })

  it("decodes escapes, numbers and literals as JSON.parse does, and skips a BOM", () => {
    expect(ok('\uFEFF{"a": "\\u00e9\\n\\t", "b": -1.5e3, "c": 0, "d": true, "e": false, "f": null}')).toEqual({
      a: "é\n\t",
      b: -1500,
      c: 0,
      d: true,
      e: false,
      f: null
    })
  })

  it("parses whatever JSON.stringify writes exactly as JSON.parse does", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.jsonValue(), (value) => {
        const text = JSON.stringify(value, null, 2)
        expect(ok(text)).toEqual(JSON.parse(text))
      }),
      { numRuns: 200 }
    )
  })

  it("keeps __proto__ as a plain own property", () => {
    const value = ok('{ "__proto__": { "polluted": true } }') as Record<string, unknown>
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype)
    expect(Object.keys(value)).toEqual(["__proto__"])
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })

  it.each([
    ['{\n  "a": 1\n  "b": 2\n}', 3, 3, 'expected "," or "}" after a property, got "\\""'],
    ['{\n  "a": }', 2, 8, 'expected a value, got "}"'],
    ['{ "a": 1, }\n{', 2, 1, "expected the end of the file after the top-level value"],
    ['{\n  "a": [1 2]\n}', 2, 11, 'expected "," or "]" after an array element'],
    ["{ 'a': 1 }", 1, 3, 'expected a property name in double quotes or "}"'],
    ["{ \"a\": 'x' }", 1, 8, "strings must be in double quotes"],
    ['{ "a": "x\n" }', 1, 10, "line break inside a string"],
    ['{ "a": "x }', 1, 8, "unterminated string"],
    ['{ "a": 1 /* never closed', 1, 10, "unterminated /* comment"],
    ['{ "a": 1, "a": 2 }', 1, 11, 'duplicate key "a"'],
    ['{ "a" 1 }', 1, 7, 'expected ":" after the property name "a"'],
    ['{ "a": "\\x" }', 1, 8, "invalid escape sequence"],
    ["", 1, 1, "the file is empty"],
    ["  // only a comment\n", 2, 1, "the file is empty"],
    ['{ "a": tru }', 1, 8, 'expected a value, got "t"']
  ])("reports %j at line %i, column %i", (text, line, column, message) => {
    const error = fail(text)
    expect(error.message).toContain(message)
    expect({ line: error.line, column: error.column }).toEqual({ line, column })
  })

  it("refuses nesting deeper than 256 levels instead of overflowing the stack", () => {
    expect(fail(`${"[".repeat(10_000)}${"]".repeat(10_000)}`).message).toContain("nesting deeper than 256")
  })
})
