import { Effect, Layer } from "effect"
import { TerminalTraceConsumersLive } from "#layers/evaluations/DetectionConsumers"
import { Evaluations, evaluationRunHandler, evaluationRunLostHandler } from "#layers/evaluations/Evaluations"
import { terminalTraceHandlers } from "#layers/events/TerminalTraceHook"
import { type JobRegistry, jobRegistryLive } from "#layers/jobs/JobHandlers"
import { Forks, forkReplayHandler } from "#layers/replay/Forks"
import { searchIndexHandler, searchReembedHandler } from "#layers/search/Search"
import { WebhookDelivery } from "#layers/webhooks/WebhookDelivery"
import { BatchJobDependencies, batchJobHandler } from "#src/http/BatchRunner"

/** What runs each kind of job (src/domain/Jobs.ts), with the services of its handlers (the ports come from AppLive). */
export const JobRegistryLive = jobRegistryLive(Effect.gen(function*() {
  const terminal = yield* terminalTraceHandlers
  return {
    // A burst of terminal traces (an OTLP export finishes up to a hundred) runs in batches, in a lane of its own.
    // Under a load that never pauses, indexing and the terminal lane (insights, eval rules, webhooks) trail the
    // requests by up to TAPEDECK_JOB_DEFER_SECONDS, then take their share: a burst does not pay for the work it causes.
    "trace.terminal": { run: terminal.single, batch: terminal.batch, deferrable: true },
    "search.index": { run: yield* searchIndexHandler, deferrable: true },
    "search.reembed": { run: yield* searchReembedHandler },
    // A fork replay left `replaying` is taken over by the next replay (ForkRepo.abandonStale); a batch's record is
    // its job. An evaluation run would stay running: it is failed.
    "fork.replay": { run: yield* forkReplayHandler },
    "evaluation.run": { run: yield* evaluationRunHandler, lost: yield* evaluationRunLostHandler },
    "webhook.deliver": { run: (yield* WebhookDelivery).handler },
    "batch.run": { run: yield* batchJobHandler }
  } satisfies JobRegistry
})).pipe(
  Layer.provide([BatchJobDependencies, TerminalTraceConsumersLive, WebhookDelivery.Default, Forks.Default, Evaluations.Default])
)
