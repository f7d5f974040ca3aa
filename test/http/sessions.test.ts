import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { span, trace, uuid } from "../support/Fixtures.ts"
import { chatAttributes, exportBody, hex, otlpSpan } from "../support/Otlp.ts"

let server: TestServer
beforeAll(async () => {
  server = await startTestServer()
}, 60_000)
afterAll(() => server.stop(), 60_000)

const json = async (path: string, key: string = KEY_A) => {
  const response = await server.get(path, key)
  return { status: response.status, body: (await response.json()) as any }
}

const enc = encodeURIComponent

/**
 * Session "chat/α 1": trace 1 has a planner (root agent) calling a researcher twice and a writer once, plus a
 * span without any agent; trace 2 has the writer again (called by the planner) and an error.
 */
const recordSession = async (sessionId: string, key: string = KEY_A) => {
  const root = span({
    span_type: "action",
    name: "run",
    started_at: "2026-03-01T10:00:00.000Z",
    ended_at: "2026-03-01T10:05:00.000Z"
  })
  const plan = span({
    parent_id: root.id,
    name: "plan",
    agent_id: "planner",
    agent_role: "orchestrator",
    input_tokens: 100,
    output_tokens: 20,
    cost: 0.5,
    started_at: "2026-03-01T10:00:01.000Z"
  })
  const research1 = span({
    parent_id: plan.id,
    name: "search",
    agent_id: "researcher",
    parent_agent_id: "planner",
    agent_role: "research",
    input_tokens: 10,
    output_tokens: 5,
    cost: 0.25,
    started_at: "2026-03-01T10:00:02.000Z"
  })
  const research1b = span({
    parent_id: research1.id,
    span_type: "tool_call",
    name: "web",
    agent_id: "researcher",
    parent_agent_id: "planner",
    agent_role: "research",
    started_at: "2026-03-01T10:00:03.000Z",
    error: "timeout"
  })
  const research2 = span({
    parent_id: plan.id,
    name: "search again",
    agent_id: "researcher",
    parent_agent_id: "planner",
    agent_role: "research",
    input_tokens: 1,
    output_tokens: 1,
    started_at: "2026-03-01T10:00:04.000Z"
  })
  const write1 = span({
    parent_id: plan.id,
    name: "draft",
    agent_id: "writer",
    parent_agent_id: "planner",
    agent_role: "writer",
    started_at: "2026-03-01T10:00:05.000Z",
    ended_at: "2026-03-01T10:00:09.000Z"
  })
  const t1 = trace({
    session_id: sessionId,
    name: "first",
    status: "completed",
    started_at: "2026-03-01T10:00:00.000Z",
    ended_at: "2026-03-01T10:05:00.000Z",
    spans: [root, plan, research1, research1b, research2, write1]
  })
  const write2 = span({
    name: "edit",
    agent_id: "writer",
    parent_agent_id: "planner",
    agent_role: "writer",
    input_tokens: 7,
    output_tokens: 3,
    cost: 0.1,
    started_at: "2026-03-01T11:00:00.000Z"
  })
  const failure = span({
    parent_id: write2.id,
    span_type: "error",
    name: "boom",
    agent_id: "writer",
    started_at: "2026-03-01T11:00:01.000Z"
  })
  const t2 = trace({
    session_id: sessionId,
    name: "second",
    status: "failed",
    started_at: "2026-03-01T11:00:00.000Z",
    ended_at: "2026-03-01T11:00:02.000Z",
    spans: [write2, failure]
  })
  for (const t of [t1, t2]) expect((await server.post("/api/v1/traces", t, key)).status).toBe(200)
  return { t1, t2 }
}

describe("sessions", () => {
  test("list: one item per session with counts, tokens, cost and first/last seen; most recent first", async () => {
    const older = `older-${uuid()}`
    const newer = `chat/α 1 ${uuid()}`
    expect(
      (await server.post("/api/v1/traces", trace({ session_id: older, started_at: "2025-01-01T00:00:00Z" }))).status
    ).toBe(200)
    const { t1, t2 } = await recordSession(newer)
    const { status, body } = await json("/api/v1/sessions?limit=100")
    expect(status).toBe(200)
    const item = body.items.find((s: any) => s.id === newer)
    expect(item).toEqual({
      id: newer,
      traceCount: 2,
      spanCount: 8,
      failedTraceCount: 1,
      totalTokens: 147,
      totalCost: "0.85",
      firstSeen: "2026-03-01T10:00:00.000Z",
      lastSeen: "2026-03-01T11:00:02.000Z"
    })
    const ids = body.items.map((s: any) => s.id)
    expect(ids.indexOf(newer)).toBeLessThan(ids.indexOf(older))
    expect(body).toMatchObject({ limit: 100, offset: 0, hasMore: false })
    expect(body.total).toBe(body.items.length)
    void t1
    void t2

    const page = await json("/api/v1/sessions?limit=1")
    expect(page.body.items).toHaveLength(1)
    expect(page.body.hasMore).toBe(true)
    // Traces without a session are not sessions; the other account sees none of these.
    const other = await json("/api/v1/sessions?limit=100", KEY_B)
    expect(other.body.items.map((s: any) => s.id)).not.toContain(newer)
  }, 60_000)

  test("get: the summary and the session's traces, oldest first, by URL-encoded id", async () => {
    const id = `chat/α 1 ${uuid()}`
    const { t1, t2 } = await recordSession(id)
    const { status, body } = await json(`/api/v1/sessions/${enc(id)}`)
    expect(status).toBe(200)
    expect(body).toMatchObject({ id, traceCount: 2, spanCount: 8, limit: 50, offset: 0, hasMore: false })
    expect(body.traces.map((t: any) => t.id)).toEqual([t1.id, t2.id])
    expect(body.traces[0]).toMatchObject({ name: "first", sessionId: id, status: "completed" })
    const paged = await json(`/api/v1/sessions/${enc(id)}?limit=1&offset=1`)
    expect(paged.body.traces.map((t: any) => t.id)).toEqual([t2.id])
  }, 60_000)

  test("graph: agents as nodes (root for spans without one), parent → agent edges with call counts", async () => {
    const id = `graph-${uuid()}`
    await recordSession(id)
    const { status, body } = await json(`/api/v1/sessions/${enc(id)}/graph`)
    expect(status).toBe(200)
    expect(body.session_id).toBe(id)
    const node = (agent: string | null) => body.nodes.find((n: any) => n.agent_id === agent)
    expect(node(null)).toEqual({
      agent_id: null,
      agent_role: null,
      root: true,
      span_count: 1,
      tokens: 0,
      cost: "0",
      errors: 0,
      first_seen: "2026-03-01T10:00:00.000Z",
      last_seen: "2026-03-01T10:05:00.000Z"
    })
    expect(node("planner")).toMatchObject({
      agent_role: "orchestrator",
      root: false,
      span_count: 1,
      tokens: 120,
      cost: "0.5",
      errors: 0
    })
    expect(node("researcher")).toMatchObject({
      agent_role: "research",
      span_count: 3,
      tokens: 17,
      cost: "0.25",
      errors: 1
    })
    expect(node("writer")).toMatchObject({
      agent_role: "writer",
      span_count: 3,
      tokens: 10,
      cost: "0.1",
      errors: 1,
      first_seen: "2026-03-01T10:00:05.000Z",
      last_seen: "2026-03-01T11:00:01.000Z"
    })
    expect(body.nodes).toHaveLength(4)
    expect(body.edges).toEqual([
      { parent_agent_id: null, agent_id: "planner", calls: 1 },
      { parent_agent_id: "planner", agent_id: "researcher", calls: 2 },
      { parent_agent_id: "planner", agent_id: "writer", calls: 2 }
    ])
  }, 60_000)

  test("a parent agent with no span of its own still appears as a node", async () => {
    const id = `orphan-${uuid()}`
    const child = span({ name: "work", agent_id: "worker", parent_agent_id: "remote-boss" })
    expect((await server.post("/api/v1/traces", trace({ session_id: id, spans: [child] }))).status).toBe(200)
    const { body } = await json(`/api/v1/sessions/${enc(id)}/graph`)
    expect(body.nodes.map((n: any) => n.agent_id)).toEqual([null, "worker", "remote-boss"])
    expect(body.nodes[0]).toMatchObject({ root: true, span_count: 0, first_seen: null })
    expect(body.nodes[2]).toMatchObject({ span_count: 0, first_seen: null, last_seen: null })
    expect(body.edges).toEqual([{ parent_agent_id: "remote-boss", agent_id: "worker", calls: 1 }])
  }, 60_000)

  test("unknown, foreign and deleted sessions are 404; bad ids and parameters are 400", async () => {
    const id = `private-${uuid()}`
    const { t1, t2 } = await recordSession(id)
    for (const path of [`/api/v1/sessions/${enc(id)}`, `/api/v1/sessions/${enc(id)}/graph`]) {
      expect((await json(path, KEY_B)).status).toBe(404)
      expect((await json(path.replace(id, `missing-${uuid()}`))).body).toMatchObject({ code: "not_found" })
    }
    expect((await server.request("DELETE", `/api/v1/traces/${t1.id}`)).status).toBe(200)
    expect((await json(`/api/v1/sessions/${enc(id)}`)).body).toMatchObject({ traceCount: 1, spanCount: 2 })
    const graph = await json(`/api/v1/sessions/${enc(id)}/graph`)
    expect(graph.body.nodes.map((n: any) => [n.agent_id, n.span_count])).toEqual([
      [null, 0],
      ["writer", 2],
      ["planner", 0]
    ])
    expect((await server.request("DELETE", `/api/v1/traces/${t2.id}`)).status).toBe(200)
    expect((await json(`/api/v1/sessions/${enc(id)}`)).status).toBe(404)
    expect((await json(`/api/v1/sessions/${enc(id)}/graph`)).status).toBe(404)

    for (const path of [
      "/api/v1/sessions?limit=0",
      "/api/v1/sessions?limit=101",
      "/api/v1/sessions?offset=-1",
      "/api/v1/sessions?env=staging",
      "/api/v1/sessions?colour=red",
      `/api/v1/sessions/${enc(id)}?limit=abc`
    ]) {
      const { status, body } = await json(path)
      expect({ path, status }).toEqual({ path, status: 400 })
      expect(body).toMatchObject({ code: "validation_failed" })
    }
    // A session id is at most 100 characters (the trace limit): a longer one is malformed, not missing.
    expect((await json(`/api/v1/sessions/${"x".repeat(100)}`)).status).toBe(404)
    for (const path of [
      `/api/v1/sessions/${"x".repeat(101)}`,
      `/api/v1/sessions/${"x".repeat(101)}/graph`,
      `/api/v1/sessions/${enc("é".repeat(101))}`
    ]) {
      const { status, body } = await json(path)
      expect({ path, status }).toEqual({ path, status: 400 })
      expect(body).toMatchObject({ code: "validation_failed", error: "sessionId: a session id is 1 to 100 characters" })
    }
    // 100 characters that are longer once URL-encoded are a valid id.
    expect((await json(`/api/v1/sessions/${enc("é".repeat(100))}/graph`)).status).toBe(404)
    expect((await server.get("/api/v1/sessions", null)).status).toBe(401)
  }, 60_000)

  test("sandbox traces (fork results) are apart unless env=sandbox", async () => {
    const id = `sandbox-${uuid()}`
    const t = trace({ session_id: id, metadata: { environment: "sandbox" } })
    expect((await server.post("/api/v1/traces", t)).status).toBe(200)
    expect((await json(`/api/v1/sessions/${enc(id)}`)).status).toBe(404)
    expect((await json(`/api/v1/sessions/${enc(id)}?env=sandbox`)).body).toMatchObject({ id, traceCount: 1 })
  }, 60_000)

  test("graph of OTLP GenAI agents: identities inherited from invoke_agent spans", async () => {
    const id = `otlp-${uuid()}`
    const traceId = hex(16)
    const agent = (name: string) => ({
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.agent.name": name,
      "session.id": id
    })
    const planner = otlpSpan({ traceId, name: "invoke_agent planner", attributes: agent("planner"), endMs: 5000 })
    const think = otlpSpan({
      traceId,
      parentSpanId: planner.spanId,
      startMs: 10,
      attributes: { ...chatAttributes, "session.id": id }
    })
    const researcher = otlpSpan({
      traceId,
      parentSpanId: planner.spanId,
      name: "invoke_agent researcher",
      startMs: 20,
      attributes: agent("researcher")
    })
    const search = otlpSpan({
      traceId,
      parentSpanId: researcher.spanId,
      startMs: 30,
      attributes: { ...chatAttributes, "session.id": id }
    })
    expect((await server.post("/v1/traces", exportBody([planner, think, researcher, search]))).status).toBe(200)
    const { status, body } = await json(`/api/v1/sessions/${enc(id)}/graph`)
    expect(status).toBe(200)
    const byAgent = Object.fromEntries(body.nodes.map((n: any) => [String(n.agent_id), n]))
    expect(byAgent["planner"]).toMatchObject({ span_count: 2, tokens: 17 })
    expect(byAgent["researcher"]).toMatchObject({ span_count: 2, tokens: 17 })
    expect(body.edges).toEqual([
      { parent_agent_id: null, agent_id: "planner", calls: 1 },
      { parent_agent_id: "planner", agent_id: "researcher", calls: 1 }
    ])
  }, 60_000)
})
