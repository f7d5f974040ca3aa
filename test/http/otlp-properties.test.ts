import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { KEY_A, startTestServer, type TestServer } from "../support/TestServer.ts"
import { exportBody, hex, otlpSpan } from "../support/Otlp.ts"

let server: TestServer
beforeAll(async () => {
  server = await startTestServer({ TAPEDECK_RATE_LIMIT_PER_MINUTE: "1000000" })
})
afterAll(() => server.stop())

const keys = [
  "gen_ai.operation.name",
  "gen_ai.request.model",
  "gen_ai.response.model",
  "gen_ai.usage.input_tokens",
  "gen_ai.usage.output_tokens",
  "gen_ai.tool.name",
  "gen_ai.agent.name",
  "gen_ai.agent.id",
  "gen_ai.input.messages",
  "gen_ai.output.messages",
  "openinference.span.kind",
  "llm.model_name",
  "llm.token_count.prompt",
  "input.value",
  "output.value",
  "traceloop.span.kind",
  "traceloop.entity.name",
  "ai.operationId",
  "ai.usage.promptTokens",
  "langfuse.observation.type",
  "langfuse.session.id",
  "session.id",
  "error.type",
  "logfire.span_type",
  "llm.cost.total"
]
const values = fc.oneof(
  fc.constantFrom(
    "chat",
    "execute_tool",
    "invoke_agent",
    "LLM",
    "TOOL",
    "AGENT",
    "CHAIN",
    "workflow",
    "agent",
    "ai.generateText",
    "ai.generateText.doGenerate",
    "ai.toolCall",
    "generation",
    "pending_span",
    '[{"role":"user"}]',
    "{"
  ),
  fc.string({ maxLength: 40 }),
  fc.integer({ min: -5, max: 5000 }),
  fc.double({ noNaN: true }),
  fc.boolean()
)
const attributes = fc.dictionary(fc.constantFrom(...keys), values, { maxKeys: 8 })

/** A random tree: each span's parent is an earlier span (or a missing one), in a random document order. */
const batch = fc
  .array(
    fc.record({
      parent: fc.option(fc.nat(), { nil: null }),
      attributes,
      start: fc.nat(5000),
      length: fc.nat(5000),
      failed: fc.boolean()
    }),
    { minLength: 1, maxLength: 25 }
  )
  .chain((rows) =>
    fc
      .shuffledSubarray(
        rows.map((_, i) => i),
        { minLength: rows.length, maxLength: rows.length }
      )
      .map((order) => ({ rows, order }))
  )

describe("OTLP ingestion properties", () => {
  test("any batch is a 200 with every span counted, and re-sending it changes nothing", async () => {
    await fc.assert(
      fc.asyncProperty(batch, async ({ rows, order }) => {
        const traceId = hex(16)
        const ids = rows.map(() => hex(8))
        const spans = rows.map((row, i) =>
          otlpSpan({
            traceId,
            spanId: ids[i]!,
            ...(row.parent === null || i === 0
              ? {}
              : { parentSpanId: row.parent % 7 === 6 ? hex(8) : ids[row.parent % i]! }),
            name: `span ${i}`,
            startMs: row.start,
            endMs: row.start + row.length,
            attributes: row.attributes as Record<string, string | number | boolean>,
            ...(row.failed ? { status: { code: 2, message: "boom" } } : {})
          })
        )
        const body = exportBody(order.map((i) => spans[i]))
        const first = await server.post("/v1/traces", body, KEY_A)
        expect(first.status).toBe(200)
        const counts = (await first.json()) as any
        expect(counts.spans_ingested + (counts.partialSuccess.rejectedSpans ?? 0)).toBeLessThanOrEqual(rows.length)
        const list = (await (await server.get("/api/v1/traces?limit=100")).json()) as any
        const stored = list.items.find((t: any) => t.metadata?.otel?.trace_id === traceId)
        if (counts.spans_ingested === 0) return
        const before = await (await server.get(`/api/v1/traces/${stored.id}`)).json()
        expect((before as any).spanCount).toBe(counts.spans_ingested)
        const again = await server.post("/v1/traces", body, KEY_A)
        expect(again.status).toBe(200)
        expect(((await again.json()) as any).traces_created).toBe(0)
        expect(await (await server.get(`/api/v1/traces/${stored.id}`)).json()).toEqual(before)
      }),
      { numRuns: 25 }
    )
  }, 120_000)
})
