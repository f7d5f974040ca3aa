import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Diagnostics } from "../domain/Search.ts"
import { Authentication, RateLimit } from "./Security.ts"

export class DiagnosticsApi extends HttpApiGroup.make("diagnostics")
  .add(
    HttpApiEndpoint.get("get", "/diagnostics")
      .addSuccess(Diagnostics)
      .annotate(
        OpenApi.Summary,
        "How this instance is set up: search embedder, vector index mode, pending indexing work"
      )
      .annotate(
        OpenApi.Description,
        "Which embedder the search uses, how vectors are indexed, and how many spans are waiting to be indexed, to check an installation's setup."
      )
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1") {}
