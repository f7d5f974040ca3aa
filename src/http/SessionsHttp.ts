import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Layer } from "effect"
import { SessionRepo } from "#layers/sessions/SessionRepo"
import { TapedeckApi } from "../api/Api.ts"
import { answerDomainErrors } from "../api/ErrorTable.ts"
import { CurrentPrincipal } from "../api/Security.ts"

export const SessionsHttpLive = HttpApiBuilder.group(TapedeckApi, "sessions", (handlers) =>
  Effect.gen(function*() {
    const sessions = yield* SessionRepo
    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          const env = urlParams.env ?? "production"
          return HttpServerResponse.unsafeJson(yield* sessions.list(accountId, env, urlParams.limit, urlParams.offset))
        }))
      .handle("get", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          const env = urlParams.env ?? "production"
          return HttpServerResponse.unsafeJson(
            yield* sessions.get(accountId, env, path.sessionId, urlParams.limit, urlParams.offset)
          )
        }).pipe(answerDomainErrors))
      .handle("graph", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return HttpServerResponse.unsafeJson(yield* sessions.graph(accountId, urlParams.env ?? "production", path.sessionId))
        }).pipe(answerDomainErrors))
  })).pipe(Layer.provide(SessionRepo.Default))
