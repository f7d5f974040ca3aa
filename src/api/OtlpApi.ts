import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { OtlpTraceResult } from "../domain/Otlp.ts"
import { IngestBackpressureWire } from "./ApiErrors.ts"
import { Authentication, RateLimit } from "./Security.ts"

/** The OTLP/HTTP trace export path (no /api prefix, as exporters expect). */
export const OTLP_EXPORT_PATH = "/v1/traces"

const body = (description: string) => ({ description, schema: { type: "string", format: "binary" } })

/**
 * POST /v1/traces (OTLP/HTTP). The body is read by the handler itself, not declared as a payload: it may be
 * gzip- or deflate-compressed JSON or protobuf, which the framework's JSON decoding cannot take.
 */
export class OtlpApi extends HttpApiGroup.make("otlp")
  .add(
    HttpApiEndpoint.post("export", OTLP_EXPORT_PATH)
      .addSuccess(OtlpTraceResult)
      .addError(IngestBackpressureWire)
      .annotate(OpenApi.Summary, "OTLP/HTTP trace export (JSON or protobuf, optionally gzip/deflate)")
      .annotate(OpenApi.Override, {
        requestBody: {
          required: true,
          content: {
            "application/json": {
              schema: {
                type: "object",
                required: ["resourceSpans"],
                properties: { resourceSpans: { type: "array", maxItems: 100, items: { type: "object" } } }
              }
            },
            "application/x-protobuf": body("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"),
            "application/protobuf": body("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest")
          }
        }
      })
  )
  .middleware(RateLimit)
  .middleware(Authentication)
{}
