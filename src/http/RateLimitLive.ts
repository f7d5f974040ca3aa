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
 * TAPEDECK_RATE_LIMIT_PER_MINUTE requests per credential and route, in a fixed one-minute window: the one step both
 * the API's RateLimit middleware and the enforcement check's lean route (EnforcementCheckRoute) take, over one set of
 * counters. Counters live in each instance's memory: with N instances a credential may get up to N times the limit.
 */
export class RateLimits extends Effect.Service<RateLimits>()("tapedeck/RateLimits", {
  effect: Effect.gen(function* () {
    // The limiter's own store (its counters), asked directly: RateLimiter.consume decodes and divides the window and
    // builds a result of Durations on every call, for a figure this route only compares (the check's hot path).
    const store = yield* RateLimiter.RateLimiterStore
    const { rateLimitPerMinute } = yield* AppConfig
    // As RateLimiter.consume's "fixed-window": each request pushes the counter's expiry on by window ÷ limit.
    const window = Duration.minutes(1)
    const refillRate = Duration.unsafeDivide(window, Math.max(1, rateLimitPerMinute))
    const exceeded = (ttlMillis: number) => {
      const seconds = retryAfterSeconds(Duration.millis(ttlMillis))
      return setRetryAfter(seconds).pipe(Effect.zipRight(Effect.fail(rateLimited(seconds))))
    }
    /** One request of `credentialId` on the route (`method` and the route's path); 429 with `Retry-After` past the limit. */
    const consume = (credentialId: string, method: string, routePath: string) =>
      // A limit under one request refuses every request for a whole window, as RateLimiter does.
      rateLimitPerMinute < 1
        ? exceeded(Duration.toMillis(window))
        : Effect.matchEffect(
            store.fixedWindow({
              key: `${credentialId}:${method} ${routePath}`,
              tokens: 1,
              refillRate,
              limit: rateLimitPerMinute
            }),
            {
              // The store failing (the memory store never does) refuses for a second, as RateLimiter's error did.
              onFailure: () => exceeded(1000),
              onSuccess: ([count, ttlMillis]) => (count > rateLimitPerMinute ? exceeded(ttlMillis) : Effect.void)
            }
          )
    return { consume } as const
  }),
  dependencies: [RateLimiter.layerStoreMemory]
}) {}

/** The API's RateLimit middleware over RateLimits: the principal's credential and the matched route. */
export const RateLimitLive = Layer.effect(
  RateLimit,
  Effect.map(RateLimits, (limits) =>
    // Every authenticated request passes here: one read of the context, no generator.
    Effect.contextWithEffect(
      (context: Context.Context<HttpRouter.RouteContext | HttpServerRequest.HttpServerRequest>) => {
        const principal = Context.getOption(context, CurrentPrincipal)
        if (Option.isNone(principal)) return Effect.void
        const route = Context.get(context, HttpRouter.RouteContext)
        const request = Context.get(context, HttpServerRequest.HttpServerRequest)
        return limits.consume(principal.value.credentialId, request.method, route.route.path)
      }
    )
  )
).pipe(Layer.provide(RateLimits.Default))
