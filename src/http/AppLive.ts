import { HttpApiBuilder, HttpMiddleware, HttpRouter } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { bootstrapKeys } from "#layers/auth/KeyBootstrap"
import { AppConfig } from "#layers/config/AppConfig"
import { EVALUATION_RUN_JOB, Evaluations, evaluationRunHandler, evaluationRunLostHandler } from "#layers/evaluations/Evaluations"
import { terminalTraceHandlers, TERMINAL_TRACE_JOB } from "#layers/events/TerminalTraceHook"
import { TerminalTraceConsumersLive } from "#layers/evaluations/DetectionConsumers"
import { WebhookDelivery } from "#layers/webhooks/WebhookDelivery"
import { WEBHOOK_DELIVER_JOB } from "#src/domain/Webhook"
import { DeferrableJobKinds, JobBatchHandlers, JobHandlers, LostJobHandlers } from "#layers/jobs/JobHandlers"
import { LlmClientLive } from "#layers/llm/OpenAiCompatibleLlm"
import { ModelPrices } from "#layers/llm/Prices"
import { FORK_REPLAY_JOB, Forks, forkReplayHandler } from "#layers/replay/Forks"
import { IngestGate } from "#layers/ingest/IngestGate"
import { Credentials } from "#layers/auth/Credentials"
import { JobQueue } from "#layers/jobs/JobQueue"
import { JobWorkerLive } from "#layers/jobs/JobWorker"
import { AccountRepo } from "#layers/storage/AccountRepo"
import { ApiKeyRepo } from "#layers/storage/ApiKeyRepo"
import { EmbeddedMaintenanceLive } from "#layers/storage/EmbeddedMaintenance"
import { describeStorage } from "#layers/storage/Sql"
import { selfTelemetryEndpoint, TracingLive } from "#layers/telemetry/Tracing"
import { RetentionLive } from "#layers/traces/Retention"
import { TraceRepo } from "#layers/traces/TraceRepo"
import { SEARCH_INDEX_JOB, SEARCH_REEMBED_JOB, SearchStartupLive, searchIndexHandler, searchReembedHandler } from "#layers/search/Search"
import { SearchDependenciesLive } from "#layers/search/SearchLive"
import { accessLog } from "./AccessLog.ts"
import { checkFastPath, CheckFastPathDependencies } from "./CheckFastPath.ts"
import { MAX_PATH_PARAM_LENGTH } from "./ErrorBodies.ts"
import { RequestSummary, RequestSummaryLogLive } from "./RequestSummary.ts"
import { isExport, refuseWhileSaturated } from "./IngestGateMiddleware.ts"
import { otlpProtobufAnswers } from "./OtlpResponses.ts"
import { ApiLive, DocsLive, McpRouteLive, ReplaySocketRouteLive, StreamSocketRouteLive, StudioRouteLive } from "./HttpLive.ts"
import { OtlpOtherSignalsLive } from "./OtlpOtherSignals.ts"
import { BATCH_JOB } from "#layers/batch/BatchRepo"
import { BatchJobDependencies, batchJobHandler, SelfAppInstallLive } from "./BatchHttp.ts"

const JobHandlersLive = Layer.mergeAll(
  Layer.effect(
    JobHandlers,
    Effect.gen(function*() {
      return new Map([
        [TERMINAL_TRACE_JOB, (yield* terminalTraceHandlers).single],
        [FORK_REPLAY_JOB, yield* forkReplayHandler],
        [EVALUATION_RUN_JOB, yield* evaluationRunHandler],
        [WEBHOOK_DELIVER_JOB, (yield* WebhookDelivery).handler],
        [BATCH_JOB, yield* batchJobHandler],
        [SEARCH_INDEX_JOB, yield* searchIndexHandler],
        [SEARCH_REEMBED_JOB, yield* searchReembedHandler]
      ])
    })
  ),
  // A fork replay left `replaying` is taken over by the next replay (ForkRepo.abandonStale); a batch's record is its
  // job. An evaluation run would stay running: it is failed.
  Layer.effect(LostJobHandlers, Effect.map(evaluationRunLostHandler, (settle) => new Map([[EVALUATION_RUN_JOB, settle]]))),
  // A burst of terminal traces (an OTLP export finishes up to a hundred) runs in batches, in a lane of its own.
  Layer.effect(JobBatchHandlers, Effect.map(terminalTraceHandlers, ({ batch }) => new Map([[TERMINAL_TRACE_JOB, batch]]))),
  // Under a load that never pauses, indexing and the terminal lane (insights, eval rules, webhooks) trail the requests
  // by up to TAPEDECK_JOB_DEFER_SECONDS, then take their share: a burst does not pay for the work it causes.
  Layer.succeed(DeferrableJobKinds, new Set([SEARCH_INDEX_JOB, TERMINAL_TRACE_JOB]))
).pipe(
  Layer.provide(BatchJobDependencies),
  Layer.provide(SearchDependenciesLive),
  Layer.provide(TerminalTraceConsumersLive),
  Layer.provide(WebhookDelivery.Default),
  Layer.provide(Forks.Default),
  Layer.provide(Evaluations.Default),
  Layer.provide([LlmClientLive, ModelPrices.Default])
)

/** Runs once storage is migrated, before the server answers: configured keys, then background work. */
const StartupLive = Layer.mergeAll(
  Layer.effectDiscard(
    Effect.gen(function*() {
      const config = yield* AppConfig
      yield* Effect.logInfo(`storage: ${describeStorage(config)}`)
      yield* bootstrapKeys
    })
  ).pipe(Layer.provide([AccountRepo.Default, ApiKeyRepo.Default])),
  JobWorkerLive.pipe(Layer.provide([JobQueue.Default, JobHandlersLive])),
  RetentionLive.pipe(Layer.provide(TraceRepo.Default)),
  EmbeddedMaintenanceLive,
  SearchStartupLive.pipe(Layer.provide(SearchDependenciesLive))
)

/**
 * The application on an HttpServer: the API, its docs, key bootstrap and the background workers, over a
 * migrated `SqlClient` and `AppConfig` that the caller provides (main: `StorageLive`; tests share theirs).
 */
export const AppLive = Layer.unwrapEffect(Effect.gen(function*() {
  const gate = yield* IngestGate
  const refuseFast = refuseWhileSaturated(gate, yield* Credentials)
  // Without an exporter (TracingLive) a request's span goes nowhere, but building it still costs the request: its
  // URL parsed, headers redacted, the peer's address asked of the socket (about 40 µs in Bun alone).
  const exporting = Option.isSome(yield* selfTelemetryEndpoint)
  const logged = accessLog({ log: (yield* AppConfig).accessLog, summary: yield* RequestSummary })
  const checks = yield* checkFastPath
  // A protobuf export is answered in protobuf, its refusals included (OtlpResponses).
  return HttpApiBuilder.serve((app) => otlpProtobufAnswers(refuseFast(logged(checks(app))))).pipe(
    // Health probes are noise; a WebSocket lives for hours, and its URL may carry a browser's ?token=; an export
    // refused by the fast path is counted by the gate.
    HttpMiddleware.withTracerDisabledWhen((request) =>
      !exporting || request.url === "/health" || request.url.startsWith("/ws/") || (gate.saturated() && isExport(request))
    )
  )
})).pipe(
  // The same gate instance as the API middleware's (IngestGate.Default is one layer value, built once).
  Layer.provide([IngestGate.Default, Credentials.Default, CheckFastPathDependencies]),
  Layer.provide(RequestSummaryLogLive.pipe(Layer.provideMerge(RequestSummary.Default))),
  Layer.provide(DocsLive),
  Layer.provide(ReplaySocketRouteLive),
  Layer.provide(StreamSocketRouteLive),
  Layer.provide(McpRouteLive),
  Layer.provide(StudioRouteLive),
  Layer.provide(OtlpOtherSignalsLive),
  Layer.provide(SelfAppInstallLive), // the API's own HttpApp, for batch operations (needs ApiLive below)
  Layer.provide(ApiLive),
  Layer.provide(StartupLive),
  Layer.provide(TracingLive),
  // The router refuses a path parameter over 100 characters as "no route" (a 404) before any validation; let
  // the routes' own schemas judge it (a 101-character session id is a 400).
  Layer.provide(HttpRouter.setRouterConfig({ maxParamLength: MAX_PATH_PARAM_LENGTH }))
)
