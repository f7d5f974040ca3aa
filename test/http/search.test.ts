import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { FastCheck as fc, Schema } from "effect"
import { SearchResult } from "#src/domain/Search"
import { KINDS, relevanceSpans, score } from "../fixtures/search/relevance.ts"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { span, trace, uuid } from "../support/Fixtures.ts"

let server: TestServer
// The default poll interval (500 ms), so that "searchable within 2 s" is measured as configured by default.
beforeAll(async () => {
  server = await startTestServer({ TAPEDECK_JOB_POLL_MS: "500" })
})
afterAll(() => server.stop())

const PROJECT_1 = uuid()
const PROJECT_2 = uuid()
const spans = relevanceSpans()
/** Four traces of 81 spans: project and status vary by trace (the status filter is the trace's). */
const traces: Array<any> = [0, 1, 2, 3].map((i) => ({
  ...trace({
    project_id: i % 2 === 0 ? PROJECT_1 : PROJECT_2,
    status: (["completed", "failed", "running", "completed"] as const)[i],
    spans: spans.filter((_, n) => n % 4 === i).map((s) => s.span)
  })
}))
const traceOf = new Map<string, any>(traces.flatMap((t) => t.spans.map((s: any) => [s.id as string, t])))

const search = async (body: unknown, key = KEY_A) => {
  const response = await server.post("/api/v1/search", body, key)
  const json = (await response.json()) as any
  if (response.status === 200) Schema.decodeUnknownSync(SearchResult)(json)
  return { status: response.status, body: json }
}
const ids = (body: any): Array<string> => body.spans.map((s: any) => s.id)

/** Waits until the account has no pending search jobs and no span without a vector. */
const indexed = async (key = KEY_A, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const d = (await (await server.get("/api/v1/diagnostics", key)).json()) as any
    if (d.search.pending_jobs === 0 && d.search.stale_spans === 0) return d
    if (Date.now() > deadline) throw new Error(`not indexed in time: ${JSON.stringify(d)}`)
    await Bun.sleep(100)
  }
}

beforeAll(async () => {
  for (const t of traces) expect((await server.post("/api/v1/traces", t)).status).toBe(200)
  await indexed()
}, 120_000)

describe("relevance (offline embedder)", () => {
  // The gate was 0.8 while a word list tuned on these very queries fed the ranking; without it, the figure that
  // matters is on the held-out half of the agent-runs set (test/layers/search-relevance.test.ts).
  test("recall@10 and nDCG@10 over 36 queries and 324 spans; fails below recall@10 = 0.7", async () => {
    const ranked = new Map<string, Array<string>>()
    for (const kind of KINDS) {
      for (const q of [kind.query, kind.paraphrase]) {
        const { status, body } = await search({ query: q, limit: 10 })
        expect(status).toBe(200)
        ranked.set(q, ids(body))
      }
    }
    const natural = score((q) => ranked.get(q)!, spans, "query")
    const paraphrased = score((q) => ranked.get(q)!, spans, "paraphrase")
    const weak = natural.perQuery.filter((q) => q.recall < 0.67).map((q) => `${q.recall.toFixed(2)} ${q.query}`)
    console.log(
      `search relevance, offline embedder: recall@10 = ${natural.recallAt10.toFixed(3)}, nDCG@10 = ${natural.ndcgAt10.toFixed(3)}` +
        ` (${KINDS.length} queries, ${spans.length} spans); paraphrased queries (reported, not gated):` +
        ` recall@10 = ${paraphrased.recallAt10.toFixed(3)}, nDCG@10 = ${paraphrased.ndcgAt10.toFixed(3)}` +
        (weak.length > 0 ? `\n  weakest: ${weak.join("; ")}` : "")
    )
    expect(natural.recallAt10).toBeGreaterThanOrEqual(0.7)
  }, 60_000)

  test("the issue's example: the runs where the agent gave up after a timeout", async () => {
    const { body } = await search({ query: "the runs where the agent gave up after a timeout", limit: 10 })
    const kinds = ids(body).map((id) => spans.find((s) => s.span.id === id)?.kind)
    expect(kinds.filter((k) => k === "upstream-timeout").length).toBeGreaterThanOrEqual(3)
  })
})

describe("POST /api/v1/search", () => {
  test("answers Span objects as GET /traces/{id} renders them, with trace_id, cosine similarity, score and matching legs, by score", async () => {
    const { status, body } = await search({ query: "credit card declined" })
    expect(status).toBe(200)
    expect(body.spans.length).toBe(20)
    const first = body.spans[0]
    const detail = (await (await server.get(`/api/v1/traces/${first.trace_id}`)).json()) as any
    const stored = detail.spans.find((s: any) => s.id === first.id)
    const { match, score, similarity, trace_id, ...rendered } = first
    expect(rendered).toEqual(stored)
    expect(trace_id).toBe(traceOf.get(first.id)!.id)
    for (const s of body.spans) expect(s.similarity).toBeGreaterThanOrEqual(-1)
    for (const s of body.spans) expect(s.similarity).toBeLessThanOrEqual(1)
    // In the order of score (ties: the higher cosine first); each hit names the legs that found it.
    for (let i = 1; i < body.spans.length; i++) {
      const [a, b] = [body.spans[i - 1], body.spans[i]]
      expect(a.score > b.score || (a.score === b.score && a.similarity >= b.similarity)).toBe(true)
    }
    for (const s of body.spans) {
      expect(s.match.length).toBeGreaterThan(0)
      for (const leg of s.match) expect(["lexical", "vector"]).toContain(leg)
      // The score is the reciprocal-rank fusion of the legs named (each adds at most 1 / 61), plus 1 for a
      // protected lexical match (one of the lexical leg's first ten holding half the query's weight).
      expect(s.score).toBeGreaterThan(0)
      const isProtected = s.score >= 1
      if (isProtected) expect(s.match).toContain("lexical")
      expect(s.score - (isProtected ? 1 : 0)).toBeLessThanOrEqual(s.match.length / 61 + 1e-12)
    }
    // A keyword query: its best lexical matches are protected, at most ten of them.
    expect(match).toContain("lexical")
    expect(score).toBeGreaterThanOrEqual(1)
    expect(body.spans.filter((s: any) => s.score >= 1).length).toBeLessThanOrEqual(10)
    expect(spans.find((s) => s.span.id === first.id)!.kind).toBe("card-declined")
  })

  test("each filter narrows to exactly the matching spans, and filters combine", async () => {
    const all = spans.map((s) => s.span as any)
    const cases: Array<[Record<string, unknown>, (s: any) => boolean]> = [
      [{ project_id: PROJECT_1 }, (s) => traceOf.get(s.id)!.project_id === PROJECT_1],
      [{ status: "failed" }, (s) => traceOf.get(s.id)!.status === "failed"],
      [{ status: "running" }, (s) => traceOf.get(s.id)!.status === "running"],
      [{ model: "claude-haiku" }, (s) => s.model === "claude-haiku"],
      [{ span_type: "tool_result" }, (s) => s.span_type === "tool_result"],
      [{ date_from: "2026-01-15T00:00:00Z" }, (s) => s.started_at >= "2026-01-15T00:00:00.000Z"],
      [{ date_to: "2026-01-03T00:00:00Z" }, (s) => s.started_at <= "2026-01-03T00:00:00.000Z"],
      [{ min_cost: 0.09 }, (s) => s.cost >= 0.09],
      [{ min_duration_ms: 4800 }, (s) => s.duration_ms >= 4800],
      [
        { span_type: "llm_call", status: "completed", min_cost: 0.05 },
        (s) => s.span_type === "llm_call" && traceOf.get(s.id)!.status === "completed" && s.cost >= 0.05
      ],
      [
        {
          project_id: PROJECT_2,
          model: "gpt-4o-mini",
          date_from: "2026-01-02T00:00:00Z",
          date_to: "2026-01-10T00:00:00Z"
        },
        (s) =>
          traceOf.get(s.id)!.project_id === PROJECT_2 &&
          s.model === "gpt-4o-mini" &&
          s.started_at >= "2026-01-02T00:00:00.000Z" &&
          s.started_at <= "2026-01-10T00:00:00.000Z"
      ],
      [{ model: "no-such-model" }, () => false]
    ]
    for (const [filters, matches] of cases) {
      const expected = all
        .filter(matches)
        .map((s) => s.id)
        .sort()
      expect(expected.length).toBeLessThan(all.length)
      const { status, body } = await search({ query: "payment failed", filters, limit: 100 })
      expect(status).toBe(200)
      const got = ids(body).sort()
      if (expected.length <= 100) {
        // Not fewer than exist: every matching span comes back, and nothing else.
        expect(got).toEqual(expected)
      } else {
        expect(got.length).toBe(100)
        for (const id of got) expect(expected).toContain(id)
      }
    }
  })

  test("pagination: pages are consecutive slices of one ranking", async () => {
    const query = { query: "booking a trip" }
    const whole = ids((await search({ ...query, limit: 30 })).body)
    const pages: Array<string> = []
    for (const offset of [0, 10, 20]) pages.push(...ids((await search({ ...query, limit: 10, offset })).body))
    expect(pages).toEqual(whole)
    expect(new Set(whole).size).toBe(30)
    expect(ids((await search({ ...query, limit: 20, offset: 320 })).body).length).toBe(4)
    expect(ids((await search({ ...query, offset: 10_000 })).body)).toEqual([])
  })

  test("strict request and filters: a 400 with the error body for anything not in the contract", async () => {
    const bad: Array<unknown> = [
      {},
      { query: "" },
      { query: 5 },
      { query: "x", limit: 0 },
      { query: "x", limit: 101 },
      { query: "x", limit: 2.5 },
      { query: "x", offset: -1 },
      { query: "x", colour: "red" },
      { query: "x", filters: { colour: "red" } },
      { query: "x", filters: { span_type: "banana" } },
      { query: "x", filters: { status: "done" } },
      { query: "x", filters: { project_id: "not-a-uuid" } },
      { query: "x", filters: { date_from: "yesterday" } },
      { query: "x", filters: { min_cost: "cheap" } },
      { query: "x", filters: { min_duration_ms: 1.5 } },
      { query: "x", filters: [] },
      "not json"
    ]
    for (const body of bad) {
      const response = await server.post("/api/v1/search", body)
      expect(response.status).toBe(400)
      const json = (await response.json()) as any
      expect(json.code).toBe("validation_failed")
      expect(typeof json.error).toBe("string")
      expect(json.retryable).toBe(false)
    }
    expect((await server.post("/api/v1/search", { query: "x" }, null)).status).toBe(401)
    // Any text is a valid query, even one with no word in it or full-text syntax.
    for (const query of ["!!!", "a & | b:* !(c)", "'; DROP TABLE spans; --", "日本語のクエリ", "x".repeat(10_000)]) {
      expect((await search({ query })).status).toBe(200)
    }
  })

  test("a soft-deleted trace's spans leave the results at once", async () => {
    const unique = span({
      name: "quokka_migration",
      span_type: "tool_call",
      output: "the quokka herd migrated to the zebra reserve"
    })
    const t = trace({ spans: [unique] })
    expect((await server.post("/api/v1/traces", t)).status).toBe(200)
    await indexed()
    expect(ids((await search({ query: "quokka migration zebra", limit: 3 })).body)).toContain(unique.id)
    expect((await server.request("DELETE", `/api/v1/traces/${t.id}`)).status).toBe(200)
    expect(ids((await search({ query: "quokka migration zebra", limit: 100 })).body)).not.toContain(unique.id)
  })

  test("a span is searchable within 2 s of its write (REST and OTLP), with the default 500 ms job poll", async () => {
    const unique = span({ name: "platypus_audit", span_type: "tool_call", output: "platypus inventory audited" })
    const started = Date.now()
    expect((await server.post("/api/v1/traces", trace({ spans: [unique] }))).status).toBe(200)
    while (!ids((await search({ query: "platypus audit", limit: 3 })).body).includes(unique.id)) {
      expect(Date.now() - started).toBeLessThan(2000)
      await Bun.sleep(25)
    }
    const otlpStarted = Date.now()
    const otlp = {
      resourceSpans: [
        {
          resource: { attributes: [{ key: "service.name", value: { stringValue: "svc" } }] },
          scopeSpans: [
            {
              spans: [
                {
                  traceId: "5b8efff798038103d269b633813fc60c",
                  spanId: "eee19b7ec3c1b174",
                  name: "narwhal_census",
                  kind: 1,
                  startTimeUnixNano: "1767225600000000000",
                  endTimeUnixNano: "1767225601000000000",
                  attributes: [{ key: "output", value: { stringValue: "counted every narwhal in the fjord" } }]
                }
              ]
            }
          ]
        }
      ]
    }
    expect((await server.post("/v1/traces", otlp)).status).toBe(200)
    for (;;) {
      const names = (await search({ query: "narwhal census", limit: 3 })).body.spans.map((s: any) => s.name)
      if (names.includes("narwhal_census")) break
      expect(Date.now() - otlpStarted).toBeLessThan(2000)
      await Bun.sleep(25)
    }
  })

  test("isolation (property): account B's searches never return account A's spans, whatever the query and filters", async () => {
    // B gets copies of some of A's spans (new ids), so that a leak in either direction would rank high.
    const copies = spans.slice(0, 60).map((s) => ({ ...s.span, id: uuid() }))
    const bTrace = trace({ project_id: PROJECT_1, status: "completed", spans: copies })
    expect((await server.post("/api/v1/traces", bTrace, KEY_B)).status).toBe(200)
    await indexed(KEY_B)
    const aIds = new Set(spans.map((s) => s.span.id as string))
    const bIds = new Set(copies.map((s) => s.id as string))
    const filters = fc.record(
      {
        project_id: fc.constant(PROJECT_1),
        status: fc.constantFrom("running", "completed", "failed"),
        span_type: fc.constantFrom("llm_call", "tool_call", "tool_result", "action"),
        min_cost: fc.constantFrom(0, 0.05)
      },
      { requiredKeys: [] }
    )
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.constantFrom(...KINDS.map((k) => k.query)), fc.string({ minLength: 1, maxLength: 40 })),
        filters,
        fc.integer({ min: 1, max: 100 }),
        async (query, f, limit) => {
          const b = await search({ query, filters: f, limit }, KEY_B)
          const a = await search({ query, filters: f, limit }, KEY_A)
          expect(b.status).toBe(200)
          expect(a.status).toBe(200)
          for (const id of ids(b.body)) expect(aIds.has(id)).toBe(false)
          for (const id of ids(a.body)) expect(bIds.has(id)).toBe(false)
          for (const s of b.body.spans) expect(s.trace_id).toBe(bTrace.id)
        }
      ),
      { numRuns: 25 }
    )
  }, 60_000)

  test("diagnostics: embedder, index mode and pending work; authenticated", async () => {
    expect((await server.get("/api/v1/diagnostics", null)).status).toBe(401)
    const d = await indexed()
    expect(d.search.embedder).toMatch(/^offline:/)
    expect(d.search.embedder_kind).toBe("offline")
    expect(d.search.dimensions).toBe(256)
    expect(d.search.index_mode).toBe(server.env.DATABASE_URL ? "exact-fallback" : "pgvector-hnsw")
    expect(d.search.indexed_spans).toBeGreaterThanOrEqual(spans.length)
  })
})
