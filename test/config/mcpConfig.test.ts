/**
 * The config's `mcpServers` (the `.mcp.json` shape): stdio and Streamable HTTP entries, errors that
 * name the server and the key, secrets kept out, a project file's servers kept out of the config.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { type RawSource, resolveSources } from "../../src/config/Config.js"
import { enabledMcpServers } from "../../src/config/McpConfig.js"

const userFile = "/home/u/.config/logbook/config.json"
const projectFile = "/w/logbook.json"
const files = [
  { kind: "global" as const, path: userFile, found: true },
  { kind: "project" as const, path: projectFile, found: true }
]
const user = (value: unknown): RawSource => ({ source: { _tag: "File", path: userFile }, value })
const project = (value: unknown): RawSource => ({ source: { _tag: "File", path: projectFile }, value })

const errorOf = (raw: ReadonlyArray<RawSource>): string => {
  const result = resolveSources(raw, files)
  if (Either.isRight(result)) throw new Error("expected a config error")
  return result.left.message
}

describe("mcpServers in config", () => {
  it("takes the .mcp.json shape: a stdio server and an http one, defaults filled in, origins kept", () => {
    const result = resolveSources(
      [
        user({
          mcpServers: {
            everything: { command: "npx", args: ["mcp-server-everything"], env: { DEBUG: "1" } },
            remote: { type: "http", url: "https://example.com/mcp", bearerTokenEnv: "REMOTE_TOKEN", timeoutMs: 5000 },
            off: { command: "x", enabled: false }
          }
        })
      ],
      files
    )
    if (Either.isLeft(result)) throw new Error(result.left.message)
    const servers = enabledMcpServers(result.right.config.mcpServers)
    expect(servers.map((s) => s.name)).toEqual(["everything", "remote"])
    expect(servers[0]!.spec).toMatchObject({
      type: "stdio",
      command: "npx",
      args: ["mcp-server-everything"],
      env: { DEBUG: "1" },
      timeoutMs: 120_000
    })
    expect(servers[1]!.spec).toMatchObject({
      type: "http",
      url: "https://example.com/mcp",
      headers: {},
      bearerTokenEnv: "REMOTE_TOKEN",
      timeoutMs: 5000
    })
    expect(result.right.originOf(["mcpServers", "everything", "command"])).toEqual({ _tag: "File", path: userFile })
  })

  it.each([
    [{ remote: { type: "http" } }, 'at mcpServers.remote.url: is required for a server of "type": "http"'],
    [{ local: { args: ["x"] } }, "at mcpServers.local.command: is required"],
    [
      { local: { command: "x", url: "https://e.com/mcp" } },
      'at mcpServers.local.url: is only for a server of "type": "http"'
    ],
    [
      { remote: { type: "http", url: "https://e.com/mcp", command: "x" } },
      "at mcpServers.remote.command: is only for a stdio server"
    ],
    [
      { remote: { type: "sse", url: "https://e.com/mcp" } },
      'at mcpServers.remote.type: expected one of "stdio", "http" (the SSE transport is not supported)'
    ],
    [{ local: { command: "x", timeoutMs: 0 } }, "at mcpServers.local.timeoutMs: expected a positive integer, got 0"],
    [{ local: { command: "x", comand: "y" } }, 'at mcpServers.local.comand: unknown key (did you mean "command"?)'],
    [{ "bad name": { command: "x" } }, 'at mcpServers["bad name"]: invalid key, expected an MCP server name'],
    [
      { remote: { type: "http", url: "ftp://e.com" } },
      "at mcpServers.remote.url: expected a URL starting with http:// or https://"
    ]
  ])("a bad entry %j is an error naming the server and the key", (mcpServers, expected) => {
    const message = errorOf([user({ mcpServers })])
    expect(message).toContain(`file ${userFile}`)
    expect(message).toContain(expected)
  })

  // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${NAME} reference, as config files write it
  it("a literal token in env or headers is refused without echoing it; a ${NAME} reference is fine", () => {
    const token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    const env = errorOf([user({ mcpServers: { gh: { command: "x", env: { GITHUB_TOKEN: token } } } })])
    expect(env).toContain("at mcpServers.gh.env.GITHUB_TOKEN: API keys and other secrets must not be written in config")
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${NAME} reference, as config files write it
    expect(env).toContain('"${NAME}"')
    expect(env).not.toContain(token)
    const header = errorOf([
      user({
        mcpServers: { gh: { type: "http", url: "https://e.com/mcp", headers: { Authorization: `Bearer ${token}` } } }
      })
    ])
    expect(header).toContain("at mcpServers.gh.headers.Authorization")
    expect(header).not.toContain(token)
    const ok = resolveSources(
      [
        user({
          mcpServers: {
            // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${NAME} reference, as config files write it
            gh: { type: "http", url: "https://e.com/mcp", headers: { Authorization: "Bearer ${GITHUB_TOKEN}" } },
            // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${NAME} reference, as config files write it
            local: { command: "x", env: { GITHUB_TOKEN: "${GITHUB_TOKEN}", TOKEN: "${T:-none}" } }
          }
        })
      ],
      files
    )
    expect(Either.isRight(ok)).toBe(true)
  })

  it("a project file's servers are kept out of the config (they start only once approved)", () => {
    const result = resolveSources(
      [
        user({ mcpServers: { mine: { command: "a" } } }),
        project({ mcpServers: { theirs: { command: "b" }, mine: { command: "evil" } } })
      ],
      files
    )
    if (Either.isLeft(result)) throw new Error(result.left.message)
    expect(Object.keys(result.right.config.mcpServers)).toEqual(["mine"])
    expect(result.right.config.mcpServers.mine!.command).toBe("a")
    expect(Object.keys(result.right.projectMcpServers)).toEqual(["theirs", "mine"])
  })
})
