import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { UsageReport } from "#layers/usage/UsageReport"
import { TapedeckApi } from "../api/Api.ts"
import { CurrentPrincipal } from "../api/Security.ts"

export const UsageHttpLive = HttpApiBuilder.group(TapedeckApi, "usage", (handlers) =>
  Effect.gen(function* () {
    const usage = yield* UsageReport
    return handlers.handle("get", ({ urlParams }) =>
      Effect.gen(function* () {
        const { accountId } = yield* CurrentPrincipal
        return yield* usage.forMonth(accountId, urlParams.month)
      })
    )
  })
).pipe(Layer.provide(UsageReport.Default))
