import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { type FakeOpenAi, startFakeOpenAi } from "../support/FakeOpenAi.ts"
import { span, trace, uuid } from "../support/Fixtures.ts"
import { fillPath, type OpenApiDoc, operations } from "../support/OpenApiFuzz.ts"
import { exportBody, hex, otlpSpan } from "../support/Otlp.ts"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { connectStream, subscribed, wsUrl } from "./stream-client.ts"

/**
 * Account A creates one of every kind of record; account B then tries to read, change, delete, list, search,
 * batch, subscribe to and call MCP tools on each of them. B must get 404 or an empty result, and no response B
 * ever receives may contain any of A's ids or words.
 */
let fake: FakeOpenAi
let server: TestServer
const clients: Array<Client> = []
let mcpB: Client | undefined

/** A's records. */
const A: Record<string, string> = {}
/** Every string that identifies A's data: B must never see any of them. */
const secrets: Array<string> = []
const WORD = `quokka${hex(4)}zanzibar`
const SESSION = `session-${WORD}`
const PROJECT = uuid()
const RUN = `run-${WORD}`
const TOOL = `secret_tool_${hex(3)}`
/** Every response B received, with the request that asked for it (an id B itself sent may be echoed back). */
const bTraces = new Set<string>()
const seenByB: Array<{ readonly request: string; readonly response: string }> = []

const json = JSON.stringify
const ok = async (r: Promise<Response> | Response, status = 200) => {
  const response = await r
  const text = await response.text()
  if (response.status !== status) throw new Error(`expected ${status}, got ${response.status} ${text}`)
  return JSON.parse(text) as any
}
/** A request as B: records the body, which must not leak anything of A. */
const asB = async (method: string, path: string, body?: unknown, context = "") => {
  const response = await server.request(method, path, { key: KEY_B, ...(body === undefined ? {} : { body }) })
  const text = await response.text()
  seenByB.push({
    request: `${method} ${path} ${body === undefined ? "" : json(body)} ${context}`,
    response: `${response.status} ${text}`
  })
  let parsed: any = undefined
  try {
    parsed = JSON.parse(text)
  } catch {
    parsed = text
  }
  return { status: response.status, body: parsed, text }
}
const leaks = (text: string) => secrets.filter((s) => text.includes(s))
/** A's secrets in `text`, except those B itself sent in `request` (a 404 may echo the id it was asked for). */
const expectNoLeak = (text: string, request = "") => expect(leaks(text).filter((s) => !request.includes(s))).toEqual([])

const waitUntil = async <T>(label: string, check: () => Promise<T | undefined>, timeoutMs = 45_000): Promise<T> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${label}`)
    await Bun.sleep(100)
  }
}

const connectMcp = async (key: string) => {
  const client = new Client({ name: "isolation-test", version: "1.0.0" })
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
      requestInit: { headers: { "x-service-key": key } }
    })
  )
  clients.push(client)
  return client
}
const callTool = async (client: Client, name: string, args: Record<string, unknown>) => {
  const result = (await client.callTool({ name, arguments: args })) as {
    isError?: boolean
    content: Array<{ type: string; text: string }>
  }
  const text = result.content.map((c) => c.text).join("\n")
  if (client === mcpB) seenByB.push({ request: `mcp ${name} ${json(args)}`, response: text })
  return { isError: result.isError === true, text }
}

beforeAll(async () => {
  fake = startFakeOpenAi((request) =>
    request.body?.response_format?.type === "json_object"
      ? { content: json({ score: 0.8, reason: "fine" }) }
      : { content: `replayed ${WORD}` }
  )
  server = await startTestServer({
    TAPEDECK_LLM_BASE_URL: fake.baseUrl,
    TAPEDECK_LLM_API_KEY: "sk-fake",
    TAPEDECK_LLM_MAX_RETRIES: "0",
    TAPEDECK_RATE_LIMIT_PER_MINUTE: "1000000"
  })

  // Traces: a failed one with an error span (→ terminal job → failed_span insight), in a session and a project.
  const root = span({
    name: `root ${WORD}`,
    span_type: "action",
    input: `plan the ${WORD} trip`,
    agent_id: `planner-${WORD}`
  })
  const llm = span({
    name: `ask ${WORD}`,
    parent_id: root.id,
    model: `model-${WORD}`,
    input: `what about ${WORD}?`,
    output: `${WORD} is lovely`,
    input_tokens: 10,
    output_tokens: 5,
    cost: 0.01
  })
  const tool = span({
    name: `search ${WORD}`,
    parent_id: llm.id,
    span_type: "tool_call",
    input: { q: WORD },
    output: { hits: 3 }
  })
  const error = span({ name: `boom ${WORD}`, parent_id: root.id, span_type: "error", error: `failure ${WORD}` })
  const failed = trace({
    name: `trace ${WORD}`,
    status: "failed",
    session_id: SESSION,
    project_id: PROJECT,
    input: WORD,
    output: WORD,
    metadata: { word: WORD },
    spans: [root, llm, tool, error]
  })
  const created = await ok(server.post("/api/v1/traces", failed))
  Object.assign(A, {
    trace: failed.id,
    rootSpan: root.id,
    llmSpan: llm.id,
    toolSpan: tool.id,
    errorSpan: error.id,
    terminalJob: created.jobId
  })
  // A running trace for the live stream and PATCH attempts.
  const running = trace({ name: `running ${WORD}`, session_id: SESSION, spans: [span({ name: `live ${WORD}` })] })
  await ok(server.post("/api/v1/traces", running))
  A.running = running.id

  // OTLP.
  const otlpTraceId = hex(16)
  await ok(
    server.post(
      "/v1/traces",
      exportBody([otlpSpan({ traceId: otlpTraceId, name: `otlp ${WORD}`, attributes: { "session.id": SESSION } })])
    )
  )
  const listed = await ok(server.get("/api/v1/traces?limit=100"))
  A.otlpTrace = listed.items.find((t: any) => t.name === `otlp ${WORD}`)?.id
  A.otlpRawTraceId = otlpTraceId

  // Fork and a server replay (the fake provider answers).
  const fork = await ok(
    server.post("/api/v1/forks", {
      trace_id: failed.id,
      fork_point_span_id: llm.id,
      modified_input: `fork ${WORD}`,
      name: `fork ${WORD}`
    })
  )
  A.fork = fork.id
  const replay = await ok(server.post(`/api/v1/forks/${fork.id}/replay`, {}))
  if (replay.result_trace_id) A.replayTrace = replay.result_trace_id
  if (replay.execution_id) A.execution = replay.execution_id

  // A private evaluation and a run.
  const evaluation = await ok(
    server.post("/api/v1/evaluations", {
      name: `eval ${WORD}`,
      criteria: [{ name: `crit-${WORD}`, description: WORD }]
    })
  )
  A.evaluation = evaluation.id
  const run = await ok(server.post(`/api/v1/evaluations/${evaluation.id}/run`, { trace_ids: [failed.id] }))
  A.run = run.runs[0].id

  // An eval rule with a webhook (creation only: no delivery is expected to succeed).
  const rule = await ok(
    server.post("/api/v1/eval-rules", {
      evaluation_id: evaluation.id,
      name: `rule ${WORD}`,
      filter: { name_pattern: `never-${WORD}-*` },
      webhook_url: `https://hooks.example.com/${WORD}`
    })
  )
  A.rule = rule.id
  A.webhookSecret = rule.webhookSecret

  // Guardrails, a hold and decisions.
  A.approvalPolicy = (
    await ok(
      server.post("/api/v1/guardrails", {
        type: "require_approval",
        name: `approve ${WORD}`,
        params: { tool_patterns: [`${TOOL}*`] }
      })
    )
  ).id
  A.budgetPolicy = (
    await ok(server.post("/api/v1/guardrails", { type: "budget_usd", name: `budget ${WORD}`, params: { max_usd: 1 } }))
  ).id
  const held = await ok(
    server.post("/api/v1/enforcement/check", { run_id: RUN, tool_name: `${TOOL}_x`, trace_id: failed.id })
  )
  expect(held.verdict).toBe("hold")
  A.hold = held.hold_id
  const blocked = await ok(server.post("/api/v1/enforcement/check", { run_id: RUN, tool_name: "web", proposed_usd: 5 }))
  expect(blocked.verdict).toBe("block")

  // An asynchronous batch (a job), and an API key.
  const batch = await ok(
    server.post("/api/v1/batch", { async: true, operations: [{ method: "GET", path: `/api/v1/traces/${failed.id}` }] }),
    202
  )
  A.batchJob = batch.job_id
  const key = await ok(server.post("/api/v1/api-keys", { name: `key ${WORD}` }))
  Object.assign(A, { apiKey: key.id, apiKeySecret: key.key, apiKeyPrefix: key.prefix })

  // Wait for the background work: the insight, the evaluation run, the batch job, the search index.
  A.insight = await waitUntil("an insight of A's failed trace", async () => {
    const insights = await ok(server.get(`/api/v1/insights?trace_id=${failed.id}`))
    return insights.items[0]?.id as string | undefined
  })
  await waitUntil("A's evaluation run", async () => {
    const detail = await ok(server.get(`/api/v1/evaluations/${evaluation.id}`))
    return detail.runs.some((r: any) => r.id === A.run && (r.status === "completed" || r.status === "failed"))
      ? true
      : undefined
  })
  await waitUntil("A's batch job", async () =>
    (await ok(server.get(`/api/v1/jobs/${A.batchJob}`))).status === "completed" ? true : undefined
  )
  // Indexed: no indexing job left, and A's own search finds every span of its trace (the positive control).
  // (Enforcement's "enforcement: hold" action span is never indexed, so stale_spans does not reach 0 here.)
  await waitUntil(
    "A's spans indexed for search",
    async () => {
      const d = await ok(server.get("/api/v1/diagnostics"))
      if (d.search.pending_jobs !== 0) return undefined
      const found = await ok(server.post("/api/v1/search", { query: WORD, limit: 100 }))
      const ids = new Set(found.spans.map((s: any) => s.id))
      return [A.rootSpan, A.llmSpan, A.toolSpan, A.errorSpan].every((id) => ids.has(id)) ? true : undefined
    },
    60_000
  )

  for (const [k, v] of Object.entries(A)) {
    expect(typeof v === "string" && v.length > 0 ? k : `${k} missing`).toBe(k)
  }
  secrets.push(WORD, ...Object.values(A).filter((v) => v.length >= 8))

  // B's own data: one trace, so that B's lists are not trivially empty.
  const bTrace = trace({ name: "b's trace", session_id: "b-session", spans: [span({ name: "b step" })] })
  await ok(server.post("/api/v1/traces", bTrace, KEY_B))
  bTraces.add(bTrace.id)
}, 180_000)

afterAll(async () => {
  for (const c of clients) await c.close().catch(() => {})
  await server?.stop()
  await fake?.stop()
}, 60_000)

/** A valid request for each operation that takes a path id, using A's record of that kind. */
const attempts: Record<string, { ids: () => Record<string, string>; body?: () => unknown }> = {
  "GET /api/v1/traces/{traceId}": { ids: () => ({ traceId: A.trace! }) },
  "PATCH /api/v1/traces/{traceId}": {
    ids: () => ({ traceId: A.running! }),
    body: () => ({ status: "completed", output: "hijacked" })
  },
  "DELETE /api/v1/traces/{traceId}": { ids: () => ({ traceId: A.trace! }) },
  "POST /api/v1/traces/{traceId}/spans": {
    ids: () => ({ traceId: A.running! }),
    body: () => ({ spans: [span({ name: "intruder" })] })
  },
  "GET /api/v1/forks/{forkId}": { ids: () => ({ forkId: A.fork! }) },
  "POST /api/v1/forks/{forkId}/replay": { ids: () => ({ forkId: A.fork! }), body: () => ({}) },
  "GET /api/v1/guardrails/{id}": { ids: () => ({ id: A.approvalPolicy! }) },
  "PATCH /api/v1/guardrails/{id}": { ids: () => ({ id: A.approvalPolicy! }), body: () => ({ enabled: false }) },
  "DELETE /api/v1/guardrails/{id}": { ids: () => ({ id: A.budgetPolicy! }) },
  "POST /api/v1/enforcement/holds/{holdId}/approve": { ids: () => ({ holdId: A.hold! }), body: () => ({}) },
  "POST /api/v1/enforcement/holds/{holdId}/deny": { ids: () => ({ holdId: A.hold! }), body: () => ({ reason: "no" }) },
  "GET /api/v1/jobs/{jobId}": { ids: () => ({ jobId: A.batchJob! }) },
  "GET /api/v1/sessions/{sessionId}": { ids: () => ({ sessionId: encodeURIComponent(SESSION) }) },
  "GET /api/v1/sessions/{sessionId}/graph": { ids: () => ({ sessionId: encodeURIComponent(SESSION) }) },
  "DELETE /api/v1/api-keys/{keyId}": { ids: () => ({ keyId: A.apiKey! }) },
  "GET /api/v1/evaluations/{evaluationId}": { ids: () => ({ evaluationId: A.evaluation! }) },
  "DELETE /api/v1/evaluations/{evaluationId}": { ids: () => ({ evaluationId: A.evaluation! }) },
  "POST /api/v1/evaluations/{evaluationId}/run": {
    ids: () => ({ evaluationId: A.evaluation! }),
    body: () => ({ trace_ids: [A.trace!] })
  },
  "POST /api/v1/evaluations/{evaluationId}/gate": {
    ids: () => ({ evaluationId: A.evaluation! }),
    body: () => ({ trace_ids: [A.trace!] })
  },
  "GET /api/v1/eval-rules/{id}": { ids: () => ({ id: A.rule! }) },
  "DELETE /api/v1/eval-rules/{id}": { ids: () => ({ id: A.rule! }) },
  "GET /api/v1/eval-rules/{id}/deliveries": { ids: () => ({ id: A.rule! }) }
}

/**
 * Routes whose path id names no record of anyone's: a project id is a label each account gives its own traces, so B
 * setting a retention for A's project id sets B's own (the retention test below), never A's.
 */
const ownLabels = new Set(["PUT /api/v1/retention/projects/{projectId}"])

describe("isolation: B against A's records, route by route", () => {
  test("every operation with a path id: B gets a 404 for A's record (reads, changes, deletes, runs, approvals)", async () => {
    const doc = (await (await server.get("/openapi.json", null)).json()) as OpenApiDoc
    const withIds = operations(doc)
      .filter((o) => o.pathParams.length > 0)
      .map((o) => `${o.method} ${o.path}`)
    // A new route with a path id must be added to the matrix.
    expect(withIds.filter((r) => !(r in attempts) && !ownLabels.has(r))).toEqual([])
    for (const [route, attempt] of Object.entries(attempts)) {
      const [method, template] = route.split(" ") as [string, string]
      const r = await asB(method, fillPath(template, attempt.ids()), attempt.body?.())
      expect(`${route} → ${r.status}`).toBe(`${route} → 404`)
      expect(r.body).toMatchObject({ code: "not_found", retryable: false })
      // Also with the id upper-cased, and by Bearer.
      const upper = await server.request(
        method,
        fillPath(template, Object.fromEntries(Object.entries(attempt.ids()).map(([k, v]) => [k, v.toUpperCase()]))),
        {
          key: null,
          headers: { authorization: `Bearer ${KEY_B}` },
          ...(attempt.body ? { body: attempt.body() } : {})
        }
      )
      expect(`${route} (upper case, bearer) → ${upper.status}`).toBe(`${route} (upper case, bearer) → 404`)
    }
    // B also cannot reach the OTLP trace, the replay's result trace or the other trace through their ids.
    for (const id of [A.otlpTrace!, A.replayTrace!, A.running!])
      expect((await asB("GET", `/api/v1/traces/${id}`)).status).toBe(404)
    for (const id of [A.terminalJob!, A.approvalPolicy!, A.evaluation!])
      expect((await asB("GET", `/api/v1/jobs/${id}`)).status).toBe(404)
    // B creating with references to A's records: a fork of A's trace, an eval rule on A's evaluation.
    expect(
      (await asB("POST", "/api/v1/forks", { trace_id: A.trace, fork_point_span_id: A.llmSpan, modified_input: "x" }))
        .status
    ).toBe(404)
    expect((await asB("POST", "/api/v1/eval-rules", { evaluation_id: A.evaluation, filter: {} })).status).toBe(404)
  }, 60_000)

  test("nothing B tried changed A's records: A still reads every one of them unchanged", async () => {
    const t = await ok(server.get(`/api/v1/traces/${A.trace}`))
    expect(t.status).toBe("failed")
    expect(t.spans.map((s: any) => s.name)).not.toContain("intruder")
    const running = await ok(server.get(`/api/v1/traces/${A.running}`))
    expect(running.status).toBe("running")
    expect(running.spans.length).toBe(1)
    await ok(server.get(`/api/v1/forks/${A.fork}`))
    expect((await ok(server.get(`/api/v1/guardrails/${A.approvalPolicy}`))).enabled).toBe(true)
    await ok(server.get(`/api/v1/guardrails/${A.budgetPolicy}`))
    const holds = await ok(server.get("/api/v1/enforcement/holds?status=pending"))
    expect(holds.items.map((h: any) => h.id)).toContain(A.hold)
    await ok(server.get(`/api/v1/evaluations/${A.evaluation}`))
    await ok(server.get(`/api/v1/eval-rules/${A.rule}`))
    expect((await ok(server.get("/api/v1/api-keys"))).items.map((k: any) => k.id)).toContain(A.apiKey)
    expect((await server.get("/api/v1/traces?limit=1", A.apiKeySecret)).status).toBe(200) // A's new key still works
    await ok(server.get(`/api/v1/sessions/${encodeURIComponent(SESSION)}`))
    await ok(server.get(`/api/v1/jobs/${A.batchJob}`))
  }, 60_000)

  test("every list and aggregate route: B sees only its own records, never A's", async () => {
    const doc = (await (await server.get("/openapi.json", null)).json()) as OpenApiDoc
    const lists = operations(doc)
      .filter((o) => o.method === "GET" && o.pathParams.length === 0 && o.secured)
      .map((o) => o.path)
    expect(lists).toContain("/api/v1/traces")
    const queries: Record<string, Array<string>> = {
      "/api/v1/traces": ["?limit=100", "?env=sandbox&limit=100"],
      "/api/v1/sessions": ["?limit=100", "?env=sandbox"],
      "/api/v1/insights": ["?limit=100", `?trace_id=${A.trace}`, "?kind=failed_span"],
      "/api/v1/enforcement/holds": ["", "?status=pending"],
      "/api/v1/enforcement/decisions": ["?limit=500", `?run_id=${encodeURIComponent(RUN)}`],
      "/api/v1/evaluations": ["?limit=100"],
      "/api/v1/eval-rules": ["?limit=100"],
      "/api/v1/forks": ["?limit=100"]
    }
    for (const path of lists) {
      for (const q of queries[path] ?? [""]) {
        const r = await asB("GET", path + q)
        expect(`${path}${q} → ${r.status}`).toBe(`${path}${q} → 200`)
        expectNoLeak(r.text)
      }
    }
    // Positive control: the same lists show A its records.
    expect((await server.get("/api/v1/enforcement/holds")).ok).toBe(true)
    expect(leaks(await (await server.get("/api/v1/traces?limit=100")).text())).toContain(A.trace!)
    expect(leaks(await (await server.get(`/api/v1/insights?trace_id=${A.trace}`)).text())).toContain(A.insight!)
    // B's own trace is listed for B.
    const bTraces = (await asB("GET", "/api/v1/traces")).body
    expect(bTraces.items.map((t: any) => t.name)).toEqual(["b's trace"])
    expect((await asB("GET", "/api/v1/sessions")).body.items.map((s: any) => s.id)).toEqual(["b-session"])
  }, 60_000)

  test("search: B searching with A's exact words and filters finds none of A's spans", async () => {
    for (const body of [
      { query: WORD, limit: 100 },
      { query: `what about ${WORD}?`, limit: 100 },
      { query: `${WORD} is lovely`, filters: { model: `model-${WORD}` } },
      { query: WORD, filters: { project_id: PROJECT } },
      { query: WORD, filters: { span_type: "error" } },
      { query: WORD, filters: { status: "failed" } }
    ]) {
      const r = await asB("POST", "/api/v1/search", body)
      expect(r.status).toBe(200)
      expectNoLeak(r.text)
    }
  }, 60_000)

  test("usage: B's counts are B's own", async () => {
    const b = (await asB("GET", "/api/v1/usage")).body
    expect(b.traces).toEqual({ recorded: 1, spans: 1 })
    expect(b.otlp.requests).toBe(0)
    expect(b.replays.used).toBe(0)
    expect(b.evaluations.runs).toBe(0)
    const a = await ok(server.get("/api/v1/usage"))
    expect(a.traces.recorded).toBeGreaterThanOrEqual(3) // A's two REST traces and the OTLP one (plus the replay's result)
    expect(a.otlp.requests).toBe(1)
    expect(a.replays.used).toBe(1)
    expect(a.evaluations.runs).toBeGreaterThanOrEqual(1)
  }, 60_000)

  test("retention: B's setting for A's project id is B's own; A's settings are unchanged", async () => {
    const before = await ok(server.get("/api/v1/retention"))
    const set = await asB("PUT", `/api/v1/retention/projects/${PROJECT}`, { retention_days: 1 })
    expect(set.status).toBe(200)
    expect(set.body.projects).toEqual([{ projectId: PROJECT, retentionDays: 1 }])
    expect(await ok(server.get("/api/v1/retention"))).toEqual(before)
    expect(before.projects.some((p: { projectId: string }) => p.projectId === PROJECT)).toBe(false)
    expect((await asB("PUT", `/api/v1/retention/projects/${PROJECT}`, { retention_days: null })).status).toBe(200)
  }, 60_000)

  test("api keys: B cannot see or revoke A's keys, and A's configured key keeps working", async () => {
    const list = await asB("GET", "/api/v1/api-keys")
    expect(list.status).toBe(200)
    expectNoLeak(list.text)
    expect((await asB("DELETE", `/api/v1/api-keys/${A.apiKey}`)).status).toBe(404)
    expect((await server.get("/api/v1/traces?limit=1", A.apiKeySecret)).status).toBe(200)
    // A's key does not act as B, and B's key does not act as A.
    expect((await server.get(`/api/v1/traces/${A.trace}`, A.apiKeySecret)).status).toBe(200)
  }, 60_000)

  test("batch: B's operations on A's records, synchronous and asynchronous, are 404s; B's job shows nothing of A", async () => {
    const operations = [
      { method: "GET", path: `/api/v1/traces/${A.trace}` },
      { method: "PATCH", path: `/api/v1/traces/${A.running}`, body: { status: "failed" } },
      { method: "DELETE", path: `/api/v1/traces/${A.trace}` },
      { method: "GET", path: `/api/v1/forks/${A.fork}` },
      { method: "GET", path: `/api/v1/jobs/${A.batchJob}` },
      { method: "GET", path: `/api/v1/sessions/${encodeURIComponent(SESSION)}` },
      { method: "POST", path: `/api/v1/enforcement/holds/${A.hold}/approve`, body: {} },
      { method: "DELETE", path: `/api/v1/evaluations/${A.evaluation}` },
      { method: "GET", path: "/api/v1/traces?limit=100" }
    ]
    const sync = await asB("POST", "/api/v1/batch", { operations })
    expect(sync.status).toBe(200)
    expect(sync.body.results.map((r: any) => r.status)).toEqual([404, 404, 404, 404, 404, 404, 404, 404, 200])
    expectNoLeak(sync.text, json(operations))
    const queued = await asB("POST", "/api/v1/batch", { async: true, operations })
    expect(queued.status).toBe(202)
    const done = await waitUntil("B's batch job", async () => {
      const job = await asB("GET", `/api/v1/jobs/${queued.body.job_id}`, undefined, json(operations)) // its results echo B's paths
      return job.body.status === "completed" ? job : undefined
    })
    expect(done.body.result.map((r: any) => r.status)).toEqual([404, 404, 404, 404, 404, 404, 404, 404, 200])
    expectNoLeak(done.text, json(operations))
    // A cannot read B's job either.
    expect((await server.get(`/api/v1/jobs/${queued.body.job_id}`)).status).toBe(404)
    expect((await ok(server.get(`/api/v1/traces/${A.running}`))).status).toBe("running")
  }, 60_000)

  test("enforcement: A's policies, holds and run counters do not apply to B's checks", async () => {
    const held = await asB("POST", "/api/v1/enforcement/check", {
      run_id: RUN,
      tool_name: `${TOOL}_x`,
      trace_id: A.trace
    })
    expect(held.body).toMatchObject({ verdict: "allow", policy_id: null })
    const spent = await asB("POST", "/api/v1/enforcement/check", { run_id: RUN, tool_name: "web", proposed_usd: 5 })
    expect(spent.body).toMatchObject({ verdict: "allow", policy_id: null })
    expectNoLeak(held.text + spent.text)
    // B's check naming A's trace adds nothing to it.
    const t = await ok(server.get(`/api/v1/traces/${A.trace}`))
    expect(t.spans.filter((s: any) => !String(s.name).startsWith("enforcement: hold")).length).toBe(4) // A's own hold may add one
  }, 60_000)
})

describe("isolation: the live stream", () => {
  test("B subscribed (no filter, A's trace id, A's session) receives none of A's events while A writes; A does", async () => {
    const url = wsUrl(server.url)
    const mine = await subscribed(url, KEY_A)
    const theirs = [
      await subscribed(url, KEY_B),
      await subscribed(url, KEY_B, { trace_id: A.running }),
      await subscribed(url, KEY_B, { session_id: SESSION }),
      await subscribed(url, KEY_B, {}, { last_event_id: 0 })
    ]
    const byToken = await connectStream(`${url}?token=${KEY_B}`)
    byToken.send({ type: "subscribe", filters: { trace_id: A.running } })
    await byToken.waitFor((m) => m.some((x) => x.type === "subscribed"))
    theirs.push(byToken)
    for (let i = 0; i < 3; i++) {
      await ok(server.post(`/api/v1/traces/${A.running}/spans`, { spans: [span({ name: `streamed ${WORD} ${i}` })] }))
    }
    await ok(
      server.post("/v1/traces", exportBody([otlpSpan({ traceId: A.otlpRawTraceId!, name: `otlp more ${WORD}` })]))
    )
    // B's own write, as a marker: once B sees it, every earlier event of A would have been delivered too.
    const bTrace = trace({ name: "b marker", spans: [span({ name: "b marker span" })] })
    await ok(server.post("/api/v1/traces", bTrace, KEY_B))
    bTraces.add(bTrace.id)
    await mine.waitFor((m) => m.filter((x) => x.type === "span" && x.trace_id === A.running).length >= 3, 15_000)
    await theirs[0]!.waitFor((m) => m.some((x) => x.trace_id === bTrace.id), 15_000)
    await Bun.sleep(300)
    for (const client of theirs) {
      seenByB.push({ request: `stream ${json(A.running)} ${SESSION}`, response: json(client.messages) })
      expectNoLeak(json(client.messages), `${A.running} ${SESSION}`)
      expect(client.events().filter((e) => !bTraces.has(e.trace_id))).toEqual([])
      client.close()
    }
    mine.close()
  }, 60_000)
})

describe("isolation: MCP tools called with B's key", () => {
  test("get_trace, list_traces, search_spans, create_fork, replay_fork, run_evaluation, gate, list_holds, approve_hold, check_enforcement", async () => {
    const b = await connectMcp(KEY_B)
    mcpB = b
    const notFound = [
      ["get_trace", { trace_id: A.trace }],
      ["get_trace", { trace_id: A.otlpTrace, format: "json" }],
      ["create_fork", { trace_id: A.trace, fork_point_span_id: A.llmSpan, modified_input: "x" }],
      ["replay_fork", { fork_id: A.fork }],
      ["run_evaluation", { evaluation_id: A.evaluation, trace_ids: [A.trace] }],
      ["gate", { evaluation_id: A.evaluation, trace_ids: [A.trace] }],
      ["approve_hold", { hold_id: A.hold }]
    ] as const
    for (const [name, args] of notFound) {
      const r = await callTool(b, name, args as Record<string, unknown>)
      expect(`${name} isError=${r.isError}`).toBe(`${name} isError=true`)
      expect(JSON.parse(r.text)).toMatchObject({ code: "not_found" })
      expectNoLeak(r.text, json(args))
    }
    for (const [name, args] of [
      ["list_traces", { limit: 100 }],
      ["list_traces", { env: "sandbox" }],
      ["search_spans", { query: WORD, limit: 100 }],
      ["search_spans", { query: WORD, filters: { model: `model-${WORD}` } }],
      ["list_holds", {}],
      ["list_holds", { status: "pending" }],
      ["check_enforcement", { run_id: RUN, tool_name: `${TOOL}_x` }]
    ] as const) {
      const r = await callTool(b, name, args as Record<string, unknown>)
      expect(`${name} isError=${r.isError}`).toBe(`${name} isError=false`)
      expectNoLeak(r.text, json(args))
    }
    // The hold is still pending for A, A's fork untouched; A's own MCP client sees its trace.
    const a = await connectMcp(KEY_A)
    const own = await callTool(a, "get_trace", { trace_id: A.trace })
    expect(own.isError).toBe(false)
    expect(own.text).toContain(WORD)
    const holds = await ok(server.get("/api/v1/enforcement/holds?status=pending"))
    expect(holds.items.map((h: any) => h.id)).toContain(A.hold)
  }, 60_000)
})

describe("isolation: everything B received", () => {
  test("no response to B (REST, batch, stream, MCP) contained any of A's ids, words, keys or webhook secret", () => {
    expect(seenByB.length).toBeGreaterThan(50)
    const leaking = seenByB
      .map((s) => ({ ...s, leaked: leaks(s.response).filter((secret) => !s.request.includes(secret)) }))
      .filter((s) => s.leaked.length > 0)
    expect(leaking).toEqual([])
  })
})
