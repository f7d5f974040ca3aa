import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { startFakeOpenAi, type FakeOpenAi } from "../support/FakeOpenAi.ts"
import { span, trace, uuid } from "../support/Fixtures.ts"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { describeFailure } from "#src/mcp/ProductTools"
import { EmbedderUnavailable, ReplayFailed } from "#src/domain/Errors"

let fake: FakeOpenAi
let server: TestServer
const clients: Array<Client> = []

beforeAll(async () => {
  fake = startFakeOpenAi(() => ({ content: JSON.stringify({ score: 0.9, reason: "fine" }) }))
  server = await startTestServer({
    TAPEDECK_LLM_BASE_URL: fake.baseUrl,
    TAPEDECK_LLM_API_KEY: "sk-fake",
    TAPEDECK_LLM_MAX_RETRIES: "0"
  })
}, 60_000)
afterAll(async () => {
  for (const c of clients) await c.close().catch(() => {})
  await server.stop()
  await fake.stop()
}, 60_000)

const connect = async (path: string, headers: Record<string, string> = {}) => {
  const client = new Client({ name: "tapedeck-test", version: "1.0.0" })
  await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}${path}`), { requestInit: { headers } }))
  clients.push(client)
  return client
}
const product = (key = KEY_A) => connect("/mcp", { "x-service-key": key })

const call = async (client: Client, name: string, args: Record<string, unknown>) => {
  const result = (await client.callTool({ name, arguments: args })) as {
    isError?: boolean
    content: Array<{ type: string; text: string }>
  }
  return { isError: result.isError === true, text: result.content.map((c) => c.text).join("\n") }
}
const callJson = async (client: Client, name: string, args: Record<string, unknown>) => {
  const result = await call(client, name, args)
  if (result.isError) throw new Error(`${name} failed: ${result.text}`)
  return JSON.parse(result.text)
}

const recorded = async (key = KEY_A) => {
  const root = span({ span_type: "action", name: "agent-root" })
  const plan = span({
    parent_id: root.id,
    name: "plan-step",
    model: "gpt-4o-mini",
    input: "where to?",
    output: "Lisbon",
    input_tokens: 12,
    output_tokens: 3
  })
  const tool = span({
    parent_id: plan.id,
    span_type: "tool_call",
    name: "search_flights",
    input: { to: "LIS" },
    output: { results: 3 }
  })
  const t = trace({
    name: "mcp-agent",
    status: "completed",
    input: "Book a flight",
    output: "Booked",
    spans: [root, plan, tool]
  })
  expect((await server.post("/api/v1/traces", t, key)).status).toBe(200)
  return { trace: t, root, plan, tool }
}

describe("/mcp: authentication and transport", () => {
  test("no or bad credentials: 401 with the API's error body, before any MCP handling", async () => {
    const body = { jsonrpc: "2.0", id: 1, method: "tools/list" }
    for (const headers of [{}, { "x-service-key": "svc_wrong" }, { authorization: "Bearer nope" }]) {
      const response = await fetch(`${server.url}/mcp`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
        body: JSON.stringify(body)
      })
      expect(response.status).toBe(401)
      expect(await response.json()).toEqual({
        error: "missing or invalid credentials",
        code: "unauthorized",
        retryable: false
      })
      expect(response.headers.get("www-authenticate")).toContain("oauth-protected-resource")
    }
    await expect(connect("/mcp")).rejects.toThrow()
  }, 60_000)

  test("a body that is not JSON, or nests too deeply, is a 400 with the API's error body", async () => {
    const send = (body: string) =>
      fetch(`${server.url}/mcp`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "x-service-key": KEY_A
        },
        body
      })
    const notJson = await send("{nope")
    expect(notJson.status).toBe(400)
    expect(await notJson.json()).toEqual({
      error: "request body is not valid JSON",
      code: "validation_failed",
      retryable: false
    })
    const deep = await send("[".repeat(200) + "]".repeat(200))
    expect(deep.status).toBe(400)
    expect(((await deep.json()) as any).error).toContain("nests deeper")
  }, 60_000)

  test("Bearer works too; GET (no server-initiated stream in stateless mode) is 405", async () => {
    const client = await connect("/mcp", { authorization: `Bearer ${KEY_A}` })
    expect((await client.listTools()).tools.length).toBeGreaterThan(0)
    const get = await fetch(`${server.url}/mcp`, { headers: { "x-service-key": KEY_A, accept: "text/event-stream" } })
    expect(get.status).toBe(405)
  }, 60_000)

  test("tools are listed with input schemas mirroring the API's limits", async () => {
    const { tools } = await (await product()).listTools()
    const names = tools.map((t) => t.name).sort()
    for (const name of [
      "approve_hold",
      "check_enforcement",
      "create_fork",
      "gate",
      "get_trace",
      "list_holds",
      "list_traces",
      "replay_fork",
      "run_evaluation",
      "search_spans"
    ]) {
      expect(names).toContain(name)
    }
    const listTraces = tools.find((t) => t.name === "list_traces")!
    expect((listTraces.inputSchema.properties as any).limit).toMatchObject({ minimum: 1, maximum: 100 })
    const check = tools.find((t) => t.name === "check_enforcement")!
    expect(check.inputSchema.required).toEqual(["run_id"])
    expect((check.inputSchema.properties as any).run_id).toMatchObject({ minLength: 1, maxLength: 200 })
    expect((tools.find((t) => t.name === "run_evaluation")!.inputSchema.properties as any).trace_ids).toMatchObject({
      minItems: 1,
      maxItems: 50
    })
  }, 60_000)
})

describe("/mcp: tools", () => {
  test("list_traces and get_trace read the account's traces; get_trace renders a compact causal tree", async () => {
    const client = await product()
    const { trace: t } = await recorded()
    const list = await callJson(client, "list_traces", { limit: 100 })
    expect(list.items.map((x: any) => x.id)).toContain(t.id)
    expect(list).toMatchObject({ limit: 100, offset: 0 })
    const rendered = await call(client, "get_trace", { trace_id: t.id })
    expect(rendered.isError).toBe(false)
    const lines = rendered.text.split("\n")
    expect(lines[0]).toStartWith(`Trace ${t.id} "mcp-agent" status=completed`)
    expect(lines[0]).toContain("tokens=15")
    const root = lines.findIndex((l) => l.startsWith("- [action] agent-root"))
    const plan = lines.findIndex(
      (l) => l.startsWith("  - [llm_call] plan-step") && l.includes("model=gpt-4o-mini") && l.includes("tokens=12→3")
    )
    const tool = lines.findIndex((l) => l.startsWith("    - [tool_call] search_flights"))
    expect(root).toBeGreaterThan(0)
    expect(plan).toBeGreaterThan(root)
    expect(tool).toBeGreaterThan(plan)
    expect(rendered.text).toContain('input: {"to":"LIS"}')
    const asJson = JSON.parse((await call(client, "get_trace", { trace_id: t.id, format: "json" })).text)
    expect(asJson.spans).toHaveLength(3)
    const clipped = await call(client, "get_trace", { trace_id: t.id, max_spans: 1, payload_chars: 3 })
    expect(clipped.text).toContain("… 2 more spans")
    expect(clipped.text).toContain("Boo… (3 more chars)")
  }, 60_000)

  test("search_spans finds the account's spans only, with the API's filters", async () => {
    const word = `zebracorn${uuid().slice(0, 8)}`
    const t = trace({
      spans: [span({ span_type: "tool_call", name: "lookup", input: `find the ${word} in the catalogue` })]
    })
    expect((await server.post("/api/v1/traces", t)).status).toBe(200)
    const a = await product()
    const b = await product(KEY_B)
    let hits: any = { spans: [] }
    for (let i = 0; i < 100 && !hits.spans.some((h: any) => h.trace_id === t.id); i++) {
      hits = await callJson(a, "search_spans", {
        query: `${word} catalogue`,
        filters: { span_type: "tool_call" },
        limit: 5
      })
      await Bun.sleep(100)
    }
    expect(hits.spans.some((h: any) => h.trace_id === t.id && h.name === "lookup")).toBe(true)
    const searches = async () => ((await (await server.get("/api/v1/usage", KEY_B)).json()) as any).search.queries
    const before = await searches()
    const foreign = await callJson(b, "search_spans", { query: `${word} catalogue`, limit: 100 })
    expect(foreign.spans.some((h: any) => h.trace_id === t.id)).toBe(false)
    // Counted in usage like a POST /api/v1/search.
    expect(await searches()).toBe(before + 1)
    const bad = await call(a, "search_spans", { query: "x", filters: { span_type: "nope" } })
    expect(bad.isError).toBe(true)
  }, 60_000)

  test("create_fork then replay_fork act like the REST routes", async () => {
    const client = await product()
    const { trace: t, plan } = await recorded()
    const fork = await callJson(client, "create_fork", {
      trace_id: t.id,
      fork_point_span_id: plan.id,
      modified_input: "Porto?",
      name: "what if"
    })
    expect(fork).toMatchObject({ traceId: t.id, forkPointSpanId: plan.id, status: "pending", name: "what if" })
    const viaRest = (await (await server.get(`/api/v1/forks/${fork.id}`)).json()) as any
    expect(viaRest.id).toBe(fork.id)
    const replay = await callJson(client, "replay_fork", { fork_id: fork.id })
    expect(replay).toMatchObject({ fork_id: fork.id, mode: "server" })
    expect(["completed", "replaying"]).toContain(replay.status)
    const missing = await call(client, "create_fork", {
      trace_id: t.id,
      fork_point_span_id: uuid(),
      modified_input: null
    })
    expect(missing.isError).toBe(true)
    expect(JSON.parse(missing.text)).toMatchObject({ code: "validation_failed" })
  }, 60_000)

  test("run_evaluation and gate use the evaluation services", async () => {
    const client = await product()
    const { trace: t } = await recorded()
    const evaluation = (await (
      await server.post("/api/v1/evaluations", { name: "quality", criteria: [{ name: "ok", description: "it is ok" }] })
    ).json()) as any
    const run = await callJson(client, "run_evaluation", { evaluation_id: evaluation.id, trace_ids: [t.id] })
    expect(run).toMatchObject({ evaluation_id: evaluation.id, status: "running" })
    expect(run.runs.map((r: any) => r.traceId)).toEqual([t.id])
    const gate = await callJson(client, "gate", { evaluation_id: evaluation.id, trace_ids: [t.id], threshold: 0.5 })
    expect(gate).toMatchObject({ passed: true, threshold: 0.5 })
    const unknown = await call(client, "gate", { evaluation_id: uuid(), trace_ids: [t.id] })
    expect(unknown.isError).toBe(true)
    expect(JSON.parse(unknown.text).code).toBe("not_found")
  }, 60_000)

  test("check_enforcement, list_holds and approve_hold: a held action is allowed once approved", async () => {
    const client = await product()
    const tool = `deploy-${uuid()}`
    expect(
      (await server.post("/api/v1/guardrails", { type: "require_approval", params: { tool_patterns: [tool] } })).status
    ).toBe(200)
    const run = uuid()
    const held = await callJson(client, "check_enforcement", { run_id: run, tool_name: tool })
    expect(held.verdict).toBe("hold")
    const holds = await callJson(client, "list_holds", { status: "pending" })
    expect(holds.items.map((h: any) => h.id)).toContain(held.hold_id)
    // Another account cannot see or approve it.
    const other = await product(KEY_B)
    expect((await callJson(other, "list_holds", {})).items.map((h: any) => h.id)).not.toContain(held.hold_id)
    const foreign = await call(other, "approve_hold", { hold_id: held.hold_id })
    expect(foreign.isError).toBe(true)
    expect(JSON.parse(foreign.text)).toEqual({
      error: `hold ${held.hold_id} not found`,
      code: "not_found",
      retryable: false
    })
    const approved = await callJson(client, "approve_hold", { hold_id: held.hold_id, reason: "looks fine" })
    expect(approved.status).toBe("approved")
    expect((await callJson(client, "check_enforcement", { run_id: run, tool_name: tool })).verdict).toBe("allow")
    const again = await call(client, "approve_hold", { hold_id: held.hold_id })
    expect(JSON.parse(again.text).code).toBe("conflict")
  }, 60_000)
})

describe("/mcp: validation and isolation", () => {
  test("invalid arguments are MCP tool errors naming the problem, never a crash", async () => {
    const client = await product()
    const cases: Array<[string, Record<string, unknown>]> = [
      ["get_trace", { trace_id: "nope" }],
      ["get_trace", {}],
      ["list_traces", { limit: 101 }],
      ["list_traces", { offset: -1 }],
      ["list_traces", { env: "production" }],
      ["list_traces", { unexpected: true }],
      ["create_fork", { trace_id: uuid(), fork_point_span_id: uuid() }],
      ["create_fork", { trace_id: uuid(), fork_point_span_id: uuid(), modified_input: 1, name: "x".repeat(501) }],
      ["check_enforcement", { run_id: "" }],
      ["check_enforcement", { run_id: "r", proposed_usd: -1 }],
      ["run_evaluation", { evaluation_id: uuid(), trace_ids: [] }],
      ["run_evaluation", { evaluation_id: uuid(), trace_ids: Array.from({ length: 51 }, () => uuid()) }],
      ["gate", { evaluation_id: uuid(), trace_ids: [uuid()], threshold: 1.5 }],
      ["list_holds", { status: "maybe" }]
    ]
    for (const [name, args] of cases) {
      const result = await call(client, name, args)
      expect(result.isError).toBe(true)
      expect(result.text).toContain("Input validation error")
    }
    const same = uuid()
    const duplicate = await call(client, "run_evaluation", {
      evaluation_id: uuid(),
      trace_ids: [same, same.toUpperCase()]
    })
    expect(duplicate.isError).toBe(true)
    const cursor = await call(client, "list_traces", { cursor: "forged" })
    expect(JSON.parse(cursor.text).code).toBe("validation_failed")
  }, 60_000)

  test("failures carry the REST route's code: an embedder outage is retryable `unavailable`, never a client error", () => {
    const body = (e: Parameters<typeof describeFailure>[0]) =>
      JSON.parse((describeFailure(e).content[0] as { text: string }).text)
    expect(body(new EmbedderUnavailable({ reason: "connection refused" }))).toEqual({
      error: "the search embedder is unavailable: connection refused",
      code: "unavailable",
      retryable: true
    })
    // A failure no route answers as the caller's (the replay job's own) says nothing more than REST would.
    expect(body(new ReplayFailed({ reason: "the provider is down", modelWork: false }))).toEqual({
      error: "internal error",
      code: "internal",
      retryable: true
    })
  }, 60_000)

  test("another account's trace, fork and evaluation are not found; listings never include them", async () => {
    const { trace: t, plan } = await recorded(KEY_A)
    const a = await product(KEY_A)
    const b = await product(KEY_B)
    const notFound = async (name: string, args: Record<string, unknown>) => {
      const result = await call(b, name, args)
      expect(result.isError).toBe(true)
      expect(JSON.parse(result.text).code).toBe("not_found")
    }
    await notFound("get_trace", { trace_id: t.id })
    await notFound("create_fork", { trace_id: t.id, fork_point_span_id: plan.id, modified_input: "x" })
    const fork = await callJson(a, "create_fork", { trace_id: t.id, fork_point_span_id: plan.id, modified_input: "x" })
    await notFound("replay_fork", { fork_id: fork.id })
    const evaluation = (await (
      await server.post("/api/v1/evaluations", { name: "private", criteria: [{ name: "ok", description: "ok" }] })
    ).json()) as any
    await notFound("run_evaluation", { evaluation_id: evaluation.id, trace_ids: [t.id] })
    const listing = await callJson(b, "list_traces", { limit: 100 })
    expect(listing.items.map((x: any) => x.id)).not.toContain(t.id)
    // An enforcement check naming A's trace from B does not write into it.
    await callJson(b, "check_enforcement", { run_id: uuid(), trace_id: t.id })
    const detail = (await (await server.get(`/api/v1/traces/${t.id}`)).json()) as any
    expect(detail.spans).toHaveLength(3)
  }, 60_000)
})

describe("/mcp/docs", () => {
  test("public: search and read the API reference and the README", async () => {
    const client = await connect("/mcp/docs")
    const names = (await client.listTools()).tools.map((t) => t.name).sort()
    expect(names).toEqual(["list_docs", "read_doc", "search_docs"])
    const hits = await callJson(client, "search_docs", { query: "replay a fork" })
    expect(hits.map((h: any) => h.id)).toContain("POST /api/v1/forks/{forkId}/replay")
    const op = await call(client, "read_doc", { id: "GET /api/v1/traces" })
    expect(op.isError).toBe(false)
    expect(op.text).toContain("limit (query")
    const byPath = await call(client, "read_doc", { id: "/api/v1/traces/{traceId}" })
    expect(byPath.text).toContain("GET /api/v1/traces/{traceId}")
    expect(byPath.text).toContain("DELETE /api/v1/traces/{traceId}")
    const schema = await call(client, "read_doc", { id: "schema:CreateTraceRequest" })
    expect(schema.text).toContain("session_id")
    const guide = await call(client, "read_doc", { id: "Live span stream" })
    expect(guide.text).toContain("/ws/v1/stream")
    const streamHits = await callJson(client, "search_docs", { query: "websocket last_event_id" })
    expect(streamHits[0].id).toStartWith("readme:")
    const missing = await call(client, "read_doc", { id: "nothing like this" })
    expect(missing.isError).toBe(true)
    expect(JSON.parse(missing.text).code).toBe("not_found")
    const toc = await callJson(client, "list_docs", {})
    expect(toc.operations.length).toBeGreaterThan(10)
    const bad = await call(client, "search_docs", { query: "" })
    expect(bad.isError).toBe(true)
  }, 60_000)
})

describe("/mcp: rate limit", () => {
  let limited: TestServer
  beforeAll(async () => {
    limited = await startTestServer({
      TAPEDECK_RATE_LIMIT_PER_MINUTE: "3",
      TAPEDECK_PUBLIC_URL: "https://tapedeck.example.com"
    })
  }, 60_000)
  afterAll(() => limited.stop(), 60_000)

  const post = (body: unknown, key = KEY_A) =>
    fetch(`${limited.url}/mcp`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "x-service-key": key
      },
      body: JSON.stringify(body)
    })
  const listTools = (id: number) => ({ jsonrpc: "2.0", id, method: "tools/list" })

  test("per credential like every API route: the 4th message within a limit of 3 is a 429 with Retry-After", async () => {
    for (let i = 1; i <= 3; i++) expect((await post(listTools(i))).status).toBe(200)
    const refused = await post(listTools(4))
    expect(refused.status).toBe(429)
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
    const body = (await refused.json()) as any
    expect(body).toMatchObject({ code: "rate_limited", retryable: true })
    expect(body.error).toContain("retry after")
    // Another credential has its own budget; the REST routes keep theirs.
    expect((await post(listTools(5), KEY_B)).status).toBe(200)
    expect((await limited.get("/api/v1/traces")).status).toBe(200)
  }, 60_000)

  test("a 401 points at the protected-resource metadata of the public URL, like the discovery document", async () => {
    const refused = await post(listTools(1), "svc_nobody_here")
    expect(refused.status).toBe(401)
    expect(refused.headers.get("www-authenticate")).toBe(
      'Bearer resource_metadata="https://tapedeck.example.com/.well-known/oauth-protected-resource"'
    )
  }, 60_000)

  test("a JSON-RPC batch counts one per message, so batching does not get around the limit", async () => {
    const refused = await post([listTools(1), listTools(2), listTools(3), listTools(4)], KEY_B)
    expect(refused.status).toBe(429)
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
  }, 60_000)
})

describe("/mcp: check_enforcement, the check's lean route and the API's endpoint share one enforcement", () => {
  // The path alone goes to the lean route in front of the router; with a query string, to the HttpApi endpoint.
  const ways = (client: Client, body: Record<string, unknown>) => ({
    lean: async () => (await (await server.post("/api/v1/enforcement/check", body)).json()) as any,
    api: async () => (await (await server.post("/api/v1/enforcement/check?via=api", body)).json()) as any,
    mcp: () => callJson(client, "check_enforcement", body)
  })

  test("check_enforcement spends a run's budget with the check's lean route and the API's endpoint: one run, one budget", async () => {
    const client = await product()
    const project = uuid()
    const policy = { type: "budget_usd", project_id: project, params: { max_usd: 1 } }
    expect((await server.post("/api/v1/guardrails", policy)).status).toBe(200)
    const run = `shared-${uuid()}`
    const body = { run_id: run, project_id: project, tool_name: "search", proposed_usd: 0.3 }
    const { lean, api, mcp } = ways(client, body)
    // $0.90 spent in three checks, one by each way in; a fourth $0.30 by any of them would pass $1.
    for (const check of [lean, mcp, api]) expect((await check()).verdict).toBe("allow")
    for (const check of [mcp, lean, api]) expect((await check()).verdict).toBe("block")
  }, 60_000)

  test("a policy created through the API applies at once to all three (one policy cache, cleared by the change)", async () => {
    const client = await product()
    const project = uuid()
    const tool = `wipe-${uuid()}`
    const { lean, api, mcp } = ways(client, { run_id: `cache-${uuid()}`, project_id: project, tool_name: tool })
    // Each way has read the account's policies (and would keep them if it had a cache of its own).
    for (const check of [lean, api, mcp]) expect((await check()).verdict).toBe("allow")
    const policy = { type: "tool_denylist", project_id: project, params: { patterns: [tool] } }
    expect((await server.post("/api/v1/guardrails", policy)).status).toBe(200)
    for (const check of [lean, api, mcp]) expect((await check()).verdict).toBe("block")
  }, 60_000)
})
