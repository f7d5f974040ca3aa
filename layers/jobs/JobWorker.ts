import { Cause, Effect, Layer, Option } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import { JobFailed, JobHandlers } from "./JobHandlers.ts"
import { yieldToForeground } from "./Foreground.ts"
import { type ClaimedJob, JobQueue } from "./JobQueue.ts"

// A batch is never larger than what runs at once: every claimed job starts at once, so its lease (and the
// attempt timeout inside it) is measured from the claim.
const BATCH = 32
/** Under requests that never pause, the worker still claims a batch this often (it waits for gaps otherwise). */
const MAX_YIELD_MS = 1000

/**
 * Runs due jobs in the background of every instance. A full batch is followed at once by the next claim,
 * so the queue drains at the rate jobs finish; an empty or partial one waits TAPEDECK_JOB_POLL_MS.
 * Successes are recorded together, one statement a batch. A handler's failure, defect or timeout counts as
 * a failed attempt; claiming errors (the database is away) are logged and retried at the next poll. Requests come
 * first: a claim waits while this process answers requests (at most MAX_YIELD_MS), so a burst of ingestion is not
 * slowed by the terminal-trace and indexing work it causes; that work catches up in the gaps.
 */
export const JobWorkerLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const queue = yield* JobQueue
    const handlers = yield* JobHandlers
    const config = yield* AppConfig

    const runOne = (job: ClaimedJob) => {
      const handler = handlers.get(job.kind)
      const attempt = handler
        ? handler(job)
        : Effect.fail(new JobFailed({ reason: `no handler for job kind '${job.kind}'` }))
      return attempt.pipe(
        Effect.timeoutFail({
          duration: `${Math.max(1, config.jobLeaseSeconds - 5)} seconds`,
          onTimeout: () => new JobFailed({ reason: "attempt timed out" })
        }),
        Effect.matchCauseEffect({
          onSuccess: () => Effect.succeed(Option.some(job)),
          onFailure: (cause) => {
            const reason = Option.match(Cause.failureOption(cause), {
              onNone: () => "internal error",
              onSome: (e) => e.reason
            })
            return queue.fail(job, reason).pipe(
              Effect.zipRight(Effect.logWarning("job attempt failed", cause)),
              Effect.annotateLogs({ jobId: job.id, kind: job.kind, attempt: job.attempts }),
              Effect.as(Option.none<ClaimedJob>())
            )
          }
        }),
        Effect.withSpan("JobWorker.run", { attributes: { "job.kind": job.kind, "job.id": job.id } })
      )
    }

    /** Runs one batch; whether it was full (more may be due). */
    const runBatch = Effect.gen(function*() {
      // Background work shares the event loop with the requests: it waits for a gap in them.
      yield* yieldToForeground(MAX_YIELD_MS)
      const jobs = yield* queue.claim(BATCH)
      const done = yield* Effect.forEach(jobs, runOne, { concurrency: "unbounded" })
      yield* queue.completeAll(done.flatMap((job) => Option.toArray(job)))
      return jobs.length === BATCH
    }).pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("job poll failed", cause).pipe(Effect.as(false)))
    )

    yield* runBatch.pipe(
      Effect.repeat({ while: (full) => full }),
      Effect.zipRight(Effect.sleep(`${config.jobPollMs} millis`)),
      Effect.forever,
      Effect.forkScoped
    )
  })
)
