import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { errorBody, OtlpSignalNotSupported, statusOf } from "../api/ApiErrors.ts"
import { isProtobufType, rpcStatus } from "./OtlpResponses.ts"

/** The OTLP/HTTP paths of the signals Tapedeck does not store (it receives traces only, at /v1/traces). */
export const OTLP_OTHER_SIGNAL_PATHS = { "/v1/logs": "logs", "/v1/metrics": "metrics" } as const

/** google.rpc.Status code UNIMPLEMENTED, the gRPC status a receiver without the signal reports. */
const UNIMPLEMENTED = 12

/**
 * POST /v1/logs and /v1/metrics: a refusal every exporter understands as final. 404 is not among the
 * statuses OTLP exporters retry (429, 502, 503, 504), so nothing is sent twice; the body says why, in the
 * request's encoding (a google.rpc.Status for protobuf, our error body for anything else). The body is not
 * read and no credentials are needed: the answer is the same for everyone.
 */
export const OtlpOtherSignalsLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    for (const [path, signal] of Object.entries(OTLP_OTHER_SIGNAL_PATHS)) {
      const message = `Tapedeck receives OpenTelemetry traces only (POST /v1/traces); OTLP ${signal} are not accepted. ` +
        `Turn the ${signal} exporter off or send ${signal} to another backend.`
      yield* router.post(
        path as `/${string}`,
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          if (isProtobufType(request.headers["content-type"])) {
            return HttpServerResponse.uint8Array(rpcStatus(UNIMPLEMENTED, message), {
              status: 404,
              contentType: "application/x-protobuf"
            })
          }
          const refusal = new OtlpSignalNotSupported({ message })
          // Not errorResponse: ErrorBodies reads this module's paths.
          return HttpServerResponse.unsafeJson(errorBody(refusal), { status: statusOf(refusal) })
        })
      )
    }
  })
)
