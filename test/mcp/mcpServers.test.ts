import { describe, expect, it } from "vitest"
import type { McpPromptInfo } from "../../src/mcp/McpClient.js"
import {
  parsePromptCommand,
  parseResourceCommand,
  promptArguments,
  promptText,
  promptUsage
} from "../../src/mcp/McpServers.js"

const prompt: McpPromptInfo = {
  name: "review",
  description: "",
  arguments: [
    { name: "file", description: "", required: true },
    { name: "focus", description: "", required: false }
  ]
}

describe("MCP prompt commands", () => {
  it("parses /mcp__<server>__<prompt> args and /mcp-resource <server> <uri> [message]", () => {
    expect(parsePromptCommand("/mcp__gh__review a.ts")).toEqual({ server: "gh", prompt: "review", args: "a.ts" })
    expect(parsePromptCommand("/mcp__my-server__p")).toEqual({ server: "my-server", prompt: "p", args: "" })
    expect(parsePromptCommand("/review a.ts")).toBeUndefined()
    expect(parseResourceCommand("/mcp-resource fs file:///a.txt read it")).toEqual({
      server: "fs",
      uri: "file:///a.txt",
      message: "read it"
    })
    expect(parseResourceCommand("/mcp-resource fs")).toBeUndefined()
  })

  it("maps arguments by name, then the rest in order (the last declared one takes the rest of the line)", () => {
    expect(promptArguments(prompt, "a.ts")).toEqual({ file: "a.ts" })
    expect(promptArguments(prompt, "a.ts error handling")).toEqual({ file: "a.ts", focus: "error handling" })
    expect(promptArguments(prompt, "focus=speed a.ts")).toEqual({ file: "a.ts", focus: "speed" })
    expect(promptArguments(prompt, "")).toBe("the prompt review needs file (name=value, or in order)")
    expect(promptArguments({ ...prompt, arguments: [] }, "x")).toBe("the prompt review takes no arguments")
    expect(promptUsage("gh", prompt)).toBe("/mcp__gh__review <file> [focus]")
  })

  it("a prompt's messages become one text: media named, not included; bounded", () => {
    const text = promptText({
      messages: [
        { role: "user", content: { type: "text", text: "Look:" } },
        { role: "user", content: { type: "image", data: "AAAA", mimeType: "image/png" } },
        { role: "assistant", content: { type: "text", text: "Ok." } }
      ]
    })
    expect(text).toBe("Look:\n\n[image image/png, not included]\n\n[assistant]\nOk.")
    const huge = promptText({ messages: [{ role: "user", content: { type: "text", text: "x".repeat(200_000) } }] })
    expect(Buffer.byteLength(huge)).toBeLessThan(70 * 1024)
  })
})
