import { HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { otlpProtoRoot } from "#layers/ingest/OtlpDecode"
import { isExportPath } from "../api/OtlpApi.ts"

const ExportResponse = otlpProtoRoot.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse")
const RpcStatus = otlpProtoRoot.lookupType("google.rpc.Status")

const PROTOBUF_TYPES = new Set(["application/x-protobuf", "application/protobuf"])
const PROTOBUF = "application/x-protobuf"

const mediaTypeOf = (header: string | undefined) => (header ?? "").split(";")[0]!.trim().toLowerCase()

/** Whether a Content-Type header names OTLP's protobuf encoding. */
export const isProtobufType = (header: string | undefined) => PROTOBUF_TYPES.has(mediaTypeOf(header))

/**
 * OTLP/HTTP answers in the request's encoding: a protobuf export gets a protobuf answer unless its Accept asks
 * for JSON (clients that want the JSON result with traces_created and spans_ingested can still have it).
 */
export const wantsProtobuf = (request: HttpServerRequest.HttpServerRequest) =>
  request.method === "POST" &&
  isExportPath(request.url) &&
  isProtobufType(request.headers["content-type"]) &&
  !(request.headers.accept ?? "").toLowerCase().includes("application/json")

/** google.rpc.Code for an HTTP status, as the gRPC/HTTP mapping pairs them. */
export const rpcCodeOf = (status: number): number => {
  switch (status) {
    case 400:
      return 3 // INVALID_ARGUMENT
    case 401:
      return 16 // UNAUTHENTICATED
    case 403:
      return 7 // PERMISSION_DENIED
    case 404:
      return 5 // NOT_FOUND
    case 413:
      return 8 // RESOURCE_EXHAUSTED
    case 429:
      return 8 // RESOURCE_EXHAUSTED
    case 503:
      return 14 // UNAVAILABLE
    case 504:
      return 4 // DEADLINE_EXCEEDED
    default:
      return status >= 500 ? 13 : 2 // INTERNAL : UNKNOWN
  }
}

const jsonOf = (response: HttpServerResponse.HttpServerResponse): Record<string, unknown> | undefined => {
  if (response.body._tag !== "Uint8Array") return undefined
  try {
    const parsed: unknown = JSON.parse(new TextDecoder().decode(response.body.body))
    return typeof parsed === "object" && parsed !== null ? (parsed as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}

/** The ExportTraceServiceResponse of a JSON result: partial_success only when spans were refused. */
export const encodeExportResponse = (result: Record<string, unknown> | undefined): Uint8Array => {
  const partial = result?.partialSuccess as { rejectedSpans?: unknown; errorMessage?: unknown } | undefined
  const rejected = typeof partial?.rejectedSpans === "number" ? partial.rejectedSpans : 0
  return ExportResponse.encode(
    ExportResponse.create(
      rejected > 0
        ? {
            partialSuccess: {
              rejectedSpans: rejected,
              errorMessage: typeof partial?.errorMessage === "string" ? partial.errorMessage : ""
            }
          }
        : {}
    )
  ).finish()
}

/** A google.rpc.Status message. */
export const rpcStatus = (code: number, message: string): Uint8Array =>
  RpcStatus.encode(RpcStatus.create({ code, message })).finish()

/** A google.rpc.Status for an error answer; its message is the `error` of our JSON body. */
export const encodeRpcStatus = (status: number, body: Record<string, unknown> | undefined): Uint8Array =>
  rpcStatus(rpcCodeOf(status), typeof body?.error === "string" ? body.error : `HTTP ${status}`)

/** A response re-encoded for a protobuf client: status and headers (Retry-After…) kept, body and Content-Type changed. */
const toProtobuf = (response: HttpServerResponse.HttpServerResponse) => {
  const json = jsonOf(response)
  const bytes = response.status < 300 ? encodeExportResponse(json) : encodeRpcStatus(response.status, json)
  return HttpServerResponse.uint8Array(bytes, {
    status: response.status,
    headers: response.headers,
    contentType: PROTOBUF
  })
}

const reencode = HttpApp.appendPreResponseHandler((_request, response) => Effect.succeed(toProtobuf(response)))

/**
 * Re-encodes the answers to protobuf exports (see `wantsProtobuf`), whoever wrote them: the handler's result,
 * and the JSON errors of authentication, rate limiting, backpressure and validation. A pre-response handler, not a
 * map over the app's result: the server sends error responses before an outer middleware would see them.
 */
export const otlpProtobufAnswers = <E, R>(
  app: HttpApp.Default<E, R>
): HttpApp.Default<E, R | HttpServerRequest.HttpServerRequest> =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
    wantsProtobuf(request) ? Effect.zipRight(reencode, app) : app
  )
