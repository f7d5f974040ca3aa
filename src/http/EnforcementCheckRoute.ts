import { HttpApiError, HttpApp, HttpServerError, HttpServerRequest, type HttpServerResponse } from "@effect/platform"
import { Cause, Context, Effect, ParseResult, Schema, Tracer } from "effect"
import { Credentials } from "#layers/auth/Credentials"
import { AppConfig } from "#layers/config/AppConfig"
import { Enforcement } from "#layers/enforcement/Enforcement"
import { CurrentUploadPermit, type UploadPermit } from "#layers/ingest/IngestGate"
import { decodeCheckRequest, EnforcementCheckRequest } from "#src/domain/Enforcement"
import { type ApiError, ValidationFailed } from "../api/ApiErrors.ts"
import { ENFORCEMENT_CHECK_PATH } from "../api/EnforcementApi.ts"
import type { CurrentPrincipal } from "../api/Security.ts"
import { authenticateHeaders } from "./AuthenticationLive.ts"
import { bodyPaceOf, pacedJsonBody } from "./BodyLimit.ts"
import { answerCheck } from "./EnforcementHttp.ts"
import { errorResponse, requireJson, rewriteErrors, withErrorBodies } from "./ErrorBodies.ts"
import { RateLimits } from "./RateLimitLive.ts"

/**
 * Whether the API would read the body as JSON (HttpApiBuilder: a missing or empty Content-Type counts as JSON). Any
 * other body goes to the API's own route, which refuses it.
 */
const readsAsJson = (request: HttpServerRequest.HttpServerRequest) => {
  const contentType = request.headers["content-type"]
  return !contentType || contentType.toLowerCase().includes("application/json")
}

/**
 * The response with the headers the steps asked for (`Retry-After`, `Connection: close`: HttpApp's pre-response
 * handlers). The server applies them to what its app answers, but not to an answer given in front of the app.
 */
const withPreResponseHandlers = (response: HttpServerResponse.HttpServerResponse) =>
  Effect.withFiberRuntime<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest>(
    (fiber) => {
      const handler = fiber.getFiberRef(HttpApp.currentPreResponseHandlers)
      if (handler._tag === "None") return Effect.succeed(response)
      const request = Context.unsafeGet(fiber.currentContext, HttpServerRequest.HttpServerRequest)
      return Effect.orDie(handler.value(request, response))
    }
  )

/**
 * The lean route of `POST /api/v1/enforcement/check`, in front of the HttpApi router: for a request to exactly that
 * path, the steps the API takes for the check, in its order and through the same functions, without the router, the
 * security middleware's plumbing and the Schema interpreter (the check is the hot path: docs/performance.md, "The
 * service's CPU per check"). The content type and the body's cap and pace, with the framework's failures rewritten
 * (withErrorBodies, as ErrorBodiesLive); the credential from the headers (authenticateHeaders, as the Authentication
 * middleware); the rate limit (RateLimits, as RateLimitLive, on the same counters); the body decoded by
 * decodeCheckRequest, or by the endpoint's schema when that does not accept it (so every refusal names the schema's
 * issues); the check answered by answerCheck (as the endpoint's handler); an error as the contract's body. Any other
 * spelling of the route (a query string, a batch operation) reaches the API's endpoint, which answers the same.
 */
export const enforcementCheckRoute = Effect.gen(function* () {
  const config = yield* AppConfig
  const credentials = yield* Credentials
  const limits = yield* RateLimits
  const enforcement = yield* Enforcement
  const decodeBySchema = Schema.decodeUnknown(EnforcementCheckRequest)
  /** The body decoded (by the schema when the hand decoder does not accept it) and answered. */
  const answerBody = (principal: CurrentPrincipal["Type"], body: unknown) => {
    const decoded = decodeCheckRequest(body)
    return decoded !== undefined
      ? answerCheck(enforcement, principal, decoded)
      : decodeBySchema(body).pipe(
          Effect.catchIf(ParseResult.isParseError, HttpApiError.HttpApiDecodeError.refailParseError),
          Effect.flatMap((payload) => answerCheck(enforcement, principal, payload))
        )
  }
  // As the endpoint's middlewares run: Authentication outermost, then RateLimit, then the handler reads the body.
  const answerWith = (
    request: HttpServerRequest.HttpServerRequest,
    json: Effect.Effect<unknown, HttpServerError.RequestError>
  ) =>
    Effect.flatMap(authenticateHeaders(credentials, request), (principal) =>
      Effect.zipRight(
        limits.consume(principal.credentialId, "POST", ENFORCEMENT_CHECK_PATH),
        // A body that is not JSON is a defect, as in HttpApiBuilder: rewriteErrors rewrites it.
        Effect.flatMap(Effect.orDie(json), (body) => answerBody(principal, body))
      )
    )
  const pace = bodyPaceOf(config)
  /** Whatever the steps answer, as the router's route would: an error as its body, the pre-response handlers run. */
  const responded = <E extends ApiError>(
    answered: Effect.Effect<HttpServerResponse.HttpServerResponse, E, HttpServerRequest.HttpServerRequest>
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest> =>
    answered.pipe(
      Effect.matchEffect({
        onFailure: (e) => withPreResponseHandlers(errorResponse(e)),
        onSuccess: withPreResponseHandlers
      }),
      // The server runs a request uninterruptibly and the router lets its handler be interrupted: a client gone before
      // its answer interrupts the check here too, and the interruption carries its response (499) as the server's
      // own handling of the app's failures gives it, for the access log and the span to read the status from.
      Effect.interruptible,
      Effect.catchAllCause((cause) =>
        Effect.flatMap(HttpServerError.causeResponse(cause), ([response, rest]) =>
          Cause.isEmpty(rest) ? Effect.succeed(response) : Effect.failCause(rest)
        )
      )
    )
  // Any body read other than the paced one of a declared length (a chunked body, say): through withErrorBodies.
  const lean = responded(
    withErrorBodies(
      config.maxBodyBytes,
      pace
    )(Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => answerWith(request, request.json)))
  )
  /**
   * The common case: the content type checked and the body read as withErrorBodies does (its checks in its order, its
   * rewrites of failures), the body read once and parsed once whole (pacedJsonBody), without the wrapped request.
   */
  const leanFor = (request: HttpServerRequest.HttpServerRequest, permit: UploadPermit | undefined) => {
    const json = pacedJsonBody(request, config.maxBodyBytes, pace, permit)
    if (json === undefined) return lean
    const read: Effect.Effect<
      HttpServerResponse.HttpServerResponse,
      Effect.Effect.Error<ReturnType<typeof answerWith>> | ValidationFailed
    > = json instanceof ValidationFailed ? Effect.fail(json) : answerWith(request, json)
    return responded(rewriteErrors(Effect.zipRight(requireJson(request), read)))
  }
  return <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R | HttpServerRequest.HttpServerRequest> =>
    Effect.withFiberRuntime((fiber) => {
      const request = Context.unsafeGet(fiber.currentContext, HttpServerRequest.HttpServerRequest)
      if (request.method !== "POST" || request.url !== ENFORCEMENT_CHECK_PATH || !readsAsJson(request)) return app
      // The route on the request's server span, as the router records the route it matched.
      const span = Context.getOption(fiber.currentContext, Tracer.ParentSpan)
      if (span._tag === "Some" && span.value._tag === "Span") span.value.attribute("http.route", ENFORCEMENT_CHECK_PATH)
      return leanFor(
        request,
        Context.getOrElse(fiber.currentContext, CurrentUploadPermit, () => undefined)
      )
    })
})
