import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Layer } from "effect"
import { Forks } from "#layers/replay/Forks"
import type { ForkNotFound } from "#src/domain/Fork"
import type { TraceNotFound } from "#src/domain/Trace"
import { NotFound, ReplayAllowanceExhausted, ReplayInProgress, ValidationFailed } from "../api/ApiErrors.ts"
import { TapedeckApi } from "../api/Api.ts"
import { CurrentPrincipal } from "../api/Security.ts"

const forkNotFound = (e: ForkNotFound) => new NotFound({ message: `fork ${e.forkId} not found` })
const traceNotFound = (e: TraceNotFound) => new NotFound({ message: `trace ${e.traceId} not found` })

/** The replay body is optional: nothing, or an empty JSON object. */
const emptyBody = (text: string) => {
  const trimmed = text.trim()
  if (trimmed === "") return true
  try {
    const value = JSON.parse(trimmed)
    return typeof value === "object" && value !== null && !Array.isArray(value) && Object.keys(value).length === 0
  } catch {
    return false
  }
}

export const ForksHttpLive = HttpApiBuilder.group(TapedeckApi, "forks", (handlers) =>
  Effect.gen(function*() {
    const forks = yield* Forks
    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return HttpServerResponse.unsafeJson(yield* forks.list(accountId, urlParams.limit, urlParams.offset))
        }))
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return HttpServerResponse.unsafeJson(yield* forks.create(accountId, payload))
        }).pipe(Effect.catchTags({
          TraceNotFound: traceNotFound,
          ForkPointNotInTrace: (e) =>
            new ValidationFailed({ message: `fork_point_span_id: ${e.spanId} is not a span of the trace` })
        })))
      .handle("get", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return HttpServerResponse.unsafeJson(yield* forks.get(accountId, path.forkId))
        }).pipe(Effect.catchTags({ ForkNotFound: forkNotFound })))
      .handle("replay", ({ path, request }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          const hasBody = request.headers["content-length"] !== undefined || request.headers["transfer-encoding"] !== undefined
          const text = hasBody ? yield* request.text.pipe(Effect.orElseSucceed(() => "invalid")) : ""
          if (!emptyBody(text)) return yield* new ValidationFailed({ message: "the replay body must be empty or {}" })
          return yield* forks.replay(accountId, path.forkId)
        }).pipe(Effect.catchTags({
          ForkNotFound: forkNotFound,
          ReplayAlreadyActive: (e) => new ReplayInProgress({ message: `fork ${e.forkId} is already replaying` }),
          ReplayQuotaExceeded: (e) =>
            new ReplayAllowanceExhausted({
              message: `the monthly fork-replay allowance (${e.allowance}) is exhausted for ${e.month}`
            })
        })))
  })).pipe(Layer.provide(Forks.Default))
