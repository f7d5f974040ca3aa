import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Arbitrary, FastCheck as fc, Schema } from "effect"

import { DEFAULT_PRICES, priceOf } from "#src/domain/pricing/Prices"
import { Span } from "#src/domain/Span"
import { CreateTraceRequest } from "#src/domain/Trace"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { span, trace, uuid } from "../support/Fixtures.ts"

let server: TestServer
beforeAll(async () => {
  server = await startTestServer({ TAPEDECK_RATE_LIMIT_PER_MINUTE: "1000000" })
})
afterAll(() => server.stop())

const runs = { numRuns: 25 }
const wireJson = (value: unknown) => JSON.parse(JSON.stringify(value))

/**
 * A model name the default price table does not know: a span sent without a cost but with a priced model and
 * tokens comes back with an estimated cost (tested in the pricing suites), which is not a round trip.
 */
const unpriced = (model: string): string =>
  priceOf(DEFAULT_PRICES, model) === undefined ? model : unpriced(`~${model}`)

/**
 * Spans from the schema's own arbitrary, given fresh ids and parents within the batch: a few, or 20 to 30; their
 * models are ones the price table does not know.
 */
const spanBatch = fc
  .oneof(
    fc.array(Arbitrary.make(Span), { maxLength: 8 }),
    fc.array(Arbitrary.make(Span), { minLength: 20, maxLength: 30 })
  )
  .chain((spans) =>
    fc
      .array(fc.option(fc.nat(), { nil: null }), { minLength: spans.length, maxLength: spans.length })
      .map((parents) => {
        const ids = spans.map(() => uuid())
        return spans.map((s, i) => ({
          ...s,
          ...(s.model === undefined ? {} : { model: unpriced(s.model) }),
          id: ids[i],
          parent_id: i === 0 || parents[i] === null ? null : ids[parents[i]! % i]
        }))
      })
  )

describe("properties through the HTTP API", () => {
  test("create → get keeps every field of every span and of the trace", async () => {
    await fc.assert(
      fc.asyncProperty(Arbitrary.make(CreateTraceRequest), spanBatch, async (generated, spans) => {
        const request = { ...generated, id: uuid(), spans }
        const body = wireJson(Schema.encodeSync(CreateTraceRequest)(request as any))
        const created = await server.post("/api/v1/traces", body)
        expect(created.status).toBe(200)
        const detail = (await (await server.get(`/api/v1/traces/${request.id}`)).json()) as any
        const sent = new Map((body.spans as Array<any>).map((s) => [s.id, s]))
        expect(detail.spans.length).toBe(sent.size)
        for (const got of detail.spans) expect(got).toEqual(sent.get(got.id))
        expect(detail.status).toBe(body.status)
        expect(detail.startedAt).toBe(body.started_at)
        if ("name" in body) expect(detail.name).toBe(body.name)
        if ("input" in body) expect(detail.input).toEqual(body.input)
        if ("output" in body) expect(detail.output).toEqual(body.output)
        if ("metadata" in body) expect(detail.metadata).toEqual(body.metadata)
        if ("total_tokens" in body) expect(detail.totalTokens).toBe(body.total_tokens)
        else {
          const tokens = spans.reduce((sum, s: any) => sum + (s.input_tokens ?? 0) + (s.output_tokens ?? 0), 0)
          expect(detail.totalTokens).toBe(Math.min(tokens, Number.MAX_SAFE_INTEGER))
        }
        if (!("total_cost" in body)) {
          const cost = spans.reduce((sum, s: any) => sum + (s.cost ?? 0), 0)
          expect(Math.abs(Number(detail.totalCost) - cost)).toBeLessThanOrEqual(1e-9 * Math.max(1, cost))
        }
        expect(detail.spanCount).toBe(sent.size)
        if ("ended_at" in body) expect(detail.endedAt).toBe(body.ended_at)
        expect(new Set(detail.causalOrder)).toEqual(new Set(sent.keys()))
      }),
      runs
    )
  })

  test("two accounts interleaving any operations never see each other's traces", async () => {
    const op = fc.record({
      actor: fc.constantFrom("a", "b"),
      kind: fc.constantFrom("create", "get", "patch", "delete", "append", "list"),
      target: fc.nat()
    })
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 15 }), async (ops) => {
        const keys = { a: KEY_A, b: KEY_B } as const
        const owned: Array<{ id: string; owner: "a" | "b"; deleted: boolean; completed: boolean }> = []
        for (const { actor, kind, target } of ops) {
          const key = keys[actor as "a" | "b"]
          if (kind === "create" || owned.length === 0) {
            const t = trace({ spans: [span()] })
            expect((await server.post("/api/v1/traces", t, key)).status).toBe(200)
            owned.push({ id: t.id, owner: actor as "a" | "b", deleted: false, completed: false })
            continue
          }
          const record = owned[target % owned.length]!
          const visible = record.owner === actor && !record.deleted
          const path = `/api/v1/traces/${record.id}`
          if (kind === "list") {
            const ids = new Set(
              ((await (await server.get("/api/v1/traces?limit=100", key)).json()) as any).items.map((t: any) => t.id)
            )
            for (const r of owned) expect(ids.has(r.id)).toBe(r.owner === actor && !r.deleted)
            continue
          }
          const response =
            kind === "get"
              ? await server.get(path, key)
              : kind === "patch"
                ? await server.request("PATCH", path, { key, body: { status: "completed" } })
                : kind === "append"
                  ? await server.post(`${path}/spans`, { spans: [span()] }, key)
                  : await server.request("DELETE", path, { key })
          // Spans go only into a running trace: after a visible PATCH to completed, an append is a 409.
          const expected = !visible ? 404 : kind === "append" && record.completed ? 409 : 200
          expect(response.status).toBe(expected)
          const body = (await response.json()) as any
          if (!visible)
            expect(body).toEqual({ error: `trace ${record.id} not found`, code: "not_found", retryable: false })
          if (visible && kind === "delete") record.deleted = true
          if (visible && kind === "patch") record.completed = true
        }
      }),
      { numRuns: 15 }
    )
  })

  test("no malformed body, query or path on any route yields a 5xx, and every 4xx carries the error body", async () => {
    const junk = fc.oneof(
      fc.jsonValue(),
      fc.string(),
      fc.constantFrom("{", "[", "nul", '{"id":', "\u0000", '{"spans":[{}]}', "1e999999", '"\\ud800"'),
      fc.record(
        {
          id: fc.oneof(fc.uuid(), fc.string()),
          started_at: fc.oneof(
            fc.date().map((d) => (Number.isNaN(d.getTime()) ? "x" : d.toISOString())),
            fc.string()
          ),
          spans: fc.array(fc.jsonValue(), { maxLength: 3 })
        },
        { requiredKeys: [] }
      ),
      fc.record(
        { status: fc.string(), output: fc.jsonValue(), total_tokens: fc.oneof(fc.integer(), fc.double(), fc.string()) },
        { requiredKeys: [] }
      )
    )
    const route = fc.constantFrom(
      ["POST", "/api/v1/traces"],
      ["PATCH", "/api/v1/traces/:id"],
      ["POST", "/api/v1/traces/:id/spans"],
      ["GET", "/api/v1/traces/:id"],
      ["DELETE", "/api/v1/traces/:id"],
      ["GET", "/api/v1/traces?:query"],
      ["GET", "/api/v1/jobs/:id"],
      ["POST", "/v1/traces"]
    )
    const existing = trace()
    expect((await server.post("/api/v1/traces", existing)).status).toBe(200)
    const contentType = fc.constantFrom(
      "application/json",
      "application/json; charset=utf-8",
      "text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      "application/octet-stream",
      "APPLICATION/JSON",
      "application/x-protobuf",
      "application/protobuf"
    )
    const cursor = fc.jsonValue().map((v) => `cursor=${Buffer.from(JSON.stringify(v)).toString("base64url")}`)
    const forgedCursor = fc
      .tuple(fc.date({ noInvalidDate: true }), fc.uuid())
      .map(
        ([d, id]) => `cursor=${Buffer.from(JSON.stringify([d.toISOString(), id.toUpperCase()])).toString("base64url")}`
      )
    const query = fc.oneof(fc.string(), cursor, forgedCursor)
    const id = fc.oneof(fc.constant(existing.id), fc.constant(existing.id.toUpperCase()), fc.uuid(), fc.string())
    await fc.assert(
      fc.asyncProperty(route, junk, id, query, contentType, async ([method, template], body, pathId, q, type) => {
        const encodedQuery = q.startsWith("cursor=")
          ? q
          : encodeURIComponent(q).replaceAll("%3D", "=").replaceAll("%26", "&")
        const path = template!.replace(":id", encodeURIComponent(pathId)).replace(":query", encodedQuery)
        const payload = typeof body === "string" ? body : JSON.stringify(body)
        const response = await server.request(
          method!,
          path,
          // Accept JSON: a protobuf export is otherwise answered in protobuf (test/http/otlp-answers.test.ts).
          method === "GET" || method === "DELETE"
            ? {}
            : { body: payload, headers: { "content-type": type, accept: "application/json" } }
        )
        expect(response.status).toBeLessThan(500)
        if (response.status >= 400) {
          const error = (await response.json()) as any
          expect(typeof error.error).toBe("string")
          expect(typeof error.code).toBe("string")
          expect(typeof error.retryable).toBe("boolean")
        }
      }),
      { numRuns: 200 }
    )
  })
})
