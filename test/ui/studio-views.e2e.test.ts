import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import type { Browser, Page } from "playwright-core"
import { span, trace, uuid } from "../support/Fixtures.ts"
import { startFakeOpenAi, type FakeOpenAi } from "../support/FakeOpenAi.ts"
import { CHROMIUM_PATH, hasChromium, launchChromium, screenshotDir } from "../support/Chromium.ts"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"

// The Studio's working views in a real Chromium: fork → replay → comparison, the holds queue, sessions,
// evaluations, usage and settings. Elements are found by role and accessible name only.
if (!hasChromium)
  console.warn(`Studio views end-to-end tests skipped: no Chromium at ${CHROMIUM_PATH} (apt-get install chromium)`)

const shots = screenshotDir("studio-views")
const screenshot = (page: Page, name: string) => page.screenshot({ path: `${shots}/${name}.png` })

/** Opens the Studio and signs in through the form, as a person would. */
const signIn = async (page: Page, baseUrl: string, key: string) => {
  await page.goto(`${baseUrl}/ui`)
  await page.getByLabel("API key").fill(key)
  await page.getByRole("button", { name: "Sign in" }).click()
  await page.getByRole("button", { name: "Sign out" }).waitFor()
}

let fake: FakeOpenAi
let server: TestServer
let browser: Browser
let page: Page

beforeAll(async () => {
  if (!hasChromium) return
  // The judge asks for a structured verdict (response_format); model calls of a replay get the default echo of their last user message.
  fake = startFakeOpenAi((request) =>
    request.body?.response_format !== undefined
      ? { content: JSON.stringify({ score: 0.9, reason: "books what was asked" }) }
      : undefined
  )
  server = await startTestServer({
    TAPEDECK_LLM_BASE_URL: fake.baseUrl,
    TAPEDECK_LLM_API_KEY: "sk-fake",
    TAPEDECK_REPLAY_MONTHLY_ALLOWANCE: "100",
    TAPEDECK_RATE_LIMIT_PER_MINUTE: "100000"
  })
  browser = await launchChromium()
  page = await browser.newPage({ viewport: { width: 1400, height: 900 } })
  await signIn(page, server.url, KEY_A)
})
afterAll(async () => {
  if (!hasChromium) return
  await browser.close()
  await server.stop()
  await fake.stop()
})

const browserTest = hasChromium ? test : test.skip

/** A recorded travel run: plan (a model call) → web_search (a tool) → answer (a model call), under one agent root. */
const recordRun = async (sessionId?: string, startedAt = "2026-01-01T00:00:00.000Z") => {
  const root = span({
    span_type: "action",
    name: "agent",
    agent_id: "planner",
    started_at: "2026-01-01T00:00:00.000Z",
    ended_at: "2026-01-01T00:00:10.000Z"
  })
  const plan = span({
    parent_id: root.id,
    name: "plan",
    model: "gpt-4o-mini",
    agent_id: "planner",
    started_at: "2026-01-01T00:00:01.000Z",
    duration_ms: 900,
    input: [
      { role: "system", content: "You book travel." },
      { role: "user", content: "Book Lisbon" }
    ],
    output: "search flights to Lisbon",
    input_tokens: 40,
    output_tokens: 12
  })
  const search = span({
    parent_id: root.id,
    span_type: "tool_call",
    name: "web_search",
    agent_id: "researcher",
    parent_agent_id: "planner",
    started_at: "2026-01-01T00:00:02.000Z",
    output: { results: ["TAP 123 to Lisbon"] }
  })
  const answer = span({
    parent_id: root.id,
    name: "answer",
    model: "gpt-4o-mini",
    agent_id: "planner",
    started_at: "2026-01-01T00:00:04.000Z",
    input: [{ role: "user", content: "summarise the booking" }],
    output: "Booked TAP 123 to Lisbon",
    input_tokens: 30,
    output_tokens: 8
  })
  const t = trace({
    name: "travel",
    status: "completed",
    started_at: startedAt,
    ended_at: "2026-01-01T00:00:10.000Z",
    output: "Booked TAP 123 to Lisbon",
    total_tokens: 90,
    total_duration_ms: 10_000,
    spans: [root, plan, search, answer],
    ...(sessionId ? { session_id: sessionId } : {})
  })
  expect((await server.post("/api/v1/traces", t)).status).toBe(200)
  return { t, root, plan, search, answer }
}

describe("Studio views in Chromium", () => {
  browserTest("Fork here → replay on the server → the comparison, with the changed input highlighted", async () => {
    const run = await recordRun()
    await page.goto(`${server.url}/ui/traces/${run.t.id}?span=${run.plan.id}`)
    await page.getByRole("button", { name: "Fork here" }).click()
    const editor = page.getByRole("dialog", { name: "Fork from span plan" })
    const input = editor.getByLabel("Modified input")
    expect(await input.inputValue()).toContain("Book Lisbon")
    await input.fill(
      JSON.stringify(
        [
          { role: "system", content: "You book travel." },
          { role: "user", content: "Book Porto" }
        ],
        null,
        2
      )
    )
    await editor.getByLabel("Fork name").fill("porto")
    await editor.getByLabel("Mock web_search").check()
    await editor.getByLabel("Mocked output of web_search").fill(JSON.stringify({ results: ["TAP 456 to Porto"] }))
    await screenshot(page, "fork-editor")
    await editor.getByRole("button", { name: "Fork and replay" }).click()

    await page.waitForURL(/\/ui\/forks\/[0-9a-f-]{36}$/)
    await page.getByRole("heading", { name: "Fork porto" }).waitFor()
    const spans = page.getByRole("listbox", { name: "Aligned spans" })
    await spans.waitFor()
    // The copied root pairs with the original; the fork point is new; the re-executed plan call changed.
    await spans.getByRole("option", { name: "same: agent" }).waitFor()
    await spans
      .getByRole("option", { name: /^inserted: / })
      .first()
      .waitFor()
    await spans.getByRole("option", { name: "changed: plan" }).click()
    const detail = page.getByRole("region", { name: "Selected span comparison" })
    await detail.getByRole("figure", { name: "Input" }).waitFor()
    expect(await detail.getByRole("figure", { name: "Input" }).locator("ins").allTextContents()).toContain("Porto")
    expect(await detail.getByRole("figure", { name: "Input" }).locator("del").allTextContents()).toContain("Lisbon")
    await spans.getByRole("option", { name: "changed: web_search" }).click()
    expect(await detail.getByRole("figure", { name: "Output" }).locator("ins").allTextContents()).toContain("456")
    expect(await page.getByRole("group", { name: "Tokens" }).textContent()).toContain("→")
    expect(await page.getByRole("group", { name: "Final output" }).textContent()).toContain("changed")
    await screenshot(page, "fork-comparison")

    // A finished fork replays again as a new generation: a new result trace, compared afresh.
    const forkUrl = page.url()
    const forkId = forkUrl.split("/").pop()!
    const firstResult = ((await (await server.get(`/api/v1/forks/${forkId}`)).json()) as { resultTraceId: string })
      .resultTraceId
    await page.getByRole("button", { name: "Replay again" }).click()
    await page.getByRole("link", { name: firstResult }).waitFor({ state: "detached" })
    await page.getByRole("listbox", { name: "Aligned spans" }).getByRole("option", { name: "changed: plan" }).waitFor()

    // Another account sees neither the fork nor its comparison.
    const other = await browser.newPage()
    await signIn(other, server.url, KEY_B)
    await other.goto(forkUrl)
    expect(await other.getByRole("alert").textContent()).toBe("No such fork in this account.")
    await other.goto(`${server.url}/ui/compare?left=${run.t.id}&right=${run.t.id}`)
    expect(await other.getByRole("alert").textContent()).toBe("One of the traces does not exist in this account.")
    await other.close()

    // The same comparison is reachable for any two traces through /ui/compare.
    const second = await recordRun()
    await page.goto(`${server.url}/ui/traces/${run.t.id}`)
    await page.getByRole("link", { name: "Compare" }).click()
    await page.getByLabel("Other trace").fill(second.t.id)
    await page.getByRole("button", { name: "Compare" }).click()
    await page.getByRole("listbox", { name: "Aligned spans" }).getByRole("option", { name: "same: answer" }).waitFor()
  })

  browserTest("a hold approved in the holds queue is allowed at the agent's next check", async () => {
    await page.goto(`${server.url}/ui/enforcement`)
    await page.getByText("New guardrail").click()
    const form = page.getByRole("form", { name: "New guardrail" })
    await form.getByLabel("Type").selectOption("require_approval")
    await form.getByLabel("Name").fill("approve outgoing mail")
    await form.getByLabel("Parameters (JSON)").fill(JSON.stringify({ tool_patterns: ["send_*"] }))
    await form.getByRole("button", { name: "Create guardrail" }).click()
    await page
      .getByRole("table", { name: "Guardrails list" })
      .getByRole("cell", { name: "approve outgoing mail", exact: true })
      .waitFor()

    const runId = `run-${uuid()}`
    const check = async () => {
      const response = await server.post("/api/v1/enforcement/check", {
        run_id: runId,
        tool_name: "send_email",
        tool_args_hash: "h-1"
      })
      expect(response.status).toBe(200)
      return (await response.json()) as { verdict: string; hold_id?: string }
    }
    const first = await check()
    expect(first.verdict).toBe("hold")
    // The queue polls: the pending hold appears without a reload.
    const hold = page.getByRole("listitem", { name: `Hold: send_email in run ${runId}` })
    await hold.waitFor({ timeout: 15_000 })
    await screenshot(page, "enforcement")
    await hold.getByLabel(`Reason for send_email in run ${runId}`).fill("checked the recipient")
    await hold.getByRole("button", { name: "Approve" }).click()
    await hold.waitFor({ state: "detached" })

    const next = await check()
    expect(next.verdict).toBe("allow")
    const holds = (await (await server.get("/api/v1/enforcement/holds?status=approved")).json()) as {
      items: Array<Record<string, unknown>>
    }
    expect(holds.items.find((h) => h.id === first.hold_id)).toMatchObject({
      status: "approved",
      reason: "checked the recipient"
    })

    // Edit (rename, wider patterns), disable, then delete, from the list.
    await page.getByRole("button", { name: "Edit approve outgoing mail" }).click()
    const edit = page.getByRole("form", { name: "Edit guardrail" })
    await edit.getByLabel("Name").fill("approve mail and calls")
    await edit.getByLabel("Parameters (JSON)").fill(JSON.stringify({ tool_patterns: ["send_*", "call_*"] }))
    await edit.getByRole("button", { name: "Save guardrail" }).click()
    await page.getByRole("button", { name: "Disable approve mail and calls" }).click()
    await page.getByRole("button", { name: "Enable approve mail and calls" }).waitFor()
    const listed = (await (await server.get("/api/v1/guardrails")).json()) as {
      items: Array<{ name: string; enabled: boolean; params: unknown }>
    }
    expect(listed.items.find((g) => g.name === "approve mail and calls")).toMatchObject({
      enabled: false,
      params: { tool_patterns: ["send_*", "call_*"] }
    })
    page.once("dialog", (dialog) => void dialog.accept())
    await page.getByRole("button", { name: "Delete approve mail and calls" }).click()
    await page.getByRole("button", { name: "Edit approve mail and calls" }).waitFor({ state: "detached" })
    expect(((await (await server.get("/api/v1/guardrails")).json()) as { items: Array<unknown> }).items).toHaveLength(0)
  })

  browserTest("a session: its traces in order, the agent graph, an agent opening the traces it ran in", async () => {
    const sessionId = `chat-${uuid().slice(0, 8)}`
    const first = await recordRun(sessionId)
    await recordRun(sessionId, "2026-01-01T00:00:00.500Z")
    await page.goto(`${server.url}/ui/sessions/${sessionId}`)
    const table = page.getByRole("table", { name: "Traces of the session" })
    await table.getByRole("link", { name: "travel" }).first().waitFor()
    // Both traces, oldest first (a header row and one row each).
    expect(await table.getByRole("row").count()).toBe(3)
    expect(await table.getByRole("link", { name: "travel" }).first().getAttribute("href")).toBe(
      `/ui/traces/${first.t.id}`
    )
    await page.getByRole("button", { name: /^Agent researcher:/ }).click()
    const where = page.getByRole("list", { name: "Traces where researcher ran" }).getByRole("link", { name: "travel" })
    await where.nth(1).waitFor()
    expect(await where.count()).toBe(2)
    expect(await where.first().getAttribute("href")).toBe(`/ui/traces/${first.t.id}?span=${first.search.id}`)
    await screenshot(page, "session")
  })

  browserTest("an evaluation: gate from the page, verdict with per-criterion scores and reasons", async () => {
    const run = await recordRun()
    const created = await server.post("/api/v1/evaluations", {
      name: "travel quality",
      criteria: [
        { name: "correct", description: "Books what was asked", weight: 3 },
        { name: "polite", description: "Courteous" }
      ]
    })
    const evaluation = (await created.json()) as { id: string }
    await page.goto(`${server.url}/ui/evaluations`)
    await page.getByRole("link", { name: "travel quality" }).click()
    await page.getByLabel("Trace ids (1 to 50, separated by spaces or commas)").fill(run.t.id)
    await page.getByRole("button", { name: "Run gate" }).click()
    const gate = page.getByRole("region", { name: "Gate result" })
    await gate.getByRole("heading", { name: "PASSED" }).waitFor({ timeout: 30_000 })
    await gate.getByText("books what was asked").first().waitFor({ state: "attached" })
    await page
      .getByRole("table", { name: "Runs", exact: true })
      .getByRole("link", { name: run.t.id.slice(0, 8) })
      .waitFor()
    await screenshot(page, "evaluation")
    expect(evaluation.id).toBeDefined()
  })

  browserTest("usage and settings: create an API key (shown once) and revoke it", async () => {
    await page.goto(`${server.url}/ui/usage`)
    await page.getByRole("group", { name: "Traces recorded" }).waitFor()
    await screenshot(page, "usage")
    await page.goto(`${server.url}/ui/settings`)
    await page.getByLabel("Key name").fill("ci")
    await page.getByRole("button", { name: "Create key" }).click()
    const key = await page.getByLabel("New API key").inputValue()
    expect(key).toStartWith("svc_")
    expect((await server.get("/api/v1/traces", key)).status).toBe(200)
    await screenshot(page, "settings")
    page.once("dialog", (dialog) => void dialog.accept())
    await page.getByRole("button", { name: "Revoke ci" }).click()
    await page.getByRole("button", { name: "Revoke ci" }).waitFor({ state: "detached" })
    expect((await server.get("/api/v1/traces", key)).status).toBe(401)
  })
})
