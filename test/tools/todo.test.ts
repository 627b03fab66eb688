import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Schema } from "effect"
import { MAX_TODOS, TodoInput, todo } from "../../src/tools/todo.js"
import { testContext } from "../support/toolContext.js"

describe("todo", () => {
  it.effect("replaces the task list, records it and shows it back", () =>
    Effect.gen(function* () {
      const ctx = testContext("/w")
      const first = yield* todo.execute(
        {
          todos: [
            { content: "Read the parser", status: "in_progress" },
            { content: "Fix the bug", status: "pending" }
          ]
        },
        ctx
      )
      expect(first.output).toBe("1. [~] Read the parser\n2. [ ] Fix the bug\n\n0 of 2 completed.")
      const second = yield* todo.execute(
        {
          todos: [
            { content: "Read the parser", status: "completed" },
            { content: "Fix the bug", status: "in_progress" },
            { content: "Rewrite it", status: "cancelled" }
          ]
        },
        ctx
      )
      expect(second.output).toBe("1. [x] Read the parser\n2. [~] Fix the bug\n3. [-] Rewrite it\n\n1 of 3 completed.")
      expect(second.metadata).toEqual({ count: 3, completed: 1, inProgress: 1 })
      expect(ctx.todos).toHaveLength(2)
      expect(ctx.todos[1]!.map((t) => t.status)).toEqual(["completed", "in_progress", "cancelled"])
    })
  )

  it.effect("an empty list clears it; a list too long is refused and not recorded", () =>
    Effect.gen(function* () {
      const ctx = testContext("/w")
      expect((yield* todo.execute({ todos: [] }, ctx)).output).toBe("The task list is empty.")
      const many = Array.from({ length: MAX_TODOS + 1 }, (_, i) => ({ content: `t${i}`, status: "pending" as const }))
      const error = yield* Effect.flip(todo.execute({ todos: many }, ctx))
      expect(error.message).toMatch(/51 tasks; keep it to 50 or fewer/)
      expect(ctx.todos).toEqual([[]])
    })
  )

  it("its input refuses an unknown status and an empty task", () => {
    const decode = Schema.decodeUnknownEither(TodoInput)
    expect(Either.isRight(decode({ todos: [{ content: "x", status: "pending" }] }))).toBe(true)
    expect(Either.isLeft(decode({ todos: [{ content: "x", status: "doing" }] }))).toBe(true)
    expect(Either.isLeft(decode({ todos: [{ content: "", status: "pending" }] }))).toBe(true)
  })
})
