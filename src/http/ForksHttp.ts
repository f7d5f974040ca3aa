import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Layer } from "effect"
import { Forks } from "#layers/replay/Forks"
import { ValidationFailed } from "../api/ApiErrors.ts"
import { TapedeckApi } from "../api/Api.ts"
import { answerDomainErrors } from "../api/ErrorTable.ts"
import { CurrentPrincipal } from "../api/Security.ts"

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
        }).pipe(answerDomainErrors))
      .handle("get", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return HttpServerResponse.unsafeJson(yield* forks.get(accountId, path.forkId))
        }).pipe(answerDomainErrors))
      .handle("replay", ({ path, request }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          const hasBody = request.headers["content-length"] !== undefined || request.headers["transfer-encoding"] !== undefined
          const text = hasBody ? yield* request.text.pipe(Effect.orElseSucceed(() => "invalid")) : ""
          if (!emptyBody(text)) return yield* new ValidationFailed({ message: "the replay body must be empty or {}" })
          return yield* forks.replay(accountId, path.forkId)
        }).pipe(answerDomainErrors))
  })).pipe(Layer.provide(Forks.Default))
