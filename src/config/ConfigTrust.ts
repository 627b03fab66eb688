/**
 * What a project's `logbook.json` may not decide, because it comes with the repository: the
 * variables the tools' commands may see (`toolSecrets`), a sandbox only as strict as the user's or
 * stricter (`sandboxSettings`), and where a provider may send the user's key or take the agent
 * (`checkDestination`).
 */

import * as NodePath from "node:path"
import { Effect } from "effect"
import type { SandboxMode, SandboxSettings } from "../tools/Sandbox.js"
import type { ResolvedModel } from "./Config.js"
import { maskUrl } from "./ConfigDisplay.js"
import type { LoadedConfig } from "./ConfigSources.js"
import { ConfigError } from "./ConfigSources.js"

export const toolSecrets = (
  loaded: LoadedConfig
): {
  readonly hide: ReadonlyArray<string>
  readonly pass: ReadonlyArray<string>
  readonly ignoredPass: ReadonlyArray<string>
} => {
  // only the user's providers: a key variable the project file names is never read (a keyed provider
  // it defines or changes is refused), and letting it choose would let it hide (and mask the value
  // of) any variable, PATH or HOME included
  const hide = new Set<string>()
  for (const provider of Object.values(loaded.trustedProviders)) {
    if (provider.apiKeyEnv !== undefined) hide.add(provider.apiKeyEnv)
  }
  // the project file may pass fewer (tighten), never more
  const asked = loaded.config.tools.bash.passEnv
  return {
    hide: [...hide],
    pass: asked.filter((name) => loaded.trustedPassEnv.includes(name)),
    ignoredPass: asked.filter((name) => !loaded.trustedPassEnv.includes(name))
  }
}

export interface TrustedSandbox {
  readonly sandbox: SandboxMode
  readonly network: boolean
  readonly writablePaths: ReadonlyArray<string>
  readonly hiddenPaths: ReadonlyArray<string>
}

const strictness: Readonly<Record<SandboxMode, number>> = { off: 0, auto: 1, on: 2 }

const expandHome = (path: string, home: string): string =>
  path === "~" ? home : path.startsWith("~/") ? NodePath.join(home, path.slice(2)) : path

export const sandboxSettings = (
  loaded: LoadedConfig,
  home: string
): { readonly settings: SandboxSettings; readonly ignored: ReadonlyArray<string> } => {
  const asked = loaded.config.tools.bash
  const trusted = loaded.trustedSandbox
  const ignored: Array<string> = []
  const mode = strictness[asked.sandbox] >= strictness[trusted.sandbox] ? asked.sandbox : trusted.sandbox
  if (mode !== asked.sandbox) ignored.push(`tools.bash.sandbox "${asked.sandbox}"`)
  const network = asked.network && trusted.network
  if (network !== asked.network) ignored.push("tools.bash.network true")
  const writable = asked.writablePaths.filter((path) => trusted.writablePaths.includes(path))
  const extra = asked.writablePaths.filter((path) => !trusted.writablePaths.includes(path))
  if (extra.length > 0) ignored.push(`tools.bash.writablePaths ${extra.join(", ")}`)
  const hidden = [...new Set([...trusted.hiddenPaths, ...asked.hiddenPaths])]
  return {
    settings: {
      mode,
      network,
      writable: writable.map((path) => expandHome(path, home)),
      hidden: hidden.map((path) => expandHome(path, home))
    },
    ignored
  }
}

export const isLoopbackUrl = (url: string): boolean => {
  if (!URL.canParse(url)) return false
  const host = new URL(url).hostname
  return host === "localhost" || host === "[::1]" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host)
}

export const checkDestination = (loaded: LoadedConfig, resolved: ResolvedModel): Effect.Effect<void, ConfigError> => {
  const used = resolved.provider
  const trusted = Object.hasOwn(loaded.trustedProviders, resolved.providerId)
    ? loaded.trustedProviders[resolved.providerId]
    : undefined
  const sameEndpoint = trusted !== undefined && trusted.type === used.type && trusted.baseURL === used.baseURL
  if (sameEndpoint && trusted.apiKeyEnv === used.apiKeyEnv) return Effect.void
  const keyless = used.apiKeyEnv === undefined
  if (keyless && (sameEndpoint || (used.baseURL !== undefined && isLoopbackUrl(used.baseURL)))) return Effect.void
  const project = loaded.files.find((file) => file.kind === "project")?.path ?? "logbook.json"
  const global = loaded.files.find((file) => file.kind === "global")?.path ?? "your own config"
  const what = keyless
    ? `points provider "${resolved.providerId}" at ${used.baseURL === undefined ? `the ${used.type} API` : maskUrl(used.baseURL)}, ` +
      "which is not this machine; a project's logbook.json comes with the repository, and whoever serves the " +
      "model drives the agent, so it may only point a provider at a local server (localhost, 127.0.0.1, [::1])."
    : `sets where provider "${resolved.providerId}" sends its API key (its type, baseURL or apiKeyEnv); ` +
      "a project's logbook.json comes with the repository, so it may not send your key anywhere."
  return Effect.fail(
    new ConfigError({
      source: `file ${project}`,
      path: `provider.${resolved.providerId}`,
      message:
        `file ${project} ${what} Define the provider in ${global} instead` +
        (keyless ? "." : " (or give it no apiKeyEnv if the server needs no key).")
    })
  )
}
