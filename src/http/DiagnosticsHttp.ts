import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { Search } from "#layers/search/Search"
import { TapedeckApi } from "../api/Api.ts"
import { CurrentPrincipal } from "../api/Security.ts"
import { SearchLive } from "#layers/search/SearchLive"

export const DiagnosticsHttpLive = HttpApiBuilder.group(TapedeckApi, "diagnostics", (handlers) =>
  Effect.gen(function*() {
    const search = yield* Search
    return handlers.handle("get", () =>
      Effect.gen(function*() {
        const { accountId } = yield* CurrentPrincipal
        return yield* search.diagnostics(accountId)
      }))
  })).pipe(Layer.provide(SearchLive))
