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
      .annotate(
        OpenApi.Description,
        "Finds spans whose inputs, outputs, names and errors are close in meaning to the query, optionally filtered by project, model, span type, status, dates, cost or duration. Each hit carries its trace id and score. Spans are indexed shortly after they are written."
      )
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1") {}
