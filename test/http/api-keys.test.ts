import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { chatAttributes, exportBody, hex, otlpSpan } from "../support/Otlp.ts"
import { sqlOn } from "../support/Until.ts"

const KEY_C = "svc_test_key_capped_0003"

let server: TestServer
beforeAll(async () => {
  server = await startTestServer({ TAPEDECK_API_KEYS: `acme=${KEY_A},globex=${KEY_B},capped=${KEY_C}` })
}, 60_000)
afterAll(() => server.stop(), 60_000)

const create = async (body: unknown, key: string = KEY_A, target: TestServer = server) => {
  const response = await target.post("/api/v1/api-keys", body, key)
  return { response, status: response.status, body: (await response.clone().json()) as any }
}
const list = async (key: string = KEY_A) =>
  ((await (await server.get("/api/v1/api-keys", key)).json()) as any).items as Array<any>
const revoke = (id: string, key: string = KEY_A, target: TestServer = server) =>
  target.request("DELETE", `/api/v1/api-keys/${id}`, { key })

describe("API keys", () => {
  test("create shows the full key once; it works at once with either header; listings never show it", async () => {
    const { response, status, body } = await create({ name: "ci" })
    expect(status).toBe(200)
    expect(response.headers.get("cache-control")).toBe("no-store")
    expect(body.key).toMatch(/^svc_[A-Za-z0-9_-]{43}$/)
    expect(body).toMatchObject({ name: "ci", prefix: body.key.slice(0, 12), lastUsedAt: null })
    expect(Object.keys(body).sort()).toEqual(["createdAt", "id", "key", "lastUsedAt", "name", "prefix"])
    expect(Date.parse(body.createdAt)).toBeGreaterThan(Date.now() - 60_000)

    expect((await server.get("/api/v1/traces", body.key)).status).toBe(200)
    expect(
      (await server.request("GET", "/api/v1/traces", { key: null, headers: { authorization: `Bearer ${body.key}` } }))
        .status
    ).toBe(200)

    const listed = await list()
    const mine = listed.find((k) => k.id === body.id)
    expect(Object.keys(mine).sort()).toEqual(["createdAt", "id", "lastUsedAt", "name", "prefix"])
    expect(mine).toMatchObject({ name: "ci", prefix: body.key.slice(0, 12), createdAt: body.createdAt })
    expect(JSON.stringify(listed)).not.toContain(body.key)
    expect(JSON.stringify(listed)).not.toContain(KEY_A)
    // Usage time is recorded (off the request path, at most once a minute per key).
    let lastUsedAt: string | null = null
    for (let i = 0; i < 50 && lastUsedAt === null; i++) {
      lastUsedAt = (await list()).find((k) => k.id === body.id)?.lastUsedAt ?? null
      if (lastUsedAt === null) await Bun.sleep(20)
    }
    expect(lastUsedAt).not.toBeNull()
  }, 60_000)

  test("the body is strict and the name required: 1 to 100 characters", async () => {
    for (const body of [
      {},
      { name: "" },
      { name: "   " },
      { name: "x".repeat(101) },
      { name: 7 },
      { name: null },
      { name: "ok", scope: "all" },
      "not json",
      []
    ]) {
      const { status, body: error } = await create(body)
      expect({ body, status }).toEqual({ body, status: 400 })
      expect(error).toMatchObject({ code: "validation_failed", retryable: false })
    }
    expect((await create({ name: "x".repeat(100) })).status).toBe(200)
    expect((await server.post("/api/v1/api-keys", { name: "anon" }, null)).status).toBe(401)
  }, 60_000)

  test("revoke: refused from the very next request; a second revoke, a foreign or unknown id is 404", async () => {
    const { body: key } = await create({ name: "temp" })
    expect((await server.get("/api/v1/traces", key.key)).status).toBe(200)

    // Another account cannot revoke it (nor learn that it exists).
    const foreign = await revoke(key.id, KEY_B)
    expect(foreign.status).toBe(404)
    expect(await foreign.json()).toMatchObject({ code: "not_found" })
    expect((await list(KEY_B)).map((k) => k.id)).not.toContain(key.id)
    expect((await server.get("/api/v1/traces", key.key)).status).toBe(200)

    const revoked = await revoke(key.id)
    expect(revoked.status).toBe(200)
    expect(await revoked.json()).toEqual({ id: key.id, revoked: true })
    const refused = await server.get("/api/v1/traces", key.key)
    expect(refused.status).toBe(401)
    expect(await refused.json()).toMatchObject({ code: "unauthorized" })
    expect(
      (await server.request("GET", "/api/v1/traces", { key: null, headers: { authorization: `Bearer ${key.key}` } }))
        .status
    ).toBe(401)
    expect((await list()).map((k) => k.id)).not.toContain(key.id)
    expect((await revoke(key.id)).status).toBe(404)
    expect((await revoke(crypto.randomUUID())).status).toBe(404)
    expect((await revoke("not-a-uuid")).status).toBe(400)
  }, 60_000)

  test("a key revoked where this instance did not hear of it is refused by the enforcement check's own statement", async () => {
    // The check may act for a key this instance verified in the last minute, without a lookup of its own; its one
    // statement re-checks the key. A revocation this instance has not heard of (the notice is late, or it came
    // through SQL, as here) still refuses the very next check, and stores nothing for it.
    const { body } = await create({ name: "enforcer" })
    const runId = `cached-key-${crypto.randomUUID()}`
    const check = (headers: Record<string, string>) =>
      server.request("POST", "/api/v1/enforcement/check", {
        key: null,
        headers,
        body: { run_id: runId, proposed_usd: 0.25 }
      })
    expect((await check({ "x-service-key": body.key })).status).toBe(200)
    expect((await check({ authorization: `Bearer ${body.key}` })).status).toBe(200)
    await sqlOn(server)("UPDATE api_keys SET revoked_at = now() WHERE id = $1", body.id)
    for (const headers of [{ "x-service-key": body.key }, { authorization: `Bearer ${body.key}` }]) {
      const refused = await check(headers)
      expect(refused.status).toBe(401)
      expect(await refused.json()).toEqual({
        error: "invalid or revoked API key",
        code: "unauthorized",
        retryable: false
      })
    }
    const decisions = (await (await server.get(`/api/v1/enforcement/decisions?run_id=${runId}`)).json()) as any
    expect(decisions.items).toHaveLength(2)
    // Every other route looks the key up.
    expect((await server.get("/api/v1/traces", body.key)).status).toBe(401)
  })

  test("a key revoked where this instance did not hear of it is refused by the trace create's own statement", async () => {
    // POST /api/v1/traces may also act for a key verified here in the last minute; its one statement re-checks it.
    const { body } = await create({ name: "ingest" })
    const trace = () => ({
      id: crypto.randomUUID(),
      started_at: "2026-01-01T00:00:00Z",
      status: "completed",
      spans: [
        {
          id: crypto.randomUUID(),
          parent_id: null,
          span_type: "llm_call",
          name: "chat",
          started_at: "2026-01-01T00:00:01Z"
        }
      ]
    })
    const first = trace()
    expect((await server.post("/api/v1/traces", first, body.key)).status).toBe(200)
    await sqlOn(server)("UPDATE api_keys SET revoked_at = now() WHERE id = $1", body.id)
    const refusedTraces = []
    for (const headers of [{ "x-service-key": body.key }, { authorization: `Bearer ${body.key}` }]) {
      const refusedTrace = trace()
      refusedTraces.push(refusedTrace)
      const refused = await server.request("POST", "/api/v1/traces", { key: null, headers, body: refusedTrace })
      expect(refused.status).toBe(401)
      expect(await refused.json()).toEqual({
        error: "invalid or revoked API key",
        code: "unauthorized",
        retryable: false
      })
    }
    expect((await server.get(`/api/v1/traces/${first.id}`)).status).toBe(200)
    for (const refusedTrace of refusedTraces) {
      expect((await server.get(`/api/v1/traces/${refusedTrace.id}`)).status).toBe(404)
      expect(await sqlOn(server)("SELECT count(*)::int AS n FROM spans WHERE trace_id = $1", refusedTrace.id)).toEqual([
        { n: 0 }
      ])
    }
  })

  test("a key revoked where this instance did not hear of it is refused by the OTLP export's own write", async () => {
    // The export paths may also act for a key verified here in the last minute; their write re-checks it.
    const { body } = await create({ name: "exporter" })
    const exportOf = (otelTraceId: string) =>
      exportBody([otlpSpan({ traceId: otelTraceId, attributes: chatAttributes })])
    const stored = async (otelTraceId: string) =>
      (await sqlOn(server)(
        "SELECT count(*)::int AS n FROM traces WHERE metadata -> 'otel' ->> 'trace_id' = $1",
        otelTraceId
      )) as Array<{ n: number }>
    const first = hex(16)
    expect((await server.post("/v1/traces", exportOf(first), body.key)).status).toBe(200)
    expect(await stored(first)).toEqual([{ n: 1 }])
    await sqlOn(server)("UPDATE api_keys SET revoked_at = now() WHERE id = $1", body.id)
    const basic = `Basic ${Buffer.from(`pk-lf-any:${body.key}`).toString("base64")}`
    const refusals = [
      { path: "/v1/traces", headers: { "x-service-key": body.key } },
      { path: "/v1/traces", headers: { authorization: `Bearer ${body.key}` } },
      { path: "/api/public/otel/v1/traces", headers: { authorization: basic } }
    ]
    for (const { path, headers } of refusals) {
      const otelTraceId = hex(16)
      const refused = await server.request("POST", path, { key: null, headers, body: exportOf(otelTraceId) })
      expect(refused.status).toBe(401)
      expect(await refused.json()).toEqual({
        error: "invalid or revoked API key",
        code: "unauthorized",
        retryable: false
      })
      expect(await stored(otelTraceId)).toEqual([{ n: 0 }])
    }
    // An export with nothing to write is refused as well.
    const empty = await server.request("POST", "/v1/traces", {
      key: null,
      headers: { "x-service-key": body.key },
      body: { resourceSpans: [] }
    })
    expect(empty.status).toBe(401)
  })

  test("a key may revoke itself; the account's other keys keep working", async () => {
    const { body: key } = await create({ name: "self" })
    expect((await revoke(key.id, key.key)).status).toBe(200)
    expect((await server.get("/api/v1/api-keys", key.key)).status).toBe(401)
    expect((await server.get("/api/v1/api-keys", KEY_A)).status).toBe(200)
  }, 60_000)

  test("an account holds at most 100 live keys: more is a 409 until one is revoked", async () => {
    const existing = (await list(KEY_C)).length
    const ids: Array<string> = []
    for (let i = existing; i < 100; i++) {
      const { status, body } = await create({ name: `k${i}` }, KEY_C)
      expect(status).toBe(200)
      ids.push(body.id)
    }
    const over = await create({ name: "one too many" }, KEY_C)
    expect(over.status).toBe(409)
    expect(over.body).toMatchObject({ code: "conflict" })
    expect((await list(KEY_C)).length).toBe(100)
    expect((await revoke(ids[0]!, KEY_C)).status).toBe(200)
    expect((await create({ name: "room again" }, KEY_C)).status).toBe(200)
  }, 60_000)
})

// Several instances on one PostgreSQL: a revocation on one is seen by the next request on the other.
describe.if(Boolean(process.env.TEST_DATABASE_URL))("API key revocation across instances", () => {
  test("revoked on A, refused on B at once", async () => {
    const b = await startTestServer({ DATABASE_URL: server.env.DATABASE_URL!, TAPEDECK_API_KEYS: "" })
    try {
      const { body: key } = await create({ name: "shared" })
      expect((await b.get("/api/v1/traces", key.key)).status).toBe(200)
      expect((await revoke(key.id)).status).toBe(200)
      expect((await b.get("/api/v1/traces", key.key)).status).toBe(401)
      // And the other way round.
      const { body: other } = await create({ name: "shared-2" }, KEY_A, b)
      expect((await server.get("/api/v1/traces", other.key)).status).toBe(200)
      expect((await revoke(other.id, KEY_A, b)).status).toBe(200)
      expect((await server.get("/api/v1/traces", other.key)).status).toBe(401)
    } finally {
      await b.stop()
    }
  }, 60_000)

  test("a database outage right after a revocation does not let the revoked key back in on any instance", async () => {
    const { startTcpProxy } = await import("../support/TcpProxy.ts")
    const url = new URL(server.env.DATABASE_URL!)
    const proxy = await startTcpProxy({ hostname: url.hostname, port: Number(url.port || 5432) })
    url.port = String(proxy.port)
    const b = await startTestServer({
      DATABASE_URL: url.toString(),
      TAPEDECK_API_KEYS: "",
      TAPEDECK_ENFORCEMENT_TIMEOUT_MS: "300"
    })
    try {
      const { body: doomed } = await create({ name: "doomed" })
      const { body: kept } = await create({ name: "kept" })
      const check = (key: string) => b.post("/api/v1/enforcement/check", { run_id: crypto.randomUUID() }, key)
      // Both verified on B: B's outage cache now knows both.
      expect((await check(doomed.key)).status).toBe(200)
      expect((await check(kept.key)).status).toBe(200)
      expect((await revoke(doomed.id)).status).toBe(200) // on A; B hears it through NOTIFY
      await Bun.sleep(500)
      proxy.cut()
      // The live key still authenticates from the cache (and the check fails closed); the revoked one does not.
      const during = await check(kept.key)
      expect(during.status).toBe(200)
      expect(((await during.json()) as any).verdict).toBe("block")
      expect((await check(doomed.key)).status).not.toBe(200)
      proxy.restore()
    } finally {
      await b.stop()
      proxy.stop()
    }
  }, 60_000)
})
