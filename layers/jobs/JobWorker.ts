import { Cause, Effect, Layer, Option, Schedule } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import { JobFailed, JobHandlers } from "./JobHandlers.ts"
import { type ClaimedJob, JobQueue } from "./JobQueue.ts"

const BATCH = 8

/**
 * Runs due jobs in the background of every instance. A handler's failure, defect or timeout counts as a
 * failed attempt; claiming errors (the database is away) are logged and retried at the next poll.
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
          onSuccess: () => queue.complete(job.id),
          onFailure: (cause) => {
            const reason = Option.match(Cause.failureOption(cause), {
              onNone: () => "internal error",
              onSome: (e) => e.reason
            })
            return queue.fail(job, reason).pipe(
              Effect.zipRight(Effect.logWarning("job attempt failed", cause)),
              Effect.annotateLogs({ jobId: job.id, kind: job.kind, attempt: job.attempts })
            )
          }
        }),
        Effect.withSpan("JobWorker.run", { attributes: { "job.kind": job.kind, "job.id": job.id } })
      )
    }

    const pollOnce = queue.claim(BATCH).pipe(
      Effect.flatMap((jobs) => Effect.forEach(jobs, runOne, { concurrency: BATCH, discard: true })),
      Effect.catchAllCause((cause) => Effect.logWarning("job poll failed", cause))
    )

    yield* pollOnce.pipe(
      Effect.repeat(Schedule.spaced(`${config.jobPollMs} millis`)),
      Effect.forkScoped
    )
  })
)
