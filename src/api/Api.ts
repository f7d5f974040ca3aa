import { HttpApi, OpenApi } from "@effect/platform"
import {
  IngestBackpressureWire,
  InternalWire,
  NotFoundWire,
  RequestTimeoutWire,
  UnavailableWire,
  ValidationFailedWire
} from "./ApiErrors.ts"
import { EnforcementApi } from "./EnforcementApi.ts"
import { EvalRulesApi } from "./EvalRulesApi.ts"
import { InsightsApi } from "./InsightsApi.ts"
import { EvaluationsApi } from "./EvaluationsApi.ts"
import { ForksApi } from "./ForksApi.ts"
import { JobsApi } from "./JobsApi.ts"
import { AccountApi } from "./AccountApi.ts"
import { ApiKeysApi } from "./ApiKeysApi.ts"
import { BatchApi } from "./BatchApi.ts"
import { DiscoveryApi } from "./DiscoveryApi.ts"
import { SessionsApi } from "./SessionsApi.ts"
import { UsageApi } from "./UsageApi.ts"
import { LangfuseOtlpApi, OtlpApi } from "./OtlpApi.ts"
import { SystemApi } from "./SystemApi.ts"
import { TracesApi } from "./TracesApi.ts"
import { SearchApi } from "./SearchApi.ts"
import { DiagnosticsApi } from "./DiagnosticsApi.ts"

export class TapedeckApi extends HttpApi.make("tapedeck")
  .add(SystemApi)
  .add(TracesApi)
  .add(ForksApi)
  .add(EnforcementApi)
  .add(JobsApi)
  .add(SessionsApi)
  .add(UsageApi)
  .add(BatchApi)
  .add(ApiKeysApi)
  .add(AccountApi)
  .add(DiscoveryApi)
  .add(OtlpApi)
  .add(LangfuseOtlpApi)
  .add(EvaluationsApi)
  .add(EvalRulesApi)
  .add(InsightsApi)
  .add(SearchApi)
  .add(DiagnosticsApi)
  .addError(ValidationFailedWire)
  .addError(NotFoundWire)
  .addError(InternalWire)
  .addError(IngestBackpressureWire)
  .addError(UnavailableWire)
  .addError(RequestTimeoutWire)
  .annotate(OpenApi.Title, "Tapedeck API")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(OpenApi.Description, "Records, inspects, replays and evaluates AI agent executions.")
{}
