/**
 * The dependency rules of src/ (`npm run lint` runs them; docs/architecture.md explains them).
 * Direction (DESIGN §1): bin -> cli -> config -> session -> (model, tools, mcp) -> store -> domain;
 * mcp (MCP servers: the client and their tools) is a part beside tools, over tools and domain.
 * present (what logbook shows: text formatting, the screen model, the HTML export) sits beside
 * session, over store and domain, so that the CLI and the library share it.
 * observability (trace export) beside the root, imported by bin.ts and cli/agentSetup.ts only.
 * stream (reading a Stream without its channel) under everything, importing only effect.
 * Type-only imports count for the layering rules (a type couples the layers too) but not for
 * cycles: an `import type` is erased, so it cannot make modules load in the wrong order.
 * @type {import("dependency-cruiser").IConfiguration}
 */
module.exports = {
  forbidden: [
    {
      name: "no-circular",
      severity: "error",
      comment: "A runtime import cycle: modules that load in an order that depends on who is imported first.",
      from: { path: "^src/" },
      to: { circular: true, viaOnly: { dependencyTypesNot: ["type-only"] } }
    },
    {
      name: "domain-imports-only-domain",
      severity: "error",
      comment: "src/domain is the bottom: events, ids and messages import nothing of ours but domain.",
      from: { path: "^src/domain/" },
      to: { path: "^src/", pathNot: "^src/domain/" }
    },
    {
      name: "store-below-the-kernel",
      severity: "error",
      comment: "src/store imports only domain and store: not session, cli, config, tools, model or present.",
      from: { path: "^src/store/" },
      to: { path: "^src/(session|cli|config|tools|model|present|mcp)/" }
    },
    {
      name: "config-on-top",
      severity: "error",
      comment:
        "Services own their option Schemas and defaults; src/config composes them. Nothing below config " +
        "(domain, store, model, tools, session) imports src/config.",
      from: { path: "^src/(domain|store|model|tools|session|mcp)/" },
      to: { path: "^src/config/" }
    },
    {
      name: "parts-below-session",
      severity: "error",
      comment: "Model, tools, store and domain are the parts the session kernel drives; none imports src/session.",
      from: { path: "^src/(domain|store|model|tools|mcp)/" },
      to: { path: "^src/session/" }
    },
    {
      name: "session-not-cli",
      severity: "error",
      comment: "src/session is the kernel; the CLI and the terminal are shells over it.",
      from: { path: "^src/session/" },
      to: { path: "^src/cli/" }
    },
    {
      name: "cli-is-the-shell",
      severity: "error",
      comment: "Only src/bin.ts and src/cli itself import src/cli.",
      from: { path: "^src/", pathNot: ["^src/cli/", "^src/bin\\.ts$"] },
      to: { path: "^src/cli/" }
    },
    {
      name: "present-over-the-log",
      severity: "error",
      comment:
        "src/present draws what the log holds (text, the screen model, the HTML export) for the CLI and " +
        "the library: it imports domain, store and itself, not session, model, tools, config or cli.",
      from: { path: "^src/present/" },
      to: { path: "^src/(session|model|tools|config|cli|mcp)/" }
    },
    {
      name: "mcp-a-part",
      severity: "error",
      comment:
        "src/mcp (MCP servers: the client over the SDK and their tools) is a part the kernel drives, beside " +
        "tools: it does not write or draw the log (store, present); config-on-top, parts-below-session and " +
        "cli-is-the-shell keep it below config, session and cli.",
      from: { path: "^src/mcp/" },
      to: { path: "^src/(store|present)/" }
    },
    {
      name: "mcp-sdk-only-in-mcp",
      severity: "error",
      comment: "Only src/mcp imports @modelcontextprotocol/sdk: the rest of logbook sees McpClient.",
      from: { path: "^src/", pathNot: "^src/mcp/" },
      to: { path: "(^|/)node_modules/@modelcontextprotocol/" }
    },
    {
      name: "observability-only-effect",
      severity: "error",
      comment:
        "src/observability (trace export) imports only effect and @effect/* (and itself): it sits beside " +
        "the composition root and knows nothing of the agent.",
      from: { path: "^src/observability/" },
      to: { pathNot: ["^src/observability/", "(^|/)node_modules/(effect|@effect/[^/]+)/"] }
    },
    {
      name: "observability-at-the-root",
      severity: "error",
      comment:
        "Only the composition root (src/bin.ts, src/cli/agentSetup.ts) imports src/observability; the " +
        "kernel makes spans with effect's own Effect.fn / Effect.withSpan.",
      from: { path: "^src/", pathNot: ["^src/observability/", "^src/bin\\.ts$", "^src/cli/agentSetup\\.ts$"] },
      to: { path: "^src/observability/" }
    },
    {
      name: "stream-only-effect",
      comment:
        "src/stream (reading a Stream without its channel: the model's and the log's) imports only effect " +
        "and itself, so that every part may use it.",
      severity: "error",
      from: { path: "^src/stream/" },
      to: { pathNot: ["^src/stream/", "(^|/)node_modules/effect/"] }
    },
    {
      name: "not-to-unresolvable",
      severity: "error",
      comment: "An import the cruiser cannot resolve: the rules above would not see where it goes.",
      from: { path: "^src/" },
      to: { couldNotResolve: true }
    }
  ],
  options: {
    // packages are not followed, but kept in the graph: observability-only-effect checks which ones are imported
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default", "types"] }
  }
}
