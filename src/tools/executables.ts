/**
 * Finding executables: a regular file this process may run, and a name looked up on `PATH` as a
 * shell would.
 */
import * as fs from "node:fs"
import * as nodePath from "node:path"

/** Whether `file` is a regular file this process may execute. */
export const isExecutableFile = (file: string): boolean => {
  try {
    if (!fs.statSync(file).isFile()) return false
    fs.accessSync(file, fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** `name` looked up on `path` (a `PATH` value; with the Windows extensions there), as a shell would find it. */
export const onPath = (name: string, path: string | undefined = process.env.PATH): string | undefined => {
  const extensions = process.platform === "win32" ? ["", ".exe", ".cmd", ".bat"] : [""]
  for (const dir of (path ?? "").split(nodePath.delimiter)) {
    if (dir === "") continue
    for (const ext of extensions) {
      const candidate = nodePath.join(dir, name + ext)
      if (isExecutableFile(candidate)) return candidate
    }
  }
  return undefined
}
