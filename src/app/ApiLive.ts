import { HttpApiBuilder, HttpApiScalar } from "@effect/platform"
import { Effect, Layer } from "effect"
import { McpHttpLive } from "#src/http/McpHttp"
import { apiWithGuardrailTypes } from "#src/api/Api"
import { GuardrailTypes } from "#layers/extensions/GuardrailTypes"
import { AccountHttpLive } from "#src/http/AccountHttp"
import { ApiKeysHttpLive } from "#src/http/ApiKeysHttp"
import { AuthenticationLive, LangfuseAuthenticationLive } from "#src/http/AuthenticationLive"
import { BatchHttpLive } from "#src/http/BatchHttp"
import { DiagnosticsHttpLive } from "#src/http/DiagnosticsHttp"
import { DiscoveryHttpLive } from "#src/http/DiscoveryHttp"
import { EnforcementHttpLive } from "#src/http/EnforcementHttp"
import { ErrorBodiesLive } from "#src/http/ErrorBodies"
import { EvalRulesHttpLive } from "#src/http/EvalRulesHttp"
import { EvaluationsHttpLive } from "#src/http/EvaluationsHttp"
import { ForksHttpLive } from "#src/http/ForksHttp"
import { IngestGateLive } from "#src/http/IngestGateMiddleware"
import { InsightsHttpLive } from "#src/http/InsightsHttp"
import { JobsHttpLive } from "#src/http/JobsHttp"
import { LangfuseOtlpHttpLive, OtlpHttpLive } from "#src/http/OtlpHttp"
import { RateLimitLive } from "#src/http/RateLimitLive"
import { ReplaySocketLive } from "#src/http/ReplaySocket"
import { SearchHttpLive } from "#src/http/SearchHttp"
import { SessionsHttpLive } from "#src/http/SessionsHttp"
import { StreamSocketLive } from "#src/http/StreamSocket"
import { StudioHttpLive } from "#src/http/StudioHttp"
import { SystemHttpLive } from "#src/http/SystemHttp"
import { TracesHttpLive } from "#src/http/TracesHttp"
import { UsageHttpLive } from "#src/http/UsageHttp"
import { RetentionHttpLive } from "#src/http/RetentionHttp"
import { Enforcement } from "#layers/enforcement/Enforcement"
import { GuardrailRepo } from "#layers/enforcement/GuardrailRepo"
import { Evaluations } from "#layers/evaluations/Evaluations"
import { Forks } from "#layers/replay/Forks"
import { SdkReplay } from "#layers/replay/SdkReplay"
import { SearchLive } from "#layers/search/SearchLive"
import { Traces } from "#layers/traces/Traces"
import { UsageCounters } from "#layers/usage/UsageCounters"
import { StreamHub } from "#layers/stream/StreamHub"

/**
 * The whole contract implemented: every group (each provides its own services), the API middleware, OpenAPI at
 * /openapi.json and a reference at /docs. What groups share (storage, configuration, credentials, the model and
 * policy ports) comes from the application below (AppLive).
 */
export const ApiLive = Layer.unwrapEffect(
  // The contract with the installed guardrail types' params (apiWithGuardrailTypes): what /openapi.json shows.
  Effect.map(GuardrailTypes, (types) => HttpApiBuilder.api(apiWithGuardrailTypes(types)))
).pipe(
  Layer.provide([
    SystemHttpLive,
    TracesHttpLive,
    ForksHttpLive,
    EnforcementHttpLive,
    EvaluationsHttpLive,
    EvalRulesHttpLive,
    InsightsHttpLive,
    JobsHttpLive,
    OtlpHttpLive,
    LangfuseOtlpHttpLive,
    SessionsHttpLive,
    UsageHttpLive,
    RetentionHttpLive,
    BatchHttpLive,
    ApiKeysHttpLive,
    DiscoveryHttpLive,
    AccountHttpLive,
    SearchHttpLive,
    DiagnosticsHttpLive,
    ErrorBodiesLive,
    IngestGateLive
  ]),
  Layer.provide([AuthenticationLive, LangfuseAuthenticationLive, RateLimitLive])
)

/** The routes beside the contract: the sockets and MCP (each authenticates by itself), Studio and the docs. */
export const RoutesLive = Layer.mergeAll(
  ReplaySocketLive.pipe(Layer.provide(SdkReplay.Default)),
  StreamSocketLive.pipe(Layer.provide(StreamHub.Default)),
  McpHttpLive.pipe(
    Layer.provide([
      Traces.Default,
      Forks.Default,
      Enforcement.Default,
      Evaluations.Default,
      GuardrailRepo.Default,
      SearchLive,
      UsageCounters.Default
    ])
  ),
  StudioHttpLive,
  HttpApiBuilder.middlewareOpenApi({ path: "/openapi.json" }),
  HttpApiScalar.layer({ path: "/docs" })
)
