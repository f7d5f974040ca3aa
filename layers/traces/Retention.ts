import { Effect, Layer, Schedule } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import { TraceRepo } from "./TraceRepo.ts"

const BATCH = 500

/** Removes every trace soft-deleted longer ago than the retention period, batch by batch; the number removed. */
export const purgeDeletedTraces = Effect.gen(function* () {
  const repo = yield* TraceRepo
  const config = yield* AppConfig
  let removed = 0
  while (true) {
    const n = yield* repo.purgeDeleted(config.retentionDaysDeleted, BATCH)
    removed += n
    if (n < BATCH) return removed
  }
}).pipe(Effect.withSpan("Retention.purgeDeletedTraces"))

/** Runs the purge at start and then every TAPEDECK_RETENTION_INTERVAL_SECONDS on every instance (it is safe to). */
export const RetentionLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const config = yield* AppConfig
    yield* purgeDeletedTraces.pipe(
      Effect.tap((n) => (n > 0 ? Effect.logInfo("purged soft-deleted traces", { removed: n }) : Effect.void)),
      Effect.catchAllCause((cause) => Effect.logWarning("retention purge failed", cause)),
      Effect.repeat(Schedule.spaced(`${config.retentionIntervalSeconds} seconds`)),
      Effect.forkScoped
    )
  })
)
