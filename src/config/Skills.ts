/**
 * Skills (DESIGN §13, docs/skills.md): folders with a `SKILL.md` (frontmatter `name`, `description`;
 * the body is the instructions) that the model sees listed in the system prompt and loads through
 * the `skill` tool (`tools/skill.ts`). Found in the same four places as custom commands, the first
 * of a name winning; bounded in number and size; a folder that cannot be used is skipped and said.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Effect, Option } from "effect"
import type { Skill } from "../tools/skill.js"
import { parseCommandText } from "./CustomCommands.js"

/** The most skill folders read (all places together). */
export const MAX_SKILLS = 100
/** The largest `SKILL.md` read. */
export const MAX_SKILL_BYTES = 64 * 1024
/** The longest description (characters): it goes into every request's system prompt. */
export const MAX_DESCRIPTION_CHARS = 1024
/** The longest name. */
export const MAX_NAME_CHARS = 64

export interface SkillDir {
  readonly dir: string
  readonly scope: Skill["scope"]
}

export interface LoadedSkills {
  readonly skills: ReadonlyArray<Skill>
  /** folders skipped, and why: `<file>: <reason>` */
  readonly problems: ReadonlyArray<string>
}

export const noSkills: LoadedSkills = { skills: [], problems: [] }

/** The folders skills are read from, in the order a name is looked for. */
export const skillDirs = (
  path: Path.Path,
  where: { readonly cwd: string; readonly home: string; readonly configDir: string | undefined }
): ReadonlyArray<SkillDir> => [
  { dir: path.join(where.cwd, ".logbook", "skills"), scope: "project" },
  { dir: path.join(where.cwd, ".claude", "skills"), scope: "project" },
  ...(where.configDir === undefined ? [] : [{ dir: path.join(where.configDir, "skills"), scope: "user" as const }]),
  { dir: path.join(where.home, ".claude", "skills"), scope: "user" }
]

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/

/** A skill from its `SKILL.md` text (`folder`: its folder's name); a string naming what is wrong otherwise. */
export const skillOf = (
  folder: string,
  dir: string,
  file: string,
  scope: Skill["scope"],
  content: string
): Skill | string => {
  const parsed = parseCommandText(content)
  if (typeof parsed === "string") return parsed
  const { fields } = parsed
  const rawName = fields.name
  if (rawName !== undefined && typeof rawName !== "string") return "its name is not a string"
  const name = typeof rawName === "string" && rawName.trim() !== "" ? rawName.trim() : folder
  if (!NAME.test(name) || name.length > MAX_NAME_CHARS)
    return `"${name}" cannot be a skill's name (letters, digits, . _ -, at most ${MAX_NAME_CHARS})`
  const description = typeof fields.description === "string" ? fields.description.trim() : ""
  if (description === "")
    return "it has no description (the frontmatter's `description`, which tells the model when to use it)"
  if (description.length > MAX_DESCRIPTION_CHARS)
    return `its description is ${description.length} characters long; at most ${MAX_DESCRIPTION_CHARS}`
  if (parsed.body === "") return "it has no instructions (the body after the frontmatter is empty)"
  return { name, description, body: parsed.body, dir, file, scope }
}

/** Reads the skills of `dirs` (missing folders are none), the first of a name winning. Never fails. */
export const loadSkills = Effect.fn("Skills.load")(function* (dirs: ReadonlyArray<SkillDir>) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const skills = new Map<string, Skill>()
  const problems: Array<string> = []
  let folders = 0
  let over = false

  for (const root of dirs) {
    const entries = yield* fs.readDirectory(root.dir).pipe(
      Effect.map((names) => [...names].sort()),
      Effect.orElseSucceed(() => [])
    )
    for (const entry of entries) {
      const dir = path.join(root.dir, entry)
      const file = path.join(dir, "SKILL.md")
      const info = yield* fs.stat(file).pipe(Effect.option)
      if (Option.isNone(info) || info.value.type !== "File") continue
      if (folders >= MAX_SKILLS) {
        over = true
        break
      }
      folders++
      if (Number(info.value.size) > MAX_SKILL_BYTES) {
        problems.push(`${file}: larger than ${MAX_SKILL_BYTES / 1024} KiB`)
        continue
      }
      const content = yield* fs.readFileString(file).pipe(Effect.option)
      if (Option.isNone(content)) {
        problems.push(`${file}: cannot be read`)
        continue
      }
      const skill = skillOf(entry, dir, file, root.scope, content.value)
      if (typeof skill === "string") problems.push(`${file}: ${skill}`)
      else if (!skills.has(skill.name)) skills.set(skill.name, skill)
    }
  }
  if (over) problems.push(`more than ${MAX_SKILLS} skills: the rest were not read`)
  return {
    skills: [...skills.values()].sort((a, b) => a.name.localeCompare(b.name)),
    problems
  } satisfies LoadedSkills
})

/**
 * The skills of a workspace as a session reads them: the project's folders under `cwd`, the user's
 * beside the global config file (`loaded`'s; none when no global file was looked for) and under
 * `~/.claude`.
 */
export const workspaceSkills = Effect.fn("Skills.workspace")(function* (
  loaded: { readonly files: ReadonlyArray<{ readonly kind: string; readonly path: string }> },
  cwd: string,
  home: string
) {
  const path = yield* Path.Path
  const global = loaded.files.find((file) => file.kind === "global")
  const configDir = global === undefined ? undefined : path.dirname(global.path)
  return yield* loadSkills(skillDirs(path, { cwd, home, configDir }))
})
