import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Health } from "../domain/Health.ts"

/** Public routes: no authentication, no rate limit. */
export class SystemApi extends HttpApiGroup.make("system")
  .add(
    HttpApiEndpoint.get("health", "/health")
      .addSuccess(Health)
      .annotate(OpenApi.Summary, "Liveness and version; no authentication")
  )
{}
