import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Layer } from "effect"
import { SessionRepo } from "#layers/sessions/SessionRepo"
import { NotFound } from "../api/ApiErrors.ts"
import { TapedeckApi } from "../api/Api.ts"
import { CurrentPrincipal } from "../api/Security.ts"
import type { SessionNotFound } from "#src/domain/Errors"

const notFound = (e: SessionNotFound) => new NotFound({ message: `session ${JSON.stringify(e.sessionId)} not found` })

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
        }).pipe(Effect.catchTags({ SessionNotFound: notFound })))
      .handle("graph", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return HttpServerResponse.unsafeJson(yield* sessions.graph(accountId, urlParams.env ?? "production", path.sessionId))
        }).pipe(Effect.catchTags({ SessionNotFound: notFound })))
  })).pipe(Layer.provide(SessionRepo.Default))
