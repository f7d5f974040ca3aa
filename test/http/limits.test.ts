import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { trace, uuid } from "../support/Fixtures.ts"

let server: TestServer
beforeAll(async () => {
  server = await startTestServer({
    TAPEDECK_MAX_BODY_BYTES: "4096",
    TAPEDECK_COMMIT: "abc123",
    TAPEDECK_DEPLOYMENT_ID: "dep-7"
  })
})
afterAll(() => server.stop())

describe("public routes", () => {
  test("GET /health is the strict Health object, unauthenticated", async () => {
    for (let i = 0; i < 6; i++) {
      const response = await fetch(`${server.url}/health`)
      expect(response.status).toBe(200)
      const body = (await response.json()) as any
      expect(Object.keys(body).sort()).toEqual([
        "commit",
        "deploymentId",
        "service",
        "status",
        "timestamp",
        "uptime",
        "version"
      ])
      expect(body).toMatchObject({
        status: "ok",
        service: "tapedeck-api",
        version: "0.1.0",
        commit: "abc123",
        deploymentId: "dep-7"
      })
      expect(Number.isNaN(Date.parse(body.timestamp))).toBe(false)
      expect(body.uptime).toBeGreaterThanOrEqual(0)
    }
  })

  test("GET /openapi.json documents every route; GET /docs is a page; both public", async () => {
    const spec = (await (await fetch(`${server.url}/openapi.json`)).json()) as any
    expect(spec.info.title).toBe("Tapedeck API")
    for (const path of [
      "/health",
      "/api/v1/traces",
      "/api/v1/traces/{traceId}",
      "/api/v1/traces/{traceId}/spans",
      "/api/v1/jobs/{jobId}"
    ]) {
      expect(Object.keys(spec.paths)).toContain(path)
    }
    const docs = await fetch(`${server.url}/docs`)
    expect(docs.status).toBe(200)
    expect(docs.headers.get("content-type")).toContain("text/html")
  })

  test("an unknown route is a 404 with the error body", async () => {
    const response = await fetch(`${server.url}/api/v1/nothing-here`, { headers: { "x-service-key": KEY_A } })
    expect(response.status).toBe(404)
    expect(await response.json()).toEqual({ error: "route not found", code: "not_found", retryable: false })
  })
})

describe("rate limits", () => {
  test("per credential and route: the call past the limit is 429 with Retry-After and retryable", async () => {
    const server = await startTestServer({ TAPEDECK_RATE_LIMIT_PER_MINUTE: "3" })
    try {
      for (let i = 0; i < 3; i++) expect((await server.get(`/api/v1/traces/${uuid()}`, KEY_B)).status).toBe(404)
      const limited = await server.get(`/api/v1/traces/${uuid()}`, KEY_B)
      expect(limited.status).toBe(429)
      const retryAfter = Number(limited.headers.get("retry-after"))
      expect(Number.isInteger(retryAfter)).toBe(true)
      expect(retryAfter).toBeGreaterThanOrEqual(1)
      expect(await limited.json()).toMatchObject({ code: "rate_limited", retryable: true })
      // Another route, and another credential, have their own budgets.
      expect((await server.get("/api/v1/traces", KEY_B)).status).toBe(200)
      expect((await server.get(`/api/v1/traces/${uuid()}`, KEY_A)).status).toBe(404)
      for (let i = 0; i < 5; i++) expect((await fetch(`${server.url}/health`)).status).toBe(200)
    } finally {
      await server.stop()
    }
  }, 60_000)
})

const bodyOfSize = (bytes: number) => {
  const t = trace({ input: "" })
  const base = JSON.stringify(t).length
  return JSON.stringify({ ...t, input: "x".repeat(bytes - base) })
}

describe("body size cap", () => {
  test("exactly TAPEDECK_MAX_BODY_BYTES passes; one byte more is refused", async () => {
    const atLimit = bodyOfSize(4096)
    expect(atLimit.length).toBe(4096)
    expect((await server.post("/api/v1/traces", atLimit)).status).toBe(200)
    const over = await server.post("/api/v1/traces", bodyOfSize(4097))
    expect(over.status).toBe(400)
    expect(((await over.json()) as any).error).toContain("exceeds the limit")
  })

  test("a body nesting deeper than 100 levels, or a payload deeper than 64, is 400 (never a stack overflow); 64 levels pass", async () => {
    const deep = "[".repeat(2000) + "]".repeat(2000)
    const refused = await server.post("/api/v1/traces", deep)
    expect(refused.status).toBe(400)
    expect(((await refused.json()) as any).error).toContain("nests deeper than 100")
    const nested = JSON.stringify({ ...trace(), input: JSON.parse("[".repeat(65) + "]".repeat(65)) })
    const payload = await server.post("/api/v1/traces", nested)
    expect(payload.status).toBe(400)
    expect(((await payload.json()) as any).error).toContain("input")
    const fine = JSON.stringify({ ...trace(), input: JSON.parse("[".repeat(64) + "]".repeat(64)) })
    expect((await server.post("/api/v1/traces", fine)).status).toBe(200)
  })

  test("a body over TAPEDECK_MAX_BODY_BYTES is 400 (declared length or chunked), one under it passes", async () => {
    const small = trace({ name: "x".repeat(100) })
    expect((await server.post("/api/v1/traces", small)).status).toBe(200)
    const big = JSON.stringify(trace({ input: "y".repeat(5000) }))
    const declared = await server.post("/api/v1/traces", big)
    expect(declared.status).toBe(400)
    expect(((await declared.json()) as any).error).toContain("exceeds the limit of 4096 bytes")
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        const bytes = new TextEncoder().encode(big)
        for (let i = 0; i < bytes.length; i += 1000) controller.enqueue(bytes.slice(i, i + 1000))
        controller.close()
      }
    })
    const chunked = await fetch(`${server.url}/api/v1/traces`, {
      method: "POST",
      headers: { "x-service-key": KEY_A, "content-type": "application/json" },
      body: stream
    })
    expect(chunked.status).toBe(400)
    expect(((await chunked.json()) as any).code).toBe("validation_failed")
  })
})

describe("integer query parameters", () => {
  test("only plain decimal digits are an integer: hex, signs, spaces, exponents and fractions are 400 on every list route", async () => {
    const lists = [
      "/api/v1/traces",
      "/api/v1/forks",
      "/api/v1/evaluations",
      "/api/v1/sessions",
      "/api/v1/insights",
      "/api/v1/eval-rules",
      "/api/v1/enforcement/decisions"
    ]
    for (const bad of [
      "min_duration_ms=0x10",
      "min_duration_ms=%2B5",
      "min_duration_ms=1e2",
      "min_duration_ms=5.0",
      "min_cost=1e2",
      "min_cost=%205",
      "min_cost=0x1",
      "min_cost=.5"
    ]) {
      expect({ bad, status: (await server.get(`/api/v1/traces?${bad}`)).status }).toEqual({ bad, status: 400 })
    }
    for (const ok of ["min_duration_ms=10", "min_cost=0.25", "min_cost=3"]) {
      expect({ ok, status: (await server.get(`/api/v1/traces?${ok}`)).status }).toEqual({ ok, status: 200 })
    }
    for (const path of lists) {
      expect((await server.get(`${path}?limit=007`)).status).toBe(200)
      for (const bad of [
        "limit=0x10",
        "limit=%2B5",
        "limit=+5",
        "limit=%205",
        "limit=5%20",
        "limit=1e1",
        "limit=5.0",
        "offset=0x10",
        "offset=-0"
      ]) {
        if (path.endsWith("/decisions") && bad.startsWith("offset")) continue // that route has no offset
        const response = await server.get(`${path}?${bad}`)
        expect({ path, bad, status: response.status }).toEqual({ path, bad, status: 400 })
        expect(((await response.json()) as any).code).toBe("validation_failed")
      }
    }
  })
})

describe("path ids", () => {
  test("an id over the length limit or with invalid percent-encoding is 400 on every route with a path id, not a missing route", async () => {
    const spec = (await (await fetch(`${server.url}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, unknown>>
    }
    const templated = Object.entries(spec.paths).filter(([path]) => path.includes("{"))
    expect(templated.length).toBeGreaterThan(10)
    for (const [template, operations] of templated) {
      for (const method of Object.keys(operations).filter((m) =>
        ["get", "post", "patch", "put", "delete"].includes(m)
      )) {
        for (const id of ["a".repeat(3000), "%ff%fe", "%E0%A4%A", "ok%"]) {
          const path = template.replace(/\{[^}]+\}/g, id)
          const response = await server.request(
            method.toUpperCase(),
            path,
            method === "get" || method === "delete" ? {} : { body: {} }
          )
          expect({ method, template, id: id.slice(0, 12), status: response.status }).toEqual({
            method,
            template,
            id: id.slice(0, 12),
            status: 400
          })
          expect(((await response.json()) as any).code).toBe("validation_failed")
        }
      }
    }
    // An unknown route is still a 404, and a well-formed unknown id a 404 too.
    expect((await server.get("/api/v1/nope")).status).toBe(404)
    expect((await server.get(`/api/v1/traces/${uuid()}`)).status).toBe(404)
  })
})
