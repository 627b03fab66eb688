/**
 * logbook's own variables are not in the agent's command environment (issue 12 §4): a command
 * does not learn where the log is (`LOGBOOK_DB`) nor runs a nested logbook against it.
 */
import { afterEach, describe, expect, it } from "vitest"
import { runCli } from "../support/cli.js"
import { Reply } from "../support/scriptedServer.js"
import { bashReply, latestSession, makeJanitor, makeWorkspace, ofType, readLog } from "./support.js"

const janitor = makeJanitor()
afterEach(() => janitor.release())

describe("the command environment", () => {
  it("holds none of logbook's LOGBOOK_* variables, but the group token it sets itself, and the rest", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    server.enqueue(bashReply("c1", "env | grep -E '^(LOGBOOK_|PROJECT_VAR)' | cut -d= -f1 | sort"), Reply.text("ok"))
    const env = { LOGBOOK_DB: ws.db, LOGBOOK_MAX_STEPS: "7", PROJECT_VAR: "kept" }
    const run = await runCli(["run", "--cwd", ws.dir, "what is set?"], { env })
    expect(run.code, run.stderr).toBe(0)
    // the run used LOGBOOK_DB itself
    const log = await readLog(ws.db, await latestSession(ws.db, ws.dir))
    const output = ofType(log, "tool.finished")[0]!.payload.output
    expect(output.split("\n").filter((line) => /^[A-Z_]+$/.test(line))).toEqual([
      "LOGBOOK_PROCESS_TOKEN",
      "PROJECT_VAR"
    ])
  })
})
