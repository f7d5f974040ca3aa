import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import net from "node:net"
import { gzipSync } from "node:zlib"
import * as grpc from "@grpc/grpc-js"
import { context, diag, DiagLogLevel, trace } from "@opentelemetry/api"
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-grpc"
import { resourceFromAttributes } from "@opentelemetry/resources"
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { otlpProtoRoot } from "#layers/ingest/OtlpDecode"
import { retryDelayOf } from "#src/grpc/GrpcStatus"
import { EXPORT_METHOD } from "#src/grpc/OtlpGrpc"
import { chatAttributes, exportBody, hex, otlpSpan, protobufBody } from "../support/Otlp.ts"
import { GRPC_ENV, KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { until } from "../support/Until.ts"

// OTLP/gRPC TraceService/Export on its own port: the official OpenTelemetry gRPC exporter, and a bare grpc-js
// client for the refusals (its status, details and RetryInfo read as any gRPC client would).
const ExportResponse = otlpProtoRoot.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse")

let server: TestServer
beforeAll(async () => {
  server = await startTestServer({
    ...GRPC_ENV,
    // One permit, which the saturation test holds with an HTTP upload: the other tests send one export at a time.
    TAPEDECK_INGEST_MAX_INFLIGHT: "1",
    TAPEDECK_INGEST_MAX_DECOMPRESSED_BYTES: "200000"
  })
})
afterAll(() => server.stop())

const Client = grpc.makeGenericClientConstructor(
  {
    Export: {
      path: EXPORT_METHOD,
      requestStream: false,
      responseStream: false,
      requestSerialize: (b: Uint8Array) => Buffer.from(b),
      requestDeserialize: (b: Buffer) => b,
      responseSerialize: (b: Uint8Array) => Buffer.from(b),
      responseDeserialize: (b: Buffer) => b
    }
  },
  "TraceService"
)

interface Answer {
  readonly code: number
  readonly details: string
  readonly retryDelay: number | undefined
  readonly response: any
}

const exportRaw = (body: Uint8Array, metadata: Record<string, string>): Promise<Answer> => {
  const client = new Client(`127.0.0.1:${server.grpcPort}`, grpc.credentials.createInsecure())
  const md = new grpc.Metadata()
  for (const [k, v] of Object.entries(metadata)) md.set(k, v)
  return new Promise<Answer>((resolve) =>
    (client as any).Export(
      body,
      md,
      { deadline: Date.now() + 30_000 },
      (error: grpc.ServiceError | null, response?: Buffer) => {
        client.close()
        if (error === null) {
          resolve({
            code: 0,
            details: "",
            retryDelay: undefined,
            response: ExportResponse.toObject(ExportResponse.decode(response!), { longs: Number })
          })
          return
        }
        const details = error.metadata?.get("grpc-status-details-bin")[0]
        resolve({
          code: error.code,
          details: error.details,
          retryDelay: details instanceof Buffer ? retryDelayOf(details) : undefined,
          response: undefined
        })
      }
    )
  )
}

const traceOf = (otelTraceId: string, key = KEY_A) =>
  until(
    async () => {
      const list = (await (await server.get("/api/v1/traces?limit=100", key)).json()) as any
      const found = list.items.find((t: any) => t.metadata?.otel?.trace_id === otelTraceId)
      return found === undefined
        ? undefined
        : ((await server.get(`/api/v1/traces/${found.id}`, key)).json() as Promise<any>)
    },
    `trace ${otelTraceId}`,
    30_000
  )

describe("OTLP/gRPC", () => {
  test("the official OpenTelemetry gRPC exporter (gzip): its spans land, and its WARN diagnostic logger logs nothing", async () => {
    const logged: Array<string> = []
    const record = (...args: Array<unknown>) => void logged.push(args.map(String).join(" "))
    diag.setLogger({ error: record, warn: record, info: record, debug: record, verbose: record }, DiagLogLevel.WARN)
    const metadata = new grpc.Metadata()
    metadata.set("x-service-key", KEY_A)
    const provider = new BasicTracerProvider({
      resource: resourceFromAttributes({ "service.name": "grpc-agent" }),
      spanProcessors: [
        new BatchSpanProcessor(
          new OTLPTraceExporter({ url: `http://127.0.0.1:${server.grpcPort}`, metadata, compression: "gzip" as any })
        )
      ]
    })
    let traceId = ""
    try {
      const tracer = provider.getTracer("grpc-test")
      const root = tracer.startSpan("invoke_agent support")
      traceId = root.spanContext().traceId
      const chat = tracer.startSpan(
        "chat gpt-4o",
        { attributes: chatAttributes },
        trace.setSpan(context.active(), root)
      )
      chat.end()
      root.end()
      await provider.forceFlush()
      await provider.shutdown()
    } finally {
      diag.disable()
    }
    expect(logged).toEqual([])
    const stored = await traceOf(traceId)
    expect(stored.spans.find((s: any) => s.span_type === "llm_call")).toMatchObject({
      model: "gpt-4o",
      input_tokens: 12,
      output_tokens: 5
    })
    expect(stored.spans).toHaveLength(2)
  }, 60_000)

  test("authorization: Bearer works; a wrong or missing key is UNAUTHENTICATED and stores nothing", async () => {
    const traceId = hex(16)
    const body = protobufBody(exportBody([otlpSpan({ traceId, attributes: chatAttributes })]))
    expect((await exportRaw(body, { authorization: "Bearer nope" })).code).toBe(grpc.status.UNAUTHENTICATED)
    expect((await exportRaw(body, { "x-service-key": "svc_wrong" })).code).toBe(grpc.status.UNAUTHENTICATED)
    expect((await exportRaw(body, {})).code).toBe(grpc.status.UNAUTHENTICATED)
    expect(await exportRaw(body, { authorization: `Bearer ${KEY_B}` })).toMatchObject({ code: 0, response: {} })
    // Another account's trace is not found.
    expect((await traceOf(traceId, KEY_B)).spans).toHaveLength(1)
    const list = (await (await server.get("/api/v1/traces?limit=100", KEY_A)).json()) as any
    expect(list.items.some((t: any) => t.metadata?.otel?.trace_id === traceId)).toBe(false)
  }, 60_000)

  test("refused spans: partial_success; a body that is not an export: INVALID_ARGUMENT", async () => {
    const traceId = hex(16)
    const spans = [otlpSpan({ traceId }), otlpSpan({ traceId, spanId: "0000000000000000" })]
    const partial = await exportRaw(protobufBody(exportBody(spans)), { "x-service-key": KEY_A })
    expect(partial.code).toBe(0)
    expect(partial.response.partialSuccess.rejectedSpans).toBe(1)
    expect(partial.response.partialSuccess.errorMessage).toContain("spanId")
    const garbage = await exportRaw(new Uint8Array([0xff, 0xff, 0xff, 0x0f, 0x01]), { "x-service-key": KEY_A })
    expect(garbage.code).toBe(grpc.status.INVALID_ARGUMENT)
    expect(garbage.details).toContain("not an OTLP protobuf")
    // Over TAPEDECK_INGEST_MAX_DECOMPRESSED_BYTES: refused before anything is decoded.
    const large = protobufBody(
      exportBody([
        otlpSpan({ traceId: hex(16), attributes: { ...chatAttributes, "gen_ai.prompt": "x".repeat(250_000) } })
      ])
    )
    expect((await exportRaw(large, { "x-service-key": KEY_A })).code).toBe(grpc.status.RESOURCE_EXHAUSTED)
    // The same bytes gzipped by hand are not a gRPC-compressed message: still just bytes that are not an export.
    expect((await exportRaw(gzipSync(Buffer.from("hello")), { "x-service-key": KEY_A })).code).toBe(
      grpc.status.INVALID_ARGUMENT
    )
  }, 60_000)

  test("saturated (the one permit held by an HTTP upload): UNAVAILABLE with RetryInfo, then accepted once it is free", async () => {
    const { hostname, port } = new URL(server.url)
    const socket = net.connect(Number(port), hostname)
    socket.on("error", () => {})
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()))
    socket.write(
      `POST /v1/traces HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nx-service-key: ${KEY_A}\r\ncontent-length: 5000\r\n\r\n{"resourceSpans":`
    )
    const body = protobufBody(exportBody([otlpSpan({ traceId: hex(16), attributes: chatAttributes })]))
    const refused = await until(async () => {
      const answer = await exportRaw(body, { "x-service-key": KEY_A })
      return answer.code === grpc.status.UNAVAILABLE ? answer : undefined
    }, "a refusal while the upload holds the permit")
    expect(refused.details).toContain("saturated")
    expect(refused.retryDelay).toBe(1)
    socket.destroy()
    const accepted = await until(async () => {
      const answer = await exportRaw(body, { "x-service-key": KEY_A })
      return answer.code === 0 ? answer : undefined
    }, "the export accepted once the permit is free")
    expect(accepted.response).toEqual({})
  }, 60_000)

  test("a port that is taken: fatal when it was set, the HTTP API serving on when it is the default 4317", async () => {
    await expect(startTestServer({ ...GRPC_ENV, TAPEDECK_OTLP_GRPC_PORT: String(server.grpcPort) })).rejects.toThrow(
      "OTLP/gRPC cannot listen"
    )
    // Held here, or already by another process: either way the default port cannot be had.
    const holder = net.createServer()
    await new Promise<void>((resolve) =>
      holder.once("error", () => resolve()).listen(4317, "127.0.0.1", () => resolve())
    )
    const { TAPEDECK_OTLP_GRPC_PORT: _, ...defaultPort } = GRPC_ENV
    const second = await startTestServer(defaultPort)
    try {
      expect(second.grpcPort).toBeUndefined()
      expect((await second.get("/health")).status).toBe(200)
    } finally {
      await second.stop()
      holder.close()
    }
  }, 60_000)
})
