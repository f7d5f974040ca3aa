import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { AccountRepo } from "#layers/storage/AccountRepo"
import { TapedeckApi } from "../api/Api.ts"
import { CurrentPrincipal } from "../api/Security.ts"

export const AccountHttpLive = HttpApiBuilder.group(TapedeckApi, "account", (handlers) =>
  Effect.gen(function* () {
    const accounts = yield* AccountRepo
    return handlers.handle("get", () =>
      Effect.gen(function* () {
        const { accountId } = yield* CurrentPrincipal
        // The principal was resolved from this account a moment ago, and accounts are never deleted.
        return yield* accounts.findById(accountId)
      })
    )
  })
).pipe(Layer.provide(AccountRepo.Default))
