import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { FastCheck as fc } from "effect"
import { costOf, DEFAULT_PRICES, withOverrides } from "#src/domain/pricing/Prices"
import { KEY_A, startTestServer, type TestServer } from "../support/TestServer.ts"
import { span, trace } from "../support/Fixtures.ts"
import { chatAttributes, exportBody, hex, otlpSpan, protobufBody } from "../support/Otlp.ts"

// Spans sent with a model and tokens but no cost are priced from the table (marked cost_estimated) on every write
// path; sent costs stay as sent; the trace's total follows. Prices come from a file the operator configured.
const dir = mkdtempSync(join(tmpdir(), "tapedeck-prices-"))
const PRICE_FILE = join(dir, "prices.json")
const FILE_PRICES = {
  "my-finetune": { input_per_mtok: 4, output_per_mtok: 16 },
  "gpt-4o": { input_per_mtok: 5, output_per_mtok: 20 }
}
const TABLE = withOverrides(DEFAULT_PRICES, FILE_PRICES)

let server: TestServer
beforeAll(async () => {
  writeFileSync(PRICE_FILE, JSON.stringify(FILE_PRICES))
  server = await startTestServer({ TAPEDECK_MODEL_PRICES_FILE: PRICE_FILE })
})
afterAll(async () => {
  await server.stop()
  rmSync(dir, { recursive: true, force: true })
})

const detail = async (id: string, env = "") => (await (await server.get(`/api/v1/traces/${id}${env}`)).json()) as any
const byName = (d: any, name: string) => d.spans.find((s: any) => s.name === name)
const sum = (costs: ReadonlyArray<number>) => costs.reduce((a, b) => a + b, 0)

describe("estimated span costs", () => {
  test("POST /api/v1/traces: dated and aliased models priced from the file's table, sent costs kept, totals follow", async () => {
    const t = trace({
      spans: [
        span({ name: "dated", model: "gpt-4o-2024-08-06", input_tokens: 1000, output_tokens: 500 }),
        span({ name: "alias", model: "claude-3.5-sonnet", input_tokens: 2000, output_tokens: 100 }),
        span({
          name: "bedrock",
          model: "anthropic.claude-3-5-sonnet-20241022-v2:0",
          input_tokens: 10,
          output_tokens: 0
        }),
        span({ name: "file", model: "my-finetune", input_tokens: 0, output_tokens: 1000 }),
        span({ name: "sent", model: "gpt-4o", input_tokens: 1000, output_tokens: 500, cost: 0.5 }),
        span({ name: "sent-zero", model: "gpt-4o", input_tokens: 1000, output_tokens: 500, cost: 0 }),
        span({ name: "unknown", model: "llama-3-70b", input_tokens: 1000, output_tokens: 500 }),
        span({ name: "no-tokens", model: "gpt-4o" })
      ]
    })
    expect((await server.post("/api/v1/traces", t)).status).toBe(200)
    const d = await detail(t.id)
    expect(byName(d, "dated")).toMatchObject({ cost: 0.015, cost_estimated: true })
    expect(byName(d, "alias")).toMatchObject({ cost: 0.0075, cost_estimated: true })
    expect(byName(d, "bedrock")).toMatchObject({ cost: 0.00003, cost_estimated: true })
    expect(byName(d, "file")).toMatchObject({ cost: 0.016, cost_estimated: true })
    for (const name of ["sent", "sent-zero"]) expect(byName(d, name).cost_estimated).toBeUndefined()
    expect(byName(d, "sent").cost).toBe(0.5)
    expect(byName(d, "sent-zero").cost).toBe(0)
    for (const name of ["unknown", "no-tokens"]) {
      expect(byName(d, name).cost).toBeUndefined()
      expect(byName(d, name).cost_estimated).toBeUndefined()
    }
    expect(Number(d.totalCost)).toBeCloseTo(0.015 + 0.0075 + 0.00003 + 0.016 + 0.5, 12)
  })

  test("POST /api/v1/traces/{id}/spans and a batch operation estimate the same way", async () => {
    const t = trace()
    expect((await server.post("/api/v1/traces", t)).status).toBe(200)
    const appended = span({ name: "appended", model: "gpt-4o-mini", input_tokens: 1_000_000, output_tokens: 0 })
    expect((await server.post(`/api/v1/traces/${t.id}/spans`, { spans: [appended] })).status).toBe(200)
    const d = await detail(t.id)
    expect(byName(d, "appended")).toMatchObject({ cost: 0.15, cost_estimated: true })
    expect(Number(d.totalCost)).toBe(0.15)

    const b = trace({ spans: [span({ name: "batched", model: "gpt-4o", input_tokens: 100, output_tokens: 100 })] })
    const batch = await server.post("/api/v1/batch", {
      operations: [{ method: "POST", path: "/api/v1/traces", body: b }]
    })
    expect(batch.status).toBe(200)
    expect(byName(await detail(b.id), "batched")).toMatchObject({ cost: 0.0025, cost_estimated: true })
  })

  test("OTLP JSON and protobuf: model calls without a cost attribute are estimated; a sent cost is kept", async () => {
    for (const encoding of ["json", "protobuf"] as const) {
      const traceId = hex(16)
      const root = hex(8)
      const body = exportBody([
        otlpSpan({ traceId, spanId: root, name: "agent" }),
        otlpSpan({
          traceId,
          parentSpanId: root,
          name: "estimated",
          attributes: {
            ...chatAttributes,
            "gen_ai.request.model": "gpt-4o-2024-11-20",
            "gen_ai.usage.input_tokens": 4000,
            "gen_ai.usage.output_tokens": 1000
          }
        }),
        otlpSpan({
          traceId,
          parentSpanId: root,
          name: "priced",
          attributes: { ...chatAttributes, "gen_ai.usage.cost": 0.25 }
        })
      ])
      const response =
        encoding === "json"
          ? await server.post("/v1/traces", body)
          : await fetch(`${server.url}/v1/traces`, {
              method: "POST",
              headers: { "x-service-key": KEY_A, "content-type": "application/x-protobuf" },
              body: protobufBody(body)
            })
      expect(response.status).toBe(200)
      const list = (await (await server.get("/api/v1/traces?limit=100")).json()) as any
      const id = list.items.find((i: any) => i.metadata?.otel?.trace_id === traceId).id
      const d = await detail(id)
      expect(byName(d, "estimated")).toMatchObject({ cost: 0.04, cost_estimated: true })
      expect(byName(d, "priced").cost).toBe(0.25)
      expect(byName(d, "priced").cost_estimated).toBeUndefined()
      expect(Number(d.totalCost)).toBeCloseTo(0.29, 12)
    }
  })

  test("property: sent costs are stored as sent, missing ones are tokens × price, and the total is their sum", async () => {
    const models = [
      "gpt-4o",
      "gpt-4o-mini-2024-07-18",
      "claude-3-5-haiku-20241022",
      "my-finetune",
      "o3",
      "unpriced-model"
    ]
    const arbSpan = fc.record({
      model: fc.option(fc.constantFrom(...models), { nil: undefined }),
      input_tokens: fc.option(fc.integer({ min: 0, max: 5_000_000 }), { nil: undefined }),
      output_tokens: fc.option(fc.integer({ min: 0, max: 5_000_000 }), { nil: undefined }),
      cost: fc.option(fc.double({ min: 0, max: 1000, noNaN: true }), { nil: undefined })
    })
    await fc.assert(
      fc.asyncProperty(fc.array(arbSpan, { minLength: 1, maxLength: 12 }), async (specs) => {
        const spans = specs.map((s, i) =>
          span({ name: `s${i}`, ...Object.fromEntries(Object.entries(s).filter(([, v]) => v !== undefined)) })
        )
        const t = trace({ spans })
        expect((await server.post("/api/v1/traces", t)).status).toBe(200)
        const d = await detail(t.id)
        const expected: Array<number> = []
        specs.forEach((s, i) => {
          const stored = byName(d, `s${i}`)
          if (s.cost !== undefined) {
            expect(stored.cost).toBe(s.cost)
            expect(stored.cost_estimated).toBeUndefined()
            expected.push(s.cost)
            return
          }
          const tokens = (s.input_tokens ?? 0) + (s.output_tokens ?? 0)
          const estimate =
            s.model === undefined || tokens === 0
              ? undefined
              : costOf(TABLE, s.model, s.input_tokens ?? 0, s.output_tokens ?? 0)
          expect(stored.cost).toBe(estimate)
          expect(stored.cost_estimated).toBe(estimate === undefined ? undefined : true)
          if (estimate !== undefined) expected.push(estimate)
        })
        expect(Number(d.totalCost)).toBeCloseTo(sum(expected), 6)
      }),
      { numRuns: 30 }
    )
  }, 60_000)
})
