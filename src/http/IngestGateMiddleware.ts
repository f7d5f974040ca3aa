import { HttpApiBuilder, type HttpApp, HttpServerRequest } from "@effect/platform"
import { Effect, Exit, Option, Redacted } from "effect"
import { Credentials, type Principal } from "#layers/auth/Credentials"
import { InternalIdentity } from "#layers/auth/InternalIdentity"
import { IngestGate } from "#layers/ingest/IngestGate"
import type { IngestBackpressure } from "../api/ApiErrors.ts"
import { TapedeckApi } from "../api/Api.ts"
import { INGEST_RETRY_AFTER_SECONDS, toApiError } from "../api/ErrorTable.ts"
import { isExportPath, LANGFUSE_EXPORT_PATH } from "../api/OtlpApi.ts"
import { errorResponse } from "./ErrorBodies.ts"
import { setRetryAfter } from "./RateLimitLive.ts"
import { IngestSaturated, InvalidCredential } from "#src/domain/Errors"

export const isExport = (request: HttpServerRequest.HttpServerRequest) =>
  request.method === "POST" && isExportPath(request.url)

/** The secret key of a Langfuse SDK's `Authorization: Basic base64(publicKey:secretKey)`; empty when malformed. */
const basicSecret = (authorization: string) => {
  const decoded = Buffer.from(authorization.slice(6).trim(), "base64").toString("utf8")
  const colon = decoded.indexOf(":")
  return colon < 0 ? "" : decoded.slice(colon + 1)
}

const isLangfusePath = (url: string) => url.split("?")[0] === LANGFUSE_EXPORT_PATH

/**
 * The account an export acts for, from its headers alone, as the API's security schemes would find it
 * (`x-service-key` first, then `Authorization: Bearer`, or `Basic` on the Langfuse path), so that the ingestion gate can be asked on its behalf
 * before anything else is done. An API key verified here in the last minute is taken from this instance's cache
 * (a revoked key leaves it at once); the export's own authentication still looks the key up.
 */
export const exportPrincipal = (
  credentials: Credentials,
  request: HttpServerRequest.HttpServerRequest
): Effect.Effect<Principal, InvalidCredential> =>
  Effect.flatMap(Effect.serviceOption(InternalIdentity), (internal) => {
    if (Option.isSome(internal)) return Effect.succeed(internal.value)
    const key = request.headers["x-service-key"]
    const authorization = request.headers.authorization ?? ""
    const bearer = /^bearer /i.test(authorization)
      ? credentials.cachedBearer(Redacted.make(authorization.slice(7)))
      : /^basic /i.test(authorization) && isLangfusePath(request.url)
        ? credentials.cachedServiceKey(Redacted.make(basicSecret(authorization)))
        : Effect.fail(new InvalidCredential({ reason: "missing or invalid credentials" }))
    if (key === undefined || key === "") return bearer
    return credentials
      .cachedServiceKey(Redacted.make(key))
      .pipe(
        Effect.catchTag("InvalidCredential", (e) => (/^(bearer|basic) /i.test(authorization) ? bearer : Effect.fail(e)))
      )
  })

const unauthorized = (e: InvalidCredential) => errorResponse(toApiError(e))

/**
 * Wraps OTLP exports in the ingestion gate at the outermost API level: the credentials are checked from the
 * headers first (a refused credential is a 401 whatever the load), then the export takes a permit for its
 * account or is answered 503 before anything reads its body.
 */
export const IngestGateLive = HttpApiBuilder.middleware(
  TapedeckApi,
  Effect.gen(function* () {
    const gate = yield* IngestGate
    const credentials = yield* Credentials
    return (app: HttpApp.Default): HttpApp.Default<IngestBackpressure> =>
      // Every request passes here: anything but an export goes straight on, without a generator.
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
        !isExport(request)
          ? app
          : Effect.flatMap(Effect.either(exportPrincipal(credentials, request)), (principal) =>
              principal._tag === "Left"
                ? Effect.succeed(unauthorized(principal.left))
                : gate
                    .guard(principal.right.accountId, app)
                    .pipe(
                      Effect.catchTag("IngestSaturated", (e) =>
                        setRetryAfter(INGEST_RETRY_AFTER_SECONDS).pipe(Effect.zipRight(Effect.fail(toApiError(e))))
                      )
                    )
            )
      )
  })
)

/**
 * The server-level fast path of the same refusal: while every permit is taken, an export whose account the gate
 * would refuse is answered with the same 503 body before the access log, the router and the API middleware run
 * (under overload those cost the event loop a quarter of a millisecond per refusal, and /health waits behind
 * them). Its credential is checked first, from this instance's cache of recent keys; an export that is not
 * refused here (a bad credential, an account the gate would admit, a database error) takes the full path, where
 * the gate stays authoritative.
 */
export const refuseWhileSaturated = (gate: IngestGate, credentials: Credentials) => {
  const refusalFor = (by: "permits" | "checks") =>
    errorResponse(toApiError(new IngestSaturated({ maxInflight: gate.maxInflight, by })), {
      "retry-after": String(INGEST_RETRY_AFTER_SECONDS)
    })
  const refusals = { permits: refusalFor("permits"), checks: refusalFor("checks") }
  return <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R | HttpServerRequest.HttpServerRequest> =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      // Exports only: a check or any other request never asks the gate (nor starts its event-loop sampling).
      if (!isExport(request) || !gate.saturated()) return app
      return Effect.flatMap(Effect.exit(exportPrincipal(credentials, request)), (principal) => {
        if (!Exit.isSuccess(principal) || gate.admits(principal.value.accountId)) return app
        gate.refuseFast()
        return Effect.succeed(gate.shedForChecks() ? refusals.checks : refusals.permits)
      })
    })
}
