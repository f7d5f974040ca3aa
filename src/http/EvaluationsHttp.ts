import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Layer } from "effect"
import { Evaluations } from "#layers/evaluations/Evaluations"
import { TapedeckApi } from "../api/Api.ts"
import { answerDomainErrors } from "../api/ErrorTable.ts"
import { CurrentPrincipal } from "../api/Security.ts"

export const EvaluationsHttpLive = HttpApiBuilder.group(TapedeckApi, "evaluations", (handlers) =>
  Effect.gen(function*() {
    const evaluations = yield* Evaluations
    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return HttpServerResponse.unsafeJson(yield* evaluations.list(accountId, urlParams.limit, urlParams.offset))
        }))
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return HttpServerResponse.unsafeJson(yield* evaluations.create(accountId, payload))
        }))
      .handle("get", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return HttpServerResponse.unsafeJson(yield* evaluations.get(accountId, path.evaluationId))
        }).pipe(answerDomainErrors))
      .handle("remove", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          yield* evaluations.remove(accountId, path.evaluationId)
          return { deleted: true as const }
        }).pipe(answerDomainErrors))
      .handle("run", ({ path, payload }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return HttpServerResponse.unsafeJson(yield* evaluations.run(accountId, path.evaluationId, payload))
        }).pipe(answerDomainErrors))
      .handle("gate", ({ path, payload }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return HttpServerResponse.unsafeJson(yield* evaluations.gate(accountId, path.evaluationId, payload))
        }).pipe(answerDomainErrors))
  })).pipe(Layer.provide(Evaluations.Default))
