import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { KEY_A, startTestServer, type TestServer } from "../support/TestServer.ts"
import { span, trace } from "../support/Fixtures.ts"
import { exportBody, hex, otlpSpan } from "../support/Otlp.ts"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { CHECK_PRESSURE_CHANNEL } from "#layers/enforcement/ClusterPressure"

// Two API instances on one PostgreSQL, as users scale out. Only meaningful with a real PostgreSQL (PGlite
// is one process), so it runs in the PostgreSQL pass of the suite.
describe.if(Boolean(process.env.TEST_DATABASE_URL))("two instances sharing one PostgreSQL", () => {
  let a: TestServer
  let b: TestServer
  beforeAll(async () => {
    a = await startTestServer()
    b = await startTestServer({ DATABASE_URL: a.env.DATABASE_URL! })
  })
  afterAll(async () => {
    await b.stop()
    await a.stop()
  })

  const recordedFork = async (agent: string) => {
    const root = span({ span_type: "action", name: "run" })
    const plan = span({ parent_id: root.id, name: "plan", input: "x" })
    const t = trace({ name: agent, spans: [root, plan] })
    expect((await a.post("/api/v1/traces", t)).status).toBe(200)
    return (await (
      await a.post("/api/v1/forks", { trace_id: t.id, fork_point_span_id: plan.id, modified_input: "y" })
    ).json()) as any
  }

  test("a trace written on one instance is read on the other; a replay requested on A reaches an SDK connected to B", async () => {
    const socket = new WebSocket(`${b.url.replace("http", "ws")}/ws/v1/replay`, {
      headers: { "x-service-key": KEY_A }
    } as never)
    const messages: Array<any> = []
    socket.addEventListener("message", (e) => messages.push(JSON.parse(String(e.data))))
    await new Promise((resolve) => socket.addEventListener("open", resolve))
    socket.send(JSON.stringify({ type: "register", agents: ["cross-instance-agent"] }))
    for (let i = 0; i < 100 && !messages.some((m) => m.type === "registered"); i++) await Bun.sleep(20)

    const fork = await recordedFork("cross-instance-agent")
    expect(((await (await b.get(`/api/v1/forks/${fork.id}`)).json()) as any).id).toBe(fork.id)
    const started = (await (await a.post(`/api/v1/forks/${fork.id}/replay`, {})).json()) as any
    expect(started).toMatchObject({ mode: "sdk", status: "replaying" })
    for (let i = 0; i < 100 && !messages.some((m) => m.type === "replay"); i++) await Bun.sleep(20)
    expect(messages.find((m) => m.type === "replay")?.execution_id).toBe(started.execution_id)
    socket.close()
  })

  test("concurrent replays of one fork split across both instances: no 5xx, never two winners of one generation", async () => {
    const fork = await recordedFork("no-sdk-agent")
    const responses = await Promise.all(
      Array.from({ length: 6 }, (_, i) => (i % 2 === 0 ? a : b).post(`/api/v1/forks/${fork.id}/replay`, {}))
    )
    const statuses = responses.map((r) => r.status)
    // Without a model provider the inline replay is quick: a later request may open the next generation.
    // What must hold: no 5xx, every 200 is its own generation, and the losers of a race get 409.
    expect(statuses.every((s) => s === 200 || s === 409)).toBe(true)
    const executions = await Promise.all(
      responses.filter((r) => r.status === 200).map(async (r) => ((await r.json()) as any).execution_id)
    )
    expect(new Set(executions).size).toBe(executions.length)
    const state = (await (await a.get(`/api/v1/forks/${fork.id}`)).json()) as any
    expect(state.generation).toBe(executions.length)
  })

  test("an instance told that another's checks keep waiting sheds its exports for a second, then takes them again", async () => {
    const exportOf = (server: TestServer) =>
      server.request("POST", "/v1/traces", {
        body: exportBody([otlpSpan({ traceId: hex(16), name: "step" })]),
        headers: { "content-type": "application/json" }
      })
    expect((await exportOf(b)).status).toBe(200)
    // What instance A says when its own checks keep waiting for a lane (ClusterPressure), sent on the shared database.
    await a.run(
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT pg_notify(${CHECK_PRESSURE_CHANNEL}, 'a:lanes')`)
    )
    let refused: Response | undefined
    for (let i = 0; i < 50 && refused === undefined; i++) {
      const answer = await exportOf(b)
      if (answer.status === 503) refused = answer
      else await Bun.sleep(20)
    }
    expect(refused?.headers.get("retry-after")).toBe("1")
    expect(((await refused!.json()) as any).code).toBe("ingest_backpressure")
    // The checks' own route is not what steps aside.
    expect((await b.post("/api/v1/enforcement/check", { run_id: "told", tool_name: "search" })).status).toBe(200)
    await Bun.sleep(1100)
    expect((await exportOf(b)).status).toBe(200)
  })
})

describe.if(Boolean(process.env.TEST_DATABASE_URL))("enforcement across instances and outages", () => {
  let a: TestServer
  let b: TestServer
  beforeAll(async () => {
    a = await startTestServer()
    b = await startTestServer({ DATABASE_URL: a.env.DATABASE_URL! })
  })
  afterAll(async () => {
    await b.stop()
    await a.stop()
  })

  const check = async (server: TestServer, body: Record<string, unknown>) =>
    (await (await server.post("/api/v1/enforcement/check", body)).json()) as any

  test("a policy created on one instance decides the next checks on the other (cache invalidated by NOTIFY)", async () => {
    const run = crypto.randomUUID()
    const tool = `tool-${crypto.randomUUID()}`
    expect((await check(a, { run_id: run, tool_name: tool })).verdict).toBe("allow")
    expect((await b.post("/api/v1/guardrails", { type: "tool_denylist", params: { patterns: [tool] } })).status).toBe(
      200
    )
    let verdict = "allow"
    for (let i = 0; i < 50 && verdict === "allow"; i++) {
      verdict = (await check(a, { run_id: run, tool_name: tool })).verdict
      if (verdict === "allow") await Bun.sleep(20)
    }
    expect(verdict).toBe("block")
  })
})

describe.if(Boolean(process.env.TEST_DATABASE_URL))("the database going away", () => {
  test("enforcement fails closed while PostgreSQL is unreachable and recovers by itself", async () => {
    const { startTcpProxy } = await import("../support/TcpProxy.ts")
    const first = await startTestServer()
    const url = new URL(first.env.DATABASE_URL!)
    const proxy = await startTcpProxy({ hostname: url.hostname, port: Number(url.port || 5432) })
    url.port = String(proxy.port)
    const server = await startTestServer({ DATABASE_URL: url.toString(), TAPEDECK_ENFORCEMENT_TIMEOUT_MS: "300" })
    try {
      const run = crypto.randomUUID()
      expect((await check(server, { run_id: run, tool_name: "search" })).verdict).toBe("allow")
      proxy.cut()
      const started = performance.now()
      const during = await check(server, { run_id: run, tool_name: "search" })
      expect(during).toMatchObject({ verdict: "block", policy_id: null, policy_type: null })
      expect(during.reason).toStartWith("policy state unavailable")
      expect(performance.now() - started).toBeLessThan(3000)
      // Other routes say the database is away: a retryable 503, not a 500.
      const listing = await server.get("/api/v1/traces")
      expect(listing.status).toBe(503)
      expect(Number(listing.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
      expect(await listing.json()).toMatchObject({ code: "unavailable", retryable: true })
      proxy.restore()
      let after: any
      for (let i = 0; i < 50; i++) {
        after = await check(server, { run_id: run, tool_name: "search" })
        if (after.verdict === "allow") break
        await Bun.sleep(100)
      }
      expect(after.verdict).toBe("allow")
    } finally {
      await server.stop()
      proxy.stop()
      await first.stop()
    }
  }, 60_000)

  async function check(server: TestServer, body: Record<string, unknown>) {
    return (await (await server.post("/api/v1/enforcement/check", body)).json()) as any
  }
})
