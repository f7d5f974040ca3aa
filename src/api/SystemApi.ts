import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Health } from "../domain/Health.ts"

/** Public routes: no authentication, no rate limit. */
export class SystemApi extends HttpApiGroup.make("system").add(
  HttpApiEndpoint.get("health", "/health")
    .addSuccess(Health)
    .annotate(OpenApi.Summary, "Liveness and version; no authentication")
    .annotate(
      OpenApi.Description,
      "Answers 200 with the service version while the process is up; it does not query the database. Use it for load-balancer and container liveness checks."
    )
) {}
