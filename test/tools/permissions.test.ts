import { describe, expect, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import {
  decodeRules,
  defaultRules,
  describeRule,
  evaluate,
  explain,
  matchesPattern,
  mostSpecificMatch,
  type PermissionAction,
  type PermissionRules,
  PermissionRules as PermissionRulesSchema,
  specificity,
  splitCommand,
  stricter
} from "../../src/tools/Permissions.js"

/** The example of the issue / module doc. */
const example: PermissionRules = {
  read: "allow",
  bash: { "git status*": "allow", "git *": "ask", "rm *": "deny", "*": "ask" },
  edit: { "src/**": "allow", "*.lock": "deny", "**": "ask" },
  external_directory: "ask",
  "*": "ask"
}

describe("bash command patterns", () => {
  const bash = (command: string) => evaluate(example, { tool: "bash", subject: command })
  const table: ReadonlyArray<readonly [command: string, action: PermissionAction, rule: string]> = [
    ["git status", "allow", "git status*"],
    ["git status --short", "allow", "git status*"],
    ["git statusx", "allow", "git status*"],
    ["sudo git status", "ask", "*"],
    ["git push origin main", "ask", "git *"],
    ["git", "ask", "*"],
    ["rm -rf build", "deny", "rm *"],
    ["rm -rf /", "deny", "rm *"],
    ["  git status  ", "allow", "git status*"],
    ["\tgit status\n", "allow", "git status*"],
    ["git   status", "allow", "git status*"],
    ["git\tstatus", "allow", "git status*"],
    ["git status && rm -rf /", "deny", "rm *"],
    ["git status || rm -rf /", "deny", "rm *"],
    ["git status; rm -rf /", "deny", "rm *"],
    ["git status | rm -rf /", "deny", "rm *"],
    ["git status\nrm -rf /", "deny", "rm *"],
    ["git status & rm -rf /", "deny", "rm *"],
    ["git status && git log", "ask", "git *"],
    ["git status && git status -s", "allow", "git status*"],
    ["git status 2>&1 | git status", "allow", "git status*"],
    ["git status 'a && rm -rf /'", "allow", "git status*"],
    ['git status "a; rm -rf /"', "allow", "git status*"],
    ["git status a\\;rm -rf /", "allow", "git status*"],
    ["git status $(rm -rf /)", "deny", "rm *"],
    ['git status "$(rm -rf /)"', "deny", "rm *"],
    ["git status `rm -rf /`", "deny", "rm *"],
    ["git status '$(rm -rf /)'", "allow", "git status*"],
    ["", "ask", "*"],
    ["ls", "ask", "*"]
  ]
  it.each(table)("%j -> %s by %s", (command, action, rule) => {
    const result = bash(command)
    expect(result.action).toBe(action)
    expect(result.rule).toBe(rule)
  })

  const patterns: ReadonlyArray<readonly [pattern: string, command: string, matches: boolean]> = [
    ["*", "anything at all / with slashes", true],
    ["*", "", true],
    ["npm run ?", "npm run a", true],
    ["npm run ?", "npm run ab", false],
    ["npm run ?", "npm run ", false],
    ["ls ?", "ls /", true],
    ["cat *.txt", "cat dir/sub/a.txt", true],
    ["cat *.txt", "cat a.txt b.md", false],
    ["a.b", "axb", false],
    ["echo (x)", "echo (x)", true],
    ["echo [ab]", "echo a", false],
    ["echo [ab]", "echo [ab]", true],
    ["git status*", "sudo git status", false]
  ]
  it.each(patterns)("%j matches %j: %s", (pattern, command, expected) => {
    expect(matchesPattern("command", pattern, command)).toBe(expected)
  })

  it("names the part of a chain that decided", () => {
    const result = bash("git status && rm -rf build")
    expect(result.part).toBe("rm -rf build")
    expect(explain(result)).toBe('bash `git status && rm -rf build` is denied by the rule "rm *" (for `rm -rf build`)')
  })

  it("keeps the first of equally strict parts", () => {
    expect(bash("git log && git push").part).toBe("git log")
  })
})

describe("splitCommand", () => {
  const table: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
    ["a && b || c ; d | e", ["a", "b", "c", "d", "e"]],
    ["a\nb", ["a", "b"]],
    ["a |& b", ["a", "b"]],
    ["a 2>&1 >&2 &>/dev/null", ["a 2>&1 >&2 &>/dev/null"]],
    ["sleep 1 & rm x", ["sleep 1", "rm x"]],
    ["echo 'a; b' \"c && d\"", ["echo 'a; b' \"c && d\""]],
    ["echo a\\;b", ["echo a\\;b"]],
    ["echo $(a; b) c", ["echo $(a; b) c", "a", "b"]],
    ["echo $(x $(y))", ["echo $(x $(y))", "x $(y)", "y"]],
    ["echo `a | b`", ["echo `a | b`", "a", "b"]],
    ["  a    b  ", ["a b"]],
    ["echo 'a    b'", ["echo 'a    b'"]],
    [";;", []],
    ["echo 'unterminated; rm", ["echo 'unterminated; rm"]]
  ]
  it.each(table)("%j", (command, parts) => {
    expect(splitCommand(command)).toEqual(parts)
  })
})

describe("path patterns", () => {
  const edit = (path: string) => evaluate(example, { tool: "edit", subject: path })
  const table: ReadonlyArray<readonly [path: string, action: PermissionAction, rule: string]> = [
    ["src/a.ts", "allow", "src/**"],
    ["src/deep/er/a.ts", "allow", "src/**"],
    ["srcs/a.ts", "ask", "**"],
    ["package-lock.lock", "deny", "*.lock"],
    ["yarn.lock", "deny", "*.lock"],
    ["sub/yarn.lock", "ask", "**"],
    ["README.md", "ask", "**"],
    ["src/yarn.lock", "allow", "src/**"]
  ]
  it.each(table)("edit %j -> %s by %s", (path, action, rule) => {
    const result = edit(path)
    expect(result.action).toBe(action)
    expect(result.rule).toBe(rule)
  })

  const globs: ReadonlyArray<readonly [pattern: string, path: string, matches: boolean]> = [
    ["*.ts", "a.ts", true],
    ["*.ts", "src/a.ts", false],
    ["**/*.ts", "src/a/b.ts", true],
    ["**/*.ts", "a.ts", true],
    ["src/*", "src/a.ts", true],
    ["src/*", "src/a/b.ts", false],
    ["src/**", "src/a/b.ts", true],
    ["*.{ts,tsx}", "a.tsx", true],
    ["*.{ts,tsx}", "a.js", false],
    ["file?.txt", "file1.txt", true],
    ["file?.txt", "file/.txt", false],
    ["[ab].md", "b.md", true],
    ["[!ab].md", "b.md", false],
    [".env", ".env", true],
    ["**/.env*", "config/.env.local", true],
    ["/etc/**", "/etc/hosts", true],
    ["a{b", "a{b", true],
    [`{${"a,".repeat(2000)}b}`, "a", false]
  ]
  it.each(globs)("%j matches %j: %s", (pattern, path, expected) => {
    expect(matchesPattern("path", pattern, path)).toBe(expected)
  })

  it("matches the file tools' subjects as paths and others as commands", () => {
    const rules: PermissionRules = { read: { "*": "deny" }, todo: { "*": "deny" } }
    expect(evaluate(rules, { tool: "read", subject: "a/b" }).action).toBe("allow") // `*` stays in one directory
    expect(evaluate(rules, { tool: "read", subject: "b" }).action).toBe("deny")
    expect(evaluate(rules, { tool: "todo", subject: "a/b" }).action).toBe("deny")
  })
})

describe("specificity", () => {
  it("ranks exact patterns above wildcards and counts literal characters", () => {
    expect(specificity("command", "git status")).toEqual({ exact: true, literals: 10 })
    expect(specificity("command", "git status*")).toEqual({ exact: false, literals: 10 })
    expect(specificity("command", "*")).toEqual({ exact: false, literals: 0 })
    expect(specificity("command", "a?c")).toEqual({ exact: false, literals: 2 })
    expect(specificity("path", "src/**")).toEqual({ exact: false, literals: 4 })
    expect(specificity("path", "*.{ts,tsx}")).toEqual({ exact: false, literals: 6 })
    expect(specificity("path", "[ab].md")).toEqual({ exact: false, literals: 5 })
    expect(specificity("path", "a\\*b")).toEqual({ exact: true, literals: 3 })
  })

  it("an exact pattern beats every wildcard pattern, even one with more literal characters", () => {
    const patterns = { "git status --short --branch*": "deny", "git status": "allow", "git status*": "ask" } as const
    expect(mostSpecificMatch("command", patterns, "git status")).toEqual({ pattern: "git status", action: "allow" })
    const paths = { "src/**/index.ts": "deny", "src/index.ts": "allow" } as const
    expect(mostSpecificMatch("path", paths, "src/index.ts")).toEqual({ pattern: "src/index.ts", action: "allow" })
  })

  it("more literal characters win, whatever the order", () => {
    const a = { "git *": "ask", "git status*": "allow", "*": "deny" } as const
    const b = { "*": "deny", "git status*": "allow", "git *": "ask" } as const
    for (const patterns of [a, b]) {
      expect(mostSpecificMatch("command", patterns, "git status")?.action).toBe("allow")
      expect(mostSpecificMatch("command", patterns, "git push")?.action).toBe("ask")
      expect(mostSpecificMatch("command", patterns, "ls")?.action).toBe("deny")
    }
    const paths = { "**": "allow", "src/**": "ask", "src/secret/**": "deny" } as const
    expect(mostSpecificMatch("path", paths, "src/secret/key.pem")?.pattern).toBe("src/secret/**")
    expect(mostSpecificMatch("path", paths, "src/a.ts")?.pattern).toBe("src/**")
  })

  it("on a tie the later pattern wins", () => {
    expect(mostSpecificMatch("command", { "git*": "ask", "*tus": "deny" }, "git status")?.pattern).toBe("*tus")
    expect(mostSpecificMatch("command", { "*tus": "deny", "git*": "ask" }, "git status")?.pattern).toBe("git*")
    expect(mostSpecificMatch("path", { "*.ts": "allow", "a.t*": "deny" }, "a.ts")?.action).toBe("deny")
    expect(mostSpecificMatch("path", { "a.t*": "deny", "*.ts": "allow" }, "a.ts")?.action).toBe("allow")
  })

  it("no match at all", () => {
    expect(mostSpecificMatch("command", { "git *": "allow" }, "ls")).toBeUndefined()
  })
})

describe("external_directory", () => {
  const outside = (rules: PermissionRules, tool = "read", subject = "/etc/hosts") =>
    evaluate(rules, { tool, subject, outside: true })

  it("asks by default, even for a tool that is allowed", () => {
    const result = outside({})
    expect(result).toMatchObject({ action: "ask", rule: "external_directory", fromDefaults: true, outside: true })
    expect(explain(result)).toBe(
      'read `/etc/hosts` (outside the workspace) needs approval by the default rule "external_directory"'
    )
  })

  it("the stricter of the tool's rule and external_directory wins", () => {
    const table: ReadonlyArray<
      readonly [tool: PermissionAction, external: PermissionAction, action: PermissionAction, rule: string]
    > = [
      ["allow", "allow", "allow", "external_directory"],
      ["allow", "ask", "ask", "external_directory"],
      ["allow", "deny", "deny", "external_directory"],
      ["ask", "allow", "ask", "read"],
      ["deny", "allow", "deny", "read"],
      ["deny", "ask", "deny", "read"],
      ["ask", "ask", "ask", "external_directory"]
    ]
    for (const [tool, external, action, rule] of table) {
      const result = outside({ read: tool, external_directory: external })
      expect([tool, external, result.action, result.rule]).toEqual([tool, external, action, rule])
    }
  })

  it("patterns of the tool and of external_directory see the path", () => {
    const rules: PermissionRules = {
      read: { "/etc/shadow": "deny", "**": "allow" },
      external_directory: { "/tmp/**": "allow", "**": "ask" }
    }
    expect(outside(rules, "read", "/tmp/x.txt").action).toBe("allow")
    expect(outside(rules, "read", "/home/me/x.txt")).toMatchObject({
      action: "ask",
      rule: "**",
      key: "external_directory"
    })
    expect(outside(rules, "read", "/etc/shadow")).toMatchObject({ action: "deny", rule: "/etc/shadow", key: "read" })
  })

  it('does not fall back to the "*" entry, and only applies when outside', () => {
    expect(outside({ "*": "allow" }).action).toBe("ask")
    expect(evaluate({ external_directory: "deny" }, { tool: "read", subject: "a.ts" }).action).toBe("allow")
  })

  it("an external_directory object matching nothing falls back to the defaults", () => {
    expect(outside({ external_directory: { "/tmp/**": "allow" } })).toMatchObject({ action: "ask", fromDefaults: true })
    expect(outside({ external_directory: { "/tmp/**": "allow" } }, "read", "/tmp/a").action).toBe("allow")
  })
})

describe("fallbacks and defaults", () => {
  it("defaults allow the built-in tools and ask for anything else", () => {
    for (const tool of ["read", "list", "glob", "grep", "write", "edit", "bash", "todo"]) {
      const result = evaluate({}, { tool, subject: "x" })
      expect([tool, result.action, result.rule, result.fromDefaults]).toEqual([tool, "allow", tool, true])
    }
    const unknown = evaluate({}, { tool: "mcp_fetch" })
    expect(unknown).toMatchObject({ action: "ask", rule: undefined, key: undefined })
    expect(explain(unknown)).toBe("mcp_fetch needs approval: no rule matches")
    expect(defaultRules.external_directory).toBe("ask")
  })

  it('a tool without an entry takes the "*" entry before the defaults', () => {
    expect(evaluate(example, { tool: "write", subject: "a.ts" })).toMatchObject({ action: "ask", rule: "*", key: "*" })
    expect(evaluate({ "*": "deny" }, { tool: "read", subject: "a.ts" }).action).toBe("deny")
    expect(evaluate({ "*": { "*.md": "allow" } }, { tool: "write", subject: "a.md" }).action).toBe("allow")
  })

  it('an object entry matching nothing falls through to "*" and then the defaults', () => {
    const rules: PermissionRules = { bash: { "git *": "allow" }, "*": "deny" }
    expect(evaluate(rules, { tool: "bash", subject: "ls" })).toMatchObject({ action: "deny", rule: "*", key: "*" })
    expect(evaluate({ bash: { "git *": "deny" } }, { tool: "bash", subject: "ls" })).toMatchObject({
      action: "allow",
      rule: "bash",
      fromDefaults: true
    })
  })

  it("takes other defaults when given", () => {
    const strict: PermissionRules = { read: "allow", "*": "deny" }
    expect(evaluate({}, { tool: "bash", subject: "ls" }, strict)).toMatchObject({ action: "deny", fromDefaults: true })
    expect(evaluate({}, { tool: "read", subject: "a" }, strict).action).toBe("allow")
    expect(evaluate({ bash: "ask" }, { tool: "bash", subject: "ls" }, strict).action).toBe("ask")
    // no external_directory in the given defaults: ask
    expect(evaluate({}, { tool: "read", subject: "/x", outside: true }, strict).action).toBe("ask")
  })

  it("a request without a subject is matched as the empty string", () => {
    expect(evaluate({ todo: { "*": "deny" } }, { tool: "todo" }).action).toBe("deny")
    expect(evaluate({ todo: { "x*": "deny" } }, { tool: "todo" }).action).toBe("allow")
  })

  it("ignores inherited keys", () => {
    expect(evaluate({}, { tool: "constructor" }).action).toBe("ask")
    expect(evaluate({}, { tool: "toString" }).rule).toBeUndefined()
  })

  it("stricter orders deny > ask > allow", () => {
    expect(stricter("allow", "ask")).toBe("ask")
    expect(stricter("deny", "ask")).toBe("deny")
    expect(stricter("allow", "allow")).toBe("allow")
  })
})

describe("explain and describeRule", () => {
  it("says what decided", () => {
    const denied = evaluate(example, { tool: "bash", subject: "rm -rf build" })
    expect(explain(denied)).toBe('bash `rm -rf build` is denied by the rule "rm *"')
    expect(describeRule(denied)).toBe('"rm *" (bash)')
    const read = evaluate(example, { tool: "read", subject: "a.ts" })
    expect(explain(read)).toBe('read `a.ts` is allowed by the rule "read"')
    expect(describeRule(read)).toBe("read")
    const fallback = evaluate(example, { tool: "write", subject: "a.ts" })
    expect(explain(fallback)).toBe('write `a.ts` needs approval by the rule "*"')
    const under = evaluate({ "*": { "*.md": "allow" } }, { tool: "write", subject: "a.md" })
    expect(explain(under)).toBe('write `a.md` is allowed by the rule "*.md" under "*"')
    expect(describeRule(under)).toBe('"*.md" (*)')
    const byDefault = evaluate({}, { tool: "todo" })
    expect(explain(byDefault)).toBe('todo is allowed by the default rule "todo"')
    expect(describeRule(byDefault)).toBe("todo (default)")
    expect(describeRule(evaluate({}, { tool: "x" }))).toBe("no rule")
  })
})

describe("PermissionRules schema", () => {
  it("decodes a valid object", () => {
    const decoded = decodeRules(JSON.parse(JSON.stringify(example)))
    expect(decoded).toEqual(Either.right(example))
    expect(Schema.decodeUnknownSync(PermissionRulesSchema)(example)).toEqual(example)
  })

  it("an invalid action gives a readable error", () => {
    expect(decodeRules({ bash: "maybe" })).toEqual(
      Either.left('bash: expected "allow", "ask" or "deny" or an object of patterns to those, got "maybe"')
    )
    expect(decodeRules({ bash: { "rm *": "maybe" } })).toEqual(
      Either.left('bash: pattern "rm *": expected "allow", "ask" or "deny", got "maybe"')
    )
    expect(decodeRules({ read: 3, edit: { "**": "allow" }, write: ["allow"] })).toEqual(
      Either.left(
        'read: expected "allow", "ask" or "deny" or an object of patterns to those, got 3\n' +
          'write: expected "allow", "ask" or "deny" or an object of patterns to those, got ["allow"]'
      )
    )
    expect(decodeRules("allow")).toEqual(Either.left('expected an object of tool names to rules, got "allow"'))
  })
})

describe("tool names by wildcard (an MCP server's tools)", () => {
  it("mcp__github__* decides every tool of the server; the tool's own entry and a more specific key win; others fall to *", () => {
    const rules = {
      "mcp__github__*": "allow",
      "mcp__github__delete_*": "deny",
      mcp__github__delete_branch: "ask",
      "*": "ask"
    } as const
    const decide = (tool: string) => evaluate(rules, { tool }).action
    expect(decide("mcp__github__list_issues")).toBe("allow")
    expect(decide("mcp__github__delete_repo")).toBe("deny")
    expect(decide("mcp__github__delete_branch")).toBe("ask")
    expect(decide("mcp__gitlab__list_issues")).toBe("ask")
    expect(evaluate(rules, { tool: "mcp__github__list_issues" }).rule).toBe("mcp__github__*")
  })

  it("an MCP tool with no rule asks (no built-in default allows it)", () => {
    expect(evaluate({}, { tool: "mcp__everything__echo" }).action).toBe("ask")
    // a key with regex characters is matched literally around its *
    expect(evaluate({ "mcp__a.b__*": "deny" }, { tool: "mcp__aXb__x" }).action).toBe("ask")
  })
})
