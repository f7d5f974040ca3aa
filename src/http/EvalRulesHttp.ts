import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { EvalRules } from "#layers/evaluations/EvalRules"
import { TapedeckApi } from "../api/Api.ts"
import { answerDomainErrors } from "../api/ErrorTable.ts"
import { CurrentPrincipal } from "../api/Security.ts"

export const EvalRulesHttpLive = HttpApiBuilder.group(TapedeckApi, "evalRules", (handlers) =>
  Effect.gen(function*() {
    const rules = yield* EvalRules
    return handlers
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return yield* rules.create(accountId, payload)
        }).pipe(answerDomainErrors))
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return yield* rules.list(accountId, urlParams.limit, urlParams.offset)
        }))
      .handle("get", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return yield* rules.get(accountId, path.id)
        }).pipe(answerDomainErrors))
      .handle("remove", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return yield* rules.remove(accountId, path.id)
        }).pipe(answerDomainErrors))
      .handle("deliveries", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return yield* rules.deliveries(accountId, path.id, urlParams.limit, urlParams.offset)
        }).pipe(answerDomainErrors))
  })).pipe(Layer.provide(EvalRules.Default))
