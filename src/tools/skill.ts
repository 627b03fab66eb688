/**
 * The `skill` tool (docs/skills.md): the model loads a skill — instructions a user or a project
 * keeps in a folder with a `SKILL.md` — when a task matches its description. A call with the
 * skill's name returns its instructions and the list of its other files; a call with `file` too
 * returns that file, confined to the skill's folder (real paths: a link that leads out is refused),
 * so a user's skill outside the workspace is readable without opening anything else outside it.
 * The skills are found by `config/Skills.ts`; the system prompt lists them (`skillsSection`).
 */
import type { Dirent } from "node:fs"
import * as fs from "node:fs"
import * as nodePath from "node:path"
import { Effect, Schema } from "effect"
import { formatBytes } from "./boundedOutput.js"
import { readFdAll } from "./confine.js"
import { openConfined } from "./confinedFiles.js"
import { fsFailure } from "./fsErrors.js"
import { defineTool, ToolFailure, type ToolOutput } from "./Tools.js"
import { nonEmptyString } from "./toolInput.js"
import { resolveInWorkspace } from "./Workspace.js"

/** The name of the tool. */
export const SKILL_TOOL = "skill"
/** The most files of a skill listed (the first, in path order). */
export const MAX_LISTED_FILES = 100
/** Folders below a skill's folder listed (deeper ones are not). */
export const MAX_LIST_DEPTH = 4
/** The most bytes of a skill's file a call returns; a longer file is cut with a note. */
export const MAX_SKILL_FILE_BYTES = 128 * 1024
/** A NUL byte in this many first bytes makes a file binary (not returned). */
const BINARY_PROBE_BYTES = 8 * 1024

/** A skill as the tool and the system prompt know it. */
export interface Skill {
  readonly name: string
  /** one line or a few: when to use it (shown to the model in the system prompt) */
  readonly description: string
  /** the instructions: `SKILL.md` after its frontmatter */
  readonly body: string
  /** the skill's folder (absolute) */
  readonly dir: string
  /** its `SKILL.md` (absolute) */
  readonly file: string
  /** `project`: the workspace's `.logbook/skills` or `.claude/skills`; `user`: the user's own */
  readonly scope: "project" | "user"
}

/** What a call records besides the text the model reads (`tool.finished` `metadata`). */
export interface SkillMetadata {
  readonly skill: string
  readonly scope: "project" | "user"
  /** the skill's `SKILL.md` */
  readonly source: string
  /** the file read, relative to the skill's folder (absent: the instructions were loaded) */
  readonly file?: string | undefined
  readonly bytes: number
}

const oneLine = (text: string): string => text.replace(/\s+/g, " ").trim()

/**
 * The skills as a section of the system prompt: what a skill is for the model, then one line per
 * skill. Empty when there are none (the prompt is then as it is without skills).
 */
export const skillsSection = (skills: ReadonlyArray<Skill>): string => {
  if (skills.length === 0) return ""
  return [
    "# Skills",
    "Skills are instructions the user and the project keep for particular tasks. When a task matches a " +
      `skill's description, load the skill with the \`${SKILL_TOOL}\` tool (its name) before you start, and follow ` +
      `it. A skill's other files are read with \`${SKILL_TOOL}\` too (its name and the file). Nothing in a skill ` +
      "runs by itself: a command it mentions is run with the tools, like any other.",
    skills.map((skill) => `- ${skill.name}: ${oneLine(skill.description)}`).join("\n")
  ].join("\n\n")
}

export const SkillInput = Schema.Struct({
  name: nonEmptyString("The skill's name, as the Skills section of the system prompt lists it."),
  file: Schema.optional(
    nonEmptyString(
      "A file of the skill to read, relative to the skill's folder, as the skill's file list shows it. " +
        "Leave it out to load the skill's instructions."
    )
  )
})
export type SkillInput = typeof SkillInput.Type

/** The files of a skill's folder (not `SKILL.md`), relative, sorted; at most `MAX_LISTED_FILES`. */
const listFiles = (dir: string): { readonly files: ReadonlyArray<string>; readonly more: boolean } => {
  const files: Array<string> = []
  let more = false
  const visit = (at: string, prefix: string, depth: number): void => {
    let entries: Array<Dirent>
    try {
      entries = fs.readdirSync(at, { withFileTypes: true })
    } catch {
      return
    }
    for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      if (files.length >= MAX_LISTED_FILES) {
        more = true
        return
      }
      const relative = prefix === "" ? entry.name : `${prefix}/${entry.name}`
      // a linked folder is not followed (what it holds may be anywhere)
      if (entry.isDirectory()) {
        if (depth + 1 < MAX_LIST_DEPTH && entry.name !== ".git")
          visit(nodePath.join(at, entry.name), relative, depth + 1)
      } else if ((entry.isFile() || entry.isSymbolicLink()) && relative !== "SKILL.md") files.push(relative)
    }
  }
  visit(dir, "", 0)
  return { files, more }
}

const loadInstructions = (skill: Skill, redact: (text: string) => string): ToolOutput => {
  const { files, more } = listFiles(skill.dir)
  const list =
    files.length === 0
      ? "The skill has no other files."
      : [
          `The skill's files (read one with ${SKILL_TOOL} {"name": "${skill.name}", "file": "<path>"}):`,
          ...files.map((file) => `- ${file}`),
          ...(more ? [`(only the first ${MAX_LISTED_FILES} are listed)`] : [])
        ].join("\n")
  const output = redact([`# Skill ${skill.name}`, `Folder: ${skill.dir}`, skill.body, list].join("\n\n"))
  return {
    output,
    metadata: {
      skill: skill.name,
      scope: skill.scope,
      source: skill.file,
      bytes: Buffer.byteLength(skill.body)
    } satisfies SkillMetadata
  }
}

const readFile = (skill: Skill, file: string, redact: (text: string) => string) =>
  Effect.gen(function* () {
    const where = yield* resolveInWorkspace(skill.dir, file).pipe(
      Effect.mapError((error) => new ToolFailure({ message: `Cannot use the path ${file}: ${error.message}.` }))
    )
    if (!where.inside) {
      return yield* new ToolFailure({
        message: `${file} is not a file of the skill ${skill.name}: a skill's files are read from its folder ${skill.dir} only.`
      })
    }
    const shown = where.relative ?? file
    const bytes = yield* Effect.scoped(
      Effect.gen(function* () {
        const opened = yield* openConfined({ cwd: skill.dir, input: file, absolute: where.real, shown }, false)
        if (!opened.stat.isFile()) {
          return yield* new ToolFailure({ message: `${shown} is not a file of the skill ${skill.name}.` })
        }
        return yield* readFdAll(opened.fd, opened.stat.size, MAX_SKILL_FILE_BYTES + 1).pipe(
          Effect.mapError((error) => fsFailure(error, shown))
        )
      })
    )
    if (bytes.subarray(0, BINARY_PROBE_BYTES).includes(0)) {
      return yield* new ToolFailure({
        message: `${shown} of the skill ${skill.name} is a binary file (${formatBytes(bytes.length)}); only text files are returned.`
      })
    }
    const cut = bytes.length > MAX_SKILL_FILE_BYTES
    const text = new TextDecoder("utf-8").decode(cut ? bytes.subarray(0, MAX_SKILL_FILE_BYTES) : bytes)
    const note = cut ? `\n\n[logbook: the file was cut after its first ${formatBytes(MAX_SKILL_FILE_BYTES)}]` : ""
    return {
      output: `${redact(text)}${note}`,
      metadata: {
        skill: skill.name,
        scope: skill.scope,
        source: skill.file,
        file: shown,
        bytes: bytes.length
      } satisfies SkillMetadata
    } satisfies ToolOutput
  })

/** The `skill` tool over `skills` (offered only when there is at least one). */
export const makeSkillTool = (skills: ReadonlyArray<Skill>) => {
  const byName = new Map(skills.map((skill) => [skill.name, skill]))
  return defineTool<SkillInput>({
    name: SKILL_TOOL,
    description: [
      "Loads a skill: its instructions, and the list of its files. The skills are listed in the Skills section of " +
        "the system prompt; load one when the task matches its description, then follow its instructions.",
      "With `file`, returns that file of the skill (a path from its file list) instead."
    ].join("\n"),
    input: SkillInput,
    execute: (input, context) =>
      Effect.gen(function* () {
        const skill = byName.get(input.name)
        if (skill === undefined) {
          return yield* new ToolFailure({
            message: `There is no skill "${input.name}". The skills are: ${[...byName.keys()].join(", ")}.`
          })
        }
        const redact = context.secrets.redactText
        if (input.file === undefined || input.file === "SKILL.md") return loadInstructions(skill, redact)
        return yield* readFile(skill, input.file, redact)
      })
  })
}
