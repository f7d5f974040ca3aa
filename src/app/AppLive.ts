import { HttpApiBuilder, HttpMiddleware, HttpRouter } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { Credentials } from "#layers/auth/Credentials"
import { bootstrapKeys } from "#layers/auth/KeyBootstrap"
import { AppConfig } from "#layers/config/AppConfig"
import { CheckPressure } from "#layers/enforcement/CheckPressure"
import { ClusterPressureLive } from "#layers/enforcement/ClusterPressure"
import { SqlPolicyStoreLive } from "#layers/enforcement/SqlPolicyStore"
import { IngestGate } from "#layers/ingest/IngestGate"
import { JobQueue } from "#layers/jobs/JobQueue"
import { JobWorkerLive } from "#layers/jobs/JobWorker"
import { LlmClientLive } from "#layers/llm/OpenAiCompatibleLlm"
import { ModelPrices } from "#layers/llm/Prices"
import { SearchStartupLive } from "#layers/search/Search"
import { SearchDependenciesLive } from "#layers/search/SearchLive"
import { AccountRepo } from "#layers/storage/AccountRepo"
import { ApiKeyRepo } from "#layers/storage/ApiKeyRepo"
import { EmbeddedMaintenanceLive } from "#layers/storage/EmbeddedMaintenance"
import { describeStorage } from "#layers/storage/Sql"
import { TracingLive } from "#layers/telemetry/Tracing"
import { RetentionLive } from "#layers/traces/Retention"
import { TraceRepo } from "#layers/traces/TraceRepo"
import { RetentionRepo } from "#layers/traces/RetentionRepo"
import { SharedContent } from "#layers/storage/SharedContent"
import { UsageCounters } from "#layers/usage/UsageCounters"
import { Enforcement } from "#layers/enforcement/Enforcement"
import { accessLog } from "#src/http/AccessLog"
import { enforcementCheckRoute } from "#src/http/EnforcementCheckRoute"
import { RateLimits } from "#src/http/RateLimitLive"
import { SelfAppInstallLive } from "#src/http/BatchRunner"
import { MAX_PATH_PARAM_LENGTH } from "#src/http/ErrorBodies"
import { isExport, refuseWhileSaturated } from "#src/http/IngestGateMiddleware"
import { OtlpOtherSignalsLive } from "#src/http/OtlpOtherSignals"
import { otlpProtobufAnswers } from "#src/http/OtlpResponses"
import { RequestSummary, RequestSummaryLogLive } from "#src/http/RequestSummary"
import { ApiLive, RoutesLive } from "./ApiLive.ts"
import { JobRegistryLive } from "./JobRegistry.ts"

/**
 * What the parts of the application share, built once: credentials, the ingest gate (the fast path's and the API
 * middleware's are one instance), the model client and its prices, the policy store, search's embedder and index.
 */
const SharedLive = Layer.mergeAll(
  Credentials.Default,
  IngestGate.Default,
  LlmClientLive,
  ModelPrices.Default,
  SqlPolicyStoreLive,
  SearchDependenciesLive
)

/** Runs once storage is migrated, before the server answers: configured keys, then background work. */
const StartupLive = Layer.mergeAll(
  Layer.effectDiscard(
    Effect.gen(function* () {
      yield* Effect.logInfo(`storage: ${describeStorage(yield* AppConfig)}`)
      yield* bootstrapKeys
    })
  ).pipe(Layer.provide([AccountRepo.Default, ApiKeyRepo.Default])),
  JobWorkerLive.pipe(Layer.provide([JobQueue.Default, JobRegistryLive])),
  RetentionLive.pipe(
    Layer.provide([TraceRepo.Default, RetentionRepo.Default, SharedContent.Default, UsageCounters.Default])
  ),
  EmbeddedMaintenanceLive,
  SearchStartupLive,
  ClusterPressureLive.pipe(Layer.provide(CheckPressure.Default))
)

/** The server's own front: the fast refusal of exports while ingestion is saturated, the access log, tracing. */
const ServeLive = Layer.unwrapEffect(
  Effect.gen(function* () {
    const gate = yield* IngestGate
    const refuseFast = refuseWhileSaturated(gate, yield* Credentials)
    const config = yield* AppConfig
    // Without an exporter (TracingLive) a request's span goes nowhere, but building it still costs the request: its
    // URL parsed, headers redacted, the peer's address asked of the socket (docs/performance.md, "Figures behind
    // choices in the code").
    const exporting = Option.isSome(config.telemetryEndpoint)
    const logged = accessLog({ log: config.accessLog, summary: yield* RequestSummary })
    // The enforcement check's lean route, in front of the router (docs/architecture.md, "The check's lean route").
    const checks = yield* enforcementCheckRoute
    // A protobuf export is answered in protobuf, its refusals included (OtlpResponses).
    return HttpApiBuilder.serve((app) => otlpProtobufAnswers(refuseFast(logged(checks(app))))).pipe(
      // Health probes are noise; a WebSocket lives for hours, and its URL may carry a browser's ?token=; an export
      // refused by the fast path is counted by the gate.
      HttpMiddleware.withTracerDisabledWhen(
        (request) =>
          !exporting ||
          request.url === "/health" ||
          request.url.startsWith("/ws/") ||
          (isExport(request) && gate.saturated())
      )
    )
  })
).pipe(Layer.provide(RequestSummaryLogLive.pipe(Layer.provideMerge(RequestSummary.Default))))

/**
 * The application on an HttpServer: the API and the routes beside it, key bootstrap and the background workers,
 * over a migrated `SqlClient` and `AppConfig` that the caller provides (main: `StorageLive`; tests share theirs).
 */
export const AppLive = ServeLive.pipe(
  Layer.provide([RoutesLive, OtlpOtherSignalsLive]),
  Layer.provide(SelfAppInstallLive), // the API's own HttpApp, for batch operations: built once ApiLive below is
  Layer.provide(ApiLive),
  // The lean check route's services: the very instances the API's endpoint and middleware use (layers are shared
  // within one build), so one batcher and one set of rate-limit counters serve both.
  Layer.provide([Enforcement.Default, RateLimits.Default]),
  Layer.provide(StartupLive),
  Layer.provide(SharedLive),
  Layer.provide(TracingLive),
  // The router refuses a path parameter over 100 characters as "no route" (a 404) before any validation; let
  // the routes' own schemas judge it (a 101-character session id is a 400).
  Layer.provide(HttpRouter.setRouterConfig({ maxParamLength: MAX_PATH_PARAM_LENGTH }))
)
