import { type HttpApp, HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Effect, Either, Layer, Option, Redacted, Schema } from "effect"
import { Credentials } from "#layers/auth/Credentials"
import { InternalIdentity } from "#layers/auth/InternalIdentity"
import { AppConfig } from "#layers/config/AppConfig"
import { Enforcement } from "#layers/enforcement/Enforcement"
import { SqlPolicyStoreLive } from "#layers/enforcement/SqlPolicyStore"
import { EnforcementCheckRequest } from "#src/domain/Enforcement"
import { Internal, InternalWire } from "../api/ApiErrors.ts"
import { ENFORCEMENT_CHECK_PATH } from "../api/EnforcementApi.ts"
import { CurrentPrincipal, RateLimit } from "../api/Security.ts"
import { bodyPaceOf, limitBody } from "./BodyLimit.ts"
import { RateLimitLive } from "./RateLimitLive.ts"

/** What RateLimit reads of the route: its path, as the API's router names it. */
const CHECK_ROUTE = { params: {}, route: { method: "POST", path: ENFORCEMENT_CHECK_PATH } } as unknown as HttpRouter.RouteContext

/** The API's answer to a defect (ErrorBodies): a 500 with the error body. */
const INTERNAL_ERROR = HttpServerResponse.unsafeJson(Schema.encodeSync(InternalWire)(new Internal({ message: "internal error" })), {
  status: 500
})

const isJson = (contentType: string | undefined) =>
  contentType !== undefined && contentType.split(";")[0]!.trim().toLowerCase() === "application/json"

/**
 * The enforcement check's happy path beside the API router: an agent waits for this answer before each step, and
 * the router, its middlewares and the schema-driven encoding cost several times the check itself. It does what
 * the route does, in the same order (credentials from the headers, the body under the same size cap and pace, the
 * per-credential rate limit, the same strict schema, the same decision), and steps aside for anything else: a
 * request it does not take, or one that would not be answered 200, goes to the API unchanged (with its body as
 * already read, so nothing is read twice), which answers it as it always does, error body included.
 */
export const checkFastPath = Effect.gen(function*() {
  const credentials = yield* Credentials
  const enforcement = yield* Enforcement
  const rateLimit = yield* RateLimit
  const config = yield* AppConfig
  const pace = bodyPaceOf(config)
  const decode = Schema.decodeUnknownEither(EnforcementCheckRequest)

  /** The caller's principal from the headers, as the API's security schemes would find it; None: let the API say why not. */
  const principalOf = (request: HttpServerRequest.HttpServerRequest) => {
    const key = request.headers["x-service-key"]
    const authorization = request.headers.authorization
    if (key !== undefined && authorization === undefined) return Effect.option(credentials.cachedServiceKey(Redacted.make(key)))
    if (key === undefined && authorization !== undefined && /^bearer /i.test(authorization)) {
      return Effect.option(credentials.cachedBearer(Redacted.make(authorization.slice(7))))
    }
    return Effect.succeedNone
  }

  return <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R | HttpServerRequest.HttpServerRequest> =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      if (
        request.method !== "POST" || request.url !== ENFORCEMENT_CHECK_PATH || !isJson(request.headers["content-type"]) ||
        request.headers["content-length"] === undefined
      ) return app
      return Effect.flatMap(Effect.serviceOption(InternalIdentity), (internal) =>
        Option.isSome(internal) ? app : Effect.flatMap(principalOf(request), (principal) => {
          if (Option.isNone(principal)) return app
          // A body over the cap: the API refuses it the same way (nothing of it has been read).
          return Effect.flatMap(Effect.either(limitBody(request, config.maxBodyBytes, pace)), (limitedOrNot) => {
            if (Either.isLeft(limitedOrNot)) return app
            const limited = limitedOrNot.right
            const api = Effect.provideService(app, HttpServerRequest.HttpServerRequest, limited)
            return Effect.flatMap(Effect.either(limited.json), (json) => {
              if (Either.isLeft(json)) return api
              const payload = decode(json.right)
              if (Either.isLeft(payload)) return api
              const { accountId } = principal.value
              const liveKey = "liveKey" in principal.value ? principal.value.liveKey : undefined
              return rateLimit.pipe(
                Effect.provideService(CurrentPrincipal, principal.value),
                Effect.provideService(HttpRouter.RouteContext, CHECK_ROUTE),
                Effect.provideService(HttpServerRequest.ParsedSearchParams, {}),
                Effect.scoped,
                Effect.zipRight(enforcement.check(accountId, payload.right, liveKey ?? null)),
                Effect.matchEffect({
                  // Over the limit, or a key revoked meanwhile: the API answers it (429, 401) as it always does.
                  onFailure: () => api,
                  onSuccess: (decision) => Effect.succeed(HttpServerResponse.unsafeJson(decision))
                }),
                // Never handed to the API after a check began: it would decide (and maybe spend) a second time.
                Effect.catchAllDefect((defect) =>
                  Effect.as(Effect.logError("unhandled defect", Cause.die(defect)), INTERNAL_ERROR))
              )
            })
          })
        }))
    })
})

/** What the fast path needs, as the API builds it (the same layer values, so the same instances). */
export const CheckFastPathDependencies = Layer.mergeAll(Enforcement.Default, RateLimitLive).pipe(Layer.provide(SqlPolicyStoreLive))
