import { HttpApiBuilder, HttpApiScalar } from "@effect/platform"
import { Layer } from "effect"
import { Credentials } from "#layers/auth/Credentials"
import { IngestGate } from "#layers/ingest/IngestGate"
import { LlmClientLive } from "#layers/llm/OpenAiCompatibleLlm"
import { ModelPrices } from "#layers/llm/Prices"
import { Enforcement } from "#layers/enforcement/Enforcement"
import { Evaluations } from "#layers/evaluations/Evaluations"
import { GuardrailRepo } from "#layers/enforcement/GuardrailRepo"
import { SqlPolicyStoreLive } from "#layers/enforcement/SqlPolicyStore"
import { Forks } from "#layers/replay/Forks"
import { SdkReplay } from "#layers/replay/SdkReplay"
import { OtlpIngest } from "#layers/ingest/OtlpIngest"
import { OtlpPreparer } from "#layers/ingest/OtlpPreparer"
import { JobQueue } from "#layers/jobs/JobQueue"
import { Traces } from "#layers/traces/Traces"
import { TapedeckApi } from "../api/Api.ts"
import { AuthenticationLive, LangfuseAuthenticationLive } from "./AuthenticationLive.ts"
import { ErrorBodiesLive } from "./ErrorBodies.ts"
import { IngestGateLive } from "./IngestGateMiddleware.ts"
import { EnforcementHttpLive } from "./EnforcementHttp.ts"
import { EvaluationsHttpLive } from "./EvaluationsHttp.ts"
import { EvalRulesHttpLive } from "./EvalRulesHttp.ts"
import { InsightsHttpLive } from "./InsightsHttp.ts"
import { EvalRules } from "#layers/evaluations/EvalRules"
import { InsightRepo } from "#layers/evaluations/InsightRepo"
import { ForksHttpLive } from "./ForksHttp.ts"
import { ReplaySocketLive } from "./ReplaySocket.ts"
import { StreamSocketLive } from "./StreamSocket.ts"
import { McpHttpLive } from "./McpHttp.ts"
import { StudioHttpLive } from "./StudioHttp.ts"
import { StreamHub } from "#layers/stream/StreamHub"
import { AppConfig } from "#layers/config/AppConfig"
import { JobsHttpLive } from "./JobsHttp.ts"
import { AccountHttpLive } from "./AccountHttp.ts"
import { ApiKeysHttpLive } from "./ApiKeysHttp.ts"
import { BatchHttpLive } from "./BatchHttp.ts"
import { DiscoveryHttpLive } from "./DiscoveryHttp.ts"
import { SessionsHttpLive } from "./SessionsHttp.ts"
import { UsageHttpLive } from "./UsageHttp.ts"
import { RetentionHttpLive } from "./RetentionHttp.ts"
import { UsageCounters } from "#layers/usage/UsageCounters"
import { ApiKeyRepo } from "#layers/storage/ApiKeyRepo"
import { LangfuseOtlpHttpLive, OtlpHttpLive } from "./OtlpHttp.ts"
import { RateLimitLive } from "./RateLimitLive.ts"
import { SystemHttpLive } from "./SystemHttp.ts"
import { TracesHttpLive } from "./TracesHttp.ts"
import { SearchHttpLive } from "./SearchHttp.ts"
import { DiagnosticsHttpLive } from "./DiagnosticsHttp.ts"
import { SearchLive } from "#layers/search/SearchLive"

/** The whole contract implemented: groups, API middleware, OpenAPI at /openapi.json and a reference at /docs. */
export const ApiLive = HttpApiBuilder.api(TapedeckApi).pipe(
  Layer.provide([SystemHttpLive, TracesHttpLive, ForksHttpLive, EnforcementHttpLive, EvaluationsHttpLive, JobsHttpLive, OtlpHttpLive, LangfuseOtlpHttpLive, ErrorBodiesLive, IngestGateLive]),
  Layer.provide([EvalRulesHttpLive, InsightsHttpLive]),
  Layer.provide([SessionsHttpLive, UsageHttpLive, BatchHttpLive, ApiKeysHttpLive, DiscoveryHttpLive, AccountHttpLive]),
  Layer.provide(RetentionHttpLive),
  Layer.provide([EvalRules.Default, InsightRepo.Default]),
  Layer.provide([SearchHttpLive, DiagnosticsHttpLive]),
  Layer.provide(SearchLive),
  Layer.provide([UsageCounters.Default, ApiKeyRepo.Default]),
  Layer.provide([AuthenticationLive, LangfuseAuthenticationLive, RateLimitLive]),
  Layer.provide([Traces.Default, JobQueue.Default, Credentials.Default, OtlpIngest.Default, OtlpPreparer.Default, IngestGate.Default, Forks.Default, Enforcement.Default, Evaluations.Default, GuardrailRepo.Default]),
  Layer.provide(SqlPolicyStoreLive),
  Layer.provide([LlmClientLive, ModelPrices.Default])
)

/** The SDK replay socket, a raw route beside the contract (authenticated by the handler itself). */
export const ReplaySocketRouteLive = ReplaySocketLive.pipe(Layer.provide([Credentials.Default, SdkReplay.Default]))

/** The live span stream socket, a raw route (authenticated by the handler itself). */
export const StreamSocketRouteLive = StreamSocketLive.pipe(Layer.provide([Credentials.Default, StreamHub.Default, AppConfig.Default]))

/** The MCP endpoints, raw routes: /mcp (authenticated by the handler, tools over the services) and /mcp/docs. */
export const McpRouteLive = McpHttpLive.pipe(
  Layer.provide([Credentials.Default, Traces.Default, Forks.Default, Enforcement.Default, Evaluations.Default, GuardrailRepo.Default, SearchLive]),
  Layer.provide(UsageCounters.Default),
  Layer.provide(SqlPolicyStoreLive),
  Layer.provide([LlmClientLive, ModelPrices.Default])
)

/** Tapedeck Studio: the web UI's shell and assets (public; its data comes from the API with the user's key). */
export const StudioRouteLive = StudioHttpLive

/** The public documentation routes. */
export const DocsLive = Layer.mergeAll(
  HttpApiBuilder.middlewareOpenApi({ path: "/openapi.json" }),
  HttpApiScalar.layer({ path: "/docs" })
)
