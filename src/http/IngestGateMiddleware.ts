import { HttpApiBuilder, type HttpApp, HttpServerRequest } from "@effect/platform"
import { Effect } from "effect"
import { IngestGate } from "#layers/ingest/IngestGate"
import { IngestBackpressure } from "../api/ApiErrors.ts"
import { TapedeckApi } from "../api/Api.ts"
import { OTLP_EXPORT_PATH } from "../api/OtlpApi.ts"
import { setRetryAfter } from "./RateLimitLive.ts"

const isExport = (request: HttpServerRequest.HttpServerRequest) =>
  request.method === "POST" && request.url.split("?")[0] === OTLP_EXPORT_PATH

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
            setRetryAfter(1).pipe(Effect.zipRight(Effect.fail(new IngestBackpressure({
              message: `ingestion is saturated (${e.maxInflight} exports in flight); retry after 1 s`
            })))))
        )
      })
  })
)
