/**
 * `logbook export --format html` in a real browser: Debian's Chromium, headless, driven by
 * playwright-core (never a downloaded browser). The page of a real run (the built binary against
 * the scripted model server) is opened from its file: the transcript's visible text, markdown
 * rendered, reasoning collapsed, tool parts with their states, a diff's added and removed lines,
 * the timeline — and hostile text from the model and from a command (`<script>`, `<img onerror>`,
 * a `javascript:` link) shows as text and never runs. A screenshot is taken and checked: its size,
 * that it is not blank, and the colour of the pixels where the added and removed diff lines are.
 *
 * Skipped with a notice where Chromium is not installed; CI installs it and sets
 * LOGBOOK_REQUIRE_CHROMIUM=1, which makes a missing browser a failure.
 */
// biome-ignore-all lint/performance/useDomNodeTextContent: Playwright's locator.innerText() is the visible text, which is what is checked
import * as fs from "node:fs"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { type Browser, chromium } from "playwright-core"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { escapeHtml, renderMarkdown } from "../../src/present/exportHtml.js"
import { latestSession, makeJanitor, makeWorkspace } from "../integration/support.js"
import { runCli, sampleSession, scratchDb, scratchDir, seed } from "../support/cli.js"
import { Reply, type ScriptedToolCall } from "../support/scriptedServer.js"

const CHROMIUM = "/usr/bin/chromium"
const hasChromium = fs.existsSync(CHROMIUM)
if (!hasChromium && process.env.LOGBOOK_REQUIRE_CHROMIUM === "1")
  throw new Error(`LOGBOOK_REQUIRE_CHROMIUM=1 but ${CHROMIUM} is not installed: the HTML export tests cannot run`)
if (!hasChromium) console.warn(`${CHROMIUM} not installed: the HTML export browser tests are skipped`)

const janitor = makeJanitor()
afterEach(() => janitor.release())

const call = (id: string, name: string, input: unknown): ScriptedToolCall => ({
  id,
  name,
  arguments: JSON.stringify(input)
})

const HOSTILE_TEXT =
  'Done. <script>window.__pwned = "text"</script> <img src=x onerror="window.__pwned = \'img\'"> ' +
  "[click me](javascript:window.__pwned='link') and ![logo](http://127.0.0.1:9/logo.png)\n\n" +
  "Fixed **sum** in `sum.mjs`:\n\n- one\n- two\n"
const HOSTILE_OUTPUT = "<script>window.__pwned='output'</script><img src=x onerror=\"window.__pwned='out-img'\">"

describe("the HTML escaping (no browser)", () => {
  it("escapes text, and markdown keeps no raw HTML, loads no image and drops unsafe links", () => {
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe("&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;")
    const html = renderMarkdown(HOSTILE_TEXT)
    // no tag of the model's survives (its text is there, escaped), and no javascript: link
    expect(html).not.toMatch(/<(script|img)|href="javascript/i)
    expect(html).toContain("&lt;script&gt;")
    expect(html).toContain("<strong>sum</strong>")
    expect(html).toContain("<code>sum.mjs</code>")
    expect(renderMarkdown("[ok](https://example.org)")).toContain('<a href="https://example.org" rel="noopener')
  })
})

describe.skipIf(!hasChromium)("logbook export --format html, in headless Chromium", () => {
  let browser: Browser
  beforeAll(async () => {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run"
      ]
    })
  })
  afterAll(async () => {
    await browser?.close()
  })

  /** Opens `file` in a fresh page; the dialogs it opened and the requests it made are collected. */
  const open = async (file: string) => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 800 } })
    const dialogs: Array<string> = []
    const requests: Array<string> = []
    page.on("dialog", (dialog) => {
      dialogs.push(dialog.message())
      void dialog.dismiss()
    })
    page.on("request", (request) => requests.push(request.url()))
    await page.goto(pathToFileURL(file).href)
    return { page, dialogs, requests }
  }

  interface BrowserGlobals {
    readonly Image: new () => { src: string; readonly width: number; readonly height: number; decode(): Promise<void> }
    readonly document: {
      createElement(tag: "canvas"): {
        width: number
        height: number
        getContext(kind: "2d"): {
          drawImage(image: unknown, x: number, y: number): void
          getImageData(x: number, y: number, w: number, h: number): { readonly data: ArrayLike<number> }
        } | null
      }
    }
  }

  /** The RGB colours of points of a PNG, decoded by the browser itself (a canvas on a blank page). */
  const pixels = async (
    png: Buffer,
    points: ReadonlyArray<readonly [number, number]>
  ): Promise<ReadonlyArray<readonly [number, number, number]>> => {
    const page = await browser.newPage()
    try {
      return await page.evaluate(
        async ({ data, points }) => {
          // the browser's globals (this file is typed for Node)
          const { document, Image } = globalThis as unknown as BrowserGlobals
          const image = new Image()
          image.src = `data:image/png;base64,${data}`
          await image.decode()
          const canvas = document.createElement("canvas")
          canvas.width = image.width
          canvas.height = image.height
          const context = canvas.getContext("2d")!
          context.drawImage(image, 0, 0)
          return points.map(([x, y]) => {
            const [r, g, b] = Array.from(context.getImageData(x, y, 1, 1).data)
            return [r!, g!, b!] as const
          })
        },
        { data: png.toString("base64"), points: points.map(([x, y]) => [Math.round(x), Math.round(y)] as const) }
      )
    } finally {
      await page.close()
    }
  }

  /** How many different colours a PNG has in a grid of 12 × 12 samples (a blank page has one). */
  const colours = async (png: Buffer, width: number, height: number): Promise<number> => {
    const grid: Array<readonly [number, number]> = []
    for (let i = 0; i < 12; i++)
      for (let j = 0; j < 12; j++) grid.push([(width * (i + 0.5)) / 12, (height * (j + 0.5)) / 12])
    return new Set((await pixels(png, grid)).map((rgb) => rgb.join(","))).size
  }

  it("a real run: transcript, tool states, diff, timeline; hostile text shows as text and never runs; the screenshot", async () => {
    const server = await janitor.server()
    const ws = makeWorkspace(server)
    fs.writeFileSync(path.join(ws.dir, "sum.mjs"), "export const sum = (a, b) => a - b\n")
    server.enqueue(
      Reply.error(503, { message: "overloaded, try again" }),
      Reply.stream({
        reasoning: "The sign is wrong; I should read the file first.",
        text: "Let me look.",
        toolCalls: [call("call_read", "read", { path: "sum.mjs" })]
      }),
      Reply.stream({
        toolCalls: [
          call("call_edit", "edit", { path: "sum.mjs", oldString: "a - b", newString: "a + b" }),
          call("call_bad", "edit", { path: "sum.mjs", oldString: "not there", newString: "x" }),
          call("call_bash", "bash", { command: `printf '%s' '${HOSTILE_OUTPUT.replace(/'/g, "'\\''")}'` })
        ]
      }),
      Reply.text(HOSTILE_TEXT)
    )
    const run = await runCli([...ws.runArgs, "fix <b>sum</b>"])
    expect(run.code).toBe(0)
    const id = await latestSession(ws.db, ws.dir)
    const file = path.join(scratchDir(), "session.html")
    const exported = await runCli(["export", id, "--db", ws.db, "--format", "html", "-o", file])
    expect(exported.stderr).toBe("")
    expect(exported.code).toBe(0)
    // deterministic: the same log gives the same page
    const again = await runCli(["export", id, "--db", ws.db, "--format", "html"])
    expect(again.stdout).toBe(fs.readFileSync(file, "utf8"))

    const { dialogs, page, requests } = await open(file)
    // the hostile text is on the page, as text; none of it ran, nothing was loaded
    const main = await page.locator("main").innerText()
    expect(main).toContain("fix <b>sum</b>")
    expect(main).toContain('<script>window.__pwned = "text"</script>')
    expect(main).toContain("<img src=x onerror=")
    expect(main).toContain("[image: logo] http://127.0.0.1:9/logo.png")
    expect(await page.locator("section.tool[data-call-id=call_bash] .tool-output").innerText()).toMatch(
      new RegExp(`^${HOSTILE_OUTPUT.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\n`)
    )
    expect(await page.evaluate(() => (globalThis as { __pwned?: string }).__pwned)).toBeUndefined()
    expect(dialogs).toEqual([])
    expect(await page.locator("script, img, iframe, object, embed").count()).toBe(0)
    expect(await page.locator("a[href^=javascript]").count()).toBe(0)
    expect(requests).toEqual([pathToFileURL(file).href])
    // markdown rendered: the model's **sum** is bold, its list a list
    expect(await page.locator(".assistant-text strong", { hasText: "sum" }).count()).toBeGreaterThan(0)
    expect(await page.locator(".assistant-text li").allInnerTexts()).toEqual(["one", "two"])
    // reasoning is collapsed: there, not shown until opened
    const reasoning = page.locator("details.reasoning")
    expect(await reasoning.count()).toBe(1)
    expect(await reasoning.locator("pre").isVisible()).toBe(false)
    await reasoning.locator("summary").click()
    expect(await reasoning.locator("pre").innerText()).toBe("The sign is wrong; I should read the file first.")
    // tool parts and their states
    const state = (callId: string) => page.locator(`section.tool[data-call-id=${callId}] .tool-state`).innerText()
    expect(await state("call_read")).toBe("completed")
    expect(await state("call_edit")).toBe("completed")
    expect(await state("call_bad")).toBe("error")
    expect(await page.locator("section.tool[data-call-id=call_bad] .tool-error").innerText()).toMatch(
      /not there|not found/i
    )
    // the diff of the edit
    const diff = page.locator("section.tool[data-call-id=call_edit] .diff")
    expect(await diff.locator(".diff-path").innerText()).toBe("sum.mjs")
    expect(await diff.locator(".dl.del").allInnerTexts()).toEqual(["-export const sum = (a, b) => a - b"])
    expect(await diff.locator(".dl.add").allInnerTexts()).toEqual(["+export const sum = (a, b) => a + b"])
    // the header and the timeline
    expect(await page.locator("header .f-model").innerText()).toBe("local/scripted")
    expect(await page.locator("header .f-cost").innerText()).toMatch(/^\$/)
    expect(await page.locator("section.timeline li.k-retry").innerText()).toMatch(
      /^\+\S+\s*retry\s*attempt 2 in \S+ \(HTTP 503\): .*overloaded, try again$/
    )

    // the screenshot: the page's size, not blank, and the diff lines' colours where they are
    const png = await page.screenshot({ fullPage: true })
    fs.writeFileSync(path.join(path.dirname(file), "session.png"), png)
    expect(png.subarray(1, 4).toString()).toBe("PNG")
    const width = png.readUInt32BE(16)
    const height = png.readUInt32BE(20)
    expect(width).toBe(1000)
    expect(height).toBeGreaterThan(800)
    expect(await colours(png, width, height)).toBeGreaterThan(3)
    const at = async (selector: string) => {
      const box = (await page.locator(selector).boundingBox())!
      const scroll = await page.evaluate(() => (globalThis as unknown as { scrollY: number }).scrollY)
      // the right end of the line, past its text: only the line's background
      return (await pixels(png, [[box.x + box.width - 3, box.y + scroll + box.height / 2]]))[0]
    }
    expect(await at("section.tool[data-call-id=call_edit] .dl.add")).toEqual([204, 255, 216])
    expect(await at("section.tool[data-call-id=call_edit] .dl.del")).toEqual([255, 215, 213])
    // the header band is dark
    expect(await pixels(png, [[3, 3]])).toEqual([[36, 41, 47]])
    await page.close()
  })

  it("interrupted and timed-out calls, and the timeline of a session that was interrupted", async () => {
    const db = scratchDb()
    await seed(db, [{ id: "s1", events: sampleSession() }])
    const file = path.join(scratchDir(), "s1.html")
    expect((await runCli(["export", "s1", "--db", db, "--format", "html", "-o", file])).code).toBe(0)
    const { page } = await open(file)
    const state = (callId: string) => page.locator(`section.tool[data-call-id=${callId}] .tool-state`).innerText()
    expect(await state("call-ok")).toBe("completed")
    expect(await state("call-int")).toBe("interrupted")
    expect(await state("call-slow")).toBe("error")
    expect(await page.locator("section.tool[data-call-id=call-slow] .tool-detail").innerText()).toBe("30s · timed out")
    expect(await page.locator("section.timeline li").allInnerTexts()).toEqual([
      expect.stringMatching(/^\+1\.0s\s*turn\s*turn started$/),
      expect.stringMatching(/interrupt\s*read call-int interrupted \(user\)$/),
      expect.stringMatching(/^\+35s\s*timeout\s*bash call-slow timed out after 30s$/),
      expect.stringMatching(/interrupt\s*turn interrupted \(user\)$/)
    ])
    expect(await page.locator("header h1").innerText()).toBe("Fix the failing test")
    expect(await page.locator("header .f-duration").innerText()).toBe("35s")
    await page.close()
  })
})
