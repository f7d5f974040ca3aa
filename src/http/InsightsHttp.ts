import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { InsightRepo } from "#layers/evaluations/InsightRepo"
import { TapedeckApi } from "../api/Api.ts"
import { CurrentPrincipal } from "../api/Security.ts"

export const InsightsHttpLive = HttpApiBuilder.group(TapedeckApi, "insights", (handlers) =>
  Effect.gen(function*() {
    const insights = yield* InsightRepo
    return handlers.handle("list", ({ urlParams }) =>
      Effect.gen(function*() {
        const { accountId } = yield* CurrentPrincipal
        return yield* insights.list(accountId, urlParams)
      }))
  })).pipe(Layer.provide(InsightRepo.Default))
