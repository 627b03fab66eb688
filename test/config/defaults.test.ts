/**
 * Defaults are written once, by the module that owns them: the config's built-in layer takes the
 * retry policy's and the bash tool's, so the two cannot drift apart.
 */
import { describe, expect, it } from "@effect/vitest"
import { defaults } from "../../src/config/ConfigSchema.js"
import { defaultRetryOptions } from "../../src/model/Retry.js"
import { defaultBashTimeouts } from "../../src/tools/bash.js"
import { defaultSandboxSettings } from "../../src/tools/Sandbox.js"

describe("the config's built-in defaults", () => {
  it("are the retry policy's", () => {
    const { maxAttempts, initialDelayMs, maxDelayMs, maxRetryAfterMs, budgetMs } = defaultRetryOptions
    expect(defaults.retry).toEqual({ maxAttempts, initialDelayMs, maxDelayMs, maxRetryAfterMs, budgetMs })
  })

  it("are the bash tool's and its sandbox's", () => {
    expect(defaults.tools.bash).toMatchObject({
      ...defaultBashTimeouts,
      sandbox: defaultSandboxSettings.mode,
      network: defaultSandboxSettings.network
    })
  })
})
