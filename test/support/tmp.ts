import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const created: Array<string> = []
process.once("exit", () => {
  for (const dir of created) fs.rmSync(dir, { recursive: true, force: true })
})

/** A new temporary directory for one test; removed when the process exits. */
export const tempDir = (prefix = "logbook-test-"): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  created.push(dir)
  return dir
}

/** A path for a new database file in a fresh temporary directory. */
export const tempDb = (): string => path.join(tempDir(), "logbook.db")
