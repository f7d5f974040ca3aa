import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { startFakeOpenAi, type FakeOpenAi } from "../support/FakeOpenAi.ts"
import { chatAttributes, exportBody, hex, otlpSpan } from "../support/Otlp.ts"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { span, trace, uuid } from "../support/Fixtures.ts"

let fake: FakeOpenAi
let server: TestServer
beforeAll(async () => {
  fake = startFakeOpenAi(() => ({ usage: { prompt_tokens: 30, completion_tokens: 12 } }))
  server = await startTestServer({
    TAPEDECK_LLM_BASE_URL: fake.baseUrl,
    TAPEDECK_LLM_API_KEY: "sk-fake",
    TAPEDECK_REPLAY_MONTHLY_ALLOWANCE: "7"
  })
}, 60_000)
afterAll(async () => {
  await server.stop()
  await fake.stop()
}, 60_000)

const usage = async (query = "", key: string = KEY_A) => {
  const response = await server.get(`/api/v1/usage${query}`, key)
  return { status: response.status, body: (await response.json()) as any }
}

const currentMonth = () => new Date().toISOString().slice(0, 7)

describe("GET /api/v1/usage", () => {
  test("a fresh account's current month: zeros, the allowance, the month's bounds", async () => {
    const { status, body } = await usage("", KEY_B)
    expect(status).toBe(200)
    const month = currentMonth()
    const [y, m] = month.split("-").map(Number) as [number, number]
    expect(body).toEqual({
      month,
      periodStart: new Date(Date.UTC(y, m - 1, 1)).toISOString(),
      periodEnd: new Date(Date.UTC(y, m, 1)).toISOString(),
      traces: { recorded: 0, spans: 0 },
      otlp: { requests: 0 },
      replays: { used: 0, allowance: 7, remaining: 7, tokens: 0, cost: "0" },
      evaluations: { runs: 0, judgeTokens: 0, judgeCost: "0" },
      search: { queries: 0 },
      retention: { retentionDays: null, tracesPurged: 0, spansPurged: 0 }
    })
  }, 60_000)

  test("an accepted export counts once however it is written (in its own transaction or after it); a refused one never", async () => {
    const requests = async () => (await usage()).body.otlp.requests as number
    const before = await requests()
    const traceId = hex(16)
    const small = exportBody([otlpSpan({ traceId, attributes: chatAttributes })])
    // Nothing to write: counted after the (empty) write.
    expect((await server.post("/v1/traces", { resourceSpans: [] })).status).toBe(200)
    // A new trace, then the same span again into the trace that now exists: counted by each write's transaction.
    expect((await server.post("/v1/traces", small)).status).toBe(200)
    expect((await server.post("/v1/traces", small)).status).toBe(200)
    // Large exports, several at once (on PostgreSQL prepared on the ingest thread and written by COPY).
    const large = () =>
      exportBody(
        Array.from({ length: 30 }, (_, i) =>
          otlpSpan({
            traceId: hex(16),
            attributes: { ...chatAttributes, "gen_ai.prompt": `question ${i} ${"x".repeat(1000)}` }
          })
        )
      )
    const bodies = Array.from({ length: 4 }, large)
    expect(JSON.stringify(bodies[0]).length).toBeGreaterThan(16 * 1024) // OtlpPreparer's PREPARE_THREAD_MIN_JSON_BYTES
    for (const response of await Promise.all(bodies.map((body) => server.post("/v1/traces", body))))
      expect(response.status).toBe(200)
    // Refused: not counted.
    expect((await server.post("/v1/traces", { resourceSpans: "nope" })).status).toBe(400)
    expect((await requests()) - before).toBe(1 + 2 + 4)
  }, 60_000)

  test("counts traces, spans, OTLP exports, replays and evaluation runs of the account in the month", async () => {
    const before = (await usage()).body
    const other = (await usage("", KEY_B)).body

    // Two traces through the REST API (one deleted afterwards: it was recorded all the same), 3 spans.
    const kept = trace({ spans: [span(), span()] })
    const deleted = trace({ spans: [span()] })
    for (const t of [kept, deleted]) expect((await server.post("/api/v1/traces", t)).status).toBe(200)
    expect((await server.request("DELETE", `/api/v1/traces/${deleted.id}`)).status).toBe(200)

    // Two OTLP exports: one trace of 2 spans, then one of 1 span. A refused export is not counted.
    const traceId = hex(16)
    const root = otlpSpan({ traceId, name: "invoke_agent", attributes: { "gen_ai.operation.name": "invoke_agent" } })
    const child = otlpSpan({ traceId, parentSpanId: root.spanId, attributes: chatAttributes })
    expect((await server.post("/v1/traces", exportBody([root, child]))).status).toBe(200)
    expect(
      (await server.post("/v1/traces", exportBody([otlpSpan({ traceId: hex(16), attributes: chatAttributes })]))).status
    ).toBe(200)
    expect((await server.post("/v1/traces", { resourceSpans: "nope" })).status).toBe(400)

    // One replay (its model call uses 30 + 12 tokens).
    const llm = span({ name: "answer", model: "gpt-4o-mini", input: "question", output: "answer" })
    const source = trace({ spans: [llm] })
    expect((await server.post("/api/v1/traces", source)).status).toBe(200)
    const fork = (await (
      await server.post("/api/v1/forks", {
        trace_id: source.id,
        fork_point_span_id: llm.id,
        modified_input: "other question"
      })
    ).json()) as any
    const replay = await server.post(`/api/v1/forks/${fork.id}/replay`, {})
    expect(replay.status).toBe(200)
    const replayed = (await replay.json()) as any
    expect(replayed.status).toBe("completed")
    const resultTrace = (await (
      await server.get(`/api/v1/traces/${replayed.result_trace_id}?env=sandbox`)
    ).json()) as any
    expect(resultTrace.spanCount).toBeGreaterThan(0)

    // Two answered searches; a refused one is not counted.
    for (const query of ["flights to Lisbon", "hotel"])
      expect((await server.post("/api/v1/search", { query })).status).toBe(200)
    expect((await server.post("/api/v1/search", { query: "" })).status).toBe(400)

    // Two evaluation runs with judge usage (written as the evaluation service records them).
    await server.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const [account] = yield* sql<{ id: string }>`SELECT id FROM accounts WHERE name = 'acme'`
        const evaluationId = uuid()
        yield* sql`
          INSERT INTO evaluations (id, account_id, name, judge_model, criteria)
          VALUES (${evaluationId}, ${account!.id}, 'usage', 'judge', '[]'::jsonb)`
        for (const [tokensIn, tokensOut, cost] of [
          [100, 10, 0.001],
          [200, 20, 0.002]
        ] as const) {
          yield* sql`
            INSERT INTO evaluation_runs (id, evaluation_id, account_id, trace_id, judge_model, rubric_version, status,
                                         input_tokens, output_tokens, cost_usd)
            VALUES (${uuid()}, ${evaluationId}, ${account!.id}, ${kept.id}, 'judge', 'v1', 'queued',
                    ${tokensIn}, ${tokensOut}, ${cost})`
        }
      }).pipe(Effect.orDie)
    )

    const after = (await usage()).body
    // REST 2 (3 spans), OTLP 2 (3 spans), the replay's source (1 span) and its result trace.
    expect(after.traces.recorded - before.traces.recorded).toBe(2 + 2 + 1 + 1)
    expect(after.traces.spans - before.traces.spans).toBe(3 + 3 + 1 + resultTrace.spanCount)
    expect(after.otlp.requests - before.otlp.requests).toBe(2)
    expect(after.search.queries - before.search.queries).toBe(2)
    expect(after.replays).toMatchObject({
      used: before.replays.used + 1,
      allowance: 7,
      remaining: before.replays.remaining - 1
    })
    expect(after.replays.tokens - before.replays.tokens).toBe(42)
    expect(after.evaluations.runs - before.evaluations.runs).toBe(2)
    expect(after.evaluations.judgeTokens - before.evaluations.judgeTokens).toBe(330)
    expect(Number(after.evaluations.judgeCost) - Number(before.evaluations.judgeCost)).toBeCloseTo(0.003, 9)
    // Nothing of it shows on the other account.
    expect((await usage("", KEY_B)).body).toEqual(other)
    // Another month is another count.
    expect((await usage("?month=2020-01")).body).toMatchObject({
      month: "2020-01",
      periodStart: "2020-01-01T00:00:00.000Z",
      periodEnd: "2020-02-01T00:00:00.000Z",
      traces: { recorded: 0, spans: 0 },
      otlp: { requests: 0 },
      replays: { used: 0, remaining: 7 }
    })
    expect((await usage("?month=2026-12")).body.periodEnd).toBe("2027-01-01T00:00:00.000Z")
  }, 60_000)

  test("a malformed month or unknown parameter is a 400; no credentials is a 401", async () => {
    for (const query of [
      "?month=2026-13",
      "?month=2026-00",
      "?month=2026-1",
      "?month=26-01",
      "?month=abc",
      "?month=1969-12",
      "?month=",
      "?colour=red"
    ]) {
      const { status, body } = await usage(query)
      expect({ query, status }).toEqual({ query, status: 400 })
      expect(body).toMatchObject({ code: "validation_failed", retryable: false })
    }
    expect((await server.get("/api/v1/usage", null)).status).toBe(401)
  }, 60_000)
})
