/**
 * OAuth for Streamable HTTP servers: the SDK's `OAuthClientProvider` (the SDK does the protocol —
 * discovery, registration, PKCE, the token exchange and refresh), with what it keeps stored per
 * server URL in one file (`<data home>/logbook/mcp-auth.json`, mode 0600, replaced atomically).
 * The tokens never leave that file and the requests' Authorization header.
 */
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs/promises"
import * as NodePath from "node:path"
import type { OAuthClientProvider, OAuthDiscoveryState } from "@modelcontextprotocol/sdk/client/auth.js"
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens
} from "@modelcontextprotocol/sdk/shared/auth.js"
import type { Authorization } from "../McpSettings.js"

/** The largest auth file read: larger is not ours, and is left alone. */
const MAX_FILE_BYTES = 1024 * 1024

/** What is kept for one server URL. */
interface Entry {
  client?: OAuthClientInformationMixed | undefined
  tokens?: OAuthTokens | undefined
  codeVerifier?: string | undefined
  discovery?: OAuthDiscoveryState | undefined
}

interface FileShape {
  readonly version: 1
  servers: Record<string, Entry>
}

/** The auth file: read and written whole, one write at a time in this process. */
export class AuthStore {
  private queue: Promise<unknown> = Promise.resolve()
  constructor(readonly file: string) {}

  private async read(): Promise<FileShape> {
    let text: string
    try {
      const stat = await Fs.stat(this.file)
      if (stat.size > MAX_FILE_BYTES) throw new Error(`${this.file} is larger than ${MAX_FILE_BYTES} bytes`)
      text = await Fs.readFile(this.file, "utf8")
    } catch (error) {
      if ((error as { code?: string }).code === "ENOENT") return { version: 1, servers: {} }
      throw error
    }
    let value: Partial<FileShape>
    try {
      value = JSON.parse(text) as Partial<FileShape>
    } catch {
      throw new Error(`${this.file} is not valid JSON; fix or remove it (then log in again)`)
    }
    if (typeof value !== "object" || value === null || typeof value.servers !== "object" || value.servers === null) {
      throw new Error(`${this.file} is not a logbook MCP auth file; fix or remove it (then log in again)`)
    }
    return { version: 1, servers: value.servers }
  }

  /** What is kept for `url` (empty when nothing is). */
  async get(url: string): Promise<Entry> {
    await this.queue
    return (await this.read()).servers[url] ?? {}
  }

  /** Changes what is kept for `url`; an entry left empty is removed. */
  update(url: string, change: (entry: Entry) => Entry): Promise<void> {
    const next = this.queue.then(async () => {
      const data = await this.read()
      const entry = change({ ...(data.servers[url] ?? {}) })
      if (Object.values(entry).every((v) => v === undefined)) delete data.servers[url]
      else data.servers[url] = entry
      await Fs.mkdir(NodePath.dirname(this.file), { recursive: true, mode: 0o700 })
      const temp = `${this.file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`
      await Fs.writeFile(temp, `${JSON.stringify(data, null, 2)}\n`, { mode: 0o600 })
      await Fs.rename(temp, this.file)
    })
    this.queue = next.catch(() => undefined)
    return next
  }
}

/** A redirect URL for a session that cannot authorize: never visited, only named in the registration. */
const placeholderRedirect = "http://127.0.0.1/callback"

/** The provider of one server URL; `authorization` absent: a session, which cannot ask the user. */
export class LogbookOAuthProvider implements OAuthClientProvider {
  /** the code the authorization URL's visit brought back, to be exchanged */
  pendingCode: string | undefined
  /** set when authorization was needed and there is no way to ask for it */
  needsLogin = false
  private stateValue: string | undefined
  private redirect: string

  constructor(
    private readonly store: AuthStore,
    private readonly url: string,
    private readonly authorization: Authorization | undefined,
    storedRedirect: string | undefined
  ) {
    this.redirect = authorization?.redirectUrl ?? storedRedirect ?? placeholderRedirect
    if (authorization !== undefined) {
      this.saveClientInformation = (client) => this.store.update(this.url, (e) => ({ ...e, client }))
    }
  }

  /** The provider of `url`, with its stored registration's redirect URL when a session needs one. */
  static async make(store: AuthStore, url: string, authorization: Authorization | undefined) {
    const entry = await store.get(url)
    const stored = (entry.client as { redirect_uris?: ReadonlyArray<string> } | undefined)?.redirect_uris?.[0]
    if (authorization !== undefined) {
      // a registration made for another redirect URL (another loopback port) is made again
      const uris = (entry.client as { redirect_uris?: ReadonlyArray<string> } | undefined)?.redirect_uris
      const preregistered = authorization.client !== undefined
      if (entry.client !== undefined && (preregistered || !uris?.includes(authorization.redirectUrl))) {
        await store.update(url, (e) => ({ ...e, client: undefined, discovery: undefined }))
      }
    }
    return new LogbookOAuthProvider(store, url, authorization, stored)
  }

  get redirectUrl(): string {
    return this.redirect
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: "logbook",
      redirect_uris: [this.redirect],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none"
    }
  }

  state(): string {
    this.stateValue = randomBytes(16).toString("base64url")
    return this.stateValue
  }

  async clientInformation(): Promise<OAuthClientInformationMixed | undefined> {
    const stored = (await this.store.get(this.url)).client
    if (stored !== undefined) return stored
    if (this.authorization === undefined) {
      // registering first needs the user
      this.needsLogin = true
      return undefined
    }
    const given = this.authorization.client
    if (given === undefined) return undefined
    return {
      client_id: given.client_id,
      ...(given.client_secret === undefined ? {} : { client_secret: given.client_secret })
    }
  }

  /** absent in a session: it registers no client it could not authorize (that is the login's) */
  readonly saveClientInformation?: (client: OAuthClientInformationMixed) => Promise<void>

  async tokens(): Promise<OAuthTokens | undefined> {
    return (await this.store.get(this.url)).tokens
  }

  saveTokens(tokens: OAuthTokens): Promise<void> {
    return this.store.update(this.url, (e) => ({ ...e, tokens, codeVerifier: undefined }))
  }

  async redirectToAuthorization(authorizationUrl: URL): Promise<void> {
    if (this.authorization === undefined) {
      this.needsLogin = true
      return
    }
    this.pendingCode = await this.authorization.visit(authorizationUrl)
  }

  saveCodeVerifier(codeVerifier: string): Promise<void> {
    return this.store.update(this.url, (e) => ({ ...e, codeVerifier }))
  }

  async codeVerifier(): Promise<string> {
    const verifier = (await this.store.get(this.url)).codeVerifier
    if (verifier === undefined) throw new Error("no PKCE code verifier is stored for this authorization")
    return verifier
  }

  invalidateCredentials(scope: "all" | "client" | "tokens" | "verifier" | "discovery"): Promise<void> {
    return this.store.update(this.url, (e) =>
      scope === "all"
        ? {}
        : scope === "client"
          ? { ...e, client: undefined }
          : scope === "tokens"
            ? { ...e, tokens: undefined }
            : scope === "verifier"
              ? { ...e, codeVerifier: undefined }
              : { ...e, discovery: undefined }
    )
  }

  saveDiscoveryState(state: OAuthDiscoveryState): Promise<void> {
    return this.store.update(this.url, (e) => ({ ...e, discovery: state }))
  }

  async discoveryState(): Promise<OAuthDiscoveryState | undefined> {
    return (await this.store.get(this.url)).discovery
  }
}
