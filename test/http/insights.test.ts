import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { Detection } from "#layers/evaluations/Detection"
import type { AccountId, TraceId } from "#src/domain/Ids"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { sqlOn, until } from "../support/Until.ts"
import { span, trace, uuid } from "../support/Fixtures.ts"

const KEY_C = "svc_test_key_baseline_0003"
const KEY_D = "svc_test_key_batches_0004"
let server: TestServer
beforeAll(async () => {
  server = await startTestServer({
    TAPEDECK_API_KEYS: `acme=${KEY_A},globex=${KEY_B},baseline=${KEY_C},batches=${KEY_D}`,
    TAPEDECK_RATE_LIMIT_PER_MINUTE: "1000000"
  })
}, 120_000)
afterAll(() => server.stop(), 60_000)

const query = <A extends object>(text: string, ...params: Array<unknown>) => sqlOn(server)<A>(text, ...params)

const terminalJobsDone = () =>
  until(async () => {
    const rows = await query<{ n: number }>(
      `SELECT count(*)::int AS n FROM jobs WHERE kind = 'trace.terminal' AND status IN ('queued', 'running')`
    )
    return rows[0]!.n === 0 ? true : undefined
  }, "the terminal-trace jobs")

const create = async (body: Record<string, unknown>, key = KEY_A) => {
  const response = await server.post("/api/v1/traces", body, key)
  if (response.status !== 200) throw new Error(`${response.status} ${await response.text()}`)
}

const insightsOf = async (traceId: string, key = KEY_A, extra = "") => {
  const response = await server.get(`/api/v1/insights?trace_id=${traceId}&limit=100${extra}`, key)
  expect(response.status).toBe(200)
  return (await response.json()) as any
}

const at = (seconds: number) => new Date(Date.UTC(2026, 0, 1) + seconds * 1000).toISOString()

describe("detection on terminal traces", () => {
  test("failed spans: error spans, spans with an error, spans whose metadata status is failed", async () => {
    const errorSpan = span({ span_type: "error", name: "crash", error: "Traceback: boom" })
    const failedTool = span({ span_type: "tool_call", name: "fetch", error: "timeout after 30 s", input: { url: "a" } })
    const statusFailed = span({ span_type: "action", name: "deploy", metadata: { status: "failed" } })
    const fine = span({ span_type: "llm_call", name: "plan" })
    const t = trace({ status: "failed", spans: [errorSpan, failedTool, statusFailed, fine] })
    await create(t)
    await terminalJobsDone()
    const body = await insightsOf(t.id, KEY_A, "&kind=failed_span")
    expect(body.total).toBe(3)
    const bySpan = new Map(body.items.map((i: any) => [i.details.spanId, i]))
    expect([...bySpan.keys()].sort()).toEqual([errorSpan.id, failedTool.id, statusFailed.id].sort())
    expect(bySpan.get(failedTool.id)).toMatchObject({
      traceId: t.id,
      kind: "failed_span",
      severity: "high",
      message: "span 'fetch' failed: timeout after 30 s",
      details: { spanId: failedTool.id, spanName: "fetch", spanType: "tool_call", error: "timeout after 30 s" },
      id: expect.any(String),
      createdAt: expect.any(String)
    })
    // A running trace is not examined; the same failures in a completed trace are medium.
    const running = trace({ status: "running", spans: [span({ span_type: "error", name: "x" })] })
    await create(running)
    const completed = trace({ status: "completed", spans: [span({ span_type: "error", name: "x" })] })
    await create(completed)
    await terminalJobsDone()
    expect((await insightsOf(running.id)).total).toBe(0)
    expect((await insightsOf(completed.id)).items.map((i: any) => i.severity)).toEqual(["medium"])
  }, 60_000)

  test("tool loops: the same tool with the same arguments (in any key order) repeated 3 times or more", async () => {
    const call = (input: unknown, name = "search") => span({ span_type: "tool_call", name, input })
    const t = trace({
      status: "completed",
      spans: [
        call({ q: "flights to Lisbon", page: 1 }),
        call({ page: 1, q: "flights to Lisbon" }),
        call({ q: "flights to Lisbon", page: 1 }),
        call({ q: "flights to Lisbon", page: 2 }),
        call({ q: "flights to Lisbon", page: 2 }),
        call({ q: "flights to Lisbon", page: 1 }, "book"),
        call({ q: "flights to Lisbon", page: 1 }, "book")
      ]
    })
    await create(t)
    await terminalJobsDone()
    const body = await insightsOf(t.id, KEY_A, "&kind=tool_loop")
    expect(body.total).toBe(1)
    expect(body.items[0]).toMatchObject({
      kind: "tool_loop",
      severity: "medium",
      message: "tool 'search' was called 3 times with the same arguments",
      details: { tool: "search", count: 3 }
    })
    expect(body.items[0].details.spanIds).toHaveLength(3)
  }, 60_000)

  test("tool loops over large arguments (stored as shared parts), and a loop found under another hash is not found twice", async () => {
    const big = {
      q: "ü".repeat(900),
      filters: Array.from({ length: 8 }, (_, i) => ({ field: `f${i}`, value: "x".repeat(300) }))
    }
    const reordered = { filters: big.filters, q: big.q }
    const call = (input: unknown) => span({ span_type: "tool_call", name: "lookup", input })
    const t = trace({
      status: "completed",
      spans: [call(big), call(reordered), call(big), call({ ...big, q: "other" }), call({ ...big, q: "other" })]
    })
    await create(t)
    await terminalJobsDone()
    const [split] = await query<{ n: number }>(
      `SELECT count(*)::int AS n FROM spans WHERE trace_id = $1 AND input_skel IS NOT NULL`,
      t.id
    )
    expect(split!.n).toBe(5)
    const body = await insightsOf(t.id, KEY_A, "&kind=tool_loop")
    expect(body.total).toBe(1)
    expect(body.items[0].details).toMatchObject({ tool: "lookup", count: 3 })
    // The same loop stored under the arguments' hash of another version: running detection again adds nothing.
    await query(`UPDATE insights SET key = 'lookup:0123456789abcdef' WHERE trace_id = $1 AND kind = 'tool_loop'`, t.id)
    const [owner] = await query<{ account_id: string }>(`SELECT account_id FROM traces WHERE id = $1`, t.id)
    const added = await server.run(
      Effect.flatMap(Detection, (d) => d.run(owner!.account_id as AccountId, t.id as TraceId)).pipe(
        Effect.provide(Detection.Default)
      )
    )
    expect(added).toBe(0)
    expect((await insightsOf(t.id, KEY_A, "&kind=tool_loop")).total).toBe(1)
  }, 60_000)

  test("token blow-ups: far above the trace's median, or above the absolute cap", async () => {
    const llm = (input_tokens: number, output_tokens = 0) =>
      span({ span_type: "llm_call", name: `call-${input_tokens}`, input_tokens, output_tokens })
    const huge = llm(4000, 1000)
    const capped = llm(250_000)
    const t = trace({ status: "completed", spans: [llm(100, 20), llm(110), llm(90, 30), llm(120), huge, capped] })
    await create(t)
    await terminalJobsDone()
    const body = await insightsOf(t.id, KEY_A, "&kind=token_blowup")
    expect(body.items.map((i: any) => [i.details.spanId, i.severity, i.details.tokens])).toEqual(
      expect.arrayContaining([
        [huge.id, "medium", 5000],
        [capped.id, "high", 250_000]
      ])
    )
    expect(body.total).toBe(2)
  }, 60_000)

  test("cost and latency far above the account's recent baseline, only with enough history", async () => {
    // Account "baseline" is used only here, so its history is exactly these traces.
    const early = trace({ started_at: at(0), status: "completed", total_cost: 50, total_duration_ms: 900_000 })
    await create(early, KEY_C)
    for (let i = 1; i <= 10; i++) {
      await create(
        trace({ started_at: at(i), status: "completed", total_cost: 0.01 + i / 10_000, total_duration_ms: 1000 }),
        KEY_C
      )
    }
    const normal = trace({ started_at: at(50), status: "completed", total_cost: 0.02, total_duration_ms: 2500 })
    const costly = trace({ started_at: at(100), status: "failed", total_cost: 0.5, total_duration_ms: 60_000 })
    await create(normal, KEY_C)
    await create(costly, KEY_C)
    await terminalJobsDone()
    expect((await insightsOf(early.id, KEY_C)).total).toBe(0)
    expect((await insightsOf(normal.id, KEY_C)).total).toBe(0)
    const body = await insightsOf(costly.id, KEY_C)
    const byKind = new Map(body.items.map((i: any) => [i.kind, i]))
    expect([...byKind.keys()].sort()).toEqual(["cost_anomaly", "latency_anomaly"])
    const cost = byKind.get("cost_anomaly") as any
    expect(cost.severity).toBe("high")
    expect(cost.details).toMatchObject({ value: 0.5, factor: 3 })
    // The median of the 12 traces started earlier (the expensive early one among them).
    expect(cost.details.sample).toBe(12)
    expect(cost.details.baselineMedian).toBeCloseTo(0.01065, 8)
    expect(cost.message).toBe("cost $0.5 is 46.9× the median $0.01065 of the account's last 12 terminal traces")
    expect((byKind.get("latency_anomaly") as any).details).toMatchObject({
      value: 60_000,
      baselineMedian: 1000,
      sample: 12
    })
  }, 60_000)

  test("idempotent: running the terminal-trace job again for a trace adds no insight", async () => {
    const t = trace({
      status: "failed",
      spans: [
        span({ span_type: "error", name: "a" }),
        ...Array.from({ length: 4 }, () => span({ span_type: "tool_call", name: "loop", input: { x: 1 } }))
      ]
    })
    await create(t)
    await terminalJobsDone()
    const before = await insightsOf(t.id)
    expect(before.total).toBe(2)
    const accountId = (await query<{ account_id: string }>(`SELECT account_id FROM traces WHERE id = $1`, t.id))[0]!
      .account_id
    for (let i = 0; i < 2; i++) {
      await query(
        `INSERT INTO jobs (id, account_id, kind, payload, status, max_attempts) VALUES ($1, $2, 'trace.terminal', $3::jsonb, 'queued', 3)`,
        uuid(),
        accountId,
        JSON.stringify({ traceId: t.id, status: "failed" })
      )
    }
    await Bun.sleep(100)
    await terminalJobsDone()
    const after = await insightsOf(t.id)
    expect(after.items.map((i: any) => i.id).sort()).toEqual(before.items.map((i: any) => i.id).sort())
  }, 60_000)
  test("a batch of terminal traces finds exactly what each trace finds alone (baselines included)", async () => {
    // Account "batches" is used only here. Traces of two environments, with every kind of finding and none.
    const traces = Array.from({ length: 22 }, (_, i) => {
      const spans = [
        span({ span_type: "llm_call", name: "plan", input_tokens: i % 5 === 0 ? 250_000 : 100, output_tokens: 10 }),
        ...(i % 3 === 0 ? [span({ span_type: "error", name: `crash-${i}`, error: "boom" })] : []),
        ...(i % 4 === 1
          ? Array.from({ length: 3 + (i % 3) }, () => span({ span_type: "tool_call", name: "search", input: { q: i } }))
          : [])
      ]
      return trace({
        started_at: at(1000 + i),
        status: i % 3 === 0 ? "failed" : "completed",
        metadata: { environment: i >= 20 ? "sandbox" : "production" },
        total_cost: i === 18 || i === 21 ? 5 : 0.01 + i / 1000,
        total_duration_ms: i === 19 ? 600_000 : 1000 + i,
        spans
      })
    })
    for (const t of traces) await create(t, KEY_D)
    await terminalJobsDone()
    const accountId = (
      await query<{ account_id: string }>(`SELECT account_id FROM traces WHERE id = $1`, traces[0]!.id)
    )[0]!.account_id as AccountId
    const found = () =>
      query<{ trace_id: string; kind: string; key: string; severity: string; message: string; details: unknown }>(
        `SELECT trace_id, kind, key, severity, message, details FROM insights WHERE account_id = $1 ORDER BY trace_id, kind, key`,
        accountId
      )
    const byWorker = await found()
    expect(new Set(byWorker.map((r) => r.kind))).toEqual(
      new Set(["failed_span", "tool_loop", "token_blowup", "cost_anomaly", "latency_anomaly"])
    )
    const keys = traces.map((t) => ({ accountId, traceId: t.id as TraceId }))
    const detect = <A>(f: (d: Detection) => Effect.Effect<A>) =>
      server.run(Effect.flatMap(Detection, f).pipe(Effect.provide(Detection.Default)))

    await query(`DELETE FROM insights WHERE account_id = $1`, accountId)
    for (const k of keys) await detect((d) => d.run(k.accountId, k.traceId))
    expect(await found()).toEqual(byWorker)

    await query(`DELETE FROM insights WHERE account_id = $1`, accountId)
    expect(await detect((d) => d.runMany(keys))).toBe(byWorker.length)
    expect(await found()).toEqual(byWorker)
    // Another account's trace in the batch is skipped, and running it again stores nothing new.
    expect(
      await detect((d) => d.runMany([...keys, { accountId: uuid() as AccountId, traceId: traces[0]!.id as TraceId }]))
    ).toBe(0)
  }, 60_000)
})

describe("GET /api/v1/insights", () => {
  test("own account only; filters; pagination; deleted traces' insights disappear; bad queries are 400", async () => {
    const t = trace({
      status: "failed",
      spans: [span({ span_type: "error", name: "a" }), span({ span_type: "error", name: "b" })]
    })
    await create(t)
    await terminalJobsDone()
    expect((await insightsOf(t.id)).total).toBe(2)
    const foreign = await insightsOf(t.id, KEY_B)
    expect(foreign).toEqual({ items: [], total: 0, limit: 100, offset: 0 })
    const all = (await (await server.get("/api/v1/insights?limit=100", KEY_B)).json()) as any
    expect(all.items.every((i: any) => i.traceId !== t.id)).toBe(true)
    const page = (await (await server.get(`/api/v1/insights?trace_id=${t.id}&limit=1&offset=1`)).json()) as any
    expect(page).toMatchObject({ total: 2, limit: 1, offset: 1 })
    expect(page.items).toHaveLength(1)
    const beyond = (await (await server.get(`/api/v1/insights?trace_id=${t.id}&offset=10`)).json()) as any
    expect(beyond).toEqual({ items: [], total: 2, limit: 50, offset: 10 })
    expect((await insightsOf(t.id, KEY_A, "&kind=tool_loop")).total).toBe(0)
    for (const bad of ["?kind=nope", "?trace_id=nope", "?limit=0", "?limit=101", "?offset=-1", "?colour=red"]) {
      const response = await server.get(`/api/v1/insights${bad}`)
      expect(response.status).toBe(400)
      expect(((await response.json()) as any).code).toBe("validation_failed")
    }
    expect((await server.get("/api/v1/insights", null)).status).toBe(401)
    expect((await server.request("DELETE", `/api/v1/traces/${t.id}`)).status).toBe(200)
    expect((await insightsOf(t.id)).total).toBe(0)
  }, 60_000)
})
