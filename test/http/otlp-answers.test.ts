import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { diag, DiagLogLevel } from "@opentelemetry/api"
import { OTLPTraceExporter as OtlpProtoExporter } from "@opentelemetry/exporter-trace-otlp-proto"
import { resourceFromAttributes } from "@opentelemetry/resources"
import { BasicTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { otlpProtoRoot } from "#layers/ingest/OtlpDecode"
import { chatAttributes, exportBody, hex, otlpSpan, protobufBody } from "../support/Otlp.ts"
import { KEY_A, startTestServer, type TestServer } from "../support/TestServer.ts"

// OTLP/HTTP answers in the request's encoding: protobuf exporters read an ExportTraceServiceResponse (and its
// partial_success), or a google.rpc.Status when refused.
const ExportResponse = otlpProtoRoot.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse")
const RpcStatus = otlpProtoRoot.lookupType("google.rpc.Status")

let server: TestServer
beforeAll(async () => {
  server = await startTestServer()
})
afterAll(() => server.stop())

const post = (path: string, body: Uint8Array | string, headers: Record<string, string>) =>
  fetch(`${server.url}${path}`, { method: "POST", body, headers })

const decodeAs = async (type: typeof ExportResponse, response: Response) =>
  type.toObject(type.decode(new Uint8Array(await response.arrayBuffer())), { longs: Number }) as any

const basic = (publicKey: string, secretKey: string) =>
  `Basic ${Buffer.from(`${publicKey}:${secretKey}`).toString("base64")}`

describe("protobuf exports are answered in protobuf", () => {
  test("an accepted export: an empty ExportTraceServiceResponse, Content-Type application/x-protobuf", async () => {
    const body = protobufBody(exportBody([otlpSpan({ traceId: hex(16), attributes: chatAttributes })]))
    const response = await post("/v1/traces", body, {
      "content-type": "application/x-protobuf",
      "x-service-key": KEY_A
    })
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("application/x-protobuf")
    expect(await decodeAs(ExportResponse, response)).toEqual({})
  })

  test("refused spans: partial_success carries their count and the reason", async () => {
    const traceId = hex(16)
    const spans = [otlpSpan({ traceId }), otlpSpan({ traceId, spanId: "0000000000000000" })]
    const response = await post("/v1/traces", protobufBody(exportBody(spans)), {
      "content-type": "application/protobuf",
      "x-service-key": KEY_A
    })
    expect(response.status).toBe(200)
    const decoded = await decodeAs(ExportResponse, response)
    expect(decoded.partialSuccess.rejectedSpans).toBe(1)
    expect(decoded.partialSuccess.errorMessage).toContain("spanId")
  })

  test("errors are a google.rpc.Status: bad key UNAUTHENTICATED, garbage INVALID_ARGUMENT", async () => {
    const body = protobufBody(exportBody([otlpSpan({ traceId: hex(16) })]))
    const unauthorized = await post("/v1/traces", body, {
      "content-type": "application/x-protobuf",
      "x-service-key": "svc_wrong"
    })
    expect(unauthorized.status).toBe(401)
    expect(unauthorized.headers.get("content-type")).toBe("application/x-protobuf")
    const status = await decodeAs(RpcStatus, unauthorized)
    expect(status.code).toBe(16)
    expect(status.message.length).toBeGreaterThan(0)

    const garbage = await post("/v1/traces", new Uint8Array([0xff, 0xff, 0xff, 0x0f]), {
      "content-type": "application/x-protobuf",
      "x-service-key": KEY_A
    })
    expect(garbage.status).toBe(400)
    expect((await decodeAs(RpcStatus, garbage)).code).toBe(3)
  })

  test("a protobuf export whose Accept asks for JSON, and a JSON export, keep the JSON result", async () => {
    const spans = [otlpSpan({ traceId: hex(16), attributes: chatAttributes })]
    const asked = await post("/v1/traces", protobufBody(exportBody(spans)), {
      "content-type": "application/x-protobuf",
      accept: "application/json",
      "x-service-key": KEY_A
    })
    expect(asked.headers.get("content-type")).toContain("application/json")
    expect(await asked.json()).toMatchObject({ traces_created: 1, spans_ingested: 1 })

    const json = await post("/v1/traces", JSON.stringify(exportBody([otlpSpan({ traceId: hex(16) })])), {
      "content-type": "application/json",
      accept: "application/x-protobuf",
      "x-service-key": KEY_A
    })
    expect(await json.json()).toMatchObject({ partialSuccess: {}, traces_created: 1, spans_ingested: 1 })
  })

  test("the OpenTelemetry JS proto exporter, its diagnostic logger at WARN, logs nothing about the response", async () => {
    const logged: Array<string> = []
    const record = (...args: Array<unknown>) => void logged.push(args.map(String).join(" "))
    diag.setLogger({ error: record, warn: record, info: record, debug: record, verbose: record }, DiagLogLevel.WARN)
    try {
      const provider = new BasicTracerProvider({
        resource: resourceFromAttributes({ "service.name": "answers-test" }),
        spanProcessors: [
          new SimpleSpanProcessor(
            new OtlpProtoExporter({ url: `${server.url}/v1/traces`, headers: { "x-service-key": KEY_A } })
          )
        ]
      })
      const span = provider.getTracer("t").startSpan("chat gpt-4o", { attributes: chatAttributes })
      span.end()
      await provider.forceFlush()
      await provider.shutdown()
      const list = (await (await server.get("/api/v1/traces?limit=100")).json()) as any
      expect(list.items.some((t: any) => t.metadata?.otel?.trace_id === span.spanContext().traceId)).toBe(true)
    } finally {
      diag.disable()
    }
    expect(logged).toEqual([])
  })
})

describe("the Langfuse export path", () => {
  const body = () => JSON.stringify(exportBody([otlpSpan({ traceId: hex(16), attributes: chatAttributes })]))

  test("Basic publicKey:secretKey with a Tapedeck API key as the secret: accepted, any public key", async () => {
    const response = await post("/api/public/otel/v1/traces", body(), {
      "content-type": "application/json",
      authorization: basic("pk-lf-anything", KEY_A),
      "x-langfuse-public-key": "pk-lf-anything",
      "x-langfuse-sdk-name": "javascript"
    })
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({ traces_created: 1, spans_ingested: 1 })
  })

  test("a wrong secret, an empty one, or no header: 401", async () => {
    for (const authorization of [
      basic("pk-lf-x", "sk-lf-wrong"),
      basic("pk-lf-x", ""),
      basic(KEY_A, "sk-lf-x"),
      undefined
    ]) {
      const response = await post("/api/public/otel/v1/traces", body(), {
        "content-type": "application/json",
        ...(authorization ? { authorization } : {})
      })
      expect(response.status).toBe(401)
      expect(await response.json()).toMatchObject({ code: "unauthorized", retryable: false })
    }
  })

  test("protobuf on the Langfuse path is answered in protobuf", async () => {
    const response = await post("/api/public/otel/v1/traces", protobufBody(JSON.parse(body())), {
      "content-type": "application/x-protobuf",
      authorization: basic("pk", KEY_A)
    })
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("application/x-protobuf")
  })
})
