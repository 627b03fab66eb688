/**
 * The built binary's entry points that need no database: --version, --help, usage errors.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { root, runCli } from "../support/cli.js"

const pkg = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")) as { version: string }

describe("logbook (built binary)", () => {
  it("dist/bin.js is an executable ESM file with a node shebang", () => {
    const file = path.join(root, "dist", "bin.js")
    const text = fs.readFileSync(file, "utf8")
    expect(text.startsWith("#!/usr/bin/env node\n")).toBe(true)
    expect(fs.statSync(file).mode & 0o755).toBe(0o755)
    // better-sqlite3 is a native module: it must stay a runtime import, not be bundled; a file of the
    // bundle loads it by name on first use (dist/bundle.json; what loads it: test/cli/startup.test.ts)
    const bundle = JSON.parse(fs.readFileSync(path.join(root, "dist", "bundle.json"), "utf8")) as {
      readonly files: Readonly<Record<string, { readonly lazyExternals: ReadonlyArray<string> }>>
    }
    expect(Object.values(bundle.files).some((f) => f.lazyExternals.includes("better-sqlite3"))).toBe(true)
  })

  it("--version prints the package.json version and exits 0", async () => {
    const result = await runCli(["--version"])
    expect(result.code).toBe(0)
    expect(result.stdout.trim()).toBe(pkg.version)
    expect(result.stderr).toBe("")
  })

  it.each([
    [[], ["sessions", "events", "--version"]],
    [["sessions"], ["list", "show", "delete"]],
    [
      ["sessions", "list"],
      ["--db", "--format", "table | json", "--all", "--limit", "LOGBOOK_DB"]
    ],
    [
      ["sessions", "show"],
      ["--db", "<session>", "--at", "--format", "--full", "prefix"]
    ],
    [["events"], ["--db", "<session>", "--type", "--from", "--to", "--format", "text | json", "--follow", "130"]]
  ])("%j --help describes the command and its flags", async (command, expected) => {
    const result = await runCli([...command, "--help"])
    expect(result.code).toBe(0)
    for (const text of expected) expect(result.stdout).toContain(text)
    // stdout is a pipe here: no ANSI styles
    expect(result.stdout).not.toContain("\u001b[")
  })

  it.each([[["--db", "x.db", "--help"]], [["--db=x.db", "--version"]]])(
    "a leading --db with no command after it is ignored: %j exits 0",
    async (args) => {
      const result = await runCli(args)
      expect(result.code).toBe(0)
      expect(result.stdout.length).toBeGreaterThan(0)
    }
  )

  it("without a command prints a short overview and exits 0", async () => {
    const result = await runCli([])
    expect(result.code).toBe(0)
    expect(result.stdout).toContain("logbook sessions list")
    expect(result.stdout).toContain("logbook events <id>")
  })

  it.each([
    [["sessions", "list", "--format", "xml"], 'logbook: --format: expected table or json, got "xml"'],
    [["events"], "session"],
    [["nosuchcommand"], "sessions"],
    [["events", "x", "--from", "abc"], 'logbook: --from: expected a whole number, got "abc"']
  ])("bad arguments %j exit 2 with a message that names the problem", async (args, mention) => {
    const result = await runCli(args)
    expect(result.code).toBe(2)
    expect(result.stdout + result.stderr).toContain(mention)
    expect(result.stderr).not.toMatch(/\n\s+at /) // no stack trace
  })
})
