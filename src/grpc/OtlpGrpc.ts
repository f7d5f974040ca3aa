import { RateLimiter } from "@effect/experimental"
import { SqlError } from "@effect/sql"
import * as grpc from "@grpc/grpc-js"
import { Cause, Context, Duration, Effect, Exit, Layer, Option, Redacted, Runtime } from "effect"
import { Credentials, type Principal } from "#layers/auth/Credentials"
import type { InvalidCredential } from "#src/domain/Errors"
import { AppConfig } from "#layers/config/AppConfig"
import { currentUploadPermit, IngestGate } from "#layers/ingest/IngestGate"
import { enterForeground, leaveForeground } from "#layers/jobs/Foreground"
import { OtlpIngest } from "#layers/ingest/OtlpIngest"
import { OtlpPreparer } from "#layers/ingest/OtlpPreparer"
import { UsageCounters } from "#layers/usage/UsageCounters"
import { isTransient } from "../http/ErrorBodies.ts"
import { exportWriter } from "../http/OtlpHttp.ts"
import { encodeExportResponse } from "../http/OtlpResponses.ts"
import { retryAfterSeconds } from "../http/RateLimitLive.ts"
import { GrpcCode, statusWithRetryInfo } from "./GrpcStatus.ts"

/** The OTLP/gRPC trace export method (opentelemetry/proto/collector/trace/v1/trace_service.proto). */
export const EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

const RETRY_AFTER_SECONDS = 1

/** Where OTLP/gRPC is served: TAPEDECK_OTLP_GRPC_PORT (4317) on HOST; TAPEDECK_OTLP_GRPC_ENABLED=false turns it off. */
export const DEFAULT_GRPC_PORT = 4317

/** The OTLP/gRPC server of this process: its port, none when it is off. */
export class OtlpGrpcServer extends Context.Tag("tapedeck/OtlpGrpcServer")<
  OtlpGrpcServer,
  { readonly port: Option.Option<number> }
>() {}

/** A refused export: its gRPC status, and the seconds after which the client may retry (as RetryInfo). */
interface Refusal {
  readonly code: number
  readonly message: string
  readonly retryAfter?: number
}

const refusal = (code: number, message: string, retryAfter?: number): Refusal =>
  retryAfter === undefined ? { code, message } : { code, message, retryAfter }

const first = (metadata: grpc.Metadata, key: string) => {
  const value = metadata.get(key)[0]
  return typeof value === "string" ? value : undefined
}

// The messages arrive and leave as bytes: the ingestion path decodes the request itself (on its thread when large).
const TRACE_SERVICE: grpc.ServiceDefinition = {
  Export: {
    path: EXPORT_METHOD,
    requestStream: false,
    responseStream: false,
    requestSerialize: (bytes: Uint8Array) => Buffer.from(bytes),
    requestDeserialize: (bytes: Buffer) => bytes,
    responseSerialize: (bytes: Uint8Array) => Buffer.from(bytes),
    responseDeserialize: (bytes: Buffer) => bytes
  }
}

/** Authenticates, limits and writes one export as POST /v1/traces does; answers an ExportTraceServiceResponse. */
const exportHandler = Effect.gen(function* () {
  const write = yield* exportWriter
  const credentials = yield* Credentials
  const gate = yield* IngestGate
  const limiter = yield* RateLimiter.RateLimiter
  const { rateLimitPerMinute } = yield* AppConfig

  const principalOf = (metadata: grpc.Metadata): Effect.Effect<Principal, InvalidCredential> => {
    const key = first(metadata, "x-service-key")
    if (key !== undefined && key !== "") return credentials.serviceKey(Redacted.make(key))
    const authorization = first(metadata, "authorization") ?? ""
    return credentials.bearer(Redacted.make(/^bearer /i.test(authorization) ? authorization.slice(7) : ""))
  }

  return (metadata: grpc.Metadata, body: Uint8Array): Effect.Effect<Uint8Array, Refusal> =>
    Effect.gen(function* () {
      const principal = yield* Effect.mapError(principalOf(metadata), (e) =>
        refusal(GrpcCode.UNAUTHENTICATED, e.reason)
      )
      yield* limiter
        .consume({
          key: `${principal.credentialId}:grpc ${EXPORT_METHOD}`,
          limit: rateLimitPerMinute,
          window: "1 minute",
          onExceeded: "fail"
        })
        .pipe(
          Effect.mapError((e) => {
            const seconds = e.reason === "Exceeded" ? retryAfterSeconds(e.retryAfter) : 1
            return refusal(GrpcCode.RESOURCE_EXHAUSTED, `rate limit exceeded; retry after ${seconds} s`, seconds)
          })
        )
      const result = yield* gate
        .guard(
          principal.accountId,
          // The message has arrived whole before the handler runs: its permit cannot be taken back any more.
          Effect.flatMap(currentUploadPermit, (permit) => {
            permit?.uploaded()
            return write(principal.accountId, true, body, undefined)
          })
        )
        .pipe(
          Effect.mapError((e) =>
            e._tag === "IngestSaturated"
              ? refusal(
                  GrpcCode.UNAVAILABLE,
                  e.by === "checks"
                    ? `ingestion is paused while enforcement checks are backed up on this instance; retry after ${RETRY_AFTER_SECONDS} s`
                    : `ingestion is saturated (${e.maxInflight} exports in flight); retry after ${RETRY_AFTER_SECONDS} s`,
                  RETRY_AFTER_SECONDS
                )
              : refusal(GrpcCode.INVALID_ARGUMENT, e.message)
          )
        )
      return encodeExportResponse({
        partialSuccess: { rejectedSpans: result.rejectedSpans, errorMessage: result.errorMessage ?? "" }
      })
    }).pipe(
      Effect.catchAllDefect((defect) =>
        defect instanceof SqlError.SqlError && isTransient(defect)
          ? Effect.logWarning("database unavailable", Cause.die(defect)).pipe(
              Effect.zipRight(
                Effect.fail(refusal(GrpcCode.UNAVAILABLE, "the database cannot be reached; retry shortly", 1))
              )
            )
          : Effect.logError("unhandled defect", Cause.die(defect)).pipe(
              Effect.zipRight(Effect.fail(refusal(GrpcCode.INTERNAL, "internal error")))
            )
      )
    )
})

const answer = (callback: grpc.sendUnaryData<Uint8Array>) => (exit: Exit.Exit<Uint8Array, Refusal>) => {
  if (Exit.isSuccess(exit)) return callback(null, exit.value)
  const failure = Cause.failureOption(exit.cause)
  const refused = Option.getOrElse(failure, () => refusal(GrpcCode.INTERNAL, "internal error"))
  const metadata = new grpc.Metadata()
  if (refused.retryAfter !== undefined) {
    metadata.set("grpc-status-details-bin", statusWithRetryInfo(refused.code, refused.message, refused.retryAfter))
  }
  callback({ code: refused.code, details: refused.message, metadata })
}

/**
 * OTLP/gRPC TraceService/Export on a port of its own, beside the HTTP server: the same authentication
 * (`x-service-key` or `authorization: Bearer` metadata), rate limit, ingestion gate (UNAVAILABLE with RetryInfo
 * when saturated), size limit and ingestion path as POST /v1/traces. With several worker processes the first
 * serves it (the port is not shared).
 */
export const OtlpGrpcLive = Layer.scoped(
  OtlpGrpcServer,
  Effect.gen(function* () {
    const { host, ingestMaxDecompressedBytes, otlpGrpc, workerIndex } = yield* AppConfig
    const settings = { ...otlpGrpc, host }
    if (!settings.enabled || Option.exists(workerIndex, (i) => i !== 0)) return { port: Option.none() }
    const handle = yield* exportHandler
    const run = Runtime.runCallback(yield* Effect.runtime<never>())
    const server = new grpc.Server({
      // Checked on the decompressed message (grpc-js decompresses gzip itself), like TAPEDECK_INGEST_MAX_DECOMPRESSED_BYTES.
      "grpc.max_receive_message_length": ingestMaxDecompressedBytes
    })
    server.addService(TRACE_SERVICE, {
      // Counted as a request in flight, as the HTTP server counts its own: background indexing yields to it.
      Export: (call: grpc.ServerUnaryCall<Uint8Array, Uint8Array>, callback: grpc.sendUnaryData<Uint8Array>) => {
        enterForeground()
        run(handle(call.metadata, call.request), {
          onExit: (exit) => {
            leaveForeground()
            answer(callback)(exit)
          }
        })
      }
    })
    const wanted = Option.getOrElse(settings.port, () => DEFAULT_GRPC_PORT)
    const address = `${settings.host.includes(":") ? `[${settings.host}]` : settings.host}:${wanted}`
    const bound = yield* Effect.async<number, Error>((resume) =>
      server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (error, port) =>
        resume(
          error === null
            ? Effect.succeed(port)
            : Effect.fail(new Error(`OTLP/gRPC cannot listen on ${address}: ${error.message}`))
        )
      )
    ).pipe(Effect.either)
    if (bound._tag === "Left") {
      // A port asked for is owed: the service does not start without it. The default one may be another
      // process's (a second instance on the machine, a collector): the HTTP API serves on, and says so.
      if (Option.isSome(settings.port)) return yield* Effect.die(bound.left)
      yield* Effect.logError(
        `${bound.left.message}; OTLP/gRPC is off (set TAPEDECK_OTLP_GRPC_PORT, or TAPEDECK_OTLP_GRPC_ENABLED=false)`
      )
      server.forceShutdown()
      return { port: Option.none() }
    }
    const port = bound.right
    yield* Effect.addFinalizer(() =>
      Effect.async<void>((resume) => server.tryShutdown(() => resume(Effect.void))).pipe(
        Effect.timeoutTo({
          duration: Duration.seconds(5),
          onSuccess: () => undefined,
          onTimeout: () => server.forceShutdown()
        })
      )
    )
    yield* Effect.logInfo(`OTLP/gRPC listening on ${settings.host}:${port}`)
    return { port: Option.some(port) }
  })
).pipe(
  Layer.provide([
    OtlpIngest.Default,
    OtlpPreparer.Default,
    UsageCounters.Default,
    IngestGate.Default,
    Credentials.Default
  ]),
  Layer.provide(RateLimiter.layer),
  Layer.provide(RateLimiter.layerStoreMemory)
)
