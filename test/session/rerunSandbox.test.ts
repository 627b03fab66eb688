/**
 * How a re-run's commands run (src/session/RerunSandbox.ts): in the sandbox whatever the config's
 * mode, without its writable paths, with its network and hidden paths; where no sandbox can run,
 * refused, or unconfined when the caller says so. The `bash` tool keeps its description. The
 * commands themselves run in bubblewrap (skipped without it, see test/support/bwrap.ts).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { confineCommands, noSandboxRefusal, rerunSandbox } from "../../src/session/RerunSandbox.js"
import { type BashMetadata, makeBash } from "../../src/tools/bash.js"
import { read } from "../../src/tools/read.js"
import type { SandboxSettings, SandboxStatus } from "../../src/tools/Sandbox.js"
import { hasBwrap, outsideDir, removeOutsideDirs } from "../support/bwrap.js"
import { tempDir } from "../support/tmp.js"
import { testContext } from "../support/toolContext.js"

afterAll(removeOutsideDirs)

const config: SandboxSettings = { mode: "off", network: false, writable: ["/var/tmp/cache"], hidden: ["/h/secret"] }
const available: SandboxStatus = { _tag: "Available", bwrap: "/usr/bin/bwrap" }
const missing: SandboxStatus = {
  _tag: "Unavailable",
  reason: "bubblewrap (bwrap) is not installed (not found on PATH)"
}

describe("rerunSandbox", () => {
  it.effect(
    'sandboxed where a sandbox can run, whatever the mode ("off" too): no writable path, the network and hidden paths kept',
    () =>
      Effect.gen(function* () {
        const confinement = yield* rerunSandbox({ settings: config, status: available })
        expect(confinement.commands).toEqual({ _tag: "sandboxed", network: false })
        expect(confinement.sandbox).toEqual({
          mode: "on",
          network: false,
          writable: [],
          hidden: ["/h/secret"],
          status: available
        })
        expect(noSandboxRefusal(confinement, "bash")).toBeUndefined()
      })
  )

  it.effect("where none can run: bash calls refused with the reason, other tools not; the tool would refuse too", () =>
    Effect.gen(function* () {
      const confinement = yield* rerunSandbox({ settings: config, status: missing })
      expect(confinement.commands).toEqual({ _tag: "refused", reason: missing.reason })
      expect(confinement.sandbox).toMatchObject({ mode: "on", writable: [], status: missing })
      expect(noSandboxRefusal(confinement, "bash")).toBe(
        `no sandbox here (${missing.reason}): a re-run runs commands only in the sandbox, and --unconfined-commands runs them without one`
      )
      expect(noSandboxRefusal(confinement, "read")).toBeUndefined()
    })
  )

  it.effect("where none can run and unconfined commands are allowed: they run without one, saying why", () =>
    Effect.gen(function* () {
      const confinement = yield* rerunSandbox({ settings: config, status: missing, unconfined: true })
      expect(confinement.commands).toEqual({ _tag: "unconfined", reason: missing.reason })
      expect(confinement.sandbox).toMatchObject({ mode: "auto", writable: [], status: missing })
      expect(noSandboxRefusal(confinement, "bash")).toBeUndefined()
    })
  )

  it.effect("confineCommands replaces only bash's execution: its description, timeouts and the other tools stay", () =>
    Effect.gen(function* () {
      const bash = makeBash({ timeoutMs: 1_000, maxTimeoutMs: 2_000, sandbox: { ...config, status: undefined } })
      const confinement = yield* rerunSandbox({ settings: config, status: available })
      const [confinedRead, confined] = confineCommands([read, bash], confinement)
      expect(confinedRead).toBe(read)
      expect(confined).not.toBe(bash)
      expect(confined).toMatchObject({ name: "bash", description: bash.description, input: bash.input })
      expect(confined!.timeoutMs!({ command: "x", timeoutMs: 5_000 })).toBe(2_000)
    })
  )
})

describe.skipIf(!hasBwrap)("a re-run's bash", () => {
  it.live("writes in the workspace only, where the config's bash (sandbox off, a writable path) writes outside", () =>
    Effect.gen(function* () {
      const outside = outsideDir("logbook-rerun-sandbox-")
      const settings: SandboxSettings = { mode: "off", network: true, writable: [outside], hidden: [] }
      const bash = makeBash({ timeoutMs: 10_000, maxTimeoutMs: 10_000, sandbox: settings })
      const command = `echo in > in.txt; echo out > ${outside}/out.txt; echo end`
      const asConfigured = yield* bash.execute({ command }, testContext(tempDir("logbook-rerun-ws-")))
      expect(fs.readFileSync(path.join(outside, "out.txt"), "utf8")).toBe("out\n")
      expect((asConfigured.metadata as BashMetadata).sandbox).toEqual({
        sandboxed: false,
        reason: 'tools.bash.sandbox is "off"'
      })
      fs.rmSync(path.join(outside, "out.txt"))

      const [confined] = confineCommands([bash], yield* rerunSandbox({ settings }))
      const ws = tempDir("logbook-rerun-ws-")
      const result = yield* confined!.execute({ command }, testContext(ws))
      expect(fs.readFileSync(path.join(ws, "in.txt"), "utf8")).toBe("in\n")
      expect(fs.existsSync(path.join(outside, "out.txt"))).toBe(false)
      expect(result.output).toContain("Read-only file system")
      expect((result.metadata as BashMetadata).sandbox).toEqual({ sandboxed: true, network: true })
    }).pipe(Effect.scoped)
  )
})
