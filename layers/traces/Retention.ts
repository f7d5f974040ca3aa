import { Clock, Duration, Effect, Layer, Schedule } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import { waitWhileHeld } from "../jobs/Foreground.ts"
import { SharedContent } from "../storage/SharedContent.ts"
import { UsageCounters } from "../usage/UsageCounters.ts"
import { RetentionRepo } from "./RetentionRepo.ts"
import { TraceRepo } from "./TraceRepo.ts"

const BATCH = 500
const SWEEP_BATCH = 10_000
const RELEASE_BATCH = 5000
/** The longest the purge waits between two batches for checks under pressure: it still purges, slowly, under any load. */
const MAX_HOLD_MS = 5000

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

/**
 * Removes the traces older than their retention (per project, account, or TAPEDECK_RETENTION_DAYS), account by
 * account, in batches of TAPEDECK_RETENTION_BATCH_TRACES traces: each batch is one short statement, so writers
 * never wait long on it, followed by the release of the shared parts its spans referenced (releaseSharedContent),
 * a pause of TAPEDECK_RETENTION_PAUSE_RATIO times the two's duration, and a wait while enforcement checks are under
 * pressure (Foreground.waitWhileHeld, at most MAX_HOLD_MS). Counted in each account's usage
 * (retention_traces_purged, retention_spans_purged) and logged; the totals.
 */
export const purgeExpiredTraces = Effect.gen(function* () {
  const repo = yield* RetentionRepo
  const config = yield* AppConfig
  const counters = yield* UsageCounters
  const total = { traces: 0, spans: 0 }
  for (const policy of yield* repo.policies(config.retentionDays)) {
    const purged = { traces: 0, spans: 0 }
    while (true) {
      const started = yield* Clock.currentTimeMillis
      const batch = yield* repo.purgeExpired(policy, config.retentionBatchTraces)
      yield* releaseSharedContent
      purged.traces += batch.traces
      purged.spans += batch.spans
      if (batch.traces < config.retentionBatchTraces) break
      // The purge's writes (the deletes, the marks, their WAL) compete with ingestion's for the disk: paced, it
      // takes a bounded share of it however much has expired.
      const took = (yield* Clock.currentTimeMillis) - started
      if (config.retentionPauseRatio > 0) yield* Effect.sleep(Duration.millis(took * config.retentionPauseRatio))
      // Enforcement checks first: while they keep waiting, here or on another instance, the next batch waits too.
      yield* waitWhileHeld(MAX_HOLD_MS)
    }
    if (purged.traces === 0) continue
    yield* counters.increment(policy.accountId, "retention_traces_purged", purged.traces)
    yield* counters.increment(policy.accountId, "retention_spans_purged", purged.spans)
    yield* Effect.logInfo("purged expired traces", {
      accountId: policy.accountId,
      retentionDays: policy.days,
      ...purged
    })
    total.traces += purged.traces
    total.spans += purged.spans
  }
  return total
}).pipe(Effect.withSpan("Retention.purgeExpiredTraces"))

/**
 * Marks released the shared parts whose ids deletes recorded (`span_contents_released`: the retention purge's), up to
 * RELEASE_BATCH ids of one account a statement, until none are left but those other instances are draining; the
 * number of parts marked. What a process that died before marking left recorded is drained by the next call, on any
 * instance.
 */
export const releaseSharedContent = Effect.gen(function* () {
  const content = yield* SharedContent
  let marked = 0
  while (true) {
    const batch = yield* content.release(RELEASE_BATCH)
    marked += batch.marked
    if (batch.drained === 0) return marked
  }
}).pipe(Effect.withSpan("Retention.releaseSharedContent"))

/**
 * Marks what deletes recorded as released (releaseSharedContent), then deletes the shared parts released longer ago
 * than TAPEDECK_CONTENT_SWEEP_GRACE_SECONDS that no span references.
 */
export const sweepSharedContent = Effect.gen(function* () {
  const content = yield* SharedContent
  const config = yield* AppConfig
  yield* releaseSharedContent
  let deleted = 0
  while (true) {
    const batch = yield* content.sweep(config.contentSweepGraceSeconds, SWEEP_BATCH)
    deleted += batch.deleted
    // a short batch was the last; one where every part was skipped (locked or unmarked meanwhile) is left for later
    if (batch.seen < SWEEP_BATCH || batch.deleted + batch.kept === 0) return deleted
  }
}).pipe(Effect.withSpan("Retention.sweepSharedContent"))

/** Runs `batch` TAPEDECK_CONTENT_CONVERSION_BATCH rows at a time until it says none are left; the batches it ran. */
const batchesUntilDone = (name: string, batch: (content: SharedContent, size: number) => Effect.Effect<boolean>) =>
  Effect.gen(function* () {
    const content = yield* SharedContent
    const config = yield* AppConfig
    let batches = 0
    while (yield* batch(content, config.contentConversionBatch)) batches++
    return batches
  }).pipe(Effect.withSpan(name))

/** Converts spans stored before shared content, until none are left. */
export const convertStoredSpans = batchesUntilDone("Retention.convertStoredSpans", (c, n) => c.convertBatch(n))

/** Compresses parts stored plain (0045_packed_parts_sent), until none are left. */
export const packStoredParts = batchesUntilDone("Retention.packStoredParts", (c, n) => c.packBatch(n))

const logged = <A, E, R>(name: string, effect: Effect.Effect<A, E, R>) =>
  effect.pipe(Effect.catchAllCause((cause) => Effect.logWarning(`${name} failed`, cause)))

/**
 * Runs the purges and the sweep at start and then every TAPEDECK_RETENTION_INTERVAL_SECONDS on every instance (it is
 * safe to), and the conversion of spans stored before shared content once, then the compression of parts stored
 * plain, in the background, beside them.
 */
export const RetentionLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const config = yield* AppConfig
    yield* logged(
      "conversion of stored spans",
      convertStoredSpans.pipe(
        Effect.tap((n) =>
          n > 0 ? Effect.logInfo("converted stored spans to shared content", { batches: n }) : Effect.void
        )
      )
    ).pipe(
      // After the conversion: the parts it stored plain are compressed too.
      Effect.zipRight(
        logged(
          "compression of stored parts",
          packStoredParts.pipe(
            Effect.tap((n) => (n > 0 ? Effect.logInfo("compressed stored parts", { batches: n }) : Effect.void))
          )
        )
      ),
      Effect.forkScoped
    )
    yield* Effect.all(
      [
        logged(
          "retention purge",
          purgeDeletedTraces.pipe(
            Effect.tap((n) => (n > 0 ? Effect.logInfo("purged soft-deleted traces", { removed: n }) : Effect.void))
          )
        ),
        logged("retention purge of expired traces", purgeExpiredTraces),
        logged(
          "shared content sweep",
          sweepSharedContent.pipe(
            Effect.tap((n) => (n > 0 ? Effect.logInfo("swept released shared content", { deleted: n }) : Effect.void))
          )
        )
      ],
      { discard: true }
    ).pipe(Effect.repeat(Schedule.spaced(`${config.retentionIntervalSeconds} seconds`)), Effect.forkScoped)
  })
)
