import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect, FastCheck as fc } from "effect"
import { batchTarget } from "#src/domain/Batch"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { span, trace, uuid } from "../support/Fixtures.ts"

let server: TestServer
beforeAll(async () => {
  server = await startTestServer()
}, 60_000)
afterAll(() => server.stop(), 60_000)

const batch = async (body: unknown, key: string = KEY_A) => {
  const response = await server.post("/api/v1/batch", body, key)
  return { status: response.status, body: (await response.json()) as any }
}

const waitForJob = async (jobId: string, key: string = KEY_A) => {
  for (let i = 0; i < 200; i++) {
    const job = (await (await server.get(`/api/v1/jobs/${jobId}`, key)).json()) as any
    if (job.status === "completed" || job.status === "dead_letter") return job
    await Bun.sleep(25)
  }
  throw new Error(`job ${jobId} did not finish`)
}

describe("POST /api/v1/batch", () => {
  test("runs operations in order as the caller, each with its own status and body", async () => {
    const t = trace({ name: "batched", spans: [span({ name: "one" })] })
    const foreign = trace()
    expect((await server.post("/api/v1/traces", foreign, KEY_B)).status).toBe(200)
    const { status, body } = await batch({
      operations: [
        { method: "POST", path: "/api/v1/traces", body: t },
        { method: "GET", path: `/api/v1/traces/${t.id}` },
        { method: "POST", path: "/api/v1/traces", body: { id: "nope" } },
        { method: "GET", path: `/api/v1/traces/${foreign.id}` },
        { method: "PATCH", path: `/api/v1/traces/${t.id}`, body: { status: "completed" } },
        { method: "GET", path: "/api/v1/traces?limit=1&colour=red" },
        { method: "POST", path: "/api/v1/traces", body: t },
        { method: "GET", path: "/api/v1/no-such-route" },
        { method: "DELETE", path: `/api/v1/traces/${t.id}` },
        { method: "GET", path: `/api/v1/traces/${t.id}` }
      ]
    })
    expect(status).toBe(200)
    const results = body.results as Array<{ status: number; body: any }>
    expect(results.map((r) => r.status)).toEqual([200, 200, 400, 404, 200, 400, 409, 404, 200, 404])
    expect(results[0]!.body).toEqual({ id: t.id, status: "created" })
    expect(results[1]!.body).toMatchObject({ id: t.id, name: "batched", spanCount: 1 })
    expect(results[2]!.body).toMatchObject({ code: "validation_failed", retryable: false })
    expect(results[3]!.body).toMatchObject({ code: "not_found" })
    expect(results[4]!.body).toMatchObject({ id: t.id, status: "updated" })
    expect(results[8]!.body).toEqual({ deleted: true })
    // The other account's trace is untouched and still its own.
    expect((await server.get(`/api/v1/traces/${foreign.id}`, KEY_B)).status).toBe(200)
  }, 60_000)

  test("every operation authenticates with the caller's credentials: Bearer works too", async () => {
    const t = trace()
    const response = await server.request("POST", "/api/v1/batch", {
      key: null,
      headers: { authorization: `Bearer ${KEY_B}` },
      body: { operations: [{ method: "POST", path: "/api/v1/traces", body: t }] }
    })
    expect(response.status).toBe(200)
    expect(((await response.json()) as any).results[0].status).toBe(200)
    expect((await server.get(`/api/v1/traces/${t.id}`, KEY_B)).status).toBe(200)
    expect((await server.get(`/api/v1/traces/${t.id}`, KEY_A)).status).toBe(404)
  }, 60_000)

  test("the envelope is validated: count, methods, paths, recursion, unknown fields, GET bodies", async () => {
    const op = { method: "GET", path: "/api/v1/traces" }
    const refused = [
      {},
      { operations: [] },
      { operations: Array.from({ length: 101 }, () => op) },
      { operations: [{ method: "HEAD", path: "/api/v1/traces" }] },
      { operations: [{ method: "GET", path: "/health" }] },
      { operations: [{ method: "GET", path: "/v1/traces" }] },
      { operations: [{ method: "GET", path: "http://example.com/api/v1/traces" }] },
      { operations: [{ method: "GET", path: "/api/v1/../../health" }] },
      { operations: [{ method: "GET", path: "/api/v1/%2e%2e/%2e%2e/health" }] },
      { operations: [{ method: "POST", path: "/api/v1/batch", body: { operations: [op] } }] },
      { operations: [{ method: "POST", path: "/api/v1/traces/../batch", body: { operations: [op] } }] },
      { operations: [{ method: "POST", path: "/api/v1/%62atch", body: { operations: [op] } }] },
      { operations: [{ method: "POST", path: "/api/v1/%42ATCH", body: { operations: [op] } }] },
      { operations: [{ method: "GET", path: "/api/v1/%E0%A4%A" }] },
      { operations: [{ method: "GET", path: "/api/v1/traces", body: {} }] },
      { operations: [{ ...op, extra: 1 }] },
      { operations: [op], colour: "red" },
      { operations: [op], async: "yes" }
    ]
    for (const body of refused) {
      const { status, body: error } = await batch(body)
      expect({ body, status }).toEqual({ body, status: 400 })
      expect(error).toMatchObject({ code: "validation_failed", retryable: false })
    }
    expect((await server.post("/api/v1/batch", { operations: [op] }, null)).status).toBe(401)
    expect((await server.post("/api/v1/batch", { operations: [op] }, "svc_unknown_key_123")).status).toBe(401)
  }, 60_000)

  test("async: returns a job at once; the job reports progress and per-operation results", async () => {
    const t = trace({ name: "later" })
    const foreign = trace()
    expect((await server.post("/api/v1/traces", foreign, KEY_B)).status).toBe(200)
    const { status, body } = await batch({
      async: true,
      operations: [
        { method: "POST", path: "/api/v1/traces", body: t },
        { method: "POST", path: `/api/v1/traces/${t.id}/spans`, body: { spans: [span({ name: "late" })] } },
        { method: "POST", path: "/api/v1/traces", body: { id: uuid(), started_at: "yesterday" } },
        { method: "GET", path: `/api/v1/traces/${foreign.id}` },
        { method: "DELETE", path: `/api/v1/traces/${foreign.id}` },
        { method: "GET", path: `/api/v1/traces/${t.id}` }
      ]
    })
    expect(status).toBe(202)
    expect(body).toMatchObject({ status: "queued", total: 6 })
    const job = await waitForJob(body.job_id)
    expect(job).toMatchObject({
      id: body.job_id,
      kind: "batch.run",
      status: "completed",
      progress: { done: 6, total: 6 }
    })
    expect(job.result.map((r: any) => r.status)).toEqual([200, 200, 400, 404, 404, 200])
    expect(job.result[5].body).toMatchObject({ id: t.id, spanCount: 1, name: "later" })
    expect(job.result[2].body).toMatchObject({ code: "validation_failed" })
    // Written as account A, invisible to B; B's trace survived A's batch.
    expect((await server.get(`/api/v1/traces/${t.id}`, KEY_B)).status).toBe(404)
    expect((await server.get(`/api/v1/traces/${foreign.id}`, KEY_B)).status).toBe(200)
    // The job is the submitting account's only, and stores no credential.
    expect((await server.get(`/api/v1/jobs/${body.job_id}`, KEY_B)).status).toBe(404)
    const rows = await server.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        return yield* sql<{ payload: unknown }>`SELECT payload FROM jobs WHERE id = ${body.job_id}`
      }).pipe(Effect.orDie)
    )
    expect(JSON.stringify(rows[0]!.payload)).not.toContain(KEY_A)
    expect(JSON.stringify(rows[0]!.payload)).toContain("credentialId")
  }, 60_000)

  test("an async batch may not create API keys (its results are stored); a synchronous one may, uncached", async () => {
    for (const path of ["/api/v1/api-keys", "/api/v1/api-keys/", "/api/v1/%61pi-keys"]) {
      const refused = await batch({
        async: true,
        operations: [
          { method: "GET", path: "/api/v1/usage" },
          { method: "POST", path, body: { name: "x" } }
        ]
      })
      expect(refused.status).toBe(400)
      expect(refused.body.error).toContain("operations.1: an async batch cannot create API keys")
    }
    const response = await server.post("/api/v1/batch", {
      operations: [{ method: "POST", path: "/api/v1/api-keys", body: { name: "via batch" } }]
    })
    expect(response.status).toBe(200)
    expect(response.headers.get("cache-control")).toBe("no-store")
    const created = ((await response.json()) as any).results[0]
    expect(created.status).toBe(200)
    expect(created.body.key).toStartWith("svc_")
    expect((await server.get("/api/v1/traces", created.body.key)).status).toBe(200)
  }, 60_000)

  test("a background batch stops acting once the API key that submitted it is revoked", async () => {
    const created = (await (await server.post("/api/v1/api-keys", { name: "short-lived" })).json()) as any
    const t = trace()
    // The batch revokes its own key first: the operations after it must not run.
    const { body } = await batch(
      {
        async: true,
        operations: [
          { method: "DELETE", path: `/api/v1/api-keys/${created.id}` },
          { method: "POST", path: "/api/v1/traces", body: t }
        ]
      },
      created.key
    )
    const job = await waitForJob(body.job_id)
    expect(job.result).toEqual([
      { status: 200, body: { id: created.id, revoked: true } },
      { status: 401, body: expect.objectContaining({ code: "unauthorized" }) }
    ])
    expect((await server.get(`/api/v1/traces/${t.id}`)).status).toBe(404)
  }, 60_000)

  test("rate limits apply per operation", async () => {
    const limited = await startTestServer({ TAPEDECK_RATE_LIMIT_PER_MINUTE: "3" })
    try {
      const response = await limited.post("/api/v1/batch", {
        operations: Array.from({ length: 4 }, () => ({ method: "GET", path: "/api/v1/traces?limit=1" }))
      })
      expect(response.status).toBe(200)
      const statuses = ((await response.json()) as any).results.map((r: any) => r.status)
      expect(statuses).toEqual([200, 200, 200, 429])
      expect(response.headers.get("retry-after")).toBeNull()
    } finally {
      await limited.stop()
    }
  }, 60_000)

  test("property: an accepted path never leaves /api/v1/ nor reaches the batch route, however it is spelled", () => {
    const segment = fc.constantFrom(
      "api",
      "v1",
      "API",
      "batch",
      "Batch",
      "%62atch",
      "%62%61tch",
      "%2562atch",
      "..",
      ".",
      "%2e%2e",
      "%2E.",
      "",
      "traces",
      "%2f",
      "\\",
      "?x=1",
      "#f",
      "//"
    )
    const path = fc.array(segment, { maxLength: 8 }).map((parts) => `/api/v1/${parts.join("/")}`)
    fc.assert(
      fc.property(fc.oneof(path, fc.string()), (candidate) => {
        const target = batchTarget(candidate)
        if (target === undefined) return true
        const pathname = new URL(target, "http://x.invalid").pathname
        const decoded = decodeURI(pathname)
        return (
          pathname === target.split("?")[0] &&
          decoded.startsWith("/api/v1/") &&
          !decoded.toLowerCase().startsWith("/api/v1/batch") &&
          !decoded.split("/").includes("..")
        )
      }),
      { numRuns: 2000 }
    )
  }, 60_000)

  test("property: no batch body, however malformed, is answered with a 5xx", async () => {
    const op = fc.record(
      {
        method: fc.constantFrom("GET", "POST", "PATCH", "DELETE", "PUT", "get", "TRACE"),
        path: fc.constantFrom(
          "/api/v1/traces",
          `/api/v1/traces/${uuid()}`,
          "/api/v1/forks",
          "/api/v1/usage?month=x",
          "/api/v1/batch",
          "/health"
        ),
        body: fc.option(fc.jsonValue({ maxDepth: 3 }), { nil: undefined })
      },
      { requiredKeys: ["method", "path"] }
    )
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.record({ operations: fc.array(op, { maxLength: 4 }), async: fc.boolean() }),
          fc.jsonValue({ maxDepth: 3 })
        ),
        async (body) => {
          const response = await server.post("/api/v1/batch", body)
          const answer = (await response.json()) as any
          if (response.status >= 500) return false
          return response.status !== 200 || answer.results.every((r: any) => r.status < 500)
        }
      ),
      { numRuns: 40 }
    )
  }, 60_000)
})
