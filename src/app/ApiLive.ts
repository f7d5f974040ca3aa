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
import { TapedeckApi } from "#src/api/Api"
import { AuthenticationLive, LangfuseAuthenticationLive } from "#src/http/AuthenticationLive"
import { ErrorBodiesLive } from "#src/http/ErrorBodies"
import { IngestGateLive } from "#src/http/IngestGateMiddleware"
import { EnforcementHttpLive } from "#src/http/EnforcementHttp"
import { EvaluationsHttpLive } from "#src/http/EvaluationsHttp"
import { EvalRulesHttpLive } from "#src/http/EvalRulesHttp"
import { InsightsHttpLive } from "#src/http/InsightsHttp"
import { EvalRules } from "#layers/evaluations/EvalRules"
import { InsightRepo } from "#layers/evaluations/InsightRepo"
import { ForksHttpLive } from "#src/http/ForksHttp"
import { ReplaySocketLive } from "#src/http/ReplaySocket"
import { StreamSocketLive } from "#src/http/StreamSocket"
import { McpHttpLive } from "#src/http/McpHttp"
import { StudioHttpLive } from "#src/http/StudioHttp"
import { StreamHub } from "#layers/stream/StreamHub"
import { AppConfig } from "#layers/config/AppConfig"
import { JobsHttpLive } from "#src/http/JobsHttp"
import { AccountHttpLive } from "#src/http/AccountHttp"
import { ApiKeysHttpLive } from "#src/http/ApiKeysHttp"
import { BatchHttpLive } from "#src/http/BatchHttp"
import { DiscoveryHttpLive } from "#src/http/DiscoveryHttp"
import { SessionsHttpLive } from "#src/http/SessionsHttp"
import { UsageHttpLive } from "#src/http/UsageHttp"
import { UsageCounters } from "#layers/usage/UsageCounters"
import { ApiKeyRepo } from "#layers/storage/ApiKeyRepo"
import { LangfuseOtlpHttpLive, OtlpHttpLive } from "#src/http/OtlpHttp"
import { RateLimitLive } from "#src/http/RateLimitLive"
import { SystemHttpLive } from "#src/http/SystemHttp"
import { TracesHttpLive } from "#src/http/TracesHttp"
import { SearchHttpLive } from "#src/http/SearchHttp"
import { DiagnosticsHttpLive } from "#src/http/DiagnosticsHttp"
import { SearchLive } from "#layers/search/SearchLive"

/** The whole contract implemented: groups, API middleware, OpenAPI at /openapi.json and a reference at /docs. */
export const ApiLive = HttpApiBuilder.api(TapedeckApi).pipe(
  Layer.provide([SystemHttpLive, TracesHttpLive, ForksHttpLive, EnforcementHttpLive, EvaluationsHttpLive, JobsHttpLive, OtlpHttpLive, LangfuseOtlpHttpLive, ErrorBodiesLive, IngestGateLive]),
  Layer.provide([EvalRulesHttpLive, InsightsHttpLive]),
  Layer.provide([SessionsHttpLive, UsageHttpLive, BatchHttpLive, ApiKeysHttpLive, DiscoveryHttpLive, AccountHttpLive]),
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
