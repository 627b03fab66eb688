/**
 * The `logbook` executable's program: runs the command tree once with `NodeRuntime.runMain` (STYLE §3).
 * src/entry.ts (dist/bin.js) loads it once Node's compile cache is on.
 * Each command opens the store it needs (the database path comes from its flags), so this file
 * only provides the platform, and the trace exporter when the environment asks for one
 * (`observability/Tracing.ts`).
 *
 * The exit code comes from the program (0 done, 1 failed, 2 usage or config error); an interrupt
 * (SIGINT, SIGTERM, SIGHUP: `cli/signals.ts`) gives 130 and a defect 1. Errors are printed by the program as one sentence,
 * so the runtime's own error reporting is off.
 *
 * What this file imports statically is read at every start; heavy parts that only some commands need (the
 * model SDKs, the model catalog, the interactive screen) are loaded with `import()` where they are
 * used, so `logbook --version` and the read commands start without them.
 */

import type { Teardown } from "@effect/platform/Runtime"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Effect, Exit } from "effect"
import { ExitCode } from "./cli/errors.js"
import { main } from "./cli/main.js"
import { installSignals } from "./cli/signals.js"
import * as Tracing from "./observability/Tracing.js"
import { version } from "./version.js"

// `logbook events … | head` closes stdout early: stop quietly instead of crashing on EPIPE.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(process.exitCode ?? 0)
  throw error
})

// SIGINT, SIGTERM, SIGHUP: the reason each gives, a second one that does not cut the cleanup short
installSignals()

const teardown: Teardown = (exit, onExit) => {
  const code = Exit.isSuccess(exit)
    ? typeof exit.value === "number"
      ? exit.value
      : ExitCode.ok
    : Cause.isInterruptedOnly(exit.cause)
      ? ExitCode.interrupted
      : ExitCode.failed
  process.exitCode = code
  onExit(code)
}

main(process.argv).pipe(
  // spans to the OTLP receiver of OTEL_EXPORTER_OTLP_ENDPOINT, if one is set (docs/observability.md);
  // its scope closes when the command is done, which flushes what is pending
  Effect.provide(Tracing.layer({ serviceVersion: version })),
  Effect.provide(NodeContext.layer),
  NodeRuntime.runMain({ disableErrorReporting: true, disablePrettyLogger: true, teardown })
)
