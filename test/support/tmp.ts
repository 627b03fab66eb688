import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

/** A new temporary directory for one test; removed when the process exits. */
export const tempDir = (prefix = "logbook-test-"): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  process.once("exit", () => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** A path for a new database file in a fresh temporary directory. */
export const tempDb = (): string => path.join(tempDir(), "logbook.db")
