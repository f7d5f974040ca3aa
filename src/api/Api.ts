import { HttpApi, OpenApi } from "@effect/platform"
import { IngestBackpressureWire, InternalWire, NotFoundWire, UnavailableWire, ValidationFailedWire } from "./ApiErrors.ts"
import { EnforcementApi } from "./EnforcementApi.ts"
import { ForksApi } from "./ForksApi.ts"
import { JobsApi } from "./JobsApi.ts"
import { OtlpApi } from "./OtlpApi.ts"
import { SystemApi } from "./SystemApi.ts"
import { TracesApi } from "./TracesApi.ts"

export class TapedeckApi extends HttpApi.make("tapedeck")
  .add(SystemApi)
  .add(TracesApi)
  .add(ForksApi)
  .add(EnforcementApi)
  .add(JobsApi)
  .add(OtlpApi)
  .addError(ValidationFailedWire)
  .addError(NotFoundWire)
  .addError(InternalWire)
  .addError(IngestBackpressureWire)
  .addError(UnavailableWire)
  .annotate(OpenApi.Title, "Tapedeck API")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(OpenApi.Description, "Records, inspects, replays and evaluates AI agent executions.")
{}
