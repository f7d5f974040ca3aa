import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { gzipSync, deflateSync } from "node:zlib"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { chatAttributes, exportBody, hex, otlpSpan, protobufBody, relabelIds } from "../support/Otlp.ts"

let server: TestServer
beforeAll(async () => {
  server = await startTestServer({ TAPEDECK_INGEST_MAX_DECOMPRESSED_BYTES: String(2 * 1024 * 1024) })
})
afterAll(() => server.stop())

const send = (
  body: unknown,
  options: { key?: string; contentType?: string; encoding?: string | undefined; raw?: Uint8Array | string } = {}
) =>
  fetch(`${server.url}/v1/traces`, {
    method: "POST",
    headers: {
      "x-service-key": options.key ?? KEY_A,
      "content-type": options.contentType ?? "application/json",
      // These tests read the JSON result (traces_created, spans_ingested) for protobuf exports too.
      accept: "application/json",
      ...(options.encoding ? { "content-encoding": options.encoding } : {})
    },
    body: options.raw ?? JSON.stringify(body)
  })

const result = async (response: Response) => {
  expect(response.status).toBe(200)
  expect(response.headers.get("content-type")).toContain("application/json")
  return (await response.json()) as { partialSuccess: any; traces_created: number; spans_ingested: number }
}

/** The trace of the account whose metadata carries this OTel trace id. */
const traceOf = async (otelTraceId: string, key = KEY_A): Promise<any> => {
  const list = (await (await server.get("/api/v1/traces?limit=100", key)).json()) as any
  const found = list.items.find((t: any) => t.metadata?.otel?.trace_id === otelTraceId)
  if (!found) return undefined
  return await (await server.get(`/api/v1/traces/${found.id}`, key)).json()
}

const error = async (response: Response, status: number) => {
  expect(response.status).toBe(status)
  const body = (await response.json()) as any
  expect(typeof body.error).toBe("string")
  return body
}

describe("POST /v1/traces", () => {
  test("an empty export is 200 with zeros; {} and other shapes are 400", async () => {
    expect(await result(await send({ resourceSpans: [] }))).toEqual({
      partialSuccess: {},
      traces_created: 0,
      spans_ingested: 0
    })
    expect((await error(await send({}), 400)).code).toBe("validation_failed")
    await error(await send({ resourceSpans: "x" }), 400)
    await error(await send(null, { raw: "{not json" }), 400)
    const tooMany = { resourceSpans: Array.from({ length: 101 }, () => ({ scopeSpans: [] })) }
    await error(await send(tooMany), 400)
    expect(
      await result(await send({ resourceSpans: Array.from({ length: 100 }, () => ({ scopeSpans: [] })) }))
    ).toMatchObject({ spans_ingested: 0 })
  })

  test("content types: json and both protobuf names accepted (parameters ignored), anything else 400", async () => {
    expect((await send({ resourceSpans: [] }, { contentType: "application/json; charset=utf-8" })).status).toBe(200)
    const refused = await error(await send({ resourceSpans: [] }, { contentType: "text/plain" }), 400)
    expect(refused.error).toContain("application/x-protobuf")
    for (const contentType of ["application/x-protobuf", "application/protobuf"]) {
      const empty = await send(null, { contentType, raw: new Uint8Array() })
      expect(await result(empty)).toEqual({ partialSuccess: {}, traces_created: 0, spans_ingested: 0 })
      await error(await send(null, { contentType, raw: new Uint8Array([0x0a, 0xff, 0xff, 0xff]) }), 400)
    }
  })

  test("needs credentials like every other route", async () => {
    const response = await fetch(`${server.url}/v1/traces`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}"
    })
    expect(response.status).toBe(401)
  })

  test("maps a GenAI chat span and a root; the trace is readable through the Traces API at once", async () => {
    const traceId = hex(16)
    const root = otlpSpan({
      traceId,
      name: "invoke_agent planner",
      startMs: 0,
      endMs: 3000,
      attributes: { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner" }
    })
    const chat = otlpSpan({ traceId, parentSpanId: root.spanId, startMs: 100, endMs: 900, attributes: chatAttributes })
    expect(await result(await send(exportBody([chat, root])))).toEqual({
      partialSuccess: {},
      traces_created: 1,
      spans_ingested: 2
    })
    const trace = await traceOf(traceId)
    expect(trace.status).toBe("completed")
    expect(trace.name).toBe("invoke_agent planner")
    expect(trace.totalTokens).toBe(17)
    expect(trace.spanCount).toBe(2)
    const llm = trace.spans.find((s: any) => s.span_type === "llm_call")
    expect(llm).toMatchObject({ model: "gpt-4o", input_tokens: 12, output_tokens: 5, duration_ms: 800 })
    expect(llm.parent_id).toBe(trace.spans.find((s: any) => s.span_type === "action").id)
    expect(llm.started_at).toBe("2026-08-20T10:00:00.100Z")
  })

  test("a re-sent batch changes nothing; children before parents; the terminal job fires once", async () => {
    const traceId = hex(16)
    const rootSpanId = hex(8)
    const child = otlpSpan({ traceId, parentSpanId: rootSpanId, attributes: chatAttributes })
    expect(await result(await send(exportBody([child])))).toMatchObject({ traces_created: 1, spans_ingested: 1 })
    const early = await traceOf(traceId)
    expect(early.status).toBe("running")
    expect(early.spans[0].parent_id).not.toBeNull()
    const root = otlpSpan({ traceId, spanId: rootSpanId, name: "workflow", startMs: 0, endMs: 5000 })
    for (let i = 0; i < 2; i++) {
      expect(await result(await send(exportBody([root, child])))).toMatchObject({
        traces_created: 0,
        spans_ingested: 2
      })
    }
    const done = await traceOf(traceId)
    expect(done.status).toBe("completed")
    expect(done.spanCount).toBe(2)
    expect(done.totalTokens).toBe(17)
    const jobs = await server.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        return yield* sql<{
          n: number
        }>`SELECT count(*)::int AS n FROM jobs WHERE kind = 'trace.terminal' AND payload->>'traceId' = ${done.id}`
      }).pipe(Effect.orDie)
    )
    expect(jobs[0]!.n).toBe(1)
  })

  test("a trace written over several exports, each beside a new trace: counts and totals follow its spans", async () => {
    const traceId = hex(16)
    const rootSpanId = hex(8)
    const costly = { ...chatAttributes, "llm.cost.total": 0.1 }
    const parts = [
      [otlpSpan({ traceId, parentSpanId: rootSpanId, startMs: 100, endMs: 700, attributes: costly })],
      [
        otlpSpan({
          traceId,
          parentSpanId: rootSpanId,
          startMs: 800,
          endMs: 4200,
          attributes: { ...costly, "llm.cost.total": 0.2 }
        })
      ],
      [otlpSpan({ traceId, spanId: rootSpanId, name: "workflow", startMs: 0, endMs: 5000 })]
    ]
    const expected = [
      { status: "running", spanCount: 1, totalTokens: 17, totalCost: 0.1, totalDurationMs: 600 },
      { status: "running", spanCount: 2, totalTokens: 34, totalCost: 0.3, totalDurationMs: 4100 },
      { status: "completed", spanCount: 3, totalTokens: 34, totalCost: 0.3, totalDurationMs: 5000 }
    ]
    for (const [i, spans] of parts.entries()) {
      const other = hex(16)
      const beside = otlpSpan({ traceId: other, startMs: 0, endMs: 250, attributes: costly })
      expect(await result(await send(exportBody([beside, ...spans])))).toMatchObject({
        traces_created: i === 0 ? 2 : 1,
        spans_ingested: 2
      })
      const trace = await traceOf(traceId)
      const want = expected[i]!
      expect({ ...trace, totalCost: Number(trace.totalCost) }).toMatchObject(want)
      expect(trace.spans).toHaveLength(want.spanCount)
      expect(await traceOf(other)).toMatchObject({
        status: "completed",
        spanCount: 1,
        totalTokens: 17,
        totalDurationMs: 250
      })
    }
  })

  test("the same W3C trace id in two accounts makes two unrelated traces", async () => {
    const traceId = hex(16)
    const span = otlpSpan({ traceId, attributes: chatAttributes })
    expect(await result(await send(exportBody([span]), { key: KEY_A }))).toMatchObject({ traces_created: 1 })
    expect(await result(await send(exportBody([span]), { key: KEY_B }))).toMatchObject({
      traces_created: 1,
      spans_ingested: 1
    })
    const a = await traceOf(traceId, KEY_A)
    const b = await traceOf(traceId, KEY_B)
    expect(a.id).not.toBe(b.id)
    expect(a.spans[0].id).not.toBe(b.spans[0].id)
    expect((await server.get(`/api/v1/traces/${a.id}`, KEY_B)).status).toBe(404)
  })

  test("a bad span is refused through partialSuccess while the others land; 2001 spans → 2000 created", async () => {
    const traceId = hex(16)
    const good = otlpSpan({ traceId, attributes: chatAttributes })
    const bad = { ...otlpSpan({ traceId }), spanId: "zz" }
    const mixed = await result(await send(exportBody([good, bad])))
    expect(mixed.spans_ingested).toBe(1)
    expect(mixed.partialSuccess.rejectedSpans).toBe(1)
    expect(typeof mixed.partialSuccess.errorMessage).toBe("string")

    const big = hex(16)
    const spans = Array.from({ length: 2001 }, () => otlpSpan({ traceId: big }))
    const capped = await result(await send(exportBody(spans)))
    expect(capped.spans_ingested).toBe(2000)
    expect(capped.partialSuccess.rejectedSpans).toBe(1)
    expect(capped.partialSuccess.errorMessage).toContain("2000")
  })

  test("gzip and deflate bodies are decompressed; a decompression bomb and unknown encodings are 400", async () => {
    for (const [encoding, compress] of [
      ["gzip", gzipSync],
      ["deflate", deflateSync]
    ] as const) {
      const traceId = hex(16)
      const body = JSON.stringify(exportBody([otlpSpan({ traceId, attributes: chatAttributes })]))
      expect(await result(await send(null, { encoding, raw: compress(body) }))).toMatchObject({ spans_ingested: 1 })
      expect(await traceOf(traceId)).toBeDefined()
    }
    const bomb = gzipSync(Buffer.alloc(50 * 1024 * 1024))
    await error(await send(null, { encoding: "gzip", raw: bomb }), 400)
    await error(await send(null, { encoding: "br", raw: "{}" }), 400)
    await error(await send(null, { encoding: "gzip", raw: "not gzip at all" }), 400)
  })
})

describe("large protobuf exports", () => {
  // With PostgreSQL they are decoded, mapped and encoded for COPY on the ingest thread (OtlpPreparer); they must store
  // what the same export sent as JSON stores (always mapped on the request's thread).
  /** 384 hex digits that differ for every `i` and that gzip cannot squeeze much, the same in both copies. */
  const noise = (i: number) =>
    [0, 1, 2, 3, 4, 5].map((k) => createHash("sha256").update(`${i}/${k}`).digest("hex")).join("")
  const traceSpans = (traceId: string, count: number) => {
    const ids = Array.from({ length: count }, (_, i) => (i + 1).toString(16).padStart(16, "0"))
    return ids.map((spanId, i) =>
      otlpSpan({
        traceId,
        spanId,
        ...(i === 0 ? {} : { parentSpanId: ids[Math.floor((i - 1) / 3)]! }),
        name: i === 0 ? "invoke_agent planner" : `chat ${i}`,
        startMs: i * 10,
        endMs: i * 10 + 500,
        attributes:
          i === 0
            ? { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner" }
            : { ...chatAttributes, "gen_ai.usage.input_tokens": i, "app.note": `${noise(i)} \t ${i} ✓` },
        ...(i === count - 1 ? { status: { code: 2, message: "last one failed" } } : {})
      })
    )
  }
  /** The detail with its ids relabelled and its row timestamps left out. */
  const normalized = (detail: unknown, otelIds: ReadonlyArray<string>) =>
    relabelIds(detail, otelIds).replace(/"(createdAt|updatedAt)":"[^"]*"/g, "")

  test("store what the same export as JSON stores, plain or gzip, the span cap included", async () => {
    for (const [encoding, sizes] of [
      [undefined, [60, 90]],
      ["gzip", [2001]]
    ] as const) {
      const jsonIds = sizes.map(() => hex(16))
      const protoIds = sizes.map(() => hex(16))
      const asJson = await result(await send(exportBody(jsonIds.flatMap((id, i) => traceSpans(id, sizes[i]!)))))
      const proto = protobufBody(exportBody(protoIds.flatMap((id, i) => traceSpans(id, sizes[i]!))))
      const raw = encoding === "gzip" ? gzipSync(proto) : proto
      expect(raw.byteLength).toBeGreaterThan(64 * 1024) // OtlpPreparer's PREPARE_THREAD_MIN_BYTES
      const asProto = await result(await send(null, { contentType: "application/x-protobuf", encoding, raw }))
      expect(asProto).toEqual(asJson)
      expect(asProto.spans_ingested).toBe(
        Math.min(
          2000,
          sizes.reduce((a, b) => a + b, 0)
        )
      )
      for (const [i, id] of protoIds.entries()) {
        const stored = await traceOf(id)
        expect(stored.spans.length).toBe(Math.min(2000, sizes[i]!))
        expect(normalized(stored, [id])).toBe(normalized(await traceOf(jsonIds[i]!), [jsonIds[i]!]))
      }
    }
  }, 60_000)

  test("a large body that is not an OTLP message is 400, and nothing is stored", async () => {
    const before = (await (await server.get("/api/v1/traces?limit=1", KEY_B)).json()) as any
    const corrupt = Buffer.concat([Buffer.from([0x0a, 0xff, 0xff, 0xff, 0x0f]), Buffer.alloc(100 * 1024, 7)])
    const refused = await error(
      await send(null, { key: KEY_B, contentType: "application/x-protobuf", raw: corrupt }),
      400
    )
    expect(refused).toMatchObject({ code: "validation_failed", retryable: false })
    expect(refused.error).toContain("not an OTLP protobuf ExportTraceServiceRequest")
    const notGzip = await error(
      await send(null, { key: KEY_B, contentType: "application/x-protobuf", encoding: "gzip", raw: corrupt }),
      400
    )
    expect(notGzip.error).toContain("gzip")
    expect(((await (await server.get("/api/v1/traces?limit=1", KEY_B)).json()) as any).total).toBe(before.total)
  }, 60_000)
})

describe("backpressure", () => {
  test("over TAPEDECK_INGEST_MAX_INFLIGHT exports in flight: 503, Retry-After, retryable, before the body is read", async () => {
    const local = await startTestServer({ TAPEDECK_INGEST_MAX_INFLIGHT: "1" })
    try {
      let release!: () => void
      const held = new Promise<void>((resolve) => (release = resolve))
      const slowBody = new ReadableStream<Uint8Array>({
        async start(controller) {
          controller.enqueue(new TextEncoder().encode('{"resourceSpans":'))
          await held
          controller.enqueue(new TextEncoder().encode("[]}"))
          controller.close()
        }
      })
      const first = fetch(`${local.url}/v1/traces`, {
        method: "POST",
        headers: { "x-service-key": KEY_A, "content-type": "application/json" },
        body: slowBody
      })
      await Bun.sleep(200)
      const second = await fetch(`${local.url}/v1/traces`, {
        method: "POST",
        headers: { "x-service-key": KEY_A, "content-type": "application/json" },
        body: JSON.stringify({ resourceSpans: [] })
      })
      expect(second.status).toBe(503)
      expect(Number(second.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
      expect(await second.json()).toMatchObject({ code: "ingest_backpressure", retryable: true })
      release()
      expect((await first).status).toBe(200)
      expect(
        (
          await fetch(`${local.url}/v1/traces`, {
            method: "POST",
            headers: { "x-service-key": KEY_A, "content-type": "application/json" },
            body: JSON.stringify({ resourceSpans: [] })
          })
        ).status
      ).toBe(200)
    } finally {
      await local.stop()
    }
  }, 60_000)
})
