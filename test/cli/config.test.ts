/**
 * `logbook config` through the built binary: the resolved config, secrets masked, exit 2 with one
 * sentence for an invalid config. Every run gets its own HOME and project directory.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { envVars } from "../../src/config/Config.js"
import { root, runCli, scratchDir } from "../support/cli.js"

const SECRET = "sk-test-SECRET-4f9a2b7c"

const setup = (files: { readonly global?: unknown; readonly project?: unknown } = {}) => {
  const home = scratchDir()
  const project = scratchDir()
  const globalDir = path.join(home, ".config", "logbook")
  fs.mkdirSync(globalDir, { recursive: true })
  const globalFile = path.join(globalDir, "config.json")
  const projectFile = path.join(project, "logbook.json")
  const write = (file: string, value: unknown) =>
    fs.writeFileSync(file, typeof value === "string" ? value : JSON.stringify(value, null, 2))
  if (files.global !== undefined) write(globalFile, files.global)
  if (files.project !== undefined) write(projectFile, files.project)
  const env = {
    HOME: home,
    XDG_CONFIG_HOME: undefined,
    OPENAI_API_KEY: undefined,
    ANTHROPIC_API_KEY: undefined,
    // every variable logbook reads, so the developer's shell cannot change what these tests see
    ...Object.fromEntries(envVars.map((v) => [v.name, undefined]))
  }
  return { home, project, globalFile, projectFile, env }
}

describe("logbook config", () => {
  it("a number out of range says so (issue 12 §7): not `got null`, in a file or in a variable", async () => {
    const s = setup({ project: '{\n  "maxSteps": 1e309\n}' })
    const file = await runCli(["config"], { cwd: s.project, env: s.env })
    expect(file.code).toBe(2)
    expect(file.stderr).toContain("the number 1e309 is out of range (too large to hold) at line 2, column 15")
    expect(file.stderr).not.toContain("got null")
    const clean = setup()
    const variable = await runCli(["config"], {
      cwd: clean.project,
      env: { ...clean.env, LOGBOOK_MAX_STEPS: "9".repeat(400) }
    })
    expect(variable.code).toBe(2)
    expect(variable.stderr).toContain("at maxSteps: expected a positive integer, got Infinity (a number out of range)")
  })

  it("prints the defaults as 2-space JSON when there is no config", async () => {
    const s = setup()
    const result = await runCli(["config"], { cwd: s.project, env: s.env })
    expect(result.stderr).toBe("")
    expect(result.code).toBe(0)
    expect(result.stdout).toMatch(/^\{\n {2}"provider": \{\n/)
    const config = JSON.parse(result.stdout)
    expect(config.maxSteps).toBe(50)
    expect(config.snapshotEvery).toBe(500)
    expect(config.retry).toEqual({
      maxAttempts: 8,
      initialDelayMs: 1000,
      maxDelayMs: 30000,
      maxRetryAfterMs: 60000,
      budgetMs: 300000
    })
    expect(config.tools).toEqual({
      bash: {
        timeoutMs: 120000,
        maxTimeoutMs: 600000,
        passEnv: [],
        sandbox: "auto",
        network: true,
        writablePaths: [],
        hiddenPaths: []
      }
    })
    expect(config.model).toBeUndefined()
    expect(config.modelInfo).toBeUndefined()
  })

  it("shows the configured model's limits and prices from the model catalog (no network)", async () => {
    const s = setup()
    const result = await runCli(["config"], {
      cwd: s.project,
      env: { ...s.env, LOGBOOK_MODEL: "anthropic/claude-sonnet-4-5" }
    })
    expect(result.stderr).toBe("")
    expect(result.code).toBe(0)
    expect(JSON.parse(result.stdout).modelInfo).toEqual({
      model: "anthropic/claude-sonnet-4-5",
      catalog: {
        source: "@pydantic/genai-prices 0.1.8",
        provider: "anthropic",
        model: "claude-sonnet-4-5",
        name: "Claude Sonnet 4.5"
      },
      contextWindow: { value: 200000, from: "catalog" },
      // none configured: the provider type's default, sent with every request
      maxOutput: { value: 32000, from: "default" },
      price: {
        input: { value: 3, from: "catalog" },
        output: { value: 15, from: "catalog" },
        cacheRead: { value: 0.3, from: "catalog" },
        cacheWrite: { value: 3.75, from: "catalog" }
      }
    })
  })

  it("--format text: each limit and price of the model with its key and source; the config wins per field", async () => {
    const s = setup({
      project: {
        model: "anthropic/claude-sonnet-4-5-20250929",
        provider: {
          anthropic: { models: { "claude-sonnet-4-5-20250929": { maxOutput: 8000, price: { output: 12 } } } }
        }
      }
    })
    const result = await runCli(["config", "--format", "text"], { cwd: s.project, env: s.env })
    expect(result.stderr).toBe("")
    expect(result.code).toBe(0)
    const file = s.projectFile.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
    const key = "provider\\.anthropic\\.models\\.claude-sonnet-4-5-20250929"
    const out = result.stdout
    expect(out).toContain(
      "model anthropic/claude-sonnet-4-5-20250929: in the model catalog as anthropic/claude-sonnet-4-5 (Claude Sonnet 4.5)"
    )
    expect(out).toMatch(
      new RegExp(`\\n${key}\\.contextWindow +200000 +catalog \\(@pydantic/genai-prices 0\\.1\\.8\\)\\n`)
    )
    expect(out).toMatch(new RegExp(`\\n${key}\\.maxOutput +8000 +file ${file}\\n`))
    expect(out).toMatch(new RegExp(`\\n${key}\\.price\\.input +3 +catalog `))
    expect(out).toMatch(new RegExp(`\\n${key}\\.price\\.output +12 +file ${file}\\n`))
    expect(out).toMatch(new RegExp(`\\n${key}\\.price\\.cacheRead +0\\.3 +catalog `))
  })

  it("--format text: a model the catalog cannot know (openai-compatible) says so, and its prices are unknown", async () => {
    const s = setup()
    const result = await runCli(["config", "--format", "text"], {
      cwd: s.project,
      env: { ...s.env, LOGBOOK_MODEL: "ollama/qwen3:8b" }
    })
    expect(result.code).toBe(0)
    expect(result.stdout).toContain("model ollama/qwen3:8b: no model catalog for this provider")
    expect(result.stdout).toMatch(/\nprovider\.ollama\.models\.qwen3:8b\.price\.input +unknown +-\n/)
    expect(result.stdout).toMatch(/\nprovider\.ollama\.models\.qwen3:8b\.maxOutput +8192 +default\n/)
  })

  it("merges global < project < LOGBOOK_* and reads the project of --cwd", async () => {
    const s = setup({
      global: { model: "openai/gpt-4o", maxSteps: 10, retry: { maxAttempts: 3 } },
      project: '{\n  // the project\n  "maxSteps": 20,\n  "retry": { "budgetMs": 9000, },\n}'
    })
    const elsewhere = scratchDir()
    const result = await runCli(["config", "--cwd", s.project], {
      cwd: elsewhere,
      env: { ...s.env, LOGBOOK_SNAPSHOT_EVERY: "42" }
    })
    expect(result.stderr).toBe("")
    expect(result.code).toBe(0)
    const config = JSON.parse(result.stdout)
    expect(config.model).toBe("openai/gpt-4o")
    expect(config.maxSteps).toBe(20)
    expect(config.retry.maxAttempts).toBe(3)
    expect(config.retry.budgetMs).toBe(9000)
    expect(config.snapshotEvery).toBe(42)
  })

  it("honours XDG_CONFIG_HOME for the global file", async () => {
    const s = setup({ global: { maxSteps: 10 } })
    const xdg = scratchDir()
    fs.mkdirSync(path.join(xdg, "logbook"))
    fs.writeFileSync(path.join(xdg, "logbook", "config.json"), '{ "maxSteps": 33 }')
    const result = await runCli(["config"], { cwd: s.project, env: { ...s.env, XDG_CONFIG_HOME: xdg } })
    expect(JSON.parse(result.stdout).maxSteps).toBe(33)
  })

  it("masks keys: shows the variable's name and whether it is set, never its value", async () => {
    const s = setup({
      project: {
        model: "anthropic/claude-sonnet-4",
        provider: { local: { type: "openai-compatible", baseURL: "http://localhost:11434/v1", apiKeyEnv: "LOCAL_KEY" } }
      }
    })
    for (const format of ["json", "text"]) {
      const result = await runCli(["config", "--format", format], {
        cwd: s.project,
        env: { ...s.env, OPENAI_API_KEY: SECRET, LOCAL_KEY: `${SECRET}-local` }
      })
      expect(result.code).toBe(0)
      expect(result.stdout).not.toContain("SECRET")
      expect(result.stderr).not.toContain("SECRET")
      if (format === "json") {
        const config = JSON.parse(result.stdout)
        expect(config.provider.openai).toMatchObject({ apiKeyEnv: "OPENAI_API_KEY", apiKey: "(set)" })
        expect(config.provider.anthropic).toMatchObject({ apiKeyEnv: "ANTHROPIC_API_KEY", apiKey: "(not set)" })
        expect(config.provider.local).toEqual({
          type: "openai-compatible",
          baseURL: "http://localhost:11434/v1",
          apiKeyEnv: "LOCAL_KEY",
          apiKey: "(set)",
          models: {}
        })
      } else {
        expect(result.stdout).toMatch(/provider\.openai\.apiKey +\(set\)/)
        expect(result.stdout).toMatch(/provider\.anthropic\.apiKey +\(not set\)/)
      }
    }
  })

  it("--format text lists the files looked at and where each value came from", async () => {
    const s = setup({ project: { maxSteps: 12 } })
    const result = await runCli(["config", "--format", "text"], {
      cwd: s.project,
      env: { ...s.env, LOGBOOK_MODEL: "ollama/llama3" }
    })
    expect(result.code).toBe(0)
    const lines = result.stdout.split("\n")
    expect(lines[0]).toBe(`global config: ${s.globalFile} (not found)`)
    expect(lines[1]).toBe(`project config: ${s.projectFile}`)
    expect(result.stdout).toMatch(
      new RegExp(`maxSteps +12 +file ${s.projectFile.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`)
    )
    expect(result.stdout).toMatch(/model +ollama\/llama3 +environment variable LOGBOOK_MODEL/)
    expect(result.stdout).toMatch(/snapshotEvery +500 +default/)
    expect(result.stdout).not.toContain("\u001b[")
  })

  it("shows the MCP servers and where each came from, tokens masked; a project's servers are not in the config", async () => {
    const s = setup({
      global: {
        mcpServers: {
          everything: { command: "npx", args: ["mcp-server-everything"] },
          remote: { type: "http", url: "https://example.com/mcp", bearerTokenEnv: "REMOTE_TOKEN" }
        }
      },
      project: { mcpServers: { theirs: { command: "sh" } } }
    })
    const env = { ...s.env, REMOTE_TOKEN: SECRET }
    const json = await runCli(["config"], { cwd: s.project, env })
    expect(json.code).toBe(0)
    const config = JSON.parse(json.stdout)
    expect(config.mcpServers).toEqual({
      everything: { command: "npx", args: ["mcp-server-everything"] },
      remote: { type: "http", url: "https://example.com/mcp", bearerTokenEnv: "REMOTE_TOKEN", bearerToken: "(set)" }
    })
    const text = await runCli(["config", "--format", "text"], { cwd: s.project, env })
    expect(text.code).toBe(0)
    const escaped = s.globalFile.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
    expect(text.stdout).toMatch(new RegExp(`mcpServers\\.everything\\.command +npx +file ${escaped}`))
    expect(text.stdout).toMatch(/mcpServers\.remote\.bearerToken +\(set\) +environment/)
    expect(text.stdout).not.toContain("theirs")
    expect(json.stdout + text.stdout).not.toContain(SECRET)
  })

  it.each([
    [
      { provider: { local: { type: "openai-compatible", baseURL: "localhost:11434" } } },
      'at provider.local.baseURL: expected a URL starting with http:// or https://, got "localhost:11434"'
    ],
    [{ retry: { maxAttemps: 3 } }, 'at retry.maxAttemps: unknown key (did you mean "maxAttempts"?)'],
    [
      { provider: { openai: { apiKey: SECRET } } },
      "at provider.openai.apiKey: API keys and other secrets must not be written in config"
    ],
    [
      '{ "maxSteps": 5 "model": "x/y" }',
      'is not valid JSON: expected "," or "}" after a property, got "\\"" at line 1, column 17'
    ]
  ])("an invalid project config %j exits 2 with one sentence naming the file", async (project, expected) => {
    const s = setup({ project })
    const result = await runCli(["config"], { cwd: s.project, env: s.env })
    expect(result.code).toBe(2)
    expect(result.stdout).toBe("")
    const lines = result.stderr.trimEnd().split("\n")
    expect(lines).toHaveLength(1)
    expect(lines[0]).toContain(`file ${s.projectFile}`)
    expect(lines[0]).toContain(expected)
    expect(lines[0]).toMatch(/^logbook: /)
    expect(result.stderr).not.toContain("SECRET")
  })

  it("a bad LOGBOOK_* variable exits 2 naming the variable", async () => {
    const s = setup()
    const result = await runCli(["config"], { cwd: s.project, env: { ...s.env, LOGBOOK_MAX_STEPS: "many" } })
    expect(result.code).toBe(2)
    expect(result.stderr).toBe(
      'logbook: invalid config in environment variable LOGBOOK_MAX_STEPS at maxSteps: expected a positive integer, got "many"\n'
    )
  })

  it("a --cwd that is not a directory exits 2", async () => {
    const s = setup()
    const missing = path.join(s.project, "nope")
    const result = await runCli(["config", "--cwd", missing], { cwd: s.project, env: s.env })
    expect(result.code).toBe(2)
    expect(result.stderr).toBe(`logbook: --cwd ${missing} is not a directory\n`)
  })

  it("--schema prints the committed JSON Schema", async () => {
    const s = setup()
    const result = await runCli(["config", "--schema"], { cwd: s.project, env: s.env })
    expect(result.code).toBe(0)
    expect(`${result.stdout.trimEnd()}\n`).toBe(
      fs.readFileSync(path.join(root, "schema", "config.schema.json"), "utf8")
    )
  })

  it("--help describes the command and its flags; the overview lists it", async () => {
    const help = await runCli(["config", "--help"])
    expect(help.code).toBe(0)
    for (const text of ["--cwd", "--format", "json | text", "--schema", "--system-prompt", "masked"])
      expect(help.stdout).toContain(text)
    const overview = await runCli([])
    expect(overview.stdout).toContain("logbook config")
  })

  describe("the instruction files (AGENTS.md)", () => {
    /** The user's AGENTS.md, a repository (`.git`) with an AGENTS.md at its root and a CLAUDE.md in `pkg`. */
    const withInstructions = (
      texts: { readonly user?: string; readonly root?: string; readonly pkg?: string } = {}
    ) => {
      const s = setup()
      const userFile = path.join(s.home, ".config", "logbook", "AGENTS.md")
      fs.writeFileSync(userFile, texts.user ?? "USER: answer in English.\n")
      fs.mkdirSync(path.join(s.project, ".git"))
      fs.writeFileSync(path.join(s.project, "AGENTS.md"), texts.root ?? "ROOT: run npm test.\n")
      const pkg = path.join(s.project, "pkg")
      fs.mkdirSync(pkg)
      fs.writeFileSync(path.join(pkg, "CLAUDE.md"), texts.pkg ?? "PKG: no default exports.\n")
      return { ...s, userFile, pkg }
    }

    it("both formats list the files a session in --cwd would load: the user's first, then root to workspace", async () => {
      const s = withInstructions()
      const json = await runCli(["config", "--cwd", s.pkg], { cwd: s.home, env: s.env })
      expect(json.stderr).toBe("")
      expect(json.code).toBe(0)
      expect(JSON.parse(json.stdout).instructions).toEqual({
        userFile: s.userFile,
        root: s.project,
        files: [
          { path: s.userFile, scope: "user", size: 25, includedBytes: 25 },
          { path: path.join(s.project, "AGENTS.md"), scope: "project", size: 20, includedBytes: 20 },
          { path: path.join(s.pkg, "CLAUDE.md"), scope: "project", size: 25, includedBytes: 25 }
        ],
        skipped: []
      })
      const text = await runCli(["config", "--cwd", s.pkg, "--format", "text"], { cwd: s.home, env: s.env })
      expect(text.code).toBe(0)
      expect(text.stdout.split("\n").slice(2, 5)).toEqual([
        `user instructions: ${s.userFile} (25 bytes)`,
        `project instructions: ${path.join(s.project, "AGENTS.md")} (20 bytes)`,
        `project instructions: ${path.join(s.pkg, "CLAUDE.md")} (25 bytes)`
      ])
    })

    it("says where it looked when there are none, and lists a file it cannot read as skipped", async () => {
      const s = setup()
      const none = await runCli(["config", "--format", "text"], { cwd: s.project, env: s.env })
      expect(none.stdout.split("\n")[2]).toBe(
        `instructions: none (no AGENTS.md or CLAUDE.md in ${s.project}, and no ${path.join(s.home, ".config", "logbook", "AGENTS.md")})`
      )
      const file = path.join(s.project, "AGENTS.md")
      fs.symlinkSync(file, file)
      const text = await runCli(["config", "--format", "text"], { cwd: s.project, env: s.env })
      expect(text.code).toBe(0)
      expect(text.stdout.split("\n")[2]).toMatch(
        new RegExp(`^instructions: ${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} \\(skipped: ELOOP`)
      )
      const json = await runCli(["config"], { cwd: s.project, env: s.env })
      expect(JSON.parse(json.stdout).instructions.skipped).toEqual([
        { path: file, reason: expect.stringMatching(/ELOOP/) }
      ])
    })

    it("--system-prompt prints the exact system prompt, keys masked, without opening the database", async () => {
      const s = withInstructions({ root: `ROOT: the staging key is ${SECRET}.\n` })
      const db = path.join(s.home, "never", "logbook.db")
      const result = await runCli(["config", "--cwd", s.pkg, "--system-prompt"], {
        cwd: s.home,
        env: { ...s.env, OPENAI_API_KEY: SECRET, LOGBOOK_DB: db }
      })
      expect(result.stderr).toBe("")
      expect(result.code).toBe(0)
      const out = result.stdout
      expect(out).toMatch(/^You are logbook, a coding agent/)
      expect(out).toContain(`You work in the directory ${s.pkg};`)
      const user = out.indexOf(
        `## ${s.userFile} (the user's own instructions, for every project)\n\nUSER: answer in English.`
      )
      const root = out.indexOf(
        `## ${path.join(s.project, "AGENTS.md")}\n\nROOT: the staging key is [logbook redacted $OPENAI_API_KEY].`
      )
      const pkg = out.indexOf(`## ${path.join(s.pkg, "CLAUDE.md")}\n\nPKG: no default exports.`)
      expect([user, root, pkg].every((i) => i > 0)).toBe(true)
      expect(user).toBeLessThan(root)
      expect(root).toBeLessThan(pkg)
      expect(out.endsWith("PKG: no default exports.\n")).toBe(true)
      expect(out).not.toContain("SECRET")
      expect(fs.existsSync(db)).toBe(false)
      expect(fs.existsSync(path.dirname(db))).toBe(false)
    })

    it("--system-prompt warns on stderr about a file it cannot read and prints the rest", async () => {
      const s = withInstructions()
      const file = path.join(s.pkg, "AGENTS.md")
      fs.symlinkSync(file, file)
      const result = await runCli(["config", "--cwd", s.pkg, "--system-prompt"], { cwd: s.home, env: s.env })
      expect(result.code).toBe(0)
      expect(result.stderr).toMatch(
        new RegExp(
          `^logbook: warn: cannot read the instructions file ${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} \\(ELOOP`
        )
      )
      expect(result.stdout).toContain("ROOT: run npm test.")
      // the unreadable AGENTS.md is this directory's: its CLAUDE.md is not read in its place
      expect(result.stdout).not.toContain("PKG: no default exports.")
    })
  })
})
