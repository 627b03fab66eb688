/**
 * The `todo` tool: the agent's task list for the session, kept as events (`todo.updated`) and so in
 * the projection (`SessionState.todos`). Each call replaces the whole list; the output shows it back.
 */
import { Effect, Schema } from "effect"
import { TodoStatus } from "../domain/Events.js"
import { defineTool, ToolFailure, type ToolOutput } from "./Tools.js"
import { nonEmptyString } from "./toolInput.js"

/** At most this many items: a task list, not a backlog. */
export const MAX_TODOS = 50

export const TodoInput = Schema.Struct({
  todos: Schema.Array(
    Schema.Struct({
      content: nonEmptyString('The task, in a few words (e.g. "Fix the failing parser test").'),
      status: TodoStatus.annotations({
        description: "pending: not started; in_progress: being worked on now; completed: done; cancelled: dropped."
      })
    })
  ).annotations({ description: "The whole task list, in order. It replaces the previous list." })
})
export type TodoInput = typeof TodoInput.Type

const mark = { pending: "[ ]", in_progress: "[~]", completed: "[x]", cancelled: "[-]" } as const

/** The list as the model reads it back. */
export const renderTodos = (todos: TodoInput["todos"]): string => {
  if (todos.length === 0) return "The task list is empty."
  const done = todos.filter((t) => t.status === "completed").length
  return [
    ...todos.map((t, i) => `${i + 1}. ${mark[t.status]} ${t.content}`),
    "",
    `${done} of ${todos.length} completed.`
  ].join("\n")
}

export const todo = defineTool<TodoInput>({
  name: "todo",
  description: [
    "Keeps your task list for this session: call it with the WHOLE list each time (it replaces the previous one).",
    "- Use it for work with several steps: write the steps down first, then keep the list current as you go.",
    "- Exactly one task should be in_progress while you work; mark a task completed as soon as it is done, not in batches at the end.",
    "- Drop tasks that no longer apply as cancelled rather than deleting them silently.",
    `- At most ${MAX_TODOS} tasks. Skip the list for a single, simple request.`
  ].join("\n"),
  input: TodoInput,
  execute: (input, context) =>
    Effect.gen(function* () {
      if (input.todos.length > MAX_TODOS) {
        return yield* new ToolFailure({
          message: `The task list has ${input.todos.length} tasks; keep it to ${MAX_TODOS} or fewer (merge small ones).`
        })
      }
      const items = input.todos.map((t) => ({ content: t.content, status: t.status }))
      yield* context.updateTodos(items)
      const inProgress = items.filter((t) => t.status === "in_progress").length
      return {
        output: renderTodos(items),
        metadata: { count: items.length, completed: items.filter((t) => t.status === "completed").length, inProgress }
      } satisfies ToolOutput
    })
})
