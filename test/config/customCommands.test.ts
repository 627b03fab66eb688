import * as fs from "node:fs"
import * as path from "node:path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import {
  commandOf,
  expandCommand,
  loadCommands,
  MAX_COMMAND_BYTES,
  matchCommand,
  parseCommandText
} from "../../src/config/CustomCommands.js"
import { scratchDir } from "../support/cli.js"

const write = (file: string, text: string) => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, text)
}

const command = (body: string) => {
  const made = commandOf("c", "/x/c.md", "user", body)
  if (typeof made === "string") throw new Error(made)
  return made
}

describe("custom command files", () => {
  it("frontmatter is optional; a file that has it must close it and be a YAML mapping", () => {
    expect(parseCommandText("Just a prompt.\n")).toEqual({ fields: {}, body: "Just a prompt." })
    expect(parseCommandText("---\ndescription: Hi\n---\nBody\r\n")).toEqual({
      fields: { description: "Hi" },
      body: "Body"
    })
    expect(parseCommandText("---\ndescription: Hi\nBody\n")).toMatch(/no closing `---`/)
    expect(parseCommandText("---\n- a\n- b\n---\nBody\n")).toMatch(/not a mapping/)
    expect(parseCommandText("---\na: [x\n---\nBody\n")).toMatch(/not YAML/)
    expect(commandOf("c", "/x/c.md", "user", "---\ndescription: only\n---\n")).toMatch(/no prompt/)
    expect(commandOf("c", "/x/c.md", "user", "---\nmodel: gpt\n---\nBody")).toMatch(/not provider\/model/)
  })

  it("$ARGUMENTS and $1…$9 are filled in once (what the arguments hold is not read again); without them the arguments go at the end", () => {
    expect(expandCommand(command("Fix $1 then $2. All: $ARGUMENTS"), "  a.ts   b.ts ")).toBe(
      "Fix a.ts then b.ts. All: a.ts   b.ts"
    )
    expect(expandCommand(command("Look at $ARGUMENTS"), "$1 and $ARGUMENTS")).toBe("Look at $1 and $ARGUMENTS")
    expect(expandCommand(command("Missing: [$3]"), "one")).toBe("Missing: []")
    expect(expandCommand(command("Summarise."), "the log")).toBe("Summarise.\n\nARGUMENTS: the log")
    expect(expandCommand(command("Summarise."), "")).toBe("Summarise.")
  })

  it("a project's command cannot choose the model; a user's can", () => {
    const text = "---\nmodel: local/other\n---\nBody"
    expect((commandOf("c", "/p/c.md", "project", text) as { model?: string }).model).toBeUndefined()
    expect((commandOf("c", "/u/c.md", "user", text) as { model?: string }).model).toBe("local/other")
  })

  it.effect(
    "loads the folders in order (the first of a name wins), folders as prefixes, skipping what cannot be used",
    () =>
      Effect.gen(function* () {
        const root = scratchDir()
        const dirs = [
          { dir: path.join(root, "p", ".logbook", "commands"), scope: "project" as const },
          { dir: path.join(root, "p", ".claude", "commands"), scope: "project" as const },
          { dir: path.join(root, "u", "commands"), scope: "user" as const }
        ]
        write(path.join(dirs[0]!.dir, "review.md"), "Project review.")
        write(path.join(dirs[1]!.dir, "review.md"), "Claude review.")
        write(path.join(dirs[1]!.dir, "ui", "lint.md"), "Lint the UI.")
        write(path.join(dirs[2]!.dir, "review.md"), "User review.")
        write(path.join(dirs[2]!.dir, "explain.md"), "---\ndescription: Explain it\n---\nExplain.")
        write(path.join(dirs[2]!.dir, "help.md"), "Not help.")
        write(path.join(dirs[2]!.dir, "big.md"), "x".repeat(MAX_COMMAND_BYTES + 1))
        write(path.join(dirs[2]!.dir, "bad name.md"), "Spaces.")
        write(path.join(dirs[2]!.dir, "notes.txt"), "Not a command.")
        const loaded = yield* loadCommands([...dirs, { dir: path.join(root, "missing"), scope: "user" }], ["help"])
        expect(loaded.commands.map((c) => [c.name, c.body, c.scope])).toEqual([
          ["explain", "Explain.", "user"],
          ["review", "Project review.", "project"],
          ["ui:lint", "Lint the UI.", "project"]
        ])
        expect(loaded.commands.find((c) => c.name === "explain")?.description).toBe("Explain it")
        expect(loaded.problems).toEqual([
          expect.stringMatching(/bad name\.md: "bad name" cannot be a command's name/),
          expect.stringMatching(/big\.md: larger than 64 KiB/),
          expect.stringMatching(/help\.md: \/help is a built-in command/)
        ])
        expect(matchCommand(loaded.commands, "/ui:lint  now please")).toMatchObject({
          command: { name: "ui:lint" },
          args: "now please"
        })
        expect(matchCommand(loaded.commands, "/etc/hosts")).toBeUndefined()
        expect(matchCommand(loaded.commands, "review")).toBeUndefined()
      }).pipe(Effect.provide(NodeContext.layer))
  )
})
