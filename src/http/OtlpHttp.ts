import { HttpApiBuilder, type HttpServerRequest } from "@effect/platform"
import { Effect, Either, Layer, Option } from "effect"
import { AppConfig } from "#layers/config/AppConfig"
import { OtlpIngest } from "#layers/ingest/OtlpIngest"
import { decodeJsonBody, decodeProtobufBody } from "#layers/ingest/OtlpPrepare"
import { OtlpPreparer } from "#layers/ingest/OtlpPreparer"
import { UsageCounters } from "#layers/usage/UsageCounters"
import type { AccountId } from "#src/domain/Ids"
import { type IngestBackpressure, type RequestTimeout, ValidationFailed } from "../api/ApiErrors.ts"
import { TapedeckApi } from "../api/Api.ts"
import { answerDomainErrors } from "../api/ErrorTable.ts"
import { CurrentPrincipal } from "../api/Security.ts"
import { BodyPreempted, BodyTimedOut, BodyTooLarge } from "./BodyLimit.ts"
import { bodyPreempted, bodyTimedOut } from "./ErrorBodies.ts"

const ACCEPTED = new Set(["application/json", "application/x-protobuf", "application/protobuf"])

const refuse = (message: string) => Effect.fail(new ValidationFailed({ message }))

const readBody = (request: HttpServerRequest.HttpServerRequest) =>
  request.arrayBuffer.pipe(
    Effect.map((buffer) => new Uint8Array(buffer)),
    Effect.catchTag(
      "RequestError",
      (e): Effect.Effect<never, ValidationFailed | RequestTimeout | IngestBackpressure> =>
        e.cause instanceof BodyTimedOut
          ? bodyTimedOut(e.cause)
          : e.cause instanceof BodyPreempted
            ? bodyPreempted(e.cause)
            : refuse(e.cause instanceof BodyTooLarge ? e.cause.message : "the request body could not be read")
    )
  )

/**
 * An export written for an account, whatever carried it (OTLP/HTTP here, OTLP/gRPC in src/grpc): prepared on the
 * ingest thread when that takes it (OtlpPreparer), else decoded and mapped here; counted in the account's usage.
 */
export const exportWriter = Effect.gen(function* () {
  const ingest = yield* OtlpIngest
  const preparer = yield* OtlpPreparer
  const usage = yield* UsageCounters
  const config = yield* AppConfig

  const write = (
    accountId: AccountId,
    protobuf: boolean,
    raw: Uint8Array,
    contentEncoding: string | undefined,
    liveKey: string | null
  ) =>
    Effect.gen(function* () {
      const decodeBody = () =>
        (protobuf ? decodeProtobufBody : decodeJsonBody)(raw, contentEncoding, config.ingestMaxDecompressedBytes)
      const prepared = yield* preparer.prepare(accountId, protobuf ? "protobuf" : "json", raw, contentEncoding)
      if (Option.isSome(prepared)) {
        if (prepared.value._tag === "Refused") return yield* refuse(prepared.value.message)
        // The thread decoded this body already: decoding it again here cannot fail.
        return yield* ingest.ingestPrepared(
          accountId,
          prepared.value.prepared,
          () => Either.getOrThrow(decodeBody()),
          liveKey
        )
      }
      const decoded = yield* Either.match(decodeBody(), { onLeft: refuse, onRight: Effect.succeed })
      return yield* ingest.ingest(accountId, decoded, liveKey)
    }).pipe(answerDomainErrors)

  /**
   * `liveKey`: the digest of the caller's API key when it was verified from this instance's cache; the write's own
   * statement then refuses a key revoked since (a 401, nothing written).
   */
  return (
    accountId: AccountId,
    protobuf: boolean,
    raw: Uint8Array,
    contentEncoding: string | undefined,
    liveKey: string | null = null
  ) =>
    write(accountId, protobuf, raw, contentEncoding, liveKey).pipe(
      // Counted once per accepted export: by the write's transaction when it wrote spans, else here (never failing it).
      Effect.tap((result) => (result.counted ? Effect.void : usage.increment(accountId, "otlp_requests")))
    )
})

/** The export handler, one for both export paths (they differ only in how the caller authenticates). */
const exportHandler = Effect.gen(function* () {
  const write = yield* exportWriter

  return ({ request }: { readonly request: HttpServerRequest.HttpServerRequest }) =>
    Effect.gen(function* () {
      const { accountId, liveKey } = yield* CurrentPrincipal
      const mediaType = (request.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase()
      if (!ACCEPTED.has(mediaType)) {
        return yield* refuse("Content-Type must be application/json, application/x-protobuf or application/protobuf")
      }
      const raw = yield* readBody(request)
      const protobuf = mediaType !== "application/json"
      const result = yield* write(accountId, protobuf, raw, request.headers["content-encoding"], liveKey ?? null)
      return {
        partialSuccess:
          result.rejectedSpans > 0
            ? { rejectedSpans: result.rejectedSpans, errorMessage: result.errorMessage ?? "" }
            : {},
        traces_created: result.tracesCreated,
        spans_ingested: result.spansIngested
      }
    })
})

const ExportServicesLive = Layer.mergeAll(OtlpIngest.Default, OtlpPreparer.Default, UsageCounters.Default)

export const OtlpHttpLive = HttpApiBuilder.group(TapedeckApi, "otlp", (handlers) =>
  Effect.map(exportHandler, (handler) => handlers.handle("export", handler))
).pipe(Layer.provide(ExportServicesLive))

export const LangfuseOtlpHttpLive = HttpApiBuilder.group(TapedeckApi, "langfuseOtlp", (handlers) =>
  Effect.map(exportHandler, (handler) => handlers.handle("export", handler))
).pipe(Layer.provide(ExportServicesLive))
