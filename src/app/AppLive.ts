import { HttpApiBuilder, HttpMiddleware, HttpRouter } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { bootstrapKeys } from "#layers/auth/KeyBootstrap"
import { AppConfig } from "#layers/config/AppConfig"
import { IngestGate } from "#layers/ingest/IngestGate"
import { Credentials } from "#layers/auth/Credentials"
import { JobQueue } from "#layers/jobs/JobQueue"
import { JobWorkerLive } from "#layers/jobs/JobWorker"
import { AccountRepo } from "#layers/storage/AccountRepo"
import { ApiKeyRepo } from "#layers/storage/ApiKeyRepo"
import { EmbeddedMaintenanceLive } from "#layers/storage/EmbeddedMaintenance"
import { describeStorage } from "#layers/storage/Sql"
import { TracingLive } from "#layers/telemetry/Tracing"
import { RetentionLive } from "#layers/traces/Retention"
import { TraceRepo } from "#layers/traces/TraceRepo"
import { SearchStartupLive } from "#layers/search/Search"
import { SearchDependenciesLive } from "#layers/search/SearchLive"
import { accessLog } from "#src/http/AccessLog"
import { MAX_PATH_PARAM_LENGTH } from "#src/http/ErrorBodies"
import { RequestSummary, RequestSummaryLogLive } from "#src/http/RequestSummary"
import { isExport, refuseWhileSaturated } from "#src/http/IngestGateMiddleware"
import { otlpProtobufAnswers } from "#src/http/OtlpResponses"
import { ApiLive, DocsLive, McpRouteLive, ReplaySocketRouteLive, StreamSocketRouteLive, StudioRouteLive } from "./ApiLive.ts"
import { OtlpOtherSignalsLive } from "#src/http/OtlpOtherSignals"
import { SelfAppInstallLive } from "#src/http/BatchRunner"
import { JobRegistryLive } from "./JobRegistry.ts"

/** Runs once storage is migrated, before the server answers: configured keys, then background work. */
const StartupLive = Layer.mergeAll(
  Layer.effectDiscard(
    Effect.gen(function*() {
      const config = yield* AppConfig
      yield* Effect.logInfo(`storage: ${describeStorage(config)}`)
      yield* bootstrapKeys
    })
  ).pipe(Layer.provide([AccountRepo.Default, ApiKeyRepo.Default])),
  JobWorkerLive.pipe(Layer.provide([JobQueue.Default, JobRegistryLive])),
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
  const config = yield* AppConfig
  const exporting = Option.isSome(config.telemetryEndpoint)
  const logged = accessLog({ log: config.accessLog, summary: yield* RequestSummary })
  // A protobuf export is answered in protobuf, its refusals included (OtlpResponses).
  return HttpApiBuilder.serve((app) => otlpProtobufAnswers(refuseFast(logged(app)))).pipe(
    // Health probes are noise; a WebSocket lives for hours, and its URL may carry a browser's ?token=; an export
    // refused by the fast path is counted by the gate.
    HttpMiddleware.withTracerDisabledWhen((request) =>
      !exporting || request.url === "/health" || request.url.startsWith("/ws/") || (gate.saturated() && isExport(request))
    )
  )
})).pipe(
  // The same gate instance as the API middleware's (IngestGate.Default is one layer value, built once).
  Layer.provide([IngestGate.Default, Credentials.Default]),
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
