import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { OtlpTraceResult } from "../domain/Otlp.ts"
import { IngestBackpressureWire } from "./ApiErrors.ts"
import { Authentication, LangfuseAuthentication, RateLimit } from "./Security.ts"

/** The OTLP/HTTP trace export path (no /api prefix, as exporters expect). */
export const OTLP_EXPORT_PATH = "/v1/traces"

/** An OTLP/JSON export of one GenAI chat span, as the OpenTelemetry JS exporter sends it (hex ids, nanosecond strings). */
export const OTLP_JSON_EXAMPLE = {
  resourceSpans: [
    {
      resource: { attributes: [{ key: "service.name", value: { stringValue: "travel-agent" } }] },
      scopeSpans: [
        {
          scope: { name: "travel-agent", version: "1.4.0" },
          spans: [
            {
              traceId: "5b8efff798038103d269b633813fc60c",
              spanId: "eee19b7ec3c1b174",
              name: "chat gpt-4o-mini",
              kind: 3,
              startTimeUnixNano: "1780306200000000000",
              endTimeUnixNano: "1780306200820000000",
              attributes: [
                { key: "gen_ai.operation.name", value: { stringValue: "chat" } },
                { key: "gen_ai.request.model", value: { stringValue: "gpt-4o-mini" } },
                { key: "gen_ai.usage.input_tokens", value: { intValue: 412 } },
                { key: "gen_ai.usage.output_tokens", value: { intValue: 38 } }
              ],
              status: { code: 1 }
            }
          ]
        }
      ]
    }
  ]
}

/** Where the Langfuse SDKs post their OTLP exports (`{baseUrl}/api/public/otel/v1/traces`). */
export const LANGFUSE_EXPORT_PATH = "/api/public/otel/v1/traces"

/** Whether a request URL (query string allowed) is one of the OTLP trace export paths. */
export const isExportPath = (url: string) => {
  const q = url.indexOf("?")
  const path = q < 0 ? url : url.slice(0, q)
  return path === OTLP_EXPORT_PATH || path === LANGFUSE_EXPORT_PATH
}

const body = (description: string) => ({ description, schema: { type: "string", format: "binary" } })

const exportBody = {
  requestBody: {
    required: true,
    content: {
      "application/json": {
        schema: {
          type: "object",
          required: ["resourceSpans"],
          properties: { resourceSpans: { type: "array", maxItems: 100, items: { type: "object" } } },
          examples: [OTLP_JSON_EXAMPLE]
        }
      },
      "application/x-protobuf": body("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"),
      "application/protobuf": body("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest")
    }
  }
}

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
      .annotate(
        OpenApi.Description,
        "The standard OTLP/HTTP endpoint: point any OpenTelemetry exporter at the server's base URL with the API key in the `x-service-key` header. GenAI semantic conventions, OpenInference, OpenLLMetry, the Vercel AI SDK and others are mapped to spans (model, tokens, cost, input and output, agents); one Tapedeck trace is created per OpenTelemetry trace id. Model calls without a cost attribute get an estimated cost. Spans that cannot be stored are counted in `partialSuccess`."
      )
      .annotate(OpenApi.Override, exportBody)
  )
  .middleware(RateLimit)
  .middleware(Authentication) {}

/**
 * POST /api/public/otel/v1/traces: the same export for the Langfuse SDKs, which authenticate with
 * `Authorization: Basic base64(publicKey:secretKey)`; the secret key is a Tapedeck API key.
 */
export class LangfuseOtlpApi extends HttpApiGroup.make("langfuseOtlp")
  .add(
    HttpApiEndpoint.post("export", LANGFUSE_EXPORT_PATH)
      .addSuccess(OtlpTraceResult)
      .addError(IngestBackpressureWire)
      .annotate(OpenApi.Summary, "OTLP/HTTP trace export for the Langfuse SDKs (Basic authentication)")
      .annotate(
        OpenApi.Description,
        "The path the Langfuse SDKs export to (`{baseUrl}/api/public/otel/v1/traces`), so a program instrumented with Langfuse switches to Tapedeck by changing its base URL. Authenticate with `Authorization: Basic base64(publicKey:secretKey)` where the secret key is a Tapedeck API key (the public key is not checked; any value such as `pk-tapedeck` will do); `x-service-key` and Bearer work too. The body, limits, backpressure and mapping are those of `POST /v1/traces`, with the `langfuse.*` attributes read as well."
      )
      .annotate(OpenApi.Override, exportBody)
  )
  .middleware(RateLimit)
  .middleware(LangfuseAuthentication) {}
