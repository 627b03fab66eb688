/**
 * An MCP server over Streamable HTTP that requires OAuth, on 127.0.0.1, built from the SDK's
 * server-side auth helpers: `mcpAuthRouter` (authorization server metadata, dynamic client
 * registration, the authorization endpoint, the token endpoint with PKCE and refresh) and
 * `requireBearerAuth` (a 401 with `WWW-Authenticate` naming the protected resource metadata). Its
 * authorization endpoint answers at once with a redirect carrying the code, as a browser whose user
 * agreed would be sent. One tool: `echo {message}`. The tokens it issued are kept, for a test to
 * look for them where they must not be.
 */
import { randomUUID } from "node:crypto"
import type * as Http from "node:http"
import type { OAuthRegisteredClientsStore } from "@modelcontextprotocol/sdk/server/auth/clients.js"
import { InvalidGrantError, InvalidTokenError } from "@modelcontextprotocol/sdk/server/auth/errors.js"
import { requireBearerAuth } from "@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js"
import type { AuthorizationParams, OAuthServerProvider } from "@modelcontextprotocol/sdk/server/auth/provider.js"
import { getOAuthProtectedResourceMetadataUrl, mcpAuthRouter } from "@modelcontextprotocol/sdk/server/auth/router.js"
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import type { OAuthClientInformationFull, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
// @ts-expect-error: express (the SDK's own dependency) ships no types here; what is used is typed below
import expressModule from "express"

type Request = Http.IncomingMessage & { readonly body?: unknown }
type Response = Http.ServerResponse & { readonly status: (code: number) => { readonly end: () => void } }
interface App {
  readonly use: (handler: unknown) => void
  readonly post: (path: string, ...handlers: ReadonlyArray<unknown>) => void
  readonly get: (path: string, handler: (req: Request, res: Response) => void) => void
  readonly listen: (port: number, host: string, ready: () => void) => Http.Server
}
const express = expressModule as { (): App; readonly json: () => unknown }

export interface OAuthMcpServer {
  /** the MCP endpoint */
  readonly url: string
  /** every access and refresh token it issued */
  readonly issued: ReadonlyArray<string>
  /** how many tokens were issued by a refresh */
  readonly refreshes: () => number
  /** how many dynamic client registrations it took */
  readonly registrations: () => number
  /** makes every access token issued so far invalid (as if expired) */
  readonly expireAccessTokens: () => void
  readonly close: () => Promise<void>
}

export const startOAuthMcpServer = async (): Promise<OAuthMcpServer> => {
  const clients = new Map<string, OAuthClientInformationFull>()
  const codes = new Map<string, { clientId: string; challenge: string; redirectUri: string }>()
  const access = new Map<string, AuthInfo>()
  const refreshTokens = new Map<string, string>()
  const issued: Array<string> = []
  let refreshes = 0
  let registrations = 0

  const clientsStore: OAuthRegisteredClientsStore = {
    getClient: (id) => clients.get(id),
    registerClient: (client) => {
      registrations++
      const full = { ...client, client_id: randomUUID(), client_id_issued_at: 0 } as OAuthClientInformationFull
      clients.set(full.client_id, full)
      return full
    }
  }
  const issue = (clientId: string): OAuthTokens => {
    const token = `at-${randomUUID()}`
    const refresh = `rt-${randomUUID()}`
    issued.push(token, refresh)
    access.set(token, { token, clientId, scopes: [], expiresAt: Math.floor(Date.now() / 1000) + 3600 })
    refreshTokens.set(refresh, clientId)
    return { access_token: token, token_type: "bearer", expires_in: 3600, refresh_token: refresh }
  }
  const provider: OAuthServerProvider = {
    clientsStore,
    authorize: async (client, params: AuthorizationParams, res) => {
      const code = randomUUID()
      codes.set(code, { clientId: client.client_id, challenge: params.codeChallenge, redirectUri: params.redirectUri })
      const target = new URL(params.redirectUri)
      target.searchParams.set("code", code)
      if (params.state !== undefined) target.searchParams.set("state", params.state)
      res.redirect(target.href)
    },
    challengeForAuthorizationCode: async (_client, code) => {
      const entry = codes.get(code)
      if (entry === undefined) throw new Error("unknown code")
      return entry.challenge
    },
    exchangeAuthorizationCode: async (client, code) => {
      const entry = codes.get(code)
      if (entry === undefined || entry.clientId !== client.client_id) throw new InvalidGrantError("unknown code")
      codes.delete(code)
      return issue(client.client_id)
    },
    exchangeRefreshToken: async (client, refresh) => {
      if (refreshTokens.get(refresh) !== client.client_id) throw new InvalidGrantError("unknown refresh token")
      refreshTokens.delete(refresh)
      refreshes++
      return issue(client.client_id)
    },
    verifyAccessToken: async (token) => {
      const info = access.get(token)
      if (info === undefined) throw new InvalidTokenError("invalid token")
      return info
    }
  }

  const app = express()
  const listening = await new Promise<Http.Server>((resolve) => {
    const server = app.listen(0, "127.0.0.1", () => resolve(server))
  })
  const port = (listening.address() as { port: number }).port
  const base = `http://127.0.0.1:${port}`
  const mcpUrl = new URL(`${base}/mcp`)
  app.use(
    mcpAuthRouter({
      provider,
      issuerUrl: new URL(base),
      resourceServerUrl: mcpUrl,
      resourceName: "fixture"
    })
  )
  const bearer = requireBearerAuth({
    verifier: provider,
    resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(mcpUrl)
  })
  app.post("/mcp", express.json(), bearer, async (req: Request, res: Response) => {
    const server = new Server({ name: "oauth-fixture", version: "1.0.0" }, { capabilities: { tools: {} } })
    server.setRequestHandler(ListToolsRequestSchema, () => ({
      tools: [
        {
          name: "echo",
          description: "Echoes the message.",
          inputSchema: { type: "object", properties: { message: { type: "string" } } }
        }
      ]
    }))
    server.setRequestHandler(CallToolRequestSchema, (request) => ({
      content: [{ type: "text", text: `echo: ${String(request.params.arguments?.message ?? "")}` }]
    }))
    const transport = new StreamableHTTPServerTransport({})
    res.on("close", () => {
      void transport.close()
      void server.close()
    })
    await server.connect(transport)
    await transport.handleRequest(req, res, req.body)
  })
  app.get("/mcp", (_req, res) => {
    res.status(405).end()
  })

  return {
    url: mcpUrl.href,
    issued,
    refreshes: () => refreshes,
    registrations: () => registrations,
    expireAccessTokens: () => access.clear(),
    close: () =>
      new Promise((resolve) => {
        listening.closeAllConnections()
        listening.close(() => resolve())
      })
  }
}
