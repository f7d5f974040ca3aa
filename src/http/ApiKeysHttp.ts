import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { Credentials } from "#layers/auth/Credentials"
import { generateKey } from "#layers/auth/KeyMaterial"
import { ApiKeyRepo } from "#layers/storage/ApiKeyRepo"
import { MAX_LIVE_KEYS_PER_ACCOUNT } from "#src/domain/ApiKey"
import { Conflict, NotFound } from "../api/ApiErrors.ts"
import { TapedeckApi } from "../api/Api.ts"
import { CurrentPrincipal } from "../api/Security.ts"

export const ApiKeysHttpLive = HttpApiBuilder.group(TapedeckApi, "apiKeys", (handlers) =>
  Effect.gen(function*() {
    const keys = yield* ApiKeyRepo
    const credentials = yield* Credentials
    return handlers
      .handle("list", () =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return { items: yield* keys.listLive(accountId) }
        }))
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          const key = yield* generateKey
          const created = yield* keys.insertLimited(accountId, key, payload.name, MAX_LIVE_KEYS_PER_ACCOUNT)
          if (Option.isNone(created)) {
            return yield* new Conflict({
              message: `the account already has ${MAX_LIVE_KEYS_PER_ACCOUNT} live API keys; revoke one first`
            })
          }
          // Never cached: the response is the only place the key ever appears.
          return HttpServerResponse.unsafeJson({ ...created.value, key }, { headers: { "cache-control": "no-store" } })
        }))
      .handle("revoke", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          const revoked = yield* keys.revokeOwned(accountId, path.keyId)
          if (Option.isNone(revoked)) return yield* new NotFound({ message: `API key ${path.keyId} not found` })
          yield* credentials.forgetKey(revoked.value)
          return { id: path.keyId, revoked: true as const }
        }))
  })).pipe(Layer.provide(ApiKeyRepo.Default))
