/**
 * The sandbox of the `bash` tool (docs/tools.md, "The sandbox"): on Linux, with bubblewrap
 * (`bwrap`) installed, each command runs in a mount namespace of its own where
 *
 * - the workspace (and `writable` paths) and a private `/tmp` are writable, the rest of the file
 *   system is read-only;
 * - the user's credentials (`defaultHiddenPaths`: `~/.ssh`, cloud and registry credentials …),
 *   logbook's own database and config, and `hidden` paths are hidden: a directory is an empty
 *   read-only directory, a file an empty read-only file — inside the workspace too;
 * - with `network: false`, a network namespace of its own (only its own loopback: no connection
 *   leaves it, not even to the host's 127.0.0.1);
 * - a PID namespace of its own and no capabilities, so nothing outside is reachable through
 *   `/proc/<pid>/root`, `/cwd` or a signal, not even as root.
 *
 * The process-group contract of `bash` holds: bwrap runs with `--new-session`, so the command's
 * processes share a session and group of their own, led by bwrap's init inside the namespace; that
 * group (its host id from `--info-fd`, `SANDBOX_INFO_FD`) is recorded and stopped. bwrap exits when
 * the shell does. The shell writes a line on fd 3 before it runs the command (`SANDBOX_READY_FD`),
 * so the group exists before anyone may signal it.
 *
 * Whether the sandbox can run is probed once per process (per bwrap binary and network setting):
 * not Linux, no `bwrap` on PATH, or a probe run that fails (no namespaces allowed) is
 * `Unavailable`, with the reason. This module builds the arguments; `bash.ts` spawns them.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as nodePath from "node:path"
import { Duration, Effect } from "effect"
import { onPath } from "./executables.js"
import { startTicks } from "./processGroup.js"

/** `auto`: sandboxed when bubblewrap works, else unconfined; `on`: sandboxed or not at all; `off`: unconfined. */
export type SandboxMode = "auto" | "on" | "off"

export interface SandboxSettings {
  readonly mode: SandboxMode
  /** whether commands may use the network (`false`: a network namespace of their own) */
  readonly network: boolean
  /** absolute paths writable besides the workspace and `/tmp` */
  readonly writable: ReadonlyArray<string>
  /** absolute paths hidden besides `defaultHiddenPaths` (e.g. the session's database and its -wal/-shm files) */
  readonly hidden: ReadonlyArray<string>
}

/** The library's default: sandboxed where possible, with network, nothing extra. */
export const defaultSandboxSettings: SandboxSettings = { mode: "auto", network: true, writable: [], hidden: [] }

/** Whether the sandbox can run here. */
export type SandboxStatus =
  | { readonly _tag: "Available"; readonly bwrap: string }
  | { readonly _tag: "Unavailable"; readonly reason: string }

/** The sandbox of a tool: its settings and, when already probed, whether it can run. */
export interface SandboxOptions extends SandboxSettings {
  readonly status?: SandboxStatus | undefined
}

/** How a command is run, decided from the settings and the probe. */
export type SandboxDecision =
  | { readonly _tag: "Sandboxed"; readonly bwrap: string }
  | { readonly _tag: "Unconfined"; readonly reason: string }
  | { readonly _tag: "Refused"; readonly message: string }

/** The fd on which the sandboxed shell writes a line before it runs the command: its group exists. */
export const SANDBOX_READY_FD = 3
/** The fd on which bwrap writes what it made (`--info-fd`): `child-pid` is the host pid of its init, the group's id. */
export const SANDBOX_INFO_FD = 4

// ---------------------------------------------------------------------------------------------
// what is hidden

/** The environment variables `defaultHiddenPaths` reads. */
export interface HiddenPathsEnv {
  readonly HOME?: string | undefined
  readonly XDG_CONFIG_HOME?: string | undefined
  readonly XDG_DATA_HOME?: string | undefined
  readonly XDG_RUNTIME_DIR?: string | undefined
  readonly SSH_AUTH_SOCK?: string | undefined
  readonly GNUPGHOME?: string | undefined
  readonly AWS_SHARED_CREDENTIALS_FILE?: string | undefined
  readonly AWS_CONFIG_FILE?: string | undefined
  readonly GOOGLE_APPLICATION_CREDENTIALS?: string | undefined
  readonly KUBECONFIG?: string | undefined
  readonly DOCKER_CONFIG?: string | undefined
  readonly [name: string]: string | undefined
}

/** Paths under the home directory that hold credentials (docs/tools.md lists them). */
export const HOME_SECRETS: ReadonlyArray<string> = [
  ".ssh",
  ".gnupg",
  ".aws",
  ".azure",
  ".config/gcloud",
  ".kube",
  ".docker/config.json",
  ".netrc",
  ".npmrc",
  ".yarnrc.yml",
  ".pypirc",
  ".git-credentials",
  ".config/gh",
  ".config/hub",
  ".config/glab-cli",
  ".cargo/credentials",
  ".cargo/credentials.toml",
  ".gem/credentials",
  ".terraform.d/credentials.tfrc.json",
  ".vault-token",
  ".password-store",
  ".local/share/keyrings",
  ".oci",
  ".config/doctl",
  ".bash_history",
  ".zsh_history",
  ".python_history",
  ".psql_history",
  ".mysql_history"
]

const absolute = (value: string | undefined): string | undefined =>
  value !== undefined && value !== "" && nodePath.isAbsolute(value) ? value : undefined

/**
 * What every sandbox hides: the credentials under the home directory (`HOME_SECRETS`), the files
 * the usual credential variables name, the agent socket, the user's runtime directory (D-Bus,
 * keyrings, gpg-agent), the Docker socket, and logbook's own config and data directories
 * (`$XDG_CONFIG_HOME/logbook`, `$XDG_DATA_HOME/logbook`, with their `~/.config` and
 * `~/.local/share` defaults). The session's database, wherever it is, is added by the caller.
 */
export const defaultHiddenPaths = (env: HiddenPathsEnv): ReadonlyArray<string> => {
  const home = absolute(env.HOME) ?? os.homedir()
  const configHome = absolute(env.XDG_CONFIG_HOME) ?? nodePath.join(home, ".config")
  const dataHome = absolute(env.XDG_DATA_HOME) ?? nodePath.join(home, ".local", "share")
  const named = [
    env.SSH_AUTH_SOCK,
    env.GNUPGHOME,
    env.AWS_SHARED_CREDENTIALS_FILE,
    env.AWS_CONFIG_FILE,
    env.GOOGLE_APPLICATION_CREDENTIALS,
    env.DOCKER_CONFIG,
    env.XDG_RUNTIME_DIR,
    ...(env.KUBECONFIG ?? "").split(":")
  ].flatMap((value) => {
    const path = absolute(value)
    return path === undefined ? [] : [path]
  })
  return [
    ...HOME_SECRETS.map((relative) => nodePath.join(home, relative)),
    ...named,
    nodePath.join(configHome, "logbook"),
    nodePath.join(dataHome, "logbook"),
    // the default places too, when XDG_* point elsewhere
    nodePath.join(home, ".config", "logbook"),
    nodePath.join(home, ".local", "share", "logbook"),
    "/run/docker.sock",
    "/var/run/docker.sock"
  ]
}

/** A database file and the files SQLite keeps beside it. */
export const databaseFiles = (file: string): ReadonlyArray<string> => [
  file,
  `${file}-wal`,
  `${file}-shm`,
  `${file}-journal`
]

// ---------------------------------------------------------------------------------------------
// the arguments

/** One command's sandbox, its paths resolved: what `bwrapArgs` turns into arguments. */
export interface SandboxPlan {
  /** the workspace (real path): bound writable */
  readonly workspace: string
  /** where the command starts (inside the workspace) */
  readonly cwd: string
  /** the host directory mounted at `/tmp` */
  readonly tmp: string
  /** an empty read-only file, bound over hidden files */
  readonly emptyFile: string
  /** further writable paths (real paths; missing ones are skipped by bwrap) */
  readonly writable: ReadonlyArray<string>
  /** paths under `/tmp` the command needs to see, bound read-only over the private `/tmp` */
  readonly readOnly?: ReadonlyArray<string> | undefined
  /** hidden paths that exist (real paths), with their kind */
  readonly hide: ReadonlyArray<{ readonly path: string; readonly directory: boolean }>
  readonly network: boolean
}

/**
 * The namespaces and the mounts every sandbox starts with (the commands' and the probe's): a PID
 * namespace of its own (its `/proc` shows only the sandbox's processes: no host process's root,
 * cwd or signals are reachable), no capabilities (root inside cannot unmount what hides a secret
 * or remount the root writable), and a session and group of its own, led by bwrap's init (pid 1
 * inside; its host pid is what `--info-fd` reports) — the group the tool records and stops. No
 * --die-with-parent: a command outlives a logbook killed with SIGKILL as it does unsandboxed, and
 * the next logbook start stops it (docs/tools.md, "The sandbox").
 */
const baseArgs = (network: boolean): ReadonlyArray<string> => [
  "--new-session",
  "--unshare-pid",
  "--cap-drop",
  "ALL",
  ...(network ? [] : ["--unshare-net"]),
  "--ro-bind",
  "/",
  "/",
  "--dev",
  "/dev",
  "--proc",
  "/proc"
]

/**
 * The bwrap options (everything before `--`) of a plan. Later mounts cover earlier ones, so the
 * order is: the root read-only, fresh `/dev` and `/proc`, the private `/tmp` (and what of the host's
 * `/tmp` the command must see, read-only), the writable paths, and last what is hidden — so a
 * secret inside the workspace stays hidden.
 */
export const bwrapArgs = (plan: SandboxPlan): ReadonlyArray<string> => [
  ...baseArgs(plan.network),
  "--bind",
  plan.tmp,
  "/tmp",
  ...(plan.readOnly ?? []).flatMap((path) => ["--ro-bind-try", path, path]),
  "--bind",
  plan.workspace,
  plan.workspace,
  ...plan.writable.flatMap((path) => ["--bind-try", path, path]),
  ...plan.hide.flatMap(({ path, directory }) =>
    directory ? ["--perms", "0755", "--tmpfs", path, "--remount-ro", path] : ["--ro-bind", plan.emptyFile, path]
  ),
  "--chdir",
  plan.cwd
]

const realPath = (path: string): string | undefined => {
  try {
    return fs.realpathSync(path)
  } catch {
    return undefined
  }
}

const isInside = (path: string, dir: string): boolean =>
  path === dir || path.startsWith(dir.endsWith("/") ? dir : `${dir}/`)

/**
 * The plan of one command: the hidden paths that exist now (a database's -wal file comes and
 * goes), as real paths. A hidden path that is the workspace or holds it is not hidden (the
 * workspace wins); one inside the workspace is.
 */
export const makePlan = (options: {
  readonly workspace: string
  readonly cwd: string
  readonly settings: SandboxSettings
  readonly env: HiddenPathsEnv
  readonly dirs: { readonly tmp: string; readonly emptyFile: string }
  /** host paths under `/tmp` to see read-only (real paths) */
  readonly readOnly?: ReadonlyArray<string> | undefined
}): SandboxPlan => {
  const workspace = realPath(options.workspace) ?? options.workspace
  const cwd = realPath(options.cwd) ?? options.cwd
  const writable = options.settings.writable.flatMap((path) => {
    const real = realPath(path)
    return real === undefined || real === "/" ? [] : [real]
  })
  const hide = new Map<string, boolean>()
  for (const wanted of [...defaultHiddenPaths(options.env), ...options.settings.hidden]) {
    const path = realPath(wanted)
    if (path === undefined || path === "/" || isInside(workspace, path) || hide.has(path)) continue
    // the private /tmp is mounted over /tmp: what lies there is gone already, unless bound again
    const bound = [workspace, ...writable, ...(options.readOnly ?? [])]
    if (isInside(path, "/tmp") && !bound.some((dir) => isInside(path, dir))) continue
    let directory: boolean
    try {
      directory = fs.statSync(path).isDirectory()
    } catch {
      continue
    }
    hide.set(path, directory)
  }
  return {
    workspace,
    cwd,
    tmp: options.dirs.tmp,
    emptyFile: options.dirs.emptyFile,
    writable,
    ...(options.readOnly === undefined ? {} : { readOnly: options.readOnly }),
    hide: [...hide].map(([path, directory]) => ({ path, directory })),
    network: options.settings.network
  }
}

// ---------------------------------------------------------------------------------------------
// the private /tmp

let privateDirs: { readonly root: string; readonly tmp: string; readonly emptyFile: string } | undefined

/** `logbook-sandbox-<pid>-<start ticks>-…`: whose the directory is, so a later process can tell it is left over. */
const SANDBOX_DIR = /^logbook-sandbox-(\d+)-(\d+)-/

/**
 * The host directories of this process's sandboxes, made on first use and removed when the process
 * exits: `tmp` (mode 0700) is every command's `/tmp`, so what one command leaves there the next
 * one finds, while the host's `/tmp` (its sockets, other programs' files) stays out of reach. The
 * name carries this process's pid and start time: what a killed process left is removed by the
 * next one (`removeStaleSandboxDirs`).
 */
export const sandboxDirs = (): { readonly tmp: string; readonly emptyFile: string } => {
  if (privateDirs !== undefined && fs.existsSync(privateDirs.tmp)) return privateDirs
  const owner = `${process.pid}-${startTicks(process.pid) ?? 0}`
  const root = fs.mkdtempSync(nodePath.join(os.tmpdir(), `logbook-sandbox-${owner}-`))
  const tmp = nodePath.join(root, "tmp")
  fs.mkdirSync(tmp, { mode: 0o700 })
  const emptyFile = nodePath.join(root, "empty")
  fs.writeFileSync(emptyFile, "", { mode: 0o444 })
  const created = { root, tmp, emptyFile }
  if (privateDirs === undefined) {
    process.once("exit", () => {
      if (privateDirs === undefined) return
      try {
        fs.rmSync(privateDirs.root, { recursive: true, force: true })
      } catch {
        // left for the system's tmp cleaner
      }
    })
  }
  privateDirs = created
  return created
}

/**
 * Removes the sandbox directories (`sandboxDirs`) in `dir` (default the temporary directory) that
 * this user's logbook processes left when they died without their exit handler (SIGKILL): the
 * process the name gives is gone, or another one has its pid (another start time). Call it after
 * the commands those processes left were stopped. Returns the paths removed.
 */
export const removeStaleSandboxDirs = (dir: string = os.tmpdir()): ReadonlyArray<string> => {
  let names: Array<string>
  try {
    names = fs.readdirSync(dir)
  } catch {
    return []
  }
  const removed: Array<string> = []
  for (const name of names) {
    const owner = SANDBOX_DIR.exec(name)
    if (owner === null) continue
    const pid = Number(owner[1])
    if (pid === process.pid || startTicks(pid) === Number(owner[2])) continue
    const path = nodePath.join(dir, name)
    try {
      const stat = fs.lstatSync(path)
      if (!stat.isDirectory() || stat.uid !== process.getuid?.()) continue
      fs.rmSync(path, { recursive: true, force: true })
      removed.push(path)
    } catch {
      // gone meanwhile, or not ours to remove: left for the system's tmp cleaner
    }
  }
  return removed
}

// ---------------------------------------------------------------------------------------------
// finding and probing bubblewrap

/** How long the probe run may take. */
const PROBE_TIMEOUT_MS = 10_000

/** The last line bwrap wrote on stderr, e.g. `bwrap: No permissions to create new namespace …`. */
const lastLine = (text: string): string =>
  text
    .trim()
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "")
    .at(-1) ?? ""

/** Runs `true` in a sandbox of the same kind as the commands'; `undefined` when it works, else why not. */
const probeRun = (bwrap: string, network: boolean, env: NodeJS.ProcessEnv): Effect.Effect<string | undefined> =>
  Effect.async<string | undefined>((resume) => {
    const args = [...baseArgs(network), "--tmpfs", "/tmp", "--", "true"]
    let stderr = ""
    const child = spawn(bwrap, args, { stdio: ["ignore", "ignore", "pipe"], env })
    child.stderr?.on("data", (chunk: Buffer) => {
      if (stderr.length < 4096) stderr += chunk.toString("utf8")
    })
    child.once("error", (error) => resume(Effect.succeed(`${bwrap} could not be started: ${error.message}`)))
    child.once("close", (code, signal) =>
      resume(
        Effect.succeed(
          code === 0
            ? undefined
            : `${bwrap} failed to create the sandbox (${signal ?? `exit code ${code}`})${lastLine(stderr) === "" ? "" : `: ${lastLine(stderr)}`}`
        )
      )
    )
    return Effect.sync(() => void child.kill("SIGKILL"))
  }).pipe(
    Effect.timeout(Duration.millis(PROBE_TIMEOUT_MS)),
    Effect.orElseSucceed(() => `${bwrap} did not finish a probe run in ${PROBE_TIMEOUT_MS / 1000} s`)
  )

/** `bwrap path|network` -> the probe's answer, once per process */
const probed = new Map<string, SandboxStatus>()

/**
 * Whether commands can be sandboxed here: Linux, `bwrap` on the PATH of `env` (default this
 * process's), and a probe run with the same namespaces that succeeds. Probed once per process for
 * each bwrap binary and network setting.
 */
export const probeSandbox = (options: {
  readonly network: boolean
  readonly env?: NodeJS.ProcessEnv | undefined
}): Effect.Effect<SandboxStatus> =>
  Effect.gen(function* () {
    if (process.platform !== "linux") {
      return { _tag: "Unavailable", reason: `the sandbox needs Linux (this is ${process.platform})` } as const
    }
    const env = options.env ?? process.env
    const bwrap = onPath("bwrap", env.PATH)
    if (bwrap === undefined) {
      return { _tag: "Unavailable", reason: "bubblewrap (bwrap) is not installed (not found on PATH)" } as const
    }
    const key = `${bwrap}|${options.network}`
    const known = probed.get(key)
    if (known !== undefined) return known
    const failure = yield* probeRun(bwrap, options.network, env)
    const status: SandboxStatus =
      failure === undefined ? { _tag: "Available", bwrap } : { _tag: "Unavailable", reason: failure }
    probed.set(key, status)
    return status
  })

/** How commands run with these settings and this status. */
export const decide = (settings: SandboxSettings, status: SandboxStatus | undefined): SandboxDecision => {
  if (settings.mode === "off") return { _tag: "Unconfined", reason: 'tools.bash.sandbox is "off"' }
  if (status?._tag === "Available") return { _tag: "Sandboxed", bwrap: status.bwrap }
  const reason = status?.reason ?? "the sandbox was not probed"
  if (settings.mode === "on") {
    return {
      _tag: "Refused",
      message:
        `Commands are not run: tools.bash.sandbox is "on" and there is no sandbox here (${reason}). ` +
        'Install bubblewrap, or set tools.bash.sandbox to "auto" or "off" in your config.'
    }
  }
  return { _tag: "Unconfined", reason }
}

/**
 * The notice for the user when commands will not run sandboxed (`undefined` when they will, or
 * when the user turned the sandbox off).
 */
export const sandboxNotice = (settings: SandboxSettings, status: SandboxStatus): string | undefined => {
  const decision = decide(settings, status)
  switch (decision._tag) {
    case "Sandboxed":
      return undefined
    case "Unconfined":
      return settings.mode === "off"
        ? undefined
        : `commands run without a sandbox: ${decision.reason}; they can read and change everything you can ` +
            '(install bubblewrap to confine them, or set tools.bash.sandbox to "on" to refuse to run them unconfined)'
    case "Refused":
      return `no command will run: tools.bash.sandbox is "on" and there is no sandbox here (${status._tag === "Unavailable" ? status.reason : ""})`
  }
}

// ---------------------------------------------------------------------------------------------
// for the model

/** The lines of the tool's description that tell the model what the sandbox allows. */
export const sandboxDescription = (settings: SandboxSettings): ReadonlyArray<string> => [
  `- Commands run in a sandbox: only the working directory${settings.writable.length > 0 ? ` (and ${settings.writable.join(", ")})` : ""} and /tmp are writable (/tmp is private to this session and kept between calls); everything else is read-only. The user's credentials (~/.ssh, cloud, registry and git credentials) and logbook's own files are hidden: they look empty. Tools that write a cache in the home directory fail there: point them at /tmp (e.g. \`npm_config_cache=/tmp/.npm\`, \`XDG_CACHE_HOME=/tmp/.cache\`).`,
  settings.network
    ? "- The network is available."
    : "- There is no network: no connection leaves the sandbox, not even to localhost services outside it (downloads, package installs and git fetch/push fail).",
  "- Do not try to get around the sandbox. When a task needs what it blocks, say so and ask the user."
]

const SANDBOX_FAILURE =
  /read-only file system|permission denied|operation not permitted|network is unreachable|could not resolve host|temporary failure in name resolution|name or service not known|connection refused|EROFS|EACCES|ENETUNREACH|EAI_AGAIN/i

/**
 * A hint for the model when a sandboxed command failed in a way the sandbox may have caused, else
 * `undefined`.
 */
export const sandboxHint = (settings: SandboxSettings, exitCode: number, output: string): string | undefined => {
  if (exitCode === 0 || !SANDBOX_FAILURE.test(output)) return undefined
  return (
    "(This command ran in logbook's sandbox: outside the working directory and /tmp the file system is " +
    "read-only, credentials are hidden" +
    (settings.network ? "" : ", and there is no network") +
    ". If that is what failed, do not work around it: use the workspace or /tmp, or tell the user what needs " +
    "to be allowed.)"
  )
}
