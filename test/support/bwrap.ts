/**
 * Whether bubblewrap can make a sandbox on this machine (installed, and allowed to create
 * namespaces). The sandbox tests skip without it, with a notice — unless `LOGBOOK_REQUIRE_BWRAP=1`
 * (CI sets it when it installed bubblewrap), which makes a missing sandbox a failure.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const probe = spawnSync("bwrap", ["--ro-bind", "/", "/", "--dev", "/dev", "--unshare-net", "--", "true"], {
  stdio: "ignore",
  timeout: 10_000
})

export const hasBwrap = process.platform === "linux" && probe.status === 0

/** The ordinary user the sandbox tests run the binary as when they run as root. */
export const NOBODY = 65534

/**
 * Whether bubblewrap makes a sandbox for `nobody` here (run as root; an ordinary user's bwrap needs
 * user namespaces, which a container may forbid).
 */
export const hasBwrapForNobody =
  hasBwrap &&
  process.getuid?.() === 0 &&
  spawnSync("bwrap", ["--ro-bind", "/", "/", "--unshare-pid", "--proc", "/proc", "--", "true"], {
    stdio: "ignore",
    timeout: 10_000,
    uid: NOBODY,
    gid: NOBODY
  }).status === 0

if (!hasBwrap && process.env.LOGBOOK_REQUIRE_BWRAP === "1")
  throw new Error("LOGBOOK_REQUIRE_BWRAP=1 but bubblewrap cannot make a sandbox here: the sandbox tests cannot run")
if (!hasBwrap) console.warn("bubblewrap cannot make a sandbox here: the sandbox tests are skipped")

const outside: Array<string> = []
/** Removes the directories `outsideDir` made (call it in `afterAll`: a test worker may end without an exit event). */
export const removeOutsideDirs = (): void => {
  for (const dir of outside.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
}
process.once("exit", removeOutsideDirs)

/**
 * A new directory outside the system's temporary directory (under /var/tmp): the sandbox mounts a
 * private /tmp, so a path under /tmp would be missing in it rather than read-only or hidden.
 * Removed by `removeOutsideDirs`.
 */
export const outsideDir = (prefix = "logbook-outside-"): string => {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join("/var/tmp", prefix)))
  outside.push(dir)
  return dir
}

/**
 * A directory to use as PATH where bubblewrap is "not installed": a shell and the few tools the
 * tests' commands use, and no bwrap (the sandbox's probe looks for it on PATH).
 */
export const pathWithoutBwrap = (): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "logbook-path-"))
  outside.push(dir)
  for (const tool of ["bash", "sh", "echo", "cat"]) {
    const found = ["/bin", "/usr/bin"].map((d) => path.join(d, tool)).find((p) => fs.existsSync(p))
    if (found !== undefined) fs.symlinkSync(found, path.join(dir, tool))
  }
  return dir
}
