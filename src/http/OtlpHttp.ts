import { HttpApiBuilder, type HttpServerRequest } from "@effect/platform"
import { Effect, Either, Layer, Option, Schema } from "effect"
import { AppConfig } from "#layers/config/AppConfig"
import { decompress } from "#layers/ingest/Decompress"
import { OtlpIngest } from "#layers/ingest/OtlpIngest"
import { decodeProtobufBody } from "#layers/ingest/OtlpPrepare"
import { OtlpPreparer } from "#layers/ingest/OtlpPreparer"
import { UsageCounters } from "#layers/usage/UsageCounters"
import { decodeOtlpJson } from "#layers/ingest/OtlpDecode"
import type { AccountId } from "#src/domain/Ids"
import { OtlpJsonRequest } from "#src/domain/Otlp"
import { type IngestBackpressure, type RequestTimeout, ValidationFailed } from "../api/ApiErrors.ts"
import { TapedeckApi } from "../api/Api.ts"
import { CurrentPrincipal } from "../api/Security.ts"
import { BodyPreempted, BodyTimedOut, BodyTooLarge, MAX_BODY_DEPTH, nestsDeeperThan } from "./BodyLimit.ts"
import { bodyPreempted, bodyTimedOut } from "./ErrorBodies.ts"

const ACCEPTED = new Set(["application/json", "application/x-protobuf", "application/protobuf"])

const refuse = (message: string) => Effect.fail(new ValidationFailed({ message }))

const readBody = (request: HttpServerRequest.HttpServerRequest) =>
  request.arrayBuffer.pipe(
    Effect.map((buffer) => new Uint8Array(buffer)),
    Effect.catchTag("RequestError", (e): Effect.Effect<never, ValidationFailed | RequestTimeout | IngestBackpressure> =>
      e.cause instanceof BodyTimedOut
        ? bodyTimedOut(e.cause)
        : e.cause instanceof BodyPreempted
        ? bodyPreempted(e.cause)
        : refuse(e.cause instanceof BodyTooLarge ? e.cause.message : "the request body could not be read"))
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

/**
 * An export written for an account, whatever carried it (OTLP/HTTP here, OTLP/gRPC in src/grpc): prepared on the
 * ingest thread when that takes it (OtlpPreparer), else decoded and mapped here; counted in the account's usage.
 */
export const exportWriter = Effect.gen(function*() {
  const ingest = yield* OtlpIngest
  const preparer = yield* OtlpPreparer
  const usage = yield* UsageCounters
  const config = yield* AppConfig

  const write = (accountId: AccountId, protobuf: boolean, raw: Uint8Array, contentEncoding: string | undefined) =>
    Effect.gen(function*() {
      const decodeProtobuf = () => decodeProtobufBody(raw, contentEncoding, config.ingestMaxDecompressedBytes)
      if (protobuf) {
        const prepared = yield* preparer.prepare(accountId, raw, contentEncoding)
        if (Option.isSome(prepared)) {
          if (prepared.value._tag === "Refused") return yield* refuse(prepared.value.message)
          // The thread decoded this body already: decoding it again here cannot fail.
          return yield* ingest.ingestPrepared(accountId, prepared.value.prepared, () => Either.getOrThrow(decodeProtobuf()))
        }
      }
      const decoded = !protobuf
        ? yield* Either.match(
          decompress(raw, contentEncoding, config.ingestMaxDecompressedBytes),
          { onLeft: (e) => refuse(e.message), onRight: decodeJson }
        )
        : yield* Either.match(decodeProtobuf(), { onLeft: refuse, onRight: Effect.succeed })
      return yield* ingest.ingest(accountId, decoded)
    })

  return (accountId: AccountId, protobuf: boolean, raw: Uint8Array, contentEncoding: string | undefined) =>
    write(accountId, protobuf, raw, contentEncoding).pipe(
      // One upsert per accepted export; never fails the export.
      Effect.tap(() => usage.increment(accountId, "otlp_requests"))
    )
})

/** The export handler, one for both export paths (they differ only in how the caller authenticates). */
const exportHandler = Effect.gen(function*() {
    const write = yield* exportWriter

    return ({ request }: { readonly request: HttpServerRequest.HttpServerRequest }) =>
      Effect.gen(function*() {
        const { accountId } = yield* CurrentPrincipal
        const mediaType = (request.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase()
        if (!ACCEPTED.has(mediaType)) {
          return yield* refuse("Content-Type must be application/json, application/x-protobuf or application/protobuf")
        }
        const raw = yield* readBody(request)
        const result = yield* write(accountId, mediaType !== "application/json", raw, request.headers["content-encoding"])
        return {
          partialSuccess: result.rejectedSpans > 0
            ? { rejectedSpans: result.rejectedSpans, errorMessage: result.errorMessage ?? "" }
            : {},
          traces_created: result.tracesCreated,
          spans_ingested: result.spansIngested
        }
      })
  })

const ExportServicesLive = Layer.mergeAll(OtlpIngest.Default, OtlpPreparer.Default, UsageCounters.Default)

export const OtlpHttpLive = HttpApiBuilder.group(TapedeckApi, "otlp", (handlers) =>
  Effect.map(exportHandler, (handler) => handlers.handle("export", handler))).pipe(Layer.provide(ExportServicesLive))

export const LangfuseOtlpHttpLive = HttpApiBuilder.group(TapedeckApi, "langfuseOtlp", (handlers) =>
  Effect.map(exportHandler, (handler) => handlers.handle("export", handler))).pipe(Layer.provide(ExportServicesLive))
