/**
 * Custom commands (DESIGN §13, docs/commands.md): Markdown files, in the shape other agents share,
 * that become `/name args` at the interactive prompt and in `logbook run`. A command is a prompt:
 * it runs nothing itself, so a project's needs no approval, but only the user's own files may choose
 * the model. Files are bounded in size, number and depth; one that cannot be used is skipped and said.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Effect, Option } from "effect"
import { parse as parseYaml } from "yaml"
import { nearest } from "../domain/nearest.js"

export const MAX_COMMAND_BYTES = 64 * 1024
export const MAX_COMMANDS = 500
export const MAX_DEPTH = 4

export type CommandScope = "project" | "user"

export interface CustomCommand {
  /** without the `/`: `review`, `frontend:review` */
  readonly name: string
  readonly description: string | undefined
  readonly argumentHint: string | undefined
  /** `provider/model`, from a user's file only */
  readonly model: string | undefined
  readonly body: string
  readonly file: string
  readonly scope: CommandScope
}

export interface CommandDir {
  readonly dir: string
  readonly scope: CommandScope
}

export interface LoadedCommands {
  readonly commands: ReadonlyArray<CustomCommand>
  /** files skipped, and why: `<file>: <reason>` */
  readonly problems: ReadonlyArray<string>
}

/** The folders commands are read from, in the order a name is looked for. */
export const commandDirs = (
  path: Path.Path,
  where: { readonly cwd: string; readonly home: string; readonly configDir: string }
): ReadonlyArray<CommandDir> => [
  { dir: path.join(where.cwd, ".logbook", "commands"), scope: "project" },
  { dir: path.join(where.cwd, ".claude", "commands"), scope: "project" },
  { dir: path.join(where.configDir, "commands"), scope: "user" },
  { dir: path.join(where.home, ".claude", "commands"), scope: "user" }
]

const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]*$/

/** The frontmatter and the body of a command file; a string naming what is wrong otherwise. */
export const parseCommandText = (
  text: string
): { readonly fields: Record<string, unknown>; readonly body: string } | string => {
  const normalized = text.replace(/^\uFEFF/, "").replace(/\r\n/g, "\n")
  if (!normalized.startsWith("---\n")) return { fields: {}, body: normalized.trim() }
  const end = normalized.indexOf("\n---", 4)
  if (end < 0) return "its frontmatter (from the first line `---`) has no closing `---`"
  const after = normalized.slice(end + 4)
  if (after !== "" && !after.startsWith("\n")) return "its frontmatter's closing `---` is not on a line of its own"
  let fields: unknown
  try {
    fields = parseYaml(normalized.slice(4, end)) ?? {}
  } catch (error) {
    return `its frontmatter is not YAML (${(error as Error).message.split("\n")[0]})`
  }
  if (typeof fields !== "object" || fields === null || Array.isArray(fields)) return "its frontmatter is not a mapping"
  return { fields: fields as Record<string, unknown>, body: after.trim() }
}

const text = (value: unknown): string | undefined =>
  typeof value === "string" && value.trim() !== "" ? value.trim() : undefined

/** A command from its file's text; a string naming what is wrong otherwise. */
export const commandOf = (name: string, file: string, scope: CommandScope, content: string): CustomCommand | string => {
  const parsed = parseCommandText(content)
  if (typeof parsed === "string") return parsed
  if (parsed.body === "") return "it has no prompt (the body after the frontmatter is empty)"
  const model = text(parsed.fields.model)
  if (model !== undefined && !/^[^/\s]+\/\S+$/.test(model)) return `its model "${model}" is not provider/model`
  return {
    name,
    description: text(parsed.fields.description),
    argumentHint: text(parsed.fields["argument-hint"]),
    model: scope === "user" ? model : undefined,
    body: parsed.body,
    file,
    scope
  }
}

/** The prompt a command sends for `args` (what followed its name). */
export const expandCommand = (command: CustomCommand, args: string): string => {
  const trimmed = args.trim()
  const words = trimmed === "" ? [] : trimmed.split(/\s+/)
  const placeholder = /\$ARGUMENTS\b|\$[1-9]\b/.test(command.body)
  // one pass: what the arguments hold is never read as a placeholder
  const body = command.body.replace(/\$ARGUMENTS\b|\$([1-9])\b/g, (_, n: string | undefined) =>
    n === undefined ? trimmed : (words[Number(n) - 1] ?? "")
  )
  return placeholder || trimmed === "" ? body : `${body}\n\nARGUMENTS: ${trimmed}`
}

/**
 * The word of `/word …` when no command has that name but one of `commands` or `others` (the
 * built-in names) is at most two edits away: the word and that name. A path (`/etc/hosts`) is none.
 */
export const nearMissCommand = (
  commands: ReadonlyArray<CustomCommand>,
  line: string,
  others: ReadonlyArray<string> = []
): { readonly word: string; readonly name: string } | undefined => {
  const word = /^\/([^\s/]+)(?:\s|$)/.exec(line.trim())?.[1]
  if (word === undefined) return undefined
  const near = nearest(word, [...others, ...commands.map((c) => c.name)], 2)
  return near === undefined ? undefined : { word, name: near.name }
}

/** `/name rest…` when `line` starts with a command's name: the command and the rest. */
export const matchCommand = (
  commands: ReadonlyArray<CustomCommand>,
  line: string
): { readonly command: CustomCommand; readonly args: string } | undefined => {
  const match = /^\/(\S+)(?:\s+([\s\S]*))?$/.exec(line.trim())
  if (match === null) return undefined
  const command = commands.find((c) => c.name === match[1])
  return command === undefined ? undefined : { command, args: match[2] ?? "" }
}

/**
 * Reads the commands of `dirs` (missing folders are none), the first of a name winning; names in
 * `reserved` (the built-in commands) are skipped and said.
 */
export const loadCommands = Effect.fn("CustomCommands.load")(function* (
  dirs: ReadonlyArray<CommandDir>,
  reserved: ReadonlyArray<string> = []
) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const commands = new Map<string, CustomCommand>()
  const problems: Array<string> = []
  let files = 0

  const readDir = (dir: string): Effect.Effect<ReadonlyArray<string>> =>
    fs.readDirectory(dir).pipe(
      Effect.map((names) => [...names].sort()),
      Effect.orElseSucceed(() => [])
    )

  const visit = (root: CommandDir, dir: string, prefix: ReadonlyArray<string>): Effect.Effect<void> =>
    Effect.gen(function* () {
      for (const entry of yield* readDir(dir)) {
        if (files >= MAX_COMMANDS) return
        const file = path.join(dir, entry)
        const info = yield* fs.stat(file).pipe(Effect.option)
        if (Option.isNone(info)) continue
        if (info.value.type === "Directory") {
          if (prefix.length + 1 >= MAX_DEPTH) problems.push(`${file}: deeper than ${MAX_DEPTH} folders, not read`)
          else if (SEGMENT.test(entry)) yield* visit(root, file, [...prefix, entry])
          continue
        }
        if (info.value.type !== "File" || !entry.endsWith(".md")) continue
        files++
        const base = entry.slice(0, -3)
        if (!SEGMENT.test(base)) {
          problems.push(`${file}: "${base}" cannot be a command's name (letters, digits, . _ -)`)
          continue
        }
        const name = [...prefix, base].join(":")
        if (reserved.includes(name)) {
          problems.push(`${file}: /${name} is a built-in command`)
          continue
        }
        if (commands.has(name)) continue
        if (Number(info.value.size) > MAX_COMMAND_BYTES) {
          problems.push(`${file}: larger than ${MAX_COMMAND_BYTES / 1024} KiB`)
          continue
        }
        const content = yield* fs.readFileString(file).pipe(Effect.option)
        if (Option.isNone(content)) {
          problems.push(`${file}: cannot be read`)
          continue
        }
        const command = commandOf(name, file, root.scope, content.value)
        if (typeof command === "string") problems.push(`${file}: ${command}`)
        else commands.set(name, command)
      }
    })

  for (const root of dirs) yield* visit(root, root.dir, [])
  if (files >= MAX_COMMANDS) problems.push(`more than ${MAX_COMMANDS} command files: the rest were not read`)
  return {
    commands: [...commands.values()].sort((a, b) => a.name.localeCompare(b.name)),
    problems
  } satisfies LoadedCommands
})
