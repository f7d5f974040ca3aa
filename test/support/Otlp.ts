import { otlpProtoRoot } from "#layers/ingest/OtlpDecode"

/** Builders for OTLP/JSON export bodies in tests. */
export const hex = (bytes: number) =>
  [...crypto.getRandomValues(new Uint8Array(bytes))].map((b) => b.toString(16).padStart(2, "0")).join("")

export const attr = (key: string, value: string | number | boolean) => ({
  key,
  value:
    typeof value === "string"
      ? { stringValue: value }
      : typeof value === "boolean"
        ? { boolValue: value }
        : Number.isInteger(value)
          ? { intValue: String(value) }
          : { doubleValue: value }
})

const NS = 1_000_000n
export const ns = (ms: number) => String(BigInt(Date.UTC(2026, 7, 20, 10, 0, 0)) * NS + BigInt(ms) * NS)

export interface SpanSpec {
  traceId: string
  spanId?: string
  parentSpanId?: string
  name?: string
  startMs?: number
  endMs?: number
  attributes?: Record<string, string | number | boolean>
  status?: { code: number; message?: string }
}

export const otlpSpan = (spec: SpanSpec) => ({
  traceId: spec.traceId,
  spanId: spec.spanId ?? hex(8),
  ...(spec.parentSpanId ? { parentSpanId: spec.parentSpanId } : {}),
  name: spec.name ?? "chat gpt-4o",
  kind: 3,
  startTimeUnixNano: ns(spec.startMs ?? 0),
  endTimeUnixNano: ns(spec.endMs ?? 1000),
  attributes: Object.entries(spec.attributes ?? {}).map(([k, v]) => attr(k, v)),
  ...(spec.status ? { status: spec.status } : {})
})

export const exportBody = (spans: ReadonlyArray<unknown>, service = "agent-service") => ({
  resourceSpans: [
    {
      resource: { attributes: [attr("service.name", service)] },
      scopeSpans: [{ scope: { name: "test", version: "1.0.0" }, spans }]
    }
  ]
})

export const chatAttributes = {
  "gen_ai.operation.name": "chat",
  "gen_ai.request.model": "gpt-4o",
  "gen_ai.usage.input_tokens": 12,
  "gen_ai.usage.output_tokens": 5
}

const ExportRequest = otlpProtoRoot.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest")

/** The protobuf encoding of an OTLP/JSON body: hex ids become bytes, protobufjs converts the rest. */
export const protobufBody = (body: unknown): Uint8Array => {
  const withBytes = JSON.parse(JSON.stringify(body), (key, value) =>
    ["traceId", "spanId", "parentSpanId"].includes(key) && typeof value === "string" ? Buffer.from(value, "hex") : value
  )
  return ExportRequest.encode(ExportRequest.fromObject(withBytes)).finish()
}

/**
 * `value` as JSON text with every UUID and every one of `otelTraceIds` replaced by the order it first appears in
 * (#0, #1, …): two writes of the same exports under different trace ids give the same text when they stored the same.
 */
export const relabelIds = (value: unknown, otelTraceIds: ReadonlyArray<string>) => {
  const labels = new Map<string, string>()
  const label = (id: string) => labels.get(id) ?? (labels.set(id, `#${labels.size}`), `#${labels.size - 1}`)
  return JSON.stringify(value)
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, label)
    .replace(new RegExp(otelTraceIds.join("|") || "^$", "g"), label)
}
