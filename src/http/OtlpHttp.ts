import { HttpApiBuilder, type HttpServerRequest } from "@effect/platform"
import { Effect, Either, Schema } from "effect"
import { AppConfig } from "#layers/config/AppConfig"
import { decompress } from "#layers/ingest/Decompress"
import { OtlpIngest } from "#layers/ingest/OtlpIngest"
import { UsageCounters } from "#layers/usage/UsageCounters"
import { decodeOtlpJson, decodeOtlpProtobuf } from "#layers/ingest/OtlpDecode"
import { OtlpJsonRequest } from "#src/domain/Otlp"
import { ValidationFailed } from "../api/ApiErrors.ts"
import { TapedeckApi } from "../api/Api.ts"
import { CurrentPrincipal } from "../api/Security.ts"
import { BodyTooLarge, MAX_BODY_DEPTH, nestsDeeperThan } from "./BodyLimit.ts"

const ACCEPTED = new Set(["application/json", "application/x-protobuf", "application/protobuf"])

const refuse = (message: string) => Effect.fail(new ValidationFailed({ message }))

const readBody = (request: HttpServerRequest.HttpServerRequest) =>
  request.arrayBuffer.pipe(
    Effect.map((buffer) => new Uint8Array(buffer)),
    Effect.catchTag("RequestError", (e) =>
      refuse(e.cause instanceof BodyTooLarge ? e.cause.message : "the request body could not be read"))
  )

const decodeJson = (bytes: Uint8Array) => {
  let body: unknown
  try {
    body = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes))
  } catch {
    return refuse("request body is not valid JSON")
  }
  if (nestsDeeperThan(body, MAX_BODY_DEPTH)) return refuse(`request body nests deeper than ${MAX_BODY_DEPTH} levels`)
  const shape = Schema.decodeUnknownEither(OtlpJsonRequest)(body)
  if (Either.isLeft(shape)) {
    return refuse(`not an OTLP ExportTraceServiceRequest: resourceSpans must be an array of at most 100 objects`)
  }
  return Either.match(decodeOtlpJson(body), { onLeft: refuse, onRight: Effect.succeed })
}

export const OtlpHttpLive = HttpApiBuilder.group(TapedeckApi, "otlp", (handlers) =>
  Effect.gen(function*() {
    const ingest = yield* OtlpIngest
    const usage = yield* UsageCounters
    const config = yield* AppConfig
    return handlers.handle("export", ({ request }) =>
      Effect.gen(function*() {
        const { accountId } = yield* CurrentPrincipal
        const mediaType = (request.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase()
        if (!ACCEPTED.has(mediaType)) {
          return yield* refuse("Content-Type must be application/json, application/x-protobuf or application/protobuf")
        }
        const raw = yield* readBody(request)
        const bytes = yield* Either.match(
          decompress(raw, request.headers["content-encoding"], config.ingestMaxDecompressedBytes),
          { onLeft: (e) => refuse(e.message), onRight: Effect.succeed }
        )
        const decoded = mediaType === "application/json"
          ? yield* decodeJson(bytes)
          : yield* Either.match(decodeOtlpProtobuf(bytes), {
            onLeft: (message) => refuse(`not an OTLP protobuf ExportTraceServiceRequest: ${message}`),
            onRight: Effect.succeed
          })
        const result = yield* ingest.ingest(accountId, decoded)
        yield* usage.increment(accountId, "otlp_requests") // one upsert per accepted export; never fails the export
        return {
          partialSuccess: result.rejectedSpans > 0
            ? { rejectedSpans: result.rejectedSpans, errorMessage: result.errorMessage ?? "" }
            : {},
          traces_created: result.tracesCreated,
          spans_ingested: result.spansIngested
        }
      }))
  }))
