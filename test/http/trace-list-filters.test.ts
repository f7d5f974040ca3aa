import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { FastCheck as fc, Schema } from "effect"
import { TraceList } from "#src/domain/Trace"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { uuid } from "../support/Fixtures.ts"
import { exportBody, hex, otlpSpan } from "../support/Otlp.ts"
import { Tapedeck } from "tapedeck/sdk"

// The listing's filters against a reference filter over what was written: traces are written through every path
// (REST create, spans appended and re-sent, PATCH, batch, the SDK, OTLP new and OTLP again) and the reference reads each
// trace's detail (its spans), not the columns the listing filters on, so a write path that leaves them stale fails.
let server: TestServer
beforeAll(async () => {
  // Each run reads every trace written so far: far more than a client's minute of reads.
  server = await startTestServer({ TAPEDECK_RATE_LIMIT_PER_MINUTE: "1000000" })
})

afterAll(() => server.stop())

const expectError = async (response: Response, status: number, code: string) => {
  expect(response.status).toBe(status)
  const body = (await response.json()) as Record<string, unknown>
  expect(body).toEqual({ error: expect.any(String), code, retryable: false })
  return body
}

const MODELS = ["gpt-4o", "claude-3-5", "llama-3", "gpt-4o-mini"]
const NAMES = ["Checkout_flow", "checkout flow", "refund 100%", "plan-trip", "Plan_Trip", "a\\b"]
const PROJECTS = [uuid(), uuid()]
const SESSIONS = ["s-1", "s-2"]
const STATUSES = ["running", "completed", "failed"] as const
const COSTS = [0, 0.01, 0.25, 1.5]
const BASE = Date.UTC(2026, 3, 1)

const arbSpan = fc.record({
  model: fc.option(fc.constantFrom(...MODELS), { nil: undefined }),
  error: fc.boolean(),
  errorType: fc.boolean(),
  cost: fc.option(fc.constantFrom(...COSTS), { nil: undefined }),
  durationMs: fc.integer({ min: 0, max: 5000 })
})
type SpanDraw = typeof arbSpan extends fc.Arbitrary<infer T> ? T : never

const restSpan = (s: SpanDraw, startMs: number, id = uuid()) => ({
  id,
  parent_id: null,
  span_type: s.errorType ? "error" : "llm_call",
  name: "step",
  started_at: new Date(startMs).toISOString(),
  duration_ms: s.durationMs,
  ...(s.model === undefined ? {} : { model: s.model }),
  ...(s.error ? { error: "boom" } : {}),
  ...(s.cost === undefined ? {} : { cost: s.cost })
})

/** One trace written through one path, then possibly changed. */
const arbWrite = fc.record({
  path: fc.constantFrom("rest", "batch", "sdk", "otlp", "otlpTwice"),
  startOffsetS: fc.integer({ min: 0, max: 86_400 * 10 }),
  name: fc.option(fc.constantFrom(...NAMES), { nil: undefined }),
  // Running traces take appended and re-sent spans: drawn as often as the two others together.
  status: fc.oneof(fc.constant("running" as const), fc.constantFrom("completed" as const, "failed" as const)),
  projectId: fc.option(fc.constantFrom(...PROJECTS), { nil: undefined }),
  sessionId: fc.option(fc.constantFrom(...SESSIONS), { nil: undefined }),
  sandbox: fc.boolean(),
  totalCost: fc.option(fc.constantFrom(...COSTS), { nil: undefined }),
  spans: fc.array(arbSpan, { maxLength: 4 }),
  // Re-sends the first span with this (its old model and error are gone) and adds these spans.
  resend: fc.option(arbSpan, { nil: undefined }),
  appended: fc.array(arbSpan, { maxLength: 3 }),
  finish: fc.option(
    fc.record({ status: fc.constantFrom(...STATUSES), cost: fc.option(fc.constantFrom(...COSTS), { nil: undefined }) }),
    {
      nil: undefined
    }
  ),
  remove: fc.boolean()
})
type WriteDraw = typeof arbWrite extends fc.Arbitrary<infer T> ? T : never

const ok = async (response: Response) => {
  if (response.status !== 200) throw new Error(`${response.status} ${await response.text()}`)
  return response.json() as Promise<any>
}

/** Writes the trace; its id. */
const write = async (w: WriteDraw): Promise<string> => {
  const startMs = BASE + w.startOffsetS * 1000
  if (w.path === "otlp" || w.path === "otlpTwice") {
    const traceId = hex(16)
    const rootId = hex(8)
    const otelSpans = (spans: ReadonlyArray<SpanDraw>, offsetMs: number) =>
      spans.map((s, i) =>
        otlpSpan({
          traceId,
          parentSpanId: rootId,
          name: `chat ${i}`,
          startMs: offsetMs + i,
          endMs: offsetMs + i + s.durationMs,
          attributes: {
            "gen_ai.operation.name": "chat",
            ...(s.model === undefined ? {} : { "gen_ai.request.model": s.model }),
            ...(s.cost === undefined ? {} : { "gen_ai.usage.cost": s.cost })
          },
          ...(s.error || s.errorType ? { status: { code: 2, message: "boom" } } : {})
        })
      )
    const root = otlpSpan({ traceId, spanId: rootId, name: w.name ?? "agent run", startMs: 0, endMs: 9000 })
    await ok(await server.post("/v1/traces", exportBody([root, ...otelSpans(w.spans, 10)])))
    if (w.path === "otlpTwice") await ok(await server.post("/v1/traces", exportBody(otelSpans(w.appended, 100))))
    const id = (await ok(await server.get(`/api/v1/traces/${traceId}`))).id as string
    if (w.remove) await ok(await server.request("DELETE", `/api/v1/traces/${id}`))
    return id
  }
  if (w.path === "sdk") return writeWithSdk(w)
  const id = uuid()
  const spans = w.spans.map((s, i) => restSpan(s, startMs + i))
  const body = {
    id,
    started_at: new Date(startMs).toISOString(),
    status: w.status,
    ...(w.name === undefined ? {} : { name: w.name }),
    ...(w.projectId === undefined ? {} : { project_id: w.projectId }),
    ...(w.sessionId === undefined ? {} : { session_id: w.sessionId }),
    ...(w.sandbox ? { metadata: { environment: "sandbox" } } : {}),
    ...(w.totalCost === undefined ? {} : { total_cost: w.totalCost }),
    spans
  }
  const later: Array<{ method: string; path: string; body?: unknown }> = []
  if (w.status === "running") {
    const more = [
      ...(w.resend !== undefined && spans[0] !== undefined ? [restSpan(w.resend, startMs, spans[0].id)] : []),
      ...w.appended.map((s, i) => restSpan(s, startMs + 100 + i))
    ]
    if (more.length > 0) later.push({ method: "POST", path: `/api/v1/traces/${id}/spans`, body: { spans: more } })
  }
  if (w.finish !== undefined) {
    later.push({
      method: "PATCH",
      path: `/api/v1/traces/${id}`,
      body: { status: w.finish.status, ...(w.finish.cost === undefined ? {} : { total_cost: w.finish.cost }) }
    })
  }
  if (w.remove) later.push({ method: "DELETE", path: `/api/v1/traces/${id}` })
  if (w.path === "batch") {
    const answer = await ok(
      await server.post("/api/v1/batch", { operations: [{ method: "POST", path: "/api/v1/traces", body }, ...later] })
    )
    for (const result of answer.results) expect(result.status).toBe(200)
  } else {
    await ok(await server.post("/api/v1/traces", body))
    for (const op of later) await ok(await server.request(op.method, op.path, { body: op.body }))
  }
  return id
}

/** The trace recorded by the SDK: spans flushed as they end, more after a flush, finished unless still running. */
const writeWithSdk = async (w: WriteDraw): Promise<string> => {
  const errors: Array<unknown> = []
  const tapedeck = new Tapedeck({
    baseUrl: server.url,
    apiKey: KEY_A,
    onError: (e) => errors.push(e),
    flushOnExit: false
  })
  const run = tapedeck.startRun({
    ...(w.name === undefined ? {} : { name: w.name }),
    ...(w.projectId === undefined ? {} : { projectId: w.projectId }),
    ...(w.sessionId === undefined ? {} : { sessionId: w.sessionId }),
    ...(w.sandbox ? { metadata: { environment: "sandbox" } } : {})
  })
  const record = (s: SpanDraw) =>
    run
      .startSpan({
        type: s.errorType ? "error" : "llm_call",
        name: "step",
        ...(s.model === undefined ? {} : { model: s.model })
      })
      .end({ ...(s.cost === undefined ? {} : { cost: s.cost }), ...(s.error ? { error: "boom" } : {}) })
  for (const s of w.spans) record(s)
  await run.flush()
  for (const s of w.appended) record(s)
  if (w.status === "running") await run.flush()
  else await run.finish({ status: w.status, ...(w.status === "failed" ? { error: "failed run" } : {}) })
  await tapedeck.close()
  expect(errors).toEqual([])
  if (w.remove) await ok(await server.request("DELETE", `/api/v1/traces/${run.id}`))
  return run.id
}

/** What the reference filter reads of a trace: its detail, and what its spans say. */
interface Fact {
  readonly id: string
  readonly startedAt: string
  readonly environment: string
  readonly status: string
  readonly projectId: string | null
  readonly sessionId: string | null
  readonly name: string | null
  readonly models: ReadonlySet<string>
  readonly hasError: boolean
  readonly totalCost: number
  readonly totalDurationMs: number
}

const factOf = async (id: string): Promise<Fact | undefined> => {
  const response = await server.get(`/api/v1/traces/${id}`)
  if (response.status === 404) return undefined
  const d = await ok(response)
  const spans = d.spans as ReadonlyArray<any>
  return {
    id,
    startedAt: d.startedAt,
    environment: d.environment,
    status: d.status,
    projectId: d.projectId ?? null,
    sessionId: d.sessionId ?? null,
    name: d.name ?? null,
    models: new Set(spans.flatMap((s) => (typeof s.model === "string" ? [s.model] : []))),
    hasError: d.status === "failed" || spans.some((s) => s.error !== undefined || s.span_type === "error"),
    totalCost: Number(d.totalCost),
    totalDurationMs: d.totalDurationMs
  }
}

const arbFilter = fc
  .record(
    {
      environment: fc.option(fc.constantFrom("production", "sandbox"), { nil: undefined }),
      status: fc.option(fc.constantFrom(...STATUSES), { nil: undefined }),
      project_id: fc.option(fc.constantFrom(...PROJECTS), { nil: undefined }),
      session_id: fc.option(fc.constantFrom(...SESSIONS), { nil: undefined }),
      name: fc.option(fc.constantFrom("checkout", "CHECKOUT_", "_", "%", "plan_t", "a\\b", "trip"), { nil: undefined }),
      model: fc.option(fc.constantFrom(...MODELS), { nil: undefined }),
      has_error: fc.option(fc.boolean(), { nil: undefined }),
      date_from: fc.option(fc.integer({ min: 0, max: 86_400 * 10 }), { nil: undefined }),
      date_to: fc.option(fc.integer({ min: 0, max: 86_400 * 10 }), { nil: undefined }),
      min_cost: fc.option(fc.constantFrom(0, 0.01, 0.26, 1.5, 2), { nil: undefined }),
      min_duration_ms: fc.option(fc.constantFrom(0, 1, 2000, 9000), { nil: undefined })
    },
    { requiredKeys: [] }
  )
  .map((f) =>
    // A range that ends before it starts is a 400 (tested below), so draw bounds in order.
    f.date_from !== undefined && f.date_to !== undefined && f.date_from > f.date_to
      ? { ...f, date_from: f.date_to, date_to: f.date_from }
      : f
  )
type FilterDraw = typeof arbFilter extends fc.Arbitrary<infer T> ? T : never

const iso = (offsetS: number) => new Date(BASE + offsetS * 1000).toISOString()

const matches = (f: FilterDraw, t: Fact) =>
  t.environment === (f.environment ?? "production") &&
  (f.status === undefined || t.status === f.status) &&
  (f.project_id === undefined || t.projectId === f.project_id) &&
  (f.session_id === undefined || t.sessionId === f.session_id) &&
  (f.name === undefined || (t.name !== null && t.name.toLowerCase().includes(f.name.toLowerCase()))) &&
  (f.model === undefined || t.models.has(f.model)) &&
  (f.has_error === undefined || t.hasError === f.has_error) &&
  (f.date_from === undefined || Date.parse(t.startedAt) >= BASE + f.date_from * 1000) &&
  (f.date_to === undefined || Date.parse(t.startedAt) <= BASE + f.date_to * 1000) &&
  (f.min_cost === undefined || t.totalCost >= f.min_cost) &&
  (f.min_duration_ms === undefined || t.totalDurationMs >= f.min_duration_ms)

const query = (f: FilterDraw) => {
  const params = new URLSearchParams()
  for (const [k, v] of Object.entries(f)) {
    if (v === undefined) continue
    params.set(k, k === "date_from" || k === "date_to" ? iso(v as number) : String(v))
  }
  return params
}

/** Every page of a filtered listing, followed by cursor: the ids in order, and the first page's total. */
const listAll = async (params: URLSearchParams, key = KEY_A) => {
  const ids: Array<string> = []
  let total: number | undefined
  let cursor: string | undefined
  for (let page = 0; page < 100; page++) {
    const p = new URLSearchParams(params)
    p.set("limit", "7")
    if (cursor !== undefined) p.set("cursor", cursor)
    const body = await ok(await server.get(`/api/v1/traces?${p}`, key))
    Schema.decodeUnknownSync(TraceList)(body)
    total ??= body.total
    ids.push(...body.items.map((t: { id: string }) => t.id))
    if (!body.hasMore) return { ids, total: total! }
    cursor = body.nextCursor
  }
  throw new Error("too many pages")
}

const newestFirst = (a: Fact, b: Fact) =>
  a.startedAt === b.startedAt ? (a.id < b.id ? 1 : -1) : Date.parse(b.startedAt) - Date.parse(a.startedAt)

describe("GET /api/v1/traces filters", () => {
  const written: Array<string> = []

  test("every filter and combination lists exactly the traces a reference filter over their details selects", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(arbWrite, { minLength: 2, maxLength: 5 }),
        fc.array(arbFilter, { minLength: 1, maxLength: 3 }),
        async (writes, filters) => {
          for (const w of writes) written.push(await write(w))
          // Every detail at once: far more reads than the pool has connections, and a deleted trace's 404 interrupts
          // its spans' read in flight (cancelled on PostgreSQL) while the other reads run.
          const facts = (await Promise.all(written.map(factOf))).filter((f): f is Fact => f !== undefined)
          // The drawn filters, and each value of the filters that read the spans (model, has_error) on its own.
          const sweep: Array<FilterDraw> = [
            ...MODELS.map((model) => ({ model })),
            { has_error: true },
            { has_error: false }
          ]
          for (const f of [...filters, ...sweep]) {
            const expected = facts
              .filter((t) => matches(f, t))
              .sort(newestFirst)
              .map((t) => t.id)
            const { ids, total } = await listAll(query(f))
            expect(ids).toEqual(expected)
            expect(total).toBe(expected.length)
            const capped = await ok(await server.get(`/api/v1/traces?${query(f)}&total=capped&limit=1`))
            expect(capped.total).toBe(expected.length)
          }
        }
      ),
      { numRuns: 20 }
    )
  }, 600_000)

  test("another account's traces never match, whatever the filter", async () => {
    const { ids } = await listAll(new URLSearchParams(), KEY_B)
    expect(ids.filter((id) => written.includes(id))).toEqual([])
    const { ids: errors } = await listAll(new URLSearchParams({ has_error: "true" }), KEY_B)
    expect(errors.filter((id) => written.includes(id))).toEqual([])
  })

  test("env=sandbox keeps its meaning and agrees with environment", async () => {
    const id = uuid()
    await ok(await server.post("/api/v1/traces", { id, started_at: iso(1), metadata: { environment: "sandbox" } }))
    const viaEnv = await ok(await server.get("/api/v1/traces?env=sandbox&limit=100"))
    const viaEnvironment = await ok(await server.get("/api/v1/traces?environment=sandbox&limit=100"))
    expect(viaEnv.items.map((t: any) => t.id)).toContain(id)
    expect(viaEnv).toEqual(viaEnvironment)
    expect((await ok(await server.get("/api/v1/traces?env=sandbox&environment=sandbox&limit=100"))).items).toEqual(
      viaEnv.items
    )
    await expectError(await server.get("/api/v1/traces?env=sandbox&environment=production"), 400, "validation_failed")
  })

  test("bad filter values are 400 with the error body", async () => {
    for (const bad of [
      "status=done",
      "environment=staging",
      "env=production",
      "project_id=nope",
      "session_id=",
      "name=",
      `name=${"x".repeat(501)}`,
      "model=",
      `model=${"m".repeat(101)}`,
      "has_error=yes",
      "date_from=yesterday",
      "date_to=2026-02-30T00:00:00Z",
      "date_from=2026-05-02T00:00:00Z&date_to=2026-05-01T00:00:00Z",
      "min_cost=-1",
      "min_cost=abc",
      "min_cost=Infinity",
      "min_duration_ms=1.5",
      "min_duration_ms=-3",
      "total=approx",
      "sort=name",
      "limit=0",
      "cursor=forged"
    ]) {
      await expectError(await server.get(`/api/v1/traces?${bad}`), 400, "validation_failed")
    }
  })
})
