/**
 * Which plugin files load (docs/plugins.md, "Trust"): the user's own — the files of
 * `<user config dir>/plugins/` and the `plugins` of their config — always; a project's — the files
 * of `.logbook/plugins/` and the `plugins` of its `logbook.json` — only once the user approved that
 * exact file (its SHA-256) for that workspace (`approved-plugins.json`, Approvals.ts).
 */
import { createRequire } from "node:module"
import * as NodePath from "node:path"
import * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Option } from "effect"
import { PLUGIN_EXTENSIONS } from "../plugins/Plugin.js"
import { approve, contentHash, workspaceApprovals } from "./Approvals.js"
import type { LoadedConfig } from "./ConfigSources.js"

/** The approvals of plugins: `approved-plugins.json`. */
const PLUGIN_APPROVALS = "plugins"

/** A project's plugins directory, in the workspace. */
export const PROJECT_PLUGINS_DIR = NodePath.join(".logbook", "plugins")

/** The most plugin files read from one directory, and the largest file read. */
const MAX_FILES_PER_DIR = 64
const MAX_PLUGIN_BYTES = 4 * 1024 * 1024

/** One plugin file, where it came from, and whether it may load. */
export interface PluginEntry {
  /** the real absolute path of the file */
  readonly file: string
  /** what an approval is kept under: the path relative to the workspace (a project's), else absolute */
  readonly key: string
  /** `directory /w/.logbook/plugins`, `file /home/u/.config/logbook/config.json` … */
  readonly source: string
  readonly scope: "user" | "project"
  /** the SHA-256 of the file's content */
  readonly hash: string
  /** a user's plugin; a project's that the user approved as it is now */
  readonly approved: boolean
}

/** The user's plugins directory: beside the user's config file. */
export const userPluginsDir = (loaded: Pick<LoadedConfig, "files">): string | undefined => {
  const global = loaded.files.find((file) => file.kind === "global")
  return global === undefined ? undefined : NodePath.join(NodePath.dirname(global.path), "plugins")
}

const isPluginFile = (name: string): boolean =>
  !name.startsWith(".") &&
  !name.endsWith(".d.ts") &&
  !name.endsWith(".d.mts") &&
  PLUGIN_EXTENSIONS.some((extension) => name.endsWith(extension))

/**
 * A configured plugin's file: a path (absolute, or relative to `base`), or a package resolved from
 * the workspace (its `main` or `exports`), then from `base`.
 */
const resolveEntry = (entry: string, base: string, workspace: string): string | undefined => {
  if (NodePath.isAbsolute(entry)) return entry
  if (entry.startsWith("./") || entry.startsWith("../") || entry.startsWith("~")) {
    return entry.startsWith("~") ? NodePath.join(process.env.HOME ?? "", entry.slice(1)) : NodePath.resolve(base, entry)
  }
  for (const from of [workspace, base]) {
    try {
      return createRequire(NodePath.join(from, "package.json")).resolve(entry)
    } catch {
      // not there: the next place
    }
  }
  return undefined
}

/**
 * Every plugin file: the user's (their directory's, then their config's), then the project's (its
 * directory's, then its `logbook.json`'s); a file listed twice loads once. `notices`: what the user
 * should hear (an entry that cannot be found or read).
 */
export const pluginEntries = Effect.fn("PluginTrust.pluginEntries")(function* (
  loaded: Pick<LoadedConfig, "files" | "config" | "projectPlugins" | "originOf">,
  workspace: string
) {
  const fs = yield* FileSystem.FileSystem
  const notices: Array<string> = []
  const entries: Array<PluginEntry> = []
  const approvals = yield* workspaceApprovals(loaded, PLUGIN_APPROVALS, workspace)
  const seen = new Set<string>()

  const add = (file: string, source: string, scope: "user" | "project") =>
    Effect.gen(function* () {
      const real = yield* fs.realPath(file).pipe(Effect.option)
      if (Option.isNone(real)) {
        notices.push(`plugin ${file} of ${source} was not found; it is not loaded`)
        return
      }
      if (seen.has(real.value)) return
      seen.add(real.value)
      const info = yield* fs.stat(real.value).pipe(Effect.option)
      if (Option.isNone(info) || info.value.type !== "File") {
        notices.push(`plugin ${file} of ${source} is not a file; it is not loaded`)
        return
      }
      if (Number(info.value.size) > MAX_PLUGIN_BYTES) {
        notices.push(`plugin ${file} of ${source} is larger than ${MAX_PLUGIN_BYTES} bytes; it is not loaded`)
        return
      }
      const content = yield* fs.readFile(real.value).pipe(Effect.option)
      if (Option.isNone(content)) {
        notices.push(`plugin ${file} of ${source} could not be read; it is not loaded`)
        return
      }
      const hash = contentHash(content.value)
      const relative = NodePath.relative(workspace, real.value)
      const key =
        scope === "project" && !relative.startsWith("..") && !NodePath.isAbsolute(relative) ? relative : real.value
      entries.push({
        file: real.value,
        key,
        source,
        scope,
        hash,
        approved: scope === "user" || approvals[key] === hash
      })
    })

  const fromDirectory = (dir: string, scope: "user" | "project") =>
    Effect.gen(function* () {
      const names = yield* fs.readDirectory(dir).pipe(Effect.orElseSucceed(() => [] as Array<string>))
      const files = names.filter(isPluginFile).sort()
      if (files.length > MAX_FILES_PER_DIR) {
        notices.push(`${dir} has ${files.length} plugin files: only the first ${MAX_FILES_PER_DIR} are read`)
      }
      for (const name of files.slice(0, MAX_FILES_PER_DIR))
        yield* add(NodePath.join(dir, name), `directory ${dir}`, scope)
    })

  const fromConfig = (list: ReadonlyArray<string>, configFile: string | undefined, scope: "user" | "project") =>
    Effect.gen(function* () {
      const base = configFile === undefined ? workspace : NodePath.dirname(configFile)
      const source = configFile === undefined ? "the config" : `file ${configFile}`
      for (const entry of list) {
        const file = resolveEntry(entry, base, workspace)
        if (file === undefined) {
          notices.push(
            `plugin "${entry}" of ${source} is neither a file nor a package found from ${workspace}; it is not loaded`
          )
          continue
        }
        yield* add(file, source, scope)
      }
    })

  const userDir = userPluginsDir(loaded)
  if (userDir !== undefined) yield* fromDirectory(userDir, "user")
  const userOrigin = loaded.originOf(["plugins"])
  yield* fromConfig(loaded.config.plugins, userOrigin._tag === "File" ? userOrigin.path : undefined, "user")
  yield* fromDirectory(NodePath.join(workspace, PROJECT_PLUGINS_DIR), "project")
  const projectFile = loaded.files.find((file) => file.kind === "project")?.path
  yield* fromConfig(loaded.projectPlugins, projectFile, "project")
  return { entries, notices }
})

/** Records the user's approval of a project's plugin file as it is now (`entry.hash`) for `workspace`. */
export const approvePlugin = (
  loaded: Pick<LoadedConfig, "files">,
  workspace: string,
  entry: Pick<PluginEntry, "key" | "hash">
): Effect.Effect<string, Error, FileSystem.FileSystem> =>
  approve(loaded, PLUGIN_APPROVALS, workspace, entry.key, entry.hash)
