/**
 * The EXAMPLES block of `sessions`, `sessions list`, `sessions show`, `sessions delete` and `stats`
 * (`src/cli/examples.ts`), through the built binary: at the end of the command's help, the same
 * through `logbook help …`, within 80 columns, and every example works as written.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "@effect/vitest"
import { exampleLines, examples } from "../../src/cli/examples.js"
import { runCli, sampleSession, scratchDir, seed } from "../support/cli.js"

const commands = ["sessions", "sessions list", "sessions show", "sessions delete", "stats"]

/** The EXAMPLES block of a help text: the lines after the header, up to the first blank one. */
const examplesBlock = (help: string): Array<string> => {
  const lines = help.split("\n")
  const start = lines.indexOf("EXAMPLES")
  if (start < 0) return []
  const rest = lines.slice(start + 2)
  return rest.slice(
    0,
    rest.findIndex((line) => line.trim() === "")
  )
}

describe("EXAMPLES in the help of the sessions commands and stats", () => {
  it.each(commands)("%s --help ends with its examples, within 80 columns, also through logbook help", async (name) => {
    const words = name.split(" ")
    const help = await runCli([...words, "--help"])
    expect(help.code).toBe(0)
    const block = examplesBlock(help.stdout)
    expect(block).toEqual(exampleLines(examples[name]!))
    for (const line of block) {
      expect(line.length).toBeLessThanOrEqual(80)
      expect(line).toMatch(/^ {2}logbook \S.*\S {3,}\S/)
    }
    // the block comes after the options
    expect(help.stdout.indexOf("EXAMPLES")).toBeGreaterThan(help.stdout.indexOf("OPTIONS"))
    expect(help.stdout).not.toContain("\u001b[")
    const viaHelp = await runCli(["help", ...words])
    expect(viaHelp.stdout).toBe(help.stdout)
  })

  it("the COMMANDS lists keep each command's one-line description", async () => {
    const sessions = await runCli(["sessions", "--help"])
    expect(sessions.stdout).toMatch(/- list .*\s{2}List the sessions in the database/)
    expect(sessions.stdout).toMatch(/- delete .*\s{2}Delete a session: it is hidden from sessions list/)
    const root = await runCli(["--help"])
    expect(root.stdout).toMatch(/- sessions show .*\s{2}Show one session as a conversation/)
    // a command without examples has no block
    expect(examplesBlock(root.stdout)).toEqual([])
  })

  describe("every example works as written", () => {
    const id = "0195a0b0-0000-7000-8000-000000000001"
    let dir: string
    beforeAll(async () => {
      dir = scratchDir()
      await seed(path.join(dir, "backup.db"), [{ id, events: sampleSession() }])
    })

    // (the other commands' examples run in test/integration/examples.test.ts)
    it.each(commands.flatMap((name) => examples[name]!.map(([command]) => [name, command])))(
      "%s: %s",
      async (_name, command) => {
        // each on a fresh copy (an example may delete), named as the examples name it
        const db = path.join(dir, `run-${Math.random().toString(36).slice(2)}.db`)
        fs.copyFileSync(path.join(dir, "backup.db"), db)
        const args = command.split(" ").slice(1)
        const result = await runCli(args.includes("--db") ? args : [...args, "--db", db], { cwd: dir })
        expect(result.stderr).toBe("")
        expect(result.code).toBe(0)
        expect(result.stdout.length).toBeGreaterThan(0)
      }
    )
  })
})
