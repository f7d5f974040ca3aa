import { RateLimiter } from "@effect/experimental"
import { HttpApp, HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Duration, Effect, Layer, Option } from "effect"
import { AppConfig } from "#layers/config/AppConfig"
import { rateLimited } from "../api/ApiErrors.ts"
import { CurrentPrincipal, RateLimit } from "../api/Security.ts"

export const retryAfterSeconds = (d: Duration.DurationInput) => Math.max(1, Math.ceil(Duration.toSeconds(d)))

/** Sets `Retry-After` on whatever response this request ends with (the error body included). */
export const setRetryAfter = (seconds: number) =>
  HttpApp.appendPreResponseHandler((_request, response) =>
    Effect.succeed(HttpServerResponse.setHeader(response, "retry-after", String(seconds)))
  )

/**
 * TAPEDECK_RATE_LIMIT_PER_MINUTE requests per credential and route, in a fixed one-minute window.
 * Counters live in each instance's memory: with N instances a credential may get up to N times the limit.
 */
export const RateLimitLive = Layer.effect(
  RateLimit,
  Effect.gen(function*() {
    const limiter = yield* RateLimiter.RateLimiter
    const { rateLimitPerMinute } = yield* AppConfig
    return Effect.gen(function*() {
      const principal = yield* Effect.serviceOption(CurrentPrincipal)
      if (Option.isNone(principal)) return
      const route = yield* HttpRouter.RouteContext
      const request = yield* HttpServerRequest.HttpServerRequest
      yield* limiter.consume({
        key: `${principal.value.credentialId}:${request.method} ${route.route.path}`,
        limit: rateLimitPerMinute,
        window: "1 minute",
        onExceeded: "fail"
      }).pipe(
        Effect.catchTag("RateLimiterError", (e) => {
          const seconds = e.reason === "Exceeded" ? retryAfterSeconds(e.retryAfter) : 1
          return setRetryAfter(seconds).pipe(
            Effect.zipRight(Effect.fail(rateLimited(seconds)))
          )
        })
      )
    })
  })
).pipe(Layer.provide(RateLimiter.layer), Layer.provide(RateLimiter.layerStoreMemory))
