/**
 * Workspace confinement (DESIGN §6): every path a file tool touches is resolved against the
 * workspace root with real paths, so `..`, absolute paths, symlinks that point outside and a
 * symlinked parent directory cannot reach outside the root unnoticed.
 *
 * `resolveInWorkspace(root, input)` walks the path as the kernel does — a `..` after a symlink goes
 * to the parent of the link's target, not back where the path was written — following every symlink,
 * also a dangling one and one in a parent directory of a path that does not exist yet (a file about
 * to be written), and says whether the real path is inside the root. A path is inside when its real path is the root's
 * real path or below it (compared by whole path segments: `/w/ws-evil` is not inside `/w/ws`).
 * What a tool does with an outside path is its caller's decision: the built-in file tools use it
 * only when the `external_directory` permission allowed the call (`ToolContext.outsideAllowed`).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as nodePath from "node:path"
import { Effect, Schema } from "effect"
import { errnoCode } from "./FsError.js"

/** A path that cannot be resolved at all (a NUL byte, a symlink loop, an unreadable directory). */
export class WorkspacePathError extends Schema.TaggedError<WorkspacePathError>()("WorkspacePathError", {
  path: Schema.String,
  message: Schema.String
}) {}

export interface WorkspacePath {
  /** the path as given */
  readonly input: string
  /** the absolute path as written, resolved lexically (`..` and `.` removed, `~` expanded); for display */
  readonly absolute: string
  /**
   * the real path: every symlink followed; for a path that does not exist, the real path of its
   * deepest existing ancestor joined with the rest
   */
  readonly real: string
  /** whether `real` is the root or below it */
  readonly inside: boolean
  /** `real` relative to the root (`.` for the root); undefined when outside */
  readonly relative: string | undefined
  /** whether something exists at the path (a dangling symlink counts as not existing) */
  readonly exists: boolean
}

/** Symlinks followed at most, as the kernel's own limit (ELOOP). */
const MAX_LINKS = 40

class Loop extends Error {}

const lstatOrUndefined = (p: string): fs.Stats | undefined => {
  try {
    return fs.lstatSync(p)
  } catch (error) {
    const c = errnoCode(error)
    if (c === "ENOENT" || c === "ENOTDIR") return undefined
    throw error
  }
}

const components = (p: string): Array<string> => p.split(nodePath.sep).filter((c) => c !== "" && c !== ".")

/**
 * Walks `parts` from the real directory `from` as the kernel does: `..` goes to the parent of where
 * the walk really is (after the symlinks before it), a symlink is replaced by its target (relative
 * targets from the link's real directory), also a dangling one. Past the first component that does
 * not exist, the rest cannot contain symlinks and is joined as written.
 *
 * Synchronous: one `lstat` per component (and a `readlink` per link) of a local path costs a few
 * microseconds each, where the same calls through the thread pool cost a round trip of the event
 * loop each — most of a `read` call's time. What a tool then opens is opened
 * asynchronously and checked on the descriptor (confine.ts), so nothing here needs to wait.
 */
const walk = (from: string, parts: ReadonlyArray<string>, links: { n: number }): string => {
  let current = from
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!
    if (part === "..") {
      current = nodePath.dirname(current)
      continue
    }
    const next = nodePath.join(current, part)
    const stat = lstatOrUndefined(next)
    if (stat === undefined) return nodePath.resolve(next, ...parts.slice(i + 1))
    if (stat.isSymbolicLink()) {
      links.n += 1
      if (links.n > MAX_LINKS) throw new Loop()
      const target = fs.readlinkSync(next)
      current = nodePath.isAbsolute(target)
        ? walk(nodePath.parse(target).root, components(target), links)
        : walk(current, components(target), links)
      continue
    }
    current = next
  }
  return current
}

/** The real path of the absolute path `p`: every symlink followed, also where `p` does not (fully) exist. */
const realOf = (p: string, links: { n: number }): { readonly real: string; readonly exists: boolean } => {
  const real = walk(nodePath.parse(p).root, components(p), links)
  return { real, exists: fs.existsSync(real) }
}

/** `child` is `parent` or below it, by whole path segments. */
export const isWithin = (parent: string, child: string): boolean => {
  if (child === parent) return true
  const relative = nodePath.relative(parent, child)
  return (
    relative !== "" && !relative.startsWith(`..${nodePath.sep}`) && relative !== ".." && !nodePath.isAbsolute(relative)
  )
}

/** The lexical absolute path of `input` against `root`; `~` and `~/…` are the user's home. */
export const absoluteIn = (root: string, input: string): string => nodePath.resolve(unnormalized(root, input))

/** `input` made absolute without removing `..` (a `..` after a symlink leaves the link's real directory). */
const unnormalized = (root: string, input: string): string => {
  if (input === "~") return os.homedir()
  if (input.startsWith("~/")) return `${os.homedir()}${nodePath.sep}${input.slice(2)}`
  return nodePath.isAbsolute(input) ? input : `${nodePath.resolve(root)}${nodePath.sep}${input}`
}

/** Resolves `input` (relative to `root`, or absolute) and says whether it stays inside `root`. */
export const resolveInWorkspace = (root: string, input: string): Effect.Effect<WorkspacePath, WorkspacePathError> =>
  Effect.try({
    try: () => {
      if (input.includes("\0")) throw new WorkspacePathError({ path: input, message: "the path contains a NUL byte" })
      const absolute = absoluteIn(root, input)
      const rootReal = realOf(nodePath.resolve(root), { n: 0 }).real
      const { real, exists } = realOf(unnormalized(root, input), { n: 0 })
      const inside = isWithin(rootReal, real)
      const relative = inside ? nodePath.relative(rootReal, real) || "." : undefined
      return { input, absolute, real, inside, relative, exists } satisfies WorkspacePath
    },
    catch: (error) => {
      if (error instanceof WorkspacePathError) return error
      if (error instanceof Loop) {
        return new WorkspacePathError({ path: input, message: `too many levels of symbolic links in ${input}` })
      }
      const c = errnoCode(error)
      return new WorkspacePathError({
        path: input,
        message: `cannot resolve ${input}: ${c !== undefined ? `${c} ` : ""}${error instanceof Error ? error.message : String(error)}`
      })
    }
  })

/** The sentence a file tool gives for a path outside the workspace that it was not allowed to use. */
export const outsideMessage = (path: Pick<WorkspacePath, "input" | "absolute" | "real">, root: string): string => {
  const via = path.real !== path.absolute ? ` (it leads to ${path.real})` : ""
  return (
    `${path.input} is outside the workspace ${root}${via}. Tools may only touch files inside the workspace ` +
    "(access outside it needs the external_directory permission, which this call was not granted); use a path inside it."
  )
}
