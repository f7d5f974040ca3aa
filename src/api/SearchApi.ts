import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { SearchRequest, SearchResult } from "../domain/Search.ts"
import { Authentication, RateLimit } from "./Security.ts"

export class SearchApi extends HttpApiGroup.make("search")
  .add(
    HttpApiEndpoint.post("search", "/search")
      .setPayload(SearchRequest)
      .addSuccess(SearchResult)
      .annotate(
        OpenApi.Summary,
        "The account's spans ranked by hybrid retrieval: full-text and embedding-similarity candidates fused by reciprocal rank"
      )
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1")
{}
