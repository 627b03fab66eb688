import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { MAX_LISTED_FILES, MAX_SKILL_FILE_BYTES, makeSkillTool, type Skill } from "../../src/tools/skill.js"
import { scratchDir } from "../support/cli.js"
import { testContext } from "../support/toolContext.js"

/** A user's skill outside the workspace, with the files `files` (relative path -> content). */
const skillWith = (files: Record<string, string | Uint8Array>): Skill => {
  const dir = path.join(scratchDir(), "pdf")
  for (const [name, content] of Object.entries({ "SKILL.md": "---\ndescription: d\n---\nSTEPS", ...files })) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true })
    fs.writeFileSync(path.join(dir, name), content)
  }
  return { name: "pdf", description: "d", body: "STEPS", dir, file: path.join(dir, "SKILL.md"), scope: "user" }
}

const call = (skill: Skill, input: { name: string; file?: string }) =>
  makeSkillTool([skill]).execute(input, testContext(scratchDir()))

describe("the skill tool", () => {
  it.effect("lists at most MAX_LISTED_FILES files and says so", () =>
    Effect.gen(function* () {
      const files: Record<string, string> = {}
      for (let i = 0; i <= MAX_LISTED_FILES; i++) files[`ref/${String(i).padStart(3, "0")}.md`] = "x"
      const out = yield* call(skillWith(files), { name: "pdf" })
      expect(out.output).toContain("STEPS")
      expect(out.output).toContain("- ref/000.md")
      expect(out.output).not.toContain(`- ref/${MAX_LISTED_FILES}.md`)
      expect(out.output).toContain(`(only the first ${MAX_LISTED_FILES} are listed)`)
    })
  )

  it.effect(
    "a file longer than MAX_SKILL_FILE_BYTES is cut with a note; a binary file is refused; an unknown skill names the others",
    () =>
      Effect.gen(function* () {
        const skill = skillWith({
          "big.txt": "a".repeat(MAX_SKILL_FILE_BYTES + 10),
          "logo.png": new Uint8Array([137, 80, 0, 1])
        })
        const big = yield* call(skill, { name: "pdf", file: "big.txt" })
        expect(big.output.startsWith("a".repeat(MAX_SKILL_FILE_BYTES))).toBe(true)
        expect(big.output).toMatch(/\[logbook: the file was cut after its first 128 KB\]$/)
        const binary = yield* Effect.flip(call(skill, { name: "pdf", file: "logo.png" }))
        expect(binary.message).toMatch(/logo\.png of the skill pdf is a binary file/)
        const unknown = yield* Effect.flip(call(skill, { name: "docx" }))
        expect(unknown.message).toBe('There is no skill "docx". The skills are: pdf.')
        const absolute = yield* Effect.flip(call(skill, { name: "pdf", file: "/etc/passwd" }))
        expect(absolute.message).toMatch(/is not a file of the skill pdf/)
      })
  )
})
