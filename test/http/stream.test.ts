import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { connect as tcpConnect } from "node:net"
import pg from "pg"
import { requestsInFlight } from "#layers/jobs/Foreground"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { span, trace, uuid } from "../support/Fixtures.ts"
import { chatAttributes, exportBody, hex, otlpSpan } from "../support/Otlp.ts"
import { connectStream, subscribed, wsUrl } from "./stream-client.ts"

let server: TestServer
let url: string
beforeAll(async () => {
  server = await startTestServer({
    TAPEDECK_STREAM_PING_SECONDS: "0.3",
    TAPEDECK_STREAM_AUTH_TIMEOUT_MS: "400",
    TAPEDECK_STREAM_QUEUE_MAX: "200"
  })
  url = wsUrl(server.url)
}, 60_000)
afterAll(() => server.stop(), 60_000)

const ok = async (response: Response | Promise<Response>) => {
  const r = await response
  if (r.status !== 200) throw new Error(`${r.status} ${await r.text()}`)
  return (await r.json()) as any
}

describe("live span stream: delivery", () => {
  test("REST writes arrive in order: trace created, spans, appended spans, trace terminal", async () => {
    const client = await subscribed(url, KEY_A)
    const root = span({ name: "root", span_type: "action" })
    const child = span({ name: "child", parent_id: root.id })
    const t = trace({ name: "rest", session_id: "s-rest", spans: [root, child] })
    await ok(server.post("/api/v1/traces", t))
    const late = span({ name: "late", parent_id: root.id })
    await ok(server.post(`/api/v1/traces/${t.id}/spans`, { spans: [late] }))
    await ok(
      server.post(`/api/v1/traces/${t.id}/spans`, { spans: [{ ...late, ended_at: "2026-01-01T00:00:02.000Z" }] })
    )
    await ok(server.request("PATCH", `/api/v1/traces/${t.id}`, { body: { status: "completed" } }))
    await client.waitFor(() => client.events().filter((e) => e.trace_id === t.id).length >= 8)
    const events = client.events().filter((e) => e.trace_id === t.id)
    expect(events.map((e) => `${e.type}:${e.event}${e.type === "span" ? `:${e.data.name}` : ""}`)).toEqual([
      "trace:created",
      "span:created:root",
      "span:created:child",
      "span:created:late",
      "trace:updated",
      "span:terminal:late",
      "trace:updated",
      "trace:terminal"
    ])
    // Shapes: span data is the snake_case Span, trace data the camelCase Trace; ids strictly increase.
    expect(events[1].data).toMatchObject({ id: root.id, parent_id: null, span_type: "action", name: "root" })
    expect(events[0].data).toMatchObject({ id: t.id, sessionId: "s-rest" })
    expect(events.at(-1)).toMatchObject({ type: "trace", event: "terminal", data: { status: "completed" } })
    const ids = events.map((e) => e.id)
    expect(ids.every((id, i) => i === 0 || id > ids[i - 1])).toBe(true)
    client.close()
  }, 60_000)

  test("a span event's data is the stored span exactly as the trace's detail shows it", async () => {
    const client = await subscribed(url, KEY_A)
    const root = span({ name: 'root "quoted" \\ back', span_type: "action" })
    const full = span({
      name: "model\tcall\n",
      parent_id: root.id,
      model: "gpt-4o-mini",
      input: { messages: [{ role: "user", content: "héllo ✓ \u0001" }], n: [1, 2.5, null, true] },
      output: null,
      input_tokens: 120,
      output_tokens: 7,
      cost: 0.000125,
      duration_ms: 1500,
      metadata: { nested: { deep: ["x"] }, empty: {} },
      agent_id: "agent-1",
      agent_role: "planner",
      error: "timeout after 30 s",
      ended_at: "2026-01-01T00:00:01.500Z",
      custom_extra: { kept: true }
    })
    const t = trace({ name: "exact", spans: [root, full] })
    await ok(server.post("/api/v1/traces", t))
    await client.waitFor(() => client.events().filter((e) => e.trace_id === t.id && e.type === "span").length >= 2)
    const detail = await ok(server.get(`/api/v1/traces/${t.id}`))
    for (const event of client.events().filter((e) => e.trace_id === t.id && e.type === "span")) {
      const stored = detail.spans.find((s: { id: string }) => s.id === event.data.id)
      expect(event.data).toEqual(stored)
      expect(Object.keys(event.data)).toEqual(Object.keys(stored))
      expect(event.data).toEqual(event.data.id === full.id ? full : root) // as written, extras and nulls included
    }
    client.close()
  }, 60_000)

  test("a deletion is a trace event `deleted`; a replay after it no longer shows the trace's data", async () => {
    const project = uuid()
    const client = await subscribed(url, KEY_A, { project_id: project })
    const spanFiltered = await subscribed(url, KEY_A, { span_type: "tool_call" })
    const other = await subscribed(url, KEY_B)
    const t = trace({ project_id: project, spans: [span({ name: "doomed" })] })
    await ok(server.post("/api/v1/traces", t))
    expect((await server.request("DELETE", `/api/v1/traces/${t.id}`, { key: KEY_B })).status).toBe(404)
    await ok(server.request("DELETE", `/api/v1/traces/${t.id}`))
    await client.waitFor(() => client.events().some((e) => e.event === "deleted"))
    const events = client.events().filter((e) => e.trace_id === t.id)
    expect(events.map((e) => `${e.type}:${e.event}`)).toEqual(["trace:created", "span:created", "trace:deleted"])
    expect(events[2].data).toEqual({ id: t.id })
    expect(events[2].id).toBeGreaterThan(events[1].id)
    // Replay from before the write: the deleted trace's created and span events are gone, its deletion is not.
    const replay = await subscribed(url, KEY_A, { project_id: project }, { last_event_id: events[0].id - 1 })
    expect(replay.events().map((e) => `${e.type}:${e.event}:${e.trace_id}`)).toEqual([`trace:deleted:${t.id}`])
    await Bun.sleep(200)
    expect(spanFiltered.events().some((e) => e.trace_id === t.id)).toBe(false)
    expect(other.events().some((e) => e.trace_id === t.id)).toBe(false)
    for (const c of [client, spanFiltered, other, replay]) c.close()
  }, 60_000)

  test("a trace created completed: created, its spans, then terminal", async () => {
    const client = await subscribed(url, KEY_A)
    const t = trace({ status: "completed", spans: [span({ name: "only" })] })
    await ok(server.post("/api/v1/traces", t))
    await client.waitFor(() => client.events().filter((e) => e.trace_id === t.id).length >= 3)
    expect(
      client
        .events()
        .filter((e) => e.trace_id === t.id)
        .map((e) => `${e.type}:${e.event}`)
    ).toEqual(["trace:created", "span:created", "trace:terminal"])
    client.close()
  }, 60_000)

  test("OTLP writes arrive: trace created, mapped spans, trace terminal when the root ends", async () => {
    const client = await subscribed(url, KEY_A)
    const traceId = hex(16)
    const rootId = hex(8)
    const body = exportBody([
      otlpSpan({
        traceId,
        spanId: rootId,
        name: "invoke_agent planner",
        attributes: { "gen_ai.operation.name": "invoke_agent" }
      }),
      otlpSpan({ traceId, parentSpanId: rootId, attributes: chatAttributes })
    ])
    const result = await ok(
      fetch(`${server.url}/v1/traces`, {
        method: "POST",
        headers: { "x-service-key": KEY_A, "content-type": "application/json" },
        body: JSON.stringify(body)
      })
    )
    expect(result.spans_ingested).toBe(2)
    await client.waitFor(() => client.events().some((e) => e.type === "trace" && e.event !== "created"))
    const events = client.events().filter((e) => e.data?.metadata?.otel?.trace_id === traceId || e.type === "span")
    const traceEvents = client.events().filter((e) => e.type === "trace")
    const ourTrace = traceEvents.find((e) => e.data.metadata?.otel?.trace_id === traceId)!
    const mine = client.events().filter((e) => e.trace_id === ourTrace.trace_id)
    expect(mine.map((e) => `${e.type}:${e.event}`)).toEqual([
      "trace:created",
      "span:created",
      "span:created",
      "trace:terminal"
    ])
    expect(
      mine
        .filter((e) => e.type === "span")
        .map((e) => e.data.span_type)
        .sort()
    ).toEqual(["action", "llm_call"].sort())
    expect(events.length).toBeGreaterThan(0)
    client.close()
  }, 60_000)

  test("filters: trace_id, project_id, session_id and span_type each narrow the events", async () => {
    const project = uuid()
    const a = trace({
      project_id: project,
      session_id: "sess-a",
      spans: [span({ span_type: "tool_call", name: "t" }), span({ name: "m" })]
    })
    const b = trace({ session_id: "sess-b", spans: [span({ span_type: "tool_call", name: "t2" })] })
    const byTrace = await subscribed(url, KEY_A, { trace_id: b.id })
    const byProject = await subscribed(url, KEY_A, { project_id: project })
    const bySession = await subscribed(url, KEY_A, { session_id: "sess-b" })
    const byType = await subscribed(url, KEY_A, { span_type: "tool_call", project_id: project })
    const all = await subscribed(url, KEY_A)
    await ok(server.post("/api/v1/traces", a))
    await ok(server.post("/api/v1/traces", b))
    await all.waitFor(() => all.events().filter((e) => e.trace_id === a.id || e.trace_id === b.id).length === 5)
    await Bun.sleep(100)
    const ours = (events: Array<any>) => events.filter((e) => e.trace_id === a.id || e.trace_id === b.id)
    expect(ours(byTrace.events()).map((e) => e.trace_id)).toEqual([b.id, b.id])
    expect(ours(byProject.events()).map((e) => e.trace_id)).toEqual([a.id, a.id, a.id])
    expect(ours(bySession.events()).map((e) => e.trace_id)).toEqual([b.id, b.id])
    expect(ours(byType.events()).map((e) => `${e.type}:${e.data.name}`)).toEqual(["span:t"])
    for (const c of [byTrace, byProject, bySession, byType, all]) c.close()
  }, 60_000)

  test("a subscription can be replaced and removed", async () => {
    const client = await subscribed(url, KEY_A, { session_id: "nothing-matches" })
    const t1 = trace()
    const t2 = trace()
    await ok(server.post("/api/v1/traces", t1))
    // Filters apply when an event is delivered: t1 matches neither the old nor the new subscription.
    client.send({ type: "subscribe", filters: { trace_id: t2.id } })
    await client.waitFor((m) => m.filter((x) => x.type === "subscribed").length === 2)
    await ok(server.post("/api/v1/traces", t2))
    await client.waitFor(() => client.events().some((e) => e.trace_id === t2.id))
    client.send({ type: "unsubscribe" })
    await client.waitFor((m) => m.some((x) => x.type === "unsubscribed"))
    await ok(server.post(`/api/v1/traces/${t2.id}/spans`, { spans: [span()] }))
    await Bun.sleep(200)
    expect(client.events().map((e) => e.trace_id)).toEqual([t2.id])
    client.close()
  }, 60_000)

  test("batch: a write's events come in one frame with their count, the same events in the same order", async () => {
    const plain = await subscribed(url, KEY_A)
    const batching = await subscribed(url, KEY_A, {}, { batch: true })
    expect(batching.messages.find((m) => m.type === "subscribed")).toMatchObject({ batch: true })
    const root = span({ name: "root" })
    const t = trace({ spans: [root, span({ parent_id: root.id }), span({ parent_id: root.id })] })
    await ok(server.post("/api/v1/traces", t))
    await ok(server.post(`/api/v1/traces/${t.id}/spans`, { spans: [span({ parent_id: root.id })] }))
    await ok(server.request("PATCH", `/api/v1/traces/${t.id}`, { body: { status: "completed" } }))
    const ofTrace = (c: typeof plain) => c.events().filter((e) => e.trace_id === t.id)
    await plain.waitFor(() => ofTrace(plain).length >= 7)
    await batching.waitFor(() => ofTrace(batching).length >= 7)
    expect(ofTrace(batching)).toEqual(ofTrace(plain))
    const frames = batching.messages.filter(
      (m) => m.type !== "authenticated" && m.type !== "subscribed" && m.type !== "ping"
    )
    expect(frames.every((m) => m.type === "batch" && m.count === m.events.length && m.count > 0)).toBe(true)
    // The create's trace event and its three spans were one write: one frame.
    expect(frames[0].events.map((e: { type: string }) => e.type)).toEqual(["trace", "span", "span", "span"])

    // A replay comes batched too.
    const replayed = await subscribed(
      url,
      KEY_A,
      { trace_id: t.id },
      { batch: true, last_event_id: ofTrace(plain)[0].id }
    )
    expect(replayed.messages.find((m) => m.type === "subscribed")).toMatchObject({ batch: true, replayed: 6 })
    // (A replay reads the rows as they are now: the same events, the trace's data current.)
    const shape = (e: { type: string; event: string; id: number }) => `${e.type}:${e.event}:${e.id}`
    expect(replayed.events().map(shape)).toEqual(ofTrace(plain).slice(1).map(shape))
    expect(replayed.messages.filter((m) => m.type === "span" || m.type === "trace")).toEqual([])
    for (const c of [plain, batching, replayed]) c.close()
  }, 60_000)

  test("an open stream does not hold background work back: it is not a request in flight", async () => {
    const clients = await Promise.all([subscribed(url, KEY_A), subscribed(url, KEY_B)])
    expect(requestsInFlight()).toBe(0)
    for (const client of clients) client.close()
  }, 60_000)

  test("heartbeats: the server pings at the configured interval and answers a client ping", async () => {
    const client = await subscribed(url, KEY_A)
    await client.waitFor((m) => m.filter((x) => x.type === "ping").length >= 2, 3000)
    client.send({ type: "ping" })
    await client.waitFor((m) => m.some((x) => x.type === "pong"))
    client.close()
  }, 60_000)
})

describe("live span stream: validation and authentication", () => {
  test("invalid messages are answered with an error and the connection stays usable", async () => {
    const client = await connectStream(url, { headers: { "x-service-key": KEY_A } })
    const bad = [
      "not json",
      { type: "subscribe", filters: { trace_id: "nope" } },
      { type: "subscribe", filters: { span_type: "llm" } },
      { type: "subscribe", filters: { unknown: 1 } },
      { type: "subscribe", filters: { session_id: "x".repeat(101) } },
      { type: "subscribe", last_event_id: -1 },
      { type: "subscribe", extra: true },
      { type: "launch" },
      [1, 2]
    ]
    for (const message of bad) client.send(message)
    await client.waitFor((m) => m.filter((x) => x.type === "error").length === bad.length)
    expect(client.messages.filter((x) => x.type === "error").every((x) => x.code === "validation_failed")).toBe(true)
    client.send({ type: "subscribe", filters: { span_type: "llm_call" } })
    await client.waitFor((m) => m.some((x) => x.type === "subscribed"))
    client.close()
  }, 60_000)

  test("credentials: header, Bearer, ?token= and a first auth message all work", async () => {
    const ways = [
      await connectStream(url, { headers: { "x-service-key": KEY_A } }),
      await connectStream(url, { headers: { authorization: `Bearer ${KEY_A}` } }),
      await connectStream(`${url}?token=${KEY_A}`),
      await connectStream(url)
    ]
    ways[3]!.send({ type: "auth", token: KEY_A })
    for (const client of ways) {
      await client.waitFor((m) => m.some((x) => x.type === "authenticated"))
      client.send({ type: "subscribe" })
      await client.waitFor((m) => m.some((x) => x.type === "subscribed"))
    }
    const t = trace()
    await ok(server.post("/api/v1/traces", t))
    for (const client of ways) {
      await client.waitFor(() => client.events().some((e) => e.trace_id === t.id))
      client.close()
    }
  }, 60_000)

  test("revoking the API key closes its open streams (4401), whichever way it authenticated", async () => {
    const created = await ok(server.post("/api/v1/api-keys", { name: "stream-revoke" }))
    const ways = [
      await connectStream(url, { headers: { "x-service-key": created.key } }),
      await connectStream(`${url}?token=${created.key}`),
      await connectStream(url)
    ]
    ways[2]!.send({ type: "auth", token: created.key })
    const survivor = await subscribed(url, KEY_A)
    for (const client of ways) {
      await client.waitFor((m) => m.some((x) => x.type === "authenticated"))
      client.send({ type: "subscribe" })
      await client.waitFor((m) => m.some((x) => x.type === "subscribed"))
    }
    await ok(server.request("DELETE", `/api/v1/api-keys/${created.id}`))
    for (const client of ways) {
      expect(await client.closed).toEqual({ code: 4401, reason: "credentials revoked or expired" })
    }
    // Nothing written after the revocation reached them; the account's other streams go on.
    const t = trace()
    await ok(server.post("/api/v1/traces", t))
    await survivor.waitFor(() => survivor.events().some((e) => e.trace_id === t.id))
    for (const client of ways) expect(client.events().some((e) => e.trace_id === t.id)).toBe(false)
    survivor.close()
  }, 60_000)

  test("a bad header credential is a plain 401 before the upgrade", async () => {
    const response = await fetch(`${server.url}/ws/v1/stream`, {
      headers: {
        "x-service-key": "svc_wrong",
        connection: "Upgrade",
        upgrade: "websocket",
        "sec-websocket-version": "13",
        "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ=="
      }
    })
    expect(response.status).toBe(401)
    expect(await response.json()).toEqual({
      error: "missing or invalid credentials",
      code: "unauthorized",
      retryable: false
    })
    const badId = await fetch(`${server.url}/ws/v1/stream?last_event_id=abc`, { headers: { "x-service-key": KEY_A } })
    expect(badId.status).toBe(400)
  }, 60_000)

  test("a plain request (no Upgrade) is authenticated first: no or bad credentials are 401, good ones a 400 for the missing upgrade", async () => {
    const body401 = { error: "missing or invalid credentials", code: "unauthorized", retryable: false }
    for (const path of [
      "/ws/v1/stream",
      "/ws/v1/stream?token=",
      "/ws/v1/stream?token=svc_nope",
      "/ws/v1/stream?last_event_id=abc"
    ]) {
      const response = await fetch(`${server.url}${path}`)
      expect(response.status).toBe(401)
      expect(await response.json()).toEqual(body401)
    }
    expect((await fetch(`${server.url}/ws/v1/stream`, { headers: { authorization: "Basic abc" } })).status).toBe(401)
    for (const init of [{ headers: { "x-service-key": KEY_A } }, {}]) {
      const path = "headers" in init ? "/ws/v1/stream" : `/ws/v1/stream?token=${KEY_A}`
      const response = await fetch(`${server.url}${path}`, init)
      expect(response.status).toBe(400)
      expect(((await response.json()) as { code: string }).code).toBe("validation_failed")
    }
  }, 60_000)

  test("a bad ?token=, a bad auth message, or none within the timeout: closed with 4401", async () => {
    const badToken = await connectStream(`${url}?token=svc_nope`)
    expect((await badToken.closed).code).toBe(4401)
    const badMessage = await connectStream(url)
    badMessage.send({ type: "auth", token: "svc_nope" })
    expect((await badMessage.closed).code).toBe(4401)
    const silent = await connectStream(url)
    const started = Date.now()
    expect(await silent.closed).toEqual({ code: 4401, reason: "unauthorized" })
    expect(Date.now() - started).toBeLessThan(3000)
    const subscribeFirst = await connectStream(url)
    subscribeFirst.send({ type: "subscribe" })
    expect((await subscribeFirst.closed).code).toBe(4401)
  }, 60_000)
})

describe("live span stream: isolation", () => {
  test("property: over any interleaving of writes by two accounts, each subscriber gets exactly its own account's events", async () => {
    const a = await subscribed(url, KEY_A)
    const b = await subscribed(url, KEY_B)
    const expected = { a: new Set<string>(), b: new Set<string>() }
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            who: fc.constantFrom("a" as const, "b" as const),
            kind: fc.constantFrom("create", "append", "finish"),
            spans: fc.integer({ min: 0, max: 3 })
          }),
          { minLength: 1, maxLength: 8 }
        ),
        async (ops) => {
          const open = { a: [] as Array<string>, b: [] as Array<string> }
          await Promise.all(
            ops.map(async (op) => {
              const key = op.who === "a" ? KEY_A : KEY_B
              if (op.kind === "create" || open[op.who].length === 0) {
                const t = trace({ spans: Array.from({ length: op.spans }, () => span()) })
                await ok(server.post("/api/v1/traces", t, key))
                open[op.who].push(t.id)
                expected[op.who].add(t.id)
              } else if (op.kind === "append") {
                await server.post(`/api/v1/traces/${open[op.who][0]}/spans`, { spans: [span()] }, key)
              } else {
                await server.request("PATCH", `/api/v1/traces/${open[op.who][0]}`, {
                  key,
                  body: { status: "completed" }
                })
              }
              // The other account writing to this trace is refused and must not leak an event either.
              const other = op.who === "a" ? KEY_B : KEY_A
              if (open[op.who][0])
                await server.post(`/api/v1/traces/${open[op.who][0]}/spans`, { spans: [span()] }, other)
            })
          )
        }
      ),
      { numRuns: 15 }
    )
    const probeA = trace()
    const probeB = trace()
    await ok(server.post("/api/v1/traces", probeA, KEY_A))
    await ok(server.post("/api/v1/traces", probeB, KEY_B))
    await a.waitFor(() => a.events().some((e) => e.trace_id === probeA.id), 10_000)
    await b.waitFor(() => b.events().some((e) => e.trace_id === probeB.id), 10_000)
    const seenA = new Set(a.events().map((e) => e.trace_id))
    const seenB = new Set(b.events().map((e) => e.trace_id))
    for (const id of expected.a) expect(seenA.has(id)).toBe(true)
    for (const id of expected.b) expect(seenB.has(id)).toBe(true)
    for (const id of seenA) expect(expected.b.has(id) || id === probeB.id).toBe(false)
    for (const id of seenB) expect(expected.a.has(id) || id === probeA.id).toBe(false)
    a.close()
    b.close()
  }, 60_000)

  test("last_event_id cannot replay another account's events", async () => {
    const a = await subscribed(url, KEY_A)
    const t = trace({ spans: [span()] })
    await ok(server.post("/api/v1/traces", t, KEY_A))
    await a.waitFor(() => a.events().some((e) => e.trace_id === t.id))
    const before = a.events()[0].id - 1
    const b = await subscribed(url, KEY_B, {}, { last_event_id: before })
    await Bun.sleep(100)
    expect(b.events()).toEqual([])
    a.close()
    b.close()
  }, 60_000)
})

describe("live span stream: replay and slow consumers", () => {
  test("reconnecting with ?last_event_id= (or in subscribe) replays the events missed, then goes live", async () => {
    const first = await subscribed(url, KEY_A)
    const t1 = trace({ spans: [span()] })
    await ok(server.post("/api/v1/traces", t1))
    await first.waitFor(() => first.events().filter((e) => e.trace_id === t1.id).length === 2)
    const last = first.events().at(-1).id
    first.close()
    const t2 = trace({ spans: [span(), span()] })
    await ok(server.post("/api/v1/traces", t2))
    await ok(server.request("PATCH", `/api/v1/traces/${t2.id}`, { body: { status: "failed" } }))

    const viaQuery = await connectStream(`${url}?last_event_id=${last}`, { headers: { "x-service-key": KEY_A } })
    viaQuery.send({ type: "subscribe" })
    await viaQuery.waitFor((m) => m.some((x) => x.type === "subscribed"))
    const ack = viaQuery.messages.find((x) => x.type === "subscribed")
    expect(ack).toMatchObject({ replayed: 4, replay_complete: true })
    expect(viaQuery.events().map((e) => `${e.type}:${e.event}`)).toEqual([
      "trace:created",
      "span:created",
      "span:created",
      "trace:terminal"
    ])
    expect(viaQuery.events().every((e) => e.trace_id === t2.id && e.id > last)).toBe(true)
    // Then live.
    const t3 = trace()
    await ok(server.post("/api/v1/traces", t3))
    await viaQuery.waitFor(() => viaQuery.events().some((e) => e.trace_id === t3.id))
    expect(viaQuery.events().filter((e) => e.trace_id === t2.id)).toHaveLength(4)

    const viaMessage = await subscribed(url, KEY_A, { trace_id: t2.id }, { last_event_id: last })
    expect(viaMessage.events().map((e) => e.trace_id)).toEqual([t2.id, t2.id, t2.id, t2.id])
    // Events after the last one seen only: resuming from the middle of a write skips what was seen.
    const middle = viaMessage.events()[1].id
    const fromMiddle = await subscribed(url, KEY_A, { trace_id: t2.id }, { last_event_id: middle })
    expect(fromMiddle.events().map((e) => e.id)).toEqual(
      viaMessage
        .events()
        .slice(2)
        .map((e) => e.id)
    )
    for (const c of [viaQuery, viaMessage, fromMiddle]) c.close()
  }, 60_000)

  test("a client that stops reading is closed with 4008 instead of being buffered without bound", async () => {
    const socket = tcpConnect(Number(new URL(server.url).port), "127.0.0.1")
    await new Promise((resolve) => socket.once("connect", resolve))
    socket.write(
      "GET /ws/v1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
        `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nx-service-key: ${KEY_A}\r\n\r\n`
    )
    let received: Buffer = Buffer.alloc(0)
    socket.on("data", (chunk) => {
      received = Buffer.concat([received, Buffer.from(chunk)])
    })
    const until = async (predicate: () => boolean, ms: number) => {
      const deadline = Date.now() + ms
      while (!predicate() && Date.now() < deadline) await Bun.sleep(20)
    }
    await until(() => received.includes("authenticated"), 5000)
    socket.write(maskedText(JSON.stringify({ type: "subscribe" })))
    await until(() => received.includes("subscribed"), 5000)
    socket.pause() // stop reading: the kernel buffers fill, then the server's
    const big = "x".repeat(20_000)
    for (let i = 0; i < 12; i++) {
      await ok(server.post("/api/v1/traces", trace({ spans: Array.from({ length: 100 }, () => span({ input: big })) })))
    }
    await Bun.sleep(500)
    socket.resume()
    await until(() => closeFrame(received) !== undefined, 10_000)
    const close = closeFrame(received)
    socket.destroy()
    expect(close?.code).toBe(4008)
    expect(close?.reason).toContain("slow consumer")
    // A reading client on the same server was not affected.
    const healthy = await subscribed(url, KEY_A)
    const t = trace()
    await ok(server.post("/api/v1/traces", t))
    await healthy.waitFor(() => healthy.events().some((e) => e.trace_id === t.id))
    healthy.close()
  }, 60_000)
})

/** A masked client text frame (RFC 6455 §5.3). */
const maskedText = (text: string) => {
  const payload = Buffer.from(text)
  const mask = Buffer.from([1, 2, 3, 4])
  const header =
    payload.length < 126
      ? Buffer.from([0x81, 0x80 | payload.length])
      : Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 255])
  const masked = Buffer.from(payload.map((b, i) => b ^ mask[i % 4]!))
  return Buffer.concat([header, mask, masked])
}

/** The close frame among the server's frames after the HTTP response, if it arrived. */
const closeFrame = (data: Buffer): { code: number; reason: string } | undefined => {
  let offset = data.indexOf("\r\n\r\n") + 4
  while (offset + 2 <= data.length) {
    const opcode = data[offset]! & 0x0f
    let length = data[offset + 1]! & 0x7f
    let start = offset + 2
    if (length === 126) {
      length = data.readUInt16BE(start)
      start += 2
    } else if (length === 127) {
      length = Number(data.readBigUInt64BE(start))
      start += 8
    }
    if (start + length > data.length) return undefined
    if (opcode === 8)
      return { code: data.readUInt16BE(start), reason: data.subarray(start + 2, start + length).toString() }
    offset = start + length
  }
  return undefined
}

// Two API instances on one PostgreSQL: events travel by LISTEN/NOTIFY (PGlite is one process, so this runs
// in the PostgreSQL pass of the suite).
describe.if(Boolean(process.env.TEST_DATABASE_URL))("live span stream across two instances", () => {
  let other: TestServer
  beforeAll(async () => {
    other = await startTestServer({ DATABASE_URL: server.env.DATABASE_URL! })
  }, 60_000)
  afterAll(() => other.stop(), 60_000)

  test("a write on one instance reaches subscribers of both; OTLP too; never the other account", async () => {
    const onOther = await subscribed(wsUrl(other.url), KEY_A)
    const onSame = await subscribed(url, KEY_A)
    const foreign = await subscribed(wsUrl(other.url), KEY_B)
    const t = trace({ spans: [span({ name: "cross" })] })
    await ok(server.post("/api/v1/traces", t))
    await onOther.waitFor(() => onOther.events().filter((e) => e.trace_id === t.id).length === 2)
    await onSame.waitFor(() => onSame.events().filter((e) => e.trace_id === t.id).length === 2)
    expect(
      onOther
        .events()
        .filter((e) => e.trace_id === t.id)
        .map((e) => e.id)
    ).toEqual(
      onSame
        .events()
        .filter((e) => e.trace_id === t.id)
        .map((e) => e.id)
    )
    const traceId = hex(16)
    await ok(
      fetch(`${other.url}/v1/traces`, {
        method: "POST",
        headers: { "x-service-key": KEY_A, "content-type": "application/json" },
        body: JSON.stringify(exportBody([otlpSpan({ traceId, attributes: chatAttributes })]))
      })
    )
    await onSame.waitFor(() => onSame.events().some((e) => e.data?.metadata?.otel?.trace_id === traceId))
    // Replay on the other instance of what was written on the first.
    const last = onOther.events().find((e) => e.trace_id === t.id).id - 1
    const replayed = await subscribed(wsUrl(other.url), KEY_A, { trace_id: t.id }, { last_event_id: last })
    expect(replayed.events().map((e) => e.trace_id)).toEqual([t.id, t.id])
    await Bun.sleep(200)
    expect(foreign.events()).toEqual([])
    for (const c of [onOther, onSame, foreign, replayed]) c.close()
  }, 60_000)

  test("writes NOTIFY only while some instance has a subscriber of their account (the log is written either way)", async () => {
    const listener = new pg.Client({ connectionString: server.env.DATABASE_URL! })
    await listener.connect()
    try {
      const accountB = (await listener.query("SELECT id FROM accounts WHERE name = 'globex'")).rows[0].id as string
      const heard: Array<string> = []
      listener.on("notification", (n) => void (n.payload?.startsWith(`${accountB}:`) && heard.push(n.payload)))
      await listener.query("LISTEN tapedeck_stream")
      const logRows = async () =>
        Number(
          (await listener.query("SELECT count(*) FROM stream_events WHERE account_id = $1", [accountB])).rows[0].count
        )
      const listenerRows = async () =>
        Number(
          (await listener.query("SELECT count(*) FROM stream_listeners WHERE account_id = $1", [accountB])).rows[0]
            .count
        )
      const until = async (done: () => Promise<boolean>) => {
        for (let i = 0; i < 100 && !(await done()); i++) await Bun.sleep(20)
        expect(await done()).toBe(true)
      }

      const before = await logRows()
      await ok(server.post("/api/v1/traces", trace({ spans: [span()] }), KEY_B))
      await Bun.sleep(300)
      expect(heard).toEqual([])
      expect(await logRows()).toBe(before + 1)

      const watching = await subscribed(wsUrl(other.url), KEY_B)
      expect(await listenerRows()).toBe(1)
      const t = trace({ spans: [span()] })
      await ok(server.post("/api/v1/traces", t, KEY_B))
      await watching.waitFor(() => watching.events().filter((e) => e.trace_id === t.id).length === 2)
      expect(heard).toHaveLength(1)

      watching.close()
      await until(async () => (await listenerRows()) === 0)
      await ok(server.post("/api/v1/traces", trace({ spans: [span()] }), KEY_B))
      await Bun.sleep(300)
      expect(heard).toHaveLength(1)
    } finally {
      await listener.end()
    }
  }, 60_000)
})
