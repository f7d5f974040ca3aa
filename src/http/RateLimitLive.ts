import { RateLimiter } from "@effect/experimental"
import { HttpApp, HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Context, Duration, Effect, Layer, Option } from "effect"
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
  Effect.gen(function* () {
    const limiter = yield* RateLimiter.RateLimiter
    const { rateLimitPerMinute } = yield* AppConfig
    // Parsed once, not on every request.
    const window = Duration.minutes(1)
    const exceeded = (e: RateLimiter.RateLimiterError) => {
      const seconds = e.reason === "Exceeded" ? retryAfterSeconds(e.retryAfter) : 1
      return setRetryAfter(seconds).pipe(Effect.zipRight(Effect.fail(rateLimited(seconds))))
    }
    // Every authenticated request passes here: one read of the context, no generator.
    return Effect.contextWithEffect(
      (context: Context.Context<HttpRouter.RouteContext | HttpServerRequest.HttpServerRequest>) => {
        const principal = Context.getOption(context, CurrentPrincipal)
        if (Option.isNone(principal)) return Effect.void
        const route = Context.get(context, HttpRouter.RouteContext)
        const request = Context.get(context, HttpServerRequest.HttpServerRequest)
        return limiter
          .consume({
            key: `${principal.value.credentialId}:${request.method} ${route.route.path}`,
            limit: rateLimitPerMinute,
            window,
            onExceeded: "fail"
          })
          .pipe(Effect.asVoid, Effect.catchTag("RateLimiterError", exceeded))
      }
    )
  })
).pipe(Layer.provide(RateLimiter.layer), Layer.provide(RateLimiter.layerStoreMemory))
