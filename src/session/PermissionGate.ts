/**
 * The permission gate of a tool call (DESIGN §6): before the hooks and before
 * `tool.invoked`, the rules decide whether a decoded call runs, is denied, or is asked about, and
 * an ask goes to the `Approver` between `permission.asked` and `permission.replied`. Actions.ts runs
 * the calls; this decides which may run.
 */
import { Effect, Option } from "effect"
import { make } from "../domain/Events.js"
import { uuidV7 } from "../domain/Ids.js"
import type { SessionState } from "../store/Projection.js"
import type { SessionJournal } from "../store/SessionJournal.js"
import type { RestoreError } from "../store/Snapshots.js"
import { type Approver, answerParts } from "../tools/Approver.js"
import {
  defaultRules,
  evaluate,
  explain,
  type PermissionAction,
  type PermissionResult,
  type PermissionRules,
  stricter
} from "../tools/Permissions.js"
import type { AnyTool, Tools } from "../tools/Tools.js"
import { resolveInWorkspace } from "../tools/Workspace.js"
import type { StepCall } from "./Processor.js"

/*
 * Permissions (DESIGN §6). A tool's `permission(input)` gives its subject: a command,
 * or a path that is resolved in the workspace (real paths) to its workspace-relative path, or its
 * absolute real path and `outside` when it leads outside. `evaluate(options.permissions, …)` then
 * decides with the built-in defaults below the user's rules:
 * - deny: `tool.failed` ("Denied: … Do not retry it; …"), no `tool.invoked`;
 * - ask: `permission.asked`, the `Approver`, `permission.replied`; reject ends like deny, once
 *   runs, always runs and allows that exact tool + subject for the rest of the session (read from
 *   the log: `permission.replied` folded into `SessionState.permissions`, so it outlives the process);
 * - allow: runs (a file tool may then use the outside path: `ToolContext.outsideAllowed`).
 * The loop guard: a call with the same tool and input (JSON) as the two calls just before it in the
 * session is asked about even when the rules allow it.
 */

/** The loop guard: a call the same as this many calls just before it (same tool, same input) is asked about. */
const LOOP_REPEATS = 2

/**
 * Whether this session answered `always` to the same call (tool, subject, inside or outside) before:
 * read from the log (`SessionState.permissions`), so it holds after `--continue` in another process.
 */
const answeredAlways = (state: SessionState, tool: string, subject: string, outside: boolean): boolean =>
  Object.values(state.permissions).some(
    (asked) =>
      asked.reply === "always" &&
      asked.tool === tool &&
      asked.pattern === subject &&
      (asked.outside ?? false) === outside
  )

/**
 * The signatures (tool + input JSON) of the session's last `LOOP_REPEATS` calls that ran (were
 * invoked), oldest first, from the log — calls denied or never complete carry no input there.
 */
const lastCallsOf = (state: SessionState): Array<string> => {
  const ran: Array<string> = []
  // newest first, and only as far back as needed: a long session has thousands of calls
  const parts = Array.from(state.toolParts.values())
  for (let i = parts.length - 1; i >= 0 && ran.length < LOOP_REPEATS; i--) {
    const part = parts[i]!
    const s = part.state
    if (s._tag === "running" || s._tag === "completed" || (s._tag === "error" && s.startedAt !== undefined)) {
      ran.push(JSON.stringify([part.tool, s.input]))
    }
  }
  return ran.reverse()
}

/** What the permission check decided for one call. */
export type Permission =
  | { readonly _tag: "Run"; readonly outsideAllowed: boolean }
  | { readonly _tag: "Denied"; readonly error: string }

/** Where a call is checked: its session's journal and the workspace its paths are resolved in. */
export interface GateInput {
  readonly journal: SessionJournal
  readonly cwd: string
}

/** A call as the `refuse` check of `PermissionGateOptions` sees it: its subject resolved as the rules see it. */
export interface RefusalRequest {
  readonly sessionId: string
  readonly callId: string
  readonly tool: string
  readonly subject: string
  readonly outside: boolean
}

export interface PermissionGateOptions {
  readonly tools: Tools["Type"]
  readonly approver: Approver["Type"]
  /** the permission rules (`ActionsOptions.permissions`); the built-in defaults apply below them */
  readonly rules?: PermissionRules | undefined
  /** rules no decision may be looser than (`ActionsOptions.permissionLimit`) */
  readonly limit?: PermissionRules | undefined
  /** a check above the rules (`ActionsOptions.refuse`): a call it gives a reason for is refused */
  readonly refuse?: ((request: RefusalRequest) => Effect.Effect<string | undefined>) | undefined
}

export interface PermissionGate {
  /** The decision for one decoded call: run it (and whether it may use a path outside), or deny it with the model's error. */
  readonly check: (
    input: GateInput,
    call: StepCall,
    tool: AnyTool,
    decoded: unknown
  ) => Effect.Effect<Permission, RestoreError>
}

/**
 * The subject of a call as the rules see it: a path resolved in the workspace (its relative path,
 * or its real path and `outside` when it leads outside), else the tool's own subject.
 */
const callSubject = (cwd: string, tool: AnyTool, decoded: unknown) =>
  Effect.gen(function* () {
    const asked = tool.permission?.(decoded) ?? {}
    let subject = asked.subject ?? ""
    let outside = false
    if (asked.path !== undefined) {
      const resolved = yield* resolveInWorkspace(cwd, asked.path).pipe(Effect.option)
      if (Option.isSome(resolved)) {
        outside = !resolved.value.inside
        subject = resolved.value.relative ?? resolved.value.real
      } else {
        // cannot be resolved: judged as written; the tool itself then fails with the reason
        subject = asked.path
      }
    }
    return { subject, outside }
  })

/** The rules' decision for a request, held to `limit` (no looser), and how it is explained to the model. */
const decide = (
  rules: PermissionRules,
  limit: PermissionRules | undefined,
  defaults: PermissionRules,
  request: { readonly tool: string; readonly subject: string; readonly outside: boolean }
): { readonly result: PermissionResult; readonly explained: string } => {
  const configured: PermissionResult = evaluate(rules, request, defaults)
  const bound = limit === undefined ? undefined : evaluate(limit, request, defaults)
  const limited = bound !== undefined && stricter(bound.action, configured.action) !== configured.action
  const result = limited ? bound : configured
  const explained = limited
    ? `${explain(result)} (the project's logbook.json can tighten your rules, not loosen them)`
    : explain(result)
  return { result, explained }
}

/** What one ask is about. */
interface Ask {
  readonly call: StepCall
  readonly subject: string
  readonly outside: boolean
  /** asked by the loop guard, not the rules */
  readonly loop: boolean
  readonly result: PermissionResult
  readonly explained: string
}

/**
 * An ask to the Approver (under the session's ask lock): skipped when the same call was answered
 * "always" before (unless the loop guard asks), else `permission.asked`, the answer,
 * `permission.replied`; an ask ended by an interrupt is closed as rejected, marked interrupted.
 */
const askApprover = (approver: Approver["Type"], journal: SessionJournal, ask: Ask) =>
  Effect.gen(function* () {
    const { call, subject, outside, loop } = ask
    const sessionId = journal.sessionId
    if (!loop && answeredAlways(yield* journal.state, call.tool, subject, outside)) {
      return { _tag: "Run", outsideAllowed: outside } satisfies Permission
    }
    const what = subject === "" ? call.tool : `${call.tool} \`${subject}\``
    const reason = loop ? `${what} needs approval: the same call a third time in a row` : ask.explained
    const permissionId = yield* uuidV7
    yield* journal.append([
      make("permission.asked", {
        permissionId,
        callId: call.callId,
        tool: call.tool,
        pattern: subject,
        ...(outside ? { outside: true } : {}),
        ...(call.input !== undefined ? { input: call.input } : {})
      })
    ])
    const answer = yield* approver
      .ask({
        sessionId,
        permissionId,
        callId: call.callId,
        tool: call.tool,
        subject,
        outside,
        rule: loop ? undefined : ask.result.rule,
        reason
      })
      .pipe(
        // an ask ended by an interrupt is closed as rejected, marked interrupted (nobody answered it)
        Effect.onInterrupt(() =>
          journal
            .append([make("permission.replied", { permissionId, reply: "reject", interrupted: true })])
            .pipe(Effect.catchAll((error) => Effect.logWarning(`could not close the ask ${permissionId}`, error)))
        )
      )
    const { reply, message } = answerParts(answer)
    // who rejected, when it was not the user (a policy): the log says so too
    const by = reply === "reject" ? approver.rejectedBy : undefined
    yield* journal.append([
      make("permission.replied", {
        permissionId,
        reply,
        ...(message !== undefined ? { message } : {}),
        ...(by !== undefined ? { by } : {})
      })
    ])
    if (reply === "reject") {
      const who = by ?? "the user"
      return {
        _tag: "Denied",
        error:
          message !== undefined
            ? `Denied: ${reason}, and ${who} rejected it, saying: ${message}\n` +
              "Do not retry it as it was; do what the message says."
            : `Denied: ${reason}, and ${who} rejected it. Do not retry it; do the task another way, ` +
              "or tell the user what you need and why."
      } satisfies Permission
    }
    return { _tag: "Run", outsideAllowed: outside } satisfies Permission
  })

export const makePermissionGate = (options: PermissionGateOptions): PermissionGate => {
  const { tools, approver } = options
  const rules = options.rules ?? {}
  const limit = options.limit
  /**
   * The built-in rules, plus `allow` for every registered tool they do not name: a program that
   * registers a tool means it to run (the user's rules, `"*"` included, still come first) — but for
   * a tool that asks by default (a plugin's: `asksByDefault`).
   */
  const defaults: PermissionRules = {
    ...Object.fromEntries(
      tools.definitions
        .filter((definition) => Option.getOrUndefined(tools.get(definition.name))?.asksByDefault !== true)
        .map((definition) => [definition.name, "allow" as const])
    ),
    ...defaultRules
  }

  /** per session: the signatures (tool + input JSON) of the latest calls, oldest first */
  const recentCalls = new Map<string, Array<string>>()

  /** per session: asks go to the Approver one at a time */
  const askLocks = new Map<string, Effect.Semaphore>()
  const askLockOf = (sessionId: string): Effect.Semaphore => {
    let lock = askLocks.get(sessionId)
    if (lock === undefined) {
      lock = Effect.unsafeMakeSemaphore(1)
      askLocks.set(sessionId, lock)
    }
    return lock
  }

  /**
   * Records the call and says whether it repeats the `LOOP_REPEATS` calls just before it. The first
   * call of a session in this process takes the calls before it from the log (`state`): the guard
   * holds across `--continue`.
   */
  const repeats = (sessionId: string, call: StepCall, state: SessionState): boolean => {
    const signature = JSON.stringify([call.tool, call.input])
    let recent = recentCalls.get(sessionId)
    if (recent === undefined) {
      recent = lastCallsOf(state)
      recentCalls.set(sessionId, recent)
    }
    const repeated = recent.length >= LOOP_REPEATS && recent.slice(-LOOP_REPEATS).every((s) => s === signature)
    recent.push(signature)
    if (recent.length > LOOP_REPEATS) recent.splice(0, recent.length - LOOP_REPEATS)
    return repeated
  }

  /**
   * The permission check of one decoded call (DESIGN §6: before the hooks): the rules decide allow,
   * ask or deny; an ask (or the loop guard) goes to the Approver between `permission.asked` and
   * `permission.replied`.
   */
  const check = (
    input: GateInput,
    call: StepCall,
    tool: AnyTool,
    decoded: unknown
  ): Effect.Effect<Permission, RestoreError> =>
    Effect.gen(function* () {
      const { journal } = input
      const sessionId = journal.sessionId
      const { subject, outside } = yield* callSubject(input.cwd, tool, decoded)
      const refusal =
        options.refuse === undefined
          ? undefined
          : yield* options.refuse({ sessionId, callId: call.callId, tool: call.tool, subject, outside })
      if (refusal !== undefined)
        return { _tag: "Denied", error: `Refused: ${refusal}. Do not retry it.` } satisfies Permission
      const loop = repeats(sessionId, call, yield* journal.state)
      const { result, explained } = decide(rules, limit, defaults, { tool: call.tool, subject, outside })
      const action: PermissionAction = result.action
      if (action === "deny") {
        return {
          _tag: "Denied",
          error:
            `Denied: ${explained}. Do not retry it; do the task another way, ` +
            "or tell the user what you need and why."
        } satisfies Permission
      }
      if (action === "allow" && !loop) return { _tag: "Run", outsideAllowed: outside } satisfies Permission
      // one ask at a time per session; a call answered "always" before (also by an earlier ask of
      // this batch, while this one waited for the lock) is not asked again — unless the loop guard asks
      return yield* askLockOf(sessionId).withPermits(1)(
        askApprover(approver, journal, { call, subject, outside, loop, result, explained })
      )
    })

  return { check }
}
