/**
 * `Secrets`: the API key variables are hidden from the tools' commands and their values masked in
 * what is logged; write and edit refuse text a key was masked in.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, expectTypeOf, it } from "@effect/vitest"
import { Effect, Exit, type Layer, Option } from "effect"
import type { Model } from "../../src/model/Model.js"
import type { Actions } from "../../src/session/Actions.js"
import type { makeAgentLayer } from "../../src/session/Agent.js"
import type { Processor } from "../../src/session/Processor.js"
import type { Sessions } from "../../src/session/Sessions.js"
import type { EventStore } from "../../src/store/EventStore.js"
import { makeBash } from "../../src/tools/bash.js"
import { edit } from "../../src/tools/edit.js"
import { grep } from "../../src/tools/grep.js"
import { read } from "../../src/tools/read.js"
import { builtinSecretNames, makeSecrets, redactionMarker, Secrets } from "../../src/tools/Secrets.js"
import { write } from "../../src/tools/write.js"
import { testContext, workspaceWith } from "../support/toolContext.js"

const bash = makeBash({ timeoutMs: 10_000, maxTimeoutMs: 60_000 })
const KEY = "sk-test-0123456789abcdef"

/** The process's environment with KEY in LOGBOOK_SECRET_TEST, hidden and masked. */
const keyedSecrets = () =>
  makeSecrets({ hide: ["LOGBOOK_SECRET_TEST"], env: { ...process.env, LOGBOOK_SECRET_TEST: KEY } })
const OTHER = "sk-other-fedcba9876543210"
const env = { PATH: "/usr/bin:/bin", MY_KEY: KEY, OPENAI_API_KEY: OTHER, SHORT: "abc", HOME: "/home/u" }

describe("makeSecrets", () => {
  it("env: the process's environment without the hidden variables, unless passed", () => {
    const secrets = makeSecrets({ hide: ["MY_KEY", "OPENAI_API_KEY", "UNSET_KEY"], env })
    expect(secrets.env).toEqual({ PATH: "/usr/bin:/bin", SHORT: "abc", HOME: "/home/u" })
    const passing = makeSecrets({ hide: ["MY_KEY", "OPENAI_API_KEY"], pass: ["MY_KEY"], env })
    expect(passing.env).toEqual({ PATH: "/usr/bin:/bin", MY_KEY: KEY, SHORT: "abc", HOME: "/home/u" })
  })

  it("redactText masks every occurrence of every value; a passed variable's value too", () => {
    const secrets = makeSecrets({ hide: ["MY_KEY", "OPENAI_API_KEY"], pass: ["MY_KEY"], env })
    expect(secrets.redactText(`a ${KEY} b ${OTHER} c ${KEY}`)).toBe(
      `a ${redactionMarker("MY_KEY")} b ${redactionMarker("OPENAI_API_KEY")} c ${redactionMarker("MY_KEY")}`
    )
    expect(redactionMarker("MY_KEY")).toBe("[logbook redacted $MY_KEY]")
    expect(secrets.redactText("nothing here")).toBe("nothing here")
  })

  it("a value shorter than 20 characters is not masked (a placeholder key may be ordinary text, a path's part); an unset one is ignored", () => {
    const secrets = makeSecrets({
      hide: ["SHORT", "PLACEHOLDER", "UNSET"],
      env: { ...env, PLACEHOLDER: "sk-no-key-required" }
    })
    expect(secrets.redactText("abc /home/u/sk-no-key-required")).toBe("abc /home/u/sk-no-key-required")
    expect(secrets.env).not.toHaveProperty("SHORT")
  })

  it("a value that contains another is masked whole (the longer one first)", () => {
    const long = `${KEY}-extended`
    const secrets = makeSecrets({ hide: ["MY_KEY", "LONG_KEY"], env: { MY_KEY: KEY, LONG_KEY: long } })
    expect(secrets.redactText(`${long} ${KEY}`)).toBe(`${redactionMarker("LONG_KEY")} ${redactionMarker("MY_KEY")}`)
  })

  it("redact masks the strings of nested objects and arrays and returns the same value when nothing changed", () => {
    const secrets = makeSecrets({ hide: ["MY_KEY"], env })
    const clean = { a: ["x", { b: "y" }], n: 1, z: null }
    expect(secrets.redact(clean)).toBe(clean)
    const dirty = { a: ["x", { b: `key=${KEY}` }], n: 1, keep: clean }
    const masked = secrets.redact(dirty)
    expect(masked).toEqual({ a: ["x", { b: `key=${redactionMarker("MY_KEY")}` }], n: 1, keep: clean })
    expect(masked.keep).toBe(clean)
    expect(dirty.a[1]).toEqual({ b: `key=${KEY}` }) // the input is not changed
  })

  it("redact reaches into objects of any kind and byte arrays (what a custom tool may put in its metadata)", () => {
    const secrets = makeSecrets({ hide: ["MY_KEY"], env })
    class Holder {
      constructor(readonly key: string) {}
    }
    const bare = Object.assign(Object.create(null) as Record<string, unknown>, { key: KEY })
    const masked = secrets.redact({
      instance: new Holder(KEY),
      bare,
      bytes: Buffer.from(`b ${KEY}`),
      when: new Date(0)
    })
    const marker = redactionMarker("MY_KEY")
    expect(masked.instance).toEqual({ key: marker })
    expect(masked.bare).toEqual({ key: marker })
    expect(Buffer.from(masked.bytes).toString()).toBe(`b ${marker}`)
    expect(masked.when).toEqual(new Date(0))
    // what JSON would write of it: toJSON (a URL, a class's own), a boxed string
    const viaJson = secrets.redact({
      url: new URL(`https://h.example/?key=${KEY}`),
      boxed: new String(KEY),
      own: { toJSON: () => ({ hidden: KEY }) }
    })
    expect(JSON.stringify(viaJson)).not.toContain(KEY)
    expect(viaJson.url).toBe(`https://h.example/?key=${marker}`)
    expect(JSON.stringify(masked)).not.toContain(KEY)
    // a property whose getter throws is left as it is; the rest is masked
    const unreadable = Object.defineProperty({ key: KEY }, "bad", {
      enumerable: true,
      get: () => {
        throw new Error("unreadable")
      }
    })
    expect((secrets.redact(unreadable) as { key: string }).key).toBe(marker)
    // a cyclic value does not loop: masked where it can be, the cycle left as it is
    const cyclic: Record<string, unknown> = { key: KEY }
    cyclic.self = cyclic
    const maskedCycle = secrets.redact(cyclic)
    expect(maskedCycle.key).toBe(marker)
    expect(maskedCycle.self).toBe(cyclic)
    // the same object twice (not a cycle) is masked in both places
    const shared = { key: KEY }
    expect(secrets.redact({ a: shared, b: shared })).toEqual({ a: { key: marker }, b: { key: marker } })
  })

  it("redactBytes masks the value's UTF-8 bytes and keeps every other byte, valid UTF-8 or not", () => {
    const secrets = makeSecrets({ hide: ["MY_KEY"], env })
    const bytes = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(`${KEY}|${KEY}`), Buffer.from([0x80])])
    const masked = Buffer.from(secrets.redactBytes(bytes))
    const marker = redactionMarker("MY_KEY")
    expect(masked).toEqual(
      Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(`${marker}|${marker}`), Buffer.from([0x80])])
    )
  })

  it("with no value to mask, everything is passed through as is", () => {
    const secrets = makeSecrets({ hide: ["UNSET"], env })
    const value = { a: "x" }
    expect(secrets.redact(value)).toBe(value)
    const bytes = Buffer.from("x")
    expect(secrets.redactBytes(bytes)).toBe(bytes)
  })

  it("redactStream masks a value split across chunks at every split point; what it holds back comes out at the end", () => {
    const secrets = makeSecrets({ hide: ["MY_KEY", "OPENAI_API_KEY"], env })
    const marker = redactionMarker("MY_KEY")
    const text = `before ${KEY} middle ${OTHER} s`
    const expected = secrets.redactText(text)
    for (let a = 0; a <= text.length; a++) {
      for (const b of [a, Math.min(text.length, a + 3), text.length]) {
        const redactor = secrets.redactStream()
        const out = [text.slice(0, a), text.slice(a, b), text.slice(b)].map((part) =>
          Buffer.from(redactor.push(Buffer.from(part)))
        )
        out.push(Buffer.from(redactor.end()))
        expect(Buffer.concat(out).toString(), `split at ${a}, ${b}`).toBe(expected)
      }
    }
    // a possible start is held back only while it could still be one
    const redactor = secrets.redactStream()
    expect(Buffer.from(redactor.push(Buffer.from("x sk-te"))).toString()).toBe("x ")
    expect(Buffer.from(redactor.push(Buffer.from("a"))).toString()).toBe("sk-tea")
    expect(Buffer.from(redactor.end()).toString()).toBe("")
    expect(expected).toContain(marker)
  })

  it("redactTextStream: the same for text in pieces (the model's streamed text), at every split point", () => {
    const secrets = makeSecrets({ hide: ["MY_KEY", "OPENAI_API_KEY"], env })
    const text = `é ${KEY} 🙂 ${OTHER} sk`
    const expected = secrets.redactText(text)
    const pieces = Array.from(text)
    for (let a = 0; a <= pieces.length; a++) {
      const redactor = secrets.redactTextStream()
      const out = redactor.push(pieces.slice(0, a).join("")) + redactor.push(pieces.slice(a).join("")) + redactor.end()
      expect(out, `split at ${a}`).toBe(expected)
    }
    const one = secrets.redactTextStream()
    expect(one.push("see sk-test-01")).toBe("see ")
    expect(one.push("x")).toBe("sk-test-01x")
  })

  it("the built-in providers' variables are hidden by default", () => {
    expect([...builtinSecretNames].sort()).toEqual(["ANTHROPIC_API_KEY", "OPENAI_API_KEY"])
  })
})

describe("the Secrets layers", () => {
  it("no default: every layer that hides or masks keys requires Secrets, up to makeAgentLayer", () => {
    expectTypeOf<Layer.Layer.Context<ReturnType<typeof makeAgentLayer>>>().toEqualTypeOf<EventStore | Model | Secrets>()
    expectTypeOf<Secrets>().toExtend<Layer.Layer.Context<ReturnType<typeof Actions.layer>>>()
    expectTypeOf<Secrets>().toExtend<Layer.Layer.Context<typeof Processor.layer>>()
    expectTypeOf<Secrets>().toExtend<Layer.Layer.Context<ReturnType<typeof Sessions.layer>>>()
  })

  it.effect("without a layer there is no Secrets service: nothing falls back to process.env", () =>
    Effect.gen(function* () {
      expect(Option.isNone(yield* Effect.serviceOption(Secrets))).toBe(true)
    })
  )

  it.effect("layerFromEnv: the built-in providers' variables of the process's environment when it is built", () =>
    Effect.gen(function* () {
      const saved = process.env.OPENAI_API_KEY
      process.env.OPENAI_API_KEY = KEY
      const secrets = yield* Secrets.pipe(
        Effect.provide(Secrets.layerFromEnv),
        Effect.ensuring(
          Effect.sync(() => {
            if (saved === undefined) delete process.env.OPENAI_API_KEY
            else process.env.OPENAI_API_KEY = saved
          })
        )
      )
      expect([...secrets.names].sort()).toEqual([...builtinSecretNames].sort())
      expect(secrets.redactText(`k=${KEY}`)).toBe(`k=${redactionMarker("OPENAI_API_KEY")}`)
    })
  )

  it.effect("layer(options): the variables it names, of the environment it is given", () =>
    Effect.gen(function* () {
      const secrets = yield* Secrets.pipe(Effect.provide(Secrets.layer({ hide: ["MY_KEY"], env })))
      expect(secrets.names).toEqual(["MY_KEY"])
      expect(secrets.env).toEqual({ PATH: "/usr/bin:/bin", OPENAI_API_KEY: OTHER, SHORT: "abc", HOME: "/home/u" })
      expect(secrets.redactText(`${KEY} ${OTHER}`)).toBe(`${redactionMarker("MY_KEY")} ${OTHER}`)
    })
  )
})

describe("the tools and Secrets", () => {
  it.live("bash runs with the context's environment: a hidden key of the process is not there", () =>
    Effect.gen(function* () {
      process.env.LOGBOOK_SECRET_TEST = KEY
      const secrets = makeSecrets({ hide: ["LOGBOOK_SECRET_TEST"] })
      const ctx = testContext(workspaceWith(), {
        secrets: { ...secrets, env: { ...secrets.env, LOGBOOK_CONTEXT_ONLY: "seen" } }
      })
      const result = yield* bash
        .execute({ command: 'printf "[%s][%s]" "$LOGBOOK_SECRET_TEST" "$LOGBOOK_CONTEXT_ONLY"' }, ctx)
        .pipe(Effect.ensuring(Effect.sync(() => delete process.env.LOGBOOK_SECRET_TEST)))
      expect(result.output).toContain("[][seen]")
    })
  )

  it.live("bash masks a key its command prints in pieces, or across the cut of a long output", () =>
    Effect.gen(function* () {
      const secrets = keyedSecrets()
      const ctx = testContext(workspaceWith(), { secrets })
      const marker = redactionMarker("LOGBOOK_SECRET_TEST")
      // in two writes, a moment apart: two chunks of output
      const split = yield* bash.execute(
        { command: `printf '%s' '${KEY.slice(0, 10)}'; sleep 0.2; printf '%s\n' '${KEY.slice(10)}'` },
        ctx
      )
      expect(split.output).toBe(`${marker}\n\nExit code: 0`)
      // where the head of a long output ends (10 KB): masked whole, not cut in half
      const long = yield* bash.execute(
        { command: `head -c 10230 /dev/zero | tr '\\0' A; printf '%s' '${KEY}'; head -c 40000 /dev/zero | tr '\\0' B` },
        ctx
      )
      expect(long.output).not.toContain(KEY.slice(0, 8))
      const whole = ctx.blobs.get((long.metadata as { outputBlob: string }).outputBlob)!
      expect(whole).toContain(marker)
      expect(whole).not.toContain(KEY.slice(0, 8))
    })
  )

  it.live("edit masks a key in the lines it shows before cutting them", () =>
    Effect.gen(function* () {
      const secrets = keyedSecrets()
      // a context line whose key straddles the 300 characters edit shows of a line
      const dir = workspaceWith({ "conf.js": `const a = 1\nconst b = "${"x".repeat(270)}${KEY}"\n` })
      const ctx = testContext(dir, { secrets })
      yield* read.execute({ path: "conf.js" }, ctx)
      const edited = yield* edit.execute({ path: "conf.js", oldString: "const a = 1", newString: "const a = 2" }, ctx)
      expect(edited.output).toContain("const a = 2")
      expect(edited.output).not.toContain(KEY.slice(0, 8))
      expect(edited.output).toContain("x[logbook redacted")
    })
  )

  it.live("read and grep mask a key before cutting a long line", () =>
    Effect.gen(function* () {
      const secrets = keyedSecrets()
      // the key straddles read's cut (2000 characters) and grep's (200)
      const dir = workspaceWith({
        "read.txt": `${"a".repeat(1990)}${KEY}\n`,
        "grep.txt": `match ${"g".repeat(185)}${KEY}\n`
      })
      const ctx = testContext(dir, { secrets })
      const read1 = yield* read.execute({ path: "read.txt" }, ctx)
      expect(read1.output).not.toContain(KEY.slice(0, 8))
      // the marker is what the cut cuts now
      expect(read1.output).toContain("aaaa[logbook r")
      const found = yield* grep.execute({ pattern: "match" }, ctx)
      expect(found.output).toContain("grep.txt:1: match")
      expect(found.output).not.toContain(KEY.slice(0, 8))
    })
  )

  it.live("write refuses content with a marker the file does not hold; the file keeps its key", () =>
    Effect.gen(function* () {
      const dir = workspaceWith({ ".env": `TOKEN=${KEY}\n` })
      const ctx = testContext(dir)
      yield* read.execute({ path: ".env" }, ctx)
      const marker = redactionMarker("MY_KEY")
      const exit = yield* Effect.exit(write.execute({ path: ".env", content: `TOKEN=${marker}\nMORE=1\n` }, ctx))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(JSON.stringify(exit)).toContain(`content contains ${marker}: logbook masked an API key there`)
      expect(fs.readFileSync(path.join(dir, ".env"), "utf8")).toBe(`TOKEN=${KEY}\n`)
      // a new file with a marker is refused too
      const created = yield* Effect.exit(write.execute({ path: "copy.env", content: `TOKEN=${marker}\n` }, ctx))
      expect(Exit.isFailure(created)).toBe(true)
      expect(fs.existsSync(path.join(dir, "copy.env"))).toBe(false)
    })
  )

  it.live("write and edit accept a marker the file already holds literally (e.g. documentation of logbook)", () =>
    Effect.gen(function* () {
      const marker = redactionMarker("OPENAI_API_KEY")
      const dir = workspaceWith({ "doc.md": `Masked keys show as ${marker}.\n` })
      const ctx = testContext(dir)
      yield* read.execute({ path: "doc.md" }, ctx)
      yield* edit.execute({ path: "doc.md", oldString: "show as", newString: `appear as` }, ctx)
      yield* write.execute({ path: "doc.md", content: `Masked keys appear as ${marker}, always.\n` }, ctx)
      expect(fs.readFileSync(path.join(dir, "doc.md"), "utf8")).toBe(`Masked keys appear as ${marker}, always.\n`)
    })
  )

  it.live("edit refuses an oldString or a newString with a marker the file does not hold", () =>
    Effect.gen(function* () {
      const dir = workspaceWith({ ".env": `TOKEN=${KEY}\nDEBUG=0\n` })
      const ctx = testContext(dir)
      yield* read.execute({ path: ".env" }, ctx)
      const marker = redactionMarker("MY_KEY")
      const old = yield* Effect.exit(
        edit.execute(
          { path: ".env", oldString: `TOKEN=${marker}\nDEBUG=0`, newString: `TOKEN=${marker}\nDEBUG=1` },
          ctx
        )
      )
      expect(JSON.stringify(old)).toContain(`oldString contains ${marker}`)
      const added = yield* Effect.exit(
        edit.execute({ path: ".env", oldString: "DEBUG=0", newString: `DEBUG=0\nCOPY=${marker}` }, ctx)
      )
      expect(JSON.stringify(added)).toContain(`newString contains ${marker}`)
      expect(fs.readFileSync(path.join(dir, ".env"), "utf8")).toBe(`TOKEN=${KEY}\nDEBUG=0\n`)
      // around it, the edit goes through
      yield* edit.execute({ path: ".env", oldString: "DEBUG=0", newString: "DEBUG=1" }, ctx)
      expect(fs.readFileSync(path.join(dir, ".env"), "utf8")).toBe(`TOKEN=${KEY}\nDEBUG=1\n`)
    })
  )
})
