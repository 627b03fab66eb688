/**
 * The Approver (DESIGN §6): answers a tool call the permission rules say to `ask`
 * about. `Actions` writes `permission.asked` before asking and `permission.replied` after.
 *
 * - `once`: run this call;
 * - `always`: run it, and allow the same tool with the same subject for the rest of the session;
 * - `reject`: do not run it; the model reads that it was denied — with the user's message when the
 *   answer is `{ reply: "reject", message }` (what to do instead).
 *
 * Layers: `autoDeny` (the default, and `logbook run`'s when no terminal can ask anyone) and
 * `autoAllow` (`logbook run --yes`). `logbook run` on a terminal asks the user with a prompt
 * (src/cli/approvalPrompt.ts); a program that embeds logbook provides its own.
 */
import { Context, Effect, Layer } from "effect"
import type { CallId, SessionId } from "../domain/Ids.js"
import type { ApprovalReply } from "./Permissions.js"

export type { ApprovalReply } from "./Permissions.js"

/** What the Approver answers: a reply, or a rejection with a message for the model. */
export type ApprovalAnswer = ApprovalReply | { readonly reply: "reject"; readonly message: string }

/** The reply of an answer, and its message (a rejection's, when the user gave one). */
export const answerParts = (answer: ApprovalAnswer): { readonly reply: ApprovalReply; readonly message?: string } =>
  typeof answer === "string" ? { reply: answer } : answer.message.trim() === "" ? { reply: answer.reply } : answer

/** What the Approver is asked about. */
export interface ApprovalRequest {
  readonly sessionId: SessionId
  /** the id of the `permission.asked` event written for this request */
  readonly permissionId: string
  readonly callId: CallId
  readonly tool: string
  /** the command, or the path (workspace-relative; absolute when outside) */
  readonly subject: string
  /** whether the path is outside the workspace */
  readonly outside: boolean
  /** the rule that said `ask` (undefined when no rule matched, or for the loop guard) */
  readonly rule: string | undefined
  /** why it is asked, a sentence for the user */
  readonly reason: string
}

export class Approver extends Context.Tag("logbook/Approver")<
  Approver,
  {
    readonly ask: (request: ApprovalRequest) => Effect.Effect<ApprovalAnswer>
    /** who rejected, for the model's error (default "the user"), e.g. a non-interactive policy */
    readonly rejectedBy?: string | undefined
  }
>() {
  /** Rejects everything that needs approval: the default when nobody can be asked. */
  static readonly autoDeny: Layer.Layer<Approver> = Layer.succeed(Approver, {
    ask: () => Effect.succeed("reject"),
    rejectedBy: "the non-interactive policy (logbook run denies what needs approval unless --yes)"
  })
  /** Approves everything that needs approval, once per call (`--yes`). Denied calls stay denied. */
  static readonly autoAllow: Layer.Layer<Approver> = Layer.succeed(Approver, {
    ask: () => Effect.succeed("once")
  })
}
