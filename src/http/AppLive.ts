import { HttpApiBuilder, HttpMiddleware } from "@effect/platform"
import { Effect, Layer } from "effect"
import { bootstrapKeys } from "#layers/auth/KeyBootstrap"
import { AppConfig } from "#layers/config/AppConfig"
import { TerminalTraceConsumersNone, terminalTraceHandler, TERMINAL_TRACE_JOB } from "#layers/events/TerminalTraceHook"
import { JobHandlers } from "#layers/jobs/JobHandlers"
import { LlmClientLive } from "#layers/llm/OpenAiCompatibleLlm"
import { ModelPrices } from "#layers/llm/Prices"
import { FORK_REPLAY_JOB, Forks, forkReplayHandler } from "#layers/replay/Forks"
import { JobQueue } from "#layers/jobs/JobQueue"
import { JobWorkerLive } from "#layers/jobs/JobWorker"
import { AccountRepo } from "#layers/storage/AccountRepo"
import { ApiKeyRepo } from "#layers/storage/ApiKeyRepo"
import { describeStorage } from "#layers/storage/Sql"
import { TracingLive } from "#layers/telemetry/Tracing"
import { RetentionLive } from "#layers/traces/Retention"
import { TraceRepo } from "#layers/traces/TraceRepo"
import { ApiLive, DocsLive, ReplaySocketRouteLive } from "./HttpLive.ts"

const JobHandlersLive = Layer.effect(
  JobHandlers,
  Effect.gen(function*() {
    return new Map([
      [TERMINAL_TRACE_JOB, yield* terminalTraceHandler],
      [FORK_REPLAY_JOB, yield* forkReplayHandler]
    ])
  })
).pipe(
  Layer.provide(TerminalTraceConsumersNone),
  Layer.provide(Forks.Default),
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
  RetentionLive.pipe(Layer.provide(TraceRepo.Default))
)

/**
 * The application on an HttpServer: the API, its docs, key bootstrap and the background workers, over a
 * migrated `SqlClient` and `AppConfig` that the caller provides (main: `StorageLive`; tests share theirs).
 */
export const AppLive = HttpApiBuilder.serve(HttpMiddleware.logger).pipe(
  HttpMiddleware.withTracerDisabledWhen((request) => request.url === "/health"),
  Layer.provide(DocsLive),
  Layer.provide(ReplaySocketRouteLive),
  Layer.provide(ApiLive),
  Layer.provide(StartupLive),
  Layer.provide(TracingLive)
)
