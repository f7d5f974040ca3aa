import { HttpApiBuilder, HttpApiScalar } from "@effect/platform"
import { Layer } from "effect"
import { Credentials } from "#layers/auth/Credentials"
import { IngestGate } from "#layers/ingest/IngestGate"
import { LlmClientLive } from "#layers/llm/OpenAiCompatibleLlm"
import { ModelPrices } from "#layers/llm/Prices"
import { Enforcement } from "#layers/enforcement/Enforcement"
import { GuardrailRepo } from "#layers/enforcement/GuardrailRepo"
import { SqlPolicyStoreLive } from "#layers/enforcement/SqlPolicyStore"
import { Forks } from "#layers/replay/Forks"
import { SdkReplay } from "#layers/replay/SdkReplay"
import { OtlpIngest } from "#layers/ingest/OtlpIngest"
import { JobQueue } from "#layers/jobs/JobQueue"
import { Traces } from "#layers/traces/Traces"
import { TapedeckApi } from "../api/Api.ts"
import { AuthenticationLive } from "./AuthenticationLive.ts"
import { ErrorBodiesLive } from "./ErrorBodies.ts"
import { IngestGateLive } from "./IngestGateMiddleware.ts"
import { EnforcementHttpLive } from "./EnforcementHttp.ts"
import { ForksHttpLive } from "./ForksHttp.ts"
import { ReplaySocketLive } from "./ReplaySocket.ts"
import { JobsHttpLive } from "./JobsHttp.ts"
import { OtlpHttpLive } from "./OtlpHttp.ts"
import { RateLimitLive } from "./RateLimitLive.ts"
import { SystemHttpLive } from "./SystemHttp.ts"
import { TracesHttpLive } from "./TracesHttp.ts"

/** The whole contract implemented: groups, API middleware, OpenAPI at /openapi.json and a reference at /docs. */
export const ApiLive = HttpApiBuilder.api(TapedeckApi).pipe(
  Layer.provide([SystemHttpLive, TracesHttpLive, ForksHttpLive, EnforcementHttpLive, JobsHttpLive, OtlpHttpLive, ErrorBodiesLive, IngestGateLive]),
  Layer.provide([AuthenticationLive, RateLimitLive]),
  Layer.provide([Traces.Default, JobQueue.Default, Credentials.Default, OtlpIngest.Default, IngestGate.Default, Forks.Default, Enforcement.Default, GuardrailRepo.Default]),
  Layer.provide(SqlPolicyStoreLive),
  Layer.provide([LlmClientLive, ModelPrices.Default])
)

/** The SDK replay socket, a raw route beside the contract (authenticated by the handler itself). */
export const ReplaySocketRouteLive = ReplaySocketLive.pipe(Layer.provide([Credentials.Default, SdkReplay.Default]))

/** The public documentation routes. */
export const DocsLive = Layer.mergeAll(
  HttpApiBuilder.middlewareOpenApi({ path: "/openapi.json" }),
  HttpApiScalar.layer({ path: "/docs" })
)
