/**
 * The Node.js versions logbook runs on (package.json's `engines`; docs/platform.md says why): an older
 * one is refused before anything loads, since its native SQLite driver would crash it.
 */

export const MINIMUM_NODE = { major: 22, minor: 12 } as const

/** Why `version` (as `process.versions.node`) cannot run logbook, or undefined when it can. */
export const unsupportedNode = (version: string): string | undefined => {
  const [major = 0, minor = 0] = version.split(".").map((part) => Number.parseInt(part, 10))
  if (major > MINIMUM_NODE.major || (major === MINIMUM_NODE.major && minor >= MINIMUM_NODE.minor)) return undefined
  return `logbook: Node.js ${MINIMUM_NODE.major}.${MINIMUM_NODE.minor} or later is required (22, 24 and 26 are supported); this is Node.js ${version}`
}
