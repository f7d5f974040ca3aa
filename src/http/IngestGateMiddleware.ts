import { HttpApiBuilder, type HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Schema } from "effect"
import { IngestGate } from "#layers/ingest/IngestGate"
import { IngestBackpressure, IngestBackpressureWire } from "../api/ApiErrors.ts"
import { TapedeckApi } from "../api/Api.ts"
import { isExportPath } from "../api/OtlpApi.ts"
import { setRetryAfter } from "./RateLimitLive.ts"

const RETRY_AFTER_SECONDS = 1

export const isExport = (request: HttpServerRequest.HttpServerRequest) =>
  request.method === "POST" && isExportPath(request.url)

const saturatedMessage = (maxInflight: number) =>
  `ingestion is saturated (${maxInflight} exports in flight); retry after ${RETRY_AFTER_SECONDS} s`

/**
 * Wraps OTLP exports in the ingestion gate at the outermost API level, so that a request over the in-flight
 * bound is answered 503 before anything reads its body.
 */
export const IngestGateLive = HttpApiBuilder.middleware(
  TapedeckApi,
  Effect.gen(function*() {
    const gate = yield* IngestGate
    return (app: HttpApp.Default): HttpApp.Default<IngestBackpressure> =>
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        if (!isExport(request)) return yield* app
        return yield* gate.guard(app).pipe(
          Effect.catchTag("IngestSaturated", (e) =>
            setRetryAfter(RETRY_AFTER_SECONDS).pipe(
              Effect.zipRight(Effect.fail(new IngestBackpressure({ message: saturatedMessage(e.maxInflight) })))
            ))
        )
      })
  })
)

/**
 * The server-level fast path of the same refusal: while the gate is full, an export is answered with the same
 * 503 body before the access log, the router, authentication and the API middleware run (under overload those
 * cost the event loop a quarter of a millisecond per refusal, and /health waits behind them). The gate itself
 * stays authoritative: an export let through here still passes `guard`.
 */
export const refuseWhileSaturated = (gate: IngestGate) => {
  const refusal = HttpServerResponse.unsafeJson(
    Schema.encodeSync(IngestBackpressureWire)(new IngestBackpressure({ message: saturatedMessage(gate.maxInflight) })),
    { status: 503, headers: { "retry-after": String(RETRY_AFTER_SECONDS) } }
  )
  return <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R | HttpServerRequest.HttpServerRequest> =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      if (!gate.saturated() || !isExport(request)) return app
      gate.refuseFast()
      return Effect.succeed(refusal)
    })
}
