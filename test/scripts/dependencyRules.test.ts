/**
 * The dependency rules `npm run lint` checks (.dependency-cruiser.cjs, docs/architecture.md): run
 * on a small tree with one wrong-way import per rule, they report each of them and nothing else
 * (a type-only cycle, config importing a service, bin.ts importing cli or observability, index.ts
 * and cli importing present, observability and stream importing effect, store importing stream are
 * allowed); on src/ they report none.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { root } from "../support/cli.js"
import { tempDir } from "../support/tmp.js"

const cruiser = path.join(root, "node_modules", "dependency-cruiser", "bin", "dependency-cruise.mjs")

interface Violation {
  readonly from: string
  readonly to: string
  readonly rule: { readonly name: string }
}

/** The violations of the rules in `cwd`'s .dependency-cruiser.cjs over `cwd`/src, as "rule: from -> to". */
const cruise = (cwd: string): ReadonlyArray<string> => {
  const result = spawnSync(process.execPath, [cruiser, "src", "--config", ".dependency-cruiser.cjs", "-T", "json"], {
    cwd,
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024
  })
  if (result.stdout === "") throw new Error(`dependency-cruiser printed nothing: ${result.stderr}`)
  const output = JSON.parse(result.stdout) as { readonly summary: { readonly violations: ReadonlyArray<Violation> } }
  return output.summary.violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`).sort()
}

const fixture: Record<string, string> = {
  "src/bin.ts": 'import "./cli/main.js"\nimport "./observability/Tracing.js"\n',
  "src/index.ts": 'export { main } from "./cli/main.js"\nexport { html } from "./present/Html.js"\n',
  "src/observability/Tracing.ts": 'import "effect"\nimport "./internal/exporter.js"\n',
  "src/observability/Package.ts": 'import "leftpad"\n',
  "node_modules/effect/package.json": JSON.stringify({ name: "effect", type: "module", main: "index.js" }),
  "node_modules/effect/index.js": "export const e = 1\n",
  "node_modules/leftpad/package.json": JSON.stringify({ name: "leftpad", type: "module", main: "index.js" }),
  "node_modules/leftpad/index.js": "export const l = 1\n",
  "src/observability/internal/exporter.ts": "export const e = 1\n",
  "src/observability/Bad.ts": 'import { s } from "../store/S.js"\nexport const bad = s\n',
  "src/session/Traced.ts": 'import "../observability/Tracing.js"\n',
  "src/stream/pull.ts": 'import "effect"\n',
  "src/stream/Bad.ts": 'import { s } from "../store/S.js"\nexport const bad = s\n',
  "src/store/Follow.ts": 'import "../stream/pull.js"\n',
  "src/cli/main.ts": 'import { c } from "../config/Config.js"\nexport const main = c\n',
  "src/config/Config.ts": 'import { m } from "../model/M.js"\nexport type C = number\nexport const c = m\n',
  "src/domain/Ids.ts": "export type Id = string\n",
  "src/domain/Bad.ts": 'import { s } from "../store/S.js"\nexport const bad = s\n',
  "src/store/S.ts": 'import type { Id } from "../domain/Ids.js"\nexport const s: Id = "s"\n',
  "src/store/A.ts": 'import { b } from "./B.js"\nexport const a = () => b\n',
  "src/store/B.ts": 'import { a } from "./A.js"\nexport const b = () => a\n',
  "src/store/T1.ts": 'import type { T2 } from "./T2.js"\nexport interface T1 { readonly t2?: T2 }\n',
  "src/store/T2.ts": 'import type { T1 } from "./T1.js"\nexport interface T2 { readonly t1?: T1 }\n',
  "src/store/Up.ts": 'import { m } from "../model/M.js"\nexport const up = m\n',
  "src/model/M.ts": 'import { s } from "../store/S.js"\nexport const m = s\n',
  "src/tools/Tool.ts": 'import "../config/Config.js"\n',
  "src/tools/TypeOnly.ts": 'import type { C } from "../config/Config.js"\nexport const n: C = 1\n',
  "src/tools/Up.ts": 'import { agent } from "../session/Agent.js"\nexport const up = agent\n',
  "src/tools/Missing.ts": 'import "./nope.js"\n',
  "src/session/Agent.ts": 'import { m } from "../model/M.js"\nexport const agent = m\n',
  "src/session/Shell.ts": 'import "../cli/main.js"\n',
  "src/present/Html.ts":
    'import { s } from "../store/S.js"\nimport type { Id } from "../domain/Ids.js"\nexport const html: Id = s\n',
  "src/present/Up.ts": 'import { agent } from "../session/Agent.js"\nexport const up = agent\n',
  "src/store/Shows.ts": 'import { html } from "../present/Html.js"\nexport const shows = html\n',
  "src/cli/show.ts": 'export { html } from "../present/Html.js"\n',
  "src/mcp/Client.ts": 'import "@modelcontextprotocol/sdk"\nimport "../tools/Tool.js"\n',
  "src/mcp/Log.ts": 'import { s } from "../store/S.js"\nexport const log = s\n',
  "src/session/Sdk.ts": 'import "@modelcontextprotocol/sdk"\n',
  "node_modules/@modelcontextprotocol/sdk/package.json": JSON.stringify({
    name: "@modelcontextprotocol/sdk",
    type: "module",
    main: "index.js"
  }),
  "node_modules/@modelcontextprotocol/sdk/index.js": "export const sdk = 1\n",
  "tsconfig.json": JSON.stringify({
    compilerOptions: { module: "NodeNext", moduleResolution: "NodeNext", verbatimModuleSyntax: true, noEmit: true },
    include: ["src"]
  })
}

describe("the dependency rules", () => {
  it("report each wrong-way import and runtime cycle of a small tree, and nothing else", () => {
    const dir = tempDir("logbook-deps-")
    for (const [file, text] of Object.entries(fixture)) {
      fs.mkdirSync(path.join(dir, path.dirname(file)), { recursive: true })
      fs.writeFileSync(path.join(dir, file), text)
    }
    fs.copyFileSync(path.join(root, ".dependency-cruiser.cjs"), path.join(dir, ".dependency-cruiser.cjs"))
    expect(cruise(dir)).toEqual(
      [
        "cli-is-the-shell: src/index.ts -> src/cli/main.ts",
        "cli-is-the-shell: src/session/Shell.ts -> src/cli/main.ts",
        "config-on-top: src/tools/Tool.ts -> src/config/Config.ts",
        "config-on-top: src/tools/TypeOnly.ts -> src/config/Config.ts",
        "domain-imports-only-domain: src/domain/Bad.ts -> src/store/S.ts",
        "mcp-a-part: src/mcp/Log.ts -> src/store/S.ts",
        "mcp-sdk-only-in-mcp: src/session/Sdk.ts -> node_modules/@modelcontextprotocol/sdk/index.js",
        "no-circular: src/store/A.ts -> src/store/B.ts", // one report per cycle; T1 <-> T2 (types only) is none
        "not-to-unresolvable: src/tools/Missing.ts -> ./nope.js",
        "observability-at-the-root: src/session/Traced.ts -> src/observability/Tracing.ts",
        "observability-only-effect: src/observability/Bad.ts -> src/store/S.ts",
        "observability-only-effect: src/observability/Package.ts -> node_modules/leftpad/index.js",
        "parts-below-session: src/tools/Up.ts -> src/session/Agent.ts",
        "present-over-the-log: src/present/Up.ts -> src/session/Agent.ts",
        "session-not-cli: src/session/Shell.ts -> src/cli/main.ts",
        "store-below-the-kernel: src/store/Shows.ts -> src/present/Html.ts",
        "store-below-the-kernel: src/store/Up.ts -> src/model/M.ts",
        "stream-only-effect: src/stream/Bad.ts -> src/store/S.ts"
      ].sort()
    )
  })

  it("find no violation in src/", () => {
    expect(cruise(root)).toEqual([])
  })
})
