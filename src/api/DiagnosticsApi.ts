import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Diagnostics } from "../domain/Search.ts"
import { Authentication, RateLimit } from "./Security.ts"

export class DiagnosticsApi extends HttpApiGroup.make("diagnostics")
  .add(
    HttpApiEndpoint.get("get", "/diagnostics")
      .addSuccess(Diagnostics)
      .annotate(OpenApi.Summary, "How this instance is set up: search embedder, vector index mode, pending indexing work")
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1")
{}
