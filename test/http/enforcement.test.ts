import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { span, trace, uuid } from "../support/Fixtures.ts"

let server: TestServer
beforeAll(async () => {
  server = await startTestServer({ TAPEDECK_RATE_LIMIT_PER_MINUTE: "1000000" })
})
afterAll(() => server.stop())

const policy = async (body: Record<string, unknown>, key = KEY_A) => {
  const response = await server.post("/api/v1/guardrails", body, key)
  expect(response.status).toBe(200)
  return (await response.json()) as any
}
const check = async (body: Record<string, unknown>, key = KEY_A) => {
  const response = await server.post("/api/v1/enforcement/check", body, key)
  expect(response.status).toBe(200)
  return (await response.json()) as any
}
const project = () => uuid()

describe("policies at their boundaries", () => {
  test("budget_usd: spending up to the budget is allowed, a cent past it is blocked by that policy", async () => {
    const p = project()
    const budget = await policy({ type: "budget_usd", project_id: p, params: { max_usd: 1 } })
    const run = uuid()
    expect(await check({ run_id: run, project_id: p, proposed_usd: 0.6 })).toEqual({
      verdict: "allow",
      policy_id: null,
      policy_type: null,
      reason: "no policy blocks or holds this action"
    })
    expect((await check({ run_id: run, project_id: p, proposed_usd: 0.4 })).verdict).toBe("allow")
    const blocked = await check({ run_id: run, project_id: p, proposed_usd: 0.01 })
    expect(blocked).toMatchObject({ verdict: "block", policy_id: budget.id, policy_type: "budget_usd" })
    expect(blocked.reason).toContain("$1")
    // Blocked actions are not counted: a cheaper one is still refused, a free one allowed.
    expect((await check({ run_id: run, project_id: p, proposed_usd: 0 })).verdict).toBe("allow")
    // Another project is not subject to it.
    expect((await check({ run_id: run, project_id: project(), proposed_usd: 5 })).verdict).toBe("allow")
  })

  test("token_budget, max_steps, deny/allow lists, model allow list, loop breaker and rate", async () => {
    const p = project()
    await policy({ type: "token_budget", project_id: p, params: { max_tokens: 100 } })
    await policy({ type: "max_steps", project_id: p, params: { max_steps: 5 } })
    await policy({ type: "tool_denylist", project_id: p, params: { patterns: ["shell.*", "rm"] } })
    await policy({ type: "model_allowlist", project_id: p, params: { patterns: ["gpt-4o*"] } })
    await policy({ type: "loop_breaker", project_id: p, params: { max_repeats: 2 } })
    const run = uuid()
    const c = (extra: Record<string, unknown>) => check({ run_id: run, project_id: p, ...extra })
    expect((await c({ proposed_tokens: 100 })).verdict).toBe("allow")
    expect((await c({ proposed_tokens: 1 })).policy_type).toBe("token_budget")
    expect((await c({ step_index: 4 })).verdict).toBe("allow")
    expect((await c({ step_index: 5 })).policy_type).toBe("max_steps")
    expect((await c({ tool_name: "shell.exec" })).policy_type).toBe("tool_denylist")
    expect((await c({ tool_name: "shellexec" })).verdict).toBe("allow")
    expect((await c({ model: "gpt-4o-mini" })).verdict).toBe("allow")
    expect((await c({ model: "claude-3" })).policy_type).toBe("model_allowlist")
    expect((await c({ tool_name: "search", tool_args_hash: "h1" })).verdict).toBe("allow")
    expect((await c({ tool_name: "search", tool_args_hash: "h1" })).verdict).toBe("allow")
    const looped = await c({ tool_name: "search", tool_args_hash: "h1" })
    expect(looped.policy_type).toBe("loop_breaker")
    expect((await c({ tool_name: "search", tool_args_hash: "h2" })).verdict).toBe("allow")

    const q = project()
    await policy({ type: "rate", project_id: q, params: { max_calls: 3, window_seconds: 60 } })
    const r = uuid()
    for (let i = 0; i < 3; i++) expect((await check({ run_id: r, project_id: q })).verdict).toBe("allow")
    expect((await check({ run_id: r, project_id: q })).policy_type).toBe("rate")
  })

  test("block wins over hold, and the first blocking policy in creation order is named", async () => {
    const p = project()
    await policy({ type: "require_approval", project_id: p, params: { tool_patterns: ["pay"] } })
    const first = await policy({ type: "tool_denylist", project_id: p, params: { patterns: ["pay"] } })
    await policy({ type: "tool_allowlist", project_id: p, params: { patterns: ["search"] } })
    const decision = await check({ run_id: uuid(), project_id: p, tool_name: "pay" })
    expect(decision).toMatchObject({ verdict: "block", policy_id: first.id })
  })
})

describe("holds", () => {
  test("hold → same hold while pending → approve (once) → allow → next time a new hold; deny → block with reason", async () => {
    const p = project()
    const approval = await policy({ type: "require_approval", project_id: p, params: { tool_patterns: ["wire_*"] } })
    const run = uuid()
    const action = { run_id: run, project_id: p, tool_name: "wire_money", tool_args_hash: "abc" }
    const held = await check(action)
    expect(held).toMatchObject({ verdict: "hold", policy_id: approval.id, policy_type: "require_approval" })
    expect(typeof held.hold_id).toBe("string")
    expect((await check(action)).hold_id).toBe(held.hold_id)
    const pending = (await (await server.get("/api/v1/enforcement/holds?status=pending")).json()) as any
    expect(pending.items.map((h: any) => h.id)).toContain(held.hold_id)
    const approved = await server.post(`/api/v1/enforcement/holds/${held.hold_id}/approve`, { reason: "looks fine" })
    expect(approved.status).toBe(200)
    expect(await approved.json()).toMatchObject({ status: "approved", decidedBy: expect.any(String) })
    expect((await check(action)).verdict).toBe("allow")
    const again = await check(action)
    expect(again.verdict).toBe("hold")
    expect(again.hold_id).not.toBe(held.hold_id)
    expect((await server.post(`/api/v1/enforcement/holds/${held.hold_id}/deny`, {})).status).toBe(409)
    await server.post(`/api/v1/enforcement/holds/${again.hold_id}/deny`, { reason: "not today" })
    const denied = await check(action)
    expect(denied.verdict).toBe("block")
    expect(denied.reason).toContain("not today")
  })

  test("an expired hold counts as denied", async () => {
    const p = project()
    await policy({
      type: "require_approval",
      project_id: p,
      params: { tool_patterns: ["deploy"], expires_in_seconds: 1 }
    })
    const action = { run_id: uuid(), project_id: p, tool_name: "deploy" }
    const held = await check(action)
    await Bun.sleep(1100)
    const expired = await check(action)
    expect(expired.verdict).toBe("block")
    expect(expired.reason).toContain("expired")
    expect((await server.post(`/api/v1/enforcement/holds/${held.hold_id}/approve`, {})).status).toBe(409)
  })
})

describe("the check", () => {
  test("strict body and limits", async () => {
    for (const bad of [
      {},
      { run_id: "" },
      { run_id: "x".repeat(201) },
      { run_id: "r", colour: 1 },
      { run_id: "r", proposed_usd: -1 },
      { run_id: "r", step_index: 1.5 },
      { run_id: "r", tool_name: "t".repeat(201) }
    ]) {
      expect((await server.post("/api/v1/enforcement/check", bad)).status).toBe(400)
    }
    expect(
      (await server.post("/api/v1/enforcement/check", { run_id: "x".repeat(200), tool_name: "t".repeat(200) })).status
    ).toBe(200)
  })

  test("concurrent checks against a budget never allow more than the budget", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 2, max: 12 }), fc.integer({ min: 1, max: 5 }), async (n, cents) => {
        const p = project()
        await policy({ type: "budget_usd", project_id: p, params: { max_usd: 0.1 } })
        const run = uuid()
        const decisions = await Promise.all(
          Array.from({ length: n }, () => check({ run_id: run, project_id: p, proposed_usd: cents / 100 }))
        )
        const allowed = decisions.filter((d) => d.verdict === "allow").length
        expect(allowed * cents).toBeLessThanOrEqual(10)
        expect(allowed).toBe(Math.min(n, Math.floor(10 / cents)))
        // Each check is recorded exactly once, with the verdict it answered (a fail-closed block is written just after).
        let recorded: Array<any> = []
        for (let i = 0; i < 50 && recorded.length < n; i++) {
          if (i > 0) await Bun.sleep(20)
          recorded = ((await (await server.get(`/api/v1/enforcement/decisions?run_id=${run}&limit=100`)).json()) as any)
            .items
        }
        expect(recorded.map((d: any) => d.verdict).sort()).toEqual(decisions.map((d) => d.verdict).sort())
      }),
      { numRuns: 8 }
    )
  }, 60_000)

  test("decisions are recorded and listed by run; blocks appear in the trace they name", async () => {
    const p = project()
    await policy({ type: "tool_denylist", project_id: p, params: { patterns: ["danger"] } })
    const root = span()
    const t = trace({ spans: [root] })
    await server.post("/api/v1/traces", t)
    // The trace's own indexing is done before the check, so the block's span must be indexed on its own.
    const indexed = (spanType: string) => async () => {
      for (let i = 0; i < 100; i++) {
        if (i > 0) await Bun.sleep(100)
        const result = (await (
          await server.post("/api/v1/search", { query: "enforcement block step", filters: { span_type: spanType } })
        ).json()) as any
        if (result.spans.some((s: any) => s.trace_id === t.id)) return true
      }
      return false
    }
    expect(await indexed("llm_call")()).toBe(true)
    const run = uuid()
    await check({ run_id: run, project_id: p, trace_id: t.id, tool_name: "danger", step_index: 3 })
    await check({ run_id: run, project_id: p, tool_name: "safe" })
    let items: Array<any> = []
    for (let i = 0; i < 50 && items.length < 2; i++) {
      items = ((await (await server.get(`/api/v1/enforcement/decisions?run_id=${run}`)).json()) as any).items
      await Bun.sleep(20)
    }
    expect(items.map((d) => d.verdict).sort()).toEqual(["allow", "block"])
    // Decision ids are UUIDv7, in the order the checks were made.
    const idOf = (verdict: string) => items.find((d) => d.verdict === verdict).id as string
    for (const d of items) expect(d.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    expect(idOf("block") < idOf("allow")).toBe(true)
    expect(items.find((d) => d.verdict === "block")).toMatchObject({
      trace_id: t.id,
      step_index: 3,
      policy_type: "tool_denylist"
    })
    // The span is added off the hot path, after the answer: read the trace until it is there (or give up).
    let annotated = false
    for (let i = 0; i < 100 && !annotated; i++) {
      if (i > 0) await Bun.sleep(50)
      const detail = (await (await server.get(`/api/v1/traces/${t.id}`)).json()) as any
      annotated = detail.spans.some((s: any) => s.name === "enforcement: block")
    }
    expect(annotated).toBe(true)
    // Like any span, it is indexed for search.
    expect(await indexed("action")()).toBe(true)
  }, 60_000)
})

describe("guardrails CRUD and isolation", () => {
  test("create, list, get, patch (params validated for the type), delete; another account sees none of it", async () => {
    const g = await policy({ type: "max_steps", name: "short runs", params: { max_steps: 10 } })
    expect(g).toMatchObject({
      type: "max_steps",
      name: "short runs",
      enabled: true,
      params: { max_steps: 10 },
      projectId: null
    })
    expect((await server.post("/api/v1/guardrails", { type: "max_steps", params: { max_steps: 0 } })).status).toBe(400)
    expect((await server.post("/api/v1/guardrails", { type: "nope", params: {} })).status).toBe(400)
    expect(
      (await server.post("/api/v1/guardrails", { type: "max_steps", params: { max_steps: 3, extra: 1 } })).status
    ).toBe(400)
    const patched = await server.request("PATCH", `/api/v1/guardrails/${g.id}`, {
      body: { enabled: false, params: { max_steps: 20 } }
    })
    expect(await patched.json()).toMatchObject({ enabled: false, params: { max_steps: 20 } })
    expect(
      (await server.request("PATCH", `/api/v1/guardrails/${g.id}`, { body: { params: { max_usd: 1 } } })).status
    ).toBe(400)
    expect((await server.get(`/api/v1/guardrails/${g.id}`, KEY_B)).status).toBe(404)
    expect((await server.request("DELETE", `/api/v1/guardrails/${g.id}`, { key: KEY_B })).status).toBe(404)
    const theirs = (await (await server.get("/api/v1/guardrails", KEY_B)).json()) as any
    expect(theirs.items.map((x: any) => x.id)).not.toContain(g.id)
    expect(((await (await server.get("/api/v1/enforcement/holds", KEY_B)).json()) as any).items).toEqual([])
    const ownDecisions = ((await (await server.get("/api/v1/enforcement/decisions?limit=500")).json()) as any).items
    expect(ownDecisions.length).toBeGreaterThan(0)
    const theirDecisions = ((await (await server.get("/api/v1/enforcement/decisions?limit=500", KEY_B)).json()) as any)
      .items
    expect(theirDecisions.map((d: any) => d.id).some((id: string) => ownDecisions.some((o: any) => o.id === id))).toBe(
      false
    )
    // Approving or denying another account's hold is a 404.
    const p = project()
    await policy({ type: "require_approval", project_id: p, params: { tool_patterns: ["x"] } })
    const held = await check({ run_id: uuid(), project_id: p, tool_name: "x" })
    expect((await server.post(`/api/v1/enforcement/holds/${held.hold_id}/approve`, {}, KEY_B)).status).toBe(404)
    expect((await server.request("DELETE", `/api/v1/guardrails/${g.id}`)).status).toBe(200)
    expect((await server.get(`/api/v1/guardrails/${g.id}`)).status).toBe(404)
  })

  test("one account's policies never decide another account's checks, even for the same run id", async () => {
    const run = uuid()
    await policy({ type: "tool_denylist", params: { patterns: ["only-a-denies-this"] } }, KEY_A)
    expect((await check({ run_id: run, tool_name: "only-a-denies-this" }, KEY_B)).verdict).toBe("allow")
    expect((await check({ run_id: run, tool_name: "only-a-denies-this" }, KEY_A)).verdict).toBe("block")
  })
})
