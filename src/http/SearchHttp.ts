import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Layer } from "effect"
import { Search } from "#layers/search/Search"
import { UsageCounters } from "#layers/usage/UsageCounters"
import { TapedeckApi } from "../api/Api.ts"
import { answerDomainErrors } from "../api/ErrorTable.ts"
import { CurrentPrincipal } from "../api/Security.ts"
import { SearchLive } from "#layers/search/SearchLive"

export const SearchHttpLive = HttpApiBuilder.group(TapedeckApi, "search", (handlers) =>
  Effect.gen(function*() {
    const search = yield* Search
    const usage = yield* UsageCounters
    return handlers.handle("search", ({ payload }) =>
      Effect.gen(function*() {
        const { accountId } = yield* CurrentPrincipal
        // Spans are rendered as GET /api/v1/traces/{id} renders them (extras as sent): no re-encoding.
        const result = yield* search.search(accountId, payload)
        yield* usage.increment(accountId, "search_queries") // usage: one upsert per answered search; never fails it
        return HttpServerResponse.unsafeJson(result)
      }).pipe(answerDomainErrors))
  })).pipe(Layer.provide([SearchLive, UsageCounters.Default]))
