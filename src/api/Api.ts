import { HttpApi, OpenApi } from "@effect/platform"
import { InternalWire, NotFoundWire, ValidationFailedWire } from "./ApiErrors.ts"
import { JobsApi } from "./JobsApi.ts"
import { SystemApi } from "./SystemApi.ts"
import { TracesApi } from "./TracesApi.ts"

export class TapedeckApi extends HttpApi.make("tapedeck")
  .add(SystemApi)
  .add(TracesApi)
  .add(JobsApi)
  .addError(ValidationFailedWire)
  .addError(NotFoundWire)
  .addError(InternalWire)
  .annotate(OpenApi.Title, "Tapedeck API")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(OpenApi.Description, "Records, inspects, replays and evaluates AI agent executions.")
{}
