import * as fs from "node:fs"
import * as path from "node:path"
import * as Path from "@effect/platform/Path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import {
  loadSkills,
  MAX_DESCRIPTION_CHARS,
  MAX_SKILL_BYTES,
  MAX_SKILLS,
  skillDirs,
  skillOf
} from "../../src/config/Skills.js"
import { skillsSection } from "../../src/tools/skill.js"
import { scratchDir } from "../support/cli.js"

const write = (file: string, text: string) => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, text)
}

const skillText = (description: string, body = "Do it.") => `---\ndescription: ${description}\n---\n${body}\n`

describe("skill folders", () => {
  it("name (else the folder's), description and instructions are required to be usable", () => {
    const made = skillOf("deploy", "/s/deploy", "/s/deploy/SKILL.md", "user", skillText("Deploy it"))
    expect(made).toMatchObject({ name: "deploy", description: "Deploy it", body: "Do it.", scope: "user" })
    expect(skillOf("d", "/s/d", "/s/d/SKILL.md", "user", "---\nname: other\ndescription: x\n---\nBody")).toMatchObject({
      name: "other"
    })
    expect(skillOf("d", "/s/d", "/s/d/SKILL.md", "user", "Only a body.")).toMatch(/no description/)
    expect(skillOf("d", "/s/d", "/s/d/SKILL.md", "user", "---\ndescription: x\n---\n")).toMatch(/no instructions/)
    expect(skillOf("d", "/s/d", "/s/d/SKILL.md", "user", "---\ndescription: [x\n---\nBody")).toMatch(/not YAML/)
    expect(skillOf("d", "/s/d", "/s/d/SKILL.md", "user", "---\nname: a b\ndescription: x\n---\nBody")).toMatch(
      /cannot be a skill's name/
    )
    expect(skillOf("d", "/s/d", "/s/d/SKILL.md", "user", skillText("x".repeat(MAX_DESCRIPTION_CHARS + 1)))).toMatch(
      /description is 1025 characters long; at most 1024/
    )
  })

  it.effect("the first folder of a name wins (a project's over the user's); bad ones are skipped and said", () =>
    Effect.gen(function* () {
      const cwd = scratchDir()
      const home = scratchDir()
      const configDir = path.join(scratchDir(), "logbook")
      write(path.join(cwd, ".logbook", "skills", "review", "SKILL.md"), skillText("The project's review"))
      write(path.join(cwd, ".claude", "skills", "lint", "SKILL.md"), skillText("Lint"))
      write(path.join(configDir, "skills", "review", "SKILL.md"), skillText("The user's review"))
      write(path.join(configDir, "skills", "big", "SKILL.md"), skillText("Big", "x".repeat(MAX_SKILL_BYTES)))
      write(path.join(home, ".claude", "skills", "nodesc", "SKILL.md"), "Body only.\n")
      // a folder without SKILL.md and a stray file are not skills, and not problems
      fs.mkdirSync(path.join(home, ".claude", "skills", "empty"), { recursive: true })
      write(path.join(home, ".claude", "skills", "README.md"), "notes")
      const loaded = yield* loadSkills(skillDirs(yield* Path.Path, { cwd, home, configDir }))
      expect(loaded.skills.map((s) => [s.name, s.scope, s.description])).toEqual([
        ["lint", "project", "Lint"],
        ["review", "project", "The project's review"]
      ])
      expect(loaded.problems).toEqual([
        expect.stringMatching(/big\/SKILL\.md: larger than 64 KiB$/),
        expect.stringMatching(/nodesc\/SKILL\.md: it has no description/)
      ])
    }).pipe(Effect.provide(NodeContext.layer))
  )

  it.effect("at most MAX_SKILLS folders are read, and the rest is said", () =>
    Effect.gen(function* () {
      const dir = scratchDir()
      for (let i = 0; i <= MAX_SKILLS; i++)
        write(path.join(dir, `s${String(i).padStart(3, "0")}`, "SKILL.md"), skillText(`Skill ${i}`))
      const loaded = yield* loadSkills([{ dir, scope: "user" }])
      expect(loaded.skills).toHaveLength(MAX_SKILLS)
      expect(loaded.problems).toEqual([`more than ${MAX_SKILLS} skills: the rest were not read`])
    }).pipe(Effect.provide(NodeContext.layer))
  )

  it("the prompt's section lists each skill on one line; no skills, no section", () => {
    expect(skillsSection([])).toBe("")
    const section = skillsSection([
      {
        name: "pdf",
        description: "Read PDFs:\n  text and tables",
        body: "b",
        dir: "/d",
        file: "/d/SKILL.md",
        scope: "user"
      }
    ])
    expect(section.startsWith("# Skills\n\n")).toBe(true)
    expect(section.endsWith("\n\n- pdf: Read PDFs: text and tables")).toBe(true)
  })
})
