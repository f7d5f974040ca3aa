import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { EvalRules } from "#layers/evaluations/EvalRules"
import type { EvalRuleNotFound } from "#src/domain/EvalRule"
import { NotFound, ValidationFailed } from "../api/ApiErrors.ts"
import { TapedeckApi } from "../api/Api.ts"
import { CurrentPrincipal } from "../api/Security.ts"

const ruleNotFound = (e: EvalRuleNotFound) => new NotFound({ message: `eval rule ${e.ruleId} not found` })

export const EvalRulesHttpLive = HttpApiBuilder.group(TapedeckApi, "evalRules", (handlers) =>
  Effect.gen(function*() {
    const rules = yield* EvalRules
    return handlers
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return yield* rules.create(accountId, payload)
        }).pipe(Effect.catchTags({
          RuleEvaluationNotFound: (e) => new NotFound({ message: `evaluation ${e.evaluationId} not found` }),
          WebhookUrlRefused: (e) => new ValidationFailed({ message: `webhook_url: ${e.reason}` })
        })))
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return yield* rules.list(accountId, urlParams.limit, urlParams.offset)
        }))
      .handle("get", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return yield* rules.get(accountId, path.id)
        }).pipe(Effect.catchTags({ EvalRuleNotFound: ruleNotFound })))
      .handle("remove", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return yield* rules.remove(accountId, path.id)
        }).pipe(Effect.catchTags({ EvalRuleNotFound: ruleNotFound })))
      .handle("deliveries", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return yield* rules.deliveries(accountId, path.id, urlParams.limit, urlParams.offset)
        }).pipe(Effect.catchTags({ EvalRuleNotFound: ruleNotFound })))
  })).pipe(Layer.provide(EvalRules.Default))
